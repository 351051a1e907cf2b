"""Plain-JSON conversion shared by environments, wrappers, trainers and evaluation.

Every writer of the project (episode recordings, trajectory files, metrics, evaluation
records) turns values into JSON through :func:`json_safe` or :func:`json_line`, because
what it writes often holds text a model wrote, and model text is hostile input:

* a lone UTF-16 surrogate (``"\\ud800"``, which a JSON tool call can smuggle in) cannot be
  encoded as UTF-8; it becomes U+FFFD, so a file write never raises ``UnicodeEncodeError``;
* a value nested deeper than :data:`MAX_DEPTH` levels (a model can nest arguments 900
  deep in a kilobyte) is cut at that depth and replaced by a short marker string, so no
  conversion or ``json.dumps`` ever raises ``RecursionError``; cyclic containers end the
  same way;
* numpy scalars and arrays, tuples and sets become lists and numbers, non-finite floats
  the strings ``"nan"``/``"inf"`` (a file never holds invalid JSON), anything else its
  ``repr``.

The work is linear in the size of the value: each container and string is visited once.

>>> import numpy as np
>>> json_safe({"a": np.int64(3), "b": (1.5, float("nan")), 2: {"x"}})
{'a': 3, 'b': [1.5, 'nan'], '2': ['x']}
>>> json_safe("bad \\ud800 text")
'bad \\ufffd text'
>>> json_safe([[[1]]], max_depth=2)
[['<cut: nested deeper than 2 levels>']]
>>> json_line({"text": "\\udfff", "deep": [[[]]]})
'{"text": "\\ufffd", "deep": [[[]]]}'
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["json_safe", "json_line", "safe_text", "MAX_DEPTH"]

#: Containers nested deeper than this are cut (far below Python's recursion limit).
MAX_DEPTH = 64
_SURROGATES = re.compile("[\ud800-\udfff]")


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (always encodable as UTF-8)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text)
    return text


def json_safe(value: Any, *, max_depth: int = MAX_DEPTH) -> Any:
    """A JSON-ready copy of ``value`` (see the module docstring for every rule).

    Args:
        value: anything; dict keys become strings.
        max_depth: containers below this many levels become the marker string
            ``"<cut: nested deeper than N levels>"``.
    """
    return _convert(value, max_depth, max_depth)


def _convert(value: Any, left: int, max_depth: int) -> Any:
    # Recursion is bounded by ``max_depth`` (64 frames by default), never by the input.
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        if left <= 0:
            return f"<cut: nested deeper than {max_depth} levels>"
        if isinstance(value, dict):
            return {safe_text(str(k)): _convert(v, left - 1, max_depth) for k, v in value.items()}
        if isinstance(value, (set, frozenset)):
            value = sorted(value, key=repr)
        return [_convert(v, left - 1, max_depth) for v in value]
    if hasattr(value, "tolist"):  # numpy scalar or array, torch tensor
        return _convert(value.tolist(), left, max_depth)
    return safe_text(repr(value))


def json_line(value: Any, *, max_depth: int = MAX_DEPTH) -> str:
    """One line of JSON text of :func:`json_safe` of ``value`` (no newline; never raises on
    surrogates, deep nesting or non-finite numbers)."""
    return json.dumps(json_safe(value, max_depth=max_depth), ensure_ascii=False, allow_nan=False)
