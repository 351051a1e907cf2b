"""Rollout speed on CPU: the rollout engine vs. plain ``generate``, and prefill work with KV reuse.

    python benchmarks/rollout_cpu.py [--episodes 8] [--turns 4] [--max-new-tokens 64] [--threads 2]

Plays ``--episodes`` Wordle episodes (validation tasks) with the embedded SmolLM2-135M at
batch ``--episodes`` through :class:`~mtrl_gym.rollout.samplers.hf.HFSampler`, then, in
the same run:

* **generate**: transformers' ``model.generate`` on the same prompts (every turn's context
  of every episode, left-padded, batch ``--episodes``, same sampling settings). It has no
  cache across turns, so it prefills each whole context again.
* **rollout, no KV reuse**: the same rollout with ``kv_reuse=False`` (``--skip-no-reuse``
  leaves it out).

Printed: sampled tokens/s of the rollout end to end (env steps and rendering included) and of
its sampler calls, against generate's tokens/s on the same prompts (ratio > 1: faster);
then, per turn, the prompt tokens computed per episode with and without KV reuse. With
reuse each context token is computed once, so cumulative prefill stays at about the
episode length (ratio <= 1: linear); without it the sum of all contexts grows
quadratically with the number of turns.

Last, the **env's share** of the rollout's wall time: the seconds the episodes spent inside the
env's ``reset`` and ``step`` (``Trajectory.metrics["env_time_s"]``) against the rollout's wall
time. The env must cost at most ``--max-env-share`` (default 1 %) of a rollout; the script
exits 1 when it costs more.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

import mtrl_gym  # noqa: F401 - registers the environments
from mtrl_gym import models
from mtrl_gym.envs.wordle.profile import wordle_split
from mtrl_gym.rollout.engine import RolloutEngine
from mtrl_gym.rollout.samplers.base import SamplingParams
from mtrl_gym.rollout.samplers.hf import HFSampler


def timed_sampler(sampler: HFSampler) -> dict:
    """Wrap ``sampler.sample`` to record each call's requests, results and seconds."""
    log = {"seconds": 0.0, "calls": []}
    real = sampler.sample

    def sample(requests):
        start = time.perf_counter()
        results = real(requests)
        log["seconds"] += time.perf_counter() - start
        log["calls"].append((requests, results))
        return results

    sampler.sample = sample
    return log


def rollout(model, tok, tasks, params: SamplingParams, turns: int, kv_reuse: bool):
    sampler = HFSampler(model, tok, kv_reuse=kv_reuse, seed=0)
    log = timed_sampler(sampler)
    engine = RolloutEngine("mtrl/Wordle-v0", sampler, tok, sampling=params, max_turns=turns)
    engine.collect(tasks[:1], seed=0)  # warm-up: one episode, not timed
    log["seconds"], log["calls"] = 0.0, []
    start = time.perf_counter()
    trajs = engine.collect(tasks, seed=0)
    wall = time.perf_counter() - start
    engine.close()
    return trajs, wall, log


