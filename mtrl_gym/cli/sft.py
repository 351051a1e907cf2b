"""``mtrl-gym sft``: supervised fine-tuning of a LoRA adapter on demonstration files.

Thin over :class:`mtrl_gym.trainers.sft.trainer.SFTTrainer`; ``--set key=value`` overrides
any :class:`~mtrl_gym.trainers.sft.config.SFTConfig` field. The adapter lands in
``<out>/checkpoints/step_N/adapter`` (GRPO starts from it with ``--set init_adapter=...``).
"""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("sft", help="supervised fine-tuning on demonstrations (mtrl-gym demos)",
                       description="Train a LoRA adapter on demonstration files, loss on assistant tokens only.")
    p.add_argument("--demos", action="append", required=True, help="demonstration JSONL file (repeatable)")
    p.add_argument("--distill", action="append", default=[], metavar="FILE",
                   help="games a constrained policy played (dictionary decoding), pooled with --demos: their tokens "
                        "are scored by -log P(the tokens the constraint allows), not copied (repeatable; "
                        "SFTConfig.distill)")
    p.add_argument("--distill-fitting", action="store_true",
                   help="narrow each --distill guess's allowed tokens to the actions that fit the board so far "
                        "(Wordle: the answers consistent with every clue; SFTConfig.distill_fitting)")
    p.add_argument("--config", default=None, help="an SFT config file (YAML/TOML)")
    p.add_argument("--out", default=None, help="run folder (default: runs/sft)")
    p.add_argument("--max-steps", type=int, default=None, help="optimiser steps")
    p.add_argument("--max-minutes", type=float, default=None, help="stop after this many minutes")
    p.add_argument("--resume", default=None, help="run or checkpoint folder to continue from")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run already in --out (its metrics, checkpoints and summary)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override an SFTConfig field, e.g. --set learning_rate=3e-4 (repeatable)")
    p.set_defaults(func=run)


def resolve_config(args):
    """The :class:`~mtrl_gym.trainers.sft.config.SFTConfig` an argparse namespace asks for:
    with ``--resume``, the checkpoint's saved settings first, then ``--config``, the flags and
    ``--set``."""
    from mtrl_gym.trainers.sft.config import SFTConfig

    values = {"demos": args.demos}
    if args.distill:
        values["distill"] = args.distill
    if args.distill_fitting:
        values["distill_fitting"] = True
    if args.out:
        values["output_dir"] = args.out
    if args.max_steps is not None:
        values["max_steps"] = args.max_steps
    if args.max_minutes is not None:
        values["max_minutes"] = args.max_minutes
    sources = [args.config] if args.config else []
    if args.resume:  # continue with the settings the run was saved with, then the flags
        from mtrl_gym.trainers.grpo.checkpoint import resume_target

        sources.insert(0, resume_target(args.resume) / "config.yaml")
    return SFTConfig.load(*sources, values, overrides=args.overrides)


def run(args) -> int:
    from mtrl_gym.run_folder import TRAIN_ARTEFACTS, TRAIN_MARKERS, claim_output_dir
    from mtrl_gym.trainers.sft.trainer import SFTTrainer

    config = resolve_config(args)
    claim_output_dir(config.output_dir, markers=TRAIN_MARKERS, artefacts=TRAIN_ARTEFACTS,
                     resume=args.resume is not None, overwrite=args.overwrite, flag="--out")
    summary = SFTTrainer(config, resume=args.resume).train()
    print(f"sft: {summary['steps']} steps in {summary['seconds'] / 60:.1f} min; adapter: {summary['adapter']}")
    return 0
