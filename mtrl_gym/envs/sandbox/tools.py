"""Tools for sandboxes: typed Python functions with generated OpenAI function schemas.

Declare a tool with the :func:`tool` decorator. Its schema comes from the signature
(types, defaults) and the docstring (summary, ``Args:`` descriptions)::

    @tool
    def get_order(ctx: ToolContext, order_id: str) -> dict:
        '''Look up one order.

        Args:
            order_id: The order id, e.g. "ORD-1042".
        '''
        order = ctx.state.orders.get(order_id)
        if order is None:
            raise ToolError(f"no order {order_id!r}")
        return order

* A parameter named ``ctx`` receives the episode's :class:`ToolContext` (state, task,
  work directory, random generator) and is not part of the schema.
* Raise :class:`ToolError` for errors the model should read (unknown id, policy refusal):
  the message becomes the tool result. Other exceptions are bugs in the tool.
* Return any JSON value; strings are shown as they are, other values as JSON.
* Flags: ``network=True`` (the tool reaches the network: it is exempt from the network
  guard and, by default, answered from the cassette in replay mode), ``writes=True``
  (may write files anywhere), ``subprocess=True`` (may start processes), ``recorded=``
  (answered from the cassette; defaults to ``network``), ``normalize=`` (maps validated
  arguments to the form used for cassette matching, e.g. lower-casing a city name).

>>> @tool
... def add(a: int, b: int = 1) -> int:
...     '''Add two integers.
...
...     Args:
...         a: First term.
...         b: Second term.
...     '''
...     return a + b
>>> add.schema["function"]["parameters"]["required"], add.signature
(['a'], 'add(a: integer, b: integer = 1)')
>>> add(2, b=3)
5
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mtrl_gym.envs.sandbox.schema import parse_docstring, signature_text, type_schema, validate_arguments

__all__ = ["tool", "Tool", "ToolError", "ToolContext", "ToolSet", "CONTEXT_PARAM", "render_result"]

#: Name of the parameter through which a tool receives its :class:`ToolContext`.
CONTEXT_PARAM = "ctx"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


class ToolError(Exception):
    """Raised by a tool for an error the model should read; the message is the tool result.

    Use it for everything a real API would answer with an error: an unknown id, a
    business-rule refusal, a precondition that does not hold. It never ends the episode.
    """


@dataclass
class ToolContext:
    """What a tool can reach during one episode, passed as its ``ctx`` parameter.

    A fresh context is built on every ``reset``; nothing in it survives the episode.
    """

    state: Any = None
    """The episode's state, built by :meth:`ToolSandboxEnv.make_state` (None for stateless envs)."""
    task: Mapping[str, Any] = field(default_factory=dict)
    """The task row being played. Tools may read it; never copy its expected answer into a result."""
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    """Random generator for tools that draw (seeded from the task, so episodes replay exactly)."""
    workdir_factory: Callable[[], Path] | None = None
    _workdir: Path | None = None

    @property
    def workdir(self) -> Path:
        """This episode's private temporary directory, created on first use and removed on reset.

        Tools may write files here without declaring ``writes=True``.
        """
        if self._workdir is None:
            if self.workdir_factory is None:
                raise RuntimeError("this ToolContext has no work directory (no workdir_factory was given)")
            self._workdir = self.workdir_factory()
        return self._workdir

    @property
    def workdir_if_created(self) -> Path | None:
        """The work directory if a tool has created it this episode, else None."""
        return self._workdir


class Tool:
    """A callable tool: the function, its OpenAI function schema and its sandbox flags.

    Build one with :func:`tool`. Calling the object calls the function directly (no
    validation, no guard); environments use :meth:`validate` and run it under the guard.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
                 schema: Mapping[str, Any] | None = None, network: bool = False, writes: bool = False,
                 subprocess: bool = False, recorded: bool | None = None,
                 normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        if not callable(fn):
            raise TypeError(f"a tool must wrap a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or fn.__name__
        if not _NAME_RE.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-64 characters a-z, A-Z, 0-9, _ or -, "
                             "starting with a letter or _")
        sig = inspect.signature(fn)
        self.takes_context = CONTEXT_PARAM in sig.parameters
        summary, param_docs = parse_docstring(fn.__doc__)
        self.description = description if description is not None else summary
        if schema is not None:
            self.parameters = _check_parameters_schema(dict(schema), self.name)
        else:
            self.parameters = _parameters_from_signature(fn, sig, param_docs, self.name)
        self.network = bool(network)
        self.writes = bool(writes)
        self.subprocess = bool(subprocess)
        self.recorded = self.network if recorded is None else bool(recorded)
        self.normalize = normalize
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema: ``{"type": "function", "function": {name, description, parameters}}``."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    @property
    def signature(self) -> str:
        """One-line signature for messages: ``get_weather(city: string, days: integer = 1)``."""
        return signature_text(self.name, self.parameters)

    def validate(self, arguments: Any) -> tuple[dict[str, Any], list[str]]:
        """``(arguments with defaults, problems)`` for model-supplied arguments; never raises."""
        return validate_arguments(arguments, self.parameters)

    def match_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments as used for cassette matching (after ``normalize``, if any)."""
        if self.normalize is None:
            return arguments
        out = self.normalize(dict(arguments))
        if not isinstance(out, dict):
            raise TypeError(f"normalize of tool {self.name!r} must return a dict, got {type(out).__name__}")
        return out

    def invoke(self, arguments: Mapping[str, Any], ctx: ToolContext | None = None) -> Any:
        """Call the function with validated ``arguments`` (and ``ctx`` if it takes one)."""
        if self.takes_context:
            return self.fn(**arguments, **{CONTEXT_PARAM: ctx})
        return self.fn(**arguments)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        flags = [f for f in ("network", "writes", "subprocess", "recorded") if getattr(self, f)]
        return f"Tool({self.signature}{', ' + ', '.join(flags) if flags else ''})"


