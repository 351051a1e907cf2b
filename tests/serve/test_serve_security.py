"""Keys, sessions as capabilities, malformed tools and cut tool calls, against a real uvicorn
server on 127.0.0.1, probed by a hostile client written from scratch on ``http.client``
(one kept-alive connection, so a dropped connection shows) and by the ``openai`` package."""

from __future__ import annotations

import http.client
import json
import urllib.parse

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.rollout.samplers.base import Sampler, SampleResult  # noqa: E402
from mtrl_gym.rollout.samplers.hf import HFSampler  # noqa: E402
from mtrl_gym.serve import PolicyServer, PolicyService  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "guess_word", "description": "Guess a word.", "parameters": {
    "type": "object", "properties": {"guess": {"type": "string"}}, "required": ["guess"]}}}]
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


class Raw:
    """A hostile client: raw HTTP/1.1 on one kept-alive connection, any header it likes."""

    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.sockets: list = []

    def __call__(self, method: str, path: str, body=None, *, key: str | None = None, raw: bytes | None = None,
                 headers: dict | None = None):
        h = {"Content-Type": "application/json", **(headers or {})}
        if key is not None:
            h["Authorization"] = f"Bearer {key}"
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        self.conn.request(method, path, body=data, headers=h)
        response = self.conn.getresponse()
        payload = response.read()
        if self.conn.sock is not None and not any(s is self.conn.sock for s in self.sockets):
            self.sockets.append(self.conn.sock)
        assert response.getheader("connection") != "close", (method, path, response.status)
        if (response.getheader("content-type") or "").startswith("text/event-stream"):
            return response.status, payload.decode(), response
        return response.status, (json.loads(payload) if payload else None), response

    def one_connection(self) -> bool:
        """Every request so far went over the same TCP connection."""
        return len(self.sockets) == 1 and self.conn.sock is self.sockets[0]

    def close(self) -> None:
        self.conn.close()


def openai_error(status: int, body, code: str | None = None) -> dict:
    """The OpenAI error shape: {"error": {"message", "type", "param", "code"}}."""
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["message"] and body["error"]["type"] == (
        "invalid_request_error" if status < 500 else "server_error")
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


@pytest.fixture
def server(serve, tiny_model, chatml_tokenizer):
    return serve(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer, max_new_tokens=4)


@pytest.fixture
def raw(server):
    client = Raw(server.url)
    yield client
    client.close()


def _new_session(raw, key):
    status, body, _ = raw("POST", "/sessions", {}, key=key)
    assert status == 201, body
    return body


def test_every_route_needs_a_key(server, raw):
    s = _new_session(raw, server.api_key)
    sid = s["id"]
    routes = [("GET", "/v1/models", None), ("POST", "/v1/chat/completions", CHAT),
              ("POST", "/v1/completions", {"model": "tiny", "prompt": "hi"}), ("POST", "/sessions", {}),
              ("GET", f"/sessions/{sid}", None), ("GET", f"/sessions/{sid}/v1/models", None),
              ("POST", f"/sessions/{sid}/v1/chat/completions", CHAT), ("POST", f"/sessions/{sid}/reward", {"reward": 1}),
              ("DELETE", f"/sessions/{sid}", None), ("POST", "/admin/reload", {"adapter_path": "/tmp"})]
    for method, path, body in routes:
        for key, code in ((None, "missing_api_key"), ("sk-guess", "invalid_api_key"),
                          (server.api_key + "x", "invalid_api_key")):
            status, answer, response = raw(method, path, body, key=key)
            assert status == 401, (method, path, key, answer)
            openai_error(401, answer, code)
            assert response.getheader("www-authenticate") == "Bearer"
    status, _, _ = raw("POST", "/v1/chat/completions", CHAT, headers={"Authorization": server.api_key})  # no scheme
    assert status == 401
    session = server.service.get_session(sid)
    assert session.state == "open" and session.requests == 0 and session.reward is None  # nothing reached it
    assert raw.one_connection()


