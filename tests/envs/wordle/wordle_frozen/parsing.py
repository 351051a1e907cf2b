"""Tool-call parsing from raw model text — one place, shared by every environment.

Accepted formats, in order of precedence (docs/architecture.md):

1. Hermes / Qwen tags: ``<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>``
   (the JSON may also be a list of calls, use the OpenAI shape, or lack the closing tag
   at the very end of the text);
2. bare JSON objects: ``{"name": ..., "arguments": {...}}``, ``{"name": ..., "parameters": {...}}``,
   the OpenAI shape ``{"type": "function", "function": {"name": ..., "arguments": "<json string>"}}``
   and ``{"tool_calls": [...]}``, also inside markdown code fences;
3. call syntax: ``guess_word("crane")`` or ``guess_word(guess="crane")`` (literal arguments;
   with ``tools`` given, positional arguments are mapped to the schema's parameters in
   order and a bare identifier argument such as ``guess_word(crane)`` counts as a string);
4. env-specific tags, e.g. ``<guess>crane</guess>`` (the env passes ``tags``);
5. a loose text fallback supplied by the env (e.g. "My guess is CRANE"), tried only when
   nothing above matched; the result is then flagged ``loose``.

Several calls in one message are all returned, in the order they appear in the text.
Text inside ``<think>...</think>`` is ignored. :func:`parse_tool_calls` never raises on
any string: malformed calls are reported in ``errors`` (and a call whose arguments could
not be decoded carries ``error``), so the env can explain the problem to the model.

>>> r = parse_tool_calls('<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>')
>>> r.calls[0].name, r.calls[0].arguments, r.loose
('guess_word', {'guess': 'crane'}, False)
>>> [c.arguments for c in parse_tool_calls('guess_word("slate") then guess_word(guess="crane")').calls]
[{'arg0': 'slate'}, {'guess': 'crane'}]
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ToolCall", "ParseResult", "ToolCallParser", "parse_tool_calls", "FORMATS", "MAX_PARSE_CHARS"]

#: Names of the formats, in order of precedence; ``ToolCall.format`` is one of them.
FORMATS = ("hermes", "json", "call", "tag", "loose")

#: Only this many characters of a message are parsed (longer text is cut, and flagged).
MAX_PARSE_CHARS = 50_000

_MAX_JSON_ATTEMPTS = 256  # bounds the work on text full of "{" characters
_MAX_CALL_ATTEMPTS = 256
_MAX_ARG_SOURCE = 4_000

_THINK_RE = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_SINGLE_HERMES_RE = re.compile(r"\s*<tool_call>(.*)</tool_call>\s*", re.DOTALL | re.IGNORECASE)
_CALL_RE = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_ID_RE = re.compile(r"[^A-Za-z0-9_\-]")

LooseFallback = Callable[[str], Sequence[tuple[str, dict[str, Any]]]]


@dataclass(frozen=True, init=False)
class ToolCall:
    """One tool call found in model text."""

    name: str
    arguments: dict[str, Any]
    id: str
    """``tool_call_id`` for the tool result; from the model's JSON if it gave one, else ``call_<k>``."""
    format: str
    """How it was written: one of :data:`FORMATS`."""
    span: tuple[int, int] = (0, 0)
    """``[start, end)`` character positions in the parsed text."""
    error: str | None = None
    """Set when the call was recognised but its arguments could not be decoded."""

    def __init__(self, name: str, arguments: dict[str, Any], id: str, format: str,
                 span: tuple[int, int] = (0, 0), error: str | None = None):
        # One __dict__ update instead of the six object.__setattr__ calls of a generated
        # frozen __init__: envs parse every step. Instances stay immutable.
        self.__dict__.update(name=name, arguments=arguments, id=id, format=format, span=span, error=error)


@dataclass(frozen=True, init=False)
class ParseResult:
    """All tool calls in a message, in text order, plus what went wrong."""

    calls: tuple[ToolCall, ...] = ()
    errors: tuple[str, ...] = ()
    truncated: bool = False
    """The text was longer than :data:`MAX_PARSE_CHARS`; only its start was parsed."""

    def __init__(self, calls: tuple[ToolCall, ...] = (), errors: tuple[str, ...] = (), truncated: bool = False):
        self.__dict__.update(calls=calls, errors=errors, truncated=truncated)  # see ToolCall.__init__

    @property
    def loose(self) -> bool:
        """True when the only calls found came from the env's loose text fallback."""
        return bool(self.calls) and all(c.format == "loose" for c in self.calls)


