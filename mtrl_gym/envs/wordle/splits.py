"""The Wordle task splits: the service's train and validation answers, reproducible anywhere.

The 1,923 answers, sorted and shuffled with ``random.Random(seed)`` (seed 42 by default): the
first 640 are ``train`` (ids ``wordle_train_NNNN``), the next 128 ``val``
(``wordle_val_NNNN``). With the defaults this reproduces the ``training-data.jsonl`` and
``validation-data.jsonl`` of the Amazon SageMaker AI multi-turn RL service's public Wordle
sample exactly. The Wordle profile (:mod:`mtrl_gym.envs.wordle.profile`) offers them as its
named splits.

>>> train, val = wordle_split()
>>> len(train), len(val), train[0]["answer"], val[0]["id"]
(640, 128, 'riser', 'wordle_val_0000')
"""

from __future__ import annotations

import random

from mtrl_gym.envs.wordle.game import answers
from mtrl_gym.error import ConfigError

__all__ = ["wordle_split", "TASK_PROMPT", "TRAIN_SIZE", "VAL_SIZE", "SPLIT_SEED"]

#: The ``prompt`` field of a Wordle task row (the service's files).
TASK_PROMPT = "Guess the 5-letter word"
#: Sizes and seed of the service's split.
TRAIN_SIZE, VAL_SIZE, SPLIT_SEED = 640, 128, 42


def wordle_split(train: int = TRAIN_SIZE, val: int = VAL_SIZE, seed: int = SPLIT_SEED) -> tuple[list[dict], list[dict]]:
    """Disjoint, reproducible train/validation Wordle tasks.

    The sorted answers are shuffled with ``random.Random(seed)``; the first ``train`` are
    the training tasks, the next ``val`` the validation tasks. The defaults reproduce the
    files of the Amazon SageMaker AI multi-turn RL Wordle sample.
    """
    words = sorted(answers())
    if train < 0 or val < 0 or train + val > len(words):
        raise ConfigError(f"`train` + `val` must be between 0 and {len(words)} answers, got {train} + {val}")
    random.Random(seed).shuffle(words)

    def rows(chunk, split):
        return [{"prompt": TASK_PROMPT, "answer": w, "id": f"wordle_{split}_{i:04d}"} for i, w in enumerate(chunk)]

    return rows(words[:train], "train"), rows(words[train:train + val], "val")
