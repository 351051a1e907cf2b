"""Cassettes: recorded tool responses in a documented JSONL file, served back deterministically.

File format (version 1; the full specification is in ``docs/sandbox.md``). The first line
is a header, every further non-blank line one recorded interaction::

    {"format": "mtrl_gym.cassette", "version": 1, "redaction": {...}, "tools": [...], "metadata": {}}
    {"tool": "get_weather", "arguments": {"city": "Oslo"}, "response": {"temp_max_c": 17.5}, "latency_ms": 12.4}
    {"tool": "get_order", "arguments": {"order_id": "X"}, "response": null, "error": "no order 'X'"}

``arguments`` are stored canonicalised (:mod:`~mtrl_gym.envs.sandbox.canonical`) and
redacted (:mod:`~mtrl_gym.envs.sandbox.redact`); a call matches an interaction when its
canonical, redacted arguments are equal. ``error`` records a :class:`ToolError` the real
tool raised, so failures replay too. When a file holds two interactions with the same
call, the later one wins.

Modes:

* ``"record"``: every call runs the real function; its (redacted) response is stored,
  replacing an earlier recording of the same call, and returned.
* ``"replay"``: calls are answered from the file only; nothing runs; deterministic.
* ``"replay_or_record"``: answered from the file when recorded, otherwise recorded.

In replay, a call with no recording follows ``on_missing``: ``"error"`` (default) answers
the model with an error tool result saying the call is not available; ``"nearest"``
serves the recorded call of the same tool with the closest arguments
(:func:`~mtrl_gym.envs.sandbox.canonical.argument_distance`); ``"strict"`` raises
:class:`~mtrl_gym.error.CassetteError` (for test suites).

>>> c = Cassette(mode="replay_or_record")
>>> c.call("double", {"x": 2.0}, live=lambda: 4).value
4
>>> out = c.call("double", {"x": 2}, live=lambda: 1 / 0)   # 2 == 2.0: served, not run
>>> out.value, out.source
(4, 'cassette')
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_gym.envs.sandbox.canonical import argument_distance, call_key, canonicalize
from mtrl_gym.envs.sandbox.redact import Redactor
from mtrl_gym.envs.sandbox.tools import Tool, ToolError
from mtrl_gym.error import CassetteError

__all__ = ["Cassette", "Interaction", "CallOutcome", "ToolResponse", "FORMAT", "VERSION", "MODES", "ON_MISSING",
           "MISSING_MESSAGE"]

FORMAT = "mtrl_gym.cassette"
#: The cassette format version this code reads and writes.
VERSION = 1
MODES = ("record", "replay", "replay_or_record")
ON_MISSING = ("error", "nearest", "strict")
#: Tool result for an unrecorded call under ``on_missing="error"`` (``{tool}`` is filled in).
MISSING_MESSAGE = ("{tool} is not available for these arguments in this sandbox (no recorded response). "
                   "Check the arguments or use another tool.")
_ENTRY_FIELDS = ("tool", "arguments", "response", "error", "latency_ms", "metadata")
_HEADER_FIELDS = ("format", "version", "redaction", "tools", "metadata")


@dataclass(frozen=True)
class ToolResponse:
    """Return this from a tool to attach ``metadata`` (e.g. an HTTP status) to a recording."""

    value: Any
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Interaction:
    """One recorded call: a line of the cassette file."""

    tool: str
    arguments: dict[str, Any]
    """Canonical, redacted arguments."""
    response: Any = None
    error: str | None = None
    """Message of the :class:`ToolError` the real tool raised, or None."""
    latency_ms: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The matching key: tool name + canonical JSON of the arguments."""
        return call_key(self.tool, self.arguments)

    def to_json(self) -> dict[str, Any]:
        """The line's JSON object (optional fields only when set)."""
        out: dict[str, Any] = {"tool": self.tool, "arguments": self.arguments, "response": self.response}
        if self.error is not None:
            out["error"] = self.error
        if self.latency_ms is not None:
            out["latency_ms"] = self.latency_ms
        if self.metadata:
            out["metadata"] = self.metadata
        return out


@dataclass(frozen=True)
class CallOutcome:
    """What :meth:`Cassette.call` served."""

    value: Any = None
    error: str | None = None
    """Set when the call failed: a recorded or live :class:`ToolError`, or an unrecorded call."""
    source: str = "cassette"
    """``"cassette"`` (exact match), ``"nearest"``, ``"live"`` (ran the real function) or ``"missing"``."""
    interaction: Interaction | None = None


