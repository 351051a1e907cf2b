"""The setting groups both trainers share: LoRA, the optimiser, tracking and checkpoints.

:class:`~mtrl_gym.trainers.grpo.config.GRPOConfig` and
:class:`~mtrl_gym.trainers.sft.config.SFTConfig` hold each of these as a nested group (``lora``,
``optimizer``, ``tracking``, ``checkpoints``), so a setting is documented once, here, and means
the same in both; each config gives a group its own defaults with ``default_factory`` (SFT's
LoRA rank is 16, GRPO's 32). A group validates its own values; a check that involves another
group's value stays in the config. The ``at_least``/``one_of``/... checks are the ones every
trainer config uses.

>>> LoRASettings(rank=8).alpha
64.0
>>> OptimizerSettings(lr_schedule="cosine", warmup_steps=5).adam_betas
[0.9, 0.999]
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mtrl_gym.config_base import ConfigBase
from mtrl_gym.error import ConfigError

__all__ = ["LoRASettings", "OptimizerSettings", "TrackingSettings", "CheckpointSettings", "LR_SCHEDULES",
           "TRACKERS", "at_least", "optional_at_least", "positive_or_none", "one_of"]

LR_SCHEDULES = ("constant", "cosine", "linear")
TRACKERS = ("mlflow", "none")


@dataclass
class LoRASettings(ConfigBase):
    """The trained weights: a LoRA adapter (its shape and where it goes) or, with
    ``full_finetune``, every weight."""

    full_finetune: bool = False
    """Train every weight instead of a LoRA adapter (the other ``lora`` settings are then unused)."""
    rank: int = 32
    """LoRA rank r. The adapter of a ``d_out x d_in`` weight has ``r * (d_in + d_out)`` parameters."""
    alpha: float = 64.0
    """LoRA scale numerator: the update is ``(alpha / r) * B @ A``."""
    dropout: float = 0.0
    """Dropout on the LoRA input. Keep 0 for RL: dropout makes the trainer's log-probs
    differ from the sampler's."""
    target_modules: list[str] | str = "all-linear"
    """Modules that get adapters: ``all-linear`` or names such as ``[q_proj, v_proj]``."""
    layers: int | None = None
    """Adapt only the last N transformer layers (the backward pass stops there: faster); None: all."""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, "rank", 1)
        if not self.alpha > 0:
            raise ConfigError(f"`alpha` must be > 0, got {self.alpha!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"`dropout` must be in [0, 1), got {self.dropout!r}")
        targets = self.target_modules
        if isinstance(targets, str):
            ok = bool(targets)
        else:
            ok = bool(targets) and all(isinstance(t, str) and t for t in targets)
            self.target_modules = list(targets)
        if not ok:
            raise ConfigError("`target_modules` must be 'all-linear' or a non-empty list of module "
                              f"names such as ['q_proj', 'v_proj'], got {targets!r}")
        optional_at_least(self, "layers", 1)

    def policy_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`mtrl_gym.trainers.grpo.policy.prepare_policy` they stand for."""
        return {"full_finetune": self.full_finetune, "lora_rank": self.rank, "lora_alpha": self.alpha,
                "lora_dropout": self.dropout, "lora_target_modules": self.target_modules,
                "lora_layers": self.layers}


@dataclass
class OptimizerSettings(ConfigBase):
    """AdamW and its learning-rate schedule (the peak, ``learning_rate``, is a top-level field)."""

    lr_schedule: str = "constant"
    """``constant``, ``cosine`` (to ``min_lr_ratio * learning_rate``) or ``linear`` decay."""
    warmup_steps: int = 0
    """Optimiser steps of linear warm-up from 0."""
    min_lr_ratio: float = 0.0
    """Final learning rate of the cosine and linear schedules, as a fraction of the peak."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay."""
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """AdamW ``(beta1, beta2)``."""
    adam_eps: float = 1e-8
    """AdamW epsilon (added to the denominator's square root)."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this; None disables clipping (the norm is logged)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of(self, "lr_schedule", LR_SCHEDULES)
        at_least(self, "warmup_steps", 0)
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(f"`min_lr_ratio` must be in [0, 1], got {self.min_lr_ratio!r}")
        if not self.weight_decay >= 0:
            raise ConfigError(f"`weight_decay` must be >= 0, got {self.weight_decay!r}")
        betas = list(self.adam_betas)
        if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0.0 <= b < 1.0 for b in betas):
            raise ConfigError(f"`adam_betas` must be two numbers in [0, 1), e.g. [0.9, 0.999], got {self.adam_betas!r}")
        self.adam_betas = [float(b) for b in betas]
        if not self.adam_eps > 0:
            raise ConfigError(f"`adam_eps` must be > 0, got {self.adam_eps!r}")
        positive_or_none(self, "max_grad_norm")


@dataclass
class TrackingSettings(ConfigBase):
    """Where a run's metrics go besides its run folder's ``metrics.jsonl`` (always written)."""

    tracker: str = "mlflow"
    """``mlflow`` (local store by default, no server) or ``none``. metrics.jsonl is always written."""
    uri: str | None = None
    """MLflow tracking URI; None: ``$MLFLOW_TRACKING_URI``, else ``mlflow.db`` in the run
    folder (artifacts under ``<run folder>/mlruns``)."""
    experiment: str = "mtrl-gym"
    """MLflow experiment name."""

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of(self, "tracker", TRACKERS)


@dataclass
class CheckpointSettings(ConfigBase):
    """When a run saves its trainable weights, optimiser and data position (``checkpoints/step_N``)."""

    save_every: int = 50
    """Checkpoint every N steps (and after the last step, and on Ctrl-C); 0: only those."""
    keep: int = 2
    """Most recent checkpoints kept (older ones are deleted); 0 keeps all."""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, "save_every", 0)
        at_least(self, "keep", 0)


# ---------------------------------------------------------------------- field checks


def at_least(cfg: Any, name: str, low: int) -> None:
    """``cfg.<name>`` must be an integer >= ``low``."""
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"`{name}` must be an integer >= {low}, got {value!r}")


def optional_at_least(cfg: Any, name: str, low: int) -> None:
    """``cfg.<name>`` must be None or an integer >= ``low``."""
    value = getattr(cfg, name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
        raise ConfigError(f"`{name}` must be an integer >= {low} or None, got {value!r}")


def positive_or_none(cfg: Any, name: str) -> None:
    """``cfg.<name>`` must be None or a finite number > 0."""
    value = getattr(cfg, name)
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"`{name}` must be a number > 0 or None, got {value!r}")


def one_of(cfg: Any, name: str, choices: Sequence[str]) -> None:
    """``cfg.<name>`` must be one of ``choices`` (the error suggests the closest)."""
    value = getattr(cfg, name)
    if value not in choices:
        close = difflib.get_close_matches(str(value), list(choices), n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"`{name}` must be one of {', '.join(map(repr, choices))}, got {value!r}.{hint}")