def test_the_openai_client_works_with_the_key_and_names_a_wrong_one(server):
    good = openai.OpenAI(base_url=server.url + "/v1", api_key=server.api_key, max_retries=0)
    assert [m.id for m in good.models.list().data] == ["tiny"]
    assert good.chat.completions.create(**CHAT).choices[0].message.role == "assistant"
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-not-this-one", max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="not valid for this server"):
        bad.chat.completions.create(**CHAT)


def test_a_session_key_reaches_only_its_own_session(server, raw):
    mine, theirs = _new_session(raw, server.api_key), _new_session(raw, server.api_key)
    assert mine["id"] != theirs["id"] and len(mine["id"]) >= 22 and mine["api_key"] != theirs["api_key"]
    assert mine["api_key"] != server.api_key
    victim = openai.OpenAI(base_url=theirs["base_url"], api_key=theirs["api_key"], max_retries=0)
    secret = [{"role": "system", "content": "the password is swordfish"}, {"role": "user", "content": "hi"}]
    victim.chat.completions.create(model="tiny", messages=secret, max_tokens=3)

    key, other = mine["api_key"], theirs["id"]
    for method, path, body in [("GET", f"/sessions/{other}", None),
                               ("POST", f"/sessions/{other}/reward", {"reward": 9.0}),
                               ("POST", f"/sessions/{other}/v1/chat/completions", CHAT),
                               ("GET", f"/sessions/{other}/v1/models", None)]:
        status, answer, _ = raw(method, path, body, key=key)
        assert status == 404, (method, path, answer)
        assert "swordfish" not in json.dumps(answer)
        openai_error(404, answer, "session_not_found")
    # writing into another session through the header, from a plain route
    status, answer, _ = raw("POST", "/v1/chat/completions", CHAT, key=key, headers={"X-Session-Id": other})
    assert status == 404, answer
    # owner-only routes: a session key cannot create, delete or reload
    for method, path, body in [("POST", "/sessions", {}), ("DELETE", f"/sessions/{mine['id']}", None),
                               ("DELETE", f"/sessions/{other}", None), ("POST", "/admin/reload", {"adapter_path": "/x"}),
                               ("POST", "/v1/chat/completions", CHAT), ("GET", "/v1/models", None)]:
        status, answer, _ = raw(method, path, body, key=key)
        assert status in (403, 404), (method, path, answer)
        openai_error(status, answer)
    # squatting: the caller cannot pick an id
    status, answer, _ = raw("POST", "/sessions", {"id": other}, key=server.api_key)
    assert status == 400 and openai_error(400, answer)["param"] == "id"

    record = server.service.get_session(other)
    assert record.requests == 1 and record.reward is None and record.state == "open"
    # the owner is unaffected: its reward is taken (not a 409), its record readable with its key
    status, answer, _ = raw("POST", f"/sessions/{other}/reward", {"reward": 0.5}, key=theirs["api_key"])
    assert status == 200 and answer["reward"] == 0.5
    status, answer, _ = raw("GET", f"/sessions/{other}", key=theirs["api_key"])
    assert status == 200 and answer["reward"] == 0.5 and "api_key" not in answer and "key" not in answer
    status, answer, _ = raw("GET", f"/sessions/{mine['id']}", key=key)
    assert status == 200 and answer["requests"] == 0
    assert raw.one_connection()


def test_base_url_comes_from_the_configuration_not_the_host_header(serve, tiny_model, chatml_tokenizer):
    server = serve(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer)
    raw = Raw(server.url)
    try:
        status, body, _ = raw("POST", "/sessions", {}, key=server.api_key, headers={"Host": "evil.example:666"})
        assert status == 201 and body["base_url"] == f"{server.url}/sessions/{body['id']}/v1"
    finally:
        raw.close()
    proxied = PolicyServer(PolicyService(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer, model_name="t"),
                           public_url="https://policy.internal/").start()
    try:
        raw = Raw(proxied.url)
        status, body, _ = raw("POST", "/sessions", {}, key=proxied.api_key, headers={"Host": "evil.example"})
        assert body["base_url"] == f"https://policy.internal/sessions/{body['id']}/v1"
        raw.close()
    finally:
        proxied.close()


