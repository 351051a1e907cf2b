"""Samplers: the same interface over transformers, vLLM and OpenAI-compatible endpoints.

Build one by name with :func:`make_sampler`; the heavy backends load only when asked for.
"""

from mtrl_gym.rollout.samplers.base import SampleRequest, SampleResult, Sampler, SamplingParams
from mtrl_gym.rollout.samplers.factory import SAMPLERS, make_sampler

__all__ = ["Sampler", "SamplingParams", "SampleRequest", "SampleResult", "make_sampler", "SAMPLERS"]
