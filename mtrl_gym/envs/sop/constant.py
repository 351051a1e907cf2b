"""The constant-answer baseline of an SOP domain: the most common training answer, submitted at once.

A domain whose answers repeat (an early-exit outcome with every other field null) can be
scored by a policy that learns that one object instead of the procedure. This baseline
measures it: :func:`most_common_answer` is the answer most often expected on the first
``n`` tasks of the ``train`` split, and :class:`ConstantAnswer` submits it on every task
with no tool call (``mtrl-gym eval --policy constant``). Every generated domain keeps it at
2 % or less on ``val`` (``tests/sop/test_constant_baseline.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np

from mtrl_gym.error import ConfigError

__all__ = ["most_common_answer", "ConstantAnswer", "CONSTANT_TRAIN_TASKS"]

#: Training tasks the most common answer is counted on.
CONSTANT_TRAIN_TASKS = 500


_CACHE: dict[tuple[str, str, int, str], str] = {}


def _most_common(domain: Any, n: int, difficulty: str) -> str:
    key = (type(domain).__module__, type(domain).__qualname__, n, difficulty)
    if key not in _CACHE:
        from mtrl_gym.envs.sop.tasks import generate_tasks

        rows = generate_tasks(domain, n, split="train", difficulty=json.loads(difficulty))
        counts = Counter(json.dumps(r["answer"], sort_keys=True) for r in rows)
        top = max(counts.values())
        _CACHE[key] = min(a for a, c in counts.items() if c == top)  # ties: the first in sorted order
    return _CACHE[key]


def most_common_answer(domain: Any, n: int = CONSTANT_TRAIN_TASKS,
                       difficulty: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The answer expected most often on the first ``n`` ``train`` tasks of ``domain`` (an ``SOPDomain``)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"`n` must be an int >= 1, got {n!r}")
    knobs = domain.resolve_difficulty(difficulty)
    return json.loads(_most_common(domain, n, json.dumps(knobs, sort_keys=True)))


class ConstantAnswer:
    """Submits the domain's most common training answer on every task, with no tool call.

    The reference-policy interface: ``reset(info, rng, seed=, task=)``, then ``action = policy(observation,
    info)``; ``n`` is how many training tasks the answer is counted on.
    """

    def __init__(self, env: gymnasium.Env, n: int = CONSTANT_TRAIN_TASKS):
        base = env.unwrapped
        domain = getattr(base, "domain", None)
        if domain is None:
            raise ConfigError(f"the constant baseline needs an SOP env with a domain, got {type(base).__name__}")
        self.answer = most_common_answer(domain, n, getattr(base, "difficulty", None))

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        """Nothing to prepare: the answer is the same on every task."""

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        return f"<final_answer>{json.dumps(self.answer)}</final_answer>"
