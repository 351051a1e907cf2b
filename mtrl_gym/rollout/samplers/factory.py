"""The one place a sampler is built by name: training, evaluation and the ``rollout`` CLI call it.

>>> make_sampler("nope")
Traceback (most recent call last):
...
mtrl_gym.error.ConfigError: unknown sampler 'nope'; use one of 'hf', 'vllm', 'openai'
"""

from __future__ import annotations

from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["make_sampler", "SAMPLERS"]

#: The sampler names :func:`make_sampler` knows.
SAMPLERS = ("hf", "vllm", "openai")


def make_sampler(name: str, *, policy: Any = None, tokenizer: Any = None, model_name: str | None = None,
                 seed: int | None = None, **kwargs: Any) -> Any:
    """The sampler called ``name``, with its own keyword arguments in ``kwargs``.

    * ``hf``: :class:`~mtrl_gym.rollout.samplers.hf.HFSampler` over ``policy`` (a loaded
      transformers model, sampled in place: no weight copy) and ``tokenizer``;
    * ``vllm``: an in-process :class:`~mtrl_gym.rollout.samplers.vllm.VLLMSampler` engine on
      ``model_name`` (``kwargs`` are :class:`~mtrl_gym.rollout.samplers.vllm.VLLMConfig` fields);
    * ``openai``: :class:`~mtrl_gym.rollout.samplers.openai.OpenAISampler` on ``kwargs["base_url"]``.

    ``seed`` (when given) seeds the ``hf`` and ``vllm`` samplers; an explicit ``seed`` in
    ``kwargs`` wins.
    """
    kwargs = dict(kwargs)
    if name == "hf":
        from mtrl_gym.rollout.samplers.hf import HFSampler

        if policy is None or tokenizer is None:
            raise ConfigError("sampler 'hf' needs the loaded model (`policy`) and its `tokenizer`")
        if seed is not None:
            kwargs.setdefault("seed", seed)
        return HFSampler(policy, tokenizer, **kwargs)
    if name == "vllm":
        from mtrl_gym.rollout.samplers.vllm import VLLMConfig, VLLMSampler

        if seed is not None:
            kwargs.setdefault("seed", seed)
        return VLLMSampler(model_name, VLLMConfig(**kwargs))
    if name == "openai":
        from mtrl_gym.rollout.samplers.openai import OpenAISampler

        if "base_url" not in kwargs:
            raise ConfigError("sampler 'openai' needs `base_url`, e.g. "
                              "--sampler-kwargs '{\"base_url\": \"http://127.0.0.1:8000\"}'")
        return OpenAISampler(kwargs.pop("base_url"), **kwargs)
    raise ConfigError(f"unknown sampler {name!r}; use one of {', '.join(map(repr, SAMPLERS))}")
