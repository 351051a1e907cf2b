"""The numbers a GRPO step reports, and the token and time totals of a run.

:func:`rollout_metrics` summarises a batch of trajectories under a prefix (``rollout/`` for
training batches, ``val/`` for validation): reward statistics, success rate and pass@k,
mean turns, format-error and failure rates, and token counts by phase. :class:`RunTotals`
adds up the billable-style totals over a run (prefill, cached, sampled and trained tokens)
and the seconds spent in each phase. :class:`PhaseTimer` times the phases of a step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mtrl_gym.stats import pass_at_k
from mtrl_gym.rollout.metrics import aggregate_metrics
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["rollout_metrics", "PhaseTimer", "RunTotals"]

#: aggregate_metrics key -> reported name (without prefix).
_RENAMES = {"success_mean": "success_rate", "turns_mean": "turns_mean", "format_error_rate_mean": "format_error_rate",
            "failure_rate": "failure_rate", "reward_mean": "reward_mean", "reward_std": "reward_std",
            "reward_min": "reward_min", "reward_max": "reward_max", "kv_reuse_rate": "kv_reuse_rate",
            "tool_calls_mean": "tool_calls_mean", "cut_turns_mean": "cut_turns_mean",
            "wall_time_s_mean": "episode_seconds_mean"}


def _successes(trajectories: Sequence[Trajectory]) -> list[float] | None:
    values = [t.metrics.get("success") for t in trajectories]
    if any(v is None for v in values):
        return None
    return [float(v) for v in values]


def rollout_metrics(trajectories: Sequence[Trajectory], group_size: int, prefix: str = "rollout/") -> dict[str, float]:
    """Summary of a batch whose groups of ``group_size`` are contiguous.

    Keys (after ``prefix``): ``reward_mean``/``_std``/``_min``/``_max``, ``success_rate``
    (env's success flag, when it has one) with ``pass_at_1`` and ``pass_at_<group_size>``,
    ``turns_mean``, ``format_error_rate``, ``failure_rate``, ``stop/<reason>``,
    ``kv_reuse_rate``, ``episodes``, and ``tokens_prefill``, ``tokens_cached``,
    ``tokens_sampled`` (sums), plus every ``info/...`` mean the env reports (and, for
    multi-agent envs, every ``seat/<seat>/...`` mean).
    """
    agg = aggregate_metrics(trajectories)
    out: dict[str, float] = {"episodes": float(len(trajectories))}
    for key, value in agg.items():
        if key in _RENAMES:
            out[_RENAMES[key]] = value
        elif key.startswith(("stop/", "info/", "seat/")):  # seat/: per-seat means of multi-agent envs
            out[key.removesuffix("_mean")] = value
    success = _successes(trajectories)
    if success is not None and trajectories:
        groups = [success[g:g + group_size] for g in range(0, len(success), group_size)]
        for k in sorted({1, group_size}):
            out[f"pass_at_{k}"] = sum(pass_at_k(len(s), int(sum(s)), min(k, len(s))) for s in groups) / len(groups)
    out["tokens_prefill"] = float(sum(t.prefill_tokens for t in trajectories))
    out["tokens_cached"] = float(sum(t.cached_tokens for t in trajectories))
    out["tokens_sampled"] = float(sum(t.sampled_tokens for t in trajectories))
    return {prefix + k: v for k, v in out.items()}


class PhaseTimer:
    """Wall-clock seconds per named phase of a step::

        timer = PhaseTimer()
        with timer("rollout"):
            ...
        timer.seconds  # {"rollout": 12.3}
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

    def metrics(self, prefix: str = "time/") -> dict[str, float]:
        return {f"{prefix}{k}_s": v for k, v in self.seconds.items()}


@dataclass
class RunTotals:
    """Running totals of a run (saved in checkpoints, so a resumed run keeps counting)."""

    tokens: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    episodes: int = 0
    optimizer_steps: int = 0

    def add_step(self, metrics: Mapping[str, float], seconds: Mapping[str, float]) -> None:
        for name, key in (("prefill", "rollout/tokens_prefill"), ("cached", "rollout/tokens_cached"),
                          ("sampled", "rollout/tokens_sampled"), ("trained", "train/trained_tokens"),
                          ("train_forward", "train/forward_tokens")):
            self.tokens[name] = self.tokens.get(name, 0.0) + float(metrics.get(key, 0.0))
        self.episodes += int(metrics.get("rollout/episodes", 0))
        self.optimizer_steps += int(metrics.get("train/optimizer_steps", 0))
        self.add_seconds(seconds)

    def add_validation(self, metrics: Mapping[str, float], seconds: float) -> None:
        self.tokens["val_prefill"] = self.tokens.get("val_prefill", 0.0) + float(metrics.get("val/tokens_prefill", 0.0))
        self.tokens["val_sampled"] = self.tokens.get("val_sampled", 0.0) + float(metrics.get("val/tokens_sampled", 0.0))
        self.add_seconds({"validation": seconds})

    def add_seconds(self, seconds: Mapping[str, float]) -> None:
        for k, v in seconds.items():
            self.seconds[k] = self.seconds.get(k, 0.0) + float(v)

    def state_dict(self) -> dict[str, Any]:
        return {"tokens": dict(self.tokens), "seconds": dict(self.seconds), "episodes": self.episodes,
                "optimizer_steps": self.optimizer_steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.tokens = dict(state.get("tokens", {}))
        self.seconds = dict(state.get("seconds", {}))
        self.episodes = int(state.get("episodes", 0))
        self.optimizer_steps = int(state.get("optimizer_steps", 0))
