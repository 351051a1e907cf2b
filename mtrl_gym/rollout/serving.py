"""The serving settings of a policy: how it is prompted and sampled, in one object.

A model trained with a format prefill, a stop string, a short system prompt without tool
schemas and a few tokens per turn has to be evaluated and served with exactly those, or it
scores near zero. :class:`ServingSettings` holds them once; training rollouts, evaluation
and the rollout CLI read this object (:meth:`ServingSettings.sampling`) instead of copying
its fields, and a training run saves it in its run folder (``serving.yaml``) for
``mtrl-gym eval --adapter`` to read back (:func:`load_serving`).

>>> s = ServingSettings(max_new_tokens=6, stop=['"'], temperature=0.7)
>>> s.sampling().max_new_tokens, s.sampling().stop, s.sampling(temperature=0.0).temperature
(6, ('"',), 0.0)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_gym.config_base import ConfigBase
from mtrl_gym.error import ConfigError

__all__ = ["ServingSettings", "SYSTEM_PROMPT_VARIANTS", "SERVING_FILE", "resolve_system_prompt", "load_serving"]

#: Named system-prompt variants; anything else is a path to a text file.
SYSTEM_PROMPT_VARIANTS = ("default", "none")
#: The file of a run folder that holds its serving settings.
SERVING_FILE = "serving.yaml"


@dataclass
class ServingSettings(ConfigBase):
    """How a policy is prompted and sampled (the same in training, evaluation and serving)."""

    system_prompt: str = "default"
    """``"default"`` (the env's), ``"none"`` (no system prompt) or a path to a text file."""
    tools: bool = True
    """``False``: no tool schemas in the system message (``SystemPrompt(tools=False)``), as
    when the model was trained without them; the env still plays tool calls."""
    assistant_prefix: str = ""
    """Text every assistant turn starts with, written before sampling (a format prefill); its
    tokens are context, not trained."""
    stop: list[str] = field(default_factory=list)
    """Stop strings: a turn ends with the token that completes one (kept in the turn)."""
    max_new_tokens: int = 256
    """Most tokens sampled per assistant turn."""
    temperature: float = 1.0
    """Sampling temperature; training log-probs use the same ``log_softmax(logits / T)``."""
    top_p: float = 1.0
    """Nucleus sampling threshold in (0, 1]."""
    top_k: int = 0
    """Top-k filter (0: off)."""
    constrained: bool = False
    """Dictionary decoding: every turn is one text of the env's action vocabulary
    (``EnvProfile.action_vocabulary``) followed by the first ``stop`` string
    (``mtrl_gym.rollout.constraint``; the ``hf`` sampler only). In training the update still
    trains the model's own, unconstrained distribution p: the sampled tokens come from the
    constrained q >= p, so ``tis_cap`` (required) weighs each token by ``min(p / q, cap)`` <= 1
    and ``old_logprobs: auto`` recomputes; validation rollouts stay unconstrained."""

    def __post_init__(self) -> None:
        if isinstance(self.stop, (str, tuple)):
            self.stop = [self.stop] if isinstance(self.stop, str) else list(self.stop)
        super().__post_init__()
        if any(not isinstance(x, str) or not x for x in self.stop):
            raise ConfigError(f"`stop` must be a list of non-empty strings, got {self.stop!r}")
        if not isinstance(self.system_prompt, str) or not self.system_prompt:
            raise ConfigError(f"`system_prompt` must be 'default', 'none' or a file path, got {self.system_prompt!r}")
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise ConfigError(f"`temperature` must be a finite number >= 0, got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"`top_p` must be in (0, 1], got {self.top_p!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ConfigError(f"`top_k` must be an integer >= 0, got {self.top_k!r}")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or self.max_new_tokens < 1:
            raise ConfigError(f"`max_new_tokens` must be an integer >= 1, got {self.max_new_tokens!r}")

    def sampling(self, *, constraint: Any = None, **changes: Any):
        """The :class:`~mtrl_gym.rollout.samplers.base.SamplingParams` of every turn (``changes``
        replace fields, e.g. ``temperature=0.0`` for greedy validation)."""
        from mtrl_gym.rollout.samplers.base import SamplingParams

        values = {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                  "max_new_tokens": self.max_new_tokens, "stop": tuple(self.stop), **changes}
        return SamplingParams(**values, constraint=constraint)

    def system_prompt_text(self) -> str | None:
        """The system prompt it stands for: None keeps the env's, ``""`` drops it, else a file's text."""
        return resolve_system_prompt(self.system_prompt)

    def prompt_wrapper(self):
        """A ``SystemPrompt`` wrapper (``env -> env``) for a non-default prompt or hidden tools; else None."""
        text = self.system_prompt_text()
        if text is None and self.tools:
            return None
        from mtrl_gym.wrappers import SystemPrompt

        tools = self.tools
        return lambda env: SystemPrompt(env, text, tools=tools)


def resolve_system_prompt(variant: str) -> str | None:
    """The system prompt a variant stands for: ``None`` keeps the env's, ``""`` drops it,
    else the contents of the file ``variant`` (read as UTF-8, trailing newline removed)."""
    if variant == "default":
        return None
    if variant == "none":
        return ""
    path = Path(variant).expanduser()
    if not path.is_file():
        raise ConfigError(f"system prompt {variant!r} is neither 'default', 'none' nor an existing file; "
                          "pass one of those or the path of a text file")
    return path.read_text(encoding="utf-8").rstrip("\n")


def load_serving(run_dir: str | os.PathLike) -> ServingSettings | None:
    """The serving settings saved in a run folder (``serving.yaml``); None when it has none."""
    path = Path(run_dir) / SERVING_FILE
    if not path.is_file():
        return None
    return ServingSettings.load(path)
