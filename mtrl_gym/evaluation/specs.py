"""What to evaluate and how: run specifications and the shared evaluation settings.

A *run* is one row of the report: a model (base checkpoint, a LoRA adapter on it, or an
OpenAI-compatible endpoint) or a reference policy (``solver``, ``random``), with its
serving settings. Every run of one evaluation plays the same tasks with the same seeds.

On the command line a run is written ``LABEL[:TEMPERATURE[:TOP_P]]``, where ``LABEL``
names a source given by the other flags (``base`` = ``--model``, ``trained`` =
``--adapter``, ``endpoint`` = ``--endpoint``, ``solver``, ``random``):

>>> sources = {"base": {"model": "smollm2-135m"}}
>>> spec = parse_run("base:0.7", sources, defaults={"top_p": 0.95})
>>> spec.name, spec.serving.temperature, spec.serving.top_p
('base:0.7', 0.7, 0.95)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError
from mtrl_gym.files import folder_sha256
from mtrl_gym.rollout.serving import SYSTEM_PROMPT_VARIANTS, ServingSettings, resolve_system_prompt

__all__ = ["RunSpec", "EvalConfig", "parse_run", "resolve_system_prompt", "adapter_digest", "POLICIES",
           "SYSTEM_PROMPT_VARIANTS", "ADAPTER_WEIGHT_FILES"]

#: Reference policies every report can show (:mod:`mtrl_gym.evaluation.policies`).
POLICIES = ("solver", "random")
#: The weight files a peft adapter folder may hold (either one).
ADAPTER_WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")


def adapter_digest(adapter: str | Path) -> str | None:
    """A short sha256 of what an adapter folder loads (``adapter_config.json`` and its weight
    files, by name and content), or None when it holds neither. Two folders with the same
    files have the same digest wherever they are; retraining into the same folder changes it."""
    digest = folder_sha256(Path(adapter).expanduser(), ("adapter_config.json", *ADAPTER_WEIGHT_FILES))
    return digest[:16] if digest else None


@dataclass
class RunSpec:
    """One model or policy to evaluate, with the settings it is served with.

    Exactly one source is set: ``model`` alone (a base checkpoint), ``model`` +
    ``adapter`` (or ``adapter`` alone: its ``adapter_config.json`` names the base),
    ``endpoint`` (``model`` then names the served model's tokenizer, for the chat
    template), ``policy``, or a ready ``sampler`` + ``tokenizer`` (Python API only).
    """

    name: str
    """Row label in reports and the key of the run's records (unique within an evaluation)."""
    model: str | None = None
    """Base model: embedded short name (``"smollm2-135m"``), Hugging Face id or local folder."""
    adapter: str | None = None
    """Folder of a LoRA adapter in peft format (``adapter_config.json`` + weights)."""
    endpoint: str | None = None
    """Root URL of an OpenAI-compatible server (``http://127.0.0.1:8000``)."""
    endpoint_model: str | None = None
    """Model name to request from the endpoint; ``None`` takes the first it lists."""
    policy: str | None = None
    """A reference policy of the env (``"solver"``, ``"random"``, ...; checked against the env's
    profile when the evaluation starts)."""
    serving: ServingSettings = field(default_factory=ServingSettings)
    """How the run is prompted and sampled (:class:`~mtrl_gym.rollout.serving.ServingSettings`:
    system prompt, tool schemas, format prefill, stop strings, tokens per turn, temperature,
    top-p, top-k, dictionary decoding); a mapping of its fields works too. An adapter is
    evaluated with the settings its training run saved (``mtrl-gym eval --adapter``).
    ``constrained`` decoding is a policy of its own: report it under its own name; it needs
    a model run (model, adapter or an hf sampler) and a stop string."""
    sampler: Any = field(default=None, repr=False, compare=False)
    """A ready :class:`~mtrl_gym.rollout.samplers.base.Sampler` (with ``tokenizer``)."""
    tokenizer: Any = field(default=None, repr=False, compare=False)
    """The tokenizer that goes with ``sampler``."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"a run needs a non-empty `name`, got {self.name!r}")
        if not isinstance(self.serving, ServingSettings):
            try:
                self.serving = ServingSettings.from_dict(dict(self.serving or {}))
            except (ConfigError, TypeError, ValueError) as e:
                raise ConfigError(f"run {self.name!r}: {e}") from None
        kinds = [k for k, on in (("endpoint", self.endpoint), ("policy", self.policy),
                                 ("sampler", self.sampler is not None)) if on]
        if not kinds and not (self.model or self.adapter):
            raise ConfigError(f"run {self.name!r} has no source: set `model`, `adapter`, `endpoint`, "
                              "`policy` or `sampler`")
        if len(kinds) > 1 or (kinds and kinds[0] != "endpoint" and (self.model or self.adapter)) \
                or (self.endpoint and self.adapter):
            raise ConfigError(f"run {self.name!r} sets several sources ({self.source_text()}); give one of "
                              "model[+adapter], endpoint, policy or sampler")
        if self.policy is not None and (not isinstance(self.policy, str) or not self.policy.strip()):
            raise ConfigError(f"run {self.name!r}: `policy` must be a policy name such as {list(POLICIES)}, "
                              f"got {self.policy!r}")
        if self.sampler is not None and self.tokenizer is None:
            raise ConfigError(f"run {self.name!r}: a `sampler` needs its `tokenizer` too")
        if self.endpoint is not None and not self.model and self.tokenizer is None:
            raise ConfigError(f"run {self.name!r}: an endpoint run needs the served model's tokenizer for the "
                              "chat template; set `model` (CLI: --model) to its name or folder")
        if self.serving.constrained and (self.kind in ("policy", "endpoint") or not self.serving.stop):
            raise ConfigError(f"run {self.name!r}: `constrained` decoding needs a model run (model, adapter or an "
                              "hf sampler) with a `stop` string that ends every action (e.g. the Wordle cpu "
                              "format: assistant_prefix ending in '\"guess\": \"', stop '\"')")

    @property
    def kind(self) -> str:
        """``"policy"``, ``"endpoint"``, ``"sampler"``, ``"adapter"`` or ``"model"``."""
        if self.policy:
            return "policy"
        if self.endpoint:
            return "endpoint"
        if self.sampler is not None:
            return "sampler"
        return "adapter" if self.adapter else "model"

    def source_text(self) -> str:
        parts = [f"{k}={getattr(self, k)}" for k in ("model", "adapter", "endpoint", "endpoint_model", "policy")
                 if getattr(self, k)]
        if self.sampler is not None:
            parts.append(f"sampler={type(self.sampler).__name__}")
        return ", ".join(parts) or "nothing"

    def describe(self) -> dict[str, Any]:
        """JSON-safe settings of this run (for summaries, resume checks and MLflow params); an
        adapter run also records ``adapter_sha256``, the digest of its folder's contents."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        for f in fields(self):
            if f.name in ("name", "sampler", "tokenizer", "serving"):
                continue
            if getattr(self, f.name) is not None:
                out[f.name] = getattr(self, f.name)
        for key, value in self.serving.to_dict().items():  # flat, as the reports and resume checks read them
            if not (key in ("constrained", "wrappers") and not value):  # off: as recorded before the field existed
                out[key] = value
        if self.sampler is not None:
            out["sampler"] = type(self.sampler).__name__
        if self.adapter is not None:  # what the folder holds: the same path may hold another adapter later
            digest = adapter_digest(self.adapter)
            if digest:
                out["adapter_sha256"] = digest
        if self.kind == "policy":  # sampling settings do not apply to a text policy
            for key in ("temperature", "top_p", "top_k", "max_new_tokens", "assistant_prefix", "stop", "tools"):
                out.pop(key, None)
        elif self.serving.system_prompt not in SYSTEM_PROMPT_VARIANTS:
            text = resolve_system_prompt(self.serving.system_prompt)
            out["system_prompt_sha256"] = hashlib.sha256((text or "").encode()).hexdigest()[:16]
        return out


