"""The GRPO trainer: :class:`GRPOTrainer` and its :class:`GRPOConfig`.

>>> from mtrl_gym.trainers.grpo import GRPOConfig
>>> GRPOConfig(max_steps=2).max_steps
2

Both load lazily: importing this package does not import torch until the trainer is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["GRPOTrainer", "GRPOConfig"]

_EXPORTS = {"GRPOTrainer": "mtrl_gym.trainers.grpo.trainer", "GRPOConfig": "mtrl_gym.trainers.grpo.config"}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'mtrl_gym.trainers.grpo' has no attribute {name!r}")
