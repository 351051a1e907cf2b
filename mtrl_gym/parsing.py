"""Tool-call parsing from raw model text — one place, shared by every environment.

Accepted formats, in order of precedence (docs/architecture.md):

1. Hermes / Qwen tags: ``<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>``
   (the JSON may also be a list of calls, use the OpenAI shape, or lack the closing tag
   at the very end of the text); a message that is exactly one such block is read as that
   block alone;
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

Cost bound. Model text is hostile input, so the work per message is linear in its length
(at most :data:`MAX_PARSE_CHARS` characters are read) with small constants, whatever it
contains: every scan of the text (``<think>`` and ``<tool_call>`` blocks, env tags,
``{`` and ``name(`` candidates) moves forward only; spans already taken are looked up by
bisection; bracket matching for call syntax is memoised, so nested or repeated openers
are scanned once; and the two decoders that can do more than linear work per candidate
share fixed budgets per message: :data:`JSON_SCAN_BUDGET` characters of failed JSON
decoding and :data:`LITERAL_BUDGET` characters of Python-literal parsing (about 1 ms per
1,000 characters). Candidates past a budget are not tried. On the development CPU the
worst message found (100,000 characters) parses in under 10 ms.

The common shapes, one Hermes block or one bare JSON object with a single string
argument, take a fast path (one regular expression) that returns exactly the
:class:`ParseResult` of the general parser (a differential test holds them equal).

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
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ToolCall", "ParseResult", "ToolCallParser", "parse_tool_calls", "find_tag_blocks", "format_tool_call",
    "FORMATS", "MAX_PARSE_CHARS", "MAX_CALLS", "JSON_SCAN_BUDGET", "LITERAL_BUDGET",
]

#: Names of the formats, in order of precedence; ``ToolCall.format`` is one of them.
FORMATS = ("hermes", "json", "call", "tag", "loose")

#: Only this many characters of a message are parsed (longer text is cut, and flagged).
MAX_PARSE_CHARS = 50_000

#: Characters of failed JSON decoding allowed per message (from each ``{`` tried to where
#: decoding stopped); once spent, no further bare-JSON candidates are tried.
JSON_SCAN_BUDGET = 4 * MAX_PARSE_CHARS

#: Characters of Python-literal parsing (``ast``) allowed per message, shared by
#: single-quoted JSON fallbacks and call-syntax arguments; once spent, those fallbacks
#: are skipped (the JSON route still works).
LITERAL_BUDGET = 8_000

#: At most this many calls are returned, and this many ``<tool_call>`` blocks decoded, per
#: message (the rest are dropped, and an error says so).
MAX_CALLS = 256

_MAX_JSON_ATTEMPTS = 256  # bounds the work on text full of "{" characters
_MAX_CALL_ATTEMPTS = 256
_MAX_ARG_SOURCE = 4_000

_THINK_RE = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_SINGLE_HERMES_RE = re.compile(r"\s*<tool_call>(.*)</tool_call>\s*", re.DOTALL | re.IGNORECASE)
_CALL_RE = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_ID_RE = re.compile(r"[^A-Za-z0-9_\-]")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACKET_RE = re.compile(r"[\"'\\()\[\]{}]")

# The fast path: {"name": "<identifier>", "arguments": {"<key>": "<value>"}} with JSON
# whitespace, strings without escapes, control characters or "<" (so no tag, think block
# or second call can hide inside), as one Hermes block or as the whole message.
_JWS = r"[ \t\n\r]*"
_JSTR = r'"([^"\\\x00-\x1f<]*)"'
_CALL_JSON = (r'\{' + _JWS + r'"name"' + _JWS + ":" + _JWS + r'"([A-Za-z_][A-Za-z0-9_]*)"' + _JWS + "," + _JWS
              + r'"arguments"' + _JWS + ":" + _JWS + r"\{" + _JWS + _JSTR + _JWS + ":" + _JWS + _JSTR + _JWS
              + r"\}" + _JWS + r"\}")
_FAST_HERMES_RE = re.compile(r"\s*(?i:<tool_call>)\s*" + _CALL_JSON + r"\s*(?i:</tool_call>)\s*")
_FAST_JSON_RE = re.compile(r"\s*(" + _CALL_JSON + r")\s*")

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
    schema tables or regular expressions. ``fast_path=False`` runs the general parser on
    every message (the fast path returns the same results; the switch exists so tests
    can hold the two equal).
    """

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tags: Mapping[str, tuple[str, str]] | None = None,
        loose: LooseFallback | None = None,
        *,
        fast_path: bool = True,
    ):
        self.schemas = _schema_params(tools)
        # With schemas, call syntax looks only for their names: the same matches as
        # _CALL_RE filtered by name (an identifier match is maximal), without visiting the rest.
        names = sorted(n for n in self.schemas or () if _IDENTIFIER_RE.fullmatch(n))
        self._call_re = _CALL_RE if self.schemas is None else re.compile(
            r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")\s*\(" if names else r"(?!)")
        self.tags = [(_tag_patterns(tag), tool, arg) for tag, (tool, arg) in (tags or {}).items()]
        self.loose = loose
        self.fast_path = bool(fast_path)

    def __call__(self, text: Any) -> ParseResult:
        if not isinstance(text, str):
            return ParseResult(errors=(f"expected text, got {type(text).__name__}",))
        truncated = len(text) > MAX_PARSE_CHARS
        if truncated:
            text = text[:MAX_PARSE_CHARS]
        if self.fast_path:
            m = _FAST_HERMES_RE.fullmatch(text)
            if m is not None:
                return ParseResult((ToolCall(m.group(1), {m.group(2): m.group(3)}, "call_0", "hermes",
                                             (0, len(text))),), (), truncated)
            m = _FAST_JSON_RE.fullmatch(text)
            if m is not None:
                return ParseResult((ToolCall(m.group(2), {m.group(3): m.group(4)}, "call_0", "json",
                                             m.span(1)),), (), truncated)
        try:
            return self._parse(text, truncated)
        except (RecursionError, MemoryError, ValueError, TypeError, OverflowError) as e:  # pragma: no cover
            # Defence in depth: the parsers below are written not to raise, but a parser
            # must never take an episode down.
            return ParseResult(errors=(f"could not parse the message ({type(e).__name__})",), truncated=truncated)

    def _parse(self, text: str, truncated: bool) -> ParseResult:
        single = _SINGLE_HERMES_RE.fullmatch(text)
        if single is not None and "<tool_call>" not in single.group(1).lower():
            # The message is exactly one <tool_call> block, so no other format can match anywhere.
            calls, err = _calls_from_json_text(single.group(1).strip(), _Budget())
            if calls:
                found = [(0, len(text), "hermes", a, n, cid, e) for n, a, cid, e in calls]
                return ParseResult(calls=_to_calls(found), truncated=truncated)
        budget = _Budget()  # the block above, if tried, read at most one body: a fresh budget
        has_angle = "<" in text
        blocked = _Spans()
        if has_angle:
            for m in _THINK_RE.finditer(text):
                blocked.add(*m.span())
        found: list[tuple] = []  # (start, end, format, arguments, name, model id, error)
        errors: list[str] = []

        if has_angle:
            unread = 0
            for start, end, body in _hermes_blocks(text):
                if blocked.overlaps(start, end):
                    continue
                blocked.add(start, end)
                if budget.blocks <= 0:  # past the cap the block is still taken, but not decoded
                    unread += 1
                    continue
                budget.blocks -= 1
                calls, err = _calls_from_json_text(body, budget)
                if err:
                    errors.append(f"<tool_call> at character {start}: {err}")
                for n, a, cid, e in calls:
                    found.append((start, end, "hermes", a, n, cid, e))
            if unread:
                errors.append(f"{unread} further <tool_call> blocks were not read (at most {MAX_CALLS} per message)")

        if "{" in text:
            for start, end, value in _json_objects(text, blocked, budget):
                calls = _calls_from_value(value, budget)
                found.extend((start, end, "json", a, n, cid, e) for n, a, cid, e in calls)
                if calls:
                    blocked.add(start, end)

        if "(" in text:
            for start, end, name, args, err in _call_syntax(text, blocked, self._call_re, self.schemas, budget):
                found.append((start, end, "call", args, name, None, err))
                blocked.add(start, end)

        if has_angle:
            for (open_re, close_re), tool_name, arg_name in self.tags:
                for start, end, body in _tag_blocks(text, open_re, close_re):
                    if not blocked.overlaps(start, end):
                        found.append((start, end, "tag", {arg_name: body.strip()}, tool_name, None, None))

        if not found and self.loose is not None:
            stripped = _THINK_RE.sub(" ", text) if has_angle else text
            for name, args in self.loose(stripped) or ():
                found.append((len(text), len(text), "loose", dict(args), name, None, None))

        found.sort(key=lambda f: f[0])  # stable: calls of one Hermes block keep their order
        if len(found) > MAX_CALLS:
            errors.append(f"only the first {MAX_CALLS} of {len(found)} tool calls were read")
            del found[MAX_CALLS:]
        return ParseResult(calls=_to_calls(found), errors=tuple(errors), truncated=truncated)


