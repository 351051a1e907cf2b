"""Teach SmolLM2-135M-Instruct to play Wordle on a 2-core CPU: teacher games -> SFT -> GRPO.

    python examples/train_wordle_cpu.py                        # the recipe (docs/training.md)
    python examples/train_wordle_cpu.py --short --out runs/wordle-short   # <= 10 min: a look

One file, top to bottom, no hidden steps; every stage is skipped when its result is
already in ``--out`` (so an interrupted run continues). Each result carries a record of the
settings and input files it was made from (``stage.json`` in a stage's folder,
``<file>.stage.json`` beside a data file; an evaluation's own ``eval_config.json``, which
knows its adapter by content); a result made otherwise stops the run with the
differences, rather than being reused for a table these flags did not make (``reuse``):

1. **Demonstrations**: the consistent teacher (``mtrl_gym.envs.wordle.teacher``: a strong
   opener, then the answer with the most common letters among those that fit all feedback)
   plays the training words through the rollout engine, in the exact serving format
   (system prompt without tool schemas, format prefill, stop at ``"``), each guess spelled
   out (``R E S I N``: one token per letter, the same tokens as the board's letters) or, in
   the short version (``--guess-form``), written as a word (``resin``: fewer tokens, whose
   spelling the model already knows, but whose letters it must know to use a clue); and
   *lexicon data* (``--lexicon``, ``--boards``; the short version's default): the answer
   list's words as first guesses, and single boards of random pre-played words answered by
   the teacher with a word that fits them. ``--spelling STEPS`` adds a *spelling drill*, SFT
   before SFT: the answer words alone, spelled out in the serving format, 25 to a
   conversation, without a board. ``--recap`` ends every observation (in the data, GRPO and
   every evaluation) with one line of the clues, green pattern last
   (``mtrl_gym.wrappers.WordleRecap``), which a spelled guess can copy its greens from.
2. **SFT**: a LoRA adapter learns the teacher's guesses (loss on the assistant's word
   tokens only), for ``--sft-steps`` steps of 8 examples (no time cap unless
   ``--sft-minutes``: a slow machine gives the same table, later).
   *A second round* (``--dagger``, ``--expert-iteration`` or ``--distill GAMES``; ``--dagger``
   and ``--distill`` may be combined): the SFT
   model plays full games on training words the demonstrations did not start from, and SFT
   continues from its adapter for ``--round2-steps`` steps on those games and the
   demonstrations. DAgger: the teacher labels every board the model reached (its own turns are
   context, without loss); expert iteration: the model *with dictionary decoding* plays, and
   each game up to its first guess that does not fit the clues is copied
   (``mtrl_gym.trainers.demos.learner_demos``); distillation: the model with dictionary
   decoding plays, and on every guess of its games the plain model learns to put its mass on
   the tokens that continue an allowed word (``SFTConfig.distill``), not to copy the word;
   with ``--distill-fitting``, a word that fits every clue so far (``SFTConfig.distill_fitting``).
   ``--dagger`` and ``--distill`` together: both sets of games, the teacher's labels learnt as
   words and the dictionary-decoded games distilled, in one second round.
3. **GRPO** from the SFT adapter with the ``cpu-sft`` preset: 0-3 pre-played guesses then
   up to 3 model guesses per episode (a repeat costs), collapse guards in the advantages.
4. **A serving temperature, chosen on training words** (never the validation split): the
   trained policy plays full games on the last ``--temperature-words`` training words (48;
   the short version's 16, which its demonstrations never reach) at each of ``--temperatures``; the
   recommendation is the one with the most *new* real words (a repeat or a non-word does not
   count), the higher temperature on a tie. ``--serving-temperature`` skips the choice.
5. **Evaluations** on the held-out validation words, same words, reset seeds and
   sampling (full 6-guess games), each column at the recommended temperature and at 1.0: the
   base model, SFT only, SFT + GRPO, and, as policies of their own, SFT, SFT + GRPO and the
   base model with *dictionary decoding* (each guess restricted to an allowed word;
   ``--no-dictionary`` skips them), all scored by the bare env, with the Wordle play metrics
   (``mtrl_gym.envs.wordle.play_metrics``: valid/new-word rates, clue-consistency vs a
   random word on the same boards, the shuffled-feedback control, letter-level clue use of any
   five letters, a word or not, solves with a Wilson interval, the most common guess); valid
   and new words carry Wilson 95 % intervals over turns.
6. **Report**: a table on stdout and ``results.json``, with the peak resident memory of each
   stage (``mtrl_gym.memory.PeakMemory``). Memory freed by a stage is handed back to the OS
   before the next (``memory.release()``), and SFT and GRPO compute the update in micro-batches
   of at most ``--micro-batch-tokens`` tokens (default 1024): the knob that trades memory for
   speed (activations take about 1 MB a token here). ``--precision`` (default ``auto``:
   bfloat16 where the CPU computes it natively, else float32) is the number format of SFT's
   forward and backward and of every evaluation's weights; GRPO stays float32.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import mtrl_gym  # noqa: F401  (registers the environments)
from mtrl_gym import memory
from mtrl_gym.envs.wordle.play_metrics import LETTER_CLUES
from mtrl_gym.evaluation import EvalConfig, ModelPool, ResumeMismatch, RunSpec, evaluate, read_records
from mtrl_gym.evaluation.play_metrics import env_play_metrics
from mtrl_gym.evaluation.serving import system_prompt_file
from mtrl_gym.files import file_sha256, folder_sha256, write_text_atomic
from mtrl_gym.trainers.demos import DemoConfig, make_demos, write_demos
from mtrl_gym.trainers.grpo.config import GRPOConfig
from mtrl_gym.trainers.grpo.data import load_task_splits
from mtrl_gym.trainers.grpo.policy import native_bf16
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer
from mtrl_gym.trainers.sft.config import SFTConfig
from mtrl_gym.trainers.sft.trainer import SFTTrainer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/wordle-cpu", help="output folder (default: runs/wordle-cpu)")
    p.add_argument("--short", action="store_true",
                   help="the small version (docs/training.md gives its settings and why): fewer games, lexicon "
                        "data, a short SFT, 2 small GRPO steps, 16 held-out words")
    p.add_argument("--demos", type=int, default=None,
                   help="teacher games (training words, cycled; default 960, the short version: 160)")
    p.add_argument("--lexicon", type=int, default=None,
                   help="lexicon examples: first guesses of a random answer word (default 0; the short version: 320)")
    p.add_argument("--boards", type=int, default=None,
                   help="single-board examples: 1-4 random words on the board, the teacher's next guess "
                        "(default 0; the short version: 320)")
    p.add_argument("--guess-form", choices=GUESS_FORMS, default=None,
                   help="how a guess is written: spelled out, R E S I N (the default), or as a word, resin (the "
                        "short version's default: in 40 steps it writes twice as many new real words; measured in "
                        "docs/training.md)")
    p.add_argument("--recap", action=argparse.BooleanOptionalAction, default=None,
                   help="end every observation with a one-line recap of the clues, green pattern last "
                        "(mtrl_gym.wrappers.WordleRecap), in the data, GRPO and every evaluation (default: on for "
                        "the recipe's spelled guesses, where it doubles clue use; off in the short version, whose "
                        "words do not use it; measured in docs/wordle_runs.md)")
    p.add_argument("--teacher", default="ranked", choices=["ranked", "random", "solver"],
                   help="how the teacher picks among the consistent answers (default: ranked)")
    p.add_argument("--sft-minutes", type=float, default=None,
                   help="an optional SFT time cap (default: none; the step count decides, so a slow machine "
                        "gives the same table later rather than a worse one)")
    p.add_argument("--sft-steps", type=int, default=None,
                   help="SFT steps of 8 examples (the schedule's length; default: 160, the short version: 40)")
    p.add_argument("--grpo-steps", type=int, default=None,
                   help="GRPO steps of 6 x 6 episodes (default: 6; the short version: 2 steps of 2 x 4)")
    p.add_argument("--dagger", type=int, default=0, metavar="GAMES",
                   help="DAgger: after SFT the model plays GAMES full games on training words at temperature "
                        f"{LEARNER_TEMPERATURE:g}, the teacher labels every board it reached, and SFT continues "
                        "--round2-steps steps on those labels and the demonstrations (default 0: off; with "
                        "--distill GAMES too, the second round has both, the DAgger games on the first of the "
                        "distilled games' words)")
    p.add_argument("--expert-iteration", type=int, default=0, metavar="GAMES",
                   help="expert iteration: after SFT the model *with dictionary decoding* plays GAMES full games on "
                        "training words at 1.0; each game up to its first guess that does not fit the clues becomes "
                        "SFT data for the plain model (--round2-steps more steps; default 0: off; not with "
                        "--dagger or --distill)")
    p.add_argument("--distill", type=int, default=0, metavar="GAMES",
                   help="distil the dictionary-decoded policy: after SFT the model *with dictionary decoding* plays "
                        "GAMES full games on training words at 1.0, and SFT continues --round2-steps steps on the "
                        "demonstrations and those games, where each guess token is scored by -log P(the tokens that "
                        f"continue an allowed word) (the games weigh {DISTILL_REPEAT}x; default 0: off; with --dagger "
                        "GAMES too, both in one round; measured in docs/training.md)")
    p.add_argument("--distill-fitting", action="store_true",
                   help="with --distill: score each guess token by -log P(the tokens that continue a word fitting "
                        "every clue so far) while the played guess still begins one (SFTConfig.distill_fitting; "
                        "measured in docs/training.md)")
    p.add_argument("--spelling", type=int, default=0, metavar="STEPS",
                   help="a spelling drill before SFT: STEPS steps of 8 conversations, each 25 answer words spelled out "
                        "in the serving format (default 0: none; measured in docs/wordle_runs.md)")
    p.add_argument("--spelling-lr", type=float, default=None,
                   help="the drill's learning rate (default: SFT's)")
    p.add_argument("--round2-steps", type=int, default=16,
                   help="SFT steps of the second round, on the learner's games (default 16)")
    p.add_argument("--sft-lr", type=float, default=None,
                   help="SFT learning rate (default 5e-4; the short version: 2e-3, for its fewer steps)")
    p.add_argument("--temperatures", default="0.3,0.5,0.7,1.0",
                   help="serving temperatures tried on training words (default: 0.3,0.5,0.7,1.0)")
    p.add_argument("--temperature-words", type=int, default=None,
                   help="training words (the split's last ones) the temperature is chosen on (default 48; "
                        "the short version: 16, for its time)")
    p.add_argument("--serving-temperature", type=float, default=None,
                   help="serve at this temperature instead of choosing one on training words")
    p.add_argument("--eval-tasks", type=int, default=None,
                   help="held-out words evaluated (max 128; default 128, --short 16)")
    p.add_argument("--skip-base", action="store_true", help="do not evaluate the base model")
    p.add_argument("--no-dictionary", dest="dictionary", action="store_false",
                   help="skip the two dictionary-decoding columns (base and SFT + GRPO restricted to allowed words)")
    p.add_argument("--tracker", default="none", choices=["none", "mlflow"], help="MLflow logging (default: none)")
    p.add_argument("--precision", default="auto", choices=["auto", "float32", "bfloat16"],
                   help="number format of SFT's forward and backward (autocast) and of every evaluation's weights: "
                        "auto (the default) is bfloat16 where the CPU computes it natively (AVX512-BF16 or AMX; "
                        "faster there, measured in docs/training.md), else float32. GRPO stays float32, so its "
                        "sampler and its update share their numerics. Compared like any setting: give "
                        "--precision float32 to continue an --out made before the flag existed")
    p.add_argument("--micro-batch-tokens", type=int, default=1024,
                   help="token positions per forward/backward pass of SFT and GRPO (default 1024): lower it to use "
                        "less memory, raise it for a little speed (about 1 MB a token)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a GRPOConfig field of the cpu-sft preset (repeatable)")
    args = p.parse_args(argv)
    if min(args.dagger, args.expert_iteration, args.distill, args.spelling) < 0 or args.round2_steps < 1:
        p.error("--dagger, --expert-iteration, --distill and --spelling take a number >= 0, --round2-steps a "
                "number >= 1")
    if args.spelling and args.guess_form == "word":
        p.error("--spelling drills the spelled-out form: give it with --guess-form spelled")
    if args.spelling_lr is not None and not args.spelling:
        p.error("--spelling-lr sets the spelling drill's learning rate: give --spelling STEPS too")
    if args.expert_iteration and (args.dagger or args.distill):
        p.error("--expert-iteration makes the second round's data alone: give it without --dagger and --distill "
                "(those two may be combined)")
    if args.distill_fitting and not args.distill:
        p.error("--distill-fitting narrows what --distill GAMES scores: give --distill GAMES too")
    # the short version's settings (docs/training.md measures them); a flag given still wins
    short = {"sft_steps": 40, "sft_lr": 2e-3, "lexicon": 320, "boards": 320, "demos": 160, "grpo_steps": 2,
             "guess_form": "spelled" if args.spelling else "word", "recap": False, "eval_tasks": 16, "temperature_words": 16}
    full = {"sft_steps": 160, "sft_lr": 5e-4, "lexicon": 0, "boards": 0, "demos": 960, "grpo_steps": 6,
            "guess_form": "spelled", "recap": True, "eval_tasks": 128, "temperature_words": 48}
    for key, value in (short if args.short else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.precision == "auto":
        args.precision = "bfloat16" if native_bf16("cpu") else "float32"
    if not 1 <= args.eval_tasks <= 128:
        p.error(f"--eval-tasks takes 1 to 128 held-out words, got {args.eval_tasks}")
    if not 1 <= args.temperature_words <= 128:
        p.error(f"--temperature-words takes 1 to 128 training words, got {args.temperature_words}")
    if args.short:
        args.overrides = ["global_batch_size=2", "group_size=4", *args.overrides]
    return args


def _digest(path: Path) -> str:
    """sha256 of a file, or of a folder's files (their relative paths and contents)."""
    if not path.exists():
        sys.exit(f"{path}, an input of a stage, is missing")
    if path.is_dir():
        return folder_sha256(path) or hashlib.sha256().hexdigest()  # an empty folder: the digest of nothing
    return file_sha256(path)


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


