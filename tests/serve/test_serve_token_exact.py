"""Token-exactness over real HTTP: what the server records equals what the rollout engine
records for the same conversation, sampler and seeds."""

from __future__ import annotations

import functools

import gymnasium
import numpy as np
import pytest

pytest.importorskip("fastapi")
from toy_envs import VowelEnv

import mtrl_gym  # noqa: F401
from mtrl_gym.rollout.engine import collect
from mtrl_gym.rollout.samplers.base import SamplingParams
from mtrl_gym.rollout.samplers.hf import HFSampler
from mtrl_gym.wrappers import SystemPrompt

REPLIES = ['<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>',
           'Next: <tool_call>{"name": "guess_word", "arguments": {"guess": "slate"}}</tool_call>',
           '<tool_call>{"name": "guess_word", "arguments": {"guess": "paste"}}</tool_call>']
TASK = {"answer": "paste", "id": "t0"}


def _upto_last_turn(traj):
    """The engine's record up to its last sampled token: the server never sees the env's
    final reply (the agent does not send another request), which carries no loss."""
    end = traj.turn_spans[-1][1]
    return traj.token_ids[:end], traj.loss_mask[:end], traj.logprobs[:end]


def _segment(server, sid):
    session = server.service.get_session(sid)
    assert session.retokenized == 0
    return session.segments[0]


def test_multi_turn_tool_calls_match_the_rollout_engine(serve, kit, tiny_model, chatml_tokenizer):
    engine = collect("mtrl/Wordle-v0", [TASK], kit.ForcedSampler(tiny_model, chatml_tokenizer, REPLIES),
                     chatml_tokenizer, seed=5, sampling=SamplingParams(max_new_tokens=64))[0]
    assert engine.terminated and engine.num_turns == 3 and not engine.failed

    server = serve(kit.ForcedSampler(tiny_model, chatml_tokenizer, REPLIES), chatml_tokenizer)
    session = server.service.create_session()
    sid = session.id
    reward = kit.play(server.session_url(sid), session.key, gymnasium.make("mtrl/Wordle-v0"), seed=5, task=TASK)
    seg = _segment(server, sid)
    assert reward == pytest.approx(engine.reward)
    ids, mask, logprobs = _upto_last_turn(engine)
    assert seg.token_ids == ids
    assert seg.loss_mask == mask
    assert seg.logprobs == logprobs  # same prompts -> the very same floats
    assert seg.turn_spans == engine.turn_spans and seg.prompt_length == engine.prompt_length
    assert [m["content"] for m in seg.messages] == [m["content"] for m in engine.messages][:len(seg.messages)]
    assert seg.tool_calls == 3


PREFIX = '<tool_call>{"name": "guess_word", "arguments": {"guess": "'


def _stop_sampler(kit, model, tokenizer, replies):
    """``kit.ForcedSampler`` whose replies end where a stop string ends them (no end token,
    ``finish_reason`` "stop", as a real sampler's), and which records each request's stops."""

    class StopSampler(kit.ForcedSampler):
        def sample(self, requests):
            self.stops = [*getattr(self, "stops", []), *(tuple(r.params.stop) for r in requests)]
            out = super().sample(requests)
            for r, res in zip(requests, out):
                text = self.tokenizer.decode(res.token_ids[:-1])
                if any(text.endswith(s) for s in r.params.stop):  # drop the scripted end token
                    res.token_ids, res.logprobs = res.token_ids[:-1], res.logprobs[:-1]
            return out

    return StopSampler(model, tokenizer, replies)


