"""The HTTP surface: concurrent sessions, OpenAI-style errors, rewards, completions."""

from __future__ import annotations

import threading

import httpx
import pytest

pytest.importorskip("fastapi")

from mtrl_gym.serve import reward as agent_side
from mtrl_gym.rollout.samplers.base import SampleRequest, SamplingParams
from mtrl_gym.rollout.samplers.hf import HFSampler
from mtrl_gym.rollout.samplers.openai import OpenAISampler


@pytest.fixture
def server(serve, tiny_model, chatml_tokenizer):
    return serve(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer, max_new_tokens=6,
                 max_context_tokens=400)


def test_sixteen_concurrent_sessions_never_mix(server, kit, chatml_tokenizer):
    n, turns = 16, 3
    sessions = [server.service.create_session() for _ in range(n)]
    sids = [s.id for s in sessions]
    replies: dict[int, list[list[int]]] = {i: [] for i in range(n)}
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def agent(i: int) -> None:
        try:
            c = kit.client(server.session_url(sids[i]), sessions[i].key)
            messages = [{"role": "user", "content": f"I am agent {i}."}]
            barrier.wait()
            for t in range(turns):
                r = c.chat.completions.create(model=kit.MODEL, messages=messages,
                                              extra_body={"return_token_ids": True})
                replies[i].append(r.choices[0].model_extra["token_ids"])
                messages += [r.choices[0].message.model_dump(exclude_none=True),
                             {"role": "user", "content": f"agent {i}, turn {t + 1}"}]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    for i, sid in enumerate(sids):
        session = server.service.get_session(sid)
        assert session.retokenized == 0 and session.requests == turns
        seg = session.segments[0]
        assert [seg.token_ids[a:b] for a, b in seg.turn_spans] == replies[i]
        text = chatml_tokenizer.decode(seg.token_ids[:seg.turn_spans[-1][0]])
        assert f"I am agent {i}." in text and f"agent {i}, turn 2" in text
        assert not any(f"agent {j}," in text or f"I am agent {j}." in text for j in range(n) if j != i)
    assert server.service.worker.stats["max_batch"] > 1  # concurrent sessions were sampled together


