"""Graders for final answers: a :class:`Grade` and checkers that task rows select by name.

The grader decides the *outcome* of an episode from its final answer (and, for stateful
tasks, the final state). It is separate from shaping: wrappers may add bounded shaping
from ``info`` facts, but never change the grade.

A task row picks its checker with a ``checker`` field, a spec such as
``{"type": "number", "abs_tol": 0.05}``; the expected value is the row's ``answer``.
Built-in checkers (:data:`CHECKERS`):

=============== ===========================================================================
``exact``       equal as canonical JSON; options ``ignore_case`` (False), ``strip`` (True)
``number``      a number (or numeric string) within ``abs_tol`` (1e-6) or ``rel_tol`` (0)
``one_of``      equal (as ``exact``) to one of the values in the expected list
``set``         the same elements in any order (lists); score = Jaccard overlap
``json_fields`` an object whose expected fields match (numbers within ``abs_tol``); score =
                fraction of fields right; ``allow_extra`` (True) permits other fields
``regex``       a string that fully matches the expected regular expression
=============== ===========================================================================

``score`` is in [0, 1]; ``passed`` is true only for a fully correct answer.

>>> make_checker({"type": "number", "abs_tol": 0.1})(20.04, 20.0).passed
True
>>> g = make_checker({"type": "json_fields"})({"id": "B", "n": 2.0}, {"id": "a", "n": 2})
>>> g.score, g.passed, g.reason
(0.5, False, "1 of 2 field(s) wrong: 'id'")
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mtrl_gym.envs.sandbox.canonical import canonical_json, canonicalize
from mtrl_gym.error import InvalidTask

__all__ = ["Grade", "Checker", "CHECKERS", "make_checker", "register_checker"]

Checker = Callable[[Any, Any], "Grade"]
"""``checker(answer, expected) -> Grade``."""


@dataclass(frozen=True)
class Grade:
    """The outcome of grading a final answer."""

    score: float
    """In [0, 1]; the env's outcome reward."""
    passed: bool
    """True only when the answer is fully correct."""
    reason: str = ""
    """A short explanation for people and logs (may name expected values: final step only)."""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.score, (int, float)) or isinstance(self.score, bool) or not 0 <= self.score <= 1:
            raise ValueError(f"Grade.score must be a number in [0, 1], got {self.score!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``info["grade"]`` holds)."""
        return asdict(self)

    @classmethod
    def correct(cls, reason: str = "correct", **details: Any) -> Grade:
        return cls(1.0, True, reason, details)

    @classmethod
    def wrong(cls, reason: str, score: float = 0.0, **details: Any) -> Grade:
        return cls(float(score), False, reason, details)


def _norm(value: Any, ignore_case: bool, strip: bool) -> Any:
    """A copy of a JSON value with every string stripped and/or case-folded.

    Iterative (an explicit stack, no recursion), so an answer nested thousands of levels
    deep costs linear time and never raises ``RecursionError``; the canonical JSON that
    compares the result then rejects anything deeper than 64 levels.
    """

    def leaf(v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip() if strip else v
            return v.casefold() if ignore_case else v
        return v

    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        src, parent, key = stack.pop()
        if isinstance(src, list):
            dst: Any = [None] * len(src)
            items: Any = enumerate(src)
        elif isinstance(src, dict):
            dst, items = {}, src.items()
        else:
            parent[key] = leaf(src)
            continue
        parent[key] = dst
        for k, v in items:
            if isinstance(v, (list, dict)):
                dst[k] = None  # keeps the key order; filled when popped
                stack.append((v, dst, k))
            else:
                dst[k] = leaf(v)
    return holder[0]


def _same(answer: Any, expected: Any, ignore_case: bool = False, strip: bool = True) -> bool:
    try:
        return canonical_json(_norm(answer, ignore_case, strip)) == canonical_json(_norm(expected, ignore_case, strip))
    except (TypeError, ValueError):
        return False


def _exact(answer: Any, expected: Any, *, ignore_case: bool = False, strip: bool = True) -> Grade:
    if _same(answer, expected, ignore_case, strip):
        return Grade.correct()
    return Grade.wrong("the answer differs from the expected value")


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an int with 309+ digits: no number the checkers can compare
            return None
    if isinstance(value, str):
        text = value.strip().replace(",", "").replace("_", "")
        if len(text) > 64:
            return None
        try:
            return float(text)
        except ValueError:
            return None
    return None


def _number(answer: Any, expected: Any, *, abs_tol: float = 1e-6, rel_tol: float = 0.0) -> Grade:
    got, want = _as_number(answer), _as_number(expected)
    if want is None:
        raise InvalidTask(f"checker 'number' needs a numeric expected answer, got {expected!r}")
    if got is None or not math.isfinite(got):
        return Grade.wrong("the answer is not a number")
    if math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol):
        return Grade.correct(got=got)
    return Grade.wrong(f"off by {abs(got - want):.6g}", got=got)


def _one_of(answer: Any, expected: Any, *, ignore_case: bool = False, strip: bool = True) -> Grade:
    if not isinstance(expected, list) or not expected:
        raise InvalidTask(f"checker 'one_of' needs a non-empty list as the expected answer, got {expected!r}")
    if any(_same(answer, e, ignore_case, strip) for e in expected):
        return Grade.correct()
    return Grade.wrong("the answer is none of the accepted values")


def _set(answer: Any, expected: Any, *, ignore_case: bool = False, strip: bool = True) -> Grade:
    if not isinstance(expected, list):
        raise InvalidTask(f"checker 'set' needs a list as the expected answer, got {expected!r}")
    if not isinstance(answer, list):
        return Grade.wrong("the answer is not a list")
    try:
        got = {canonical_json(_norm(a, ignore_case, strip)) for a in answer}
        want = {canonical_json(_norm(e, ignore_case, strip)) for e in expected}
    except (TypeError, ValueError):
        return Grade.wrong("the answer holds values that are not JSON")
    union = got | want
    score = len(got & want) / len(union) if union else 1.0
    if got == want:
        return Grade.correct()
    return Grade.wrong(f"{len(want - got)} missing, {len(got - want)} unexpected", score=score)


def _json_fields(answer: Any, expected: Any, *, abs_tol: float = 1e-6, ignore_case: bool = True,
                 allow_extra: bool = True) -> Grade:
    if not isinstance(expected, dict) or not expected:
        raise InvalidTask(f"checker 'json_fields' needs a non-empty object as the expected answer, got {expected!r}")
    if not isinstance(answer, dict):
        return Grade.wrong("the answer is not a JSON object")
    wrong = []
    for key, want in expected.items():
        got = answer.get(key)
        a, b = _as_number(got), _as_number(want)
        if isinstance(want, (int, float)) and not isinstance(want, bool) and a is not None and b is not None:
            ok = math.isclose(a, b, rel_tol=0.0, abs_tol=abs_tol)
        else:
            ok = key in answer and _same(got, want, ignore_case, True)
        if not ok:
            wrong.append(key)
    extra = sorted(set(answer) - set(expected)) if not allow_extra else []
    score = (len(expected) - len(wrong)) / len(expected)
    if not wrong and not extra:
        return Grade.correct()
    parts = []
    if wrong:
        parts.append(f"{len(wrong)} of {len(expected)} field(s) wrong: {', '.join(repr(k) for k in wrong)}")
    if extra:
        parts.append(f"unexpected field(s): {', '.join(repr(k) for k in extra)}")
        score = min(score, 0.5)
    return Grade.wrong("; ".join(parts), score=score, wrong_fields=wrong)


def _regex(answer: Any, expected: Any, *, ignore_case: bool = False) -> Grade:
    try:
        rx = re.compile(str(expected), re.IGNORECASE if ignore_case else 0)
    except re.error as e:
        raise InvalidTask(f"checker 'regex': the expected answer is not a valid regular expression ({e})") from None
    if isinstance(answer, str) and rx.fullmatch(answer.strip()[:10_000]):
        return Grade.correct()
    return Grade.wrong("the answer does not match the expected pattern")


#: Checker name -> ``fn(answer, expected, **options) -> Grade``.
CHECKERS: dict[str, Callable[..., Grade]] = {
    "exact": _exact, "number": _number, "one_of": _one_of, "set": _set, "json_fields": _json_fields,
    "regex": _regex,
}
_OPTIONS = {"exact": {"ignore_case": bool, "strip": bool}, "number": {"abs_tol": float, "rel_tol": float},
            "one_of": {"ignore_case": bool, "strip": bool}, "set": {"ignore_case": bool, "strip": bool},
            "json_fields": {"abs_tol": float, "ignore_case": bool, "allow_extra": bool},
            "regex": {"ignore_case": bool}}


def register_checker(name: str, fn: Callable[..., Grade], options: Mapping[str, type] | None = None) -> None:
    """Add a checker task rows can name; ``options`` maps option names to their types."""
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", name):
        raise ValueError(f"checker names must be 1-32 characters a-z, 0-9 or _, got {name!r}")
    if name in CHECKERS and CHECKERS[name] is not fn:
        raise ValueError(f"a checker named {name!r} is already registered")
    CHECKERS[name] = fn
    _OPTIONS[name] = dict(options or {})


def make_checker(spec: Any) -> Checker:
    """A ``checker(answer, expected) -> Grade`` from a spec: a name, ``{"type": name, **options}``,
    or a callable (returned as is). Bad specs raise :class:`InvalidTask`."""
    if callable(spec):
        return spec
    if spec is None:
        spec = {"type": "exact"}
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
        raise InvalidTask(f'a checker spec must be a name or {{"type": name, ...options}}, got {spec!r}')
    name = spec["type"]
    if name not in CHECKERS:
        raise InvalidTask(f"unknown checker {name!r}; choose one of {sorted(CHECKERS)} or register one with "
                          "mtrl_gym.envs.sandbox.register_checker")
    options = {k: v for k, v in spec.items() if k != "type"}
    allowed = _OPTIONS.get(name, {})
    for key, value in options.items():
        if key not in allowed:
            raise InvalidTask(f"checker {name!r} has no option {key!r}; its options are {sorted(allowed)}")
        want = allowed[key]
        if want is bool:
            ok = isinstance(value, bool)
        elif want is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, want)
        if not ok or (want is float and not (math.isfinite(value) and value >= 0)):
            raise InvalidTask(f"checker {name!r}: option {key!r} must be {want.__name__}"
                              f"{' >= 0' if want is float else ''}, got {value!r}")
    fn = CHECKERS[name]

    def checker(answer: Any, expected: Any) -> Grade:
        return fn(answer, canonicalize(expected) if not isinstance(expected, str) else expected, **options)

    checker.__name__ = f"checker_{name}"
    return checker
