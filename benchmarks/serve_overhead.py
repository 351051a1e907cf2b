"""Policy-endpoint overhead: sampled tokens/s through the HTTP server vs. the in-process engine.

    python benchmarks/serve_overhead.py [--agents 8] [--turns 3] [--max-new-tokens 48] [--rounds 2]

Both paths play the same ``--agents`` Wordle episodes (validation words) with the same
:class:`~mtrl_gym.rollout.samplers.hf.HFSampler` over the embedded SmolLM2-135M, the same
sampling settings and the same per-turn seeds, so they sample the same tokens:

* **engine**: :class:`~mtrl_gym.rollout.engine.RolloutEngine` plays all episodes in one
  process, one sampler batch per turn;
* **server**: a :class:`~mtrl_gym.serve.PolicyServer` on 127.0.0.1 and ``--agents`` agent
  threads, each with its own session URL and its own ``openai`` client loop (tool calls
  executed on its own env, results sent back as ``tool`` messages). The server batches
  the concurrent requests onto the sampler.

Each round runs both (after one warm-up of each); the printed figure is the median over
rounds of sampled tokens per wall-clock second, and the ratio server / engine (target:
>= 0.8). The server's mean batch size shows how well the concurrent agents were batched.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import gymnasium
import numpy as np
import torch

import mtrl_gym  # noqa: F401 - registers the environments
from mtrl_gym import models
from mtrl_gym.envs.wordle.profile import wordle_split
from mtrl_gym.messages import env_reply_messages
from mtrl_gym.serve import PolicyServer, PolicyService
from mtrl_gym.rollout.engine import RolloutEngine
from mtrl_gym.rollout.samplers.base import SamplingParams
from mtrl_gym.rollout.samplers.hf import HFSampler


def seeds_for(base: int, g: int, turns: int) -> list[int]:
    """The rollout engine's per-turn seeds of episode ``(g, 0)`` (so both paths sample alike)."""
    return [int(np.random.SeedSequence([base, g, 0, t]).generate_state(1)[0]) for t in range(turns)]


def engine_run(model, tok, tasks, params: SamplingParams, turns: int, base: int) -> tuple[int, float]:
    engine = RolloutEngine("mtrl/Wordle-v0", HFSampler(model, tok), tok, sampling=params, max_turns=turns)
    start = time.perf_counter()
    trajs = engine.collect(tasks, seed=base)
    seconds = time.perf_counter() - start
    engine.close()
    return sum(t.sampled_tokens for t in trajs), seconds


def agent(url: str, key: str, model_id: str, task: dict, seed: int, seeds: list[int], max_tokens: int) -> None:
    """One episode with its own openai-client loop (``key``: its session's key)."""
    from openai import OpenAI

    client = OpenAI(base_url=url, api_key=key, max_retries=0)
    env = gymnasium.make("mtrl/Wordle-v0")
    obs, info = env.reset(seed=seed, options={"task": task})
    messages = [{"role": "system", "content": info["system_prompt"]}, {"role": "user", "content": obs}]
    tools = info["tools"]  # schemas come with reset, not with every step
    for turn_seed in seeds:
        msg = client.chat.completions.create(model=model_id, messages=messages, tools=tools,
                                             max_tokens=max_tokens, seed=turn_seed).choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        calls = msg.tool_calls or []
        text = "\n".join("<tool_call>" + json.dumps({"name": c.function.name,
                                                      "arguments": json.loads(c.function.arguments)})
                         + "</tool_call>" for c in calls)
        action = ((msg.content or "") + ("\n" if msg.content and calls else "") + text) if calls else (msg.content or "")
        obs, _, terminated, truncated, info = env.step(action)
        reply = env_reply_messages(obs, info)
        for m, c in zip([m for m in reply if m["role"] == "tool"], calls):
            m["tool_call_id"] = c.id
        messages.extend(reply)
        if terminated or truncated:
            break


def server_run(model, tok, tasks, params: SamplingParams, turns: int, base: int) -> tuple[int, float, float]:
    service = PolicyService(HFSampler(model, tok), tok, model_name="policy", sampling=params)
    with PolicyServer(service) as server:
        sessions = [service.create_session() for _ in tasks]
        sids = [s.id for s in sessions]
        threads = [threading.Thread(target=agent, args=(server.session_url(s.id), s.key, "policy", task, base + g,
                                                         seeds_for(base, g, turns), params.max_new_tokens))
                   for g, (s, task) in enumerate(zip(sessions, tasks))]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        sampled = sum(s.sampled_tokens for sid in sids for s in service.get_session(sid).segments)
        stats = service.worker.stats
    return sampled, seconds, stats["requests"] / max(stats["batches"], 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=8)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--model", default="smollm2-135m")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model, tok = models.load(args.model, device="cpu")
    tasks = wordle_split(train=1, val=args.agents, seed=42)[1]
    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    engine_run(model, tok, tasks[:2], params, 2, 1)  # warm-ups, not timed
    server_run(model, tok, tasks[:2], params, 2, 1)
    eng, srv, batch = [], [], []
    for r in range(args.rounds):
        n, s = engine_run(model, tok, tasks, params, args.turns, 100 + r)
        eng.append(n / s)
        m, t, b = server_run(model, tok, tasks, params, args.turns, 100 + r)
        srv.append(m / t)
        batch.append(b)
        print(f"round {r}: engine {n} tokens in {s:.1f} s ({n / s:.1f} tok/s); server {m} tokens in {t:.1f} s "
              f"({m / t:.1f} tok/s), mean batch {b:.1f}", flush=True)
    e, s = statistics.median(eng), statistics.median(srv)
    print(f"\n{args.agents} agents x {args.turns} turns, {args.max_new_tokens} new tokens/turn, {args.model}, "
          f"{args.threads} threads")
    print(f"engine (in-process): {e:8.1f} sampled tok/s")
    print(f"server (HTTP)      : {s:8.1f} sampled tok/s   mean batch {statistics.median(batch):.1f}")
    print(f"ratio server/engine: {s / e:.2f}  (target >= 0.8)")


if __name__ == "__main__":
    main()