STAGE_RECORD = "stage.json"
STAGE_ORDER = ("demos/lexicon/boards.jsonl, spelling.jsonl, sft-spelling, sft, dagger/expert/distill.jsonl, sft2, grpo, "
               "temperature, eval-*")
_REDO = ("use another --out, or delete {} and the stages after it (in this order: " + STAGE_ORDER + ") "
         "to make them again with these flags")


def _change(key: str, have, now, where: dict[str, Path]) -> str:
    """One difference for a message: an input by its path, a long value around its first change."""
    if key in where:
        return f"{where[key]} is not the one it was made from (other contents)"
    a, b = (json.dumps(v) if v is not None else "-" for v in (have, now))
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    cut = max(0, i - 20)
    return f"{key}: {'...' * bool(cut)}{a[cut:i + 40]} -> {'...' * bool(cut)}{b[cut:i + 40]}"


def reuse(result: Path, settings: dict, inputs: Sequence[Path | None] = ()) -> bool:
    """Whether the stage that makes ``result`` (a ``.jsonl`` data file, or else a folder) has
    already run in ``--out`` with these ``settings`` from these ``inputs`` (files or folders,
    compared by their contents). A result made with other settings or inputs, or with no
    record, stops the run with the differences. A stage that has not run yet gets its record
    now (so an interrupted one continues under the same check) and ``False`` is returned: run it."""
    folder = result.suffix != ".jsonl"  # "T0.5" and "eval-T0.5-sft" are folders
    record = result / STAGE_RECORD if folder else result.with_name(result.name + ".stage.json")
    named = {f"{i} {p.name}": p for i, p in enumerate(q for q in inputs if q is not None)}
    want = json.loads(json.dumps({"settings": settings, "inputs": {k: _digest(p) for k, p in named.items()}},
                                 default=str))
    made = (any(p.name != STAGE_RECORD and not p.name.startswith(".") for p in result.iterdir())  # not a .part
            if folder and result.is_dir() else result.is_file())
    if not made:
        record.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(record, json.dumps(want, indent=1))
        return False
    redo = _REDO.format(result)
    if not record.is_file():
        sys.exit(f"{result} has no record of the settings it was made with (made before this script kept one?): "
                 f"{redo}")
    have, now = _flat(json.loads(record.read_text(encoding="utf-8"))), _flat(want)
    where = {f"inputs.{k}": p for k, p in named.items()}
    changed = [_change(k, have.get(k), now.get(k), where) for k in sorted(set(have) | set(now))
               if have.get(k) != now.get(k) and not (k not in have and now[k] in ([], {}))]  # a field added since, empty
    if changed:
        more = f" (and {len(changed) - 6} more)" if len(changed) > 6 else ""
        sys.exit(f"{result} was made with other settings or inputs than this call's: {'; '.join(changed[:6])}{more}. "
                 f"Reusing it would print a table these flags did not make: {redo}")
    return True


