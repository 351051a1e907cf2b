"""Whether ``--precision auto`` of the CPU recipe picks the faster number format on this machine.

    python benchmarks/precision_cpu.py [--sft-steps 4] [--eval-words 16] [--threads N]

``examples/train_wordle_cpu.py --precision auto`` (its default) runs SFT under bfloat16
autocast and loads every evaluation's weights in bfloat16 where the CPU computes bfloat16
natively (:func:`mtrl_gym.trainers.grpo.policy.native_bf16`: AVX512-BF16 or AMX), and in
float32 elsewhere (on an AVX2-only CPU bfloat16 is emulated and slower). This script times
both formats on the same work, in one run, with the embedded SmolLM2-135M-Instruct and the
recipe's settings (the ``cpu-sft`` preset's serving format, spelled guesses, the recap line):

* **SFT**: ``--sft-steps`` steps of 8 examples from the same teacher games (LoRA rank 16 on
  the last 12 layers, micro-batches of 1024 tokens, the same seed), float32 against bfloat16
  autocast; the median of the trainer's step seconds (``time/step_s``) after the first step,
  which pays the one-off set-up;
* **evaluation**: full 6-guess games on the first ``--eval-words`` validation words at
  temperature 0.5, the same seeds, played by the float32 SFT adapter above, weights float32
  against bfloat16 (:class:`mtrl_gym.evaluation.ModelPool` ``dtype``); wall seconds of
  :func:`mtrl_gym.evaluation.evaluate`, model loading included, after an untimed one-game
  warm-up in each format; the turns each played are printed beside (their boards differ
  with the numbers, so their prompts do too).

It prints the seconds of each side, bfloat16's speed-up over float32 and each side's peak
resident memory (:class:`mtrl_gym.memory.PeakMemory`, memory handed back between sides), and
exits with status 1 when the format ``auto`` picks here is the slower one on either task.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def recipe_config():
    """The ``cpu-sft`` preset with the recipe's recap line (its spelled guesses are the preset's)."""
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    config = GRPOConfig.load("cpu-sft")
    return config.replace(serving={"wrappers": [*config.serving.wrappers, {"name": "WordleRecap", "kwargs": {}}]})


def teacher_demos(config, path: Path, episodes: int) -> Path:
    """``episodes`` ranked-teacher games (seed 0) in ``config``'s spelled serving format, written to ``path``."""
    from mtrl_gym.trainers.demos import DemoConfig, make_demos, write_demos

    demo = DemoConfig(env=config.env, env_wrappers=[config.env_wrappers[0]], policy="teacher",
                      policy_kwargs={"choice": "ranked", "spelled": True}, num_episodes=episodes,
                      model=config.model, serving=config.serving, max_turns=6,
                      max_episode_tokens=config.episode.max_tokens, train_size=config.train_size,
                      val_size=config.val_size, split_seed=config.split_seed, seed=0)
    write_demos(make_demos(demo), path, demo)
    return path


def sft_step_seconds(demos: Path, out: Path, steps: int, autocast: str | None) -> tuple[float, Path]:
    """The median seconds of an SFT step after the first, and the adapter."""
    from mtrl_gym.jsonl import iter_jsonl
    from mtrl_gym.trainers.sft.config import SFTConfig
    from mtrl_gym.trainers.sft.trainer import SFTTrainer

    config = SFTConfig(demos=[str(demos)], output_dir=str(out), batch_size=8, max_steps=steps,
                       lora={"rank": 16, "alpha": 32, "layers": 12}, learning_rate=5e-4,
                       optimizer={"warmup_steps": 3}, micro_batch_tokens=1024, autocast_dtype=autocast,
                       progress=False, checkpoints={"save_every": 0}, tracking={"tracker": "none"})
    summary = SFTTrainer(config).train()
    seconds = [r["time/step_s"] for _, r in iter_jsonl(Path(summary["run_dir"]) / "metrics.jsonl")
               if "time/step_s" in r]
    return statistics.median(seconds[1:]), Path(summary["adapter"])


