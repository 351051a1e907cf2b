"""The domain kit: small helpers every SOP domain package shares (seeded draws, text noise, record lookups).

World generators draw everything from the ``numpy`` ``Generator`` they are given, so these
helpers take it explicitly; the same ``rng`` state gives the same result in every process.
Tools look records up in the episode's world (``ctx.state``) and answer an unknown id with
a :class:`~mtrl_gym.envs.sandbox.ToolError` the model reads. A tool that only returns one
record by its id is declared with :func:`lookup_tool` over a reader such as :class:`Records`,
instead of being written out.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> pick(rng, ["a", "b", "c"]) in ("a", "b", "c")
True
>>> vary_case(np.random.default_rng(1), "Open Ticket", 0)
'Open Ticket'
>>> find({"AB-1": {"id": "AB-1"}}, " ab-1 ", "no record 'x'")
{'id': 'AB-1'}
>>> from mtrl_gym.envs.sandbox.tools import ToolContext
>>> get_box = lookup_tool("get_box", Records("boxes", "no box {!r}"), "box_id", "Read a box.", "The box id.")
>>> get_box.schema["function"]["parameters"]["properties"]
{'box_id': {'type': 'string', 'description': 'The box id.'}}
>>> get_box(ToolContext(state={"boxes": {"BX-1": {"box_id": "BX-1"}}}), box_id="bx-1")
{'box_id': 'BX-1'}
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from mtrl_gym.envs.sandbox.tools import Tool, ToolContext, ToolError

__all__ = ["pick", "weighted", "vary_case", "find", "ids", "stable_number", "Records", "OneRecord", "lookup_tool",
           "record_once"]

T = TypeVar("T")


def pick(rng: np.random.Generator, items: Sequence[T]) -> T:
    """One item of ``items``, uniformly (one ``rng.integers`` draw)."""
    return items[int(rng.integers(len(items)))]


def weighted(rng: np.random.Generator, options: Sequence[tuple[T, float]]) -> T:
    """A value of ``options`` (``(value, weight)`` pairs whose weights sum to 1), one ``rng.random`` draw."""
    r, acc = rng.random(), 0.0
    for value, weight in options:
        acc += weight
        if r < acc:
            return value
    return options[-1][0]


def vary_case(rng: np.random.Generator, text: str, noise: int) -> str:
    """``text`` with irregular case or spacing at ``noise`` >= 1, half the time (equal after trimming,
    collapsing whitespace and ignoring case, the comparison the SOPs prescribe)."""
    if noise == 0 or rng.random() < 0.5:
        return text
    kind = int(rng.integers(4))
    if kind == 0:
        return text.upper()
    if kind == 1:
        return text.lower() if text != text.lower() else text.title()
    if kind == 2:
        return f" {text}  "
    return text.replace(" ", "  ", 1) if " " in text else f"{text} "


def ids(rng: np.random.Generator, prefix: str, count: int, width: int = 6) -> list[str]:
    """``count`` distinct ids ``f"{prefix}{n}"``, ``n`` a ``width``-digit number (one draw per try)."""
    out: list[str] = []
    while len(out) < count:
        value = f"{prefix}{int(rng.integers(10 ** (width - 1), 10 ** width))}"
        if value not in out:
            out.append(value)
    return out


def find(table: Mapping[str, Any], key: Any, missing: str) -> Any:
    """``table[key]`` for an id as a model may type it (case and surrounding spaces ignored; the
    table's keys are upper case), else a :class:`ToolError` with the message ``missing``."""
    record = table.get(key.strip().upper()) if isinstance(key, str) else None
    if record is None:
        raise ToolError(missing)
    return record


def stable_number(*parts: str) -> int:
    """A 32-bit number derived from ``parts`` (the same in every process): for distractor tools,
    whose made-up answers must be deterministic without drawing from the world's ``rng``."""
    return int(hashlib.blake2b("|".join(parts).encode("utf-8", "surrogatepass"), digest_size=4).hexdigest(), 16)


@dataclass(frozen=True)
class Records:
    """Reads one record of the world's table ``ctx.state[table]`` by an id as a model typed it
    (:func:`find`); an unknown id is a :class:`ToolError` with ``missing.format(value)``.

    Call it as ``reader(ctx, value)`` from any tool that needs the record, and hand it to
    :func:`lookup_tool` for the tool that only returns it.
    """

    table: str
    """The key of the table (a mapping id -> record) in the episode's world."""
    missing: str
    """The error message for an unknown id; ``{!r}`` stands for the id as given: ``"no post {!r}"``."""
    normalize: Callable[[str], str] | None = None
    """Maps the id as given to the table's spelling before :func:`find` (e.g. a SKU's dashes)."""

    def __call__(self, ctx: ToolContext, value: str) -> Any:
        key = self.normalize(value) if self.normalize is not None else value
        return find(ctx.state[self.table], key, self.missing.format(value))


@dataclass(frozen=True)
class OneRecord:
    """Reads the world's only record of its kind, ``ctx.state[key]``, by its id ``record[id_key]`` as a
    model typed it (case and surrounding spaces ignored); another id is a :class:`ToolError` with
    ``missing.format(value)``. The counterpart of :class:`Records` for a world of one shipment, account, ...
    """

    key: str
    """The key of the record in the episode's world."""
    id_key: str
    """The record's id field (upper case)."""
    missing: str
    """The error message for another id; ``{!r}`` stands for the id as given."""

    def __call__(self, ctx: ToolContext, value: str) -> Any:
        record = ctx.state[self.key]
        if not isinstance(value, str) or value.strip().upper() != record[self.id_key]:
            raise ToolError(self.missing.format(value))
        return record


def record_once(ctx: ToolContext, collection: str, record: dict[str, Any],
                refusal: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """The one action a task allows: append ``record`` to the world's list ``ctx.state[collection]`` and
    return it; when the list already holds a record, change nothing and raise :class:`ToolError` with
    ``refusal(first record)``.

    >>> ctx = ToolContext(state={"cases": []})
    >>> record_once(ctx, "cases", {"case_id": "C-1"}, lambda first: f"already filed as {first['case_id']}")
    {'case_id': 'C-1'}
    >>> record_once(ctx, "cases", {"case_id": "C-2"}, lambda first: f"already filed as {first['case_id']}")
    Traceback (most recent call last):
    ...
    mtrl_gym.envs.sandbox.tools.ToolError: already filed as C-1
    """
    made = ctx.state[collection]
    if made:
        raise ToolError(refusal(made[0]))
    made.append(record)
    return record


class _Lookup:
    """The function of a :func:`lookup_tool`: ``read(ctx, arguments[key])``."""

    def __init__(self, read: Callable[[ToolContext, str], Any], key: str, doc: str):
        self.read, self.key, self.__doc__ = read, key, doc

    def __call__(self, ctx: ToolContext, **arguments: str) -> Any:
        return self.read(ctx, arguments[self.key])


def lookup_tool(name: str, read: Callable[[ToolContext, str], Any], key: str, description: str,
                key_description: str) -> Tool:
    """A tool ``name(key: string)`` described by ``description`` that returns ``read(ctx, key)``.

    ``read`` is a :class:`Records`, a :class:`OneRecord` or any ``(ctx, value) -> record`` function that raises
    :class:`ToolError` for an unknown id. The schema is the one ``@tool`` makes for a
    function with one ``str`` parameter ``key`` documented by ``key_description``; other
    tools call the result as ``tool(ctx, key=value)``.
    """
    doc = f"{description}\n\n    Args:\n        {key}: {key_description}\n    "
    schema = {"type": "object", "properties": {key: {"type": "string", "description": key_description}},
              "required": [key]}
    return Tool(_Lookup(read, key, doc), name=name, description=description, schema=schema)
