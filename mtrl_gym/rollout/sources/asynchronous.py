"""Asynchronous rollouts with bounded staleness: sampling runs ahead of the optimiser.

With ``source: {name: async, source: {...}}`` the GRPO trainer no longer alternates "sample
a batch, then update": :class:`AsyncRollouts`, a wrapper around any other rollout source,
runs a :class:`RolloutProducer` thread that plays the batches of the next steps into a
small queue while the trainer updates on the current one.

**Versions.** The policy version is the trainer's step count: version ``v`` is the policy
after ``v`` completed steps. The producer applies the newest published weights *between*
batches, never inside one, so every trajectory of a batch carries one
``Trajectory.policy_version``. Training step ``s`` (run by policy version ``s``) on a batch
of version ``v`` is ``s - v`` versions off-policy; the trainer's truncated
importance-sampling weight (``tis_cap``: ``min(pi_trainer / pi_sampler, cap)`` per token)
corrects for it.

**Bounded staleness.** The producer starts the batch of step ``s`` only once version
``s - max_staleness`` is published (the gate AReaL calls ``max_head_offpolicyness``), so at
most ``max_staleness + 1`` batches are queued or in flight and no sample is wasted.
:func:`fresh_groups` checks the tags again at train time and drops (and counts) groups
older than the bound, a guard that a producer fed by remote workers can rely on too.
``max_staleness: 0`` starts batch ``s`` only after step ``s - 1``'s update: the same
tasks, seeds and weights as the synchronous loop, so the same trajectories and updates
(``tests/rollout/sources/test_async.py`` checks token ids and parameters bit for bit).

**Whose weights the sampler reads.** Sampling and training share one process, so the
sampler must never read weights the optimiser is changing. :class:`PolicyShadow` is a
frozen deep copy of the policy: the trainer *stages* a clone of its trainable tensors
after each update (the LoRA matrices; every weight with ``full_finetune``), and the
producer copies them into the shadow before its next batch and hands the shadow to the
sampler's ``update_policy`` (HF: sample it in place; vLLM: merge and load it). The cost is
one extra model in memory (SmolLM2-135M in float32: 0.5 GB) and a copy of the trainable
tensors per step.

>>> batch = [Trajectory("a", group_id=0, policy_version=3), Trajectory("a", group_id=0, policy_version=3),
...          Trajectory("b", group_id=1, policy_version=1), Trajectory("b", group_id=1, policy_version=1)]
>>> kept, dropped, ages = fresh_groups(batch, step=3, group_size=2, max_staleness=1)
>>> [t.group_id for t in kept], dropped, ages
([0, 0], 2, [0, 0])
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from mtrl_gym.error import ConfigError, RolloutError
from mtrl_gym.rollout.sources.base import RolloutBatch, RolloutSource, TaskFeed, inner_source
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["AsyncOptions", "AsyncRollouts", "PolicyShadow", "RolloutProducer", "fresh_groups"]


@dataclass
class AsyncOptions:
    """Options of the ``async`` source: another source, sampled ahead of the optimiser."""

    max_staleness: int = 1
    """How many versions a batch may lag the policy it trains (the producer starts batch ``s``
    only once version ``s - max_staleness`` exists; older ones are dropped and counted). 0
    gives exactly the synchronous run."""
    source: dict[str, Any] = field(default_factory=lambda: {"name": "local"})
    """The source whose batches are sampled ahead (``{name: local}``, ``{name: ray, workers: 4}``, ...)."""

    def __post_init__(self) -> None:
        if isinstance(self.max_staleness, bool) or not isinstance(self.max_staleness, int) or self.max_staleness < 0:
            raise ConfigError(f"`source.max_staleness` must be an integer >= 0, got {self.max_staleness!r}")
        self.source = inner_source(self.source, wrapper="async", purpose="samples ahead", refused=("async", "dynamic"),
                                   why="not another 'async', and not 'dynamic' (it draws more rows within a step, "
                                       "which a producer sampling ahead cannot)")


def fresh_groups(trajectories: Sequence[Trajectory], *, step: int, group_size: int,
                 max_staleness: int) -> tuple[list[Trajectory], int, list[int]]:
    """Keep the groups whose every trajectory is at most ``max_staleness`` versions old at ``step``.

    A group is kept or dropped whole (its advantages compare its members). Returns
    ``(kept trajectories, number dropped, staleness of each kept trajectory)``; an untagged
    trajectory (``policy_version`` None) counts as current.
    """
    kept: list[Trajectory] = []
    ages: list[int] = []
    dropped = 0
    for start in range(0, len(trajectories), group_size):
        group = trajectories[start:start + group_size]
        group_ages = [0 if t.policy_version is None else step - t.policy_version for t in group]
        if max(group_ages) > max_staleness:
            dropped += len(group)
            continue
        kept.extend(group)
        ages.extend(group_ages)
    return kept, dropped, ages


class PolicyShadow:
    """A frozen copy of ``policy`` that a sampler reads while the original is trained.

    :meth:`stage` (trainer thread) clones the trainable tensors of the original;
    :meth:`apply` (producer thread, between batches) copies the newest staged ones into
    the copy and returns their version.
    """

    def __init__(self, policy: Any):
        import torch

        self._torch = torch
        self.names = [n for n, p in policy.named_parameters() if p.requires_grad]
        self.model = copy.deepcopy(policy)
        self.model.eval()
        self.model.requires_grad_(False)
        self._params = dict(self.model.named_parameters())
        self._lock = threading.Lock()
        self._staged: tuple[int, dict[str, Any]] | None = None
        self.version: int | None = None

    def stage(self, policy: Any, version: int) -> None:
        """Remember a clone of ``policy``'s trainable tensors as ``version``."""
        with self._torch.no_grad():
            wanted = set(self.names)
            tensors = {n: p.detach().clone() for n, p in policy.named_parameters() if n in wanted}
        with self._lock:
            self._staged = (int(version), tensors)

    def apply(self) -> bool:
        """Copy the newest staged tensors into the copy; True when the version changed."""
        with self._lock:
            staged, self._staged = self._staged, None
        if staged is None:
            return False
        version, tensors = staged
        with self._torch.no_grad():
            for name, value in tensors.items():
                self._params[name].copy_(value)
        self.version = version
        return True