def test_a_format_prefill_is_written_as_the_engine_writes_it_and_comes_back_as_tool_calls(
        serve, kit, tiny_model, chatml_tokenizer):
    """A model trained to continue a prefill and stop at `"` (the cpu preset) is served with
    both: the prefill's tokens are context before every turn, a turn that ends on the stop
    string has no end token, as in the rollout engine, and the client gets each call back as
    native ``tool_calls`` and sends it back as such, one segment throughout."""
    replies = ['crane"', 'slate"', 'paste"']
    sampling = SamplingParams(max_new_tokens=64, stop=('"',))
    engine = collect("mtrl/Wordle-v0", [TASK], _stop_sampler(kit, tiny_model, chatml_tokenizer, replies),
                     chatml_tokenizer, seed=5, sampling=sampling, assistant_prefix=PREFIX)[0]
    assert engine.terminated and engine.num_turns == 3 and not engine.failed and engine.reward > 0

    sampler = _stop_sampler(kit, tiny_model, chatml_tokenizer, replies)
    server = serve(sampler, chatml_tokenizer, assistant_prefix=PREFIX, stop=('"',))
    session = server.service.create_session()
    reward = kit.play(server.session_url(session.id), session.key, gymnasium.make("mtrl/Wordle-v0"), seed=5,
                      task=TASK)
    seg = _segment(server, session.id)
    assert sampler.stops == [('"',)] * 3  # the server's stop string reached every turn's sampling
    assert reward == pytest.approx(engine.reward)
    ids, mask, logprobs = _upto_last_turn(engine)
    assert seg.token_ids == ids and seg.loss_mask == mask and seg.logprobs == logprobs
    assert seg.turn_spans == engine.turn_spans and seg.prompt_length == engine.prompt_length
    prefix_ids = chatml_tokenizer.encode(PREFIX, add_special_tokens=False)
    for start, end in seg.turn_spans:  # the prefill right before every sampled turn, untrained; no end token
        assert seg.token_ids[start - len(prefix_ids):start] == prefix_ids
        assert set(seg.loss_mask[start - len(prefix_ids):start]) == {0}
        assert chatml_tokenizer.eos_token_id not in seg.token_ids[start:end]
    assert seg.tool_calls == 3 and seg.format_errors == 0
    assert [m["content"] for m in seg.messages] == [m["content"] for m in engine.messages][:len(seg.messages)]


def test_hidden_tool_schemas_give_the_prompt_a_tools_false_model_was_trained_on(serve, kit, tiny_model,
                                                                                 chatml_tokenizer):
    """A model trained with ``SystemPrompt(tools=False)`` read no tool schemas. Served with
    ``tool_schemas=False`` to an agent that offers its tools (as agent frameworks do), the
    server records the engine's tokens under that wrapper, and still answers with native
    ``tool_calls``; with the schemas shown, the prompt is another one."""
    replies = ['crane"', 'slate"', 'paste"']
    sampling = SamplingParams(max_new_tokens=64, stop=('"',))
    engine = collect("mtrl/Wordle-v0", [TASK], _stop_sampler(kit, tiny_model, chatml_tokenizer, replies),
                     chatml_tokenizer, seed=5, sampling=sampling, assistant_prefix=PREFIX,
                     wrappers=[functools.partial(SystemPrompt, tools=False)])[0]
    assert engine.terminated and engine.tools == []

    segments = {}
    for schemas in (False, True):
        server = serve(_stop_sampler(kit, tiny_model, chatml_tokenizer, replies), chatml_tokenizer,
                       assistant_prefix=PREFIX, stop=('"',), tool_schemas=schemas)
        session = server.service.create_session()
        reward = kit.play(server.session_url(session.id), session.key, gymnasium.make("mtrl/Wordle-v0"), seed=5,
                          task=TASK)  # the env's tools offered with every request
        assert reward == pytest.approx(engine.reward)
        segments[schemas] = _segment(server, session.id)
    seg = segments[False]
    ids, mask, logprobs = _upto_last_turn(engine)
    assert seg.token_ids == ids and seg.loss_mask == mask and seg.logprobs == logprobs
    assert seg.turn_spans == engine.turn_spans and seg.prompt_length == engine.prompt_length
    assert seg.tools == [] and seg.offered and seg.tool_calls == 3 and seg.format_errors == 0
    shown = segments[True]
    assert shown.prompt_length > seg.prompt_length and shown.tools and shown.tool_calls == 3
    assert "\"parameters\"" in chatml_tokenizer.decode(shown.token_ids[:shown.prompt_length])  # the schema
    assert "\"parameters\"" not in chatml_tokenizer.decode(seg.token_ids[:seg.prompt_length])


def test_the_servers_stops_join_a_chat_requests_but_not_a_raw_completion(serve, kit, tiny_model, chatml_tokenizer):
    sampler = _stop_sampler(kit, tiny_model, chatml_tokenizer, ["hello"])
    server = serve(sampler, chatml_tokenizer, assistant_prefix="Say: ", stop=('"', "\n"))
    c = kit.client(server.url + "/v1", server.api_key)
    reply = c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], stop=["x", '"'],
                                      extra_body={"return_token_ids": True})
    assert reply.choices[0].message.content == "Say: hello"
    prompt = reply.model_extra["prompt_token_ids"]
    assert prompt[-len(chatml_tokenizer.encode("Say: ")):] == chatml_tokenizer.encode("Say: ")
    raw = c.completions.create(model="tiny", prompt="Guess", max_tokens=3, stop=["x"],
                               extra_body={"return_token_ids": True})
    assert sampler.stops == [('"', "\n", "x"), ("x",)]  # deduplicated; the raw prompt gets the client's alone
    assert raw.choices[0].model_extra["prompt_token_ids"] == chatml_tokenizer.encode("Guess")


