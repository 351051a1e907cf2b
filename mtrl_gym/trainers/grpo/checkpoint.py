"""Checkpoints of a GRPO run: everything needed to continue exactly where it stopped.

A checkpoint is a folder ``<output_dir>/checkpoints/step_000042/`` holding

* ``adapter/``: the LoRA adapter in peft's format (``adapter_config.json`` and
  ``adapter_model.safetensors``), loadable by peft, transformers and vLLM
  (``--lora-modules``); with full fine-tuning ``model/`` holds the whole model instead
  (``save_pretrained``), plus its tokenizer;
* ``trainer_state.pt``: optimiser state, learning-rate schedule, step, the task stream's
  position, the torch/numpy/python RNG states and running totals;
* ``config.yaml``: the resolved config of the run.

Checkpoints are written to a temporary folder and renamed into place, so a crash while
saving never leaves a half-written checkpoint behind. :func:`latest_checkpoint` finds the
newest complete one. With the same weights, RNG states and data position, a resumed run on
CPU reproduces the uninterrupted run's next step exactly.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.grpo.policy import is_peft_model

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint", "list_checkpoints", "capture_rng",
           "restore_rng", "load_adapter_weights", "STATE_FILE"]

STATE_FILE = "trainer_state.pt"
_STEP_DIR = re.compile(r"^step_(\d+)$")


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
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir()
             if (m := _STEP_DIR.match(p.name)) and (p / STATE_FILE).is_file()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def save_checkpoint(run_dir: str | os.PathLike, step: int, *, policy: Any, optimizer: torch.optim.Optimizer,
                    state: dict[str, Any], config: Any = None, tokenizer: Any = None, keep: int = 0) -> Path:
    """Write the checkpoint of ``step`` and prune old ones; returns its folder.

    ``state`` holds the trainer's own state (schedule, data position, RNG, totals); the
    optimiser's state is added here. ``keep > 0`` deletes all but the ``keep`` newest.
    """
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
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
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    if keep > 0:
        for old in list_checkpoints(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


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

    ``path`` is a checkpoint folder or a run folder (its latest checkpoint is used).
    """
    path = Path(path)
    if not (path / STATE_FILE).is_file():
        latest = latest_checkpoint(path)
        if latest is None:
            raise ConfigError(f"no checkpoint found in {str(path)!r}: give a run folder with checkpoints/step_* "
                              "or a checkpoint folder")
        path = latest
    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    if is_peft_model(policy):
        load_adapter_weights(policy, path / "adapter")
    else:
        _load_full_weights(policy, path / "model")
    optimizer.load_state_dict(state.pop("optimizer"))
    state["path"] = str(path)
    return state


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