@dataclass
class EvalConfig:
    """Settings shared by every run of one evaluation."""

    n: int = 8
    """Samples (episodes) per task and run; pass@k is reported for k = 1, 2, 4, ... <= n."""
    seed: int = 0
    """Base seed: task ``i`` resets with ``seed + i`` in every run; sampling seeds derive from it."""
    max_turns: int | None = None
    """Most assistant turns per episode; ``None`` plays until the env ends it (policies stop at 64)."""
    max_episode_tokens: int = 4096
    """Token budget of one episode's context (model runs)."""
    time_budget_s: float | None = None
    """Wall-clock seconds per episode; over it, the episode counts as failed."""
    batch_tasks: int = 8
    """Tasks per rollout batch (``batch_tasks * n`` episodes sampled together). It fixes the
    sampling seeds, so a resumed or repeated evaluation needs the same value to reproduce
    the same episodes; a resume plays a batch with unfinished episodes again whole."""
    ks: tuple[int, ...] | None = None
    """k values of pass@k; ``None`` uses 1, 2, 4, ... up to ``n``."""
    confidence: float = 0.95
    """Confidence level of the bootstrap intervals."""
    bootstrap_resamples: int = 2000
    """Bootstrap resamples (over tasks) per interval."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make``."""
    wrappers: Sequence[Callable] = ()
    """Training-time wrappers (shaping, format penalties) to apply, ``env -> env``. Their
    reward is reported as ``training_reward``; success and ``reward`` always come from the
    bare env's outcome."""
    save_tokens: bool = False
    """Keep token ids, loss masks and log-probs in the JSONL (large); counts are always kept."""
    report_examples: int = 2
    """Full trajectories per run shown in the report (a success and a failure when both exist)."""
    reference_run: str | None = None
    """Run the others are compared to (paired differences); ``None`` picks the first model run."""
    progress: bool = False
    """Show a progress bar of finished episodes."""

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError(f"`n` (samples per task) must be >= 1, got {self.n!r}")
        if self.batch_tasks < 1:
            raise ConfigError(f"`batch_tasks` must be >= 1, got {self.batch_tasks!r}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError(f"`max_turns` must be >= 1 or None, got {self.max_turns!r}")
        if self.ks is not None:
            ks = tuple(int(k) for k in self.ks)
            bad = [k for k in ks if not 1 <= k <= self.n]
            if bad or not ks:
                raise ConfigError(f"`ks` must be non-empty values in [1, n={self.n}], got {list(self.ks)}")
            self.ks = tuple(sorted(set(ks)))
        if not 0 < self.confidence < 1:
            raise ConfigError(f"`confidence` must be in (0, 1), got {self.confidence!r}")
        if self.bootstrap_resamples < 1:
            raise ConfigError(f"`bootstrap_resamples` must be >= 1, got {self.bootstrap_resamples!r}")
        if self.report_examples < 0:
            raise ConfigError(f"`report_examples` must be >= 0, got {self.report_examples!r}")

    def fingerprint(self) -> dict[str, Any]:
        """The settings that decide which episodes are played (compared on resume)."""
        return {"n": self.n, "seed": self.seed, "max_turns": self.max_turns,
                "max_episode_tokens": self.max_episode_tokens, "time_budget_s": self.time_budget_s,
                "batch_tasks": self.batch_tasks, "env_kwargs": dict(self.env_kwargs),
                "wrappers": [_callable_name(w) for w in self.wrappers]}


def _callable_name(fn: Any) -> str:
    fn = getattr(fn, "func", fn)  # a functools.partial (a config's wrapper with kwargs): the class it makes
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def _number(text: str, what: str, token: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"run {token!r}: {what} {text!r} is not a number; write LABEL[:TEMPERATURE[:TOP_P]], "
                          "e.g. trained:1.0 or base:0.7:0.95") from None


def parse_run(token: str, sources: Mapping[str, Mapping[str, Any]], *,
              defaults: Mapping[str, Any] | None = None) -> RunSpec:
    """A :class:`RunSpec` from ``LABEL[:TEMPERATURE[:TOP_P]]``.

    ``sources`` maps labels to source fields (``{"trained": {"adapter": "out/final"}}``);
    ``solver`` and ``random`` are always available. ``defaults`` fills the other
    :class:`RunSpec` fields (temperature, top_p, max_new_tokens, system_prompt, ...).
    Model runs are named ``LABEL:TEMPERATURE`` (plus ``:TOP_P`` when given), so
    ``trained`` and ``trained:1`` both become ``trained:1.0`` at temperature 1.
    """
    label, *rest = token.strip().split(":")
    known = dict(sources)
    for p in POLICIES:
        known.setdefault(p, {"policy": p})
    if label not in known:
        raise ConfigError(f"run {token!r}: unknown label {label!r}; known labels are {sorted(known)} "
                          "(base needs --model, trained --adapter, endpoint --endpoint)")
    if len(rest) > 2:
        raise ConfigError(f"run {token!r}: write LABEL[:TEMPERATURE[:TOP_P]]")
    kwargs: dict[str, Any] = dict(defaults or {})
    kwargs.update(known[label])
    serving_keys = {f.name for f in fields(ServingSettings)}
    serving = {k: kwargs.pop(k) for k in list(kwargs) if k in serving_keys}
    if "policy" in known[label]:
        serving.pop("constrained", None)
        if rest:
            raise ConfigError(f"run {token!r}: the {label} policy takes no sampling settings; write {label!r}")
        return RunSpec(name=label, serving=serving, **kwargs)
    if rest:
        serving["temperature"] = _number(rest[0], "temperature", token)
    if len(rest) == 2:
        serving["top_p"] = _number(rest[1], "top_p", token)
    name = f"{label}:{float(serving.get('temperature', 1.0))!r}"
    if len(rest) == 2:
        name += f":{float(serving['top_p'])!r}"
    if serving.get("constrained"):
        name += ":constrained"
    return RunSpec(name=name, serving=serving, **kwargs)
