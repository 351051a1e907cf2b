"""The embedded SmolLM2-135M-Instruct through VLLMSampler (slow: loads the real model)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm.sampling_params", reason="vllm is not installed (see scripts/install_vllm_cpu.sh)")
pytest.importorskip("gguf")

from mtrl_gym.rollout.samplers import SampleRequest, SamplingParams  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_smollm2_chat_turn_stops_at_im_end_and_matches_transformers(reference_logprobs):
    from mtrl_gym import models
    from mtrl_gym.rollout.samplers.vllm import VLLMConfig, VLLMSampler

    model, tokenizer = models.load("smollm2-135m", dtype="float32", device="cpu")
    messages = [{"role": "user", "content": "Reply with one word: what colour is the sky?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    prompt = [int(t) for t in (prompt["input_ids"] if isinstance(prompt, dict) else prompt)]
    with VLLMSampler("smollm2-135m", VLLMConfig(dtype="float32", max_model_len=2048)) as sampler:
        assert tokenizer.convert_tokens_to_ids("<|im_end|>") in sampler.eos_token_ids
        greedy, sampled = sampler.sample([
            SampleRequest(prompt, SamplingParams(temperature=0.0, max_new_tokens=48)),
            SampleRequest(prompt, SamplingParams(temperature=0.8, max_new_tokens=48, seed=1))])
    assert greedy.finish_reason == "stop" and greedy.token_ids[-1] in sampler.eos_token_ids
    assert "blue" in tokenizer.decode(greedy.token_ids).lower()
    assert greedy.logprobs == pytest.approx(reference_logprobs(model, prompt, greedy.token_ids, 0.0), abs=1e-3)
    assert sampled.logprobs == pytest.approx(reference_logprobs(model, prompt, sampled.token_ids, 0.8), abs=1e-3)