def test_sampled_tokens_match_the_engine_with_the_same_sampler_and_seeds(serve, kit, tiny_model, chatml_tokenizer):
    task = {"id": "v", "turns": 3}
    params = SamplingParams(temperature=1.0, max_new_tokens=12)
    engine = collect(VowelEnv, [task], HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer, seed=11,
                     sampling=params)[0]
    seeds = [int(np.random.SeedSequence([11, 0, 0, t]).generate_state(1)[0]) for t in range(3)]

    server = serve(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer)
    session = server.service.create_session()
    sid = session.id
    kit.play(server.session_url(sid), session.key, VowelEnv(), seed=11, task=task, seeds=seeds, max_tokens=12)
    seg = _segment(server, sid)
    ids, mask, logprobs = _upto_last_turn(engine)
    assert seg.token_ids == ids
    assert seg.loss_mask == mask
    np.testing.assert_allclose(seg.logprobs, logprobs, atol=1e-5)
    assert seg.cached_tokens > 0  # later turns re-used the session's KV cache


def test_response_token_ids_are_the_recorded_sampled_ids(serve, kit, tiny_model, chatml_tokenizer):
    server = serve(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer)
    session = server.service.create_session()
    sid = session.id
    c = kit.client(server.session_url(sid), session.key)
    messages = [{"role": "user", "content": "hello"}]
    sampled = []
    for _ in range(3):
        r = c.chat.completions.create(model=kit.MODEL, messages=messages, max_tokens=8, logprobs=True,
                                      extra_body={"return_token_ids": True})
        choice = r.choices[0]
        sampled.append((choice.model_extra["token_ids"], [x.logprob for x in choice.logprobs.content]))
        assert r.usage.completion_tokens == len(choice.model_extra["token_ids"])
        messages += [choice.message.model_dump(exclude_none=True), {"role": "user", "content": "more"}]
    seg = _segment(server, sid)
    assert [seg.token_ids[a:b] for a, b in seg.turn_spans] == [ids for ids, _ in sampled]
    assert [seg.logprobs[a:b] for a, b in seg.turn_spans] == [lps for _, lps in sampled]
    assert sum(seg.loss_mask) == sum(len(ids) for ids, _ in sampled)
    assert r.usage.prompt_tokens_details.cached_tokens > 0


def test_streamed_turns_record_the_same_tokens(serve, kit, tiny_model, chatml_tokenizer):
    server = serve(kit.ForcedSampler(tiny_model, chatml_tokenizer, REPLIES), chatml_tokenizer)
    session = server.service.create_session()
    sid = session.id
    c = kit.client(server.session_url(sid), session.key)
    env = gymnasium.make("mtrl/Wordle-v0")
    obs, info = env.reset(seed=5, options={"task": TASK})
    stream = c.chat.completions.create(model=kit.MODEL, stream=True, stream_options={"include_usage": True},
                                       tools=info["tools"], messages=[{"role": "system", "content": info["system_prompt"]},
                                                                      {"role": "user", "content": obs}])
    chunks = list(stream)
    calls = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    assert [(tc.function.name, tc.function.arguments) for tc in calls] == [("guess_word", '{"guess": "crane"}')]
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    start, end = _segment(server, sid).turn_spans[0]
    assert chunks[-1].usage.completion_tokens == end - start


def test_rewritten_history_starts_a_new_segment(serve, kit, tiny_model, chatml_tokenizer):
    server = serve(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer)
    session = server.service.create_session()
    sid = session.id
    c = kit.client(server.session_url(sid), session.key)
    r = c.chat.completions.create(model=kit.MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=6)
    edited = {"role": "assistant", "content": "something else"}
    c.chat.completions.create(model=kit.MODEL, max_tokens=6, messages=[
        {"role": "user", "content": "hi"}, edited, {"role": "user", "content": "go on"}])
    session = server.service.get_session(sid)
    assert session.retokenized == 1 and len(session.segments) == 2
    second = session.segments[1]
    # the rewritten turn is context now: only the new turn carries loss
    assert second.num_turns == 1 and sum(second.loss_mask) == second.turn_spans[0][1] - second.turn_spans[0][0]
    assert chatml_tokenizer.decode(second.token_ids[:second.prompt_length]).count("something else") == 1
    assert r.choices[0].message.content != "something else"
