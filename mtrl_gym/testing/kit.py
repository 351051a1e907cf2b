"""What every check of :mod:`mtrl_gym.testing` shares: results and reports, the shrinking
budget, one-line errors, the probe script, one step's problems, a corpus failure shrunk by
hypothesis, and the determinism comparison in a fresh interpreter.

The single-agent checks (:mod:`~mtrl_gym.testing.check`), the leak check
(:mod:`~mtrl_gym.testing.leak`) and the multi-agent checks (:mod:`~mtrl_gym.testing.multiagent`)
import these from here, so none of them imports another.

>>> CheckResult("corpus", True, "20 cases").line()
'PASS  corpus       20 cases'
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CheckResult", "CheckReport", "Shrinking", "Views", "NO_SECRET", "one_line", "probe_script", "seed_list",
           "step_problem", "corpus_cases", "corpus_failure", "other_hashseed", "other_interpreter", "compare_records",
           "determinism_check"]

#: Why the ``leak`` check did not run.
NO_SECRET = ("no secret named: pass secret= (mtrl-gym check --secret my_pkg.secrets:answer) or give the env "
             "profile a `secret` hook")


@dataclass
class CheckResult:
    """One check: its name, whether it passed, a one-line explanation and the shrunk failing example."""

    name: str
    ok: bool
    detail: str = ""
    example: Any = None
    """The failing example after shrinking (a text, or a list of actions for a leak); None on a pass."""

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.name:<12} {self.detail}"


@dataclass
class CheckReport:
    """Every check run on one env, and the checks that were not run with the reason."""

    env_id: str
    checks: list[CheckResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """``{check name: why it did not run}`` (no secret named, an env instance without an id)."""

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __str__(self) -> str:
        return "\n".join([f"{self.env_id}:"] + ["  " + c.line() for c in self.checks]
                         + [f"  SKIP  {name:<12} {why}" for name, why in self.skipped.items()])

    def raise_on_failure(self) -> None:
        """Raise ``AssertionError`` with the report when a check failed."""
        if not self.ok:
            raise AssertionError(str(self))


@dataclass(frozen=True)
class Shrinking:
    """The budget of the hypothesis search that shrinks a failing example (``max_examples`` 0: off)."""

    max_examples: int = 100
    deadline_s: float = 10.0


def one_line(error: BaseException, width: int = 200) -> str:
    """``"TypeError: the message"`` on one line, at most ``width`` characters of message."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:width]}"


def probe_script(tools: list[Any]) -> list[str]:
    """The few corpus actions (for ``tools``) that the scripted episodes of the determinism and leak checks play."""
    from mtrl_gym.testing.corpus import adversarial_texts

    small = [c.text for c in adversarial_texts(tools, size=300)]
    return small[::5][:12]


def seed_list(seed: int | Sequence[int]) -> list[int]:
    """``seed`` as a non-empty list of ints, or :class:`~mtrl_gym.error.ConfigError`."""
    from mtrl_gym.error import ConfigError

    seeds = [seed] if isinstance(seed, int) else list(seed) if isinstance(seed, (list, tuple, range)) else None
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise ConfigError(f"`seed` must be an int >= 0 or a non-empty list of them, got {seed!r}")
    return seeds


#: One step's views: ``(who, observation, info, observation space)`` for each seat that observes it.
Views = list[tuple[str, Any, Any, Any]]


def step_problem(step: Callable[[], Views], bound: float | None) -> tuple[tuple[str, str] | None, float]:
    """``((kind, message) or None, seconds)``: what is wrong with one step (``step()`` runs it) and its time.

    ``kind`` names the broken property (``"raised UnicodeEncodeError"``, ``"json"``,
    ``"space"``, ``"slow"``): a shrunk example must fail with the same kind.
    """
    t0 = time.perf_counter()
    try:
        views = step()
    except Exception as e:
        return (f"raised {type(e).__name__}", f"raised {one_line(e)}"), time.perf_counter() - t0
    took = time.perf_counter() - t0
    for who, obs, info, space in views:
        try:
            json.dumps(info)  # plain JSON, as the env hands it over (writers only add a safety net)
        except (TypeError, ValueError, RecursionError) as e:
            return ("json", f"{who}info is not JSON ({one_line(e, 160)})"), took
        if not space.contains(obs):
            return ("space", f"{who}the observation is outside the observation space"), took
    if bound is not None and took > bound:
        return ("slow", f"a step took {took * 1e3:.1f} ms, over the {bound * 1e3:g} ms bound"), took
    return None, took


def _same_failure(step_of: Callable[[str], Callable[[], Views]], kind: str,
                  bound: float | None) -> Callable[[str], bool]:
    def fails(text: str) -> bool:
        tries = 2 if kind == "slow" else 1  # timer noise must not make a short text look slow
        return all((step_problem(step_of(text), bound)[0] or ("", ""))[0] == kind for _ in range(tries))
    return fails


