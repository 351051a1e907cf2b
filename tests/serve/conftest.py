"""Fixtures of the policy-endpoint tests: a real uvicorn server on 127.0.0.1 (a free port)
over a tiny model, a sampler that replays scripted replies with the model's own
log-probs, and a Wordle agent written against the official ``openai`` client."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

from mtrl_gym.messages import env_reply_messages
from mtrl_gym.serve import PolicyServer, PolicyService
from mtrl_gym.rollout.samplers.base import Sampler, SampleResult

MODEL = "tiny"


class ForcedSampler(Sampler):
    """Replies with scripted texts (turn ``k`` of a session gets ``replies[k]`` and EOS);
    each token's log-prob is the model's, given the exact prompt, so a wrong prompt shows."""

    name = "forced"

    def __init__(self, model, tokenizer, replies):
        self.model, self.tokenizer, self.replies = model, tokenizer, list(replies)
        self.eos_token_ids = frozenset({tokenizer.eos_token_id})
        self.max_context_length = 2048
        self.turns: dict[str, int] = {}

    def sample(self, requests):
        out = []
        for r in requests:
            k = self.turns.get(r.session_id, 0)
            self.turns[r.session_id] = k + 1
            ids = self.tokenizer.encode(self.replies[k % len(self.replies)], add_special_tokens=False)
            ids = ids + [self.tokenizer.eos_token_id]
            with torch.no_grad():
                logits = self.model(torch.tensor([list(r.prompt_ids) + ids])).logits[0].float()
            logp = torch.log_softmax(logits[len(r.prompt_ids) - 1:-1], dim=-1)
            values = logp.gather(1, torch.tensor(ids)[:, None])[:, 0].tolist()
            out.append(SampleResult(ids, values, "stop", prompt_tokens=len(r.prompt_ids)))
        return out


@pytest.fixture
def serve():
    """``serve(sampler, tokenizer, **config)`` -> a started :class:`PolicyServer` (stopped after the test)."""
    servers = []

    def start(sampler, tokenizer, **config):
        config.setdefault("model_name", MODEL)
        server = PolicyServer(PolicyService(sampler, tokenizer, **config)).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


def client(base_url: str, api_key: str):
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)


def hermes(calls) -> str:
    return "\n".join("<tool_call>" + json.dumps({"name": c.function.name, "arguments": json.loads(c.function.arguments)})
                     + "</tool_call>" for c in calls)


def play_over_http(base_url: str, api_key: str, env, *, seed: int, task=None, max_turns: int = 6, seeds=None,
                   max_tokens=None, stream: bool = False):
    """An agent with its own loop: the env's tools offered to the model, each tool call
    executed on the env, the results sent back as ``tool`` messages. Returns the reward."""
    c = client(base_url, api_key)
    obs, info = env.reset(seed=seed, options={"task": task} if task is not None else None)
    messages = ([{"role": "system", "content": info["system_prompt"]}] if info.get("system_prompt") else [])
    messages.append({"role": "user", "content": obs})
    tools = info.get("tools") or None
    total = 0.0
    for turn in range(max_turns):
        kwargs = {"seed": seeds[turn]} if seeds is not None else {}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if tools:
            kwargs["tools"] = tools
        r = c.chat.completions.create(model=MODEL, messages=messages, **kwargs)
        msg = r.choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        calls = msg.tool_calls or []
        action = ((msg.content + "\n") if msg.content and calls else (msg.content or "")) + hermes(calls)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        reply = env_reply_messages(obs, info)
        tool_msgs = [m for m in reply if m["role"] == "tool"]
        for m, call in zip(tool_msgs, calls):
            m["tool_call_id"] = call.id
        messages.extend({k: v for k, v in m.items() if k != "name"} for m in reply)
        if terminated or truncated:
            break
    return total


def stderr_until(proc, marker: str, timeout_s: float = 120.0) -> str:
    """What a server process wrote to its stderr pipe up to the line holding ``marker`` (or
    until it exits or ``timeout_s`` passes)."""
    import time

    lines, deadline = [], time.monotonic() + timeout_s
    while not any(marker in line for line in lines) and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        lines.append(line)
    return "".join(lines)


@pytest.fixture
def kit():
    """The helpers above, for test modules (which cannot import conftest)."""
    import types

    return types.SimpleNamespace(ForcedSampler=ForcedSampler, client=client, play=play_over_http, hermes=hermes,
                                 stderr_until=stderr_until, MODEL=MODEL)