#: Config fields that do not change what a stage makes: paths (``reuse`` compares the inputs'
#: contents), the tracker, the progress bar, env worker threads and the micro-batch size
#: (gradients accumulate exactly, so lowering it after running out of memory continues the run).
NOT_SETTINGS = ("output_dir", "tracking", "progress", "micro_batch_tokens", "episode.env_workers")


def _settings(config, *paths: str) -> dict:
    """A trainer config as a stage's settings, flattened to dotted keys: without ``paths``
    (its input files and adapter) and the :data:`NOT_SETTINGS` fields."""
    drop = (*NOT_SETTINGS, *paths)
    return {k: v for k, v in _flat(config.to_dict()).items() if not any(k == d or k.startswith(f"{d}.") for d in drop)}


#: How a guess is written. ``spelled``: ``R E S I N``, one token per letter, the same tokens as the
#: board's letters (what the cpu-sft preset's system prompt asks for); ``word``: ``resin``, a word
#: piece or two whose spelling the model has memorised, asked for by the same prompt without its
#: last sentence (:func:`with_guess_form`).
GUESS_FORMS = ("spelled", "word")
SPELLED_SENTENCE = " Write each guess as its five letters in capitals, separated by spaces."


def with_guess_form(preset: GRPOConfig, form: str) -> GRPOConfig:
    """``preset`` with system prompts (training and validation) that ask for guesses in ``form``."""
    if form == "spelled":
        return preset
    config = preset.to_dict()
    for wrappers in (config["env_wrappers"], config["validation"]["env_wrappers"]):
        for wrapper in wrappers:
            text = wrapper.get("kwargs", {}).get("text")
            if wrapper["name"] == "SystemPrompt" and text:
                if SPELLED_SENTENCE not in text:
                    sys.exit(f"--guess-form {form}: the system prompt does not ask for spelled-out guesses "
                             f"({SPELLED_SENTENCE.strip()!r}), so there is nothing to take out: {text!r}; give --guess-form "
                             "spelled to keep this prompt as it is")
                wrapper["kwargs"]["text"] = text.replace(SPELLED_SENTENCE, "")
    return GRPOConfig.from_dict(config)


