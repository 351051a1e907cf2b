"""Checkpoints of a GRPO run: everything needed to continue exactly where it stopped.

A checkpoint is a folder ``<output_dir>/checkpoints/step_000042/`` holding

* ``adapter/``: the LoRA adapter in peft's format (``adapter_config.json`` and
  ``adapter_model.safetensors``), loadable by peft, transformers and vLLM
  (``--lora-modules``); with full fine-tuning ``model/`` holds the whole model instead
  (``save_pretrained``), plus its tokenizer;
* ``trainer_state.pt``: optimiser state, learning-rate schedule, step, the task stream's
  position, the torch/numpy/python RNG states and running totals;
* ``config.yaml``: the resolved config of the run.

* ``manifest.json``: written last, the size and SHA-256 of every other file.

Checkpoints are written to a temporary folder ``.step_000042.tmp-PID``, every file and the
folder are fsynced, the manifest is written last, and the folder is renamed into place (the
parent folder fsynced too), so neither a crash nor a power cut leaves a checkpoint that
claims to be complete. A checkpoint counts only when its manifest matches its files
(:func:`verify_checkpoint`): :func:`latest_checkpoint` and :func:`load_checkpoint` skip a
damaged one (a truncated state or adapter file, a missing manifest) with a warning and fall
back to the newest good one. Temporary folders of processes that are gone are removed when
the next checkpoint is saved. With the same weights, RNG states and data position, a
resumed run on CPU reproduces the uninterrupted run's next step exactly.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtrl_gym.error import ConfigError
from mtrl_gym.files import file_sha256
from mtrl_gym.trainers.grpo.policy import is_peft_model

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint", "resume_target", "list_checkpoints", "verify_checkpoint",
           "remove_stale_temp_dirs", "capture_rng", "restore_rng", "load_adapter_weights", "STATE_FILE",
           "MANIFEST_FILE"]

STATE_FILE = "trainer_state.pt"
MANIFEST_FILE = "manifest.json"
_MANIFEST_FORMAT = "mtrl_gym.checkpoint/v1"
_STEP_DIR = re.compile(r"^step_(\d+)$")
_TMP_DIR = re.compile(r"^\.step_\d+\.tmp-(\d+)$")


def capture_rng() -> dict[str, Any]:
    """The torch (CPU and CUDA), numpy and python RNG states."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Restore what :func:`capture_rng` captured."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Checkpoint folders of a run (``checkpoints/step_*`` with a trainer state), oldest first.

    They are not verified here; :func:`latest_checkpoint` returns the newest one that is.
    """
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir()
             if (m := _STEP_DIR.match(p.name)) and (p / STATE_FILE).is_file()]
    return [p for _, p in sorted(found)]


def resume_target(target: str | os.PathLike, *, flag: str = "--resume") -> Path:
    """The checkpoint folder a ``--resume`` argument names: ``target`` itself when it is one,
    else the newest good checkpoint of the run folder ``target``; ConfigError when none."""
    path = Path(target)
    found = path if (path / STATE_FILE).is_file() else latest_checkpoint(path)
    if found is None:
        raise ConfigError(f"{flag}: no checkpoint in {str(path)!r} (looked for checkpoints/step_*)")
    return found


def latest_checkpoint(run_dir: str | os.PathLike, *, warn: bool = True) -> Path | None:
    """The newest checkpoint of a run that :func:`verify_checkpoint` accepts, or None.

    Each damaged newer one is skipped with a warning naming its problem.
    """
    for path in reversed(list_checkpoints(run_dir)):
        problem = verify_checkpoint(path)
        if problem is None:
            return path
        if warn:
            warnings.warn(f"checkpoint {path} is damaged ({problem}); falling back to an older one",
                          RuntimeWarning, stacklevel=2)
    return None


def verify_checkpoint(path: str | os.PathLike, *, hashes: bool = True) -> str | None:
    """None when the checkpoint's files match its manifest, else the problem in a few words."""
    path = Path(path)
    try:
        manifest = json.loads((path / MANIFEST_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no {MANIFEST_FILE}: an interrupted save or a checkpoint of an older mtrl_gym"
    except (OSError, ValueError) as e:
        return f"unreadable {MANIFEST_FILE} ({type(e).__name__})"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if manifest.get("format") != _MANIFEST_FORMAT or not isinstance(files, dict) or STATE_FILE not in files:
        return f"{MANIFEST_FILE} is not a checkpoint manifest"
    for rel, want in sorted(files.items()):
        target = path / rel
        try:
            size = target.stat().st_size
        except OSError:
            return f"{rel} is missing"
        if size != want.get("size"):
            return f"{rel} has {size} bytes, the manifest says {want.get('size')}"
        if hashes and file_sha256(target) != want.get("sha256"):
            return f"{rel} does not match its SHA-256 in the manifest"
    return None


def remove_stale_temp_dirs(run_dir: str | os.PathLike) -> list[Path]:
    """Remove ``.step_*.tmp-PID`` folders left by processes that no longer run; returns them."""
    root = Path(run_dir) / "checkpoints"
    removed = []
    if root.is_dir():
        for p in root.iterdir():
            m = _TMP_DIR.match(p.name)
            if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
    return removed


def save_checkpoint(run_dir: str | os.PathLike, step: int, *, policy: Any, optimizer: torch.optim.Optimizer,
                    state: dict[str, Any], config: Any = None, tokenizer: Any = None, keep: int = 0) -> Path:
    """Write the checkpoint of ``step`` and prune old ones; returns its folder.

    ``state`` holds the trainer's own state (schedule, data position, RNG, totals); the
    optimiser's state is added here. ``keep > 0`` deletes all but the ``keep`` newest.
    """
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_dirs(run_dir)
    final = root / f"step_{step:06d}"
    tmp = root / f".step_{step:06d}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    if is_peft_model(policy):
        policy.save_pretrained(str(tmp / "adapter"))
    else:
        policy.save_pretrained(str(tmp / "model"))
        if tokenizer is not None:
            tokenizer.save_pretrained(str(tmp / "model"))
    torch.save({**state, "step": step, "optimizer": optimizer.state_dict()}, tmp / STATE_FILE)
    if config is not None:
        config.save(tmp / "config.yaml")
    _write_manifest(tmp, step)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    if keep > 0:
        for old in list_checkpoints(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _write_manifest(folder: Path, step: int) -> None:
    """fsync every file and folder under ``folder``, then write and fsync the manifest."""
    files = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            _fsync_file(p)
            files[p.relative_to(folder).as_posix()] = {"size": p.stat().st_size, "sha256": file_sha256(p)}
    for d in sorted({p.parent for p in folder.rglob("*")} | {folder}, key=lambda d: -len(d.parts)):
        _fsync_dir(d)
    manifest = folder / MANIFEST_FILE
    manifest.write_text(json.dumps({"format": _MANIFEST_FORMAT, "step": step, "files": files}, indent=1) + "\n",
                        encoding="utf-8")
    _fsync_file(manifest)
    _fsync_dir(folder)


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory descriptors
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def load_adapter_weights(policy: Any, adapter_dir: str | os.PathLike) -> None:
    """Load a saved peft adapter's weights into ``policy`` (same adapter shape), exactly."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(adapter_dir)
    weights = path / "adapter_model.safetensors"
    if not weights.is_file():
        raise ConfigError(f"{path} holds no adapter_model.safetensors; is it a checkpoint's adapter folder?")
    result = set_peft_model_state_dict(policy, load_file(str(weights)))
    unexpected = getattr(result, "unexpected_keys", []) or []
    if unexpected:
        raise ConfigError(f"the adapter in {path} does not fit the model: unexpected keys {unexpected[:3]}...; "
                          "resume with the same model and LoRA settings")


def load_checkpoint(path: str | os.PathLike, *, policy: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Load weights and optimiser state of a checkpoint; returns the trainer state dict.

    ``path`` is a checkpoint folder (it must pass :func:`verify_checkpoint`) or a run folder:
    then its newest good checkpoint is used, damaged newer ones skipped with a warning.
    """
    path = Path(path)
    if (path / STATE_FILE).is_file():
        problem = verify_checkpoint(path)
        if problem is not None:
            fallback = latest_checkpoint(path.parent.parent, warn=False)
            hint = f"; the newest good checkpoint is {fallback}" if fallback else ""
            raise ConfigError(f"checkpoint {path} is damaged ({problem}){hint}; resume from the run folder "
                              f"{path.parent.parent} to fall back automatically")
    else:
        latest = latest_checkpoint(path)
        if latest is None:
            found = list_checkpoints(path)
            if found:
                raise ConfigError(f"every checkpoint in {str(path)!r} is damaged (newest: {found[-1].name}: "
                                  f"{verify_checkpoint(found[-1])}); start a new run")
            raise ConfigError(f"no checkpoint found in {str(path)!r}: give a run folder with checkpoints/step_* "
                              "or a checkpoint folder")
        path = latest
    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    try:
        if is_peft_model(policy):
            load_adapter_weights(policy, path / "adapter")
        else:
            _load_full_weights(policy, path / "model")
        optimizer.load_state_dict(state.pop("optimizer"))
    except (ValueError, RuntimeError, KeyError) as e:  # torch's shape and group-size mismatches
        raise ConfigError(f"checkpoint {path} does not fit this run's model and LoRA set-up ({_first_line(e)}); "
                          f"resume with the settings it was saved with ({path / 'config.yaml'})") from None
    state["path"] = str(path)
    return state


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__


def _load_full_weights(policy: Any, model_dir: Path) -> None:
    from safetensors.torch import load_file

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{model_dir} holds no safetensors weights; was the run a LoRA run? "
                          "Resume with the same `full_finetune` setting")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        weights.update(load_file(str(f)))
    missing, unexpected = policy.load_state_dict(weights, strict=False)
    tied = {k for k in missing if "lm_head" in k}  # tied embeddings are saved once
    if set(missing) - tied or unexpected:
        raise ConfigError(f"the weights in {model_dir} do not fit the model (missing {sorted(missing)[:3]}, "
                          f"unexpected {sorted(unexpected)[:3]}); resume with the same model")
