"""What a run records: metrics, trajectories, the config, progress bars and a final summary.

Every run writes to its output folder, whatever the tracker:

* ``metrics.jsonl``: one JSON object per step (and per validation) with every metric;
* ``trajectories/step_000042.jsonl``: a sample of each step's trajectories
  (:func:`mtrl_gym.rollout.trajectory.save_jsonl` format), and ``val_*.jsonl`` for validation;
* ``summary.json``: totals at the end (tokens by phase, seconds by phase, final metrics).

:class:`MLflowTracker` mirrors the same into MLflow: the config as params, metrics per step,
trajectory samples and the summary as artifacts, and a sample of each step's episodes as
MLflow traces (:mod:`mtrl_gym.rollout.traces`, capped by :class:`TraceConfig`). MLflow is
imported only when used. With no tracking URI configured (and no ``$MLFLOW_TRACKING_URI``) a
training run keeps a local SQLite store in its own folder (``<run folder>/mlflow.db``,
artifacts under ``<run folder>/mlruns``), which needs no server and no network; mlflow's
telemetry is switched off unless the user set ``MLFLOW_DISABLE_TELEMETRY``. View it with
``mlflow ui --backend-store-uri sqlite:///<run folder>/mlflow.db``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mtrl_gym.error import DependencyNotInstalled
from mtrl_gym.rollout.traces import TraceConfig
from mtrl_gym.rollout.trajectory import Trajectory, json_safe, save_jsonl
from mtrl_gym.mlflow_store import tracking_uri as store_uri

__all__ = ["Tracker", "NullTracker", "MLflowTracker", "RunRecorder", "make_tracker", "StepProgress",
           "format_summary", "format_held_out", "default_tracking_uri"]


class Tracker:
    """Where metrics go besides the run folder. The base class records nothing."""

    run_id: str | None = None

    def start(self, params: Mapping[str, Any], run_id: str | None = None) -> None:
        """Open (or, with ``run_id``, re-open) the run and record ``params``."""

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Record numeric metrics at ``step``."""

    def log_artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        """Attach a file to the run."""

    def log_traces(self, trajectories: Sequence[Trajectory], tags: Mapping[str, Any]) -> None:
        """Record episodes as traces tagged with ``tags`` (run, step, kind)."""

    def finish(self, status: str = "FINISHED") -> None:
        """Close the run (``FINISHED``, ``KILLED`` or ``FAILED``)."""

    def truncate_after(self, step: int) -> None:
        """Forget what was recorded beyond ``step`` when the run is re-opened (a resume repeats those
        steps); called before :meth:`start`."""


NullTracker = Tracker


