"""JSON schemas for tool parameters: built from Python signatures, and used to check arguments.

:func:`type_schema` turns a type annotation into a JSON-schema fragment (the subset OpenAI
function calling uses), :func:`parse_docstring` reads a Google- or reST-style docstring
into a summary and per-parameter descriptions, and :func:`validate` checks a value
decoded from model text against a schema, returning the (lightly coerced) value and a
list of readable problems. It never raises on any value: bad arguments are something the
model did, and the sandbox reports them back to the model as a tool result.

Supported schema keywords (others are ignored): ``type`` (a name or a list of names),
``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``minItems``, ``maxItems``, ``minLength``, ``maxLength``, ``pattern``, ``minimum``,
``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``anyOf``, ``oneOf`` (checked
like ``anyOf``) and ``default`` (filled in by :func:`validate_arguments`).

Coercions (the only ones): an ``integer`` accepts an integral float (``3.0`` -> ``3``), a
``number`` accepts an int, and an ``array`` accepts a tuple. Booleans are never numbers.

>>> validate_arguments({"city": "Oslo"}, {"type": "object", "properties": {
...     "city": {"type": "string"}, "days": {"type": "integer", "default": 1}}, "required": ["city"]})
({'city': 'Oslo', 'days': 1}, [])
>>> validate_arguments({"days": "two"}, {"type": "object", "properties": {
...     "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]})[1]
["missing required argument 'city'", "'days' must be an integer, got 'two'"]
"""

from __future__ import annotations

import enum
import inspect
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["type_schema", "parse_docstring", "validate", "validate_arguments", "describe_value",
           "signature_text"]

_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                               type(None): "null"}
_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
               "null": "null", "array": "an array", "object": "an object"}
_MAX_ERRORS = 8
_MAX_DEPTH = 32


# ------------------------------------------------------------------------------- building


def type_schema(tp: Any, *, where: str = "annotation") -> dict[str, Any]:
    """The JSON schema of a Python type annotation.

    Supports ``str``, ``int``, ``float``, ``bool``, ``None``, ``list[T]`` / ``Sequence[T]``
    / ``tuple[T, ...]``, ``dict[str, T]`` / ``Mapping[str, T]``, ``Literal[...]``,
    :class:`enum.Enum` subclasses, ``T | None`` / ``Optional[T]``, other unions,
    ``Annotated[T, "description"]`` and ``Any`` (no constraint). Anything else raises
    :class:`TypeError` naming ``where`` (pass an explicit ``schema=`` to :func:`tool` then).

    >>> type_schema(list[int])
    {'type': 'array', 'items': {'type': 'integer'}}
    >>> type_schema(typing.Optional[str])
    {'type': ['string', 'null']}
    """
    if tp is Any or tp is inspect.Parameter.empty or tp is object:
        return {}
    if tp is None:
        tp = type(None)
    if tp in _PRIMITIVES:
        return {"type": _PRIMITIVES[tp]}
    if tp in (list, tuple):
        return {"type": "array"}
    if tp is dict:
        return {"type": "object"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([m.value for m in tp])
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        schema = type_schema(args[0], where=where)
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": notes[0]} if notes else schema
    if origin is typing.Literal:
        return _enum_schema(list(args))
    if origin in (typing.Union, types.UnionType):
        return _union_schema(args, where)
    if origin in (list, tuple, Sequence, typing.Sequence, set, frozenset):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if args:
                raise TypeError(f"{where}: fixed-length tuples are not supported; use tuple[T, ...] or list[T]")
        return {"type": "array", "items": type_schema(args[0], where=where)} if args else {"type": "array"}
    if origin in (dict, Mapping, typing.Mapping):
        if args and args[0] is not str:
            raise TypeError(f"{where}: dict keys must be str in a JSON object, got {args[0]!r}")
        value = type_schema(args[1], where=where) if len(args) == 2 else {}
        return {"type": "object", "additionalProperties": value} if value else {"type": "object"}
    raise TypeError(f"{where}: unsupported type {tp!r}; use str, int, float, bool, list[...], dict[str, ...], "
                    "Literal[...], an Enum, a union of these, or give the tool an explicit schema=")


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    kinds = {_PRIMITIVES.get(type(v)) for v in values}
    schema: dict[str, Any] = {"enum": list(values)}
    if len(kinds) == 1 and None not in kinds:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _union_schema(args: tuple, where: str) -> dict[str, Any]:
    parts = [type_schema(a, where=where) for a in args]
    if any(p == {} for p in parts):
        return {}
    simple = [p["type"] for p in parts if set(p) == {"type"} and isinstance(p["type"], str)]
    if len(simple) == len(parts):
        return {"type": list(dict.fromkeys(simple))}
    return {"anyOf": parts}


_SECTION_RE = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Returns|Return|Raises|Yields|"
                         r"Examples?|Notes?|Attributes)\s*:\s*$")
