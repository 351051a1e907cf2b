"""What a step on hostile text costs: the time of one ``env.step`` and how it grows with length.

Used by ``benchmarks/bad_text.py`` (the absolute bound) and by tests (the growth only: an
absolute time in a unit test depends on the machine, a ratio much less).

>>> import gymnasium, mtrl_gym
>>> seconds = step_seconds(lambda: gymnasium.make("mtrl/Sandbox-Shop-v0"), "hello", repeat=1)
>>> seconds < 1.0
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["step_seconds", "growth_ratio"]


def step_seconds(make_env: Callable[[], Any], text: str, *, seed: int = 0, repeat: int = 3, env: Any = None) -> float:
    """The fastest of ``repeat`` timings of ``env.step(text)`` right after ``env.reset(seed=seed)``
    (the reset is not timed). Pass ``env`` to reuse one instance."""
    env = env if env is not None else make_env()
    best = float("inf")
    for _ in range(max(repeat, 1)):
        env.reset(seed=seed)
        t0 = time.perf_counter()
        env.step(text)
        best = min(best, time.perf_counter() - t0)
    return best


def growth_ratio(make_env: Callable[[], Any], text_of: Callable[[int], str], *, small: int = 25_000,
                 factor: int = 4, seed: int = 0, repeat: int = 3, floor_s: float = 0.002) -> tuple[float, float, float]:
    """``(ratio, t_small, t_big)``: how much longer a step on ``text_of(small * factor)`` takes than
    on ``text_of(small)``. Linear cost gives about ``factor``, quadratic ``factor ** 2``.
    Times under ``floor_s`` count as ``floor_s`` (timer noise must not look like growth)."""
    env = make_env()
    t_small = step_seconds(make_env, text_of(small), seed=seed, repeat=repeat, env=env)
    t_big = step_seconds(make_env, text_of(small * factor), seed=seed, repeat=repeat, env=env)
    return max(t_big, floor_s) / max(t_small, floor_s), t_small, t_big
