"""Logging an evaluation to MLflow, next to the training runs.

:func:`log_to_mlflow` creates one parent MLflow run per evaluation (parameters: env,
tasks, samples per task, seed; artifacts: ``summary.json``, ``eval_config.json`` and the
report folder) and one nested run per evaluated run, whose parameters are its serving
settings and whose metrics are its summary numbers (``success_rate``, ``reward`` and
``pass_at_<k>`` with ``_low``/``_high`` interval bounds, ``trajectory/<metric>``,
``vs_reference/success_rate``, and every ``aggregate/<key>`` of the rollout metrics).

The store (:func:`tracking_uri_or_default`) is ``tracking_uri`` if given, else
``$MLFLOW_TRACKING_URI``, else the SQLite store ``mlflow.db`` in the working directory (a
training run without either keeps its store in its run folder: pass
``sqlite:///<run folder>/mlflow.db`` to log next to it). Eval runs go to the experiment ``mtrl-gym-eval`` by default and carry the tag
``mtrl_gym.training_run`` when a training run was given.

Every episode of every run also becomes an MLflow trace (:mod:`mtrl_gym.rollout.traces`),
linked to its run's nested MLflow run and tagged ``mtrl_gym.run`` with the run's label and
``mtrl_gym.kind`` ``eval``; its assessments ``outcome_reward`` and ``success`` are the bare
env's scores of the episode file. The trace search ``tags.`mtrl_gym.task_id` = '<id>'``
then lists the same task under every evaluated policy.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from mtrl_gym.mlflow_store import quiet_mlflow
from mtrl_gym.mlflow_store import tracking_uri as store_uri

__all__ = ["log_to_mlflow", "run_metrics"]

_KEY_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-. /")


def _key(text: str) -> str:
    return "".join(c if c in _KEY_CHARS else "_" for c in text)


def run_metrics(run: Mapping[str, Any]) -> dict[str, float]:
    """The MLflow metrics of one run's summary (finite numbers only)."""
    out: dict[str, float] = {}

    def interval(name: str, ci: Mapping[str, float]) -> None:
        out[name], out[f"{name}_low"], out[f"{name}_high"] = ci["value"], ci["low"], ci["high"]

    interval("success_rate", run["success_rate"])
    interval("reward", run["reward"])
    if "training_reward" in run:
        interval("training_reward", run["training_reward"])
    for k, ci in run["pass_at_k"].items():
        interval(f"pass_at_{k}", ci)
    for key, value in run["trajectory"].items():
        if isinstance(value, Mapping):
            out.update({f"trajectory/{key}/{k}": v for k, v in value.items()})
        elif value is not None:
            out[f"trajectory/{key}"] = value
    if "vs_reference" in run:
        interval("vs_reference/success_rate", run["vs_reference"]["success_rate"])
        interval("vs_reference/reward", run["vs_reference"]["reward"])
    if run.get("baseline_position") is not None:
        out["baseline_position"] = run["baseline_position"]
    out.update({f"aggregate/{k}": v for k, v in run.get("aggregate", {}).items()})
    return {_key(k): float(v) for k, v in out.items()
            if isinstance(v, (int, float)) and float(v) == float(v) and abs(float(v)) != float("inf")}


def _trace_episodes(tracer, run_id: str, name: str, path: str | None) -> None:
    """Every episode of one run's file as a trace linked to ``run_id``, scored by the bare env."""
    from mtrl_gym.evaluation.store import read_records
    from mtrl_gym.rollout.trajectory import Trajectory

    records = read_records(path) if path else []
    tracer.log([Trajectory.from_dict(r) for r in records], {"run": name, "kind": "eval"},
               scores=[{"outcome_reward": float(r["outcome_reward"]), "success": bool(r["success"])} for r in records],
               run_id=run_id)


def log_to_mlflow(result, *, tracking_uri: str | None = None, experiment: str = "mtrl-gym-eval",
                  training_run: str | None = None) -> dict[str, Any]:
    """Log an :class:`~mtrl_gym.evaluation.runner.EvalResult`; returns the ids of what was created."""
    quiet_mlflow()
    try:
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient
    except ImportError:
        from mtrl_gym.error import DependencyNotInstalled

        raise DependencyNotInstalled("mlflow", extra="train") from None
    client = MlflowClient(tracking_uri=store_uri(tracking_uri))
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    summary = result.summary
    tags = {"mtrl_gym.kind": "eval", "mtrl_gym.env_id": summary["env_id"], "mtrl_gym.out_dir": str(result.out_dir)}
    if training_run:
        tags["mtrl_gym.training_run"] = training_run
    parent = client.create_run(experiment_id, run_name=f"eval {summary['env_id']} {Path(result.out_dir).name}",
                               tags=tags)
    pid = parent.info.run_id
    now = int(time.time() * 1000)
    params = {"env_id": summary["env_id"], "tasks": summary["tasks"], "samples_per_task": summary["samples_per_task"],
              "seed": summary["seed"], "runs": ", ".join(summary["runs"]), "reference": summary.get("reference")}
    client.log_batch(pid, params=[Param(k, str(v)[:6000]) for k, v in params.items()],
                     metrics=[Metric("flags", float(len(summary.get("flags", []))), now, 0)])
    from mtrl_gym.rollout.traces import EpisodeTracer

    tracer = EpisodeTracer(client.tracking_uri, experiment_id)
    children = {}
    for name, run in summary["runs"].items():
        child = client.create_run(experiment_id, run_name=name,
                                  tags={**tags, "mlflow.parentRunId": pid, "mtrl_gym.run": name})
        cid = child.info.run_id
        spec_params = [Param(_key(k), str(v)[:6000]) for k, v in run["spec"].items()]
        metrics = [Metric(k, v, now, 0) for k, v in run_metrics(run).items()]
        for start in range(0, max(len(metrics), 1), 900):  # MLflow accepts at most 1000 per batch
            client.log_batch(cid, metrics=metrics[start:start + 900], params=spec_params if start == 0 else [])
        _trace_episodes(tracer, cid, name, result.files.get(f"trajectories/{name}"))
        client.set_terminated(cid)
        children[name] = cid
    for key in ("summary", "config"):
        if Path(result.files.get(key, "")).is_file():
            client.log_artifact(pid, result.files[key])
    if "report" in result.files:
        client.log_artifacts(pid, str(Path(result.files["report"]).parent), "report")
    client.set_terminated(pid)
    tracer.flush()
    return {"tracking_uri": client.tracking_uri, "experiment_id": experiment_id, "parent_run_id": pid,
            "runs": children}