class Cassette:
    """Recorded tool responses, kept in memory and saved as a JSONL file.

    Args:
        path: the cassette file. Loaded if it exists (it must, in ``"replay"`` mode);
            ``None`` keeps the cassette in memory only.
        mode: ``"replay"`` (default), ``"record"`` or ``"replay_or_record"``.
        on_missing: ``"error"`` (default), ``"nearest"`` or ``"strict"`` (see module docstring).
        redactor: how secrets are redacted. ``None``: the redaction stored in the file's
            header when loading, else a default :class:`Redactor`. ``False``: no redaction.
            A given redactor must match the file's header.
        missing_message: tool result text for unrecorded calls (``{tool}`` is filled in).
        tools: tool schemas stored in the header (environments fill this in when recording).
        metadata: free-form JSON stored in the header.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, mode: str = "replay", on_missing: str = "error",
                 redactor: Redactor | None | bool = None, missing_message: str = MISSING_MESSAGE,
                 tools: Sequence[Mapping[str, Any]] | None = None, metadata: Mapping[str, Any] | None = None):
        if mode not in MODES:
            raise ValueError(f"`mode` must be one of {MODES}, got {mode!r}")
        if on_missing not in ON_MISSING:
            raise ValueError(f"`on_missing` must be one of {ON_MISSING}, got {on_missing!r}")
        if redactor is True:
            redactor = Redactor()
        self.path = Path(path) if path is not None else None
        self.mode = mode
        self.on_missing = on_missing
        self.missing_message = missing_message
        self.tools: list[dict[str, Any]] = [dict(t) for t in tools or ()]
        self.metadata: dict[str, Any] = dict(metadata or {})
        self._entries: dict[str, Interaction] = {}
        self._by_tool: dict[str, list[str]] = {}
        self._lock = threading.RLock()
        self.dirty = False
        header_redaction: Any = ...
        if self.path is not None and self.path.exists():
            header_redaction = self._load(self.path)
        elif mode == "replay" and self.path is not None:
            raise CassetteError(f"{self.path}: no such cassette file. Record it first with mode='record' or "
                                "mode='replay_or_record'.")
        self.redactor = self._choose_redactor(redactor, header_redaction)

    @classmethod
    def load(cls, path: str | os.PathLike, **kwargs: Any) -> Cassette:
        """Open an existing cassette for replay (``kwargs`` as for the constructor)."""
        return cls(path, **{"mode": "replay", **kwargs})

    # -------------------------------------------------------------------------- queries

    @property
    def name(self) -> str:
        """The file path as text, or ``"<in-memory cassette>"``."""
        return str(self.path) if self.path is not None else "<in-memory cassette>"

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Interaction]:
        return iter(list(self._entries.values()))

    def __repr__(self) -> str:
        return f"Cassette({self.name!r}, mode={self.mode!r}, on_missing={self.on_missing!r}, {len(self)} calls)"

    def match_arguments(self, tool: Tool | str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The canonical, redacted form of ``arguments`` used for matching and storing."""
        args = tool.match_arguments(dict(arguments)) if isinstance(tool, Tool) else dict(arguments)
        args = canonicalize(args)
        return self.redactor.redact(args) if self.redactor is not None else args

    def lookup(self, tool: Tool | str, arguments: Mapping[str, Any]) -> Interaction | None:
        """The interaction recorded for exactly this call, or None."""
        name = tool.name if isinstance(tool, Tool) else tool
        return self._entries.get(call_key(name, self.match_arguments(tool, arguments)))

    def nearest(self, tool: Tool | str, arguments: Mapping[str, Any], k: int = 1) -> list[Interaction]:
        """Up to ``k`` recorded calls of the same tool, closest arguments first (ties: by key)."""
        name = tool.name if isinstance(tool, Tool) else tool
        target = self.match_arguments(tool, arguments)
        with self._lock:
            keys = list(self._by_tool.get(name, ()))
        ranked = sorted(keys, key=lambda key: (argument_distance(target, self._entries[key].arguments), key))
        return [self._entries[key] for key in ranked[:k]]

    # ------------------------------------------------------------------------ recording

    def add(self, tool: Tool | str, arguments: Mapping[str, Any], response: Any = None, *, error: str | None = None,
            latency_ms: float | None = None, metadata: Mapping[str, Any] | None = None) -> Interaction:
        """Record one interaction (redacted; replaces an earlier one for the same call)."""
        name = tool.name if isinstance(tool, Tool) else tool
        red = self.redactor.redact if self.redactor is not None else (lambda v: v)
        try:
            response = canonicalize_response(response)
        except TypeError as e:
            raise TypeError(f"the response of tool {name!r} is not JSON ({e}); return dicts, lists, strings, "
                            "numbers, booleans or None") from None
        entry = Interaction(tool=name, arguments=self.match_arguments(tool, arguments), response=red(response),
                            error=red(error) if error is not None else None,
                            latency_ms=None if latency_ms is None else round(float(latency_ms), 1),
                            metadata=red(canonicalize(dict(metadata or {}))))
        with self._lock:
            self._put(entry)
            self.dirty = True
        return entry

    def _put(self, entry: Interaction) -> None:
        key = entry.key
        if key not in self._entries:
            self._by_tool.setdefault(entry.tool, []).append(key)
        self._entries[key] = entry

    def call(self, tool: Tool | str, arguments: Mapping[str, Any],
             live: Callable[[], Any] | None = None) -> CallOutcome:
        """Serve one call according to the mode; ``live()`` runs the real tool when needed.

        ``live`` may raise :class:`ToolError` (recorded as an error interaction) and may
        return a :class:`ToolResponse` to attach metadata. In record modes the *redacted*
        response is returned, so recording and replaying show the model the same text.
        """
        name = tool.name if isinstance(tool, Tool) else tool
        if self.mode != "record":
            hit = self.lookup(tool, arguments)
            if hit is not None:
                return CallOutcome(hit.response, hit.error, "cassette", hit)
            if self.mode == "replay":
                return self._missing(tool, name, arguments)
        if live is None:
            raise CassetteError(f"{self.name}: mode {self.mode!r} needs the real tool to record {name!r}, "
                                "but no live function was given")
        start = time.perf_counter()
        error, metadata = None, {}
        try:
            value = live()
        except ToolError as e:
            value, error = None, str(e) or type(e).__name__
        if isinstance(value, ToolResponse):
            value, metadata = value.value, dict(value.metadata)
        entry = self.add(tool, arguments, value, error=error, latency_ms=(time.perf_counter() - start) * 1000,
                         metadata=metadata)
        return CallOutcome(entry.response, entry.error, "live", entry)

    def _missing(self, tool: Tool | str, name: str, arguments: Mapping[str, Any]) -> CallOutcome:
        if self.on_missing == "nearest":
            near = self.nearest(tool, arguments)
            if near:
                return CallOutcome(near[0].response, near[0].error, "nearest", near[0])
        if self.on_missing == "strict":
            raise CassetteError(self.strict_message(tool, arguments))
        return CallOutcome(None, self.missing_message.replace("{tool}", name), "missing", None)

    def strict_message(self, tool: Tool | str, arguments: Mapping[str, Any]) -> str:
        """The :class:`CassetteError` message for an unrecorded call under ``on_missing="strict"``."""
        name = tool.name if isinstance(tool, Tool) else tool
        key = call_key(name, self.match_arguments(tool, arguments))
        near = self.nearest(tool, arguments, k=3)
        if near:
            hint = f"Closest recorded calls of {name}: {', '.join(_short(i.key) for i in near)}."
        else:
            tools = sorted(self._by_tool)
            hint = f"The cassette has no calls of {name} (it has calls of: {', '.join(tools) or 'nothing'})."
        return (f"{self.name}: no recorded response for {_short(key)} in replay mode (on_missing='strict'). "
                f"{hint} Record the call with mode='replay_or_record', or use on_missing='error' to answer "
                "the model with an error tool result instead.")

    # ---------------------------------------------------------------------- file I/O

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Write the cassette (atomically) to ``path`` or to the path it was opened with."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise CassetteError("this cassette has no path; pass save(path=...)")
        with self._lock:
            header = {"format": FORMAT, "version": VERSION,
                      "redaction": self.redactor.config() if self.redactor is not None else None,
                      "tools": self.tools, "metadata": self.metadata}
            lines = [json.dumps(header, ensure_ascii=False)]
            lines += [json.dumps(e.to_json(), ensure_ascii=False) for e in self._entries.values()]
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            # Lone surrogates (possible in model text) are written as JSON escapes, which read back exactly.
            tmp.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="backslashreplace")
            os.replace(tmp, target)
            if path is None or target == self.path:
                self.dirty = False
        return target

    def close(self) -> None:
        """Save if something was recorded since the last save (and the cassette has a path)."""
        if self.dirty and self.path is not None:
            self.save()

    def __deepcopy__(self, memo: dict) -> Cassette:
        return self  # a shared resource, not episode state (task rows may hold one)

    def __enter__(self) -> Cassette:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _load(self, path: Path) -> Any:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CassetteError(f"{path}: cannot read the cassette ({e})") from None
        lines = text.splitlines()
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        if first is None:
            raise CassetteError(f"{path}: the file is empty; a cassette starts with a header line "
                                f'{{"format": "{FORMAT}", "version": {VERSION}, ...}}')
        header = self._parse_header(path, first + 1, lines[first])
        for i in range(first + 1, len(lines)):
            if lines[i].strip():
                self._put(_parse_entry(path, i + 1, lines[i]))
        self.tools = list(header.get("tools") or [])
        self.metadata = dict(header.get("metadata") or {})
        return header.get("redaction")

    def _parse_header(self, path: Path, line: int, text: str) -> dict[str, Any]:
        value = _json_line(path, line, text)
        if not isinstance(value, dict) or value.get("format") != FORMAT:
            raise CassetteError(f'{path}, line {line}: not a cassette header; expected {{"format": "{FORMAT}", '
                                f'"version": {VERSION}, ...}}, got {text[:80]!r}')
        version = value.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version != VERSION:
            newer = isinstance(version, int) and not isinstance(version, bool) and version > VERSION
            why = "written by a newer mtrl_gym; upgrade it" if newer else "re-record it with this version"
            raise CassetteError(f"{path}, line {line}: unsupported cassette version {version!r} (this mtrl_gym "
                                f"reads version {VERSION}); {why}")
        unknown = sorted(set(value) - set(_HEADER_FIELDS))
        if unknown:
            raise CassetteError(f"{path}, line {line}: unknown header field(s) {unknown}; "
                                f"a version {VERSION} header has {list(_HEADER_FIELDS)}")
        if not isinstance(value.get("tools", []), list) or not isinstance(value.get("metadata", {}), dict):
            raise CassetteError(f"{path}, line {line}: header 'tools' must be a list and 'metadata' an object")
        if value.get("redaction") is not None and not isinstance(value["redaction"], dict):
            raise CassetteError(f"{path}, line {line}: header 'redaction' must be an object or null")
        return value

    def _choose_redactor(self, given: Redactor | None | bool, header: Any) -> Redactor | None:
        if header is ...:  # a new cassette: the given redactor, or the default one
            return None if given is False else given if isinstance(given, Redactor) else Redactor()
        if given is None:  # a loaded cassette: the redaction it was recorded with
            if header is None:
                return None
            try:
                return Redactor.from_config(header)
            except ValueError as e:
                raise CassetteError(f"{self.name}: the header's 'redaction' is invalid ({e})") from None
        chosen = given if isinstance(given, Redactor) else None
        if header != (chosen.config() if chosen is not None else None):
            raise CassetteError(f"{self.name}: the given redactor differs from the one the cassette was recorded "
                                f"with ({header!r}); pass redactor=None to use the recorded one, or re-record")
        return chosen