def format_tool_call(name: str, arguments: Any) -> str:
    """The canonical Hermes text of one call, the format every env parses first (the text a
    well-behaved model writes; scripted policies and the test corpus write it too).

    ``arguments`` is written as given (a mapping as its JSON object; any other value as
    JSON too, which the env then reports as bad arguments).

    >>> format_tool_call("guess_word", {"guess": "crane"})
    '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>'
    """
    if isinstance(arguments, Mapping) and not isinstance(arguments, dict):
        arguments = dict(arguments)
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


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


class _Budget:
    """What is left of a message's decoding budgets (see the module docstring)."""

    __slots__ = ("json", "literal", "blocks")

    def __init__(self) -> None:
        self.json = JSON_SCAN_BUDGET
        self.literal = LITERAL_BUDGET
        self.blocks = MAX_CALLS  # <tool_call> blocks decoded


class _Spans:
    """Disjoint ``[start, end)`` spans kept sorted: overlap and containment by bisection.

    Every span the parser takes is checked against the taken ones first, so they never
    overlap each other; sorted by start, their ends are then sorted too, and the last span
    starting before ``end`` is the only one that can reach past ``start``.
    """

    __slots__ = ("starts", "ends")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        i = bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)

    def overlaps(self, start: int, end: int) -> bool:
        i = bisect_left(self.starts, end) - 1
        return i >= 0 and self.ends[i] > start

    def end_of_span_at(self, pos: int) -> int | None:
        """End of the span containing ``pos``, or None."""
        i = bisect_right(self.starts, pos) - 1
        if i >= 0 and self.ends[i] > pos:
            return self.ends[i]
        return None


