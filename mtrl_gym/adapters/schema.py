"""JSON-schema tool parameters as Python type hints, for frameworks that read a tool's schema
from a function's signature (TRL through ``transformers.utils.get_json_schema``, verifiers
through MCP).

:func:`annotation` gives the closest hint (``list[str]``, ``Literal["pass", "fail"]``,
``Optional[str]``, ``dict[str, int]``, ...) and :func:`schema_note` the part of the schema
a hint cannot carry (a nested object's properties, a default, bounds, patterns) as compact
JSON for the argument's description, so a model still sees the whole schema.

>>> annotation({"type": "array", "items": {"type": "string"}})
list[str]
>>> annotation({"type": "string", "enum": ["pass", "fail"]})
typing.Literal['pass', 'fail']
>>> schema_note({"type": "string", "enum": ["pass", "fail"], "description": "Result."})
''
>>> schema_note({"type": "string", "default": "", "description": "A note."})
'JSON schema: {"type": "string", "default": ""}'
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["annotation", "is_expressible", "schema_note"]

_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
_CONTAINERS: dict[str, Any] = {"array": list, "object": dict}
#: Keys a type hint renders (``description`` is rendered from the docstring).
_HINT_KEYS = frozenset({"type", "enum", "items", "description", "title"})


def _kinds(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    return [k for k in (kind if isinstance(kind, list) else [kind]) if isinstance(k, str)]


def _enum(schema: Mapping[str, Any]) -> list | None:
    values = schema.get("enum")
    if isinstance(values, list) and values and all(
            v is None or isinstance(v, (str, int, float, bool)) for v in values):
        return values
    return None


def annotation(schema: Any) -> Any:
    """The Python type hint of a JSON-schema property (``Any`` when it names no type)."""
    if not isinstance(schema, Mapping):
        return Any
    values = _enum(schema)
    if values is not None:
        scalars = tuple(v for v in values if v is not None)
        hint: Any = Literal[scalars] if scalars else type(None)
        return typing.Optional[hint] if None in values and scalars else hint  # noqa: UP045
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            hints = tuple(dict.fromkeys(annotation(s) for s in schema[key]))
            return Any if Any in hints else hints[0] if len(hints) == 1 else typing.Union[hints]  # noqa: UP007
    kinds = _kinds(schema)
    hints = []
    for kind in kinds:
        if kind in _SCALARS:
            hints.append(_SCALARS[kind])
        elif kind == "array":
            items = schema.get("items")
            hints.append(list[annotation(items)] if isinstance(items, Mapping) and items else list)
        elif kind == "object":
            extra = schema.get("additionalProperties")
            hints.append(dict[str, annotation(extra)] if isinstance(extra, Mapping) and extra
                         and not schema.get("properties") else dict)
    nullable = "null" in kinds
    if not hints:
        return type(None) if nullable and len(kinds) == 1 else Any
    hint = hints[0] if len(hints) == 1 else typing.Union[tuple(hints)]  # noqa: UP007
    return typing.Optional[hint] if nullable else hint  # noqa: UP045


def is_expressible(schema: Any) -> bool:
    """Whether :func:`annotation` carries all of ``schema`` (besides its description)."""
    if not isinstance(schema, Mapping) or set(schema) - _HINT_KEYS:
        return False
    if "enum" in schema:
        return _enum(schema) is not None and "items" not in schema
    kinds = _kinds(schema)
    if not kinds or len([k for k in kinds if k != "null"]) != 1 or any(
            k not in _SCALARS and k not in _CONTAINERS and k != "null" for k in kinds):
        return False
    if "items" in schema:
        return "array" in kinds and is_expressible(schema["items"])
    return True


def schema_note(schema: Any) -> str:
    """What a type hint cannot say of ``schema``, as ``JSON schema: {...}`` (``""`` when nothing)."""
    if not isinstance(schema, Mapping) or is_expressible(schema):
        return ""
    rest = {k: v for k, v in schema.items() if k not in ("description", "title")}
    return "JSON schema: " + json.dumps(rest, ensure_ascii=False, separators=(", ", ": "), default=str)
