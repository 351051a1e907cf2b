"""Env-specific play metrics of an evaluation: the one place evaluation asks an env family.

:func:`env_play_metrics` turns an evaluation's episode records (or trajectories) into the
env's own play metrics, or None for an env that has none. Today only Wordle has them
(:func:`mtrl_gym.envs.wordle.play_metrics.play_metrics`); this function is the single
indirection point to route through the env's self-description once envs publish it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["env_play_metrics"]

_WORDLE_IDS = ("mtrl/Wordle-v0", "mtrl/Wordle-Hard-v0")


def _as_dict(record: Any) -> Mapping[str, Any]:
    return record if isinstance(record, Mapping) else record.to_dict()


def env_play_metrics(env_id: str, records: Sequence[Any], *, split_seed: int = 42) -> dict[str, Any] | None:
    """Play metrics of ``records`` (episode dicts or Trajectory objects) for ``env_id``, or None.

    Wordle games need their secret: the final step's ``info["answer"]``, else the
    validation/training split row named by the record's ``task_id`` (``wordle_split``).
    Records whose secret cannot be found are left out.
    """
    if env_id.removeprefix("mtrl_gym:") not in _WORDLE_IDS:
        return None
    from mtrl_gym.datasets import wordle_split
    from mtrl_gym.envs.wordle.play_metrics import play_metrics

    by_id = {row["id"]: row["answer"] for split in wordle_split(seed=split_seed) for row in split}
    games = []
    for record in map(_as_dict, records):
        secret = (record.get("final_info") or {}).get("answer") or by_id.get(str(record.get("task_id", "")))
        if not secret:
            continue
        actions = [str(m.get("content") or "") for m in record.get("messages") or [] if m.get("role") == "assistant"]
        games.append((str(secret), actions))
    return play_metrics(games)