def corpus_cases(tools: Sequence[Any], size: int, action_space: Any) -> tuple[list[Any], int]:
    """``(cases, extra)``: the corpus at ``size`` characters, then (when the action space declares a
    longer ``max_length``) the ``extra`` cases that grow with the size again at that length, cut to it:
    an env must take every text its action space admits."""
    from mtrl_gym.testing.corpus import BadText, adversarial_texts

    cases = adversarial_texts(tools, size=size)
    limit = getattr(action_space, "max_length", None)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= size:
        return cases, 0
    long = [BadText(c.category, f"{c.name}@{limit}", c.text[:limit])
            for c in adversarial_texts(tools, size=limit) if len(c.text) > size + 100]
    return cases + long, len(long)


def corpus_failure(name: str, case: str, kind: str, message: str, step_of: Callable[[str], Callable[[], Views]],
                   bound: float | None, shrinking: Shrinking) -> CheckResult:
    """The failed ``corpus`` result of one case, with the case shrunk by hypothesis."""
    from mtrl_gym.testing.shrink import show, shrink_text

    detail = f"{name} ({len(case)} chars) {message}"
    if shrinking.max_examples <= 0:
        return CheckResult("corpus", False, detail, example=case)
    small = shrink_text(_same_failure(step_of, kind, bound), case, max_examples=shrinking.max_examples,
                        deadline_s=shrinking.deadline_s)
    return CheckResult("corpus", False, f"{detail}; shrunk by hypothesis to {len(small)} chars: {show(small)}",
                       example=small)


def other_hashseed(current: str | None) -> str:
    """A ``PYTHONHASHSEED`` other than ``current`` (a number, ``"random"`` or unset: a random one here).

    >>> other_hashseed("0"), other_hashseed("random"), other_hashseed(None), other_hashseed("4294967290")
    ('12345', '12345', '12345', '12339')
    """
    text = (current or "").strip()
    base = int(text) if text.isdigit() else 0
    return str((base + 12345) % 4294967296)


def other_interpreter(function: str, payload: dict[str, Any], imports: Sequence[str]) -> tuple[str | None, str]:
    """``(stdout, where)`` of ``module:function(**payload)`` in a fresh interpreter with another
    ``PYTHONHASHSEED``; stdout is None when it failed (``where`` then holds its last error line).

    The fresh interpreter's own import path comes first; this one's follows it (as
    ``multiprocessing`` does for a spawned child), so what imports here (a secret extractor
    defined in a test helper) imports there too."""
    module, name = function.split(":")
    here = [p for p in sys.path if p and os.path.isdir(p)]
    code = (f"import importlib, json, sys; sys.path.extend(p for p in {here!r} if p not in sys.path); "
            + "".join(f"import {m}; " for m in imports)
            + f"from {module} import {name}; sys.stdout.write({name}(**json.loads(sys.stdin.read())))")
    hashseed = other_hashseed(os.environ.get("PYTHONHASHSEED"))
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": hashseed}, timeout=600, check=False)
    if proc.returncode != 0:
        return None, " ".join(proc.stderr.strip().splitlines()[-1:])[:300]
    return proc.stdout, f"a fresh interpreter (PYTHONHASHSEED={hashseed})"


def compare_records(here: str, there: str | None, where: str, what: str) -> CheckResult:
    """The ``determinism`` result of two :func:`determinism_record` texts (``what``: which episodes)."""
    if there is None:
        return CheckResult("determinism", False, f"the fresh interpreter failed: {where}")
    a, b = json.loads(here), json.loads(there)
    for label in a:
        if a[label] != b.get(label):
            if label.endswith(", secret"):  # the hidden answer itself: e.g. drawn in hash order
                return CheckResult("determinism", False, f"{label.removesuffix(', secret')}: the secret after reset "
                                                         f"differs in {where}")
            x, y = a[label], b.get(label) or []
            step = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            return CheckResult("determinism", False, f"{label}: step {step} differs in {where}")
    steps = sum(len(e) - 1 for label, e in a.items() if not label.endswith(", secret"))
    return CheckResult("determinism", True, f"{what}: {steps} steps identical in {where}")


def determinism_check(record: Callable[..., str], payload: dict[str, Any], processes: bool,
                      imports: Sequence[str], seeds: Sequence[int], episodes: str) -> CheckResult:
    """The ``determinism`` result: ``record(**payload)`` here and in a fresh interpreter (or twice here)."""
    try:
        here = record(**payload)
    except Exception as e:
        return CheckResult("determinism", False, f"the {episodes} raised {one_line(e)}")
    if processes:
        there, where = other_interpreter(f"{record.__module__}:{record.__name__}", payload, imports)
    else:
        there, where = record(**payload), "a second run in this process"
    return compare_records(here, there, where, f"seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}, "
                                               f"{episodes}")
