"""Plain-JSON conversion shared by environments, wrappers, trainers and evaluation.

Kept apart from any trainer module so that environments and wrappers can use it without
depending on ``mtrl_gym.trainers`` (docs/architecture.md: dependencies point one way).

>>> import numpy as np
>>> json_safe({"a": np.int64(3), "b": (1.5, float("nan")), 2: {"x"}})
{'a': 3, 'b': [1.5, 'nan'], '2': ['x']}
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["json_safe"]


def json_safe(value: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, sets and non-finite floats to JSON-safe values.

    Non-finite floats become strings (``"nan"``, ``"inf"``) so that a file never holds
    invalid JSON; anything else unknown becomes its ``repr``.
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [json_safe(v) for v in sorted(value, key=repr)]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if hasattr(value, "tolist"):  # numpy scalar or array, torch tensor
        return json_safe(value.tolist())
    return repr(value)
