"""Training curves of a training run, and the reward-hacking check.

A shaped training reward can rise while the task's real success rate falls: the policy
learns the shaping, not the task. :func:`load_training_curves` reads a training run's
per-step metrics, from

* a GRPO run folder (``mtrl-gym train``'s ``output_dir``), which holds ``metrics.jsonl``
  (searched recursively, so a parent folder works too);
* a metrics JSONL file: one JSON object per line with ``step`` and metric values, as the
  trainer writes them, e.g. ``{"step": 3, "kind": "train", "rollout/reward_mean": 0.41}``
  and ``{"step": 10, "kind": "val", "val/success_rate": 0.27}``;
* an MLflow run: ``mlflow:<run_id>`` or a bare 32-hex run id, in ``tracking_uri``, else
  ``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` in the working directory (a
  training run without either keeps its store in its folder, ``sqlite:///<run folder>/mlflow.db``).

The training reward is the first of :data:`REWARD_KEYS` the run logged (the trainer's
``rollout/reward_mean``: the reward it optimised, shaped if it used shaping wrappers); the
external metric the first of :data:`SUCCESS_KEYS` (validation success, else the training
batches' env success).

:func:`reward_hacking_flags` compares the mean of the first and last quarter of the steps:
it flags a run whose training reward rose while the external success metric fell by
more than ``min_drop``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_gym.jsonl import iter_jsonl
from mtrl_gym.error import ConfigError, DatasetError

__all__ = ["TrainingCurves", "load_training_curves", "reward_hacking_flags", "training_reward_rose",
           "training_run_of", "REWARD_KEYS", "SUCCESS_KEYS", "METRICS_FILE"]

#: File name of a training run's per-step metrics inside its run folder.
METRICS_FILE = "metrics.jsonl"
#: Training-reward metric names, most specific first (the first one present is used).
REWARD_KEYS = ("rollout/reward_mean", "train/reward_mean", "train/reward", "reward_mean", "reward")
#: External success metric names (validation first, then the training batches' outcome).
SUCCESS_KEYS = ("val/success_rate", "val/success_mean", "val/pass_at_1", "eval/success_rate",
                "rollout/success_rate", "train/success_rate", "train/success_mean", "success_rate", "success_mean")
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class TrainingCurves:
    """Per-step metric series of a training run."""

    source: str
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    """Metric name -> ``[(step, value), ...]`` sorted by step."""
    reward_key: str | None = None
    """The training-reward series used (see :data:`REWARD_KEYS`)."""
    success_key: str | None = None
    """The external success series used (see :data:`SUCCESS_KEYS`)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Sampling settings of the training run when its ``config.yaml`` is found:
    ``temperature`` (training rollouts) and ``val_temperature`` (its validation)."""

    def get(self, key: str | None) -> list[tuple[int, float]]:
        return list(self.series.get(key, [])) if key else []

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "reward_key": self.reward_key, "success_key": self.success_key,
                "settings": dict(self.settings), "reward": self.get(self.reward_key),
                "success": self.get(self.success_key)}


def load_training_curves(source: str | os.PathLike, *, reward_key: str | None = None,
                         success_key: str | None = None, tracking_uri: str | None = None) -> TrainingCurves:
    """Read a training run's per-step metrics (see module docstring for the sources).

    ``reward_key`` / ``success_key`` pick the series; by default the first name of
    :data:`REWARD_KEYS` / :data:`SUCCESS_KEYS` that the run logged.
    """
    text = str(source)
    if text.startswith("mlflow:") or (_RUN_ID.match(text) and not Path(text).exists()):
        series, settings = _mlflow_series(text.removeprefix("mlflow:"), tracking_uri)
    else:
        metrics = _metrics_file(Path(text).expanduser())
        series, settings = _jsonl_series(metrics), _run_settings(metrics.parent / "config.yaml")
    curves = TrainingCurves(source=text, series=series, settings=settings)
    curves.reward_key = _pick(series, reward_key, REWARD_KEYS, "reward_key", text)
    curves.success_key = _pick(series, success_key, SUCCESS_KEYS, "success_key", text)
    return curves


def _pick(series: dict, chosen: str | None, candidates: Sequence[str], what: str, source: str) -> str | None:
    if chosen is not None:
        if chosen not in series:
            raise ConfigError(f"training run {source!r} has no metric {chosen!r} ({what}); it has "
                              f"{sorted(series)[:20]}")
        return chosen
    return next((k for k in candidates if k in series), None)


def _metrics_file(path: Path) -> Path:
    if path.is_file():
        return path
    if path.is_dir():
        found = sorted(path.glob(f"**/{METRICS_FILE}"), key=lambda p: (len(p.parts), str(p)))
        if found:
            return found[0]
        raise ConfigError(f"training run folder {str(path)!r} holds no {METRICS_FILE}; pass the metrics "
                          "JSONL file or an MLflow run id (mlflow:<run_id>)")
    raise ConfigError(f"training run {str(path)!r} is neither a file, a folder nor an MLflow run id")


def _run_settings(path: Path) -> dict[str, Any]:
    """``temperature`` (its ``serving`` group's) and ``val_temperature`` (its ``validation`` group's;
    a top-level ``val_temperature`` in a run saved before the groups) from a GRPO run's ``config.yaml``
    (empty if absent)."""
    if not path.is_file():
        return {}
    try:
        import yaml

        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - no pyyaml or an unreadable file: the curves still work
        return {}
    if not isinstance(config, dict):
        return {}
    serving = config.get("serving") if isinstance(config.get("serving"), dict) else {}
    validation = config.get("validation") if isinstance(config.get("validation"), dict) else {}
    found = {"temperature": serving.get("temperature"),
             "val_temperature": validation.get("temperature", config.get("val_temperature"))}
    return {k: v for k, v in found.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _jsonl_series(path: Path) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, dict[int, float]] = {}
    for i, row in iter_jsonl(path):  # a cut-off last line: a run still writing (or killed mid-line)
        if not isinstance(row, dict) or not isinstance(row.get("step"), (int, float)):
            raise DatasetError("a metrics line needs a numeric 'step'", path=str(path), line=i, field="step")
        step = int(row["step"])
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                series.setdefault(key, {})[step] = float(value)
    return {k: sorted(v.items()) for k, v in series.items()}


def _mlflow_series(run_id: str, tracking_uri: str | None) -> tuple[dict[str, list[tuple[int, float]]], dict]:
    from mtrl_gym.mlflow_store import quiet_mlflow
    from mtrl_gym.mlflow_store import tracking_uri as store_uri

    quiet_mlflow()
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        from mtrl_gym.error import DependencyNotInstalled

        raise DependencyNotInstalled("mlflow", extra="train") from None
    client = MlflowClient(tracking_uri=store_uri(tracking_uri))
    try:
        run = client.get_run(run_id)
    except Exception as e:  # noqa: BLE001 - mlflow raises its own types for a missing run
        raise ConfigError(f"MLflow run {run_id!r} not found in {client.tracking_uri} ({e}); set "
                          "--tracking-uri to the store the training logged to") from None
    series = {}
    for key in run.data.metrics:
        history = client.get_metric_history(run_id, key)
        series[key] = sorted({m.step: float(m.value) for m in history}.items())
    settings = {}
    for key, params in (("temperature", ["serving.temperature"]),
                        ("val_temperature", ["validation.temperature", "val_temperature"])):
        for param in params:  # the trainer logs its config as params, nested groups flattened
            try:
                settings[key] = float(run.data.params[param])
                break
            except (KeyError, ValueError):
                pass
    return series, settings


def training_run_of(adapter: str | os.PathLike) -> Path | None:
    """The training run folder an adapter was saved in (``<run>/checkpoints/step_N/adapter``), if any.

    A folder counts when it holds :data:`METRICS_FILE`; up to four levels above the adapter
    are searched.
    """
    path = Path(adapter).expanduser().resolve()
    for parent in list(path.parents)[:4]:
        if (parent / METRICS_FILE).is_file():
            return parent
    return None


def _window_delta(points: list[tuple[int, float]], fraction: float) -> float | None:
    if len(points) < 2:
        return None
    w = max(1, int(len(points) * fraction))
    values = [v for _, v in points]
    return sum(values[-w:]) / w - sum(values[:w]) / w


def reward_hacking_flags(curves: TrainingCurves, *, fraction: float = 0.25,
                         min_drop: float = 0.02) -> list[dict[str, Any]]:
    """Flags of a training curve whose reward rose while the external success metric fell.

    Compares the means of the first and the last ``fraction`` of the logged steps. Returns
    a list (empty when all is well) of ``{"kind", "message", "reward_delta", "success_delta"}``.
    """
    reward = _window_delta(curves.get(curves.reward_key), fraction)
    success = _window_delta(curves.get(curves.success_key), fraction)
    if reward is None or success is None or not (reward > 0 and success < -min_drop):
        return []
    return [{"kind": "training_curve", "reward_delta": reward, "success_delta": success,
             "message": (f"training reward ({curves.reward_key}) rose by {reward:+.3f} while the external "
                         f"success metric ({curves.success_key}) fell by {success:+.3f} from the first to the last "
                         "quarter of training: the classic reward-hacking signature")}]


def training_reward_rose(curves: TrainingCurves, *, fraction: float = 0.25) -> bool | None:
    """Whether the training reward's last quarter is above its first (``None``: too few steps)."""
    delta = _window_delta(curves.get(curves.reward_key), fraction)
    return None if delta is None else delta > 0
