"""Dynamic sampling: a step's rollout budget spent on the groups whose episodes disagree.

A group whose episodes all earn the same reward has advantage 0 and teaches GRPO nothing;
with a binary reward (an SOP task's exact match, a solve) most groups are like that, early
(all fail) and late (all pass). ``source: {name: dynamic, max_draws: 3, source: {...}}``
wraps another source: it plays the step's task rows, keeps the groups with different
rewards, and while it has fewer of them than the first draw's groups it draws the next task
rows from the trainer's stream and plays those too, at most ``max_draws`` times in a step.
The batch it hands the trainer has the first draw's number of groups: disputed groups first
(in the order they were played), then, when ``max_draws`` ran out, uniform groups to fill
it (the update skips those with ``objective.drop_zero_variance_groups``). Disputed groups
beyond the batch are discarded, as in DAPO's dynamic sampling.

Every draw is deterministic: the first plays the step's own rollout seed, so ``max_draws: 1``
is exactly the wrapped source; draw ``d`` plays a seed derived from the step's and ``d``.
The task stream's state after the last draw is the batch's ``data_state``, so a checkpoint
resumes after every row the step used. The step's metrics gain ``dynamic/draws``,
``dynamic/disputed_drawn_frac`` (disputed groups among all groups played),
``dynamic/uniform_in_batch`` (groups without disagreement that filled the batch) and
``dynamic/discarded_groups``; the wrapped source's own numbers are those of the last draw,
except the counts it names in ``counted_metrics`` (a Ray pool's lost episodes), summed over
the draws.

>>> from mtrl_gym.rollout.trajectory import Trajectory
>>> class Coin(RolloutSource):  # task "even" rows: both episodes agree; "odd": they differ
...     def collect(self, tasks, *, seed=None):
...         return [Trajectory(str(t["id"]), reward=float(k * (t["id"] % 2))) for t in tasks for k in range(2)]
>>> rows = iter([{"id": i} for i in range(100)])
>>> feed = TaskFeed(draw=lambda: ([next(rows), next(rows)], {}), seed=lambda step: step)
>>> batch = DynamicSampling(Coin(), group_size=2, max_draws=3).batch(0, feed)
>>> [t.task_id for t in batch.trajectories], batch.engine_metrics["dynamic/draws"]
(['1', '1', '3', '3'], 2.0)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mtrl_gym.error import ConfigError, RolloutError
from mtrl_gym.rollout.sources.base import RolloutBatch, RolloutSource, TaskFeed, inner_source
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["DynamicOptions", "DynamicSampling", "disputed"]


@dataclass
class DynamicOptions:
    """Options of the ``dynamic`` source: another source, re-drawn while its groups agree."""

    max_draws: int = 3
    """Task batches a step may play at most (the first included): the rollout budget is at most
    ``max_draws`` times the plain step's. 1 is the wrapped source unchanged."""
    source: dict[str, Any] = field(default_factory=lambda: {"name": "local"})
    """The source whose groups are filtered (``{name: local}``, ``{name: ray, workers: 4}``, ...)."""

    def __post_init__(self) -> None:
        if isinstance(self.max_draws, bool) or not isinstance(self.max_draws, int) or self.max_draws < 1:
            raise ConfigError(f"`source.max_draws` must be an integer >= 1, got {self.max_draws!r}")
        self.source = inner_source(self.source, wrapper="dynamic", purpose="draws from", refused=("dynamic", "async"),
                                   why="not 'dynamic' again, and not 'async' (a producer sampling ahead cannot be "
                                       "asked for more rows within a step)")


def disputed(group: Sequence[Trajectory]) -> bool:
    """Whether the episodes of a group earned different rewards (a nonzero group advantage)."""
    rewards = [float(t.reward) for t in group]
    return max(rewards) > min(rewards)


class DynamicSampling(RolloutSource):
    """Wraps ``inner``: plays further task rows while too few groups disagree (module docstring)."""

    def __init__(self, inner: RolloutSource, *, group_size: int, max_draws: int):
        if max_draws < 1 or group_size < 1:
            raise ConfigError(f"DynamicSampling needs max_draws >= 1 and group_size >= 1, got {max_draws}, "
                              f"{group_size}")
        self.inner, self.group_size, self.max_draws = inner, group_size, max_draws
        self.samples_off_policy = inner.samples_off_policy

    def _seed(self, step_seed: int, draw: int) -> int:
        if draw == 0:
            return step_seed
        return int(np.random.SeedSequence([int(step_seed), 7919, draw]).generate_state(1)[0])

    def _groups(self, trajectories: Sequence[Trajectory]) -> list[list[Trajectory]]:
        if len(trajectories) % self.group_size:
            raise RolloutError(f"the dynamic source's inner source returned {len(trajectories)} trajectories, "
                              f"not a multiple of group_size {self.group_size}")
        return [list(trajectories[i:i + self.group_size]) for i in range(0, len(trajectories), self.group_size)]

    def collect(self, tasks: Sequence[Mapping[str, Any] | None], *, seed: int | None = None) -> list[Trajectory]:
        """Play exactly these rows (no filtering: there is no stream to draw more from)."""
        return self.inner.collect(tasks, seed=seed)

    def batch(self, step: int, feed: TaskFeed) -> RolloutBatch:
        kept: list[list[Trajectory]] = []
        uniform: list[list[Trajectory]] = []
        intervals: list[tuple[float, float]] = []
        target, state = 0, {}
        inner_metrics: dict[str, float] = {}
        for draw in range(self.max_draws):
            tasks, state = feed.draw()
            started = time.monotonic()
            groups = self._groups(self.inner.collect(tasks, seed=self._seed(feed.seed(step), draw)))
            intervals.append((started, time.monotonic()))
            for key, value in (self.inner.last_metrics or {}).items():  # counts add up over the draws
                counted = key in self.inner.counted_metrics
                inner_metrics[key] = inner_metrics.get(key, 0.0) + value if counted else value
            target = target or len(groups)
            for group in groups:
                (kept if disputed(group) else uniform).append(group)
            if len(kept) >= target:
                break
        chosen = kept[:target] + uniform[:max(0, target - len(kept))]
        played = len(kept) + len(uniform)
        trajectories: list[Trajectory] = []
        for g, group in enumerate(chosen):  # group ids unique within the batch, whichever draw played them
            for t in group:
                t.group_id = g
                trajectories.append(t)
        metrics = dict(inner_metrics)
        metrics.update({"dynamic/draws": float(len(intervals)),
                        "dynamic/disputed_drawn_frac": len(kept) / played if played else 0.0,
                        "dynamic/uniform_in_batch": float(max(0, target - len(kept))),
                        "dynamic/discarded_groups": float(played - len(chosen))})
        return RolloutBatch(step, step, trajectories, state, started=intervals[0][0], ended=intervals[-1][1],
                            engine_metrics=metrics, intervals=intervals)

    def update_policy(self, model: Any, *, version: int) -> None:
        self.inner.update_policy(model, version=version)

    def paused(self) -> AbstractContextManager[None]:
        return self.inner.paused()

    def stop(self) -> None:
        self.inner.stop()

    def close(self) -> None:
        self.inner.close()
