"""``mtrl-gym make-dataset``: write a reproducible task file for an SOP domain or Wordle.

``mtrl-gym make-dataset mtrl/SOP-DangerousGoods-v0 --n 640 --seed 0 --split train --out train.jsonl``
writes 640 rows in the :mod:`mtrl_gym.datasets` row format (the format follows the
suffix: ``.jsonl``, ``.json``, ``.csv``, ``.parquet``). The same arguments write the same
bytes. SOP splits draw world seeds from disjoint ranges (train ``[0, 2**30)``, val
``[2**30, 2**31)``), so a train file and a val file never share a world, whatever their
``--seed``. For ``mtrl/Wordle-v0`` the rows come from :func:`~mtrl_gym.datasets.wordle_split`:
train takes the first ``--n`` (at most 640) shuffled answers, val the ``--n`` after the
first 640; ``--seed 42`` (the default for Wordle) reproduces the managed service's files.
"""

from __future__ import annotations

import sys

#: Shuffled Wordle answers reserved for training; validation rows start after them.
WORDLE_TRAIN_SIZE = 640
_WORDLE_IDS = ("mtrl/Wordle-v0", "mtrl/Wordle-Hard-v0")


def register(sub) -> None:
    p = sub.add_parser("make-dataset", help="write a reproducible task file (SOP domains, Wordle)",
                       description="Write task rows for an environment: SOP domains (mtrl/SOP-*) or Wordle. "
                                   "The same arguments always write the same file.")
    p.add_argument("env_id", metavar="ENV_ID", help="e.g. mtrl/SOP-DangerousGoods-v0 or mtrl/Wordle-v0")
    p.add_argument("--n", type=int, default=640, help="number of tasks (default: 640)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the task draw (default: 0; for Wordle 42, the managed service's split)")
    p.add_argument("--split", choices=["train", "val"], default="train",
                   help="train or val: disjoint seed ranges (Wordle: disjoint answers) (default: train)")
    p.add_argument("--out", required=True, help="output file; the format follows the suffix "
                                                "(.jsonl, .json, .csv, .parquet)")
    p.add_argument("--difficulty", default=None, metavar="K=V,...",
                   help="SOP difficulty knobs, e.g. noise=2,distractors=false (default: the domain's defaults)")
    p.set_defaults(func=run)


def wordle_rows(n: int, *, seed: int = 42, split: str = "train") -> list[dict]:
    """Wordle task rows: train = the first ``n`` shuffled answers, val = ``n`` answers after the first 640."""
    from mtrl_gym.datasets import wordle_split
    from mtrl_gym.envs.wordle.game import answers
    from mtrl_gym.error import ConfigError

    limit = WORDLE_TRAIN_SIZE if split == "train" else len(answers()) - WORDLE_TRAIN_SIZE
    if not 1 <= n <= limit:
        raise ConfigError(f"--n for the Wordle {split} split must be between 1 and {limit} (the first "
                          f"{WORDLE_TRAIN_SIZE} shuffled answers are train, the rest val), got {n}")
    if split == "train":
        return wordle_split(train=n, val=0, seed=seed)[0]
    return wordle_split(train=WORDLE_TRAIN_SIZE, val=n, seed=seed)[1]


def make_rows(env_id: str, n: int, *, seed: int | None = None, split: str = "train",
              difficulty: str | None = None) -> list[dict]:
    """The task rows ``mtrl-gym make-dataset`` writes."""
    from mtrl_gym.error import ConfigError
    from mtrl_gym.registry import make

    env_id = env_id.removeprefix("mtrl_gym:")
    if env_id in _WORDLE_IDS:
        if difficulty:
            raise ConfigError(f"--difficulty applies to SOP domains only, not {env_id}")
        return wordle_rows(n, seed=42 if seed is None else seed, split=split)
    from mtrl_gym.envs.sop.base import SOPEnv
    from mtrl_gym.envs.sop.tasks import generate_tasks, parse_difficulty

    import gymnasium

    # Any registered id works (domains outside mtrl_gym too); unknown ids get close matches.
    env = gymnasium.make(env_id) if env_id in gymnasium.registry else make(env_id)
    sop = env.unwrapped
    env.close()
    if not isinstance(sop, SOPEnv):
        raise ConfigError(f"make-dataset writes tasks for SOP domains (mtrl/SOP-*) and Wordle; {env_id} is a "
                          f"{type(sop).__name__}")
    return generate_tasks(sop.domain, n, seed=0 if seed is None else seed, split=split,
                          difficulty=parse_difficulty(difficulty))


def run(args) -> int:
    from mtrl_gym.datasets import write_tasks

    rows = make_rows(args.env_id, args.n, seed=args.seed, split=args.split, difficulty=args.difficulty)
    path = write_tasks(rows, args.out)
    print(f"wrote {len(rows)} {args.split} task(s) for {args.env_id} to {path}", file=sys.stderr)
    return 0