def eval_seconds(config, adapter: Path, out: Path, words: int, dtype: str | None) -> tuple[float, int]:
    """Wall seconds of full games on ``words`` validation words, and the turns played (the
    trajectories are in ``out``)."""
    from mtrl_gym.evaluation import EvalConfig, ModelPool, RunSpec, evaluate, read_records
    from mtrl_gym.evaluation.serving import system_prompt_file

    prompt = config.env_wrappers[0]["kwargs"]
    spec = RunSpec("sft", model=config.model, adapter=str(adapter),
                   serving=config.serving.replace(temperature=0.5, system_prompt=system_prompt_file(prompt["text"], out),
                                                  tools=prompt["tools"]))
    started = time.monotonic()
    evaluate(config.env, [spec], split="val", limit=words, out_dir=out, report=False, pool=ModelPool(dtype=dtype),
             config=EvalConfig(n=1, seed=1234, max_turns=6, batch_tasks=16, progress=False))
    seconds = time.monotonic() - started
    turns = sum(sum(m["role"] == "assistant" for m in r["messages"])
                for r in read_records(out / "trajectories" / "sft.jsonl"))
    return seconds, turns


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_args(doc: str, steps_help: str) -> argparse.Namespace:
    """The flags both CPU-recipe benchmarks take (``--sft-steps``, ``--eval-words``,
    ``--threads``); sets torch's threads when given."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--sft-steps", type=positive, default=4, help=steps_help)
    p.add_argument("--eval-words", type=positive, default=16)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = p.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    return args


def main() -> int:
    args = parse_args(__doc__, "SFT steps per format, the first untimed")
    import torch

    from mtrl_gym import memory
    from mtrl_gym.trainers.grpo.policy import native_bf16

    picked = "bfloat16" if native_bf16("cpu") else "float32"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; native bfloat16: {native_bf16('cpu')}, "
          f"so --precision auto picks {picked}", flush=True)
    config = recipe_config()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        demos = teacher_demos(config, tmp / "demos.jsonl", 8 * (args.sft_steps + 1))
        peaks = memory.PeakMemory()
        with peaks("sft float32"):
            fp32_sft, adapter = sft_step_seconds(demos, tmp / "sft-fp32", args.sft_steps, None)
        memory.release()
        with peaks("sft bfloat16"):
            bf16_sft, _ = sft_step_seconds(demos, tmp / "sft-bf16", args.sft_steps, "bfloat16")
        memory.release()
        for dtype in (None, "bfloat16"):  # untimed: the first evaluation in each format pays its set-up
            eval_seconds(config, adapter, tmp / f"warm-up-{dtype}", 1, dtype)
            memory.release()
        with peaks("eval float32"):
            fp32_eval, fp32_turns = eval_seconds(config, adapter, tmp / "eval-fp32", args.eval_words, None)
        memory.release()
        with peaks("eval bfloat16"):
            bf16_eval, bf16_turns = eval_seconds(config, adapter, tmp / "eval-bf16", args.eval_words, "bfloat16")
    rows = [(f"SFT step (median of {args.sft_steps - 1})", fp32_sft, bf16_sft, "sft", ""),
            (f"evaluation, {args.eval_words} full games", fp32_eval, bf16_eval, "eval",
             f" ({fp32_turns} and {bf16_turns} turns)")]
    failed = False
    print(f"\n{'':<32} {'float32 s':>10} {'bfloat16 s':>11} {'bf16 speed-up':>14} {'peak MiB fp32/bf16':>19}  verdict")
    for name, fp32, bf16, key, note in rows:
        speedup = fp32 / bf16
        ok = speedup >= 1.0 if picked == "bfloat16" else speedup <= 1.0
        failed |= not ok
        mib = f"{peaks.mb[key + ' float32']:.0f}/{peaks.mb[key + ' bfloat16']:.0f}"
        print(f"{name:<32} {fp32:>10.1f} {bf16:>11.1f} {speedup:>13.2f}x {mib:>19}  "
              f"{'ok' if ok else 'FAIL'}: auto picks {picked}{note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
