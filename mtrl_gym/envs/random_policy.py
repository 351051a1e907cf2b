"""The generic ``random`` reference policy: a random call of a random tool, with arguments
of each parameter's JSON-schema type (``enum`` values, short random words for strings,
integers in [0, 100], ...), or a random word of text when there are no tools.

Evaluation plays it for any env whose profile has no ``random`` policy of its own; the
multi-agent envs use it for a seat's floor.

>>> import numpy as np
>>> p = RandomToolPolicy()
>>> p.reset({"tools": [{"name": "guess_word", "parameters": {"properties": {"guess": {"type": "string"}}}}]},
...         np.random.default_rng(0))
>>> p("", {}).startswith('<tool_call>{"name": "guess_word", "arguments": {"guess": "')
True
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.parsing import format_tool_call

__all__ = ["RandomToolPolicy"]


class RandomToolPolicy:
    """A random call of a random tool of ``info["tools"]`` (random text when there are none).

    Subclasses change what is played when the seat or env has no tools (:meth:`no_tools`)."""

    def __init__(self) -> None:
        self._tools: list[dict[str, Any]] = []
        self._rng = np.random.default_rng(0)

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        self._tools = [t.get("function", t) for t in info.get("tools") or [] if isinstance(t, Mapping)]
        self._rng = rng

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        if not self._tools:
            return self.no_tools()
        fn = self._tools[int(self._rng.integers(len(self._tools)))]
        props = (fn.get("parameters") or {}).get("properties") or {}
        return format_tool_call(str(fn.get("name", "")), {k: self._value(v) for k, v in props.items()})

    def no_tools(self) -> str:
        """The action when there is no tool to call: a random word."""
        return self._word()

    def _word(self) -> str:
        letters = string.ascii_lowercase
        return "".join(letters[int(i)] for i in self._rng.integers(len(letters), size=int(self._rng.integers(1, 9))))

    def _value(self, schema: Any) -> Any:
        schema = schema if isinstance(schema, Mapping) else {}
        if schema.get("enum"):
            return schema["enum"][int(self._rng.integers(len(schema["enum"])))]
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = kind[0] if kind else None
        if kind == "integer":
            return int(self._rng.integers(0, 101))
        if kind == "number":
            return round(float(self._rng.uniform(0, 100)), 2)
        if kind == "boolean":
            return bool(self._rng.integers(2))
        if kind == "array":
            return [self._value(schema.get("items"))] if self._rng.integers(2) else []
        if kind == "object":
            return {k: self._value(v) for k, v in (schema.get("properties") or {}).items()}
        return self._word()
