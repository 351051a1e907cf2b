"""The serving settings of a policy: how it is prompted and sampled, in one object.

A model trained with a format prefill, a stop string, a short system prompt without tool
schemas and a few tokens per turn has to be evaluated and served with exactly those, or it
scores near zero. :class:`ServingSettings` holds them once; training rollouts, evaluation
and the rollout CLI read this object (:meth:`ServingSettings.sampling`) instead of copying
its fields, and a training run saves it in its run folder (``serving.yaml``) for
``mtrl-gym eval --adapter`` to read back (:func:`load_serving`).

What the policy reads belongs here too: ``wrappers`` lists the wrappers that change only the
observation text (such as :class:`~mtrl_gym.wrappers.WordleRecap`), and
:meth:`ServingSettings.env_wrappers` applies them, then the system prompt, in training,
demonstrations and evaluation alike, so an adapter trained with them is evaluated with them.

>>> s = ServingSettings(max_new_tokens=6, stop=['"'], temperature=0.7)
>>> s.sampling().max_new_tokens, s.sampling().stop, s.sampling(temperature=0.0).temperature
(6, ('"',), 0.0)
"""

from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_gym.config_base import ConfigBase, looks_structured, parse_structured
from mtrl_gym.error import ConfigError

__all__ = ["ServingSettings", "SYSTEM_PROMPT_VARIANTS", "SERVING_FILE", "resolve_system_prompt", "load_serving",
           "view_wrapper_spec", "observation_wrappers", "check_listed_once"]

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
    wrappers: list[dict[str, Any]] = field(default_factory=list)
    """Wrappers that change only what the policy reads, as ``{"name": ..., "kwargs": {...}}``
    (or a bare name), e.g. ``[{"name": "WordleRecap"}]``: applied outside the run's
    ``env_wrappers`` and inside the system prompt, in training and validation rollouts,
    demonstrations and evaluation. Only a wrapper class that declares ``observation_only =
    True`` is accepted (the reward, ``info`` and the game stay the env's); put any other in
    ``env_wrappers``."""

    def __post_init__(self) -> None:
        if isinstance(self.stop, (str, tuple)):
            self.stop = [self.stop] if isinstance(self.stop, str) else list(self.stop)
        if isinstance(self.wrappers, str) and looks_structured(self.wrappers):  # `--set serving.wrappers=[...]`
            self.wrappers = parse_structured("wrappers", self.wrappers)
        if isinstance(self.wrappers, str) and self.wrappers.strip().lower() == "none":
            self.wrappers = []
        if isinstance(self.wrappers, (str, dict, tuple)):
            self.wrappers = [self.wrappers] if isinstance(self.wrappers, (str, dict)) else list(self.wrappers)
        if not isinstance(self.wrappers, list):
            raise ConfigError(f"`wrappers` must be a list of wrapper specs, got {self.wrappers!r}")
        self.wrappers = [view_wrapper_spec(w, index=i) for i, w in enumerate(self.wrappers)]
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

    def env_wrappers(self) -> list:
        """What the policy reads the env through, innermost first: the ``wrappers``, then the
        system prompt (:meth:`prompt_wrapper`, when there is one); callables ``env -> env``
        for the outside of the run's own env wrappers."""
        from mtrl_gym.rollout.sources.local import build_wrappers

        prompt = self.prompt_wrapper()
        return [*build_wrappers(self.wrappers), *([prompt] if prompt is not None else [])]


def view_wrapper_spec(spec: Any, *, index: int | None = None, where: str = "wrappers") -> dict[str, Any]:
    """``spec`` (a name or ``{"name", "kwargs"}``) as ``{"name": ..., "kwargs": {...}}``,
    checked: the class must resolve, declare ``observation_only = True`` and take the kwargs."""
    from mtrl_gym.rollout.sources.local import resolve_wrapper, wrapper_spec

    spec = wrapper_spec(where, index, spec)
    at = where if index is None else f"{where}[{index}]"
    try:
        cls = resolve_wrapper(spec["name"])
    except ConfigError as e:
        raise ConfigError(f"`{at}`: {e}") from None
    if getattr(cls, "observation_only", False) is not True:
        raise ConfigError(f"`{at}`: {spec['name']!r} may change more than what the policy reads (its class does not "
                          "declare observation_only = True); put it in the run's env_wrappers instead")
    try:
        inspect.signature(cls).bind(None, **spec["kwargs"])  # the env, then the spec's options
    except TypeError as e:
        raise ConfigError(f"`{at}`: kwargs {spec['kwargs']!r} do not fit {spec['name']!r} ({e})") from None
    return spec


def observation_wrappers(specs: Any) -> list[dict[str, Any]]:
    """The specs in ``specs`` whose class declares ``observation_only`` (what a policy read),
    normalised, each once; the others (shaping, curricula, one not importable here) are left out."""
    out: list[dict[str, Any]] = []
    for spec in specs or []:
        try:
            view = view_wrapper_spec(spec)
        except ConfigError:
            continue
        if view not in out:
            out.append(view)
    return out


def check_listed_once(env_wrappers: list[dict[str, Any]], serving: ServingSettings, *,
                      where: str = "env_wrappers") -> None:
    """Refuse a serving wrapper that ``env_wrappers`` names too: the policy would read its text twice."""
    names = {w["name"] for w in serving.wrappers} & {w["name"] for w in env_wrappers}
    if names:
        raise ConfigError(f"{sorted(names)} is in both `{where}` and `serving.wrappers`, so the policy would read "
                          "its line twice; keep it in `serving.wrappers` only")


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