def test_serving_without_a_key_is_refused_beyond_loopback(tiny_model, chatml_tokenizer):
    service = PolicyService(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer, require_api_key=False)
    try:
        with pytest.raises(ConfigError, match="refusing to serve on 0.0.0.0 without an API key"):
            PolicyServer(service, host="0.0.0.0").start()
        with PolicyServer(service) as local:  # loopback: allowed, and then no key is asked
            raw = Raw(local.url)
            assert raw("GET", "/v1/models")[0] == 200
            raw.close()
    finally:
        service.close()
    with pytest.raises(ConfigError, match="`api_key` must be a non-empty string without spaces"):
        PolicyService(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer, api_key="two words")


@pytest.mark.parametrize(("tool", "param"), [
    ({"type": "function", "function": {"name": "guess_word", "parameters": "x"}}, "tools[0].function.parameters"),
    ({"type": "function", "function": {"name": "guess_word", "parameters": {"type": "object", "properties": [
        {"name": "guess"}]}}}, "tools[0].function.parameters.properties"),
    ({"type": "function", "function": {"name": "guess_word", "parameters": {"type": "object", "properties": {
        "guess": {"type": "string"}}, "required": 7}}}, "tools[0].function.parameters.required"),
    ({"type": "function", "function": {"name": "guess_word", "parameters": {"type": "object", "properties": {
        "guess": "string"}}}}, "tools[0].function.parameters.properties"),
    ({"type": "function", "function": {"name": "guess_word", "parameters": {"type": "array"}}},
     "tools[0].function.parameters.type"),
    ({"type": "function", "function": {"name": "guess_word", "description": 5}}, "tools[0].function.description"),
    ({"type": "retrieval", "function": {"name": "guess_word"}}, "tools[0].type"),
])
def test_malformed_tool_schemas_are_a_400_and_the_connection_lives(server, raw, tool, param):
    for path in ("/v1/chat/completions", f"/sessions/{_new_session(raw, server.api_key)['id']}/v1/chat/completions"):
        status, body, _ = raw("POST", path, {**CHAT, "tools": [tool]}, key=server.api_key)
        assert status == 400, body
        assert openai_error(400, body)["param"] == param
        status, body, _ = raw("POST", path, {**CHAT, "tools": TOOLS}, key=server.api_key)
        assert status == 200, body
    status, body, _ = raw("POST", "/v1/chat/completions", {**CHAT, "tools": TOOLS, "tool_choice": {
        "type": "function", "function": "guess_word"}}, key=server.api_key)
    assert status == 400 and openai_error(400, body)["param"] == "tool_choice"
    assert raw.one_connection()


class BrokenSampler(Sampler):
    """Returns results the server cannot use (log-probs that are not numbers): a bug
    inside the server's own code path, which must come back as a 500 like any other."""

    name = "broken"

    def sample(self, requests):
        return [SampleResult([5, 6], ["nan?", None], "stop", prompt_tokens=len(r.prompt_ids)) for r in requests]


def test_an_unexpected_error_is_a_500_and_keeps_the_connection(serve, chatml_tokenizer):
    server = serve(BrokenSampler(), chatml_tokenizer)
    raw = Raw(server.url)
    try:
        sid = _new_session(raw, server.api_key)["id"]
        for _ in range(3):
            status, body, _ = raw("POST", f"/sessions/{sid}/v1/chat/completions", CHAT, key=server.api_key)
            assert status == 500
            openai_error(500, body, "internal_error")
        assert raw("GET", "/v1/models", key=server.api_key)[0] == 200
        assert raw.one_connection()
    finally:
        raw.close()


class Scripted(Sampler):
    """Replies with a fixed text, cut at the request's ``max_new_tokens`` (then
    ``finish_reason`` is ``length``, as a real sampler reports it)."""

    name = "scripted"

    def __init__(self, tokenizer, text: str):
        self.tokenizer, self.text = tokenizer, text
        self.eos_token_ids = frozenset({tokenizer.eos_token_id})

    def sample(self, requests):
        out = []
        for r in requests:
            ids = self.tokenizer.encode(self.text, add_special_tokens=False)
            cap = r.params.max_new_tokens
            ids, finish = (ids[:cap], "length") if len(ids) >= cap else (ids + [self.tokenizer.eos_token_id], "stop")
            out.append(SampleResult(ids, [-1.0] * len(ids), finish, prompt_tokens=len(r.prompt_ids)))
        return out


