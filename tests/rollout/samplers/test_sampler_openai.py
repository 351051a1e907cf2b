"""OpenAISampler against a small vLLM-like HTTP server on 127.0.0.1 started by the tests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mtrl_gym.error import ConfigError, SamplerError
from mtrl_gym.rollout.samplers.base import SampleRequest, SamplingParams
from mtrl_gym.rollout.samplers.openai import OpenAISampler, _parse_choice


class FakeVLLM:
    """Imitates ``vllm serve``'s /v1/completions with token ids and log-probs.

    The completion of prompt ``[p0, ..., pn]`` is ``[pn + 1, pn + 2, ...]`` up to
    ``max_tokens``, ending early with "stop" at token 99. Prompts starting with a magic id
    misbehave: 500 -> always HTTP 500; 503 -> HTTP 503 for the first ``flaky`` attempts; 400 ->
    HTTP 400; 777 -> sleeps ``slow_s``; 888 -> no token_ids field (only "token_id:N" strings).
    """

    def __init__(self, flaky: int = 2, slow_s: float = 1.0, delay_s: float = 0.0):
        self.flaky, self.slow_s, self.delay_s = flaky, slow_s, delay_s
        self.bodies: list[dict] = []
        self.attempts: dict[int, int] = {}
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "tiny-model", "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.bodies.append(body)
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    status, payload = fake.respond(body)
                finally:  # before the reply leaves: a client that has it may send the next request at once
                    with fake.lock:
                        fake.in_flight -= 1
                self._send(status, payload)

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def respond(self, body):
        prompt = body["prompt"]
        key = prompt[0]
        with self.lock:
            self.attempts[key] = self.attempts.get(key, 0) + 1
            attempt = self.attempts[key]
        if self.delay_s:
            time.sleep(self.delay_s)
        if key == 500:
            return 500, {"error": "internal"}
        if key == 503 and attempt <= self.flaky:
            return 503, {"error": "overloaded"}
        if key == 400:
            return 400, {"error": {"message": "bad prompt"}}
        if key == 777:
            time.sleep(self.slow_s)
        ids, reason = [], "length"
        for i in range(body["max_tokens"]):
            ids.append(prompt[-1] + 1 + i)
            if ids[-1] == 99:
                reason = "stop"
                break
        choice = {"index": 0, "text": "", "finish_reason": reason, "token_ids": ids,
                  "logprobs": {"tokens": [f"token_id:{t}" for t in ids],
                               "token_logprobs": [-0.1 * (i + 1) for i in range(len(ids))],
                               "top_logprobs": [{f"token_id:{t}": -0.1} for t in ids], "text_offset": []}}
        if key == 888:
            del choice["token_ids"]
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(ids),
                 "prompt_tokens_details": {"cached_tokens": min(2, len(prompt))}}
        return 200, {"id": "cmpl-1", "object": "text_completion", "model": body["model"], "choices": [choice],
                     "usage": usage}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


ONE = SamplingParams(max_new_tokens=1)


@pytest.fixture
def server():
    with FakeVLLM() as s:
        yield s


def _sampler(server, **kw):
    kw.setdefault("backoff_s", 0.01)
    return OpenAISampler(server.url, **kw)


def test_tokens_logprobs_and_request_fields(server):
    params = SamplingParams(temperature=0.8, top_p=0.9, top_k=20, max_new_tokens=4, stop=("</guess>",),
                            stop_token_ids=(2,), seed=7)
    with _sampler(server, model="m") as sampler:
        (r,) = sampler.sample([SampleRequest([1, 10], params)])
    assert r.token_ids == [11, 12, 13, 14] and r.finish_reason == "length"
    assert r.logprobs == pytest.approx([-0.1, -0.2, -0.3, -0.4])
    assert (r.prompt_tokens, r.cached_tokens) == (2, 2)
    (body,) = server.bodies
    assert body["prompt"] == [1, 10] and body["model"] == "m" and body["max_tokens"] == 4
    assert body["logprobs"] == 1 and body["return_tokens_as_token_ids"] and body["return_token_ids"]
    assert body["include_stop_str_in_output"] and body["skip_special_tokens"] is False
    assert (body["temperature"], body["top_p"], body["top_k"], body["seed"]) == (0.8, 0.9, 20, 7)
    assert body["stop"] == ["</guess>"] and body["stop_token_ids"] == [2]


def test_stop_finish_reason_and_token_id_strings(server):
    with _sampler(server, model="m") as sampler:
        stop, strings = sampler.sample([SampleRequest([1, 96], SamplingParams(max_new_tokens=10)),
                                        SampleRequest([888, 40], SamplingParams(max_new_tokens=3))])
    assert stop.token_ids == [97, 98, 99] and stop.finish_reason == "stop"
    assert strings.token_ids == [41, 42, 43]


def test_model_name_is_discovered(server):
    with _sampler(server) as sampler:
        sampler.sample([SampleRequest([1, 2], SamplingParams(max_new_tokens=1))])
        assert sampler.model == "tiny-model"
    assert server.bodies[0]["model"] == "tiny-model"


def test_retryable_errors_are_retried_with_backoff(server):
    with _sampler(server, model="m", max_retries=3) as sampler:
        (r,) = sampler.sample([SampleRequest([503, 5], SamplingParams(max_new_tokens=2))])
    assert r.token_ids == [6, 7] and server.attempts[503] == 3


def test_persistent_failure_is_an_error_result_and_others_succeed(server):
    with _sampler(server, model="m", max_retries=2) as sampler:
        bad, good, client = sampler.sample([SampleRequest([500, 1]), SampleRequest([1, 1], ONE),
                                            SampleRequest([400, 1])])
    assert bad.finish_reason == "error" and "HTTP 500" in bad.error and server.attempts[500] == 3
    assert good.token_ids == [2]
    assert client.finish_reason == "error" and "HTTP 400" in client.error and "bad prompt" in client.error
    assert server.attempts[400] == 1  # client errors are not retried


def test_timeouts_become_error_results(server):
    with _sampler(server, model="m", timeout_s=0.2, max_retries=1) as sampler:
        start = time.monotonic()
        (r,) = sampler.sample([SampleRequest([777, 1])])
    assert time.monotonic() - start < 0.9
    assert r.finish_reason == "error" and "cannot reach" in r.error and server.attempts[777] == 2


def test_concurrency_is_bounded():
    with FakeVLLM(delay_s=0.1) as server, _sampler(server, model="m", max_concurrency=2) as sampler:
        out = sampler.sample([SampleRequest([1, i], SamplingParams(max_new_tokens=1)) for i in range(6)])
    assert [r.token_ids for r in out] == [[i + 1] for i in range(6)]  # in request order
    assert server.max_in_flight == 2


def test_unreachable_server_gives_error_results_not_exceptions():
    sampler = OpenAISampler("http://127.0.0.1:9", model="m", max_retries=1, backoff_s=0.01, timeout_s=1)
    (r,) = sampler.sample([SampleRequest([1, 2])])
    assert r.finish_reason == "error" and "cannot reach http://127.0.0.1:9/v1/completions" in r.error
    with pytest.raises(SamplerError, match="cannot list models .* pass model= explicitly"):
        OpenAISampler("http://127.0.0.1:9", max_retries=0).sample([SampleRequest([1])])


def test_config_errors_and_response_checks():
    with pytest.raises(ConfigError, match="`base_url` must start with http"):
        OpenAISampler("localhost:8000")
    with pytest.raises(ConfigError, match="`max_concurrency` must be >= 1, got 0"):
        OpenAISampler("http://x", max_concurrency=0)
    assert OpenAISampler("http://h:1/v1/").api_root == "http://h:1/v1"
    with pytest.raises(SamplerError, match="2 token ids but 1 log-probs"):
        _parse_choice({"choices": [{"token_ids": [1, 2], "finish_reason": "stop",
                                    "logprobs": {"token_logprobs": [-1.0]}}]}, 3)
    with pytest.raises(SamplerError, match="instead of 'token_id:N'"):
        _parse_choice({"choices": [{"finish_reason": "stop", "logprobs": {"tokens": ["hi"],
                                                                           "token_logprobs": [-1.0]}}]}, 3)
    aborted = _parse_choice({"choices": [{"token_ids": [], "finish_reason": "abort",
                                          "logprobs": {"token_logprobs": []}}]}, 3)
    assert aborted.finish_reason == "error" and "'abort'" in aborted.error


def test_rollout_through_the_endpoint(server):
    """The rollout engine runs on an OpenAI-compatible sampler unchanged."""
    pytest.importorskip("transformers")
    from mtrl_gym.rollout.engine import collect
    from test_rollout import EchoEnv

    from tiny_models import build_chatml_tokenizer

    tok = build_chatml_tokenizer()
    with _sampler(server, model="m") as sampler:
        trajs = collect(EchoEnv, [{"id": "a", "turns": 2}, {"id": "b", "turns": 2, "explode_at": 1}], sampler, tok,
                        sampling=SamplingParams(max_new_tokens=3))
    ok, bad = trajs
    assert not ok.failed and ok.num_turns == 2
    assert [ok.token_ids[s:e] for s, e in ok.turn_spans] == [
        [ok.token_ids[s - 1] + 1 + i for i in range(3)] for s, _ in ok.turn_spans]
    assert bad.failed and bad.reward == -1.0
