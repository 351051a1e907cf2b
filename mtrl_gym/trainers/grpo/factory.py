"""Building a run's model from its config.

The sampler comes from :func:`mtrl_gym.rollout.samplers.factory.make_sampler` and the
rollout engine from :func:`mtrl_gym.rollout.sources.local.make_rollout_engine`, so a
single-file training script can assemble its own loop from the same parts the
:class:`~mtrl_gym.trainers.grpo.trainer.GRPOTrainer` uses.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_model"]


def load_model(config: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for ``config.model`` (embedded name, hub id or folder)."""
    from mtrl_gym import models

    return models.load(config.model, dtype=config.model_dtype, device=config.device)
