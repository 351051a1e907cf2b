"""Teach SmolLM2-135M-Instruct to make valid Wordle guesses, on a 2-core CPU, in ~30 minutes.

    python examples/train_wordle_cpu.py                          # the full recipe
    python examples/train_wordle_cpu.py --max-steps 2 --eval-tasks 8 --out runs/quick   # a quick look

One file, top to bottom, no hidden steps:

1. **Before**: play the 128 held-out validation words with the base model, as full 6-guess
   games, with the recipe's system prompt, format prefill and stop string, one sample per
   word at temperature 1.0 (``mtrl_gym.eval.evaluate``; scored by the bare environment, not
   by the shaping used for training).
2. **Train**: GRPO with LoRA on the training words, with the ``cpu`` preset
   (``mtrl_gym/trainers/grpo/presets/cpu.yaml`` says why each setting is what it is): one
   guess per episode, 0-3 earlier solver guesses already on the board, partial-credit
   shaping. Every ``val_every`` steps the trainer also measures held-out first guesses (the
   curve).
3. **After**: the same evaluation as step 1 with the trained adapter: same words, same
   reset seeds, same sampling settings.
4. **Report**: ``results.json`` (every number below), ``curve.png`` (training and held-out
   curves with the before/after levels) and the run folder (checkpoints, ``metrics.jsonl``,
   sampled trajectories, MLflow run if ``--tracker mlflow``).

The headline metric is the **new-word rate**: the fraction of the model's turns, in full
games, whose guess is a real 5-letter word not guessed before in that game (repeats count
as valid actions for the env, so the evaluation's valid-guess rate, also reported, would
credit a model that plays the same word six times). The base model starts at 0 %; winning
games is far beyond a 135M model here, and we report the solve rate and outcome reward
too, whatever they are.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import mtrl_gym  # noqa: F401  (registers the environments)
from mtrl_gym.eval import EvalConfig, RunSpec, evaluate, read_records
from mtrl_gym.trainers.grpo.config import GRPOConfig
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer
from mtrl_gym.wrappers import SystemPrompt


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/wordle-cpu", help="output folder (default: runs/wordle-cpu)")
    p.add_argument("--max-steps", type=int, default=None, help="GRPO steps (default: the preset's)")
    p.add_argument("--eval-tasks", type=int, default=128, help="held-out words evaluated before/after (max 128)")
    p.add_argument("--eval-samples", type=int, default=1, help="games per held-out word (default: 1)")
    p.add_argument("--tracker", default="none", choices=["none", "mlflow"], help="MLflow logging (default: none)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run in --out (finished evaluations are read back)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a GRPOConfig field of the preset, e.g. --set learning_rate=3e-4 (repeatable)")
    return p.parse_args()


def held_out_eval(config: GRPOConfig, out: Path, *, adapter: str | None, tasks: int, samples: int) -> dict:
    """Full 6-guess games on the first ``tasks`` validation words, served like training:
    the same system prompt (the preset's SystemPrompt wrapper, without tool schemas), format
    prefill, stop string, temperature and token limit."""
    prompt = config.env_wrappers[0]["kwargs"]
    spec = RunSpec("trained" if adapter else "base", model=config.model, adapter=adapter,
                   temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                   assistant_prefix=config.assistant_prefix, stop=tuple(config.stop))
    serve_like_training = [lambda env: SystemPrompt(env, prompt["text"], tools=prompt["tools"])]
    # resume=True: an evaluation already finished in ``out`` with the same settings is read back
    # (the base model's does not change from run to run), an interrupted one is continued.
    result = evaluate(config.env, [spec], split="val", limit=tasks, out_dir=out, report=False, resume=True,
                      config=EvalConfig(n=samples, seed=1234, max_turns=6, batch_tasks=16,
                                        wrappers=serve_like_training))
    row = result.run(spec.name)
    traj = row["trajectory"]
    turns = new_words = 0
    for record in read_records(out / "trajectories" / f"{spec.name}.jsonl"):
        for message in record["messages"]:
            turns += message["role"] == "assistant"
            if message["role"] == "tool":  # the env's answer to a guess_word call
                first_line = message["content"].split("\n", 1)[0]  # "Guess 2/6: CRANE" when played
                new_words += first_line.startswith("Guess ") and "(you already guessed this word)" not in first_line
    return {
        # a real word the game had not seen yet, over all turns of all games
        "new_word_rate": new_words / max(turns, 1),
        # per game: turns with a played guess (repeats included) / turns, averaged over games
        "valid_guess_rate": 1.0 - traj["invalid_action_rate"],
        "solve_rate": row["success_rate"]["value"],
        "solve_rate_ci": [row["success_rate"]["low"], row["success_rate"]["high"]],
        "outcome_reward_mean": row["reward"]["value"],
        "outcome_reward_ci": [row["reward"]["low"], row["reward"]["high"]],
        "turns_mean": traj["turns"],
        "format_error_rate": traj["format_error_rate"],
        "repeated_guesses_per_game": row["aggregate"].get("info/repeated_mean"),
        "episodes": row["episodes"],
    }


def plot(metrics_file: Path, before: dict, after: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    train = [r for r in rows if r.get("kind") != "val" and "rollout/info/valid" in r]
    val = [r for r in rows if r.get("kind") == "val" and "val/info/valid" in r]
    fig, (a, r, b) = plt.subplots(1, 3, figsize=(15, 4))
    _curves(a, train, val, "info/valid", "valid-guess rate", "Valid guesses while training")
    _curves(r, train, val, "reward_mean", "shaped reward (one guess)", "Partial-credit reward")
    keys = ["new_word_rate", "valid_guess_rate", "solve_rate"]
    names = ["new-word rate", "valid-guess rate\n(repeats included)", "solve rate"]
    x = range(len(names))
    b.bar([i - 0.2 for i in x], [before[k] for k in keys], width=0.4, label="base")
    b.bar([i + 0.2 for i in x], [after[k] for k in keys], width=0.4, label="trained")
    b.set_xticks(list(x), names)
    b.set_title(f"Held-out words, full games ({before['episodes']} per model)")
    b.legend()
    b.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _curves(ax, train: list[dict], val: list[dict], metric: str, ylabel: str, title: str) -> None:
    """``rollout/<metric>`` of the training steps and ``val/<metric>`` of the validations."""
    ax.plot([x["step"] for x in train], [x[f"rollout/{metric}"] for x in train], label="training (sampled)",
            alpha=0.6)
    ax.plot([x["step"] for x in val], [x[f"val/{metric}"] for x in val], "o-", label="held-out first guesses")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)


def main() -> None:
    args = parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    out = Path(args.out)
    overrides = [f"output_dir={out / 'run'}", f"tracker={args.tracker}", *args.overrides]
    if args.max_steps is not None:
        overrides.append(f"max_steps={args.max_steps}")
    config = GRPOConfig.load("cpu", overrides=overrides)
    out.mkdir(parents=True, exist_ok=True)
    tasks, samples = min(args.eval_tasks, 128), args.eval_samples

    t0 = time.monotonic()
    before = held_out_eval(config, out / "eval-before", adapter=None, tasks=tasks, samples=samples)
    print(f"before: new-word rate {before['new_word_rate']:.1%}, valid-guess rate {before['valid_guess_rate']:.1%}, "
          f"solve rate {before['solve_rate']:.1%}", flush=True)

    resume = out / "run" if args.resume and (out / "run" / "checkpoints").is_dir() else None
    trainer = GRPOTrainer(config, resume=resume)
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    # the trainer's own clock: training steps and in-loop validation (across resumes too)
    train_seconds = summary["seconds"].get("step", 0.0) + summary["seconds"].get("validation", 0.0)
    adapter = out / "run" / "checkpoints" / f"step_{summary['steps']:06d}" / "adapter"

    after = held_out_eval(config, out / "eval-after", adapter=str(adapter), tasks=tasks, samples=samples)
    print(f"after:  new-word rate {after['new_word_rate']:.1%}, valid-guess rate {after['valid_guess_rate']:.1%}, "
          f"solve rate {after['solve_rate']:.1%}")
    results = {"before": before, "after": after, "steps": summary["steps"], "train_seconds": train_seconds,
               "total_seconds": time.monotonic() - t0, "final_val": summary["final_val"],
               "adapter": str(adapter), "config": config.to_dict()}
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    plot(out / "run" / "metrics.jsonl", before, after, out / "curve.png")
    print(f"trained {summary['steps']} steps in {train_seconds / 60:.1f} min; wrote {out / 'results.json'} "
          f"and {out / 'curve.png'}")


if __name__ == "__main__":
    main()