RECAP = {"name": "WordleRecap", "kwargs": {}}


def with_recap(preset: GRPOConfig) -> GRPOConfig:
    """``preset`` whose policy reads every observation with a :class:`~mtrl_gym.wrappers.WordleRecap`
    line: a serving wrapper (``serving.wrappers``), so the demonstrations, training and
    validation rollouts and every evaluation apply it outside the env's wrappers (it reads
    ``PriorGuesses``), and the adapters' saved serving settings carry it to ``mtrl-gym eval``."""
    return preset.replace(serving={"wrappers": [*preset.serving.wrappers, RECAP]})


def demonstrations(config: GRPOConfig, out: Path, args: argparse.Namespace) -> list[Path]:
    """Teacher games on the training words, in the evaluation's format (no curriculum), and
    the lexicon data: ``--lexicon`` first guesses (a uniformly random answer word: the word
    list itself, spelled out) and ``--boards`` single boards (1-4 random words pre-played, then
    the teacher's next guess: one that fits them)."""
    made = []
    system = [config.env_wrappers[0]]  # the recap, when on, comes with config.serving
    boards = [config.env_wrappers[0], {"name": "PriorGuesses", "kwargs": {"num_priors": [1, 4], "policy": "random"}}]
    spelled = args.guess_form == "spelled"
    lexicon = {"choice": "random", "openers": [], "spelled": spelled}
    for name, n, wrappers, kwargs, max_turns, seed in [
            ("demos", args.demos, system, {"choice": args.teacher, "spelled": spelled}, None, 0),
            ("lexicon", args.lexicon, system, lexicon, 1, 10_000),
            ("boards", args.boards, boards, {**lexicon, "choice": args.teacher}, 1, 20_000)]:
        path = out / f"{name}.jsonl"
        if not n:
            continue
        demo = DemoConfig(env=config.env, env_wrappers=wrappers, policy="teacher", policy_kwargs=kwargs,
                          num_episodes=n, model=config.model, serving=config.serving, max_turns=max_turns,
                          max_episode_tokens=config.episode.max_tokens, train_size=config.train_size,
                          val_size=config.val_size, split_seed=config.split_seed, seed=seed)
        if not reuse(path, demo.to_dict()):
            write_demos(make_demos(demo), path, demo)
        made.append(path)
    return made