def _hermes_blocks(text: str):
    """Yield ``(start, end, body)`` of each ``<tool_call>...</tool_call>`` (the last may be unclosed).

    Linear: the next closing and opening tags are searched once and reused while they lie ahead.
    """
    lower = text.lower()
    pos = 0
    close = nxt = -2  # -2: not searched yet; -1: none left
    while True:
        start = lower.find("<tool_call>", pos)
        if start < 0:
            return
        body_start = start + len("<tool_call>")
        if close == -2 or 0 <= close < body_start:
            close = lower.find("</tool_call>", body_start)
        if nxt == -2 or 0 <= nxt < body_start:
            nxt = lower.find("<tool_call>", body_start)
        if close < 0 or (0 <= nxt < close):  # unclosed: runs to the next opening tag or the end
            end = nxt if nxt >= 0 else len(text)
            yield start, end, text[body_start:end].strip()
            pos = end
        else:
            yield start, close + len("</tool_call>"), text[body_start:close].strip()
            pos = close + len("</tool_call>")


def _tag_patterns(tag: str) -> tuple[re.Pattern, re.Pattern]:
    return (re.compile(rf"<{re.escape(tag)}>", re.IGNORECASE), re.compile(rf"</{re.escape(tag)}>", re.IGNORECASE))


def _tag_blocks(text: str, open_re: re.Pattern, close_re: re.Pattern):
    """Yield ``(start, end, body)`` of each ``<tag>body</tag>``, left to right, without overlaps.

    The same blocks as ``re.finditer(r"<tag>(.*?)</tag>", text, re.DOTALL | re.IGNORECASE)``
    in linear time: that pattern retries every unclosed opening tag up to the end of the text.
    """
    pos = 0
    while True:
        opening = open_re.search(text, pos)
        if opening is None:
            return
        closing = close_re.search(text, opening.end())
        if closing is None:  # no closing tag after this one, hence none after any later one
            return
        yield opening.start(), closing.end(), text[opening.end():closing.start()]
        pos = closing.end()


