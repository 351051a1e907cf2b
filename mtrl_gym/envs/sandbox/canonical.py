"""Canonical JSON for tool arguments, so equal calls match however they were written.

Two argument objects that mean the same thing give the same :func:`canonical_json`:

* object keys are sorted; there is no insignificant whitespace;
* numbers are written one way: an integral float is an integer (``1.0``, ``1e0`` -> ``1``),
  other floats use the shortest round-trip form (``0.10`` -> ``0.1``), ``-0.0`` is ``0``;
  non-finite floats (which JSON cannot hold) become the strings ``"NaN"``, ``"Infinity"``,
  ``"-Infinity"``;
* strings are Unicode NFC-normalised (``"e\\u0301"`` == ``"\\u00e9"``); their content,
  including case and surrounding spaces, is otherwise kept (use a tool's ``normalize`` to
  fold it);
* tuples are arrays; any other non-JSON value is an error.

It is pure and independent of hash seeds and dict insertion order, so a key computed in
one process matches in every other.

>>> canonical_json({"b": 1.0, "a": [0.10, "x"]}) == canonical_json({"a": [0.1, "x"], "b": 1})
True
>>> canonical_json({"b": 1.0, "a": [0.10, "x"]})
'{"a":[0.1,"x"],"b":1}'
"""

from __future__ import annotations

import difflib
import json
import math
import unicodedata
from collections.abc import Mapping
from typing import Any

__all__ = ["canonicalize", "canonical_json", "call_key", "argument_distance"]

_MAX_DEPTH = 64


def canonicalize(value: Any, _depth: int = 0) -> Any:
    """The canonical JSON value of ``value`` (see the module docstring); raises TypeError on non-JSON."""
    if _depth > _MAX_DEPTH:
        raise TypeError("value is nested more than 64 levels deep")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer() and abs(value) < 2 ** 63:
            return int(value)
        return value
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, (list, tuple)):
        return [canonicalize(v, _depth + 1) for v in value]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"object keys must be strings, got {type(k).__name__}")
            out[unicodedata.normalize("NFC", k)] = canonicalize(v, _depth + 1)
        return dict(sorted(out.items()))
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON text of :func:`canonicalize` (``ensure_ascii=False``)."""
    return json.dumps(canonicalize(value), ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      allow_nan=False)


def call_key(tool: str, arguments: Mapping[str, Any]) -> str:
    """The lookup key of a call: ``name`` + canonical arguments, e.g. ``get_weather{"city":"Oslo"}``."""
    return tool + canonical_json(arguments)


def argument_distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """How far apart two canonical argument objects are (0 = equal); used to find the nearest call.

    Each key present in either object adds between 0 and 1: 1 if it is missing on one
    side or the types differ, ``1 - similarity`` for strings (case-insensitive
    :class:`difflib.SequenceMatcher` ratio), ``min(1, |x - y| / max(|x|, |y|))`` for
    numbers, and the mean over positions for arrays and over keys for objects.
    """
    keys = sorted(set(a) | set(b))
    return float(sum(_value_distance(a.get(k, _MISSING), b.get(k, _MISSING)) for k in keys))


_MISSING = object()


def _value_distance(x: Any, y: Any, depth: int = 0) -> float:
    if x is _MISSING or y is _MISSING:
        return 1.0
    if isinstance(x, bool) or isinstance(y, bool) or x is None or y is None:
        return 0.0 if x is y else 1.0
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        scale = max(abs(x), abs(y))
        return 0.0 if scale == 0 else min(1.0, abs(x - y) / scale)
    if isinstance(x, str) and isinstance(y, str):
        if x == y:
            return 0.0
        return 1.0 - difflib.SequenceMatcher(None, x.lower()[:200], y.lower()[:200]).ratio()
    if depth < 8 and isinstance(x, list) and isinstance(y, list):
        n = max(len(x), len(y))
        if n == 0:
            return 0.0
        return sum(_value_distance(x[i] if i < len(x) else _MISSING, y[i] if i < len(y) else _MISSING, depth + 1)
                   for i in range(n)) / n
    if depth < 8 and isinstance(x, dict) and isinstance(y, dict):
        keys = set(x) | set(y)
        if not keys:
            return 0.0
        return sum(_value_distance(x.get(k, _MISSING), y.get(k, _MISSING), depth + 1) for k in sorted(keys)) / len(keys)
    return 0.0 if x == y else 1.0
