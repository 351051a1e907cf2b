"""Shrinking a failing example with hypothesis: the smallest text, or the shortest action list, that still fails.

When a check of :func:`~mtrl_gym.testing.check_text_env` fails on a corpus case of 20,000
characters, the report shows the smallest text that fails *the same way* (same exception
type, the same broken property), found by ``hypothesis.find`` seeded from the failing
input: the search draws windows of that text (a length and an offset, both shrinking
toward zero), first anchored at its start and then at its end, so the result is the
shortest contiguous piece that still fails (a lone surrogate, the shortest slow text).
A leak is shrunk the same way over the action list that exposed it (fewer steps, each
action cut to its shortest prefix).

The search is bounded by ``max_examples`` (per pass) and ``deadline_s`` (wall time, all
passes together), is derandomised (the same report on every run) and never raises: when
hypothesis is missing or the budget runs out, the smallest failing example found so far
is returned, the input itself at worst.

>>> shrink_text(lambda t: "\\ud800" in t, "x" * 500 + "\\ud800" + "y" * 500)
'\\ud800'
>>> shrink_actions(lambda a: len(a) >= 2, ["crane", "slate", "audio"])
['', '']
>>> show("<" * 5000)
"'<' * 5000"
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["shrink_text", "shrink_actions", "shrink_script", "show"]

class _Search:
    """``fails`` as a hypothesis condition: an exception counts as "does not fail the same way",
    nothing fails after ``stop_at``, and the smallest failing value seen is kept (so a search that
    hypothesis gives up on, e.g. as flaky, still yields its best find)."""

    def __init__(self, fails: Callable[[Any], bool], stop_at: float, size: Callable[[Any], int]):
        self.fails, self.stop_at, self.size = fails, stop_at, size
        self.best: Any = None

    def __call__(self, value: Any) -> bool:
        if time.monotonic() > self.stop_at:
            return False
        try:
            failed = bool(self.fails(value))
        except Exception:  # a different failure is not the one being shrunk
            return False
        if failed and (self.best is None or self.size(value) < self.size(self.best)):
            self.best = value
        return failed


def _find(strategy: Any, search: _Search, max_examples: int) -> None:
    try:
        from hypothesis import HealthCheck, Verbosity, find, settings
    except ImportError:  # the kit itself needs no hypothesis; the report then shows the unshrunk case
        return
    try:
        find(strategy, search, settings=settings(
            max_examples=max(1, max_examples), database=None, deadline=None, derandomize=True,
            suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet))
    except Exception:  # nothing found, or a flaky condition (timing): search.best is what was found
        pass


def _windows(text: str, from_end: bool) -> Any:
    from hypothesis import strategies as st

    n = len(text)

    @st.composite
    def window(draw: Any) -> str:
        length = draw(st.integers(0, n))
        offset = draw(st.integers(0, n - length))
        return text[n - offset - length:n - offset] if from_end else text[offset:offset + length]

    return window()


def shrink_text(fails: Callable[[str], bool], text: str, *, max_examples: int = 100,
                deadline_s: float = 10.0) -> str:
    """The shortest window of ``text`` for which ``fails`` is still true (``text`` if none is found).

    ``fails(text)`` must be true; it is called at most about ``2 * max_examples`` times
    more (hypothesis's shrinking adds a few hundred cheap calls) and not after ``deadline_s``.
    """
    search = _Search(fails, time.monotonic() + deadline_s, len)
    search.best = text
    for from_end in (False, True):
        if search.best:
            _find(_windows(search.best, from_end), search, max_examples)
    return search.best


def shrink_script(fails: Callable[[dict[str, list[str]]], bool], script: Mapping[str, Sequence[str]], *,
                  max_examples: int = 100, deadline_s: float = 10.0) -> dict[str, list[str]]:
    """The shortest version of a per-seat script (``{seat: [action per cycle]}``) for which ``fails``
    is true: fewer cycles, and each action cut to its shortest prefix."""
    script = {k: list(v) for k, v in script.items()}
    try:
        from hypothesis import strategies as st
    except ImportError:
        return script
    search = _Search(fails, time.monotonic() + deadline_s,
                     lambda s: sum(len(a) + 1 for actions in s.values() for a in actions))
    search.best = script
    cycles = max((len(v) for v in script.values()), default=0)

    @st.composite
    def prefixes(draw: Any) -> dict[str, list[str]]:
        n = draw(st.integers(0, cycles))
        return {k: [a[:draw(st.integers(0, len(a)))] for a in v[:n]] for k, v in script.items()}

    _find(prefixes(), search, max_examples)
    return search.best


def shrink_actions(fails: Callable[[list[str]], bool], actions: Sequence[str], *, max_examples: int = 100,
                   deadline_s: float = 10.0) -> list[str]:
    """The shortest prefix of ``actions``, each cut to its shortest prefix, for which ``fails`` is true."""
    return shrink_script(lambda s: fails(s[""]), {"": actions}, max_examples=max_examples,
                         deadline_s=deadline_s)[""]


def show(text: str, width: int = 60) -> str:
    """``repr`` of a failing example, short: a repeated unit as ``'<' * 5000``, else cut at ``width``."""
    if len(text) <= width:
        return repr(text)
    for size in range(1, 21):
        unit = text[:size]
        if len(text) % size == 0 and unit * (len(text) // size) == text:
            return f"{unit!r} * {len(text) // size}"
    return f"{text[:width]!r}... ({len(text)} chars)"