def supervised(demos: list[Path], out: Path, args: argparse.Namespace, init_adapter: Path | None = None,
               steps: int | None = None, learning_rate: float | None = None,
               distill: Sequence[Path] = (), fitting: bool = False) -> tuple[Path, dict]:
    """SFT on the demonstrations (from ``init_adapter``: a second round, ``steps`` long, at
    ``learning_rate``, default ``--sft-lr``; with ``distill``, a constrained policy's games,
    :data:`DISTILL_REPEAT` times, toward the words that fit each board when ``fitting``);
    returns the adapter folder and the run summary."""
    config = SFTConfig(demos=[str(d) for d in demos], output_dir=str(out), tracking={"tracker": args.tracker}, batch_size=8,
                       distill=[str(d) for d in distill], distill_repeat=DISTILL_REPEAT if distill else 1,
                       distill_fitting=fitting,
                       max_steps=steps or args.sft_steps, max_minutes=args.sft_minutes,
                       init_adapter=None if init_adapter is None else str(init_adapter),
                       lora={"rank": 16, "alpha": 32, "layers": 12},
                       learning_rate=args.sft_lr if learning_rate is None else learning_rate,
                       optimizer={"warmup_steps": 3}, checkpoints={"save_every": 20},
                       autocast_dtype=reduced(args.precision),
                       micro_batch_tokens=args.micro_batch_tokens)
    done = out / "summary.json"
    inputs = ("demos", "distill", "init_adapter") + (() if distill else ("distill_repeat",)) \
        + (() if fitting else ("distill_fitting",))  # the settings of runs made before these options
    if reuse(out, _settings(config, *inputs), [*demos, *distill, init_adapter]) and done.is_file() \
            and json.loads(done.read_text())["status"] == "FINISHED":
        summary = json.loads(done.read_text())
        # the adapter by its place in the run folder: the summary's absolute path is stale in a moved --out
        return out / Path(summary["adapter"]).relative_to(summary["run_dir"]), summary
    resume = out if (out / "checkpoints").is_dir() else None
    summary = SFTTrainer(config, resume=resume).train()
    return Path(summary["adapter"]), summary


SPELLING_SYSTEM = ("You write real 5-letter English words for a word game. Write each word as its five letters "
                   "in capitals, separated by spaces.")
SPELLING_WORDS = 25  # words a conversation: about 1,000 tokens, 40 a word (a lexicon first guess takes ~170)


def spelling_drill(config: GRPOConfig, out: Path, rounds: int = 2) -> Path:
    """``--spelling``'s data: every answer word once a round (``rounds`` seeded orders),
    spelled out in the serving format, 25 to a conversation, each answered "OK" (no board, no
    feedback; ``mtrl_gym.trainers.demos.drill_demos``). Loss on the letters only. The answer
    list is the game's public word list, as for ``--lexicon``. Returns the file."""
    from mtrl_gym import models
    from mtrl_gym.envs.wordle.game import answers
    from mtrl_gym.envs.wordle.solver import format_guess
    from mtrl_gym.rollout.trajectory import save_jsonl
    from mtrl_gym.trainers.demos import drill_demos

    path = out / "spelling.jsonl"
    first_message = "Write a real 5-letter English word with the guess_word tool."
    serving = config.serving.replace(wrappers=[])  # the drill has no board: no view of one to apply
    if not reuse(path, {"rounds": rounds, "words": SPELLING_WORDS, "system": SPELLING_SYSTEM,
                        "first_message": first_message, "model": config.model, "serving": serving.to_dict()}):
        rng, words_list = np.random.default_rng(0), answers()
        actions = []
        for _ in range(rounds):
            words = [format_guess(words_list[i], spelled=True) for i in rng.permutation(len(words_list))]
            actions += [words[i:i + SPELLING_WORDS] for i in range(0, len(words), SPELLING_WORDS)]
        save_jsonl(drill_demos(actions, models.load_tokenizer(config.model), serving, system=SPELLING_SYSTEM,
                               first_message=first_message, task_id="spelling"), path)
    return path


LEARNER_TEMPERATURE = 0.5  # DAgger's games: near the temperature the short version recommends
#: Times each ``--distill`` game enters the second round's pool: 192 games of about six guesses
#: then make about half of it beside the short version's 800 demonstrations (as measured).
DISTILL_REPEAT = 4


