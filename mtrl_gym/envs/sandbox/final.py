"""How a sandbox episode ends: the final-answer channel and the text the model sees about it.

A :class:`FinalAnswer` describes the two ways to answer, both on by default:

* a ``submit`` tool whose single argument ``answer`` has the schema the domain declares
  (``{}`` = any JSON value); a JSON-encoded string is decoded when the schema asks for an
  object, array, number or boolean, so ``submit(answer='{"order_id": "A"}')`` works;
* a ``<final_answer>...</final_answer>`` block; its text is decoded as JSON when it parses
  (``<final_answer>{"city": "Oslo"}</final_answer>``), otherwise kept as a string
  (``<final_answer>Oslo</final_answer>``), unless the schema asks for a string.

>>> fa = FinalAnswer(schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
>>> fa.decode('{"city": "Oslo"}', from_tag=True)
({'city': 'Oslo'}, [])
>>> fa.decode("Oslo", from_tag=True)[1]
["'answer' must be an object, got 'Oslo'"]
"""

from __future__ import annotations

import dataclasses
import json
import re
import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mtrl_gym.envs.sandbox.schema import validate
from mtrl_gym.parsing import MAX_PARSE_CHARS, ParseResult, ToolCallParser

__all__ = ["FinalAnswer", "CHARSET", "clean_text"]


def _charset() -> str:
    ranges = [(0x00A0, 0x0250), (0x0370, 0x0400), (0x0400, 0x0500), (0x2000, 0x2070), (0x20A0, 0x20C0),
              (0x2100, 0x2200), (0x2190, 0x2300), (0x2500, 0x2580)]
    extra = {chr(c) for lo, hi in ranges for c in range(lo, hi) if chr(c).isprintable() and not 0x2028 <= c <= 0x2029}
    base = "".join(c for c in string.printable if c not in "\r\x0b\x0c")
    return base + "".join(sorted(extra - set(base))) + "\ufffd"


#: Characters an observation may contain: printable ASCII, tab, newline, Latin-1 and Latin
#: Extended, Greek, Cyrillic, general punctuation, currency, letter-like symbols, arrows,
#: maths operators, box drawing, and U+FFFD. Other characters are replaced (see :func:`clean_text`).
CHARSET = _charset()
_CHARSET_SET = frozenset(CHARSET)
_OUTSIDE_RE = re.compile("[^" + "".join(re.escape(c) for c in CHARSET) + "]")


def clean_text(text: str) -> str:
    """``text`` restricted to :data:`CHARSET`: ``\\r\\n`` -> ``\\n``, other characters by their NFKD
    base letters when those are allowed (``ﬁ`` -> ``fi``), else ``?``."""
    if _OUTSIDE_RE.search(text) is None:  # the common case, at C speed
        return text
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    out = []
    for c in text:
        if c in _CHARSET_SET:
            out.append(c)
            continue
        base = unicodedata.normalize("NFKD", c)
        base = "".join(b for b in base if b in _CHARSET_SET and not unicodedata.combining(b))
        out.append(base if base else "?")
    return "".join(out)


