"""Task rows for SOP domains: seeded, reproducible, and disjoint between train and validation.

A row is ``{"prompt", "answer", "id", "seed", "difficulty"}`` (the row format of
:mod:`mtrl_gym.datasets`): ``seed`` and ``difficulty`` regenerate the world, ``prompt`` is
the first observation and ``answer`` the expected object. World seeds of the ``train``
split lie in ``[0, 2**30)`` and those of ``val`` in ``[2**30, 2**31)``
(:data:`SPLITS`), so the splits never share a world.

>>> split_seeds(3, seed=0, split="val") == split_seeds(3, seed=0, split="val")
True
>>> all(2**30 <= s < 2**31 for s in split_seeds(3, seed=0, split="val"))
True
>>> parse_difficulty("noise=2, distractors=false, label=hard")
{'noise': 2, 'distractors': False, 'label': 'hard'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mtrl_gym.datasets import parse_options
from mtrl_gym.error import ConfigError

if TYPE_CHECKING:
    from mtrl_gym.envs.sop.base import SOPDomain

__all__ = ["generate_tasks", "split_seeds", "task_id", "parse_difficulty", "SPLITS"]

#: World-seed ranges ``[low, high)`` of the dataset splits: train and validation never share a world.
SPLITS: dict[str, tuple[int, int]] = {"train": (0, 2**30), "val": (2**30, 2**31)}


def split_seeds(n: int, *, seed: int = 0, split: str = "train") -> list[int]:
    """``n`` distinct world seeds of ``split``, drawn from a generator seeded with ``(seed, split)``."""
    if split not in SPLITS:
        raise ConfigError(f"`split` must be one of {sorted(SPLITS)}, got {split!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"`n` must be an int >= 1, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"`seed` must be an int >= 0, got {seed!r}")
    low, high = SPLITS[split]
    if n > (high - low) // 2:
        raise ConfigError(f"`n` must be at most {(high - low) // 2} for one split, got {n}")
    rng = np.random.default_rng([seed, sorted(SPLITS).index(split)])
    seen: set[int] = set()
    out: list[int] = []
    while len(out) < n:
        for s in rng.integers(low, high, size=n - len(out)).tolist():
            if s not in seen:
                seen.add(s)
                out.append(int(s))
    return out


def task_id(domain: SOPDomain, split: str, index: int) -> str:
    """``sop-<slug>-<split>-<NNNNN>``."""
    return f"sop-{domain.slug}-{split}-{index:05d}"


def generate_tasks(domain: SOPDomain, n: int, *, seed: int = 0, split: str = "train",
                   difficulty: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """``n`` task rows of ``domain`` for ``split``: the same arguments give the same rows everywhere."""
    knobs = domain.resolve_difficulty(difficulty)
    rows = []
    for i, world_seed in enumerate(split_seeds(n, seed=seed, split=split)):
        world = domain.generate(np.random.default_rng(world_seed), knobs)
        rows.append({"prompt": domain.render_task(domain.task_inputs(world)), "answer": domain.expected(world),
                     "id": task_id(domain, split, i), "seed": world_seed, "difficulty": dict(knobs)})
    return rows


def parse_difficulty(text: str | None) -> dict[str, Any]:
    """``"noise=1,distractors=true"`` -> ``{"noise": 1, "distractors": True}`` (see :func:`mtrl_gym.datasets.parse_options`)."""
    return parse_options(text)
