"""The tasks an evaluation plays: a task file, a named split, or seeded draws.

:func:`resolve_tasks` turns what a user gives into a list of task rows (``None`` rows let
the env draw its task from the reset seed) and :func:`check_tasks` resets a probe env on
every row, so a broken task fails before the first episode rather than in the middle of
a run.

Named splits come from the env's profile (:func:`mtrl_gym.envs.profile_of`: Wordle has
``train``, ``val`` and ``all``, the SOP domains ``train`` and ``val``); ``seeds:N`` works for
any env (N tasks drawn from the reset seeds ``seed, seed + 1, ...``).

>>> len(resolve_tasks("mtrl/Wordle-v0", split="val")), resolve_tasks("mtrl/Wordle-v0", split="seeds:3")
(128, [None, None, None])
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium

from mtrl_gym.error import ConfigError, DatasetError, InvalidTask

__all__ = ["resolve_tasks", "check_tasks", "tasks_digest", "split_names"]


def split_names(env_id: str) -> list[str]:
    """The named splits of ``env_id`` (``seeds:N`` works for every env)."""
    from mtrl_gym.envs.profile import profile_of

    try:
        names = list(profile_of(env_id).split_names)
    except Exception:  # noqa: BLE001 - unknown ids are reported later, with close matches
        names = []
    return [*names, "seeds:N"]


def resolve_tasks(env_id: str, *, tasks: str | os.PathLike | Sequence[Mapping[str, Any] | None] | None = None,
                  split: str | None = None, limit: int | None = None) -> list[dict[str, Any] | None]:
    """Task rows from a task file or list (``tasks``) or a named ``split``; first ``limit`` kept.

    Giving both or neither of ``tasks`` and ``split`` is an error, and so is an empty result.
    """
    if (tasks is None) == (split is None):
        raise ConfigError("give exactly one of `tasks` (a task file or list) and `split` "
                          f"(one of {split_names(env_id)})")
    if limit is not None and limit < 1:
        raise ConfigError(f"`limit` must be >= 1, got {limit!r}")
    if split is not None:
        rows = _split(env_id, split, limit)
    elif isinstance(tasks, (str, os.PathLike)):
        from mtrl_gym.datasets import read_tasks
        from mtrl_gym.envs.profile import task_validator

        rows = read_tasks(tasks, required=(), validate=task_validator(env_id))
    else:
        rows = [dict(t) if t is not None else None for t in tasks]
        if not rows:
            raise DatasetError("the task list is empty")
    return rows[:limit] if limit else rows


def _split(env_id: str, split: str, limit: int | None) -> list[dict[str, Any] | None]:
    if split.startswith("seeds:"):
        try:
            count = int(split.split(":", 1)[1])
        except ValueError:
            count = 0
        if count < 1:
            raise ConfigError(f"split {split!r}: write seeds:N with N >= 1 tasks, e.g. seeds:100")
        return [None] * count
    from mtrl_gym.envs.profile import profile_of

    profile = profile_of(env_id)
    if split in profile.splits:
        return profile.tasks(split, limit)
    raise ConfigError(f"unknown split {split!r} for {env_id}; use one of {split_names(env_id)} or a task file")


def check_tasks(env: gymnasium.Env, tasks: Sequence[Mapping[str, Any] | None], *, seed: int = 0) -> list[str]:
    """Reset ``env`` on every task (seed ``seed + i``) and return the task ids.

    A row the env rejects raises :class:`~mtrl_gym.error.DatasetError` naming its index,
    its id and the env's reason.
    """
    ids = []
    for i, task in enumerate(tasks):
        options = {"task": dict(task)} if task is not None else None
        try:
            _, info = env.reset(seed=seed + i, options=options)
        except (InvalidTask, ValueError, KeyError, TypeError) as e:
            row_id = (task or {}).get("id", "")
            raise DatasetError(f"task {i} (id {row_id!r}) is not valid for this env: {e}") from None
        ids.append(str(info.get("task_id") or (task or {}).get("id") or f"task-{i}"))
    return ids


def tasks_digest(tasks: Sequence[Mapping[str, Any] | None]) -> str:
    """A short hash of the task rows (resume checks that the same tasks are played)."""
    text = json.dumps([t if t is None else dict(t) for t in tasks], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
