"""GRPO steps per hour, synchronous vs asynchronous rollouts (max_staleness 1 and 2), in one run.

    python benchmarks/async_cpu.py [--model smollm2-135m|random-small] [--steps 3] [--tasks 2]
        [--group-size 4] [--max-new-tokens 24] [--threads 2] [--device cpu] [--ray-workers N]

Each mode trains a fresh GRPO run on Wordle (one turn per episode, LoRA rank 8 on the last
8 layers (all 4 of ``random-small``), every group trained even when its rewards tie, so each update does the full
work) for ``--steps`` steps after one warm-up step that is not timed. The model is the
embedded SmolLM2-135M, or ``random-small``: a randomly initialised 4-layer Llama (hidden
size 256) with SmolLM2's tokenizer, a quicker run with the same shape of work:

* **sync**: sample a batch, update, repeat (``source: local``);
* **async k=1**, **async k=2**: a producer thread samples ahead with weights at most k
  steps old (``source: {name: async, max_staleness: k}``);
* with ``--ray-workers N`` also **ray xN** and **ray xN k=1**: the same, the episodes played
  by N Ray actors with a model copy each (a local cluster of N CPUs, started by the script):
  the per-step overhead of the Ray round trip and the weight push, for the cost model of
  docs/scaling.md.

A throwaway one-step run comes first: the first trainer of a process is slower than the
next ones, which made the first mode look slow. Printed per mode: steps/hour over the timed steps, seconds per step, the mean seconds of
one batch's sampling and of one update, the fraction of the timed wall time in which
the sampler and the optimiser ran at the same time (0 for sync by construction), the
mean staleness, and the ratio of steps/hour to the synchronous run's (> 1: async is
faster). The ideal async ratio is ``(sample + update) / max(sample, update)``; on a
machine whose cores both sides already use (2 CPU cores), the two threads mostly take
turns and the gain is small. The script exits 1 if a mode fails to run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback

import torch

from mtrl_gym.trainers.grpo.config import GRPOConfig
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

MODES = {"sync": {"source": {"name": "local"}}, "async k=1": {"source": {"name": "async", "max_staleness": 1}},
         "async k=2": {"source": {"name": "async", "max_staleness": 2}}}


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def overlap_seconds(a: list[tuple[float, float]], b: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds within [lo, hi] covered by both interval sets."""
    total = 0.0
    for s1, e1 in _union(a):
        for s2, e2 in _union(b):
            start, end = max(s1, s2, lo), min(e1, e2, hi)
            total += max(0.0, end - start)
    return total


def _random_small(device: str | None):
    from transformers import LlamaConfig, LlamaForCausalLM

    from mtrl_gym import models

    tokenizer = models.load_tokenizer("smollm2-135m")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=True)
    return LlamaForCausalLM(config).to(device or ("cuda" if torch.cuda.is_available() else "cpu")), tokenizer


