"""How well a Wordle adapter reads one board: letter-level clue use on many single boards.

    python examples/wordle_board_probe.py runs/wordle-cpu/grpo/checkpoints/step_000006/adapter --recap

Full games show clue use only after a valid guess, which a model that cannot yet spell rarely
makes. This probe asks for one guess on each of ``--words`` x ``--samples`` boards of the
*training* split's last words, with 1-4 random words pre-played (``PriorGuesses``), served as
the CPU recipe serves (``examples/train_wordle_cpu.py``: its preset, system prompt, format
prefill, ``--guess-form`` and ``--recap``), and scores every five-letter guess, a word or not,
with :func:`mtrl_gym.envs.wordle.play_metrics.letter_clues` against a random allowed word on
the same board: greens kept, grays avoided, yellows used, all clues at once, with Wilson 95 %
intervals. ``--adapter none`` probes the base model. Results: ``OUT/probe.json`` and stdout.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import re
from pathlib import Path

from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.play_metrics import LETTER_CLUES, board_consistent, letter_clues, wilson_interval
from mtrl_gym.evaluation import EvalConfig, RunSpec, evaluate, read_records
from mtrl_gym.evaluation.serving import system_prompt_file
from mtrl_gym.trainers.grpo.config import GRPOConfig
from mtrl_gym.trainers.grpo.data import load_task_splits
from mtrl_gym.wrappers import PriorGuesses

_spec = importlib.util.spec_from_file_location("train_wordle_cpu", Path(__file__).with_name("train_wordle_cpu.py"))
recipe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recipe)

PRIOR = re.compile(r"^Guess \d/\d: ([A-Z]{5}) - ", re.MULTILINE)  # PriorGuesses' first observation


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("adapter", help="the LoRA adapter folder, or 'none' for the base model")
    p.add_argument("--guess-form", choices=recipe.GUESS_FORMS, default="spelled", help="as the adapter was trained")
    p.add_argument("--recap", action="store_true", help="the adapter was trained with --recap")
    p.add_argument("--temperatures", default="0.5,1.0", help="comma-separated (default 0.5,1.0)")
    p.add_argument("--words", type=int, default=128, help="the training split's last words (default 128)")
    p.add_argument("--samples", type=int, default=2, help="boards a word, each with its own pre-played words")
    p.add_argument("--out", default="runs/board-probe", help="output folder (default runs/board-probe)")
    args = p.parse_args(argv)
    if args.words < 1 or args.samples < 1:
        p.error(f"--words and --samples take a number >= 1, got {args.words} and {args.samples}")
    return args


def score(records, answers: dict[str, str]) -> dict:
    """Letter-level clue use of the one guess of each record (as the env read it: ``info["guess"]``
    of its one step), beside a random allowed word."""
    counts = {"boards": 0, "five_letters": 0, "valid": 0, "consistent": 0}
    follows = {k: [0, 0, 0.0] for k in LETTER_CLUES}  # followed, boards with that clue, random share summed
    for record in records:
        secret = answers[record["task_id"]]
        first = next(m["content"] for m in record["messages"] if m["role"] == "user")
        board = [(w.lower(), game.pattern_code(game.feedback(w.lower(), secret))) for w in PRIOR.findall(first)]
        guess = (record.get("final_info") or {}).get("guess")  # letters a-z, unspelled; absent: no guess read
        counts["boards"] += 1
        if guess is None or len(guess) != game.WORD_LENGTH:
            continue
        counts["five_letters"] += 1
        counts["valid"] += guess in game.allowed_index()
        counts["consistent"] += board_consistent(guess, board)
        for name, ok, chance in zip(LETTER_CLUES, *letter_clues(board, guess)):
            if ok is not None:
                follows[name][0] += ok
                follows[name][1] += 1
                follows[name][2] += chance
    out = dict(counts)
    for name, (k, n, chance) in follows.items():
        low, high = wilson_interval(k, n)
        out[name] = {"followed": k, "boards": n, "rate": k / n if n else 0.0, "low": low, "high": high,
                     "random": chance / n if n else 0.0}
    return out


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    config = recipe.with_guess_form(GRPOConfig.load("cpu-sft"), args.guess_form)
    if args.recap:
        config = recipe.with_recap(config)  # a serving wrapper: the run's serving settings carry it
    train, _ = load_task_splits(config.env, config.train_tasks, None, train_size=config.train_size,
                                val_size=config.val_size, split_seed=config.split_seed)
    rows = train[-args.words:]
    answers = {row["id"]: row["answer"] for row in rows}
    boards = functools.partial(PriorGuesses, num_priors=(1, 4), policy="random")
    prompt = config.env_wrappers[0]["kwargs"]
    results = {}
    for t in [float(x) for x in args.temperatures.split(",")]:
        folder = Path(args.out) / f"T{t:g}"
        spec = RunSpec("probe", model=config.model, adapter=None if args.adapter == "none" else args.adapter,
                       serving=config.serving.replace(temperature=t, tools=prompt["tools"],
                                                      system_prompt=system_prompt_file(prompt["text"], folder)))
        evaluate(config.env, [spec], out_dir=folder, report=False, resume=True, tasks=rows,
                 config=EvalConfig(n=args.samples, seed=1234, max_turns=1, batch_tasks=16, wrappers=[boards]))
        r = results[f"{t:g}"] = score(read_records(folder / "trajectories" / "probe.jsonl"), answers)
        print(f"T={t:g}: {r['boards']} boards, five letters {r['five_letters']}, valid {r['valid']}, fits every clue "
              f"{r['consistent']}; " + "; ".join(
                  f"{name.replace('_', ' ')} {c['followed']}/{c['boards']} = {c['rate']:.1%} [{c['low']:.1%}, "
                  f"{c['high']:.1%}] (random word {c['random']:.1%})" for name in LETTER_CLUES for c in [r[name]]),
              flush=True)
    Path(args.out, "probe.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