CALL = '<tool_call>{"name": "guess_word", "arguments": {"guess": "the_right_word"}}</tool_call>'


def test_a_tool_call_cut_by_max_tokens_is_length_with_no_tool_calls(serve, chatml_tokenizer):
    server = serve(Scripted(chatml_tokenizer, CALL), chatml_tokenizer)
    session = server.service.create_session()
    c = openai.OpenAI(base_url=server.session_url(session.id), api_key=session.key, max_retries=0)
    ids = chatml_tokenizer.encode(CALL, add_special_tokens=False)
    whole = len(ids)
    # cut inside the argument: the text ends '..."guess": "the_right' (the parser would mend it into a call)
    inside = next(k for k in range(whole) if '"the_r' in chatml_tokenizer.decode(ids[:k]))
    assert "the_right_word" not in chatml_tokenizer.decode(ids[:inside])
    messages = [{"role": "user", "content": "play"}]
    cut = c.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, max_tokens=inside).choices[0]
    assert cut.finish_reason == "length" and cut.message.tool_calls is None
    assert cut.message.content.startswith('<tool_call>{"name": "guess_word", "arguments": {"guess": "the_r')
    done = c.chat.completions.create(model="tiny", tools=TOOLS, max_tokens=whole + 5, messages=[
        *messages, cut.message.model_dump(exclude_none=True), {"role": "user", "content": "again"}]).choices[0]
    assert done.finish_reason == "tool_calls"
    assert json.loads(done.message.tool_calls[0].function.arguments) == {"guess": "the_right_word"}
    seg = server.service.get_session(session.id).segments[0]
    assert seg.tool_calls == 1 and seg.cut_turns == 1 and server.service.get_session(session.id).retokenized == 0


def test_code_that_defines_the_tool_is_not_a_call(serve, chatml_tokenizer):
    server = serve(Scripted(chatml_tokenizer, "def guess_word(guess):\n    return guess"), chatml_tokenizer)
    c = openai.OpenAI(base_url=server.url + "/v1", api_key=server.api_key, max_retries=0)
    choice = c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "code"}], tools=TOOLS,
                                       max_tokens=64).choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert choice.message.content.startswith("def guess_word(guess):")


def test_closed_sessions_are_reaped_and_the_cap_counts_open_ones(serve, tiny_model, chatml_tokenizer):
    import time

    server = serve(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer, max_open_sessions=3,
                   closed_session_ttl_s=0.5)
    raw = Raw(server.url)
    try:
        first = [_new_session(raw, server.api_key) for _ in range(3)]
        status, body, _ = raw("POST", "/sessions", {}, key=server.api_key)
        assert status == 429 and openai_error(429, body, "too_many_sessions")
        for s in first:
            assert raw("POST", f"/sessions/{s['id']}/reward", {"reward": 1.0}, key=s["api_key"])[0] == 200
        assert raw("GET", f"/sessions/{first[0]['id']}", key=first[0]["api_key"])[0] == 200  # readable for a while
        for _ in range(4):  # a client that opens and closes sessions in a loop: closed records stay bounded
            for s in [_new_session(raw, server.api_key) for _ in range(3)]:
                assert raw("POST", f"/sessions/{s['id']}/reward", {"reward": 0.0}, key=s["api_key"])[0] == 200
            assert server.service.num_sessions()[1] <= 3
        time.sleep(0.6)
        status, body, _ = raw("GET", f"/sessions/{first[0]['id']}", key=server.api_key)
        assert status == 404 and openai_error(404, body, "session_not_found")
        # a reaped session's key is gone with it
        assert raw("GET", f"/sessions/{first[0]['id']}", key=first[0]["api_key"])[0] == 401
        _new_session(raw, server.api_key)
        assert server.service.num_sessions() == (1, 0)
    finally:
        raw.close()


