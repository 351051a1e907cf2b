"""What the rollout engine tells an observer while it plays, and the engine's own progress bar.

An observer watches a :class:`~mtrl_gym.rollout.engine.RolloutEngine` without touching its
sampler: pass it as ``RolloutEngine(..., observers=[...])`` and the engine calls

* :meth:`RolloutObserver.on_sample` before each sampler call (one turn of every live episode),
* :meth:`RolloutObserver.on_tokens` while a sampler call runs, for samplers that report
  their progress through an ``on_tokens`` callback (the HF and vLLM samplers; the engine
  forwards it, and chains a callback already set),
* :meth:`RolloutObserver.on_turn` after each turn of the batch.

Every hook is a no-op here; an observer overrides those it needs. Evaluation's progress
bar (:class:`~mtrl_gym.evaluation.progress.EvalProgress`) and :class:`ProgressBar` (the
engine's bar when ``RolloutConfig.progress`` is set) are observers.

>>> class Turns(RolloutObserver):
...     def __init__(self):
...         self.requests = 0
...     def on_sample(self, requests):
...         self.requests += requests
>>> t = Turns(); t.on_sample(3); t.on_tokens(7); t.requests
3
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

__all__ = ["RolloutObserver", "ProgressBar"]


class RolloutObserver:
    """Hooks the rollout engine calls while it plays (see the module docstring)."""

    def on_sample(self, requests: int) -> None:
        """A sampler call for ``requests`` live episodes (one turn each) is about to start."""

    def on_tokens(self, n: int) -> None:
        """``n`` more tokens were sampled in the running sampler call."""

    def on_turn(self, trajectories: Sequence[Any], finished: int) -> None:
        """A turn of the batch is done: every episode's trajectory so far, and how many episodes have finished."""


class ProgressBar(RolloutObserver):
    """A tqdm bar of finished episodes with the turn and sampled-token count, refreshed during
    sampling by :meth:`on_tokens`."""

    def __init__(self, bar: Any):
        self.bar = bar
        self.turn = self.tokens = 0
        self._shown = 0.0

    @classmethod
    def open(cls, total: int) -> ProgressBar | None:
        """A bar of ``total`` episodes, or None when tqdm is not installed."""
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return None
        return cls(tqdm(total=total, desc="episodes", unit="ep", leave=False))

    def on_tokens(self, n: int) -> None:
        self.tokens += n
        if time.monotonic() - self._shown > 0.5:
            self._show(self.turn + 1)  # the turn being sampled

    def on_turn(self, trajectories: Sequence[Any], finished: int) -> None:
        self.bar.update(finished - self.bar.n)
        self.turn = max(t.num_turns for t in trajectories)
        self.tokens = sum(t.sampled_tokens for t in trajectories)
        self._show(self.turn)

    def _show(self, turn: int) -> None:
        self._shown = time.monotonic()
        self.bar.set_postfix(turn=turn, sampled_tokens=self.tokens, refresh=True)

    def close(self) -> None:
        self.bar.close()
