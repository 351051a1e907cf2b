"""Train a tiny random model through the real GRPOTrainer and read back what the run wrote."""

from __future__ import annotations

import json
from pathlib import Path

from tiny_models import build_tiny_llama

from mtrl_gym.rollout.trajectory import load_jsonl
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer


def train_and_read(config, tokenizer, *, env, train_tasks, val_tasks, steps: int, resume=None):
    """Train ``config`` to ``steps``; ``(trained parameters, {step: logged trajectories}, metrics records)``."""
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(tokenizer), seed=0), tokenizer=tokenizer,
                          env=env, train_tasks=train_tasks, val_tasks=val_tasks, resume=resume)
    try:
        trainer.train()
    finally:
        trainer.close()
    run = Path(config.output_dir)
    params = {n: p.detach().clone() for n, p in trainer.policy.named_parameters()}
    trajs = {s: load_jsonl(run / "trajectories" / f"step_{s:06d}.jsonl") for s in range(1, steps + 1)}
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return params, trajs, records
