"""The SFT stage's configuration: one dataclass, loadable from YAML/TOML, overridable.

:class:`SFTConfig` holds every setting of a supervised fine-tuning run on demonstration
files (``mtrl-gym demos``). Model loading, LoRA, the optimiser, checkpoints and tracking
are the GRPO trainer's, so the fields of the same name mean the same thing there.

>>> SFTConfig(demos=["demos.jsonl"], batch_size=8, max_steps=10).batch_size
8
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["SFTConfig"]

_PACKING = ("auto", "shared_prefix", "padding_free", "sorted")


@dataclass
class SFTConfig:
    """Everything an SFT run needs."""

    demos: list[str] = field(default_factory=list)
    """Demonstration files (trajectory JSONL from ``mtrl-gym demos``); their sequences are pooled."""
    output_dir: str = "runs/sft"
    """Run folder: resolved config, checkpoints (the adapter), metrics.jsonl, summary."""
    run_name: str | None = None
    """Name of the run in the tracker; default: the output folder's name."""
    seed: int = 0
    """Seeds the adapter's initialisation and the order of the demonstrations."""

    model: str = "smollm2-135m"
    """Embedded model name, Hugging Face id or local folder (the demonstrations' tokenizer)."""
    model_dtype: str | None = None
    """Dtype the weights are loaded in; None keeps the checkpoint's."""
    device: str | None = None
    """``cpu``, ``cuda``...; None picks CUDA when available."""
    autocast_dtype: str | None = "auto"
    """``torch.autocast`` dtype of the forward/backward (``bfloat16``, ``float16``, ``auto``, None)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, more time)."""

    full_finetune: bool = False
    """Train every weight instead of a LoRA adapter."""
    lora_rank: int = 16
    """LoRA rank r."""
    lora_alpha: float = 32.0
    """LoRA scale numerator: the update is ``(alpha / r) * B @ A``."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA input."""
    lora_target_modules: list[str] | str = "all-linear"
    """Modules that get adapters: ``all-linear`` or names such as ``[q_proj, v_proj]``."""
    lora_layers: int | None = None
    """Adapt only the last N transformer layers (the backward pass stops there: faster); None: all."""

    batch_size: int = 8
    """Demonstrations (sequences) per optimiser step."""
    max_steps: int | None = 100
    """Optimiser steps; None: run ``max_epochs``."""
    max_epochs: float | None = None
    """Passes over the demonstrations; the run stops at whichever limit comes first."""
    max_minutes: float | None = None
    """Stop after this many minutes of training (checked after each step); None: no limit."""
    micro_batch_tokens: int = 8192
    """Token budget of one forward/backward (gradients accumulate exactly over micro-batches)."""
    packing: str = "auto"
    """Micro-batch layout, as in GRPO: ``shared_prefix`` (demonstrations that start with the
    same prompt run it once), ``padding_free``, ``sorted`` or ``auto``."""

    learning_rate: float = 3e-4
    """Peak learning rate of AdamW."""
    lr_schedule: str = "cosine"
    """``constant``, ``cosine`` or ``linear`` decay (to ``min_lr_ratio``)."""
    warmup_steps: int = 5
    """Optimiser steps of linear warm-up."""
    min_lr_ratio: float = 0.1
    """Final learning rate as a fraction of the peak."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm; None disables clipping."""

    tracker: str = "mlflow"
    """``mlflow`` (local store) or ``none``; metrics.jsonl is always written."""
    tracking_uri: str | None = None
    """MLflow tracking URI (as in GRPO)."""
    experiment: str = "mtrl-gym"
    """MLflow experiment name."""
    progress: bool = True
    """Show a progress bar."""
    log_every: int = 1
    """Write metrics every N steps."""
    save_every: int = 50
    """Checkpoint every N steps (and after the last step); 0: only at the end."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept; 0 keeps all."""

    def __post_init__(self) -> None:
        if isinstance(self.demos, (str, os.PathLike)):
            self.demos = [str(self.demos)]
        self.demos = [str(d) for d in self.demos]
        for name in ("batch_size", "micro_batch_tokens", "log_every", "lora_rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"`{name}` must be an integer >= 1, got {value!r}")
        for name in ("warmup_steps", "save_every", "keep_checkpoints"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"`{name}` must be an integer >= 0, got {value!r}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise ConfigError(f"`max_steps` must be an integer >= 1 or None, got {self.max_steps!r}")
        if self.max_epochs is not None and not (self.max_epochs > 0 and math.isfinite(self.max_epochs)):
            raise ConfigError(f"`max_epochs` must be a number > 0 or None, got {self.max_epochs!r}")
        if self.max_steps is None and self.max_epochs is None:
            raise ConfigError("set `max_steps` or `max_epochs` (both are None, so the run would never end)")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ConfigError(f"`max_minutes` must be > 0 or None, got {self.max_minutes!r}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ConfigError(f"`learning_rate` must be a finite number > 0, got {self.learning_rate!r}")
        if self.lr_schedule not in ("constant", "cosine", "linear"):
            raise ConfigError(f"`lr_schedule` must be 'constant', 'cosine' or 'linear', got {self.lr_schedule!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(f"`min_lr_ratio` must be in [0, 1], got {self.min_lr_ratio!r}")
        if self.packing not in _PACKING:
            raise ConfigError(f"`packing` must be one of {_PACKING}, got {self.packing!r}")
        if self.tracker not in ("mlflow", "none"):
            raise ConfigError(f"`tracker` must be 'mlflow' or 'none', got {self.tracker!r}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ConfigError(f"`lora_dropout` must be in [0, 1), got {self.lora_dropout!r}")

    @property
    def resolved_run_name(self) -> str:
        return self.run_name or Path(self.output_dir).name or "sft"

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SFTConfig:
        """A config from a mapping; unknown keys raise ConfigError naming them."""
        import difflib

        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in values if k not in names]
        if unknown:
            hints = [f"{k!r}" + (f" (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(k, names, 1)) else "")
                     for k in unknown]
            raise ConfigError(f"unknown SFT config key(s): {', '.join(hints)}")
        return cls(**dict(values))

    @classmethod
    def load(cls, *sources: str | os.PathLike | Mapping[str, Any], overrides: Iterable[str] = ()) -> SFTConfig:
        """Merge YAML/TOML files and mappings in order, then ``key=value`` overrides."""
        from mtrl_gym.trainers.grpo.config_io import (
            coerce,
            parse_override,
            read_config_file,
        )

        merged: dict[str, Any] = {}
        for source in sources:
            merged.update(source if isinstance(source, Mapping) else read_config_file(source))
        for item in overrides:
            key, value = parse_override(item)
            merged[key] = value
        import typing

        hints = typing.get_type_hints(cls)
        merged = {k: coerce(k, v, hints[k]) if k in hints else v for k, v in merged.items()}
        return cls.from_dict(merged)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the config as YAML (``.yaml``/``.yml``) or JSON."""
        from mtrl_gym.trainers.grpo.config_io import yaml_module

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.to_dict()
        text = yaml_module().safe_dump(data, sort_keys=False) if path.suffix in (".yaml", ".yml") else json.dumps(data, indent=2)
        path.write_text(text, encoding="utf-8")
        return path
