"""The SFT stage's configuration: one dataclass, loadable from YAML/TOML, overridable.

:class:`SFTConfig` holds every setting of a supervised fine-tuning run on demonstration
files (``mtrl-gym demos``). Model loading is the GRPO trainer's, and the setting groups
``lora``, ``optimizer``, ``tracking`` and ``checkpoints`` are the same classes as GRPO's
(:mod:`mtrl_gym.trainers.settings`), with SFT's own defaults (LoRA rank 16, a cosine schedule
with warm-up), so a setting of the same name means the same thing in both.

>>> SFTConfig(demos=["demos.jsonl"], batch_size=8, max_steps=10).batch_size
8
>>> SFTConfig(lora={"rank": 8}).lora.alpha  # the other settings keep SFT's defaults
32.0
>>> SFTConfig.load({"batch_size": "4"}, overrides=["serving.max_new_tokens=6"]).serving.max_new_tokens
6
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from mtrl_gym.config_base import ConfigBase
from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.serving import ServingSettings
from mtrl_gym.trainers.settings import CheckpointSettings, LoRASettings, OptimizerSettings, TrackingSettings

__all__ = ["SFTConfig"]

_PACKING = ("auto", "shared_prefix", "padding_free", "sorted")


@dataclass
class SFTConfig(ConfigBase):
    """Everything an SFT run needs."""

    KIND = "SFT config"

    demos: list[str] = field(default_factory=list)
    """Demonstration files (trajectory JSONL from ``mtrl-gym demos``); their sequences are pooled."""
    distill: list[str] = field(default_factory=list)
    """Games a *constrained* policy played (dictionary decoding, ``serving.constrained``), as
    demonstration files (e.g. :func:`mtrl_gym.trainers.demos.learner_demos` of its evaluation
    records), pooled with ``demos``. Their assistant tokens are not copied: each is scored by
    ``-log P(every token the constraint allows there)``, the KL divergence from the constrained
    policy (this model masked to the env's action vocabulary and renormalised) to this model, on
    the constrained policy's own states. It moves the model's mass onto tokens that continue an
    allowed action and leaves the choice among them to the model (measured on Wordle in
    docs/training.md). The constraint is the env's action vocabulary followed by the serving
    settings' first stop string, as in dictionary decoding."""
    distill_repeat: int = 1
    """How many times each ``distill`` game enters the pool (its weight beside ``demos``)."""
    distill_fitting: bool = False
    """Distil toward the actions that fit the board, not the whole vocabulary: each ``distill``
    turn's allowed tokens are narrowed to those continuing an action the env's profile calls
    fitting there (``EnvProfile.fitting_actions``; Wordle: the answers consistent with every
    clue so far), as long as the played action's prefix still begins one. Needs ``distill``
    and an env that declares ``fitting_actions``."""
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

    init_adapter: str | None = None
    """A LoRA adapter folder to start from (an earlier SFT run's ``checkpoints/step_N/adapter``):
    it is loaded and trained further, with its own rank and modules (the ``lora`` group is then
    unused); a second round on new data, e.g. a learner's own games relabelled by the teacher."""
    lora: LoRASettings = field(default_factory=lambda: LoRASettings(rank=16, alpha=32.0))
    """The LoRA adapter that is trained (rank 16, alpha 32 by default) or ``full_finetune``."""

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
    optimizer: OptimizerSettings = field(default_factory=lambda: OptimizerSettings(
        lr_schedule="cosine", warmup_steps=5, min_lr_ratio=0.1))
    """AdamW's schedule (by default cosine to 0.1 of the peak after 5 warm-up steps), weight
    decay, betas, epsilon and gradient clipping."""

    tracking: TrackingSettings = field(default_factory=TrackingSettings)
    """Where metrics go besides ``metrics.jsonl``: the tracker (MLflow or none), its URI and experiment."""
    progress: bool = True
    """Show a progress bar."""
    log_every: int = 1
    """Write metrics every N steps."""
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    """How often the run checkpoints (``save_every``) and how many checkpoints it keeps."""
    serving: ServingSettings | None = None
    """How the adapter is to be served (prefill, stop strings, ...), saved as ``serving.yaml``
    in the run folder for ``mtrl-gym eval --adapter``; None: the demonstrations' own (from
    their ``.meta.json``)."""

    def __post_init__(self) -> None:
        if isinstance(self.demos, (str, os.PathLike)):
            self.demos = [str(self.demos)]
        self.demos = [str(d) for d in self.demos]
        if isinstance(self.distill, (str, os.PathLike)):
            self.distill = [str(self.distill)]
        self.distill = [str(d) for d in self.distill]
        super().__post_init__()
        for name in ("batch_size", "micro_batch_tokens", "log_every", "distill_repeat"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"`{name}` must be an integer >= 1, got {value!r}")
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
        if self.init_adapter is not None and self.lora.full_finetune:
            raise ConfigError("`init_adapter` continues a LoRA adapter, and `lora.full_finetune` trains every weight "
                              "instead: set one of them")
        if self.distill_fitting and not self.distill:
            raise ConfigError("`distill_fitting` narrows the targets of `distill` games, and `distill` names none "
                              "(give `--distill FILE` with `--distill-fitting`)")
        if self.packing not in _PACKING:
            raise ConfigError(f"`packing` must be one of {_PACKING}, got {self.packing!r}")

    @property
    def resolved_run_name(self) -> str:
        return self.run_name or Path(self.output_dir).name or "sft"
