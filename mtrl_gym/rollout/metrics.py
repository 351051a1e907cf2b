"""Numbers that describe rollouts: per-episode metrics and their batch aggregate.

:func:`episode_metrics` fills ``Trajectory.metrics`` (the rollout engine calls it when an
episode ends); :func:`aggregate_metrics` summarises a batch of trajectories for logs, the
trainer and evaluation. Every value is a float.

Per-episode keys: ``turns``, ``tool_calls``, ``format_errors``, ``format_error_rate``,
``cut_turns`` (turns that hit ``max_new_tokens`` or the token budget), ``prompt_tokens``
(first prompt), ``sampled_tokens``, ``env_tokens`` (environment tokens after the first
prompt), ``total_tokens``, ``prefill_tokens``, ``cached_tokens``, ``wall_time_s``,
``env_time_s`` (seconds inside the env's ``reset`` and ``step``),
``failed``, ``success`` (the env's ``info["success"]``, else ``info["solved"]``, else
``reward >= success_threshold`` when the env defines one; absent otherwise) and
``info/<key>`` for every number or bool in the last step's ``info``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["episode_metrics", "aggregate_metrics", "STOP_REASONS"]

#: Why an episode ends (``Trajectory.stop_reason``).
STOP_REASONS = ("terminated", "truncated", "max_turns", "token_budget", "context_length", "time_budget", "failed")

#: ``info`` keys of the env contract that are not per-episode facts.
_CONTRACT_KEYS = {"tool_calls", "tool_results", "format_error", "system_prompt", "tools", "task_id"}


def episode_metrics(traj: Trajectory, *, tool_calls: int, format_errors: int, cut_turns: int,
                    wall_time_s: float, success_threshold: float | None = None,
                    env_time_s: float = 0.0) -> dict[str, float]:
    """The metrics of one finished episode (see the module docstring for the keys)."""
    turns = traj.num_turns
    sampled = traj.trainable_tokens
    total = len(traj.token_ids)
    metrics: dict[str, float] = {
        "turns": float(turns),
        "tool_calls": float(tool_calls),
        "format_errors": float(format_errors),
        "format_error_rate": format_errors / turns if turns else 0.0,
        "cut_turns": float(cut_turns),
        "prompt_tokens": float(traj.prompt_length),
        "sampled_tokens": float(sampled),
        "env_tokens": float(total - sampled - traj.prompt_length),
        "total_tokens": float(total),
        "prefill_tokens": float(traj.prefill_tokens),
        "cached_tokens": float(traj.cached_tokens),
        "wall_time_s": float(wall_time_s),
        "env_time_s": float(env_time_s),
        "failed": float(traj.failed),
    }
    success = _success(traj, success_threshold)
    if success is not None:
        metrics["success"] = success
    for key, value in traj.final_info.items():
        if key in _CONTRACT_KEYS:
            continue
        if isinstance(value, bool) or (isinstance(value, (int, float)) and math.isfinite(value)):
            metrics[f"info/{key}"] = float(value)
    return metrics


def _success(traj: Trajectory, threshold: float | None) -> float | None:
    if traj.failed:
        return 0.0 if (threshold is not None or "success" in traj.final_info or "solved" in traj.final_info) \
            else None
    for key in ("success", "solved"):
        if isinstance(traj.final_info.get(key), (bool, int)):
            return float(bool(traj.final_info[key]))
    if threshold is not None:
        return float(traj.reward >= threshold)
    return None


def aggregate_metrics(trajectories: Sequence[Trajectory], *, prefix: str = "") -> dict[str, float]:
    """Summary of a batch: reward statistics, failure rate, stop reasons, mean metrics.

    Keys (each with ``prefix`` in front): ``num_trajectories``, ``reward_mean``,
    ``reward_std``, ``reward_min``, ``reward_max``, ``failures``, ``failure_rate``,
    ``stop/<reason>`` (fraction of episodes), ``kv_reuse_rate`` (cached / (cached +
    prefilled) prompt tokens), ``sampled_tokens_total``, ``total_tokens_total``, and
    ``<metric>_mean`` for every per-episode metric (averaged over the episodes that have
    it, so ``success_mean`` is the success rate). An empty batch gives
    ``{"num_trajectories": 0.0}``.
    """
    n = len(trajectories)
    if n == 0:
        return {f"{prefix}num_trajectories": 0.0}
    rewards = [float(t.reward) for t in trajectories]
    mean = sum(rewards) / n
    failures = sum(1 for t in trajectories if t.failed)
    out: dict[str, float] = {
        "num_trajectories": float(n),
        "reward_mean": mean,
        "reward_std": math.sqrt(sum((r - mean) ** 2 for r in rewards) / n),
        "reward_min": min(rewards),
        "reward_max": max(rewards),
        "failures": float(failures),
        "failure_rate": failures / n,
    }
    for reason in sorted({t.stop_reason for t in trajectories if t.stop_reason}):
        out[f"stop/{reason}"] = sum(1 for t in trajectories if t.stop_reason == reason) / n
    cached = sum(t.cached_tokens for t in trajectories)
    prefill = sum(t.prefill_tokens for t in trajectories)
    out["kv_reuse_rate"] = cached / (cached + prefill) if cached + prefill else 0.0
    out["sampled_tokens_total"] = float(sum(t.trainable_tokens for t in trajectories))
    out["total_tokens_total"] = float(sum(len(t.token_ids) for t in trajectories))
    out.update(_means([t.metrics for t in trajectories]))
    return {prefix + k: v for k, v in out.items()}


def _means(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                sums[key] = sums.get(key, 0.0) + float(value)
                counts[key] = counts.get(key, 0) + 1
    return {f"{key}_mean": sums[key] / counts[key] for key in sorted(sums)}
