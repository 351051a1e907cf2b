"""HFSampler: batching, KV reuse across turns, log-prob convention, stops, seeds, errors."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.rollout.samplers.base import SampleRequest, SamplingParams  # noqa: E402
from mtrl_gym.rollout.samplers.hf import HFSampler, filter_logits, sample_next  # noqa: E402

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=10)


def _prompts(tok):
    texts = ["Let's play. Make your first guess", "hello", "The quick brown fox jumps over the lazy dog", "guess"]
    return [tok.encode(t, add_special_tokens=False) for t in texts]


def _full_logprobs(model, ids):
    with torch.no_grad():
        return torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)


def test_kv_reuse_matches_sampling_from_scratch_over_turns(tiny_model, chatml_tokenizer):
    tok = chatml_tokenizer
    reuse, scratch = HFSampler(tiny_model, tok), HFSampler(tiny_model, tok, kv_reuse=False)
    assert reuse.kv_reuse and not scratch.kv_reuse
    prompts = _prompts(tok)
    prev: list[list[int]] = []
    prev_out: list[list[int]] = []
    for turn in range(3):
        a = reuse.sample([SampleRequest(p, GREEDY, session_id=f"ep{i}") for i, p in enumerate(prompts)])
        b = scratch.sample([SampleRequest(p, GREEDY, session_id=f"ep{i}") for i, p in enumerate(prompts)])
        for i, (x, y) in enumerate(zip(a, b)):
            assert x.token_ids == y.token_ids
            assert x.logprobs == pytest.approx(y.logprobs, abs=1e-4)
            assert y.cached_tokens == 0
            if turn:  # everything but the last sampled token of the previous turn is cached
                assert x.cached_tokens == len(prev[i]) + len(prev_out[i]) - 1
            assert x.prefill_tokens == x.prompt_tokens - x.cached_tokens
        prev, prev_out = prompts, [x.token_ids for x in a]
        # each episode's next prompt: its context + sampled turn + an env reply of a different length
        prompts = [p + x.token_ids + tok.encode(" reply" * (i + 1), add_special_tokens=False)
                   for i, (p, x) in enumerate(zip(prompts, a))]
    assert reuse.stats["cached_tokens"] > 0
    assert reuse.stats["prefill_tokens"] + reuse.stats["cached_tokens"] == scratch.stats["prefill_tokens"]


def test_batched_rows_equal_single_requests(tiny_model, chatml_tokenizer):
    sampler = HFSampler(tiny_model, chatml_tokenizer, kv_reuse=False)
    prompts = _prompts(chatml_tokenizer)
    batch = sampler.sample([SampleRequest(p, GREEDY) for p in prompts])
    for p, r in zip(prompts, batch):
        (single,) = sampler.sample([SampleRequest(p, GREEDY)])
        assert single.token_ids == r.token_ids
        assert single.logprobs == pytest.approx(r.logprobs, abs=1e-4)


def test_a_groups_identical_prompts_are_prefilled_once(tiny_model, chatml_tokenizer):
    """GRPO groups share their first prompt: it is computed once and copied to every row; the
    samples are the same as sampling each request alone, and the next turn's KV reuse works."""
    tok = chatml_tokenizer
    prompts = _prompts(tok)[:2]
    params = [SamplingParams(temperature=1.0, max_new_tokens=8, seed=s) for s in range(4)]
    requests = [SampleRequest(prompts[i // 4], params[i % 4], session_id=f"g{i // 4}-{i % 4}") for i in range(8)]
    sampler = HFSampler(tiny_model, tok)
    batch = sampler.sample(requests)
    assert sampler.stats["prefill_tokens"] == len(prompts[0]) + len(prompts[1])
    assert [r.cached_tokens for r in batch] == [0, *[len(prompts[0])] * 3, 0, *[len(prompts[1])] * 3]
    for req, r in zip(requests, batch):
        (alone,) = HFSampler(tiny_model, tok).sample([SampleRequest(req.prompt_ids, req.params)])
        assert alone.token_ids == r.token_ids
        assert alone.logprobs == pytest.approx(r.logprobs, abs=1e-4)
    follow = [SampleRequest(req.prompt_ids + r.token_ids + prompts[1], GREEDY, session_id=req.session_id)
              for req, r in zip(requests, batch)]
    again = sampler.sample(follow)
    scratch = HFSampler(tiny_model, tok, kv_reuse=False).sample([SampleRequest(f.prompt_ids, GREEDY) for f in follow])
    assert [r.token_ids for r in again] == [r.token_ids for r in scratch]
    assert all(r.cached_tokens == len(f.prompt_ids) - len(prompts[1]) - 1 for r, f in zip(again, follow))


def test_max_batch_size_chunks_give_the_same_results(tiny_model, chatml_tokenizer):
    prompts = _prompts(chatml_tokenizer)
    whole = HFSampler(tiny_model, chatml_tokenizer).sample([SampleRequest(p, GREEDY) for p in prompts])
    chunked = HFSampler(tiny_model, chatml_tokenizer, max_batch_size=1).sample(
        [SampleRequest(p, GREEDY) for p in prompts])
    assert [r.token_ids for r in whole] == [r.token_ids for r in chunked]


def test_rows_of_very_different_lengths_are_prefilled_in_buckets_with_the_same_samples(tiny_model, chatml_tokenizer):
    """A long reply beside short ones: splitting the prefill saves padding, and every row samples
    exactly what it samples in one padded batch (per-row generators; greedy and seeded)."""
    tok = chatml_tokenizer
    short = _prompts(tok)
    prompts = [short[0], short[1] * 60, short[2], short[3] * 80, short[1]]  # 1-10 tokens, and ~60-80
    for params in (SamplingParams(temperature=0.0, max_new_tokens=3),
                   SamplingParams(temperature=1.0, max_new_tokens=3, seed=7)):
        one, split = HFSampler(tiny_model, tok), HFSampler(tiny_model, tok)
        one.bucket_cost_tokens = 0
        a = one.sample([SampleRequest(p, params) for p in prompts])
        b = split.sample([SampleRequest(p, params) for p in prompts])
        assert [r.token_ids for r in a] == [r.token_ids for r in b]
        for x, y in zip(a, b):
            assert x.logprobs == pytest.approx(y.logprobs, abs=1e-4)
        assert split.stats["padded_tokens"] < one.stats["padded_tokens"] / 4
        assert split.stats["forward_calls"] > one.stats["forward_calls"]
        assert split.stats["prefill_tokens"] == one.stats["prefill_tokens"] == sum(map(len, prompts))


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.3])
def test_logprobs_follow_the_temperature_scaled_convention(tiny_model, chatml_tokenizer, temperature):
    prompt = _prompts(chatml_tokenizer)[0]
    params = SamplingParams(temperature=temperature, top_k=20, top_p=0.9, max_new_tokens=8, seed=5)
    (r,) = HFSampler(tiny_model, chatml_tokenizer).sample([SampleRequest(prompt, params)])
    with torch.no_grad():
        logits = tiny_model(input_ids=torch.tensor([prompt + r.token_ids])).logits[0].float()
    scale = temperature if temperature > 0 else 1.0
    logp = torch.log_softmax(logits / scale, dim=-1)
    expected = [float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(r.token_ids)]
    assert r.logprobs == pytest.approx(expected, abs=1e-4)


def test_same_seed_same_tokens_and_different_seed_differs(tiny_model, chatml_tokenizer):
    sampler = HFSampler(tiny_model, chatml_tokenizer)
    prompt = _prompts(chatml_tokenizer)[1]

    def draw(seed):
        params = SamplingParams(temperature=1.0, max_new_tokens=12, seed=seed)
        return sampler.sample([SampleRequest(prompt, params)])[0].token_ids

    assert draw(1) == draw(1)
    assert len({tuple(draw(s)) for s in range(4)}) > 1
    # sampler-level seed makes unseeded requests reproducible
    unseeded = SamplingParams(temperature=1.0, max_new_tokens=12)
    runs = [HFSampler(tiny_model, chatml_tokenizer, seed=9).sample([SampleRequest(prompt, unseeded)])[0].token_ids
            for _ in range(2)]
    assert runs[0] == runs[1]


def test_stop_token_is_kept_and_reported(tiny_model, chatml_tokenizer):
    sampler = HFSampler(tiny_model, chatml_tokenizer)
    prompt = _prompts(chatml_tokenizer)[0]
    (free,) = sampler.sample([SampleRequest(prompt, SamplingParams(temperature=0, max_new_tokens=6))])
    assert free.finish_reason == "length" and len(free.token_ids) == 6
    stop_id = free.token_ids[3]
    params = SamplingParams(temperature=0, max_new_tokens=6, stop_token_ids=(stop_id,))
    (r,) = sampler.sample([SampleRequest(prompt, params)])
    first = free.token_ids.index(stop_id)
    assert r.token_ids == free.token_ids[:first + 1]
    assert r.finish_reason == "stop"


def test_stop_string_keeps_the_completing_token(tiny_model, chatml_tokenizer):
    tok = chatml_tokenizer
    sampler = HFSampler(tiny_model, tok)
    params = SamplingParams(temperature=1.0, max_new_tokens=64, seed=0, stop=("e",))
    results = sampler.sample([SampleRequest(p, params) for p in _prompts(tok)])
    stopped = [r for r in results if r.finish_reason == "stop"]
    assert stopped, "no row produced the letter 'e' in 64 tokens"
    for r in stopped:
        assert "e" in tok.decode(r.token_ids)
        assert "e" not in tok.decode(r.token_ids[:-1])


def test_eos_from_generation_config_stops_generation(tiny_model, chatml_tokenizer):
    prompt = _prompts(chatml_tokenizer)[2]
    (free,) = HFSampler(tiny_model, chatml_tokenizer).sample([SampleRequest(prompt, GREEDY)])
    sampler = HFSampler(tiny_model, chatml_tokenizer)
    sampler.eos_token_ids = frozenset({free.token_ids[2]})
    (r,) = sampler.sample([SampleRequest(prompt, GREEDY)])
    assert r.finish_reason == "stop" and r.token_ids[-1] == free.token_ids[2]


def test_bad_requests_fail_alone(tiny_model, chatml_tokenizer):
    sampler = HFSampler(tiny_model, chatml_tokenizer)
    good = _prompts(chatml_tokenizer)[0]
    out = sampler.sample([SampleRequest([]), SampleRequest(good, GREEDY), SampleRequest([1, 10**6])])
    assert [r.finish_reason for r in out] == ["error", "length", "error"]
    assert "empty" in out[0].error and "outside the model's vocabulary" in out[2].error
    assert len(out[1].token_ids) == GREEDY.max_new_tokens


def test_context_length_caps_and_rejects(chatml_tokenizer):
    from tiny_models import build_tiny_llama

    model = build_tiny_llama(len(chatml_tokenizer), max_positions=32)
    sampler = HFSampler(model, chatml_tokenizer)
    assert sampler.max_context_length == 32
    out = sampler.sample([SampleRequest([5] * 28, GREEDY), SampleRequest([5] * 32, GREEDY)])
    assert len(out[0].token_ids) == 4 and out[0].finish_reason == "length"
    assert out[1].finish_reason == "error" and "context is 32" in out[1].error


def test_forward_failure_turns_into_error_results(tiny_model, chatml_tokenizer, monkeypatch):
    sampler = HFSampler(tiny_model, chatml_tokenizer, max_batch_size=2)
    calls = {"n": 0}
    real = sampler._forward

    def flaky(*args):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("out of memory")
        return real(*args)

    monkeypatch.setattr(sampler, "_forward", flaky)
    prompts = _prompts(chatml_tokenizer)
    out = sampler.sample([SampleRequest(p, GREEDY, session_id=str(i)) for i, p in enumerate(prompts)])
    assert [r.finish_reason for r in out] == ["error", "error", "length", "length"]
    assert out[0].error == "RuntimeError: out of memory"
    assert sampler.num_sessions == 2


def test_sessions_are_freed_bounded_and_invalidated(tiny_model, chatml_tokenizer):
    prompts = _prompts(chatml_tokenizer)
    sampler = HFSampler(tiny_model, chatml_tokenizer, max_sessions=2)
    sampler.sample([SampleRequest(p, GREEDY, session_id=str(i)) for i, p in enumerate(prompts)])
    assert sampler.num_sessions == 2  # least recently stored dropped
    sampler.end_session("3")
    assert sampler.num_sessions == 1
    sampler.update_policy()
    assert sampler.num_sessions == 0
    # a prompt that does not extend the cached tokens is prefilled from scratch, correctly
    s = HFSampler(tiny_model, chatml_tokenizer)
    (first,) = s.sample([SampleRequest(prompts[0], GREEDY, session_id="x")])
    other = prompts[2] + [7, 8]
    (r,) = s.sample([SampleRequest(other, GREEDY, session_id="x")])
    (ref,) = HFSampler(tiny_model, chatml_tokenizer).sample([SampleRequest(other, GREEDY)])
    assert r.cached_tokens == 0 and r.token_ids == ref.token_ids


def test_training_mode_is_restored(chatml_tokenizer):
    from tiny_models import build_tiny_llama

    model = build_tiny_llama(len(chatml_tokenizer)).train()
    HFSampler(model, chatml_tokenizer).sample([SampleRequest([5, 6, 7], GREEDY)])
    assert model.training


def test_the_vocabulary_projection_gets_a_contiguous_input_and_the_model_is_left_as_it_was(chatml_tokenizer):
    """A multi-row prefill keeps the last position only: the projection would get a strided view
    (a slow CPU matmul path, 300x slower in bfloat16: benchmarks/sampler_head_cpu.py), so the
    sampler copies it, for its own calls only, and the samples are those of the view."""
    from tiny_models import build_tiny_llama

    model = build_tiny_llama(len(chatml_tokenizer))
    head = model.get_output_embeddings()
    seen: list[tuple[int, bool]] = []
    watch = head.register_forward_hook(lambda _m, args, _out: seen.append((args[0].shape[0], args[0].is_contiguous())))
    prompts = _prompts(chatml_tokenizer)
    view = model(input_ids=torch.tensor([prompts[2], prompts[2]]), logits_to_keep=1)
    assert seen[-1] == (2, False)  # what the model itself hands its projection
    seen.clear()
    sampler = HFSampler(model, chatml_tokenizer, kv_reuse=False)
    sampler.bucket_cost_tokens = 0  # one padded batch of every row
    results = sampler.sample([SampleRequest(p, GREEDY) for p in prompts])
    assert seen[0][0] == len(prompts) and all(contiguous for _, contiguous in seen)
    assert len(head._forward_pre_hooks) == 0  # removed after the call
    seen.clear()
    model(input_ids=torch.tensor([prompts[2], prompts[2]]), logits_to_keep=1)
    assert seen == [(2, False)]
    watch.remove()
    (alone,) = HFSampler(model, chatml_tokenizer, kv_reuse=False).sample([SampleRequest(prompts[2], GREEDY)])
    assert results[2].token_ids == alone.token_ids
    assert view.logits.shape[1] == 1


def test_kv_reuse_true_is_refused_for_sliding_window_models(chatml_tokenizer):
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(vocab_size=len(chatml_tokenizer), hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, sliding_window=16)
    model = MistralForCausalLM(config).eval()
    assert HFSampler(model, chatml_tokenizer).kv_reuse is False
    with pytest.raises(ConfigError, match="kv_reuse=True needs a model with a plain full-attention"):
        HFSampler(model, chatml_tokenizer, kv_reuse=True)
    (r,) = HFSampler(model, chatml_tokenizer).sample([SampleRequest([5] * 20, GREEDY, session_id="a")])
    assert r.finish_reason == "length" and r.cached_tokens == 0


def test_filter_logits_by_hand():
    logits = torch.log(torch.tensor([0.5, 0.25, 0.15, 0.1]))

    def dropped(**kw):
        return torch.isinf(filter_logits(logits, **kw)).tolist()

    assert dropped(top_k=2) == [False, False, True, True]
    assert dropped(top_p=0.55) == [False, False, True, True]  # 0.5 < 0.55 <= 0.5 + 0.25
    assert dropped(top_p=0.8) == [False, False, False, True]
    assert dropped(top_p=0.45) == [False, True, True, True]
    assert dropped(top_p=0.01) == [False, True, True, True]  # never empty
    # top-k first, then top-p on the renormalised rest (0.5 / 0.9 = 0.56 >= 0.55), as in transformers and vLLM
    assert dropped(top_k=3, top_p=0.55) == [False, True, True, True]
    assert dropped() == [False] * 4
    ties = torch.log(torch.tensor([0.4, 0.2, 0.2, 0.2]))
    assert torch.isinf(filter_logits(ties, top_k=2)).tolist() == [False, False, False, False]  # ties kept


def test_sample_next_greedy_and_truncated():
    logits = torch.tensor([0.0, 3.0, 1.0, 2.0])
    token, lp = sample_next(logits, SamplingParams(temperature=0))
    assert token == 1 and lp == pytest.approx(float(torch.log_softmax(logits, 0)[1]))
    gen = torch.Generator().manual_seed(0)
    seen = {sample_next(logits, SamplingParams(temperature=1.0, top_k=1), gen)[0] for _ in range(20)}
    assert seen == {1}
    token, lp = sample_next(logits, SamplingParams(temperature=2.0, top_k=2), gen)
    assert token in (1, 3)
    assert lp == pytest.approx(float(torch.log_softmax(logits / 2.0, 0)[token]))
    assert math.isfinite(lp)
