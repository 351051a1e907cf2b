"""The rollout-source protocol: what a trainer draws its episodes from.

A trainer holds one :class:`RolloutSource` and asks it, once per step, for the batch of
that step (:meth:`RolloutSource.batch`): groups of trajectories, all sampled by one policy
version. After each update it hands the source the new weights
(:meth:`RolloutSource.update_policy`). It never asks which source it has: the built-in
agent loop, your own agent behind a policy endpoint, Ray actors, multi-agent self-play and
a producer that samples ahead of the optimiser all answer the same four calls.

A source implements :meth:`~RolloutSource.collect` (play these task rows now); the base
class turns that into a step's batch. A source that works differently (one that samples
ahead, say) overrides :meth:`~RolloutSource.batch` itself.

>>> from mtrl_gym.rollout.trajectory import Trajectory
>>> class Constant(RolloutSource):
...     def collect(self, tasks, *, seed=None):
...         return [Trajectory(task_id=str(i), group_id=i, reward=1.0) for i, _ in enumerate(tasks)]
>>> feed = TaskFeed(draw=lambda: ([{"id": "a"}, {"id": "b"}], {"drawn": 2}), seed=lambda step: step)
>>> batch = Constant().batch(0, feed)
>>> [t.task_id for t in batch.trajectories], batch.data_state
(['0', '1'], {'drawn': 2})
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["RolloutSource", "RolloutBatch", "TaskFeed", "inner_source"]


@dataclass
class TaskFeed:
    """Where a source gets the task rows of each step: the trainer's task stream."""

    draw: Callable[[], tuple[list[Any], dict[str, Any]]]
    """``() -> (the next batch's task rows, the stream's state right after drawing them)``;
    called once per batch, in step order."""
    seed: Callable[[int], int]
    """``seed(step)``: the rollout seed of step ``step`` (the same for every source)."""
    last_step: int | None = None
    """The last step the trainer will train: a source that samples ahead draws no batch past it."""


@dataclass
class RolloutBatch:
    """The trajectories of one training step's batch, as a source made them."""

    step: int
    """The training step the batch was drawn for (its tasks and rollout seed)."""
    version: int
    """Policy version (trainer step) whose weights sampled every trajectory of it."""
    trajectories: list[Trajectory]
    data_state: dict[str, Any]
    """The task stream's state right after this batch's tasks were drawn (for checkpoints)."""
    sample_s: float = 0.0
    """Seconds the rollout took when it ran outside the step (sampled ahead); 0 when it ran
    inside the step, whose own timer measures it."""
    idle_s: float = 0.0
    """Seconds the producer waited (gate, queue or pause) before starting it."""
    started: float = 0.0
    ended: float = 0.0
    """``time.monotonic()`` when the rollout started and ended."""
    engine_metrics: dict[str, float] = field(default_factory=dict)
    """The source's own numbers for this batch (Ray workers: lost and retried episodes;
    sampled ahead: ``async/*``)."""
    intervals: list[tuple[float, float]] = field(default_factory=list)
    """``(started, ended)`` of every rollout spent on this step (a source that dropped a stale
    batch and played another has two)."""


class RolloutSource:
    """Yields groups of trajectories for a policy version and accepts new weights.

    Subclasses implement :meth:`collect`; the rest has working defaults. ``tasks`` are
    task rows (dicts) or None (the env draws a task from the episode's seed); each row is
    played ``group_size`` times and the trajectories come back group by group, row order
    kept, failed episodes included (``Trajectory.failed``).
    """

    #: True when the sampling log-probs of this source's batches are not the trained policy's
    #: (sampled by an older policy, or from a constrained distribution): the trainer then
    #: recomputes the old log-probs instead of reusing the sampler's.
    samples_off_policy: bool = False

    def collect(self, tasks: Sequence[Mapping[str, Any] | None], *, seed: int | None = None) -> list[Trajectory]:
        """Play every task row ``group_size`` times now; the trajectories, group by group."""
        raise NotImplementedError(f"{type(self).__name__} must implement collect(tasks, *, seed=None)")

    #: The source's own numbers about its last :meth:`collect` (logged with the step's);
    #: a source that has some assigns a new dict after each collect.
    last_metrics: Mapping[str, float] = MappingProxyType({})
    #: The keys of :attr:`last_metrics` that count events of one collect (lost episodes, say):
    #: a wrapper that plays several collects for one step (``dynamic``) sums them; it keeps
    #: the last collect's value of every other key (a pool size, a running total).
    counted_metrics: tuple[str, ...] = ()

    def batch(self, step: int, feed: TaskFeed) -> RolloutBatch:
        """The batch of training step ``step``: its task rows from ``feed``, played now."""
        tasks, state = feed.draw()
        started = time.monotonic()
        trajectories = self.collect(tasks, seed=feed.seed(step))
        ended = time.monotonic()
        return RolloutBatch(step, step, list(trajectories), state, started=started, ended=ended,
                            engine_metrics=dict(self.last_metrics or {}), intervals=[(started, ended)])

    def update_policy(self, model: Any, *, version: int) -> None:
        """The trainer finished step ``version``: sample with ``model``'s new weights from now on."""

    def paused(self) -> AbstractContextManager[None]:
        """A context in which the source samples nothing on its own (the trainer validates in it)."""
        return nullcontext()

    def stop(self) -> None:
        """Stop sampling ahead, discarding batches not handed out; :meth:`batch` may start again."""

    def close(self) -> None:
        """Release what the source holds (servers, workers, envs); safe to call twice."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def inner_source(value: Any, *, wrapper: str, purpose: str, refused: Sequence[str], why: str) -> dict[str, Any]:
    """The ``source`` option of a source that wraps another (``async``, ``dynamic``), as a mapping.

    A name becomes ``{"name": name}``; a value that is not a mapping, or names one of
    ``refused``, is a ConfigError saying ``why``. The inner source's own options are checked
    later, with the run's config (``factory.check_source``).
    """
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, Mapping) or value.get("name") in refused:
        raise ConfigError(f"`source.source` of the {wrapper} source names the source it {purpose}, e.g. "
                          f"{{'name': 'local'}}; {why}, got {value!r}")
    return dict(value)