def default_tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI``, else a SQLite store ``mlflow.db`` in the working directory."""
    return store_uri()


class MLflowTracker(Tracker):
    """Logs to MLflow (any tracking URI; a local SQLite store by default)."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "mtrl-gym", run_name: str | None = None,
                 artifact_location: str | None = None, traces: TraceConfig | None = None):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        try:
            import mlflow
        except ImportError:
            raise DependencyNotInstalled("mlflow", extra="train") from None
        import logging

        logging.getLogger("mlflow").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        self._mlflow = mlflow
        self.tracking_uri = tracking_uri or default_tracking_uri()
        self.experiment = experiment
        self.run_name = run_name
        self.artifact_location = artifact_location
        self.traces = traces or TraceConfig()
        self._client = None
        self._tracer = None
        self.run_id = None
        self._keep_through: int | None = None

    def truncate_after(self, step: int) -> None:
        self._keep_through = int(step)

    def start(self, params: Mapping[str, Any], run_id: str | None = None) -> None:
        mlflow = self._mlflow
        self._client = mlflow.MlflowClient(tracking_uri=self.tracking_uri)
        if run_id is not None:
            try:
                self._client.update_run(run_id, status="RUNNING")
                self.run_id = run_id
                if self._keep_through is not None:
                    self.run_id = _trimmed_run(self._client, mlflow, run_id, self._keep_through)
                return
            except Exception as e:  # noqa: BLE001 - another store, or the run was deleted
                warnings.warn(f"cannot re-open MLflow run {run_id} in {self.tracking_uri} ({e}); "
                              "logging the resumed run as a new run", stacklevel=2)
        found = self._client.get_experiment_by_name(self.experiment)
        experiment_id = found.experiment_id if found else self._client.create_experiment(
            self.experiment, artifact_location=self.artifact_location)
        run = self._client.create_run(experiment_id, run_name=self.run_name)
        self.run_id = run.info.run_id
        flat = _flatten(params)
        items = [mlflow.entities.Param(k, str(v)[:6000]) for k, v in flat.items()]
        for i in range(0, len(items), 100):
            self._client.log_batch(self.run_id, params=items[i:i + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        if self.run_id is None:
            return
        now = int(time.time() * 1000)
        items = [self._mlflow.entities.Metric(_metric_key(k), float(v), now, step)
                 for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)]
        for i in range(0, len(items), 500):
            self._client.log_batch(self.run_id, metrics=items[i:i + 500])

    def log_artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        if self.run_id is not None:
            self._client.log_artifact(self.run_id, str(path), artifact_path)

    def log_traces(self, trajectories: Sequence[Trajectory], tags: Mapping[str, Any]) -> None:
        if self.run_id is None or not trajectories or self._tracer is False:
            return
        if self._tracer is None:
            from mtrl_gym.rollout.traces import EpisodeTracer

            try:
                experiment_id = self._client.get_run(self.run_id).info.experiment_id
                self._tracer = EpisodeTracer(self.tracking_uri, experiment_id, self.run_id, self.traces)
            except Exception as e:  # noqa: BLE001 - traces are a view of the run, never the reason it stops
                warnings.warn(f"episodes are not traced in {self.tracking_uri} ({type(e).__name__}: {e}); metrics "
                              "and trajectory files are recorded as usual", stacklevel=2)
                self._tracer = False
                return
        self._tracer.log(trajectories, {"run": self.run_name or self.run_id, **tags})

    def finish(self, status: str = "FINISHED") -> None:
        if self._tracer:
            self._tracer.flush()  # the traces are in the store before the run is closed
        if self.run_id is not None and self._client is not None:
            self._client.set_terminated(self.run_id, status=status)


def _trimmed_run(client: Any, mlflow: Any, run_id: str, step: int) -> str:
    """The id of run ``run_id`` without its metric records beyond ``step``.

    MLflow cannot delete single metric records, so when the run has some (a resume from an
    older checkpoint repeats those steps) they are left behind: a new run of the same
    experiment and name gets the params, the tags, the metric history up to ``step`` and the
    artifacts, is tagged ``mtrl_gym.resumed_from``; the old run is tagged
    ``mtrl_gym.superseded_by``, marked KILLED and deleted (``mlflow gc`` purges it;
    ``MlflowClient.restore_run`` brings it back). Without such records the run is kept.
    """
    import tempfile

    entities = mlflow.entities
    old = client.get_run(run_id)
    histories = {key: client.get_metric_history(run_id, key) for key in old.data.metrics}
    if not any(m.step > step for history in histories.values() for m in history):
        return run_id
    tags = {k: v for k, v in old.data.tags.items() if not k.startswith("mlflow.")}
    new = client.create_run(old.info.experiment_id, run_name=old.info.run_name,
                            tags={**tags, "mtrl_gym.resumed_from": run_id, "mtrl_gym.resumed_at_step": str(step)})
    new_id = new.info.run_id
    params = [entities.Param(k, v) for k, v in old.data.params.items()]
    for i in range(0, len(params), 100):
        client.log_batch(new_id, params=params[i:i + 100])
    kept = [entities.Metric(m.key, m.value, m.timestamp, m.step)
            for history in histories.values() for m in history if m.step <= step]
    for i in range(0, len(kept), 500):
        client.log_batch(new_id, metrics=kept[i:i + 500])
    if client.list_artifacts(run_id):
        with tempfile.TemporaryDirectory() as tmp:
            client.log_artifacts(new_id, client.download_artifacts(run_id, "", tmp))
    client.set_tag(run_id, "mtrl_gym.superseded_by", new_id)
    client.set_terminated(run_id, status="KILLED")
    client.delete_run(run_id)
    return new_id


def _metric_key(key: str) -> str:
    """MLflow keys allow letters, digits, ``_-./`` and spaces."""
    return "".join(ch if ch.isalnum() or ch in "_-./ " else "_" for ch in key)


def _flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, Mapping) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v) if isinstance(v, (list, dict)) else v
    return out