_GOOGLE_ARG_RE = re.compile(r"^\s*\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_ARG_RE = re.compile(r"^\s*:param\s+(?:[^:]*\s)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(description, {parameter: description})`` from a Google- or reST-style docstring.

    The description is the text before the first section (``Args:``, ``Returns:``, ...)
    or ``:param`` line, with paragraphs joined by blank lines.

    >>> parse_docstring('''Look up an order.
    ...
    ... Args:
    ...     order_id: The order id,
    ...         e.g. "ORD-1".
    ... ''')
    ('Look up an order.', {'order_id': 'The order id, e.g. "ORD-1".'})
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    head: list[str] = []
    params: dict[str, str] = {}
    section, current, indent = None, None, 0
    for line in lines:
        m = _SECTION_RE.match(line)
        rest = _REST_ARG_RE.match(line)
        if m:
            section, current = m.group(1).lower(), None
            continue
        if rest:
            section, current = "rest", rest.group(1)
            params[current] = rest.group(2).strip()
            continue
        if section is None:
            head.append(line)
        elif section in ("args", "arguments", "parameters", "params", "keyword args"):
            g = _GOOGLE_ARG_RE.match(line)
            line_indent = len(line) - len(line.lstrip())
            if g and (current is None or line_indent <= indent):
                current, indent = g.group(1), line_indent
                params[current] = g.group(2).strip()
            elif current is not None and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section == "rest" and current is not None and line.strip() and not line.lstrip().startswith(":"):
            params[current] = (params[current] + " " + line.strip()).strip()
    text = "\n".join(head).strip()
    return re.sub(r"\n{3,}", "\n\n", text), params


def signature_text(name: str, parameters: Mapping[str, Any]) -> str:
    """A one-line signature a model can read: ``get_weather(city: string, days: integer = 1)``."""
    props = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if not isinstance(props, Mapping):
        return f"{name}()"
    required = set(parameters.get("required") or ())
    parts = []
    for pname, ps in props.items():
        ps = ps if isinstance(ps, Mapping) else {}
        text = f"{pname}: {_type_text(ps)}"
        if pname not in required:
            text += f" = {describe_value(ps.get('default'), 24)}"
        parts.append(text)
    return f"{name}({', '.join(parts)})"


def _type_text(schema: Mapping[str, Any]) -> str:
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(describe_value(v, 24) for v in schema["enum"][:12])
    t = schema.get("type")
    if isinstance(t, list):
        return " | ".join(str(x) for x in t)
    if t == "array" and isinstance(schema.get("items"), Mapping) and schema["items"]:
        return f"array of {_type_text(schema['items'])}"
    if "anyOf" in schema and isinstance(schema["anyOf"], list):
        return " | ".join(_type_text(s) if isinstance(s, Mapping) else "any" for s in schema["anyOf"])
    return str(t) if t else "any"


# ----------------------------------------------------------------------------- checking


def describe_value(value: Any, limit: int = 40) -> str:
    """A short, JSON-like rendering of a model-supplied value for an error message."""
    if isinstance(value, str):
        text = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, (list, tuple)):
        text = f"an array of {len(value)} item(s)"
    elif isinstance(value, dict):
        text = "an object with keys " + ", ".join(repr(str(k))[:20] for k in list(value)[:5])
    else:
        text = type(value).__name__
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _kind(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return None


def _coerce(value: Any, type_name: str) -> tuple[bool, Any]:
    kind = _kind(value)
    if type_name == "number" and kind in ("integer", "number"):
        if isinstance(value, float) and not math.isfinite(value):
            return False, value
        return True, value
    if type_name == "integer" and kind == "number" and math.isfinite(value) and value.is_integer():
        return True, int(value)
    if type_name == "array" and kind == "array":
        return True, list(value)
    return kind == type_name, value


def validate(value: Any, schema: Any, path: str = "value", _depth: int = 0) -> tuple[Any, list[str]]:
    """Check ``value`` against ``schema``; return ``(coerced value, problems)``. Never raises."""
    if not isinstance(schema, Mapping) or not schema:
        return value, []
    if _depth > _MAX_DEPTH:
        return value, [f"{path} is nested too deeply"]
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf", schema.get("oneOf"))
        if isinstance(options, list) and options:
            for option in options:
                out, errs = validate(value, option, path, _depth + 1)
                if not errs:
                    return _check_rest(out, {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")},
                                       path, _depth)
            return value, [f"{path} does not match any allowed form, got {describe_value(value)}"]
    return _check_rest(value, schema, path, _depth)


def _check_rest(value: Any, schema: Mapping[str, Any], path: str, depth: int) -> tuple[Any, list[str]]:
    t = schema.get("type")
    if t is not None:
        names = [t] if isinstance(t, str) else [x for x in t if isinstance(x, str)] if isinstance(t, list) else []
        for name in names:
            ok, coerced = _coerce(value, name)
            if ok:
                value = coerced
                break
        else:
            if names:
                wanted = " or ".join(_TYPE_NAMES.get(n, n) for n in names)
                return value, [f"{path} must be {wanted}, got {describe_value(value)}"]
    if "const" in schema and not _same(value, schema["const"]):
        return value, [f"{path} must be {describe_value(schema['const'])}, got {describe_value(value)}"]
    if isinstance(schema.get("enum"), list) and not any(_same(value, e) for e in schema["enum"]):
        allowed = ", ".join(describe_value(e, 24) for e in schema["enum"][:12])
        return value, [f"{path} must be one of [{allowed}], got {describe_value(value)}"]
    if isinstance(value, str):
        return value, _check_string(value, schema, path)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value, _check_number(value, schema, path)
    if isinstance(value, list):
        return _check_array(value, schema, path, depth)
    if isinstance(value, dict):
        return _check_object(value, schema, path, depth)
    return value, []


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return type(a) is type(b) and a == b or (_kind(a) in ("integer", "number") and
                                           _kind(b) in ("integer", "number") and a == b)


def _check_string(value: str, schema: Mapping[str, Any], path: str) -> list[str]:
    errors = []
    if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
        errors.append(f"{path} must have at least {schema['minLength']} character(s), got {describe_value(value)}")
    if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
        errors.append(f"{path} must have at most {schema['maxLength']} characters, got {len(value)}")
    if isinstance(schema.get("pattern"), str):
        try:
            if re.search(schema["pattern"], value[:10_000]) is None:
                errors.append(f"{path} must match the pattern {schema['pattern']!r}, got {describe_value(value)}")
        except re.error:
            pass
    return errors


def _check_number(value: float, schema: Mapping[str, Any], path: str) -> list[str]:
    checks = (("minimum", lambda b: value >= b, ">="), ("maximum", lambda b: value <= b, "<="),
              ("exclusiveMinimum", lambda b: value > b, ">"), ("exclusiveMaximum", lambda b: value < b, "<"))
    for key, ok, op in checks:
        bound = schema.get(key)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and not ok(bound):
            return [f"{path} must be {op} {bound}, got {describe_value(value)}"]
    return []


def _check_array(value: list, schema: Mapping[str, Any], path: str, depth: int) -> tuple[list, list[str]]:
    errors = []
    if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
        errors.append(f"{path} must have at least {schema['minItems']} item(s), got {len(value)}")
    if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
        errors.append(f"{path} must have at most {schema['maxItems']} items, got {len(value)}")
    items = schema.get("items")
    if isinstance(items, Mapping) and items:
        out = []
        for i, item in enumerate(value):
            v, errs = validate(item, items, f"{path}[{i}]", depth + 1)
            out.append(v)
            errors.extend(errs)
            if len(errors) >= _MAX_ERRORS:
                break
        else:
            value = out
    return value, errors[:_MAX_ERRORS]


def _check_object(value: dict, schema: Mapping[str, Any], path: str, depth: int) -> tuple[dict, list[str]]:
    props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    extra = schema.get("additionalProperties", True)
    errors = [f"{path}.{k} is required" for k in schema.get("required") or () if isinstance(k, str) and k not in value]
    out = {}
    for key, item in value.items():
        sub = f"{path}.{key}"
        if key in props:
            out[key], errs = validate(item, props[key], sub, depth + 1)
        elif extra is False:
            out[key], errs = item, [f"{sub} is not allowed (allowed: {', '.join(map(str, props)) or 'none'})"]
        else:
            out[key], errs = validate(item, extra, sub, depth + 1) if isinstance(extra, Mapping) else (item, [])
        errors.extend(errs)
        if len(errors) >= _MAX_ERRORS:
            break
    return (out if not errors else value), errors[:_MAX_ERRORS]


def _non_json(value: Any, depth: int = 0) -> str | None:
    """The type name of the first non-JSON value inside ``value``, or None."""
    if depth > _MAX_DEPTH:
        return "a value nested too deeply"
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    if isinstance(value, (list, tuple)):
        return next((b for b in (_non_json(v, depth + 1) for v in value) if b is not None), None)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return "an object with non-string keys"
        return next((b for b in (_non_json(v, depth + 1) for v in value.values()) if b is not None), None)
    return f"a {type(value).__name__}"


def validate_arguments(arguments: Any, parameters: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Check a tool call's arguments against the tool's ``parameters`` schema.

    Returns ``(arguments with defaults filled in, problems)``. Problems are phrased for
    the model: ``missing required argument 'city'``, ``unexpected argument 'x'``,
    ``'units' must be one of ['c', 'f'], got 'k'``. Unknown arguments are always an error
    (as in OpenAI strict mode), unless the schema sets ``additionalProperties`` to a schema.
    """
    if not isinstance(arguments, Mapping):
        return {}, [f"arguments must be a JSON object, got {describe_value(arguments)}"]
    props = parameters.get("properties") if isinstance(parameters.get("properties"), Mapping) else {}
    extra = parameters.get("additionalProperties", False)
    errors = [f"missing required argument {k!r}" for k in parameters.get("required") or ()
              if isinstance(k, str) and k not in arguments]
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        key = str(key)
        bad = _non_json(value)
        if bad is not None:
            out[key], errs = value, [f"{key!r} must be a JSON value, got {bad}"]
        elif key in props:
            out[key], errs = validate(value, props[key], repr(key))
        elif isinstance(extra, Mapping):
            out[key], errs = validate(value, extra, repr(key))
        else:
            allowed = ", ".join(repr(p) for p in props) or "none"
            out[key], errs = value, [f"unexpected argument {describe_value(key, 30)} (allowed: {allowed})"]
        errors.extend(errs)
    for key, ps in props.items():
        if key not in out and isinstance(ps, Mapping) and "default" in ps:
            out[key] = ps["default"]
    return out, errors[:_MAX_ERRORS]
