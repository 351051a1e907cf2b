"""Tool-call parsing: every accepted format, ordering, errors, and never raising."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.parsing import MAX_PARSE_CHARS, ToolCallParser, parse_tool_calls

TOOLS = [{"type": "function", "function": {
    "name": "guess_word", "parameters": {"type": "object", "properties": {"guess": {"type": "string"}}}}}]
TAGS = {"guess": ("guess_word", "guess")}


def calls(text, **kw):
    r = parse_tool_calls(text, tools=TOOLS, tags=TAGS, **kw)
    return [(c.name, c.arguments, c.format) for c in r.calls]


@pytest.mark.parametrize("text, expected", [
    ('<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>',
     [("guess_word", {"guess": "crane"}, "hermes")]),
    ('<TOOL_CALL>\n{"name": "guess_word", "arguments": "{\\"guess\\": \\"crane\\"}"}\n</TOOL_CALL>',
     [("guess_word", {"guess": "crane"}, "hermes")]),
    ('{"name": "guess_word", "arguments": {"guess": "crane"}}',
     [("guess_word", {"guess": "crane"}, "json")]),
    ('{"name": "guess_word", "parameters": {"guess": "crane"}}',
     [("guess_word", {"guess": "crane"}, "json")]),
    ('Sure! {"type": "function", "function": {"name": "guess_word", "arguments": "{\\"guess\\": \\"slate\\"}"}}',
     [("guess_word", {"guess": "slate"}, "json")]),
    ('{"tool_calls": [{"id": "a1", "function": {"name": "guess_word", "arguments": "{}"}}]}',
     [("guess_word", {}, "json")]),
    ('```json\n{"name": "guess_word", "arguments": {"guess": "crane"}}\n```',
     [("guess_word", {"guess": "crane"}, "json")]),
    ('guess_word("crane")', [("guess_word", {"guess": "crane"}, "call")]),
    ("guess_word(guess='crane')", [("guess_word", {"guess": "crane"}, "call")]),
    ("guess_word(crane)", [("guess_word", {"guess": "crane"}, "call")]),
    ("<guess> Crane </guess>", [("guess_word", {"guess": "Crane"}, "tag")]),
    # Python-literal JSON (single quotes) inside tool_call tags is accepted.
    ("<tool_call>{'name': 'guess_word', 'arguments': {'guess': 'crane'}}</tool_call>",
     [("guess_word", {"guess": "crane"}, "hermes")]),
    # A call cut off at the end of the message (missing closing tag and brace).
    ('<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}',
     [("guess_word", {"guess": "crane"}, "hermes")]),
    # ... or cut inside the argument string (a stop string or the token limit)
    ('<tool_call>{"name": "guess_word", "arguments": {"guess": "cra',
     [("guess_word", {"guess": "cra"}, "hermes")]),
])
def test_each_format(text, expected):
    assert calls(text) == expected


def test_several_calls_in_text_order_across_formats():
    text = ('first guess_word("alpha") then <tool_call>{"name": "guess_word", "arguments": {"guess": "beta"}}'
            '</tool_call> and <guess>gamma</guess> and {"name": "guess_word", "arguments": {"guess": "delta"}}')
    assert [c[1]["guess"] for c in calls(text)] == ["alpha", "beta", "gamma", "delta"]
    assert [c[2] for c in calls(text)] == ["call", "hermes", "tag", "json"]


def test_list_inside_one_tool_call_keeps_order_and_ids():
    text = '<tool_call>[{"name": "a", "arguments": {}}, {"id": "x9", "name": "b", "arguments": {}}]</tool_call>'
    r = parse_tool_calls(text)
    assert [(c.name, c.id) for c in r.calls] == [("a", "call_0"), ("b", "x9")]


def test_duplicate_model_ids_are_replaced():
    text = ('<tool_call>{"id": "same", "name": "a", "arguments": {}}</tool_call>'
            '<tool_call>{"id": "same", "name": "b", "arguments": {}}</tool_call>')
    assert [c.id for c in parse_tool_calls(text).calls] == ["same", "call_1"]


def test_json_inside_tool_call_is_not_counted_twice():
    text = '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>'
    assert len(parse_tool_calls(text, tools=TOOLS).calls) == 1


def test_think_blocks_are_ignored():
    assert calls('<think>maybe guess_word("wrong")</think>guess_word("right")') == [
        ("guess_word", {"guess": "right"}, "call")]
    assert calls("<think>unterminated guess_word('x')") == []


def test_call_syntax_restricted_to_known_tools_when_tools_given():
    assert calls('print("hello") and len([1])') == []
    assert [c.name for c in parse_tool_calls('print("hello")').calls] == ["print"]  # no tools: any name
    assert parse_tool_calls('lookup("a", 2)').calls[0].arguments == {"arg0": "a", "arg1": 2}


def test_call_syntax_needs_literal_arguments():
    assert calls("guess_word(os.system('x'))") == []
    assert calls("guess_word(1 + 2)") == []


def test_errors_are_reported_not_raised():
    r = parse_tool_calls("<tool_call>{not json at all</tool_call>")
    assert r.calls == () and "invalid JSON" in r.errors[0]
    r = parse_tool_calls('<tool_call>{"arguments": {}}</tool_call>')
    assert r.calls == () and 'expected {"name"' in r.errors[0]
    r = parse_tool_calls('<tool_call>{"name": "a", "arguments": "{broken"}</tool_call>')
    assert r.calls[0].error.startswith("arguments are not a JSON object")
    r = parse_tool_calls('<tool_call>{"name": "a", "arguments": [1, 2]}</tool_call>')
    assert r.calls[0].error == "arguments must be a JSON object, got list"
    r = parse_tool_calls("guess_word('a', 'b')", tools=TOOLS)
    assert r.calls[0].error == "too many positional arguments (the tool takes 1)"


def test_loose_fallback_only_when_nothing_else_matched():
    def loose(text):
        return [("guess_word", {"guess": "xxxxx"})] if "word" in text else []

    r = parse_tool_calls("my word is here", loose=loose)
    assert r.loose and r.calls[0].format == "loose"
    r = parse_tool_calls('word guess_word("crane")', tools=TOOLS, loose=loose)
    assert not r.loose and r.calls[0].format == "call"
    assert not parse_tool_calls("nothing", loose=loose).loose


def test_non_string_and_huge_input():
    assert parse_tool_calls(None).errors == ("expected text, got NoneType",)
    assert parse_tool_calls(b"bytes").calls == ()
    big = "x" * (MAX_PARSE_CHARS + 10) + 'guess_word("crane")'
    r = parse_tool_calls(big, tools=TOOLS)
    assert r.truncated and r.calls == ()


@pytest.mark.parametrize("text", ["{" * 5000, "(" * 5000, "guess_word(" + "[" * 3000, "<tool_call>" * 2000,
                                  '{"name": "a", "arguments": ' * 500, "[" * 10000 + "]" * 10000])
def test_pathological_inputs_do_not_raise(text):
    parse_tool_calls(text, tools=TOOLS, tags=TAGS)


_pieces = st.sampled_from(['<tool_call>', '</tool_call>', '{', '}', '"name"', ':', '"arguments"', '[', ']',
                           'guess_word', '(', ')', '"crane"', "'", '<guess>', '</guess>', '<think>',
                           '</think>', ',', 'guess=', '\\', '\n', 'null', '1e999', 'NaN'])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=300), st.lists(_pieces, max_size=40).map("".join)))
def test_never_raises_and_spans_are_ordered(text):
    parser = ToolCallParser(TOOLS, TAGS, loose=lambda t: [])
    r = parser(text)
    starts = [c.span[0] for c in r.calls]
    assert starts == sorted(starts)
    assert len({c.id for c in r.calls}) == len(r.calls)
    for c in r.calls:
        assert isinstance(c.arguments, dict)
        json.dumps(c.arguments, default=repr)  # arguments are plain data
