"""mtrl_gym: multi-turn reinforcement learning for LLM agents.

``import mtrl_gym`` registers every environment with gymnasium (ids in
:func:`mtrl_gym.registry.list_envs`) and nothing heavier: torch and the trainers load only
when you use them.
"""

from __future__ import annotations

import importlib
from typing import Any

from mtrl_gym import registry
from mtrl_gym.error import DependencyNotInstalled, Error
from mtrl_gym.envs.profile import profile_of
from mtrl_gym.registry import list_envs, make

__version__ = "0.1.0"

__all__ = ["__version__", "registry", "list_envs", "make", "profile_of", "Error", "DependencyNotInstalled",
           "parsing", "datasets", "envs", "wrappers", "rollout", "trainers", "evaluation", "models"]

_LAZY_SUBMODULES = {"parsing", "datasets", "envs", "wrappers", "rollout", "trainers", "models", "evaluation", "cli",
                    "stats", "jsonl"}


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"mtrl_gym.{name}")
    raise AttributeError(f"module 'mtrl_gym' has no attribute {name!r}")
