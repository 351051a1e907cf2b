"""Old import paths that moved in 0.2, kept working for one release with a DeprecationWarning.

``import mtrl_gym.trainers.rollout`` (and ``chat``, ``trajectory``, ``rollout_metrics``,
``samplers...``, ``mtrl_gym.evaluation.stats``) returns the module at its new place and
warns once; docs/architecture.md lists the moves. The aliases go in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["MOVED", "install"]

#: Old module path -> new module path.
MOVED = {
    "mtrl_gym.trainers.rollout": "mtrl_gym.rollout.engine",
    "mtrl_gym.trainers.chat": "mtrl_gym.rollout.template",
    "mtrl_gym.trainers.trajectory": "mtrl_gym.rollout.trajectory",
    "mtrl_gym.trainers.rollout_metrics": "mtrl_gym.rollout.metrics",
    "mtrl_gym.trainers.samplers": "mtrl_gym.rollout.samplers",
    "mtrl_gym.trainers.samplers.base": "mtrl_gym.rollout.samplers.base",
    "mtrl_gym.trainers.samplers.hf": "mtrl_gym.rollout.samplers.hf",
    "mtrl_gym.trainers.samplers.openai": "mtrl_gym.rollout.samplers.openai",
    "mtrl_gym.trainers.samplers.vllm": "mtrl_gym.rollout.samplers.vllm",
    "mtrl_gym.evaluation.stats": "mtrl_gym.stats",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; the old path goes in mtrl_gym 0.3",
                      DeprecationWarning, stacklevel=3)
        return importlib.import_module(new)

    def exec_module(self, module):
        pass  # the new module is already executed


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
