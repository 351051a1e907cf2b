"""From episode records to the numbers of a report: rates, pass@k, intervals, comparisons.

Every run is summarised on the full ``tasks x n`` grid of its episodes:

* ``success_rate`` and ``reward`` (the bare env's outcome reward) with bootstrap intervals
  over tasks; ``training_reward`` too when the evaluation applied training wrappers;
* ``pass_at_k`` for each k, the unbiased estimator averaged over tasks, with intervals;
* ``trajectory``: means per episode of turns, tool calls, format-error and invalid-action
  rates (per turn), sampled and total tokens (``None`` for policies), wall time, the rate
  of episodes that did not reach the end of their task (``unfinished_rate``: not
  ``terminated``; scored as the env's minimum reward), and the failure rate and stop reasons;
* ``aggregate``: :func:`mtrl_gym.rollout.metrics.aggregate_metrics` of the run.

:func:`compare_runs` adds paired differences to a reference run and, when both
reference policies ran, where each run stands between them
(``(success - random) / (solver - random)``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mtrl_gym.error import Error
from mtrl_gym.stats import bootstrap_ci, default_ks, paired_bootstrap_ci, pass_at_k_per_task
from mtrl_gym.rollout.metrics import aggregate_metrics
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["RunData", "summarise_run", "compare_runs", "TRAJECTORY_KEYS"]

#: Per-episode metrics reported as trajectory means (metric key -> report key).
TRAJECTORY_KEYS = {"turns": "turns", "tool_calls": "tool_calls", "format_error_rate": "format_error_rate",
                   "invalid_action_rate": "invalid_action_rate", "sampled_tokens": "sampled_tokens",
                   "total_tokens": "total_tokens", "wall_time_s": "wall_time_s", "unfinished": "unfinished_rate"}


class RunData:
    """One run's records as ``[tasks, n]`` matrices (success, outcome and training reward)."""

    def __init__(self, name: str, records: Sequence[Mapping[str, Any]], num_tasks: int, n: int):
        self.name = name
        self.records = list(records)
        grid = {(int(r["task_index"]), int(r["sample_index"])): r for r in self.records}
        missing = [(t, s) for t in range(num_tasks) for s in range(n) if (t, s) not in grid]
        if missing:
            raise Error(f"run {name!r} is incomplete: {len(missing)} of {num_tasks * n} episodes are missing "
                        f"(first: task {missing[0][0]}, sample {missing[0][1]}); resume the evaluation to finish it")
        cells = [[grid[(t, s)] for s in range(n)] for t in range(num_tasks)]
        self.success = np.array([[bool(c["success"]) for c in row] for row in cells], dtype=np.float64)
        self.outcome = np.array([[float(c["outcome_reward"]) for c in row] for row in cells])
        self.training = np.array([[float(c["reward"]) for c in row] for row in cells])


def _ci(values: np.ndarray, confidence: float, resamples: int, seed: int) -> dict[str, float]:
    return bootstrap_ci(values, confidence=confidence, resamples=resamples, seed=seed).to_dict()


def _mean(values: Sequence[float]) -> float | None:
    finite = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def summarise_run(data: RunData, *, spec: Mapping[str, Any], ks: Sequence[int] | None = None,
                  confidence: float = 0.95, resamples: int = 2000, seed: int = 0,
                  with_training_reward: bool = False) -> dict[str, Any]:
    """The summary of one run (see module docstring)."""
    num_tasks, n = data.success.shape
    ks = list(ks) if ks else default_ks(n)
    out: dict[str, Any] = {
        "run": data.name, "spec": dict(spec), "tasks": num_tasks, "samples_per_task": n,
        "episodes": num_tasks * n,
        "success_rate": _ci(data.success.mean(axis=1), confidence, resamples, seed),
        "reward": _ci(data.outcome.mean(axis=1), confidence, resamples, seed),
        "pass_at_k": {str(k): _ci(pass_at_k_per_task(data.success, k), confidence, resamples, seed) for k in ks},
    }
    if with_training_reward:
        out["training_reward"] = _ci(data.training.mean(axis=1), confidence, resamples, seed)
    metrics = [r.get("metrics") or {} for r in data.records]
    traj = {key: _mean([m.get(mkey) for m in metrics]) for mkey, key in TRAJECTORY_KEYS.items()}
    traj["failure_rate"] = sum(bool(r.get("failed")) for r in data.records) / len(data.records)
    reasons: dict[str, int] = {}
    for r in data.records:
        reasons[r.get("stop_reason") or "unknown"] = reasons.get(r.get("stop_reason") or "unknown", 0) + 1
    traj["stop_reasons"] = {k: v / len(data.records) for k, v in sorted(reasons.items())}
    out["trajectory"] = traj
    trajectories = [Trajectory.from_dict(r) for r in data.records]
    agg = aggregate_metrics(trajectories)
    # Token totals from the per-episode counts (the JSONL may not keep the token arrays).
    agg["sampled_tokens_total"] = float(sum(m.get("sampled_tokens", 0.0) for m in metrics))
    agg["total_tokens_total"] = float(sum(m.get("total_tokens", 0.0) for m in metrics))
    out["aggregate"] = agg
    return out


def compare_runs(summaries: dict[str, dict[str, Any]], data: dict[str, RunData], *, reference: str | None,
                 confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Paired differences to ``reference`` and the position between the reference policies.

    Adds to each run's summary ``vs_reference`` (``success_rate`` and ``reward``
    differences, run minus reference, with paired intervals) and, when ``solver`` and
    ``random`` both ran, ``baseline_position``. Returns ``{"reference": name,
    "baselines": {...}}`` for the top of the summary.
    """
    if reference is not None and reference not in data:
        from mtrl_gym.error import ConfigError

        raise ConfigError(f"reference run {reference!r} is not one of the runs {sorted(data)}")
    for name, d in data.items():
        if reference is None or name == reference:
            continue
        ref = data[reference]
        summaries[name]["vs_reference"] = {
            "run": reference,
            "success_rate": paired_bootstrap_ci(d.success.mean(axis=1), ref.success.mean(axis=1),
                                                confidence=confidence, resamples=resamples, seed=seed).to_dict(),
            "reward": paired_bootstrap_ci(d.outcome.mean(axis=1), ref.outcome.mean(axis=1),
                                          confidence=confidence, resamples=resamples, seed=seed).to_dict(),
        }
    out: dict[str, Any] = {"reference": reference}
    if "solver" in summaries and "random" in summaries:
        low = summaries["random"]["success_rate"]["value"]
        high = summaries["solver"]["success_rate"]["value"]
        out["baselines"] = {"random": low, "solver": high}
        for s in summaries.values():
            s["baseline_position"] = (s["success_rate"]["value"] - low) / (high - low) if high > low else None
    return out