def second_round_games(args: argparse.Namespace) -> dict[str, int]:
    """The second round's kinds of data the flags ask for (``dagger``, ``expert``, ``distill``),
    each with its number of games."""
    games = {"dagger": args.dagger, "expert": args.expert_iteration, "distill": args.distill}
    return {kind: n for kind, n in games.items() if n}


def learner_data(config: GRPOConfig, out: Path, adapter: Path, args: argparse.Namespace, name: str) -> Path:
    """Second-round data of kind ``name``, from the SFT model's own games on training words
    the demonstrations did not start from (``dagger``: every board it reached, labelled by
    the teacher; ``expert``: its dictionary-decoded games, each up to its first guess that
    does not fit the clues; ``distill``: its dictionary-decoded games whole, for
    ``SFTConfig.distill``). Returns the file."""
    from mtrl_gym.envs.wordle.play_metrics import board_consistent, replay_game
    from mtrl_gym.trainers.demos import learner_demos, recorded_actions

    n = second_round_games(args)[name]
    relabel = name == "dagger"
    path = out / f"{name}.jsonl"
    train, _ = load_task_splits(config.env, config.train_tasks, None, train_size=config.train_size,
                                val_size=config.val_size, split_seed=config.split_seed)
    start = args.demos % len(train)  # the short version's games use the first 160 words
    rows = [train[(start + i) % (len(train) - args.temperature_words)] for i in range(n)]
    demo = DemoConfig(env=config.env, env_wrappers=[config.env_wrappers[0]], policy="teacher",
                      policy_kwargs={"choice": args.teacher, "spelled": args.guess_form == "spelled"},
                      num_episodes=1, model=config.model,
                      serving=config.serving, max_episode_tokens=config.episode.max_tokens,
                      train_size=config.train_size, val_size=config.val_size, split_seed=config.split_seed, seed=30_000)
    temperature = LEARNER_TEMPERATURE if relabel else 1.0
    if reuse(path, {"relabel": relabel, "temperature": temperature, "tasks": [row["id"] for row in rows],
                    "labels": demo.to_dict()}, [adapter]):
        return path
    games(config, out / f"{name}-games", name, str(adapter), temperature, constrained=not relabel,
          precision=args.precision, tasks=rows)
    by_id = {row["id"]: row for row in rows}
    played = []
    for record in read_records(out / f"{name}-games" / "trajectories" / f"{name}.jsonl"):
        row = by_id[record["task_id"]]
        actions = recorded_actions(record)
        if name == "expert":  # the game up to its first guess that does not fit the board
            turns, _ = replay_game(row["answer"], actions)
            keep = next((i for i, t in enumerate(turns) if t.repeated or not board_consistent(t.guess, t.board)),
                        len(turns))
            actions = actions[:keep]
        if actions:
            played.append((row, actions))
    write_demos(learner_demos(demo, played, relabel=relabel), path, demo)
    return path


def reinforce(config: GRPOConfig) -> tuple[Path, dict]:
    """GRPO from the SFT adapter; returns the final adapter folder and the run summary."""
    run = Path(config.output_dir)
    done = run / "summary.json"
    adapter = Path(config.init_adapter) if config.init_adapter else None
    if reuse(run, _settings(config, "init_adapter"), [adapter]) and done.is_file() \
            and json.loads(done.read_text())["status"] == "FINISHED":
        summary = json.loads(done.read_text())
    else:
        resume = run if (run / "checkpoints").is_dir() else None
        trainer = GRPOTrainer(config, resume=resume)
        try:
            summary = trainer.train()
        finally:
            trainer.close()
    return run / "checkpoints" / f"step_{summary['steps']:06d}" / "adapter", summary


def reduced(precision: str) -> str | None:
    """The dtype a stage runs in below float32 (``bfloat16``), or None for the checkpoint's float32."""
    return None if precision == "float32" else precision


def games(config: GRPOConfig, out: Path, name: str, adapter: str | None, temperature: float,
          constrained: bool = False, *, precision: str, **tasks) -> dict:
    """Full 6-guess games served like training (``constrained``: dictionary decoding, a policy
    of its own) on ``tasks`` (``split=``/``limit=`` or ``tasks=`` rows of
    :func:`mtrl_gym.evaluation.evaluate`), the weights in ``precision`` (``float32``: the
    checkpoint's), scored by the bare env's play metrics."""
    prompt = config.env_wrappers[0]["kwargs"]  # a file, so the folder's record knows the prompt by its digest
    spec = RunSpec(name, model=config.model, adapter=adapter,
                   serving=config.serving.replace(temperature=temperature, constrained=constrained,
                                                  system_prompt=system_prompt_file(prompt["text"], out),
                                                  tools=prompt["tools"]))
    started = time.monotonic()
    try:  # resumes the folder's evaluation only if its run, adapter (by content), tasks and seeds are these
        result = evaluate(config.env, [spec], out_dir=out, report=False, resume=True, **tasks,
                          config=EvalConfig(n=1, seed=1234, max_turns=6, batch_tasks=16),
                          pool=ModelPool(dtype=reduced(precision)))
    except ResumeMismatch as e:
        sys.exit(f"{e.reason}. Reusing it would print a table these flags did not make: {_REDO.format(out)}")
    row = result.run(name)
    records = read_records(out / "trajectories" / f"{name}.jsonl")
    metrics = env_play_metrics(config.env, records) or {}
    metrics.update({"outcome_reward_mean": row["reward"]["value"], "eval_seconds": time.monotonic() - started,
                    "temperature": temperature})
    return metrics


