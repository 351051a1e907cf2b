"""``mtrl-gym make-dataset``: write a reproducible task file from an env's named split.

``mtrl-gym make-dataset mtrl/SOP-DangerousGoods-v0 --n 640 --seed 0 --split train --out train.jsonl``
writes 640 rows in the :mod:`mtrl_gym.datasets` row format (the format follows the
suffix: ``.jsonl``, ``.json``, ``.csv``, ``.parquet``). The same arguments write the same
bytes. The rows come from the env's profile (:func:`mtrl_gym.envs.profile_of`), whose
splits are disjoint: SOP splits draw world seeds from disjoint ranges, so a train file and
a val file never share a world whatever their ``--seed``; Wordle's train split is the first
640 shuffled answers and val the 128 after them (``--seed`` defaults to the env's own split
seed: 42 for Wordle, which reproduces the files of the Amazon SageMaker AI multi-turn RL Wordle sample).
"""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("make-dataset", help="write a reproducible task file (SOP domains, Wordle)",
                       description="Write task rows for an environment: SOP domains (mtrl/SOP-*) or Wordle. "
                                   "The same arguments always write the same file.")
    p.add_argument("env_id", metavar="ENV_ID", help="e.g. mtrl/SOP-DangerousGoods-v0 or mtrl/Wordle-v0")
    p.add_argument("--n", type=int, default=640, help="number of tasks (default: 640)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the task draw (default: the env's own; for Wordle 42, the split of the SageMaker AI Wordle sample)")
    p.add_argument("--split", default="train",
                   help="a named split of the env: train or val (Wordle also all); splits never share a task "
                        "(default: train)")
    p.add_argument("--out", required=True, help="output file; the format follows the suffix "
                                                "(.jsonl, .json, .csv, .parquet)")
    p.add_argument("--difficulty", default=None, metavar="K=V,...",
                   help="difficulty knobs of envs that have them (SOP domains), e.g. noise=2,distractors=false "
                        "(default: the env's defaults)")
    p.set_defaults(func=run)


def make_rows(env_id: str, n: int, *, seed: int | None = None, split: str = "train",
              difficulty: str | None = None) -> list[dict]:
    """The task rows ``mtrl-gym make-dataset`` writes (``difficulty``: ``K=V,...`` task options)."""
    from mtrl_gym.datasets import parse_options
    from mtrl_gym.envs.profile import profile_of
    from mtrl_gym.error import ConfigError
    from mtrl_gym.registry import normalize_id

    profile = profile_of(normalize_id(env_id))
    if not profile.splits:
        raise ConfigError(f"{env_id} declares no named task splits (its profile has none), so there is "
                          "nothing to write; its tasks come from reset seeds")
    options = {"difficulty": parse_options(difficulty)} if difficulty else {}
    return profile.tasks(split, n, seed, **options)


def run(args) -> int:
    from mtrl_gym.datasets import write_tasks

    rows = make_rows(args.env_id, args.n, seed=args.seed, split=args.split, difficulty=args.difficulty)
    path = write_tasks(rows, args.out)
    print(f"wrote {len(rows)} {args.split} task(s) for {args.env_id} to {path}", file=sys.stderr)
    return 0