class RolloutProducer:
    """A thread that plays the batches of steps ``start_step, start_step + 1, ...`` ahead of training.

    Args:
        collect: ``collect(tasks, step) -> (trajectories, engine metrics)``: the batch of a step
            (its rollout seed derives from ``step``, as in the synchronous loop).
        next_tasks: ``() -> (tasks, data state after drawing them)``; called once per batch, in step order.
        shadow: the :class:`PolicyShadow` the sampler reads.
        push: ``push(model, version)`` hands new weights to the sampler (and remote workers).
        max_staleness, start_step: see the module docstring; ``last_step``: no batch past it.
    """

    def __init__(self, collect: Callable[[Sequence[Mapping[str, Any] | None], int], tuple[list[Trajectory],
                                                                                          dict[str, float]]],
                 next_tasks: Callable[[], tuple[list[Any], dict[str, Any]]], *, shadow: PolicyShadow,
                 push: Callable[[Any, int], None], max_staleness: int, start_step: int, last_step: int):
        if max_staleness < 0:
            raise ConfigError(f"`max_staleness` must be >= 0, got {max_staleness!r}")
        self._collect, self._next_tasks = collect, next_tasks
        self.shadow, self._push = shadow, push
        self.max_staleness, self.last_step = int(max_staleness), int(last_step)
        self._next_step = int(start_step)
        self._published = -1
        self._queue: deque[RolloutBatch] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._paused = 0
        self._stop = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def capacity(self) -> int:
        """Most batches queued or in flight: ``max_staleness + 1``."""
        return self.max_staleness + 1

    def publish(self, policy: Any, version: int) -> None:
        """The trainer finished step ``version``: stage its weights, open the gate."""
        self.shadow.stage(policy, version)
        with self._cond:
            self._published = int(version)
            self._cond.notify_all()

    def start(self) -> None:
        """Start the thread (the current weights must be published first)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mtrl-rollout-producer", daemon=True)
            self._thread.start()

    def take(self, step: int) -> tuple[RolloutBatch, float, int]:
        """The oldest finished batch: ``(batch, seconds waited, batches queued behind it)``."""
        started = time.monotonic()
        with self._cond:
            while not self._queue and self._error is None:
                if self._thread is None or not self._thread.is_alive():
                    raise RolloutError("the rollout producer is not running: start() it first (or it was closed)")
                self._cond.wait(timeout=1.0)
            if self._error is not None and not self._queue:
                raise RolloutError(f"the rollout producer failed: {type(self._error).__name__}: "
                                   f"{self._error}") from self._error
            batch = self._queue.popleft()
            depth = len(self._queue)
            self._cond.notify_all()
        return batch, time.monotonic() - started, depth

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Wait for the batch in flight to finish and start no other (e.g. while validating),
        with the newest weights applied and pushed to the sampler."""
        with self._cond:
            self._paused += 1
            while self._busy:
                self._cond.wait()
        try:
            self._sync_weights()
            yield
        finally:
            with self._cond:
                self._paused -= 1
                self._cond.notify_all()

    def allow_one_more(self) -> None:
        """Let the producer play one batch past ``last_step`` (the trainer dropped a whole batch)."""
        with self._cond:
            self.last_step += 1
            self._cond.notify_all()

    def close(self) -> None:
        """Stop after the batch in flight (it is discarded); safe to call twice."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    # ------------------------------------------------------------------ the thread

    def _sync_weights(self) -> None:
        if self.shadow.apply():
            self._push(self.shadow.model, self.shadow.version)

    def _may_start(self, step: int) -> bool:
        return (not self._paused and step <= self.last_step and len(self._queue) < self.capacity
                and step - self._published <= self.max_staleness)

    def _run(self) -> None:
        step = self._next_step
        while True:
            waited = time.monotonic()
            with self._cond:
                while not self._stop and not self._may_start(step):
                    self._cond.wait()
                if self._stop:
                    return
                self._busy = True
            idle = time.monotonic() - waited
            try:
                self._sync_weights()
                version = int(self.shadow.version if self.shadow.version is not None else self._published)
                tasks, state = self._next_tasks()
                started = time.monotonic()
                trajectories, engine_metrics = self._collect(tasks, step)
                ended = time.monotonic()
            except BaseException as e:  # noqa: BLE001 - handed to the trainer by take()
                with self._cond:
                    self._error, self._busy = e, False
                    self._cond.notify_all()
                return
            for t in trajectories:
                t.policy_version = version
            batch = RolloutBatch(step, version, list(trajectories), state, ended - started, idle, started, ended,
                                 dict(engine_metrics))
            with self._cond:
                self._busy = False
                if not self._stop:
                    self._queue.append(batch)
                self._cond.notify_all()
            step += 1


class AsyncRollouts(RolloutSource):
    """A rollout source that samples the batches of the next steps ahead, from ``inner``.

    The inner source samples a :class:`PolicyShadow` of ``policy``; :meth:`update_policy`
    stages new weights, which the producer applies between batches. :meth:`batch` drops
    groups older than ``max_staleness`` (a whole stale batch: it takes the next one) and
    reports ``async/*`` metrics with the inner source's own.
    """

    def __init__(self, inner: RolloutSource, policy: Any, *, max_staleness: int, group_size: int):
        if max_staleness < 0:
            raise ConfigError(f"`max_staleness` must be >= 0, got {max_staleness!r}")
        self.inner = inner
        self.policy = policy
        self.max_staleness = int(max_staleness)
        self.group_size = int(group_size)
        self.samples_off_policy = self.max_staleness > 0 or inner.samples_off_policy
        self.shadow = PolicyShadow(policy)
        self._producer: RolloutProducer | None = None
        self._feed: TaskFeed | None = None
        self._published = 0

    def _collect(self, tasks: Sequence[Mapping[str, Any] | None], step: int):
        trajectories = self.inner.collect(tasks, seed=self._feed.seed(step))
        return trajectories, dict(self.inner.last_metrics or {})

    def _start(self, step: int, feed: TaskFeed) -> RolloutProducer:
        if self._producer is None:
            self._feed = feed
            self._producer = RolloutProducer(self._collect, feed.draw, shadow=self.shadow,
                                             push=lambda model, version: self.inner.update_policy(model,
                                                                                                  version=version),
                                             max_staleness=self.max_staleness, start_step=step,
                                             last_step=step if feed.last_step is None else feed.last_step)
            self._producer.publish(self.policy, step)
        return self._producer

    def batch(self, step: int, feed: TaskFeed) -> RolloutBatch:
        """The next batch the producer made, its groups older than ``max_staleness`` dropped (and counted)."""
        producer = self._start(step, feed)
        producer.start()
        dropped, waited, intervals = 0, 0.0, []
        while True:
            batch, wait_s, depth = producer.take(step)
            waited += wait_s
            intervals.append((batch.started, batch.ended))
            kept, lost, ages = fresh_groups(batch.trajectories, step=step, group_size=self.group_size,
                                            max_staleness=self.max_staleness)
            dropped += lost
            if kept:
                break
            producer.allow_one_more()  # a whole batch was too old: the step trains on the next one
        metrics = {"async/policy_version": float(batch.version), "async/staleness_mean": float(sum(ages) / len(ages)),
                   "async/staleness_max": float(max(ages)), "async/dropped": float(dropped),
                   "async/queue_depth": float(depth), "async/trainer_wait_s": waited,
                   "async/sampler_idle_s": batch.idle_s, "async/sample_s": batch.sample_s}
        metrics.update(batch.engine_metrics)
        return RolloutBatch(step, batch.version, kept, batch.data_state, batch.sample_s, batch.idle_s,
                            batch.started, batch.ended, metrics, intervals)

    def update_policy(self, model: Any, *, version: int) -> None:
        """Stage the new weights for the producer; before it runs (a resumed run), push them at once."""
        if self._producer is not None:
            self._producer.publish(model, version)
        else:
            self.inner.update_policy(model, version=version)

    def paused(self) -> AbstractContextManager[None]:
        """The producer idle, with the newest weights applied (validation samples the shadow)."""
        if self._producer is None:
            return nullcontext()
        return self._producer.paused()

    def stop(self) -> None:
        """Stop the producer; batches drawn ahead are discarded (the trainer rewinds its task stream)."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None

    def close(self) -> None:
        self.stop()
        self.inner.close()
