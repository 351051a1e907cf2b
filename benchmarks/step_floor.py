"""How far one real GRPO step is from this machine's compute floor, phase by phase, and its memory.

    python benchmarks/step_floor.py [--case cpu-sft|cpu|wordle-agent|all] [--steps 2]
        [--max-ratio 1.3] [--threads N] [--set KEY=VALUE ...]

For each case, one process builds a :class:`~mtrl_gym.trainers.grpo.trainer.GRPOTrainer`
(the embedded SmolLM2-135M, fp32, tracker off) and runs ``--steps`` real steps; the last
one is measured (the first is a warm-up). Then, in the same run, on the same model with
the same LoRA adapter, it measures the best rates this CPU gives for the work that step did:

* **decode**: one forward pass per sampled token at the step's batch size (every rollout
  of the step in one batch, as the sampler runs them), with a key/value cache of the
  step's mean context length; tokens/s = batch / seconds per forward;
* **prefill**: a no-grad forward over dense rows (the step's mean prefilled row length,
  batched up to ``micro_batch_tokens``); tokens/s;
* **forward+backward**: the update's work on dense rows of the step's mean trained
  sequence length, micro-batched to the same ``micro_batch_tokens``, with the vocabulary
  projection at the same share of target positions; tokens/s.

The step's **compute floor** is its sampled tokens at the decode rate, plus its prefilled
tokens at the prefill rate, plus the token positions its update computes (the trained
sequences' tokens, a prefix shared by a micro-batch's rows counted once, padding left out:
``train/forward_tokens - train/padding_tokens``) at the forward+backward rate. The line
above the table also gives the positions of the trained sequences counted in full: the
work a trainer without prefix sharing would do. Printed: the real step's phases (rollout,
of which env calls; advantages; update, of which old log-prob recomputation, reference
passes and the optimiser; sync; logging), each phase's seconds, share of the step and its
own ratio to its floor, and the step against the floor; the peak RSS of the model load,
the warm-up step and each phase of the measured step against the model's fp32 size
(:class:`mtrl_gym.memory.PeakMemory`).

Cases: ``cpu-sft`` and ``cpu`` are those presets as shipped (``cpu-sft`` from a fresh
adapter, not an SFT one: the same compute); ``wordle-agent`` is the ``cpu-sft`` batch with
Wordle-v0's own agent prompt (its system prompt with the tool schema, 459 tokens, no
prefill; up to 24 tokens a turn). ``--set`` overrides a config field in every case (for
example ``--set micro_batch_tokens=4096``: the knob that trades memory for speed). Exit status 1 when a case's step is more than
``--max-ratio`` times its floor; the verdict line names the phase furthest above its own.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import torch

import mtrl_gym  # noqa: F401 - registers the environments
from mtrl_gym.memory import PeakMemory, release
from mtrl_gym.trainers.grpo import trainer as trainer_module
from mtrl_gym.trainers.grpo.batching import (MicroBatch, TrainSequence, build_sequence, make_micro_batches,
                                             token_logprobs)
from mtrl_gym.trainers.grpo.config import GRPOConfig
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

CASES = {
    "cpu-sft": ("cpu-sft", []),
    "cpu": ("cpu", []),
    # the cpu-sft batch, with the env's own agent prompt: system prompt and tool schema, no prefill
    # (the base model rarely plays a valid call here, so every group may tie: train on them anyway, as the
    # step's compute is what is measured)
    "wordle-agent": ("cpu-sft", ["env_wrappers=[]", "validation.env_wrappers=[]", "serving.assistant_prefix=",
                                 "serving.stop=[]", "serving.max_new_tokens=24",
                                 "objective.drop_zero_variance_groups=false"]),
}


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def decode_rate(model, batch: int, context: int, repeats: int = 8) -> float:
    """Tokens/s of one cached forward per token at ``batch`` rows of ``context`` past tokens."""
    from transformers import DynamicCache

    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (batch, context))
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        step = torch.randint(0, vocab, (batch, 1))
        position = context

        def one() -> None:
            nonlocal position
            model(input_ids=step, past_key_values=cache, use_cache=True, logits_to_keep=1,
                  position_ids=torch.full((batch, 1), position))
            position += 1

        one()  # warm-up
        return batch / _median_seconds(one, repeats)


def prefill_rate(model, length: int, budget: int, repeats: int = 3) -> float:
    """Tokens/s of a no-grad forward over dense rows of ``length`` tokens, ``budget`` tokens a batch."""
    rows = max(1, budget // max(length, 1))
    ids = torch.randint(0, model.config.vocab_size, (rows, length))
    with torch.inference_mode():
        def one() -> None:
            model(input_ids=ids, use_cache=False, logits_to_keep=1)

        one()
        return rows * length / _median_seconds(one, repeats)


def train_rate(model, length: int, targets: int, budget: int, repeats: int = 3) -> float:
    """Tokens/s of forward+backward over dense rows of ``length`` tokens (``targets`` of them
    trained), micro-batched to ``budget`` tokens, through the update's own log-prob code."""
    rows = max(1, budget // max(length, 1))
    vocab = model.config.vocab_size
    targets = min(targets, length - 1)
    seqs = []
    for i in range(rows):
        ids = torch.randint(0, vocab, (length + 1,)).tolist()
        mask = [0] * (length + 1 - targets) + [1] * targets
        seqs.append(build_sequence(ids, mask, [0.0] * (length + 1), 1.0, index=i))
    micro = make_micro_batches(seqs, budget, "sorted")
    assert len(micro) == 1, "one dense micro-batch expected"
    batch: MicroBatch = micro[0]
    model.train()

    def one() -> None:
        logp, _ = token_logprobs(model, batch)
        logp.sum().backward()
        model.zero_grad(set_to_none=True)

    one()
    return rows * length / _median_seconds(one, repeats)


def run_case(name: str, steps: int, max_ratio: float, extra: list[str]) -> bool:
    preset, overrides = CASES[name]
    overrides = [*overrides, *extra]
    release()  # what an earlier case freed goes back to the OS: each case's peaks are its own
    peaks = PeakMemory()
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig.load(preset, overrides=[*overrides, f"output_dir={out}", "tracking.tracker=none", f"max_steps={steps}",
                                                    "checkpoints.save_every=0", "validation.every=0", "progress=false"])
        with peaks("load"):
            trainer = GRPOTrainer(config)
        captured: dict = {}
        real_update = trainer_module.policy_update

        def capture(policy, optimizer, schedule, sequences, settings, **kwargs):  # keep the update's input
            captured["sequences"] = list(sequences)
            with peaks("step/update"):
                return real_update(policy, optimizer, schedule, sequences, settings, **kwargs)

        trainer_module.policy_update = capture
        real_batch = trainer.source.batch

        def batch(*args, **kwargs):
            with peaks("step/rollout"):
                return real_batch(*args, **kwargs)

        trainer.source.batch = batch
        try:
            with peaks("warm-up step"):
                for _ in range(steps - 1):
                    trainer.train_step()
            with peaks("step"):
                metrics = trainer.train_step()
            seconds = dict(trainer.last_step_seconds)
        finally:
            trainer_module.policy_update = real_update
            trainer.source.batch = real_batch
        model = trainer.policy
        c = trainer.config
        sequences: list[TrainSequence] = captured.get("sequences", [])
        episodes = metrics["rollout/episodes"]
        sampled, prefilled = metrics["rollout/tokens_sampled"], metrics["rollout/tokens_prefill"]
        cached = metrics["rollout/tokens_cached"]
        calls = max(1.0, metrics.get("rollout/turns_mean", 1.0))
        trained_positions = float(sum(s.length for s in sequences))
        targets = float(sum(s.num_targets for s in sequences))
        context = int(max(16, (prefilled + cached) / max(1.0, episodes * calls)))
        prefill_len = int(max(16, prefilled / max(1.0, episodes * calls)))
        seq_len = int(max(16, trained_positions / max(1, len(sequences))))
        seq_targets = int(max(1, targets / max(1, len(sequences))))
        with peaks("floor measurements"):
            dec = decode_rate(model, int(episodes), context)
            pre = prefill_rate(model, prefill_len, c.micro_batch_tokens)
            fb = train_rate(model, seq_len, seq_targets, c.micro_batch_tokens)
        trainer.close()

    floor_rollout = sampled / dec + prefilled / pre
    computed = metrics.get("train/forward_tokens", 0.0) - metrics.get("train/padding_tokens", 0.0)
    floor_update = computed / fb
    floor = floor_rollout + floor_update
    step_s = seconds.get("step", 0.0) + seconds.get("logging", 0.0)
    fp32_mb = sum(p.numel() for p in model.parameters()) * 4 / 2**20
    print(f"\n== {name} (preset {preset}{', ' + ' '.join(overrides) if overrides else ''})")
    print(f"batch: {int(episodes)} episodes, {sampled:.0f} sampled tokens, {prefilled:.0f} prefilled, {cached:.0f} "
          f"cached; {len(sequences)} trained sequences, {trained_positions:.0f} positions in full, {computed:.0f} "
          f"computed by the update ({targets:.0f} targets)")
    print(f"best rates here: decode {dec:.0f} tok/s at batch {int(episodes)} (context {context}), prefill {pre:.0f} "
          f"tok/s (rows of {prefill_len}), forward+backward {fb:.0f} tok/s (rows of {seq_len})")
    rows = [("rollout", seconds.get("rollout", 0.0), floor_rollout),
            ("  env calls", metrics.get("time/env_s", 0.0), None),
            ("advantages", seconds.get("advantages", 0.0), 0.0),
            ("update (sync included)", seconds.get("update", 0.0), floor_update),
            ("  old log-probs recomputed", metrics.get("time/recompute_s", 0.0), None),
            ("  reference passes", metrics.get("time/reference_s", 0.0), None),
            ("  optimiser", metrics.get("time/optimizer_s", 0.0), None),
            ("  sync", seconds.get("sync", 0.0), None),
            ("logging", seconds.get("logging", 0.0), 0.0),
            ("step", step_s, floor)]
    print(f"{'phase':<28} {'seconds':>8} {'share':>7} {'floor s':>8} {'ratio':>7}")
    for label, wall, fl in rows:
        share = wall / step_s if step_s else 0.0
        ratio = f"{wall / fl:>6.2f}x" if fl else "      -"
        floor_txt = f"{fl:>8.2f}" if fl is not None else "        "
        print(f"{label:<28} {wall:>8.2f} {share:>7.1%} {floor_txt} {ratio}")
    env_share = metrics.get("time/env_s", 0.0) / seconds["rollout"] if seconds.get("rollout") else 0.0
    print(f"env share of the rollout: {env_share:.2%}")
    print(f"peak RSS (model fp32: {fp32_mb:.0f} MiB):")
    print("  " + peaks.table(limit_mb=fp32_mb).replace("\n", "\n  "))
    gaps = {"rollout": seconds.get("rollout", 0.0) - floor_rollout, "update": seconds.get("update", 0.0) - floor_update,
            "advantages": seconds.get("advantages", 0.0), "logging": seconds.get("logging", 0.0)}
    worst = max(gaps, key=gaps.get)
    ok = floor > 0 and step_s <= max_ratio * floor
    print(f"{'PASS' if ok else 'FAIL'}: step {step_s:.1f} s = {step_s / floor:.2f}x its floor of {floor:.1f} s "
          f"(limit {max_ratio}x); the largest gap is {worst} ({gaps[worst]:.1f} s above its floor)")
    del trainer, model
    release()
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="all", choices=[*CASES, "all"])
    ap.add_argument("--steps", type=int, default=2, help="steps per case; the last is measured (default 2)")
    ap.add_argument("--max-ratio", type=float, default=1.3, help="step / floor limit (default 1.3)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a GRPOConfig field in every case (repeatable)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.steps < 1:
        ap.error("--steps must be >= 1")
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"SmolLM2-135M fp32, CPU, {torch.get_num_threads()} threads; load average {load} at the start")
    names = list(CASES) if args.case == "all" else [args.case]
    results = [run_case(n, args.steps, args.max_ratio, args.overrides) for n in names]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
