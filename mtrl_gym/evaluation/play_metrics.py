"""Env-specific play metrics of an evaluation: the one place evaluation asks an env family.

:func:`env_play_metrics` turns an evaluation's episode records (or trajectories) into the
env's own play metrics (its profile's ``play_metrics``), or None for an env that has none
(Wordle's: :func:`mtrl_gym.envs.wordle.play_metrics.records_play_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["env_play_metrics"]

def env_play_metrics(env_id: str, records: Sequence[Any]) -> Mapping[str, Any] | None:
    """Play metrics of ``records`` (episode dicts or Trajectory objects) for ``env_id``, or None
    when its profile has none (:attr:`mtrl_gym.envs.EnvProfile.play_metrics`)."""
    from mtrl_gym.envs.profile import profile_of

    fn = profile_of(env_id).play_metrics
    return fn([r if isinstance(r, Mapping) else r.to_dict() for r in records]) if fn is not None else None