def make_tracker(name: str, *, tracking_uri: str | None = None, experiment: str = "mtrl-gym",
                 run_name: str | None = None, run_dir: str | os.PathLike | None = None,
                 traces: TraceConfig | None = None) -> Tracker:
    """``"mlflow"`` -> :class:`MLflowTracker`; ``"none"`` -> a tracker that records nothing.

    The MLflow store is ``tracking_uri``, else ``$MLFLOW_TRACKING_URI``, else a SQLite
    store in ``run_dir`` (artifacts under ``run_dir/mlruns``), else one in the working directory.
    """
    if name != "mlflow":
        return NullTracker()
    if tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or run_dir is None:
        return MLflowTracker(tracking_uri, experiment, run_name, traces=traces)
    folder = Path(run_dir).resolve()
    return MLflowTracker(f"sqlite:///{folder / 'mlflow.db'}", experiment, run_name,
                         artifact_location=(folder / "mlruns").as_uri(), traces=traces)


class RunRecorder:
    """Writes the run folder's files and forwards everything to a :class:`Tracker`."""

    def __init__(self, run_dir: str | os.PathLike, tracker: Tracker | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.tracker = tracker or NullTracker()
        self.metrics_path = self.run_dir / "metrics.jsonl"

    def log(self, metrics: Mapping[str, float], step: int, kind: str = "train") -> None:
        """Append one record to metrics.jsonl and send the metrics to the tracker."""
        record = {"step": step, "kind": kind, **json_safe(dict(metrics))}
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        self.tracker.log_metrics(metrics, step)

    def trajectories(self, trajectories: Sequence[Trajectory], name: str) -> Path | None:
        """Save trajectories as ``trajectories/<name>.jsonl`` and attach them to the run."""
        if not trajectories:
            return None
        path = save_jsonl(trajectories, self.run_dir / "trajectories" / f"{name}.jsonl")
        self.tracker.log_artifact(path, "trajectories")
        return path

    def traces(self, trajectories: Sequence[Trajectory], *, step: int, kind: str = "train",
               policy_version: int | None = None) -> None:
        """Send episodes to the tracker as traces tagged with ``step``, ``kind`` (``train``, ``val``)
        and ``policy_version`` (the weights that played them, where the trajectories do not say)."""
        if trajectories:
            self.tracker.log_traces(trajectories, {"step": step, "kind": kind, "policy_version": policy_version})

    def summary(self, summary: Mapping[str, Any]) -> Path:
        """Write summary.json and attach it."""
        path = self.run_dir / "summary.json"
        path.write_text(json.dumps(json_safe(dict(summary)), indent=2) + "\n", encoding="utf-8")
        self.tracker.log_artifact(path)
        return path

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The records of metrics.jsonl (of one ``kind``, e.g. ``"val"``), in order."""
        if not self.metrics_path.is_file():
            return []
        out = []
        for line in self.metrics_path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if kind is None or record.get("kind") == kind:
                out.append(record)
        return out

    def truncate_after(self, step: int) -> None:
        """Drop metrics.jsonl records beyond ``step`` (a resumed run repeats them), and have the
        tracker drop its own when it re-opens the run (:meth:`Tracker.truncate_after`)."""
        trim = getattr(self.tracker, "truncate_after", None)  # a tracker written before the hook has none
        if trim is not None:
            trim(step)
        if not self.metrics_path.is_file():
            return
        keep = []
        for line in self.metrics_path.read_text(encoding="utf-8").splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except json.JSONDecodeError:
                continue
        self.metrics_path.write_text("".join(line + "\n" for line in keep), encoding="utf-8")


class StepProgress:
    """A tqdm bar over training steps with the headline metrics; silent when disabled."""

    def __init__(self, total: int | None, initial: int = 0, enabled: bool = True, desc: str = "grpo"):
        self.bar = None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True,
                            file=sys.stderr)

    def update(self, metrics: Mapping[str, float]) -> None:
        if self.bar is None:
            return
        shown = {}
        for key, label, fmt in (("rollout/reward_mean", "reward", "{:+.3f}"), ("rollout/success_rate", "solve", "{:.0%}"),
                                ("train/loss", "loss", "{:+.4f}"),
                                ("train/token_accuracy", "acc", "{:.0%}"), ("time/step_s", "s/step", "{:.1f}")):
            if key in metrics:
                shown[label] = fmt.format(metrics[key])
        self.bar.set_postfix(shown, refresh=False)
        self.bar.update(1)

    def write(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


#: Stop reasons of held-out episodes cut before the env gave its outcome.
_CUT_STOPS = ("max_turns", "token_budget", "context_length", "truncated", "time_budget")


def _val_rows(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """``(label, before, after, note)`` rows of the held-out check, bare env's terms first."""
    rows: list[tuple[str, str, str, str]] = []

    def add(key: str, label: str, kind: str, note: str = "") -> None:
        if key not in after and key not in before:
            return
        fmt = (lambda v: f"{v:+.3f}") if kind == "num" else (lambda v: f"{v:.1%}")
        show = [fmt(float(d[key])) if key in d else "-" for d in (before, after)]
        rows.append((label, show[0], show[1], note))

    add("val/info/episode/outcome_reward", "outcome reward", "num", "bare env's reward over the turns played")
    add("val/success_rate", "success rate", "pct")
    stats = sorted({k for d in (before, after) for k in d
                    if k.startswith("val/info/episode/") and k.endswith("_rate")})
    for key in stats:
        name = key.removeprefix("val/info/episode/").removesuffix("_rate").replace("_", "-")
        add(key, f"{name} rate", "pct", "share of turns")
    add("val/format_error_rate", "format-error rate", "pct", "share of turns")
    add("val/reward_mean", "shaped reward", "num", "the reward GRPO optimises, not a score")
    return rows


def format_held_out(summary: Mapping[str, Any]) -> list[str]:
    """The held-out check before (first validation) and after (last) training, as text lines.

    Reads ``first_val``, ``final_val`` and ``validation`` (the check's settings) of the
    summary; empty when the run did not validate.
    """
    before, after = summary.get("first_val") or {}, summary.get("final_val") or {}
    if not after:
        return []
    v = summary.get("validation") or {}
    turns = v.get("max_turns")
    head = (f"held-out check: {v.get('tasks', '?')} tasks x {v.get('group_size', '?')} episodes, temperature "
            f"{v.get('temperature', '?')}, " + (f"at most {turns} turn(s) per episode" if turns else "full episodes"))
    last = v.get("last_step", after.get("step", summary.get("steps", "?")))
    steps = (f"step {before.get('step', 0)}", f"step {last}")
    rows = _val_rows(before, after)
    width = max(len(r[0]) for r in rows) if rows else 10
    lines = [head, f"  {'':<{width}}  {steps[0]:>8}    {steps[1]:>8}"]
    for label, b, a, note in rows:
        lines.append(f"  {label:<{width}}  {b:>8} -> {a:>8}" + (f"   ({note})" if note else ""))
    cut = sum(float(after.get(f"val/stop/{r}", 0.0)) for r in _CUT_STOPS)
    if cut > 0:
        lines.append(f"  {cut:.0%} of the held-out episodes stop at the turn or token limit, before the game "
                     "ends: their outcome reward counts only the turns played")
    return lines


def format_summary(summary: Mapping[str, Any]) -> str:
    """The end-of-run summary as plain text: what was run, the held-out check before -> after
    (bare env's terms first, the shaped reward labelled), where everything is."""
    tokens = summary.get("tokens", {})
    seconds = summary.get("seconds", {})
    minutes = (seconds.get("step", 0.0) + seconds.get("validation", 0.0)) / 60
    lines = [f"trained {summary.get('steps', 0)} steps ({summary.get('episodes', 0)} episodes, "
             f"{summary.get('optimizer_steps', 0)} optimiser steps) in {minutes:.1f} min; status "
             f"{summary.get('status', '?')}"]
    lines.extend(format_held_out(summary))
    if tokens:
        shown = ", ".join(f"{key} {int(tokens[key]):,}" for key in ("prefill", "cached", "sampled", "trained",
                                                                   "val_sampled") if key in tokens)
        lines.append(f"tokens: {shown}")
    if seconds:
        lines.append("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    run_dir = summary.get("run_dir", "")
    lines.append(f"run folder: {run_dir} (config.yaml, metrics.jsonl, checkpoints/, trajectories/, summary.json)")
    if summary.get("tracking_uri") and summary.get("tracker_run_id"):
        lines.append(f"MLflow: mlflow ui --backend-store-uri {summary['tracking_uri']}   "
                     f"(then http://127.0.0.1:5000, run {summary['tracker_run_id']})")
    return "\n".join(lines)