def test_cli_serve_draws_a_key_prints_it_and_refuses_no_key_beyond_loopback(tmp_path, chatml_tokenizer, kit):
    """`mtrl-gym serve` as a real process: the printed key works, no key is a 401;
    --no-api-key on 0.0.0.0 is refused before a model loads."""
    import os
    import re
    import subprocess
    import sys

    from tiny_models import build_tiny_llama

    model_dir = tmp_path / "tiny"
    build_tiny_llama(len(chatml_tokenizer)).save_pretrained(model_dir)
    chatml_tokenizer.save_pretrained(model_dir)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("MTRL_GYM_API_KEY", None)
    cmd = [sys.executable, "-m", "mtrl_gym.cli", "serve", "--model", str(model_dir), "--port", "0", "--threads", "1",
           "--served-model-name", "tiny", "--max-new-tokens", "2"]

    refused = subprocess.run(cmd + ["--no-api-key", "--host", "0.0.0.0"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 2 and "--no-api-key is refused with --host 0.0.0.0" in refused.stderr

    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        text = kit.stderr_until(proc, "API key")
        url = re.search(r"at (http://127\.0\.0\.1:\d+)/v1", text).group(1)
        key = re.search(r"API key .*: (mtrl-key-\S+)", text).group(1)
        good = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
        assert [m.id for m in good.models.list().data] == ["tiny"]
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0).models.list()
    finally:
        proc.kill()
        proc.wait(30)
        proc.stderr.close()


def test_cli_key_comes_from_the_flag_or_the_environment(monkeypatch):
    from mtrl_gym.cli import build_parser
    from mtrl_gym.cli.serve import serve_config

    def config(*argv):
        return serve_config(build_parser().parse_args(["serve", *argv]))

    monkeypatch.delenv("MTRL_GYM_API_KEY", raising=False)
    assert config().api_key is None and config().require_api_key  # drawn at start
    monkeypatch.setenv("MTRL_GYM_API_KEY", "from-env")
    assert config().api_key == "from-env"
    assert config("--api-key", "from-flag").api_key == "from-flag"
    with pytest.raises(ConfigError, match="contradict"):
        config("--no-api-key")
    monkeypatch.delenv("MTRL_GYM_API_KEY")
    assert not config("--no-api-key").require_api_key


def test_the_openai_sampler_sends_the_key_from_the_environment(server, monkeypatch):
    from mtrl_gym.rollout.samplers.base import SampleRequest, SamplingParams
    from mtrl_gym.rollout.samplers.openai import OpenAISampler

    request = SampleRequest([1, 5, 6], SamplingParams(max_new_tokens=2, seed=0))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MTRL_GYM_API_KEY", raising=False)
    refused = OpenAISampler(server.url, model="tiny", max_retries=0).sample([request])[0]
    assert refused.finish_reason == "error" and "401" in refused.error and "API key" in refused.error
    monkeypatch.setenv("MTRL_GYM_API_KEY", server.api_key)
    assert OpenAISampler(server.url, model="tiny", max_retries=0).sample([request])[0].finish_reason != "error"


def test_random_bodies_over_one_connection_never_get_a_500(serve, chatml_tokenizer):
    """A fuzzing client: any JSON body on the chat and completions routes (with the key)
    is answered 200 or an OpenAI-shaped 4xx, on the same kept-alive connection."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    leaf = st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats(allow_nan=False) | st.text(max_size=12)
    value = st.recursive(leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
        ["role", "content", "name", "function", "parameters", "properties", "required", "type", "arguments",
         "tool_calls", "id", "text"]), c, max_size=4), max_leaves=16)
    fields = st.sampled_from(["messages", "tools", "tool_choice", "temperature", "top_p", "top_k", "max_tokens",
                              "stop", "seed", "n", "stream", "stream_options", "logprobs", "prompt"])
    server = serve(Scripted(chatml_tokenizer, "hello"), chatml_tokenizer)
    raw = Raw(server.url)
    sid = _new_session(raw, server.api_key)["id"]

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.dictionaries(fields, value, max_size=5), st.booleans(), st.sampled_from(["chat/completions",
                                                                                       "completions"]))
    def probe(body, in_session, route):
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **body}
        path = f"/sessions/{sid}/v1/{route}" if in_session else f"/v1/{route}"
        status, answer, _ = raw("POST", path, body, key=server.api_key)
        assert status == 200 or (400 <= status < 500 and openai_error(status, answer)), (status, answer, body)

    try:
        probe()
        assert raw.one_connection()
    finally:
        raw.close()