def plain_generate(model, tok, calls, params: SamplingParams) -> tuple[int, float]:
    """``model.generate`` on every turn's prompts, batched like the rollout; (tokens, seconds)."""
    eos = tok.eos_token_id
    tokens, seconds = 0, 0.0
    torch.manual_seed(0)
    for requests, _ in calls:
        prompts = [r.prompt_ids for r in requests]
        width = max(map(len, prompts))
        ids = torch.tensor([[eos] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=params.temperature > 0,
                                 temperature=params.temperature or None, top_p=params.top_p, top_k=params.top_k,
                                 max_new_tokens=params.max_new_tokens, eos_token_id=eos, pad_token_id=eos)
        seconds += time.perf_counter() - start
        for row in out[:, width:].tolist():
            tokens += row.index(eos) + 1 if eos in row else len(row)
    return tokens, seconds


def prefill_table(calls_reuse, episodes: int) -> None:
    """Per turn: cumulative prompt tokens computed per episode, with and without reuse."""
    print(f"\n{'turn':>4} {'context':>9} {'prefill, KV reuse':>18} {'prefill, no reuse':>18} "
          f"{'reuse / context':>16} {'saved':>7}")
    ctx = with_reuse = without = 0.0
    for turn, (requests, results) in enumerate(calls_reuse, start=1):
        n = len(requests)
        ctx = sum(len(r.prompt_ids) for r in requests) / n
        with_reuse += sum(r.prefill_tokens for r in results) / n
        without += sum(r.prompt_tokens for r in results) / n
        print(f"{turn:>4} {ctx:>9.0f} {with_reuse:>18.0f} {without:>18.0f} {with_reuse / ctx:>16.2f} "
              f"{1 - with_reuse / without:>7.1%}")
    print(f"(per episode, {episodes} episodes; 'context' is the prompt length of that turn)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--skip-no-reuse", action="store_true", help="do not time the rollout without KV reuse")
    ap.add_argument("--max-env-share", type=float, default=0.01, help="env seconds / rollout wall limit (default 0.01)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tok = models.load("smollm2-135m", device="cpu")
    tasks = wordle_split()[1][:args.episodes]
    params = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    print(f"SmolLM2-135M fp32, CPU, {torch.get_num_threads()} threads; {args.episodes} Wordle episodes at batch "
          f"{args.episodes}, <= {args.turns} turns, <= {args.max_new_tokens} tokens per turn\n", flush=True)

    trajs, wall, log = rollout(model, tok, tasks, params, args.turns, kv_reuse=True)
    sampled = sum(t.sampled_tokens for t in trajs)
    print(f"rollout with KV reuse: {sampled} tokens in {wall:.1f} s", flush=True)
    gen_tokens, gen_seconds = plain_generate(model, tok, log["calls"], params)
    print(f"generate: {gen_tokens} tokens in {gen_seconds:.1f} s\n", flush=True)
    gen_rate = gen_tokens / gen_seconds
    rows = [("rollout, end to end (KV reuse)", sampled, wall),
            ("rollout, sampler calls only", sampled, log["seconds"])]
    if not args.skip_no_reuse:
        trajs_nr, wall_nr, log_nr = rollout(model, tok, tasks, params, args.turns, kv_reuse=False)
        sampled_nr = sum(t.sampled_tokens for t in trajs_nr)
        rows += [("rollout, end to end (no reuse)", sampled_nr, wall_nr),
                 ("rollout, sampler calls (no reuse)", sampled_nr, log_nr["seconds"])]
    rows.append(("plain generate, same prompts", gen_tokens, gen_seconds))
    print(f"{'':<36} {'tokens':>7} {'seconds':>8} {'tok/s':>7} {'vs generate':>12}")
    for name, tokens, seconds in rows:
        rate = tokens / seconds
        print(f"{name:<36} {tokens:>7} {seconds:>8.1f} {rate:>7.1f} {rate / gen_rate:>11.2f}x")
    prefill_table(log["calls"], args.episodes)
    mean_len = sum(len(t.token_ids) for t in trajs) / len(trajs)
    mean_prefill = sum(t.prefill_tokens for t in trajs) / len(trajs)
    print(f"\nepisode length {mean_len:.0f} tokens; prefilled with KV reuse {mean_prefill:.0f} "
          f"({mean_prefill / mean_len:.2f} per token: linear), without "
          f"{sum(t.prefill_tokens + t.cached_tokens for t in trajs) / len(trajs):.0f}")
    env_s = sum(t.metrics.get("env_time_s", 0.0) for t in trajs)
    share = env_s / wall
    ok = share <= args.max_env_share
    print(f"\n{'PASS' if ok else 'FAIL'}: the env's reset/step calls took {env_s * 1000:.1f} ms of the rollout's "
          f"{wall:.1f} s: {share:.3%} (limit {args.max_env_share:.0%})")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
