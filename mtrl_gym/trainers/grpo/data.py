"""Training and validation tasks, and the order in which a run visits them.

:func:`load_task_splits` turns the config's task settings into ``(train, val)`` task lists
(task files, or the environment's generated split). :class:`TaskStream` hands out
``global_batch_size`` tasks per step in a seeded order that is reshuffled every epoch; its
whole state is two integers (epoch and position), so a resumed run continues with exactly
the tasks the uninterrupted run would have drawn.

>>> stream = TaskStream([{"id": str(i)} for i in range(5)], batch_size=2, seed=0)
>>> [t["id"] for t in stream.next_batch()], stream.state_dict()
(['1', '4'], {'epoch': 0, 'position': 2})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from mtrl_gym.error import ConfigError

__all__ = ["TaskStream", "load_task_splits", "GENERATED_SPLITS"]


def _wordle_split(train: int, val: int, seed: int) -> tuple[list[dict], list[dict]]:
    from mtrl_gym.datasets import wordle_split

    return wordle_split(train=train, val=val, seed=seed)


#: env id -> ``fn(train_size, val_size, seed) -> (train, val)`` for envs with a built-in split.
GENERATED_SPLITS: dict[str, Callable[[int, int, int], tuple[list[dict], list[dict]]]] = {
    "mtrl/Wordle-v0": _wordle_split,
    "mtrl/Wordle-Hard-v0": _wordle_split,
    "mtrl/WordleDuel-v0": _wordle_split,
}


def load_task_splits(env: str, train_tasks: str | None, val_tasks: str | None, *, train_size: int,
                     val_size: int, split_seed: int) -> tuple[list[dict] | None, list[dict] | None]:
    """``(train, val)`` task lists for a run.

    A path reads that task file (:func:`mtrl_gym.datasets.read_tasks`); ``None`` takes the
    env's generated split (:data:`GENERATED_SPLITS`), and for an env without one returns
    ``None``: the env then draws a task from each reset seed.
    """
    from mtrl_gym.datasets import read_tasks

    generated = GENERATED_SPLITS.get(env.removeprefix("mtrl_gym:"))
    split = generated(train_size, val_size, split_seed) if generated and (train_tasks is None or val_tasks is None) \
        else (None, None)
    train = read_tasks(train_tasks, required=()) if train_tasks is not None else split[0]
    val = read_tasks(val_tasks, required=()) if val_tasks is not None else split[1]
    return train, val


class TaskStream:
    """Batches of tasks in a seeded order, reshuffled each epoch, resumable.

    Epoch ``e`` visits the tasks in the order ``np.random.default_rng([seed, e]).permutation``.
    A batch that runs past the end of an epoch continues with the next epoch's order, so
    every batch is full. With ``tasks=None`` (the env draws tasks from seeds) every batch is
    ``[None] * batch_size`` and epochs are not defined.
    """

    def __init__(self, tasks: Sequence[Mapping[str, Any]] | None, batch_size: int, seed: int):
        if batch_size < 1:
            raise ConfigError(f"`batch_size` must be >= 1, got {batch_size!r}")
        if tasks is not None and len(tasks) == 0:
            raise ConfigError("the task list is empty: give a task file with at least one row")
        self.tasks = list(tasks) if tasks is not None else None
        self.batch_size = batch_size
        self.seed = int(seed)
        self.epoch = 0
        self.position = 0
        self._order_epoch = -1
        self._order: np.ndarray | None = None

    def __len__(self) -> int:
        """Number of distinct tasks (0 when the env draws them)."""
        return len(self.tasks) if self.tasks is not None else 0

    @property
    def epochs_done(self) -> float:
        """Fractional number of passes over the tasks so far (0.0 without a task list)."""
        return self.epoch + self.position / len(self.tasks) if self.tasks else 0.0

    def _order_of(self, epoch: int) -> np.ndarray:
        if self._order_epoch != epoch:
            self._order = np.random.default_rng([self.seed, epoch]).permutation(len(self.tasks))
            self._order_epoch = epoch
        return self._order

    def next_batch(self) -> list[dict[str, Any] | None]:
        """The next ``batch_size`` tasks (copies: the caller may mutate them)."""
        if self.tasks is None:
            self.position += self.batch_size
            return [None] * self.batch_size
        batch = []
        while len(batch) < self.batch_size:
            order = self._order_of(self.epoch)
            take = min(self.batch_size - len(batch), len(order) - self.position)
            batch.extend(dict(self.tasks[i]) for i in order[self.position:self.position + take])
            self.position += take
            if self.position == len(order):
                self.epoch, self.position = self.epoch + 1, 0
        return batch

    def state_dict(self) -> dict[str, int]:
        """Where the stream is: ``{"epoch", "position"}``."""
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        """Continue from a :meth:`state_dict`."""
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
