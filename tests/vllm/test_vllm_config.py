"""Parts of the vLLM sampler that need no vLLM: config checks, the missing-dependency
error, and the merged checkpoint weights pushed on sync (these run in every venv)."""

from __future__ import annotations

import sys

import pytest

from mtrl_gym.error import ConfigError, DependencyNotInstalled
from mtrl_gym.rollout.samplers.vllm import VLLMConfig, VLLMSampler, _engine_kwargs, checkpoint_weights


@pytest.mark.parametrize(("fields", "message"), [
    ({"sync": "full"}, r"`sync` must be one of \('weights', 'lora'\), got 'full'"),
    ({"weight_transfer": "nccl"}, r"`weight_transfer` must be one of .* got 'nccl'"),
    ({"max_model_len": 1}, r"`max_model_len` must be >= 2, got 1"),
    ({"kv_cache_gib": 0}, r"`kv_cache_gib` must be > 0 or None, got 0"),
    ({"gpu_memory_utilization": 1.5}, r"`gpu_memory_utilization` must be in \(0, 1\], got 1.5"),
    ({"max_lora_rank": 0}, r"`max_lora_rank` and `max_loras` must be >= 1, got 0 and 1"),
    ({"sync": "lora", "enable_lora": False}, r'sync="lora" needs a LoRA engine'),
    ({"engine_kwargs": {"logprobs_mode": "raw_logprobs"}}, r"must not set logprobs_mode"),
])
def test_config_errors_name_the_value(fields, message):
    with pytest.raises(ConfigError, match=message):
        VLLMConfig(**fields)


def test_engine_kwargs_follow_the_config(monkeypatch):
    from mtrl_gym.rollout.samplers import vllm as module

    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.setattr(module, "_cpu_has_native_bf16", lambda: False)
    assert _engine_kwargs(VLLMConfig(), on_cpu=True)["dtype"] == "float32"  # auto: bf16 would be emulated
    assert _engine_kwargs(VLLMConfig(dtype="bfloat16"), on_cpu=True)["dtype"] == "bfloat16"
    assert _engine_kwargs(VLLMConfig(), on_cpu=False)["dtype"] == "auto"
    monkeypatch.setattr(module, "_cpu_has_native_bf16", lambda: True)
    assert _engine_kwargs(VLLMConfig(), on_cpu=True)["dtype"] == "auto"
    cpu = _engine_kwargs(VLLMConfig(dtype="float32", max_model_len=512), on_cpu=True)
    assert cpu["logprobs_mode"] == "processed_logprobs" and cpu["enable_prefix_caching"] is True
    assert cpu["enforce_eager"] is True and cpu["kv_cache_memory_bytes"] == 2**30
    assert "gpu_memory_utilization" not in cpu and "enable_lora" not in cpu
    assert cpu["enable_chunked_prefill"] is False and cpu["max_num_batched_tokens"] == 4096
    assert _engine_kwargs(VLLMConfig(max_model_len=8192), on_cpu=True)["max_num_batched_tokens"] == 8192
    gpu = _engine_kwargs(VLLMConfig(sync="lora", max_lora_rank=32, engine_kwargs={"max_num_seqs": 64}), on_cpu=False)
    assert gpu["enforce_eager"] is False and gpu["gpu_memory_utilization"] == 0.5
    assert "kv_cache_memory_bytes" not in gpu and "enable_chunked_prefill" not in gpu
    assert (gpu["enable_lora"], gpu["max_lora_rank"], gpu["max_loras"], gpu["max_num_seqs"]) == (True, 32, 1, 64)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")
    assert "kv_cache_memory_bytes" not in _engine_kwargs(VLLMConfig(), on_cpu=True)  # vLLM reads the variable


def test_missing_vllm_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail
    with pytest.raises(DependencyNotInstalled, match=r'mtrl-gym\[vllm\].*install_vllm_cpu.sh') as info:
        VLLMSampler("smollm2-135m")
    assert info.value.extra == "vllm" and info.value.package == "vllm"


def test_checkpoint_weights_equal_merge_and_unload(tiny_dir):
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                             modules_to_save=["norm"], init_lora_weights=False)
    model = peft.get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_dir), config)
    with torch.no_grad():
        model.base_model.model.model.norm.modules_to_save["default"].weight.add_(1.0)
    merged_here = dict(checkpoint_weights(model))
    plain = AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert set(merged_here) == set(plain.state_dict())  # checkpoint names, no peft keys
    reference = model.merge_and_unload().state_dict()
    for name, tensor in reference.items():
        torch.testing.assert_close(merged_here[name], tensor, rtol=0, atol=1e-6, msg=name)
    assert not torch.equal(merged_here["model.layers.0.self_attn.q_proj.weight"],
                           plain.state_dict()["model.layers.0.self_attn.q_proj.weight"])


def test_checkpoint_weights_of_a_plain_model_are_its_state_dict(tiny_hf):
    torch = pytest.importorskip("torch")
    ours = dict(checkpoint_weights(tiny_hf))
    assert list(ours) == list(tiny_hf.state_dict())
    assert all(torch.equal(ours[k], v) for k, v in tiny_hf.state_dict().items())