def find_tag_blocks(text: str, tag: str) -> list[tuple[int, int, str]]:
    """``(start, end, body)`` of every ``<tag>body</tag>`` in ``text`` (case-insensitive tag), in linear time.

    >>> find_tag_blocks("a <answer>42</answer> b <ANSWER> 7 </answer>", "answer")
    [(2, 21, '42'), (24, 44, ' 7 ')]
    """
    open_re, close_re = _tag_patterns(tag)
    return list(_tag_blocks(text, open_re, close_re))


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


def _literal_eval(s: str, budget: _Budget) -> Any:
    """``ast.literal_eval(s)`` within the message's literal budget; raises ValueError when spent."""
    if len(s) > budget.literal:
        raise ValueError("literal budget spent")
    budget.literal -= len(s)
    with warnings.catch_warnings():  # model text: "\d" in a string must not warn
        warnings.simplefilter("ignore")
        return ast.literal_eval(s)


def _loads_lenient(s: str, budget: _Budget) -> tuple[Any, str | None]:
    """JSON, then a Python literal (single quotes, True/None) as a fallback."""
    try:
        return _loads_json(s), None
    except (ValueError, RecursionError) as e:
        json_err = getattr(e, "msg", type(e).__name__)
    if len(s) <= _MAX_ARG_SOURCE:
        try:
            return _literal_eval(s, budget), None
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return None, f"invalid JSON ({json_err})"


def _calls_from_json_text(body: str, budget: _Budget) -> tuple[list, str | None]:
    if not body:
        return [], "empty tool call"
    if "`" in body:
        body = body.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    value, err = _loads_lenient(body, budget)
    if err is not None:
        value = _first_json_value(body)
        if value is None:
            return [], err
    calls = _calls_from_value(value, budget)
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
    try:
        return _DECODER.raw_decode(body, start)[0]
    except RecursionError:  # the nesting is in the body itself: no suffix changes that
        return None
    except ValueError as e:
        # A suffix can only help when decoding reached the end of the body (or an open
        # string ran into it): an error earlier on sees the same characters with a suffix,
        # and none of '"' and '}' completes a literal or a number.
        if getattr(e, "pos", 0) < len(body) and not getattr(e, "msg", "").startswith("Unterminated string"):
            return None
    for suffix in ("}", "}}", '"}', '"}}'):
        try:
            return _DECODER.raw_decode(body + suffix, start)[0]
        except (ValueError, RecursionError):
            continue
    return None


def _calls_from_value(value: Any, budget: _Budget) -> list[tuple[str, dict, Any, str | None]]:
    """Tool calls described by a decoded JSON value (a call, a list, or {"tool_calls": [...]})."""
    if isinstance(value, list):
        out = []
        for v in value[:64]:
            out.extend(_calls_from_value(v, budget))
        return out
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("tool_calls"), list):
        return _calls_from_value(value["tool_calls"], budget)
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
        raw_args, err = _loads_lenient(raw_args, budget) if raw_args.strip() else ({}, None)
        if err is not None:
            return [(name.strip(), {}, cid, f"arguments are not a JSON object ({err})")]
    if not isinstance(raw_args, dict):
        return [(name.strip(), {}, cid, f"arguments must be a JSON object, got {type(raw_args).__name__}")]
    return [(name.strip(), {str(k): v for k, v in raw_args.items()}, cid, None)]


def _json_objects(text: str, blocked: _Spans, budget: _Budget):
    """Yield ``(start, end, value)`` for JSON objects found at '{' positions outside ``blocked``.

    A failed attempt costs the characters the decoder read (to the error position, or to
    the end of the text for a nesting too deep to decode); after :data:`JSON_SCAN_BUDGET`
    of them no further '{' is tried.
    """
    pos, attempts = 0, 0
    while attempts < _MAX_JSON_ATTEMPTS and budget.json > 0:
        start = text.find("{", pos)
        if start < 0:
            return
        inside = blocked.end_of_span_at(start)
        if inside is not None:  # skip a whole already-parsed block at once
            pos = inside
            continue
        attempts += 1
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError as e:
            budget.json -= max(getattr(e, "pos", len(text)) - start, 1)
            pos = start + 1
            continue
        except RecursionError:
            budget.json -= len(text) - start
            pos = start + 1
            continue
        if blocked.overlaps(start, end):
            pos = start + 1
            continue
        yield start, end, value
        pos = end


