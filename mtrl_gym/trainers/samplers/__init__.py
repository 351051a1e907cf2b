"""Samplers: the same interface over transformers, vLLM and OpenAI-compatible endpoints."""

from mtrl_gym.trainers.samplers.base import SampleRequest, SampleResult, Sampler, SamplingParams

__all__ = ["Sampler", "SamplingParams", "SampleRequest", "SampleResult"]