@dataclass(frozen=True)
class FinalAnswer:
    """The final-answer channel of an environment (see the module docstring)."""

    tool: str | None = "submit"
    """Name of the submit tool, or None for no tool (then ``tag`` must be set)."""
    tag: str | None = "final_answer"
    """Tag name of the answer block, or None for no block (then ``tool`` must be set)."""
    schema: Mapping[str, Any] = field(default_factory=dict)
    """JSON schema of the answer; ``{}`` accepts any JSON value."""
    description: str = "Submit your final answer. This ends the episode; make every other call first."
    """Description of the submit tool."""
    answer_description: str = "Your final answer."
    """Description of the submit tool's ``answer`` parameter."""

    def __post_init__(self) -> None:
        if self.tool is None and self.tag is None:
            raise ValueError("FinalAnswer needs a submit `tool`, a `tag`, or both; got neither")
        if not isinstance(self.schema, Mapping):
            raise ValueError(f"FinalAnswer `schema` must be a JSON schema object, got {self.schema!r}")

    @property
    def tool_schema(self) -> dict[str, Any] | None:
        """The OpenAI function schema of the submit tool (None without one)."""
        if self.tool is None:
            return None
        answer = {**self.schema, "description": self.schema.get("description", self.answer_description)}
        return {"type": "function", "function": {
            "name": self.tool, "description": self.description,
            "parameters": {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}}}

    def parser_tags(self) -> dict[str, tuple[str, str]]:
        """``tags=`` for :class:`~mtrl_gym.parsing.ToolCallParser`."""
        return {self.tag: (self.tool or "__final_answer__", "answer")} if self.tag else {}

    def parse(self, parser: ToolCallParser, text: Any) -> ParseResult:
        """Parse ``text`` with ``parser`` (built with :meth:`parser_tags`), reading answer blocks as text.

        :mod:`mtrl_gym.parsing` ranks JSON above tags, so ``<final_answer>{"name": ...}
        </final_answer>`` would parse as a tool call. The blocks' contents are blanked (same
        length, so spans stay valid) before parsing and put back into the answer calls after.
        """
        if not self.tag or not isinstance(text, str) or "<" not in text:
            return parser(text)
        rx = re.compile(rf"<{re.escape(self.tag)}>(.*?)</{re.escape(self.tag)}>", re.DOTALL | re.IGNORECASE)
        spans = _tag_spans(self.tag, text[:MAX_PARSE_CHARS])
        if not spans:
            return parser(text)
        masked, pos = [], 0
        for start, end in spans:
            masked += [text[pos:start], " " * (end - start)]
            pos = end
        parsed = parser("".join(masked) + text[pos:])
        calls = []
        for c in parsed.calls:
            if c.format == "tag" and c.name == self.call_name:
                m = rx.search(text, c.span[0], c.span[1])
                c = dataclasses.replace(c, arguments={"answer": m.group(1).strip() if m else ""})
            calls.append(c)
        return dataclasses.replace(parsed, calls=tuple(calls))

    @property
    def call_name(self) -> str:
        """The tool name that final-answer calls carry after parsing."""
        return self.tool or "__final_answer__"

    def decode(self, raw: Any, *, from_tag: bool) -> tuple[Any, list[str]]:
        """``(answer, problems)`` from the ``answer`` argument of a final-answer call."""
        wanted = self.schema.get("type")
        wants_string = wanted == "string" or (isinstance(wanted, list) and wanted == ["string"])
        if isinstance(raw, str) and not wants_string:
            text = raw.strip()
            if text.startswith("```"):
                text = text.strip("`").removeprefix("json").strip()
            try:
                raw = json.loads(text) if text else raw
            except (ValueError, RecursionError):
                raw = text if from_tag else raw
        elif isinstance(raw, str) and from_tag:
            raw = raw.strip()
            if len(raw) >= 2 and raw[0] == raw[-1] == '"':
                try:
                    decoded = json.loads(raw)
                    raw = decoded if isinstance(decoded, str) else raw
                except ValueError:
                    pass
        return validate(raw, self.schema, "'answer'")

    def instructions(self) -> str:
        """The sentence of the system prompt that explains how to answer."""
        ways = []
        if self.tool:
            ways.append(f'call the {self.tool} tool: <tool_call>{{"name": "{self.tool}", "arguments": '
                        '{"answer": ...}}</tool_call>')
        if self.tag:
            ways.append(f"write <{self.tag}>...</{self.tag}> with your answer inside")
        return "When you have the answer, " + " or ".join(ways) + ". This ends the episode."


def _tag_spans(tag: str, text: str) -> list[tuple[int, int]]:
    """Content spans of ``<tag>...</tag>`` blocks (case-insensitive), as the lazy regex
    ``<tag>(.*?)</tag>`` would find them, in linear time: the regex rescans to the end from
    every unclosed opening (``"<final_answer>" * 7000`` took 1 s)."""
    spans, start = [], None
    for m in re.finditer(rf"<(/?){re.escape(tag)}>", text, re.IGNORECASE):
        if start is None:
            if not m.group(1):
                start = m.end()
        elif m.group(1):
            spans.append((start, m.start()))
            start = None
    return spans
