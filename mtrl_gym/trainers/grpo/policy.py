"""The trained model and its optimiser: LoRA or full fine-tuning, AdamW, the LR schedule.

:func:`prepare_policy` wraps a transformers causal LM in a peft LoRA adapter (or leaves
every weight trainable for full fine-tuning); :func:`build_optimizer` makes AdamW over the
trainable parameters; :class:`LRSchedule` gives the learning rate of each optimiser step
(warm-up, then constant, cosine or linear); :func:`autocast` is the mixed-precision
context of the training pass. Each is a small function so that a single-file training
script can use them without the :class:`~mtrl_gym.trainers.grpo.trainer.GRPOTrainer`.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable
from typing import Any

import torch

from mtrl_gym.error import ConfigError, DependencyNotInstalled

__all__ = ["prepare_policy", "build_optimizer", "LRSchedule", "autocast", "trainable_parameters",
           "reference_logprobs_fn", "is_peft_model", "torch_dtype", "resolve_autocast"]


def torch_dtype(name: str | None) -> torch.dtype | None:
    """``"bfloat16"`` -> ``torch.bfloat16``; None stays None."""
    if name is None:
        return None
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ConfigError(f"unknown dtype {name!r}; use float32, bfloat16 or float16")
    return value


def is_peft_model(model: Any) -> bool:
    """Whether ``model`` is a peft model (has adapters)."""
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def prepare_policy(model: Any, *, full_finetune: bool = False, lora_rank: int = 32, lora_alpha: float = 64.0,
                   lora_dropout: float = 0.0, lora_target_modules: list[str] | str = "all-linear",
                   gradient_checkpointing: bool = False, seed: int | None = None,
                   lora_layers: int | None = None) -> Any:
    """Make ``model`` trainable: add a LoRA adapter (default) or unfreeze every weight.

    The adapter's ``B`` matrices start at zero (peft's default), so the adapted model
    computes exactly what the base model does until the first update. ``seed`` seeds the
    random ``A`` matrices. A model that already carries an adapter is returned as is
    (its adapter is trained). ``lora_layers = N`` puts adapters on the last N transformer
    layers only: the backward pass then stops at the lowest adapted layer, so a step costs
    about ``1 + 2 N / layers`` forward passes instead of 3. The model is left in train mode.
    """
    if seed is not None:
        torch.manual_seed(seed)
    if full_finetune:
        for p in model.parameters():
            p.requires_grad_(True)
        policy = model
    elif is_peft_model(model):
        policy = model
    else:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise DependencyNotInstalled("peft", extra="train") from None
        targets, layers = lora_target_modules, None
        if lora_layers is not None:
            total = _num_layers(model)
            if not 1 <= lora_layers <= total:
                raise ConfigError(f"`lora_layers` must be between 1 and the model's {total} layers, got {lora_layers!r}")
            layers = list(range(total - lora_layers, total))
            if isinstance(targets, str):  # peft needs module names to pick layers
                targets = _linear_module_names(model)
        config = LoraConfig(r=lora_rank, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                            target_modules=targets, bias="none", task_type="CAUSAL_LM",
                            layers_to_transform=layers)
        try:
            with warnings.catch_warnings():  # peft reads transformers' deprecated alias; not the user's concern
                warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated",
                                        category=FutureWarning)
                policy = get_peft_model(model, config)
        except ValueError as e:
            raise ConfigError(f"cannot add LoRA adapters to {type(model).__name__}: {e}. Set "
                              "`lora_target_modules` to module names of this model (e.g. ['q_proj', 'v_proj'])") from None
    if gradient_checkpointing:
        policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if hasattr(policy, "enable_input_require_grads"):
            policy.enable_input_require_grads()
    policy.train()
    return policy


def _num_layers(model: Any) -> int:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return int(config.num_hidden_layers)


def _linear_module_names(model: Any) -> list[str]:
    """Names (last component) of the Linear layers inside the transformer blocks."""
    return sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules()
                   if isinstance(m, torch.nn.Linear) and ".layers." in name})


def trainable_parameters(model: Any) -> list[torch.nn.Parameter]:
    """Parameters with ``requires_grad``, in module order."""
    return [p for p in model.parameters() if p.requires_grad]


def build_optimizer(model: Any, *, learning_rate: float, weight_decay: float = 0.0,
                    betas: tuple[float, float] | list[float] = (0.9, 0.999), eps: float = 1e-8) -> torch.optim.AdamW:
    """AdamW over the trainable parameters."""
    params = trainable_parameters(model)
    if not params:
        raise ConfigError("the model has no trainable parameters: call prepare_policy() first")
    return torch.optim.AdamW(params, lr=learning_rate, betas=tuple(betas), eps=eps, weight_decay=weight_decay)


class LRSchedule:
    """Learning rate of optimiser step ``i`` (0-based): linear warm-up, then a shape.

    * warm-up: ``peak * (i + 1) / (warmup_steps + 1)`` for ``i < warmup_steps``;
    * ``constant``: ``peak``;
    * ``cosine``: from ``peak`` down to ``min_ratio * peak`` at ``total_steps``;
    * ``linear``: the same, along a straight line.

    :meth:`apply` sets the rate of the next step on an optimiser and advances; the state is
    the step counter alone (:meth:`state_dict`).

    >>> s = LRSchedule(1.0, "cosine", total_steps=4, warmup_steps=1)
    >>> [round(s.lr(i), 3) for i in range(5)]
    [0.5, 1.0, 0.75, 0.25, 0.0]
    """

    def __init__(self, peak: float, schedule: str = "constant", *, total_steps: int = 1,
                 warmup_steps: int = 0, min_ratio: float = 0.0):
        if schedule not in ("constant", "cosine", "linear"):
            raise ConfigError(f"`lr_schedule` must be 'constant', 'cosine' or 'linear', got {schedule!r}")
        self.peak, self.schedule = float(peak), schedule
        self.total_steps, self.warmup_steps, self.min_ratio = max(int(total_steps), 1), int(warmup_steps), min_ratio
        self.step_count = 0

    def lr(self, i: int) -> float:
        if i < self.warmup_steps:
            return self.peak * (i + 1) / (self.warmup_steps + 1)
        if self.schedule == "constant":
            return self.peak
        span = max(self.total_steps - self.warmup_steps, 1)
        progress = min(max((i - self.warmup_steps) / span, 0.0), 1.0)
        shape = 0.5 * (1.0 + math.cos(math.pi * progress)) if self.schedule == "cosine" else 1.0 - progress
        return self.peak * (self.min_ratio + (1.0 - self.min_ratio) * shape)

    def apply(self, optimizer: torch.optim.Optimizer) -> float:
        """Set the learning rate of the coming optimiser step; returns it."""
        lr = self.lr(self.step_count)
        for group in optimizer.param_groups:
            group["lr"] = lr
        self.step_count += 1
        return lr

    def state_dict(self) -> dict[str, int]:
        return {"step_count": self.step_count}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.step_count = int(state["step_count"])


def native_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` computes bfloat16 natively (CUDA with bf16; CPUs with AVX512-BF16 or AMX)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        try:
            return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):
            return False
    return False


def resolve_autocast(name: str | None, device: torch.device | str) -> torch.dtype | None:
    """The autocast dtype of a config value: None, a dtype name, or ``auto`` (bfloat16 where
    :func:`native_bf16`, else None)."""
    if name == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    return torch_dtype(name)


def autocast(device: torch.device | str, dtype: torch.dtype | None):
    """``torch.autocast`` for ``dtype`` on ``device``'s type, or a no-op when ``dtype`` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def reference_logprobs_fn(policy: Any, full_finetune: bool) -> Callable[[Callable[[Any], Any]], Any]:
    """A context-runner for the reference (base) model: ``run(fn)`` calls ``fn(model)``
    with the adapter disabled (LoRA) or on a frozen copy of the initial weights (full
    fine-tuning), without gradients."""
    if is_peft_model(policy) and not full_finetune:
        def run(fn):
            with torch.no_grad(), policy.disable_adapter():
                return fn(policy)
        return run
    import copy

    reference = copy.deepcopy(policy).eval()
    for p in reference.parameters():
        p.requires_grad_(False)

    def run_copy(fn):
        with torch.no_grad():
            return fn(reference)
    return run_copy