def canonicalize_response(value: Any) -> Any:
    """A response as stored: JSON values only, tuples as lists, keys as strings (order kept)."""
    if isinstance(value, float) and value != value:
        raise TypeError("NaN is not a JSON value")
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [canonicalize_response(v) for v in value]
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("object keys must be strings")
        return {k: canonicalize_response(v) for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _json_line(path: Path, line: int, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CassetteError(f"{path}, line {line}: invalid JSON ({e.msg} at character {e.pos})") from None
    except RecursionError:
        raise CassetteError(f"{path}, line {line}: JSON nested too deeply") from None


def _parse_entry(path: Path, line: int, text: str) -> Interaction:
    value = _json_line(path, line, text)
    where = f"{path}, line {line}"
    if not isinstance(value, dict):
        raise CassetteError(f"{where}: an interaction must be a JSON object, got {type(value).__name__}")
    unknown = sorted(set(value) - set(_ENTRY_FIELDS))
    if unknown:
        raise CassetteError(f"{where}: unknown field(s) {unknown}; an interaction has {list(_ENTRY_FIELDS)}")
    if not isinstance(value.get("tool"), str) or not value["tool"]:
        raise CassetteError(f"{where}: 'tool' must be a non-empty string, got {value.get('tool')!r}")
    if not isinstance(value.get("arguments"), dict):
        raise CassetteError(f"{where}: 'arguments' must be a JSON object, got {value.get('arguments')!r}")
    if "response" not in value and "error" not in value:
        raise CassetteError(f"{where}: an interaction needs 'response' or 'error'")
    if value.get("error") is not None and not isinstance(value["error"], str):
        raise CassetteError(f"{where}: 'error' must be a string or null, got {value['error']!r}")
    latency = value.get("latency_ms")
    if latency is not None and (isinstance(latency, bool) or not isinstance(latency, (int, float)) or latency < 0):
        raise CassetteError(f"{where}: 'latency_ms' must be a number >= 0 or null, got {latency!r}")
    if not isinstance(value.get("metadata", {}), dict):
        raise CassetteError(f"{where}: 'metadata' must be a JSON object, got {value['metadata']!r}")
    try:
        arguments = canonicalize(value["arguments"])
    except TypeError as e:
        raise CassetteError(f"{where}: 'arguments' cannot be canonicalised ({e})") from None
    return Interaction(tool=value["tool"], arguments=arguments, response=value.get("response"),
                       error=value.get("error"), latency_ms=latency, metadata=value.get("metadata") or {})


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
