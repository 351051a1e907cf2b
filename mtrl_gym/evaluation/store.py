"""The on-disk record of an evaluation, written as it runs so that it can be resumed.

Layout of the output folder::

    eval_config.json          what is evaluated: env, tasks digest, settings, runs
    trajectories/<run>.jsonl  one line per finished episode (task x sample) of a run
    summary.json              written when every run is complete
    report/                   report.md and the PNG plots

Each episode line is a :class:`~mtrl_gym.rollout.trajectory.Trajectory` record plus
``run``, ``task_index``, ``outcome_reward`` and ``success``. Lines are appended and
flushed to disk as soon as their episodes finish; after a crash, :class:`EvalStore` with
``resume=True`` reads what is there (a half-written last line is ignored, and cut before
the next append), checks that
the settings match, and reports which ``(task_index, sample_index)`` pairs of each run
are still to play.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mtrl_gym.jsonl import iter_jsonl
from mtrl_gym.error import ConfigError, DatasetError
from mtrl_gym.files import write_text_atomic
from mtrl_gym.serialization import json_line

__all__ = ["EvalStore", "ResumeMismatch", "CONFIG_FILE", "read_records"]

CONFIG_FILE = "eval_config.json"
_VERSION = 1


class ResumeMismatch(ConfigError):
    """The evaluation or run in an output folder is not the one being resumed (other tasks,
    settings or adapter). ``reason`` is the first part of the message, without the advice."""

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.reason = reason


def _file_name(run: str, taken: Iterable[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", run).strip("._") or "run"
    name, i = f"{base}.jsonl", 2
    while name in set(taken):
        name, i = f"{base}-{i}.jsonl", i + 1
    return name


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Episode records of one run file; later lines replace earlier ones for the same episode.

    A truncated last line (a crash while writing) is skipped; any other broken line raises
    :class:`~mtrl_gym.error.DatasetError` naming the file and line.
    """
    path = Path(path)
    if not path.is_file():
        return []
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for i, record in iter_jsonl(path):
        try:
            key = (int(record["task_index"]), int(record["sample_index"]))
        except (KeyError, TypeError, ValueError):
            raise DatasetError("not an evaluation record (needs task_index and sample_index)",
                               path=str(path), line=i) from None
        out[key] = record
    return [out[k] for k in sorted(out)]


class EvalStore:
    """The output folder of one evaluation (see module docstring).

    Args:
        out_dir: the folder (created if needed).
        header: ``env_id``, ``tasks`` and ``config`` of this evaluation.
        resume: continue the evaluation already in ``out_dir``. Without it, a folder that
            holds an evaluation is an error (nothing is overwritten).
    """

    def __init__(self, out_dir: str | os.PathLike, header: Mapping[str, Any], *, resume: bool = False):
        self.dir = Path(out_dir)
        self.header = json.loads(json.dumps(dict(header), default=repr))
        self.runs: dict[str, dict[str, Any]] = {}
        path = self.dir / CONFIG_FILE
        if path.is_file():
            if not resume:
                raise ConfigError(f"{self.dir} already holds an evaluation; pass --resume (resume=True) to "
                                  "continue it, or choose another output folder")
            self._load_existing(path)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "trajectories").mkdir(exist_ok=True)

    def _load_existing(self, path: Path) -> None:
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path} is not valid JSON ({e.msg}); it is not an evaluation folder") from None
        for key in ("env_id", "tasks", "config"):
            if saved.get(key) != self.header.get(key):
                reason = f"cannot resume {self.dir}: its {key} differs from this evaluation's"
                raise ResumeMismatch(
                    f"{reason} (saved {json.dumps(saved.get(key))[:300]}, now {json.dumps(self.header.get(key))[:300]}); "
                    "resume with the same settings, or choose another output folder", reason=reason)
        self.runs = dict(saved.get("runs") or {})

    def add_run(self, name: str, spec: Mapping[str, Any]) -> None:
        """Register a run; on resume its settings must equal the saved ones (a ready sampler
        object passed through the Python API may be another instance or class)."""
        spec = json.loads(json.dumps(dict(spec), default=repr))
        if name in self.runs:
            saved, now = _settings(self.runs[name]["spec"]), _settings(spec)
            legacy = "adapter_sha256" in now and "adapter_sha256" not in saved
            if legacy:  # recorded before runs kept the adapter's digest: the path is all there is to compare
                now.pop("adapter_sha256")
            elif "adapter_sha256" in saved or "adapter_sha256" in now:  # the contents decide, not the path
                saved.pop("adapter", None)
                now.pop("adapter", None)
            if "system_prompt_sha256" in saved and "system_prompt_sha256" in now:  # a prompt file: its text decides
                saved.pop("system_prompt", None)
                now.pop("system_prompt", None)
            if saved != now:
                reason = f"cannot resume run {name!r} in {self.dir}: {_what_changed(saved, now, spec.get('adapter'))}"
                raise ResumeMismatch(f"{reason} (saved {self.runs[name]['spec']}, now {spec}); give the new settings "
                                     "another run name or use another output folder", reason=reason)
            if legacy:
                warnings.warn(f"run {name!r} in {self.dir} was recorded without its adapter's digest (by an older "
                              f"mtrl_gym): its episodes are taken to come from the adapter now at "
                              f"{spec.get('adapter')}, whose digest is recorded from now on", stacklevel=2)
                self.runs[name]["spec"] = spec
        else:
            self.runs[name] = {"spec": spec, "file": _file_name(name, (r["file"] for r in self.runs.values()))}
        self._write_config()

    def _write_config(self) -> None:
        data = {"version": _VERSION, **self.header, "runs": self.runs}
        write_text_atomic(self.dir / CONFIG_FILE, json.dumps(data, indent=1) + "\n")

    def path(self, run: str) -> Path:
        return self.dir / "trajectories" / self.runs[run]["file"]

    def records(self, run: str) -> list[dict[str, Any]]:
        return read_records(self.path(run))

    def done(self, run: str, *, retry_failed: bool = False) -> set[tuple[int, int]]:
        """``(task_index, sample_index)`` of the run's episodes already on disk."""
        return {(r["task_index"], r["sample_index"]) for r in self.records(run)
                if not (retry_failed and r.get("failed"))}

    def append(self, run: str, records: Iterable[Mapping[str, Any]]) -> int:
        """Append records to the run's file, flushed and synced; returns how many."""
        lines = [json_line(dict(r)) + "\n" for r in records]
        if not lines:
            return 0
        path = self.path(run)
        _drop_partial_line(path)
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(lines)
            f.flush()
            os.fsync(f.fileno())
        return len(lines)


def _settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a run spec that must match on resume (not the Python class of a sampler;
    :meth:`EvalStore.add_run` compares an adapter by its digest where one is recorded)."""
    return {k: v for k, v in spec.items() if k != "sampler"}


def _what_changed(saved: Mapping[str, Any], now: Mapping[str, Any], adapter: str | None) -> str:
    keys = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
    if keys == ["adapter_sha256"]:
        if now.get("adapter_sha256") is None:
            return f"there are no adapter files at {adapter} now"
        return ("the adapter's files changed since its episodes were played (adapter_sha256 "
                f"{saved.get('adapter_sha256')} -> {now['adapter_sha256']}), so they came from another adapter")
    return "its settings changed: " + ", ".join(keys)


def _drop_partial_line(path: Path) -> None:
    """Cut a half-written last line (a crash while writing) so the next record starts clean."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        data = f.read()
        if not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)
