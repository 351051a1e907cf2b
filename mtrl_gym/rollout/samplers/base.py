"""The sampler interface: prompt token ids in, sampled token ids and log-probs out.

Every sampler (transformers, vLLM in-process, an OpenAI-compatible endpoint) implements
:class:`Sampler`. The rollout engine only talks to this interface, so a trajectory is
token-in/token-out whatever produced it.

Conventions every implementation follows:

* ``logprobs[i]`` is the log-probability of ``token_ids[i]`` under the *temperature-scaled*
  distribution ``log_softmax(logits / temperature)`` before top-k/top-p truncation (with
  ``temperature == 0`` it is the log-probability under the unscaled logits). The trainer
  recomputes log-probs the same way.
* Generation stops at the tokenizer's end-of-sequence tokens, at ``stop_token_ids``, at a
  ``stop`` string, or after ``max_new_tokens``. The token that ended generation (EOS, stop
  token, or the token completing a stop string) **is kept** in ``token_ids``: the model is
  trained to emit it, and no token is ever cut in half.
* ``session_id`` names an episode. A sampler that can cache the KV state of an episode's
  earlier turns (HF, vLLM prefix caching) re-uses it when the new prompt extends the cached
  tokens exactly, and reports the prompt tokens it did not have to compute in
  ``cached_tokens``. :meth:`Sampler.end_session` frees that state.
* One failing request must not fail the batch where the backend allows it: the request's
  result has ``finish_reason == "error"`` and ``error`` set. A backend that fails as a
  whole raises :class:`mtrl_gym.error.SamplerError`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.constraint import CompletionConstraint

__all__ = ["SamplingParams", "SampleRequest", "SampleResult", "Sampler", "FINISH_REASONS"]

FINISH_REASONS = ("stop", "length", "error")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling: keep the smallest set of tokens whose probability sums to ``top_p``."""
    top_k: int = 0
    """Keep only the ``top_k`` most likely tokens; 0 disables the filter."""
    max_new_tokens: int = 256
    """Upper bound on sampled tokens for this call (one assistant turn)."""
    stop: tuple[str, ...] = ()
    """Stop strings; the token that completes one is kept (see module docstring)."""
    stop_token_ids: tuple[int, ...] = ()
    """Extra stop token ids besides the tokenizer's end-of-sequence tokens."""
    seed: int | None = None
    """Seed for this request's random draws; ``None`` leaves it to the sampler."""
    constraint: CompletionConstraint | None = field(default=None, compare=False)
    """Restrict the completion to one of a fixed list of texts
    (:mod:`mtrl_gym.rollout.constraint`); only samplers with ``supports_constraints``
    accept it. Log-probs are then under the masked, renormalised distribution."""

    def __post_init__(self) -> None:
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise ConfigError(f"`temperature` must be a finite number >= 0, got {self.temperature!r}")
        if not (0 < self.top_p <= 1):
            raise ConfigError(f"`top_p` must be in (0, 1], got {self.top_p!r}")
        if self.top_k < 0:
            raise ConfigError(f"`top_k` must be >= 0 (0 disables it), got {self.top_k!r}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"`max_new_tokens` must be >= 1, got {self.max_new_tokens!r}")
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        else:
            object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if any(s == "" for s in self.stop):
            raise ConfigError("`stop` strings must be non-empty")


@dataclass
class SampleRequest:
    """One completion to sample."""

    prompt_ids: list[int]
    """The whole context so far, as token ids (no re-tokenisation happens in samplers)."""
    params: SamplingParams = field(default_factory=SamplingParams)
    session_id: str | None = None
    """Episode key for KV-cache re-use across turns; ``None`` disables re-use."""


@dataclass
class SampleResult:
    """What a sampler returns for one :class:`SampleRequest`."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    """``"stop"`` (EOS, stop token or stop string), ``"length"`` or ``"error"``."""
    prompt_tokens: int = 0
    """Length of the request's prompt."""
    cached_tokens: int = 0
    """Prompt tokens served from a cache instead of being computed again."""
    error: str | None = None
    """Why the request failed, when ``finish_reason == "error"``."""

    @property
    def prefill_tokens(self) -> int:
        """Prompt tokens the sampler actually had to compute."""
        return self.prompt_tokens - self.cached_tokens

    def __post_init__(self) -> None:
        if self.finish_reason not in FINISH_REASONS:
            raise ValueError(f"finish_reason must be one of {FINISH_REASONS}, got {self.finish_reason!r}")
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(
                f"token_ids ({len(self.token_ids)}) and logprobs ({len(self.logprobs)}) differ in length")


class Sampler(ABC):
    """Produces completions for batches of token-id prompts."""

    #: Short name used in logs and configs ("hf", "vllm", "openai").
    name: str = "sampler"
    #: Whether :attr:`SamplingParams.constraint` is honoured (others raise ConfigError).
    supports_constraints: bool = False

    def check_constraints(self, requests: Sequence[SampleRequest]) -> None:
        """Raise :class:`~mtrl_gym.error.ConfigError` if a request is constrained and this
        sampler cannot constrain decoding."""
        if not self.supports_constraints and any(r.params.constraint is not None for r in requests):
            raise ConfigError(f"the {self.name!r} sampler cannot constrain decoding to a list of completions; "
                              "use the 'hf' (transformers) sampler for constrained runs")

    @abstractmethod
    def sample(self, requests: Sequence[SampleRequest]) -> list[SampleResult]:
        """Sample one completion per request, returned in request order."""

    def end_session(self, session_id: str) -> None:  # noqa: B027 - optional hook
        """Forget cached state of an episode (no-op for stateless samplers)."""

    def update_policy(self, model=None, *, adapter_path: str | None = None, version: int | None = None) -> None:  # noqa: B027
        """Called by the trainer after each optimiser step.

        Samplers that share the trainer's model object (HF) only drop stale caches;
        samplers with their own copy of the weights (vLLM) load the new ones.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (engines, connections, threads)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