class ToolCallParser:
    """A reusable parser for one env's tools, tags and loose fallback (see :func:`parse_tool_calls`).

    Environments build one at construction time so that per-step parsing does not rebuild
    schema tables or regular expressions.
    """

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tags: Mapping[str, tuple[str, str]] | None = None,
        loose: LooseFallback | None = None,
    ):
        self.schemas = _schema_params(tools)
        self.tags = [
            (re.compile(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", re.DOTALL | re.IGNORECASE), tool, arg)
            for tag, (tool, arg) in (tags or {}).items()
        ]
        self.loose = loose

    def __call__(self, text: Any) -> ParseResult:
        if not isinstance(text, str):
            return ParseResult(errors=(f"expected text, got {type(text).__name__}",))
        truncated = len(text) > MAX_PARSE_CHARS
        text = text[:MAX_PARSE_CHARS]
        try:
            return self._parse(text, truncated)
        except (RecursionError, MemoryError, ValueError, TypeError, OverflowError) as e:  # pragma: no cover
            # Defence in depth: the parsers below are written not to raise, but a parser
            # must never take an episode down.
            return ParseResult(errors=(f"could not parse the message ({type(e).__name__})",), truncated=truncated)

    def _parse(self, text: str, truncated: bool) -> ParseResult:
        single = _SINGLE_HERMES_RE.fullmatch(text)
        if single is not None and "<tool_call>" not in single.group(1).lower():
            # Fast path for the common case: the message is exactly one <tool_call> block,
            # so no other format can match anywhere.
            calls, err = _calls_from_json_text(single.group(1).strip())
            if calls:
                found = [(0, len(text), "hermes", a, n, cid, e) for n, a, cid, e in calls]
                return ParseResult(calls=_to_calls(found), truncated=truncated)
        has_angle = "<" in text
        blocked = [m.span() for m in _THINK_RE.finditer(text)] if has_angle else []
        found: list[tuple] = []  # (start, end, format, arguments, name, model id, error)
        errors: list[str] = []

        if has_angle:
            for start, end, body in _hermes_blocks(text):
                if _overlaps((start, end), blocked):
                    continue
                calls, err = _calls_from_json_text(body)
                if err:
                    errors.append(f"<tool_call> at character {start}: {err}")
                found.extend((start, end, "hermes", a, n, cid, e) for n, a, cid, e in calls)
                blocked.append((start, end))

        if "{" in text:
            for start, end, value in _json_objects(text, blocked):
                calls = _calls_from_value(value)
                found.extend((start, end, "json", a, n, cid, e) for n, a, cid, e in calls)
                if calls:
                    blocked.append((start, end))

        if "(" in text:
            for start, end, name, args, err in _call_syntax(text, blocked, self.schemas):
                found.append((start, end, "call", args, name, None, err))
                blocked.append((start, end))

        if has_angle:
            for pattern, tool_name, arg_name in self.tags:
                for m in pattern.finditer(text):
                    if not _overlaps(m.span(), blocked):
                        found.append((m.start(), m.end(), "tag", {arg_name: m.group(1).strip()}, tool_name, None, None))

        if not found and self.loose is not None:
            stripped = _THINK_RE.sub(" ", text) if has_angle else text
            for name, args in self.loose(stripped) or ():
                found.append((len(text), len(text), "loose", dict(args), name, None, None))

        found.sort(key=lambda f: f[0])  # stable: calls of one Hermes block keep their order
        return ParseResult(calls=_to_calls(found), errors=tuple(errors), truncated=truncated)


def _to_calls(found: list[tuple]) -> tuple[ToolCall, ...]:
    """ToolCalls from ``(start, end, format, arguments, name, model id, error)`` in text order.

    The model's own call ids are kept when usable and unique; others become ``call_<k>``.
    """
    calls = []
    used_ids: set[str] = set()
    for start, end, fmt, args, name, cid, arg_err in found:
        call_id = _clean_id(cid) if cid else ""
        if not call_id or call_id in used_ids:
            call_id = f"call_{len(calls)}"
        used_ids.add(call_id)
        calls.append(ToolCall(name, args, call_id, fmt, (start, end), arg_err))
    return tuple(calls)


def parse_tool_calls(
    text: Any,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tags: Mapping[str, tuple[str, str]] | None = None,
    loose: LooseFallback | None = None,
) -> ParseResult:
    """Find every tool call in ``text``.

    Args:
        text: raw assistant text. Non-strings are treated as empty text (never raises).
        tools: OpenAI-style function schemas. When given, call syntax is recognised only
            for these names and positional arguments map to their parameters.
        tags: env-specific tags, ``{"guess": ("guess_word", "guess")}`` turns
            ``<guess>crane</guess>`` into ``guess_word(guess="crane")``.
        loose: fallback ``text -> [(name, arguments), ...]`` tried only if nothing else matched.
    """
    return ToolCallParser(tools, tags, loose)(text)


def _hermes_blocks(text: str):
    """Yield ``(start, end, body)`` of each ``<tool_call>...</tool_call>`` (the last may be unclosed)."""
    lower = text.lower()
    pos = 0
    while True:
        start = lower.find("<tool_call>", pos)
        if start < 0:
            return
        body_start = start + len("<tool_call>")
        close = lower.find("</tool_call>", body_start)
        nxt = lower.find("<tool_call>", body_start)
        if close < 0 or (0 <= nxt < close):  # unclosed: runs to the next opening tag or the end
            end = nxt if nxt >= 0 else len(text)
            yield start, end, text[body_start:end].strip()
            pos = end
        else:
            yield start, close + len("</tool_call>"), text[body_start:close].strip()
            pos = close + len("</tool_call>")


def _overlaps(span: tuple[int, int], blocked: list[tuple[int, int]]) -> bool:
    s, e = span
    return any(s < be and bs < e for bs, be in blocked)


def _clean_id(cid: Any) -> str:
    return _ID_RE.sub("", str(cid))[:64]


def _schema_params(tools) -> dict[str, list[str]] | None:
    """Map tool name -> ordered parameter names, from OpenAI-style schemas."""
    if tools is None:
        return None
    out: dict[str, list[str]] = {}
    for t in tools:
        if not isinstance(t, Mapping):
            continue
        fn = t.get("function", t)
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            params = fn.get("parameters") or {}
            props = params.get("properties") if isinstance(params, Mapping) else None
            out[fn["name"]] = list(props) if isinstance(props, Mapping) else []
    return out


# ---------------------------------------------------------------------------------- JSON


_DECODER = json.JSONDecoder()
_JSON_SPACE = " \t\n\r"


def _loads_json(s: str) -> Any:
    """``json.loads(s)``, minus its two whitespace regex passes (a hot path: every step)."""
    s = s.strip(_JSON_SPACE)
    value, end = _DECODER.raw_decode(s)
    if end != len(s):
        raise json.JSONDecodeError("Extra data", s, end)
    return value


def _loads_lenient(s: str) -> tuple[Any, str | None]:
    """JSON, then a Python literal (single quotes, True/None) as a fallback."""
    try:
        return _loads_json(s), None
    except (ValueError, RecursionError) as e:
        json_err = getattr(e, "msg", type(e).__name__)
    if len(s) <= _MAX_ARG_SOURCE:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return ast.literal_eval(s), None
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return None, f"invalid JSON ({json_err})"


def _calls_from_json_text(body: str) -> tuple[list, str | None]:
    if not body:
        return [], "empty tool call"
    if "`" in body:
        body = body.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    value, err = _loads_lenient(body)
    if err is not None:
        value = _first_json_value(body)
        if value is None:
            return [], err
    calls = _calls_from_value(value)
    if not calls:
        return [], 'expected {"name": ..., "arguments": {...}}'
    return calls, None


def _first_json_value(body: str) -> Any:
    """The first JSON object in a chatty or cut-off body, or None.

    A body cut off at the end of a message is closed with up to two braces, after closing
    an open string if needed (``{"name": "f", "arguments": {"x": "abc`` parses).
    """
    start = body.find("{")
    if start < 0:
        return None
    decoder = json.JSONDecoder()
    for suffix in ("", "}", "}}", '"}', '"}}'):
        try:
            return decoder.raw_decode(body + suffix, start)[0]
        except (ValueError, RecursionError):
            continue
    return None


def _calls_from_value(value: Any) -> list[tuple[str, dict, Any, str | None]]:
    """Tool calls described by a decoded JSON value (a call, a list, or {"tool_calls": [...]})."""
    if isinstance(value, list):
        out = []
        for v in value[:64]:
            out.extend(_calls_from_value(v))
        return out
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("tool_calls"), list):
        return _calls_from_value(value["tool_calls"])
    cid = value.get("id")
    fn = value.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        value = fn
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return []
    raw_args = value.get("arguments", value.get("parameters", {}))
    if raw_args is None:
        raw_args = {}
    if isinstance(raw_args, str):
        raw_args, err = _loads_lenient(raw_args) if raw_args.strip() else ({}, None)
        if err is not None:
            return [(name.strip(), {}, cid, f"arguments are not a JSON object ({err})")]
    if not isinstance(raw_args, dict):
        return [(name.strip(), {}, cid, f"arguments must be a JSON object, got {type(raw_args).__name__}")]
    return [(name.strip(), {str(k): v for k, v in raw_args.items()}, cid, None)]


def _json_objects(text: str, blocked: list[tuple[int, int]]):
    """Yield ``(start, end, value)`` for JSON objects found at '{' positions outside ``blocked``."""
    decoder = json.JSONDecoder()
    pos, attempts = 0, 0
    while attempts < _MAX_JSON_ATTEMPTS:
        start = text.find("{", pos)
        if start < 0:
            return
        inside = next((be for bs, be in blocked if bs <= start < be), None)
        if inside is not None:  # skip a whole already-parsed block at once
            pos = inside
            continue
        attempts += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            pos = start + 1
            continue
        if _overlaps((start, end), blocked):
            pos = start + 1
            continue
        yield start, end, value
        pos = end


# ---------------------------------------------------------------------------- call syntax


def _matching_paren(text: str, open_pos: int) -> int:
    """Index just past the ')' closing the '(' at ``open_pos``, or -1."""
    depth, quote, i, n = 0, "", open_pos, min(len(text), open_pos + _MAX_ARG_SOURCE)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1 if ch == ")" else -1
        i += 1
    return -1


def _call_syntax(text, blocked, schemas):
    attempts = 0
    for m in _CALL_RE.finditer(text):
        name = m.group(1)
        if schemas is not None and name not in schemas:
            continue
        attempts += 1
        if attempts > _MAX_CALL_ATTEMPTS:
            return
        if _overlaps(m.span(), blocked):
            continue
        end = _matching_paren(text, m.end() - 1)
        if end < 0 or _overlaps((m.start(), end), blocked):
            continue
        parsed = _literal_call(text[m.start():end], schemas.get(name) if schemas else None, schemas is not None)
        if parsed is not None:
            args, err = parsed
            yield m.start(), end, name, args, err


def _literal_call(src: str, params: list[str] | None, names_as_strings: bool):
    """Arguments of a call expression with literal arguments, or None if it is not one."""
    try:
        with warnings.catch_warnings():  # model text: "\d" in a string must not warn
            warnings.simplefilter("ignore")
            node = ast.parse(src, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return None

    def value(arg):
        if names_as_strings and isinstance(arg, ast.Name):
            return arg.id
        return ast.literal_eval(arg)

    try:
        positional = [value(a) for a in node.args]
        keywords = {kw.arg: value(kw.value) for kw in node.keywords if kw.arg is not None}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    args: dict[str, Any] = {}
    err = None
    for i, v in enumerate(positional):
        if params is not None and i < len(params):
            args[params[i]] = v
        elif params is not None:
            err = f"too many positional arguments (the tool takes {len(params)})"
        else:
            args[f"arg{i}"] = v
    for k, v in keywords.items():
        if k in args:
            err = f"argument {k!r} given twice"
        args[k] = v
    return args, err