# ---------------------------------------------------------------------------- call syntax


class _Brackets:
    """Bracket matching for call syntax, memoised over one text.

    ``closer(p)`` scans from the opening bracket at ``p`` (outside any quote) as the
    original character loop did: quotes hide brackets, a backslash in a quote hides the
    next character, and the first closing bracket of any kind at depth zero ends the scan.
    Every opening bracket met outside quotes is scanned in the same pass (a stack) and its
    result kept, so a later scan that meets it jumps past its span: nested and repeated
    openers (``f(f(f(...``) cost one pass instead of one pass each.
    """

    __slots__ = ("text", "memo")

    def __init__(self, text: str):
        self.text = text
        self.memo: dict[int, int] = {}  # opening position -> its terminating bracket, or -1

    def closer(self, p: int) -> int:
        """Index of the bracket that ends the scan from ``p``, or -1 if the text ends first."""
        memo = self.memo
        r = memo.get(p)
        if r is not None:
            return r
        text, search = self.text, _BRACKET_RE.search
        stack = [p]
        quote = ""
        i = p + 1
        while True:
            m = search(text, i)
            if m is None:
                break
            i = m.start()
            ch = text[i]
            if quote:
                if ch == "\\":
                    i += 2
                    continue
                if ch == quote:
                    quote = ""
            elif ch == '"' or ch == "'":
                quote = ch
            elif ch in "([{":
                r = memo.get(i)
                if r is None:
                    stack.append(i)
                elif r < 0:  # that opener runs to the end of the text, so does every one below it
                    break
                else:
                    i = r + 1
                    continue
            elif ch != "\\":  # a closing bracket ends the innermost open scan
                memo[stack.pop()] = i
                if not stack:
                    return i
            i += 1
        for s in stack:
            memo[s] = -1
        return -1

    def matching_paren(self, open_pos: int) -> int:
        """Index just past the ')' closing the '(' at ``open_pos`` within :data:`_MAX_ARG_SOURCE`, or -1."""
        r = self.closer(open_pos)
        if r < 0 or r >= open_pos + _MAX_ARG_SOURCE or self.text[r] != ")":
            return -1
        return r + 1


_DEFINITION_RE = re.compile(r"(?:^|[^\w.])(?:def|class)\s+$")


def _is_definition(text: str, start: int) -> bool:
    """Whether the name at ``start`` follows ``def`` / ``class`` (code that defines the
    tool, ``def guess_word(guess):``, is not a call); reads at most 32 characters back."""
    low = max(0, start - 32)
    m = _DEFINITION_RE.search(text[low:start])
    return m is not None and (m.start() > 0 or low == 0 or not (text[low - 1].isalnum() or text[low - 1] in "_."))


def _call_syntax(text, blocked: _Spans, call_re: re.Pattern, schemas, budget: _Budget):
    attempts = 0
    brackets = _Brackets(text)
    for m in call_re.finditer(text):
        name = m.group(1)
        if schemas is not None and name not in schemas:
            continue
        if _is_definition(text, m.start()):
            continue
        attempts += 1
        if attempts > _MAX_CALL_ATTEMPTS:
            return
        if blocked.overlaps(*m.span()):
            continue
        end = brackets.matching_paren(m.end() - 1)
        if end < 0 or blocked.overlaps(m.start(), end):
            continue
        parsed = _literal_call(text[m.start():end], schemas.get(name) if schemas else None, schemas is not None,
                               budget)
        if parsed is not None:
            args, err = parsed
            yield m.start(), end, name, args, err


def _literal_call(src: str, params: list[str] | None, names_as_strings: bool, budget: _Budget):
    """Arguments of a call expression with literal arguments, or None if it is not one."""
    if len(src) > budget.literal:
        return None
    budget.literal -= len(src)
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