def _check_parameters_schema(schema: dict[str, Any], name: str) -> dict[str, Any]:
    if schema.get("type") != "object" or not isinstance(schema.get("properties", {}), Mapping):
        raise ValueError(f"schema= of tool {name!r} must be a JSON object schema "
                         f'({{"type": "object", "properties": {{...}}}}), got {schema!r}')
    schema.setdefault("properties", {})
    return schema


def _parameters_from_signature(fn, sig: inspect.Signature, docs: dict[str, str], name: str) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # a forward reference that cannot be resolved: fall back to raw annotations
        hints = {}
    props: dict[str, Any] = {}
    required: list[str] = []
    for pname, p in sig.parameters.items():
        if pname == CONTEXT_PARAM:
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"tool {name!r}: parameter {pname!r} must be a plain or keyword-only parameter "
                            "(no *args, **kwargs or positional-only parameters)")
        annotation = hints.get(pname, p.annotation)
        if isinstance(annotation, str):
            raise TypeError(f"tool {name!r}: cannot resolve the annotation {annotation!r} of parameter {pname!r}; "
                            "define the type at module level or pass schema=")
        ps = type_schema(annotation, where=f"tool {name!r}, parameter {pname!r}")
        if pname in docs and docs[pname]:
            ps = {**ps, "description": docs[pname]}
        if p.default is p.empty:
            required.append(pname)
        else:
            try:
                json.dumps(p.default)
            except (TypeError, ValueError):
                raise TypeError(f"tool {name!r}: the default of {pname!r} must be a JSON value, "
                                f"got {p.default!r}") from None
            ps = {**ps, "default": p.default}
        props[pname] = ps
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None,
         schema: Mapping[str, Any] | None = None, network: bool = False, writes: bool = False,
         subprocess: bool = False, recorded: bool | None = None,
         normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
    """Make a :class:`Tool` from a typed function; use bare (``@tool``) or with options.

    Args:
        name: tool name shown to the model (default: the function name).
        description: overrides the docstring summary.
        schema: explicit ``parameters`` JSON schema instead of the generated one.
        network: the tool reaches the network. It is exempt from the network guard and
            (unless ``recorded=False``) answered from the cassette in replay mode.
        writes: the tool may write files outside the episode's work directory.
        subprocess: the tool may start processes.
        recorded: answered from the cassette in replay mode (default: ``network``).
        normalize: ``dict -> dict`` applied to validated arguments before cassette
            matching (e.g. ``lambda a: {**a, "city": a["city"].strip().lower()}``).
    """
    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, schema=schema, network=network, writes=writes,
                    subprocess=subprocess, recorded=recorded, normalize=normalize)

    return wrap(fn) if fn is not None else wrap


class ToolSet(Mapping[str, Tool]):
    """An ordered, name-indexed collection of tools (what an environment exposes).

    Accepts :class:`Tool` objects or plain functions (wrapped with :func:`tool`).
    Duplicate names raise.

    >>> def ping() -> str:
    ...     "Answer pong."
    ...     return "pong"
    >>> ts = ToolSet([ping])
    >>> list(ts), ts["ping"].schema["function"]["description"]
    (['ping'], 'Answer pong.')
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()):
        self._tools: dict[str, Tool] = {}
        if isinstance(tools, Mapping):
            tools = tools.values()
        for t in tools:
            t = t if isinstance(t, Tool) else Tool(t)
            if t.name in self._tools:
                raise ValueError(f"two tools are named {t.name!r}; tool names must be unique")
            self._tools[t.name] = t

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self):
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of every tool, in order."""
        return [t.schema for t in self._tools.values()]

    def __add__(self, other: ToolSet | Sequence[Tool]) -> ToolSet:
        return ToolSet([*self._tools.values(), *(other.values() if isinstance(other, ToolSet) else other)])

    def __repr__(self) -> str:
        return f"ToolSet({', '.join(self._tools)})"


def render_result(value: Any) -> str:
    """The text of a tool result: strings as they are, other JSON values as JSON.

    >>> render_result({"temp_c": 21.5, "city": "Zürich"})
    '{"temp_c": 21.5, "city": "Zürich"}'
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