def run_mode(name: str, extra: dict, args, model_and_tokenizer) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(output_dir=out, model=args.model, env="mtrl/Wordle-v0",
                            global_batch_size=args.tasks, group_size=args.group_size, max_steps=args.steps + 1,
                            serving={"max_new_tokens": args.max_new_tokens, "temperature": 1.0},
                            episode={"max_turns": 1, "max_tokens": 2048},
                            lora={"rank": 8, "alpha": 16.0, "layers": None if args.model == "random-small" else 8},
                            learning_rate=1e-4, tracking={"tracker": "none", "log_trajectories": 0}, progress=False,
                            validation={"every": 0}, checkpoints={"save_every": 0}, train_size=64,
                            device=args.device, seed=0, objective={"drop_zero_variance_groups": False}, **extra)
        model, tokenizer = model_and_tokenizer()
        trainer = GRPOTrainer(config, model=model, tokenizer=tokenizer)
        try:
            metrics = [trainer.train_step()]  # warm-up, not timed
            start = time.monotonic()
            for _ in range(args.steps):
                metrics.append(trainer.train_step())
            end = time.monotonic()
        finally:
            trainer.close()
    timed = metrics[1:]
    wall = end - start
    sample_s = [m.get("async/sample_s", m.get("time/rollout_s", 0.0)) for m in timed]
    return {"steps_per_hour": 3600.0 * args.steps / wall, "s_per_step": wall / args.steps,
            "sample_s": sum(sample_s) / len(sample_s),
            "update_s": sum(m["time/update_s"] for m in timed) / len(timed),
            "overlap": overlap_seconds(trainer.rollout_intervals, trainer.update_intervals, start, end) / wall,
            "staleness": sum(m.get("async/staleness_mean", 0.0) for m in timed) / len(timed)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="an embedded/hub model, or random-small")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per mode (after one warm-up step)")
    parser.add_argument("--tasks", type=int, default=2, help="tasks per step")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (CPU)")
    parser.add_argument("--device", default=None, help="cpu, cuda...; default: CUDA when available")
    parser.add_argument("--ray-workers", type=int, default=0, help="also run the Ray modes with N workers")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of: " + ", ".join(MODES))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from mtrl_gym import models

    loaded = _random_small(args.device) if args.model == "random-small" else models.load(args.model, device=args.device)
    state = {k: v.detach().clone() for k, v in loaded[0].state_dict().items()}

    def fresh():  # every mode starts from the same weights (LoRA is added by the trainer)
        import copy

        model = copy.deepcopy(loaded[0])
        model.load_state_dict(state)
        return model, loaded[1]

    modes = {}
    for name in args.modes.split(","):
        if name.strip() not in MODES:
            parser.error(f"unknown mode {name.strip()!r}; use one of {', '.join(MODES)}")
        modes[name.strip()] = MODES[name.strip()]
    if args.ray_workers:
        from mtrl_gym.rollout.sources.ray_workers import start_local_ray

        ray_dir = tempfile.mkdtemp(prefix="ray-bench-")
        start_local_ray(args.ray_workers, temp_dir=ray_dir)
        on_ray = {"name": "ray", "workers": args.ray_workers}
        modes[f"ray x{args.ray_workers}"] = {"source": on_ray}
        modes[f"ray x{args.ray_workers} k=1"] = {"source": {"name": "async", "max_staleness": 1, "source": on_ray}}
    print(f"GRPO on Wordle, {args.model}, {args.tasks} tasks x {args.group_size} episodes, "
          f"{args.max_new_tokens} new tokens, {args.steps} timed steps, {args.threads} torch threads, "
          f"device {args.device or ('cuda' if torch.cuda.is_available() else 'cpu')}")
    print(f"{'mode':<12} {'steps/h':>8} {'s/step':>7} {'sample s':>9} {'update s':>9} {'overlap':>8} "
          f"{'stale':>6} {'vs sync':>8}", flush=True)
    # The first trainer of a process runs slower than later ones (allocator, thread pools, caches):
    # one untimed step of a throwaway run keeps that off whichever mode comes first.
    try:
        run_mode("warm-up", {}, argparse.Namespace(**{**vars(args), "steps": 1}), fresh)
    except Exception:  # noqa: BLE001 - the modes below fail the same way and say so
        print("the warm-up run failed; the modes will tell", file=sys.stderr)
    results, failed = {}, []
    for name, extra in modes.items():  # each row as soon as its mode is done
        try:
            r = results[name] = run_mode(name, extra, args, fresh)
        except Exception:  # noqa: BLE001 - reported, then the exit status says it
            traceback.print_exc()
            failed.append(name)
            continue
        base = results.get("sync", {}).get("steps_per_hour")
        ratio = f"{r['steps_per_hour'] / base:8.2f}" if base else f"{'-':>8}"
        print(f"{name:<12} {r['steps_per_hour']:8.0f} {r['s_per_step']:7.2f} {r['sample_s']:9.2f} "
              f"{r['update_s']:9.2f} {r['overlap']:8.1%} {r['staleness']:6.2f} {ratio}", flush=True)
    if args.ray_workers:
        import shutil

        import ray as ray_module

        ray_module.shutdown()
        shutil.rmtree(ray_dir, ignore_errors=True)
    sync = results.get("sync")
    if sync:  # what perfect overlap of the synchronous run's two halves would give
        ideal = sync["s_per_step"] / max(sync["sample_s"], sync["update_s"])
        print(f"ideal async ratio from the sync run's halves: {ideal:.2f} (a ratio above it means the modes' "
              "sampling speed differed: machine load, not overlap)")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
