"""The benchmark's own success measure, reproduced rule by rule from its output parser.

The official harness reads the agent's final ``<final_output>{...}</final_output>`` JSON and
compares each output column with the CSV's value; all columns must match. Its rules, which
:func:`official_success` and :func:`official_match` follow:

1. **Keys** are looked up case-insensitively; each found value becomes ``str(value).lower()``
   (so JSON ``true`` is ``"true"``, ``null`` is ``"none"``, ``7.0`` is ``"7.0"``).
2. **Null-like values are equal**: ``""``, ``none``, ``null``, ``na``, ``n/a``, ``nan`` and
   ``unknown`` (any case) all match each other and an empty CSV cell; a null-like value never
   matches a value that is not.
3. **Exact** after lower-casing and trimming both sides.
4. **Separators fold**: ``_`` and ``-`` read as spaces on both sides.
5. **Containment both ways**: after 4, the prediction inside the expected value or the expected
   value inside the prediction matches (``"Class C"`` for ``"Hazard Class C"`` and back).
6. **A missing key**: with several output columns the answer fails; with one, the parser falls
   back to the tags in the text and compares the whole ``<final_output>`` content (the JSON text,
   lower-cased) with the expected value, so rule 5 can still pass it.
7. **Not an object**: the text itself, lower-cased and trimmed, without a leading
   ``final answer:``/``decision:``/``result:``/``output:`` and ``unknown`` when longer than 100
   characters, is the prediction of a one-column domain; a several-column domain fails.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["official_success", "official_match", "NULL_LIKE"]

#: The values the official parser treats as null (after lower-casing and trimming).
NULL_LIKE = frozenset({"none", "null", "na", "n/a", "nan", "unknown", ""})
_PREFIXES = ("final answer:", "decision:", "result:", "output:")


def _is_null(value: Any) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return str(value).lower().strip() in NULL_LIKE


def official_match(predicted: Any, expected: Any) -> bool:
    """One value as the official parser compares it (rules 2-5 of the module docstring)."""
    pred_null, exp_null = _is_null(predicted), _is_null(expected)
    if pred_null or exp_null:
        return pred_null and exp_null
    pred, exp = str(predicted).lower().strip(), str(expected).lower().strip()
    if pred == exp:
        return True
    pred, exp = pred.replace("_", " ").replace("-", " "), exp.replace("_", " ").replace("-", " ")
    return pred == exp or pred in exp or exp in pred


def _plain(text: str) -> str:
    decision = text.lower().strip()
    for prefix in _PREFIXES:
        if decision.startswith(prefix):
            decision = decision[len(prefix):].strip()
    return "unknown" if len(decision) > 100 else decision


def official_success(answer: Any, expected: Mapping[str, Any], columns: Sequence[str] | None = None) -> bool:
    """Whether the official harness scores ``answer`` (the agent's final object, or text) a success for the
    row's ``expected`` values (one per output column, in ``columns`` order)."""
    columns = list(columns if columns is not None else expected)
    if not isinstance(answer, Mapping):
        if len(columns) != 1 or answer is None:
            return False
        text = answer if isinstance(answer, str) else json.dumps(answer)
        return official_match(_plain(text), expected[columns[0]])
    lower = {str(k).lower(): v for k, v in answer.items()}
    found = {c: str(lower[c.lower()]).lower() for c in columns if c.lower() in lower}
    if len(columns) == 1:
        if not found:
            return official_match(json.dumps(dict(answer), ensure_ascii=False).lower(), expected[columns[0]])
        return official_match(found[columns[0]], expected[columns[0]])
    return len(found) == len(columns) and all(official_match(found[c], expected[c]) for c in columns)
