"""Whether the transformers sampler's contiguous copy before the vocabulary projection pays.

    python benchmarks/sampler_head_cpu.py [--sft-steps 4] [--eval-words 16] [--threads N]

A prefill asks the model for the last position's logits only (``logits_to_keep=1``), so the
vocabulary projection receives ``hidden[:, -1:, :]``: a view of the batch strided by the
whole prompt. CPU matmul kernels take a slow path on such a view, and
:class:`~mtrl_gym.rollout.samplers.hf.HFSampler` therefore hands the projection a contiguous
copy while it samples. This script plays the same full 6-guess Wordle games (the first
``--eval-words`` validation words, the embedded SmolLM2-135M-Instruct after ``--sft-steps``
steps of the recipe's SFT on teacher games, so that its turns have the similar lengths a
trained policy's have and are prefilled in one batch; the CPU recipe's serving settings
with the recap line, temperature 0.5, the same seeds, 16 games a batch)
with the copy and with the view, in bfloat16 (where the CPU computes it natively) and in
float32, in one run, each after an untimed one-game warm-up in its format.

It prints the wall seconds of each side (:func:`mtrl_gym.evaluation.evaluate`, model loading
included), the copy's speed-up, and whether the two sides played the same games (the copy
gives bit-equal projections in bfloat16; in float32 the kernels may round differently, so
there a differing game is reported, not failed), and how many of the projection's inputs
were strided on each side. Exit status 1 when the copy costs time in a format (more than the
noise allowance of 10 %), when a bfloat16 game differs, when the view side never handed the
projection a strided input (the comparison then measures nothing), or when the copy side
did. Each side runs first in one format. (In float32
the slow path costs about 30 ms a prefill on a 2-core CPU, within that noise; in bfloat16
over a second.)
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

from precision_cpu import eval_seconds, parse_args, recipe_config, sft_step_seconds, teacher_demos

NOISE = 1.10
"""The copy fails when it is slower than the view by more than this factor."""


def _watched(copy, seen: list[bool]):
    """The sampler's head context with a watch: ``seen`` gets whether each input of the
    projection was contiguous (``copy`` None: the view, no copy)."""

    @contextlib.contextmanager
    def context(model):
        from mtrl_gym.rollout.samplers import hf

        watch = hf._output_projection(model).register_forward_hook(
            lambda _module, args, _out: seen.append(args[0].is_contiguous()))
        try:
            with copy(model) if copy is not None else contextlib.nullcontext():
                yield
        finally:
            watch.remove()

    return context


def _games(folder: Path) -> list:
    from mtrl_gym.evaluation import read_records

    return [r["messages"] for r in read_records(folder / "trajectories" / "sft.jsonl")]


def verdict(name: str, view: tuple, copy: tuple) -> list[str]:
    """Why the copy fails in format ``name`` (empty: it passes); each side is ``(seconds, turns,
    games, seen)``, ``seen`` whether each input of the projection was contiguous."""
    (view_s, _, view_games, view_seen), (copy_s, _, copy_games, copy_seen) = view, copy
    different = len(view_games) != len(copy_games) or any(a != b for a, b in zip(view_games, copy_games))
    return [reason for reason, bad in (
        ("the copy is slower", copy_s > view_s * NOISE),
        ("a game differs", name == "bfloat16" and different),
        ("the view side never strided the projection's input: nothing was measured", all(view_seen)),
        ("the copy side left a strided input", not all(copy_seen))) if bad]


def main() -> int:
    args = parse_args(__doc__, "SFT steps of the adapter that plays")
    import torch

    from mtrl_gym import memory
    from mtrl_gym.rollout.samplers import hf
    from mtrl_gym.trainers.grpo.policy import native_bf16

    dtypes = ["bfloat16", None] if native_bf16("cpu") else [None]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; native bfloat16: {native_bf16('cpu')}",
          flush=True)
    config = recipe_config()
    copy = hf._contiguous_head_input
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        demos = teacher_demos(config, tmp / "demos.jsonl", 8 * args.sft_steps)
        _, adapter = sft_step_seconds(demos, tmp / "sft", args.sft_steps, None)
        memory.release()
        for i, dtype in enumerate(dtypes):
            name = dtype or "float32"
            eval_seconds(config, adapter, tmp / f"warm-up-{name}", 1, dtype)
            memory.release()
            for side in ("view", "copy") if i % 2 == 0 else ("copy", "view"):  # each side first once
                seen: list[bool] = []
                hf._contiguous_head_input = _watched(copy if side == "copy" else None, seen)
                try:
                    seconds, turns = eval_seconds(config, adapter, tmp / f"{name}-{side}", args.eval_words, dtype)
                finally:
                    hf._contiguous_head_input = copy
                memory.release()
                results[name, side] = seconds, turns, _games(tmp / f"{name}-{side}"), seen
                print(f"{name}, {side}: {seconds:.1f} s, {turns} turns, {seen.count(False)} of the projection's "
                      f"{len(seen)} inputs strided", flush=True)
    failed = False
    print(f"\n{'':<10} {'view s':>8} {'copy s':>8} {'speed-up':>9}  same games   verdict")
    for dtype in dtypes:
        name = dtype or "float32"
        (view, _, view_games, _), (mine, _, my_games, _) = results[name, "view"], results[name, "copy"]
        same = sum(a == b for a, b in zip(view_games, my_games))
        why = verdict(name, results[name, "view"], results[name, "copy"])
        failed |= bool(why)
        print(f"{name:<10} {view:>8.1f} {mine:>8.1f} {view / mine:>8.2f}x  {same:>4}/{len(view_games):<5}  "
              f"{'FAIL: ' + '; '.join(why) if why else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
