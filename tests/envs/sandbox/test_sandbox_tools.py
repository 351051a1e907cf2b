"""Tools: schemas generated from signatures and docstrings, argument validation, tool sets."""

from __future__ import annotations

import enum
import typing
from typing import Annotated, Any, Literal, Optional

import pytest

from mtrl_gym.envs.sandbox import Tool, ToolContext, ToolSet, render_result, tool, type_schema, validate
from mtrl_gym.envs.sandbox.schema import parse_docstring, validate_arguments


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@tool
def search(ctx: ToolContext, query: str, limit: int = 10, tags: list[str] | None = None,
           sort: Literal["asc", "desc"] = "asc", color: Color = Color.RED.value,
           weights: dict[str, float] | None = None, note: Annotated[str, "Free text."] = "") -> list:
    """Search the catalogue.

    Longer explanation that is kept.

    Args:
        query: Words to look for,
            all of them.
        limit (int): At most this many.
        tags: Only items with these tags.

    Returns:
        The hits.
    """
    return [query]


def test_schema_from_signature_and_docstring():
    assert search.schema == {"type": "function", "function": {
        "name": "search",
        "description": "Search the catalogue.\n\nLonger explanation that is kept.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "Words to look for, all of them."},
            "limit": {"type": "integer", "description": "At most this many.", "default": 10},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                     "description": "Only items with these tags.", "default": None},
            "sort": {"type": "string", "enum": ["asc", "desc"], "default": "asc"},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "weights": {"anyOf": [{"type": "object", "additionalProperties": {"type": "number"}}, {"type": "null"}],
                        "default": None},
            "note": {"type": "string", "description": "Free text.", "default": ""},
        }, "required": ["query"]}}}
    assert search.takes_context and search.signature.startswith("search(query: string, limit: integer = 10, ")


@pytest.mark.parametrize("tp, schema", [
    (int, {"type": "integer"}), (float, {"type": "number"}), (bool, {"type": "boolean"}), (Any, {}),
    (Optional[int], {"type": ["integer", "null"]}), (int | str, {"type": ["integer", "string"]}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}), (list, {"type": "array"}),
    (typing.Sequence[str], {"type": "array", "items": {"type": "string"}}), (dict, {"type": "object"}),
    (Literal[1, "a"], {"enum": [1, "a"]}),
])
def test_type_schemas(tp, schema):
    assert type_schema(tp) == schema


@pytest.mark.parametrize("tp, match", [
    (tuple[int, str], r"fixed-length tuples are not supported"),
    (dict[int, str], r"dict keys must be str"),
    (complex, r"unsupported type <class 'complex'>; use str, int, float"),
])
def test_unsupported_types_say_what_to_do(tp, match):
    with pytest.raises(TypeError, match=match):
        type_schema(tp)


def test_bad_tool_definitions():
    with pytest.raises(TypeError, match=r"tool 'f': parameter 'args' must be a plain or keyword-only parameter"):
        tool(lambda *args: 0, name="f")
    with pytest.raises(ValueError, match=r"tool name 'a b' must be 1-64 characters"):
        tool(lambda: 0, name="a b")
    with pytest.raises(TypeError, match=r"tool 'f': the default of 'x' must be a JSON value"):
        def f(x: int = object()):  # noqa: B008
            return x
        tool(f)
    with pytest.raises(ValueError, match=r"schema= of tool 'g' must be a JSON object schema"):
        tool(lambda: 0, name="g", schema={"type": "string"})
    with pytest.raises(ValueError, match=r"two tools are named 'search'"):
        ToolSet([search, search])


def test_explicit_schema_and_reST_docstrings():
    def lookup(sku):
        """Look up.

        :param sku: The SKU.
        """
        return sku

    t = Tool(lookup, schema={"type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]+-\\d+$"}},
                             "required": ["sku"]})
    assert t.validate({"sku": "kb-1"})[1] == ["'sku' must match the pattern '^[A-Z]+-\\\\d+$', got 'kb-1'"]
    assert parse_docstring(lookup.__doc__) == ("Look up.", {"sku": "The SKU."})


@pytest.mark.parametrize("arguments, problems", [
    ({"query": "x"}, []),
    ({}, ["missing required argument 'query'"]),
    ({"query": "x", "extra": 1}, ["unexpected argument 'extra' (allowed: 'query', 'limit', 'tags', 'sort', 'color', "
                                  "'weights', 'note')"]),
    ({"query": 3}, ["'query' must be a string, got 3"]),
    ({"query": "x", "limit": 2.5}, ["'limit' must be an integer, got 2.5"]),
    ({"query": "x", "limit": True}, ["'limit' must be an integer, got true"]),
    ({"query": "x", "tags": ["a", 2]}, ["'tags' does not match any allowed form, got an array of 2 item(s)"]),
    ({"query": "x", "sort": "up"}, ["'sort' must be one of ['asc', 'desc'], got 'up'"]),
    ({"query": "x", "weights": {"a": "heavy"}}, ["'weights' does not match any allowed form, got an object with keys 'a'"]),
    ({"query": "x", "note": float("nan")}, ["'note' must be a string, got nan"]),
    ({"query": {1, 2}}, ["'query' must be a JSON value, got a set"]),
    ("not an object", ["arguments must be a JSON object, got 'not an object'"]),
])
def test_argument_validation_messages(arguments, problems):
    assert search.validate(arguments)[1] == problems


def test_validation_fills_defaults_and_coerces():
    args, problems = search.validate({"query": "x", "limit": 3.0})
    assert problems == [] and args == {"query": "x", "limit": 3, "tags": None, "sort": "asc", "color": "red",
                                       "weights": None, "note": ""}
    assert isinstance(args["limit"], int)
    assert validate([1, 2.5], {"type": "array", "items": {"type": "number"}, "maxItems": 1}) == (
        [1, 2.5], ["value must have at most 1 items, got 2"])
    assert validate(5, {"type": "integer", "minimum": 6})[1] == ["value must be >= 6, got 5"]
    assert validate("", {"type": "string", "minLength": 1})[1] == ["value must have at least 1 character(s), got ''"]
    assert validate({"a": 1}, {"type": "object", "properties": {}, "additionalProperties": False})[1] == [
        "value.a is not allowed (allowed: none)"]


def test_validation_never_raises_on_odd_schemas_and_values():
    nested: Any = []
    for _ in range(100):
        nested = [nested]
    assert validate(nested, {"type": "array", "items": {"type": "array"}})[1] == []
    assert validate_arguments({"x": nested}, {"type": "object", "properties": {"x": {}}})[1] == [
        "'x' must be a JSON value, got a value nested too deeply"]
    assert validate("x", {"type": "string", "pattern": "("}) == ("x", [])
    assert validate_arguments({"a": 1}, {"type": "object", "properties": {"a": "junk"}}) == ({"a": 1}, [])


def test_invoke_passes_context_and_tool_sets_combine():
    ctx = ToolContext(state={"k": 1})

    @tool
    def read(ctx: ToolContext, key: str) -> int:
        """Read."""
        return ctx.state[key]

    assert read.invoke({"key": "k"}, ctx) == 1 and "ctx" not in read.parameters["properties"]
    both = ToolSet([search]) + [read]
    assert list(both) == ["search", "read"] and [s["function"]["name"] for s in both.schemas] == ["search", "read"]
    assert ToolSet(both) is not both and list(ToolSet(both)) == ["search", "read"]


def test_render_result():
    assert render_result("plain") == "plain"
    assert render_result({"b": 1, "a": [True, None]}) == '{"b": 1, "a": [true, null]}'
    with pytest.raises(ValueError):
        render_result(float("nan"))
