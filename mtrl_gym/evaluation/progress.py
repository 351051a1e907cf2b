"""The progress of an evaluation run: a bar that moves with every sampled token, and an estimate.

Episodes of a batch are sampled together, so they finish together: a bar of finished
episodes sits at 0 for minutes and then jumps. :class:`EvalProgress` counts what moves
instead. For a model run it is an observer of the rollout engine
(:class:`~mtrl_gym.rollout.observers.RolloutObserver`): the bar counts sampled tokens (the
engine forwards the sampler's ``on_tokens`` callback, which the HF sampler calls at every
decoding step) and shows the turns sampled and the episodes finished; once episodes finish, the bar's total becomes their
mean token count times the episodes planned, so its rate and time left are real. After
the first batch it prints one line with the time that batch took and the time the rest
of the run should take at that pace, with how to shorten it. A reference policy (no
sampler) gets a plain bar of episodes.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from mtrl_gym.rollout.observers import RolloutObserver

__all__ = ["EvalProgress", "format_duration"]


def format_duration(seconds: float) -> str:
    """``"45 s"``, ``"12 min"``, ``"2.5 h"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class EvalProgress(RolloutObserver):
    """Progress of one run's ``episodes`` planned episodes (see the module docstring).

    Args:
        name: the run's name (the bar's label).
        episodes: episodes this run still has to play.
        enabled: False records counts but shows nothing.
        batch: episodes sampled together (a model run's batch), for the plan line.
        hint: how to shorten a long run, appended to the estimate line.
    """

    def __init__(self, name: str, episodes: int, *, enabled: bool = True, batch: int | None = None,
                 hint: str = "Ctrl-C keeps finished episodes; --limit N and -n N shorten the run"):
        self.name, self.episodes, self.hint = name, int(episodes), hint
        self.batch = min(int(batch), self.episodes) if batch else None
        self.done = self.turns = self.tokens = 0
        self.estimate: str | None = None
        self._tokens_done = 0
        self._start = time.monotonic()
        self._bar: Any = None
        self._tqdm: Any = None
        if enabled and episodes > 0:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self._tqdm = tqdm

    # ------------------------------------------------------------------ hooks

    def start_sampling(self) -> None:
        """A model run starts: the bar counts sampled tokens, and says how the run is batched."""
        self._open(unit="tok", total=None)
        if self._bar is not None and self.batch and self.batch < self.episodes:
            self._bar.write(f"{self.name}: {self.episodes} episodes, sampled {self.batch} at a time; the time the "
                            "rest takes is estimated after the first batch", file=sys.stderr)

    def on_sample(self, requests: int) -> None:
        """The engine samples one turn of ``requests`` episodes."""
        self.turns += requests
        self._refresh()

    def on_tokens(self, n: int) -> None:
        """``n`` more tokens sampled (forwarded by the engine from the sampler's ``on_tokens``)."""
        self.tokens += int(n)
        if self._bar is not None:
            self._bar.update(int(n))

    def episode_done(self, sampled_tokens: int = 0) -> None:
        """One more episode finished (it sampled ``sampled_tokens``)."""
        self._open(unit="ep", total=self.episodes)
        self.done += 1
        self._tokens_done += int(sampled_tokens)
        if self._bar is None:
            return
        if self._bar.unit == "ep":
            self._bar.update(1)
        elif self._tokens_done:
            per_episode = self._tokens_done / self.done
            self._bar.total = max(int(per_episode * self.episodes), self._bar.n)
        self._refresh()

    def batch_done(self) -> str | None:
        """After a batch: the first time, the estimate line (also returned); None later."""
        if self.estimate is not None or not self.done or self.done >= self.episodes:
            return None
        elapsed = time.monotonic() - self._start
        rest = elapsed / self.done * (self.episodes - self.done)
        self.estimate = (f"{self.name}: {self.done} of {self.episodes} episodes in {format_duration(elapsed)}; the "
                         f"other {self.episodes - self.done} should take about {format_duration(rest)} more "
                         f"({self.hint})")
        if self._bar is not None:
            self._bar.write(self.estimate, file=sys.stderr)
        elif self._tqdm is not None:
            print(self.estimate, file=sys.stderr)
        return self.estimate

    def close(self) -> None:
        if self._bar is not None:
            self._refresh()
            self._bar.close()
            self._bar = None

    # ------------------------------------------------------------------ the bar

    def _open(self, *, unit: str, total: int | None) -> None:
        if self._bar is None and self._tqdm is not None:
            self._bar = self._tqdm(total=total, desc=self.name, unit=unit, unit_scale=unit == "tok",
                                   dynamic_ncols=True, file=sys.stderr)

    def _refresh(self) -> None:
        if self._bar is not None and self._bar.unit == "tok":
            self._bar.set_postfix_str(f"episodes {self.done}/{self.episodes}, turns {self.turns}", refresh=True)