def serving_temperature(config: GRPOConfig, out: Path, adapter: str, words: int,
                        temperatures: list[float], precision: str) -> tuple[float, dict[str, dict]]:
    """The serving temperature to recommend for ``adapter``, chosen on the last ``words``
    *training* words (never the validation split): the most new real words a turn (a repeat
    or a non-word does not count), the higher temperature on a tie."""
    train, _ = load_task_splits(config.env, config.train_tasks, None, train_size=config.train_size,
                                val_size=config.val_size, split_seed=config.split_seed)
    rows = train[-words:]
    trials = {f"{t:g}": games(config, out / f"T{t:g}", f"T{t:g}", adapter, t, precision=precision, tasks=rows)
              for t in temperatures}
    best = max(temperatures, key=lambda t: (trials[f"{t:g}"]["new_word_rate"], t))
    return best, trials


ROWS = [("valid word", "valid_word_rate"), ("new word", "new_word_rate"), ("clue-consistent (turns 2-6)", "consistency"),
        ("  random word, same boards", "random_consistency"), ("  ratio", "consistency_vs_random"),
        ("shuffled-feedback control", "control_consistency"),
        ("greens kept, any 5 letters (random word)", "greens_kept"), ("grays avoided (random word)", "grays_avoided"),
        ("yellows used (random word)", "yellows_used"), ("solved", "solve_rate"),
        ("most common guess", "top_guess_share"),
        ("outcome reward (a game unfinished in 6 turns: -1.50)", "outcome_reward_mean")]
INTERVALS = {"valid_word_rate": ("valid_word_low", "valid_word_high", "valid_words", "turns"),
             "new_word_rate": ("new_word_low", "new_word_high", "new_words", "turns"),
             "solve_rate": ("solve_rate_low", "solve_rate_high", "solved", "games")}


