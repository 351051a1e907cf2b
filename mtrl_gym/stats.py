"""Statistics of an evaluation: the unbiased pass@k estimator and bootstrap intervals.

Samples of one task are not independent of each other (an easy task is solved by most of
them), so every interval here resamples **tasks**, not episodes: the cluster bootstrap
draws ``len(tasks)`` tasks with replacement and recomputes the statistic from their
per-task values. With one sample per task it is the ordinary bootstrap.

>>> pass_at_k(n=8, c=2, k=1)
0.25
>>> round(pass_at_k(n=8, c=2, k=4), 6)  # 1 - C(6, 4) / C(8, 4) = 1 - 15/70
0.785714
>>> default_ks(10)
[1, 2, 4, 8]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["pass_at_k", "pass_at_k_per_task", "default_ks", "Interval", "bootstrap_ci", "paired_bootstrap_ci"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from ``n`` samples of which ``c`` succeeded.

    pass@k is the probability that at least one of ``k`` samples succeeds. Drawing ``k`` of
    the ``n`` samples without replacement, the chance that all ``k`` fail is
    ``C(n - c, k) / C(n, k)``, so the estimate is ``1 - C(n - c, k) / C(n, k)`` (Chen et al.
    2021), computed as the product ``prod_{i = n - c + 1}^{n} (1 - k / i)`` so that large
    ``n`` never overflows. Edge cases: ``c == 0`` gives 0; ``n - c < k`` (every k-subset
    holds a success) gives exactly 1.
    """
    if not (isinstance(n, (int, np.integer)) and isinstance(c, (int, np.integer))
            and isinstance(k, (int, np.integer))):
        raise TypeError(f"n, c and k must be ints, got {n!r}, {c!r}, {k!r}")
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"need n >= 1 and 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"`k` must be in [1, n={n}], got {k}")
    if c == 0:
        return 0.0
    if n - c < k:
        return 1.0
    all_fail = float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))
    return 1.0 - all_fail


def pass_at_k_per_task(successes: np.ndarray, k: int) -> np.ndarray:
    """pass@k of each task from a ``[tasks, n]`` 0/1 success matrix; shape ``[tasks]``."""
    successes = np.asarray(successes)
    if successes.ndim != 2:
        raise ValueError(f"`successes` must be a [tasks, n] matrix, got shape {successes.shape}")
    n = successes.shape[1]
    counts = successes.astype(bool).sum(axis=1)
    return np.array([pass_at_k(n, int(c), k) for c in counts], dtype=np.float64)


def default_ks(n: int) -> list[int]:
    """The k values reported for ``n`` samples per task: 1, 2, 4, 8, ... up to ``n``."""
    if n < 1:
        raise ValueError(f"`n` must be >= 1, got {n}")
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    return ks


@dataclass(frozen=True)
class Interval:
    """A point estimate with a bootstrap confidence interval."""

    value: float
    low: float
    high: float
    confidence: float

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high, "confidence": self.confidence}

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def _check(confidence: float, resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"`resamples` must be >= 1, got {resamples}")


def bootstrap_ci(values: Sequence[float] | np.ndarray, *, confidence: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> Interval:
    """Mean of per-task ``values`` with a percentile bootstrap interval over tasks.

    ``values`` holds one number per task (its mean reward, success rate or pass@k). The
    interval is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the
    means of ``resamples`` resamples (widened, in the rare skewed case where it would not,
    to contain the point estimate). It collapses to a point when every task has the same
    value, and so for a single task; an empty input gives NaN.
    """
    _check(confidence, resamples)
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, confidence)
    means = _resampled_means(x, resamples, seed)
    low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Interval(float(x.mean()), float(min(low, x.mean())), float(max(high, x.mean())), confidence)


def paired_bootstrap_ci(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *,
                        confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> Interval:
    """Mean of ``a - b`` over the same tasks, with a paired bootstrap interval.

    Pairing removes the task-difficulty variance both runs share, so a difference between
    two runs on the same tasks is resolved with far fewer tasks than two separate
    intervals would need. An interval that excludes 0 is a difference the tasks support.
    """
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired values need the same tasks, got {a.size} and {b.size} values")
    return bootstrap_ci(a - b, confidence=confidence, resamples=resamples, seed=seed)


def _resampled_means(x: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty(resamples, dtype=np.float64)
    # Chunks keep memory at ~8 MB whatever the number of tasks.
    chunk = max(1, 1_000_000 // x.size)
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        out[start:start + m] = x[rng.integers(0, x.size, size=(m, x.size))].mean(axis=1)
    return out
