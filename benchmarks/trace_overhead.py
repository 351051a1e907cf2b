"""What MLflow traces cost a GRPO step: seconds spent tracing / seconds of the step without it.

    python benchmarks/trace_overhead.py [--model smollm2-135m] [--steps 3] [--per-step 4] [--limit 0.05]

Trains ``--steps`` GRPO steps of the CPU preset's shape on ``mtrl/Wordle-v0`` (LoRA on the
embedded SmolLM2-135M by default) with the MLflow tracker on a local SQLite store in a
temporary folder and ``tracking.traces.per_step`` episodes traced per step. MLflow's background
trace writer is switched off (``MLFLOW_ENABLE_ASYNC_TRACE_LOGGING=false``), so every trace is
built *and stored* inside the step: the figure is an upper bound on what a run with the
default background writer pays.

Per step it prints the step's wall time, the seconds inside ``RunRecorder.traces`` and their
ratio to the rest of the step; the verdict is the total ratio over the steps after the first
(which also pays MLflow's one-off set-up, printed separately). Exit status 1 when the ratio
is above ``--limit`` (default 5 %).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--per-step", type=int, default=4, help="tracking.traces.per_step")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--groups", type=int, default=2, help="groups (tasks) per step")
    p.add_argument("--max-turns", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--limit", type=float, default=0.05)
    args = p.parse_args()
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # traces stored inside the step
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

    import torch

    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.tracking import RunRecorder
    from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    spent: list[float] = []
    inner = RunRecorder.traces

    def timed(self, *a, **k):
        start = time.perf_counter()
        inner(self, *a, **k)
        spent.append(time.perf_counter() - start)

    RunRecorder.traces = timed
    folder = Path(tempfile.mkdtemp(prefix="trace_overhead_"))
    config = GRPOConfig.load("cpu", overrides=[
        f"output_dir={folder / 'run'}", f"model={args.model}", f"global_batch_size={args.groups * args.group_size}",
        f"group_size={args.group_size}", f"max_steps={args.steps}", f"episode.max_turns={args.max_turns}",
        f"serving.max_new_tokens={args.max_new_tokens}", "validation.every=0", "checkpoints.save_every=0",
        "progress=false", "tracking.tracker=mlflow", f"tracking.uri=sqlite:///{folder / 'mlflow.db'}",
        "tracking.experiment=trace-overhead", f"tracking.traces.per_step={args.per_step}"])
    cwd = os.getcwd()
    os.chdir(folder)  # MLflow's artifacts go under ./mlruns
    try:
        trainer = GRPOTrainer(config)
        trainer.recorder.tracker.start(config.to_dict())
        walls = []
        print(f"{'step':>4} {'wall s':>8} {'traces s':>9} {'ratio':>7}")
        for step in range(args.steps):
            before = len(spent)
            start = time.perf_counter()
            trainer.train_step()
            walls.append(time.perf_counter() - start)
            traced = sum(spent[before:])
            spent[before:] = [traced]
            print(f"{step + 1:>4} {walls[-1]:8.2f} {traced:9.3f} {traced / (walls[-1] - traced):7.2%}", flush=True)
        trainer.recorder.tracker.finish()
        trainer.close()
    finally:
        os.chdir(cwd)
    later_wall, later_traces = sum(walls[1:]), sum(spent[1:])
    if args.steps < 2:
        print("need --steps >= 2 (the first step also pays MLflow's set-up)", file=sys.stderr)
        return 2
    ratio = later_traces / (later_wall - later_traces)
    print(f"\nfirst step (with MLflow's set-up): {spent[0]:.3f} s of tracing in {walls[0]:.2f} s")
    print(f"steps 2..{args.steps}: {later_traces:.3f} s tracing {args.per_step} episodes/step in {later_wall:.2f} s; "
          f"ratio tracing / rest of the step: {ratio:.2%} (limit {args.limit:.0%})")
    if ratio > args.limit:
        print(f"FAILED: tracing costs {ratio:.2%} of a step, over the {args.limit:.0%} limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