def table(columns: dict[str, dict], title: str = "held-out, full games") -> str:
    names = list(columns)
    lines = [f"| {title} | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, key in ROWS:
        cells = []
        for m in columns.values():
            v = m.get(key)
            if v is None:
                cells.append("-")
            elif key in INTERVALS and INTERVALS[key][0] in m:
                low, high, k, n = INTERVALS[key]
                cells.append(f"{v:.1%} [{m[low]:.1%}, {m[high]:.1%}] ({m[k]}/{m[n]})")
            elif key in LETTER_CLUES:  # letter-level clue use: of the turns with that clue, beside a random word's
                n = m.get(LETTER_CLUES[key])
                cells.append(f"{v:.1%} ({m['random_' + key]:.1%}) ({m[key + '_n']}/{n})" if n else "no such turn")
            elif key == "top_guess_share":
                count = f", {m['top_guess_n']}/{m['valid_words']}" if "top_guess_n" in m else ""  # older results
                cells.append(f"{v:.1%} ({m['top_guess']}{count})" if m.get("top_guess") else "no valid guess")
            elif key in ("consistency_vs_random", "outcome_reward_mean"):
                cells.append(f"{v:.2f}")
            else:
                cells.append(f"{v:.1%}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    grpo_overrides = [f"output_dir={out / 'grpo'}", f"tracking.tracker={args.tracker}",
                      f"micro_batch_tokens={args.micro_batch_tokens}", *args.overrides]
    if args.grpo_steps is not None:
        grpo_overrides.append(f"max_steps={args.grpo_steps}")
    preset = with_guess_form(GRPOConfig.load("cpu-sft", overrides=grpo_overrides), args.guess_form)
    if args.recap:
        preset = with_recap(preset)

    print(f"precision: {args.precision} (SFT and the evaluations; GRPO float32)", flush=True)
    peaks = memory.PeakMemory()  # the peak resident memory of each stage
    with peaks("demonstrations"):
        demos = demonstrations(preset, out, args)
    print(f"demonstrations: {', '.join(map(str, demos))} ({time.monotonic() - t0:.0f} s)", flush=True)
    memory.release()
    drill = None
    if args.spelling:
        with peaks("spelling drill"):
            drill, drill_summary = supervised([spelling_drill(preset, out)], out / "sft-spelling", args,
                                              steps=args.spelling, learning_rate=args.spelling_lr)
        print(f"spelling drill: {drill_summary['steps']} steps in {drill_summary['seconds'] / 60:.1f} min -> {drill}",
              flush=True)
        memory.release()
    with peaks("SFT"):
        sft_adapter, sft_summary = supervised(demos, out / "sft", args, init_adapter=drill)
    print(f"SFT: {sft_summary['steps']} steps in {sft_summary['seconds'] / 60:.1f} min -> {sft_adapter}", flush=True)
    if drill is not None:  # SFT's time includes the drill's
        sft_summary = {**sft_summary, "spelling": drill_summary,
                       "seconds": sft_summary["seconds"] + drill_summary["seconds"]}
    memory.release()
    first_adapter = sft_adapter
    kinds = second_round_games(args)
    if kinds:
        with peaks("learner data"):
            extra = {kind: learner_data(preset, out, sft_adapter, args, kind) for kind in kinds}
        memory.release()
        labels = [path for kind, path in extra.items() if kind != "distill"]  # learnt as words
        with peaks("SFT, round 2"):
            sft_adapter, round2 = supervised([*demos, *labels], out / "sft2", args,
                                             init_adapter=first_adapter, steps=args.round2_steps,
                                             distill=[extra["distill"]] if "distill" in extra else (),
                                             fitting=args.distill_fitting)
        sft_summary = {**sft_summary, "round2": round2, "seconds": sft_summary["seconds"] + round2["seconds"]}
        print(f"SFT round 2 on {', '.join(map(str, extra.values()))}: {round2['steps']} steps in "
              f"{round2['seconds'] / 60:.1f} min -> {sft_adapter}", flush=True)
        memory.release()

    config = preset.replace(init_adapter=str(sft_adapter))
    with peaks("GRPO"):
        grpo_adapter, grpo_summary = reinforce(config)
    memory.release()
    grpo_seconds = sum(grpo_summary["seconds"].get(k, 0.0) for k in ("step", "logging", "validation"))
    print(f"GRPO: {grpo_summary['steps']} steps in {grpo_seconds / 60:.1f} min -> {grpo_adapter}", flush=True)

    trials: dict[str, dict] = {}
    if args.serving_temperature is not None:
        temperature = args.serving_temperature
    else:
        with peaks("temperature"):
            temperature, trials = serving_temperature(config, out / "temperature", str(grpo_adapter),
                                                      args.temperature_words,
                                                      [float(t) for t in args.temperatures.split(",")],
                                                      args.precision)
        memory.release()
        print(f"serving temperature: {temperature:g}, chosen on {args.temperature_words} training words (new "
              "real words a turn: " + ", ".join(f"{t}: {m['new_word_rate']:.1%}" for t, m in trials.items()) + ")",
              flush=True)

    runs = [("SFT", str(sft_adapter), False), ("SFT + GRPO", str(grpo_adapter), False)]
    if first_adapter != sft_adapter:  # the second round's gain, against the first round alone
        runs.insert(0, ("SFT, round 1", str(first_adapter), False))
    if not args.skip_base:
        runs.insert(0, ("base", None, False))
    if args.dictionary:  # dictionary decoding: its own policy, beside (never mixed with) the plain model
        if not args.short:
            runs += [("SFT, dictionary", str(sft_adapter), True)]
        runs += [("SFT + GRPO, dictionary", str(grpo_adapter), True)]
        if not (args.skip_base or args.short):
            runs += [("base, dictionary", None, True)]
    tables: dict[str, dict[str, dict]] = {}
    for t in dict.fromkeys([temperature, 1.0]):  # the recommended temperature, then 1.0
        columns = tables.setdefault(f"{t:g}", {})
        for name, adapter, constrained in runs:
            if constrained and args.short and t != 1.0:
                continue  # the short version: dictionary decoding at 1.0 only
            slug = name.lower().replace(" + ", "-").replace(", ", "-").replace(" ", "-")
            folder = out / (f"eval-{slug}" if t == 1.0 else f"eval-T{t:g}-{slug}")
            with peaks(f"eval {name}, T={t:g}"):
                columns[name] = games(config, folder, slug, adapter, t, constrained, split="val",
                                      limit=args.eval_tasks, precision=args.precision)
            memory.release()
            m = columns[name]
            print(f"{name} (T={t:g}): valid {m['valid_word_rate']:.1%}, new {m['new_word_rate']:.1%}, consistent "
                  f"{m['consistency']:.1%} (random {m['random_consistency']:.1%}), solved {m['solve_rate']:.1%} "
                  f"({m['eval_seconds'] / 60:.1f} min)", flush=True)
    report = "\n\n".join(
        table(columns, f"held out, T={t}" + (" (recommended)" if float(t) == temperature else "")) for t, columns in tables.items())
    print(report)
    print("peak resident memory per stage:\n  " + peaks.table().replace("\n", "\n  "))
    results = {"precision": args.precision, "serving_temperature": temperature, "temperature_trials": trials,
               "temperature_words": args.temperature_words if trials else None,  # no trial, no trial words
               "tables": tables,
               "peak_rss_mib": peaks.mb, "sft": sft_summary, "grpo": {k: grpo_summary[k] for k in ("steps", "seconds")},
               "train_minutes": (sft_summary["seconds"] + grpo_seconds) / 60,
               "total_minutes_this_call": (time.monotonic() - t0) / 60, "config": config.to_dict()}
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    (out / "table.md").write_text(report + "\n", encoding="utf-8")
    print(f"training {results['train_minutes']:.1f} min; this call {results['total_minutes_this_call']:.1f} min; "
          f"wrote {out / 'results.json'}")
    from mtrl_gym.cli.train import serve_command

    print(f"serve the SFT + GRPO adapter to an agent as it was trained (the client sends the system prompt and "
          f"temperature {temperature:g}; docs/agents.md):\n  {serve_command(config.model, grpo_adapter)}")


if __name__ == "__main__":
    main()