def _error(response: httpx.Response, status: int, match: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert match in body["message"], body
    assert body["type"] == "invalid_request_error"
    return body


def test_malformed_requests_get_openai_style_4xx_and_the_server_lives(server, kit):
    url = server.url
    chat = f"{url}/v1/chat/completions"
    ok = {"model": kit.MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {server.api_key}"}) as h:
        _error(h.post(chat, content=b"{not json"), 400, "not valid JSON")
        _error(h.post(chat, content=b"[1, 2]"), 400, "must be a JSON object")
        assert _error(h.post(chat, json={**ok, "model": "gpt-9"}), 404, "does not exist")["code"] == "model_not_found"
        assert _error(h.post(chat, json={**ok, "temperature": "hot"}), 400, "must be a number")["param"] == "temperature"
        _error(h.post(chat, json={**ok, "temperature": 7}), 400, "must be in [0, 2]")
        _error(h.post(chat, json={**ok, "max_tokens": -1}), 400, "`max_tokens` must be >= 1")
        _error(h.post(chat, json={**ok, "messages": "hi"}), 400, "`messages` must be a non-empty list")
        _error(h.post(chat, json={**ok, "messages": [{"role": "wizard", "content": "x"}]}), 400, "role must be one of")
        _error(h.post(chat, json={**ok, "messages": [{"role": "user", "content": 5}]}), 400, "content must be")
        _error(h.post(chat, json={**ok, "tools": [{"type": "function"}]}), 400, "`tools[0]` must be")
        _error(h.post(chat, json={**ok, "n": 2}), 400, "`n` must be 1")
        _error(h.post(chat, json={**ok, "stop": [""]}), 400, "`stop` must be")
        long = {**ok, "messages": [{"role": "user", "content": "word " * 500}]}
        assert _error(h.post(chat, json=long), 400, "context is 400 tokens")["code"] == "context_length_exceeded"
        assert _error(h.post(f"{url}/sessions/nope/v1/chat/completions", json=ok), 404,
                      "unknown session")["code"] == "session_not_found"
        _error(h.post(chat, json=ok, headers={"X-Session-Id": "nope"}), 404, "unknown session")
        _error(h.post(f"{url}/v1/completions", json={"model": kit.MODEL, "prompt": [1, 99999]}), 400,
               "outside the vocabulary")
        _error(h.post(f"{url}/v1/completions", json={"model": kit.MODEL, "prompt": {"a": 1}}), 400, "`prompt`")
        _error(h.get(f"{url}/v2/anything"), 404, "Not Found")
        _error(h.post(f"{url}/sessions/nope/reward", json={"reward": 1}), 404, "unknown session")
        assert h.get(f"{url}/v1/models").json()["data"][0]["id"] == kit.MODEL
        assert h.post(chat, json=ok).status_code == 200  # still serving


def test_openai_client_sees_the_errors_as_exceptions(server, kit):
    c = kit.client(server.url + "/v1", server.api_key)
    with pytest.raises(kit.client.__globals__["openai"].NotFoundError, match="does not exist"):
        c.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
    assert [m.id for m in c.models.list().data] == [kit.MODEL]


def test_rewards_close_the_session_and_are_reported_once(server, kit):
    session = server.service.create_session()
    sid, url = session.id, server.session_url(session.id)
    kit.client(url, session.key).chat.completions.create(model=kit.MODEL, messages=[{"role": "user", "content": "x"}])
    assert agent_side.report_reward(url, 0.75, {"turns": 1}, api_key=session.key) == {
        "id": sid, "reward": 0.75, "failed": False}
    session = server.service.get_session(sid)
    assert session.state == "closed" and session.reward_metrics == {"turns": 1.0}
    with pytest.raises(Exception, match="already has its reward"):
        agent_side.report_reward(url, 1.0, api_key=session.key)
    with httpx.Client(headers={"Authorization": f"Bearer {server.api_key}"}) as h:
        _error(h.post(f"{url}/chat/completions", json={"model": kit.MODEL, "messages": [
            {"role": "user", "content": "x"}]}), 409, "is closed")
        s2 = h.post(f"{server.url}/sessions", json={}).json()
        assert s2 == {"id": s2["id"], "base_url": server.session_url(s2["id"]), "api_key": s2["api_key"]}
        _error(h.post(f"{server.url}/sessions/{s2['id']}/reward", json={"reward": "high"}), 400, "finite number")


def test_rollout_handler_reports_the_reward_or_the_failure(server):
    @agent_side.rollout_handler
    def good(task_row, base_url):
        return {"reward": 1.5, "metrics": {"turns": 2}}

    @agent_side.rollout_handler
    def bad(task_row, base_url):
        raise ValueError("the tool broke")

    sa, sb = (server.service.create_session() for _ in range(2))
    a, b = sa.id, sb.id
    assert good({"prompt": "{}"}, server.session_url(a), api_key=sa.key) == {"reward": 1.5, "metrics": {"turns": 2}}
    with pytest.raises(ValueError, match="the tool broke"):
        bad({"prompt": "{}"}, server.session_url(b), api_key=sb.key)
    assert server.service.get_session(a).reward == 1.5
    sb = server.service.get_session(b)
    assert sb.failed and "ValueError: the tool broke" in sb.failure_reason


def test_completions_endpoint_serves_the_openai_sampler_token_exactly(server, tiny_model, chatml_tokenizer, kit):
    prompt = chatml_tokenizer.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    params = SamplingParams(temperature=1.0, max_new_tokens=6, seed=7)
    direct = HFSampler(tiny_model, chatml_tokenizer).sample([SampleRequest(prompt, params)])[0]
    remote = OpenAISampler(server.url, model=kit.MODEL, api_key=server.api_key).sample(
        [SampleRequest(prompt, params)])[0]
    assert remote.token_ids == direct.token_ids and remote.finish_reason == direct.finish_reason
    assert remote.logprobs == pytest.approx(direct.logprobs, abs=1e-5)


def test_cli_serve_builds_the_sampler_and_rejects_bad_options(tmp_path, chatml_tokenizer):
    from tiny_models import build_tiny_llama

    from mtrl_gym.cli import build_parser
    from mtrl_gym.cli.serve import build_sampler
    from mtrl_gym.error import ConfigError

    model_dir = tmp_path / "tiny"
    build_tiny_llama(len(chatml_tokenizer)).save_pretrained(model_dir)
    chatml_tokenizer.save_pretrained(model_dir)
    args = build_parser().parse_args(["serve", "--model", str(model_dir), "--port", "0"])
    sampler, tokenizer = build_sampler(args)
    assert sampler.name == "hf" and tokenizer.chat_template
    bad = build_parser().parse_args(["serve", "--model", str(model_dir), "--sampler-kwargs", "[1]"])
    with pytest.raises(ConfigError, match="--sampler-kwargs must be a JSON object"):
        build_sampler(bad)
