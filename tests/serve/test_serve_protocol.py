"""Request checking and reply building without a server: any JSON body is either a
request or an ApiError (never another exception); any model text becomes a reply."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.serve.protocol import (
    ApiError,
    parse_chat_request,
    parse_completion_request,
    parse_json_body,
)
from mtrl_gym.serve.sessions import assistant_reply, message_key

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda children: st.lists(children, max_size=4)
                    | st.dictionaries(st.text(max_size=12), children, max_size=4), max_leaves=20)
FIELDS = st.sampled_from(["model", "messages", "tools", "tool_choice", "temperature", "top_p", "top_k",
                          "max_tokens", "max_completion_tokens", "stop", "seed", "n", "stream", "stream_options",
                          "logprobs", "top_logprobs", "return_token_ids", "prompt", "echo"])
BODIES = st.dictionaries(FIELDS, JSON, max_size=8)
TOOLS = [{"type": "function", "function": {"name": "guess_word", "parameters": {
    "type": "object", "properties": {"guess": {"type": "string"}}, "required": ["guess"]}}}]


@settings(max_examples=300, deadline=None)
@given(BODIES)
def test_any_body_is_a_request_or_an_api_error(body):
    for parse in (parse_chat_request, parse_completion_request):
        try:
            parse(body)
        except ApiError as e:
            assert 400 <= e.status < 500 and e.body()["error"]["message"]


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_are_a_json_object_or_a_400(raw):
    try:
        assert isinstance(parse_json_body(raw), dict)
    except ApiError as e:
        assert e.status == 400


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_model_text_becomes_a_reply_whose_key_matches_what_a_client_sends_back(text):
    message, key, calls = assistant_reply(text, TOOLS, "auto", "call_0_")
    assert calls == len(message.get("tool_calls") or [])
    # what an OpenAI client sends back: arguments as a JSON string, content None or text
    echoed = parse_chat_request({"model": "m", "messages": [message, {"role": "user", "content": "x"}]}).messages[0]
    assert message_key(echoed) == key


def test_tool_calls_are_parsed_out_of_the_text():
    message, _, calls = assistant_reply(
        'Let me try. <tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>', TOOLS, "auto",
        "call_2_")
    assert calls == 1 and message["content"] == "Let me try."
    assert message["tool_calls"] == [{"id": "call_2_0", "type": "function",
                                      "function": {"name": "guess_word", "arguments": '{"guess": "crane"}'}}]
    none, _, n = assistant_reply('<tool_call>{"name": "guess_word", "arguments": {}}</tool_call>', TOOLS, "none", "c")
    assert n == 0 and none["content"].startswith("<tool_call>")


@pytest.mark.parametrize(("body", "match"), [
    ({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "only text is supported"),
    ({"model": "m", "messages": [{"role": "user"}], "tool_choice": {"type": "function", "function": {"name": "x"}}},
     "not in `tools`"),
    ({"model": "m", "messages": [{"role": "user"}], "top_logprobs": 3}, "`top_logprobs` must be 0"),
    ({"model": "", "messages": [{"role": "user"}]}, "`model` must be a non-empty string"),
    ({"model": "m", "messages": [{"role": "tool", "tool_call_id": 3}]}, "tool_call_id must be a string"),
])
def test_chat_request_errors_name_the_field(body, match):
    with pytest.raises(ApiError, match=match):
        parse_chat_request(body)


def test_content_parts_are_joined_and_developer_is_system():
    req = parse_chat_request({"model": "m", "messages": [
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})
    assert req.messages == [{"role": "system", "content": "rules"}, {"role": "user", "content": "ab"}]
    assert json.dumps(req.messages)


TOOL_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                         lambda children: st.lists(children, max_size=3)
                         | st.dictionaries(st.sampled_from(["type", "function", "name", "parameters", "properties",
                                                            "required", "description", "items", "guess"]),
                                           children, max_size=4), max_leaves=24)


@settings(max_examples=300, deadline=None)
@given(TOOL_JSON)
def test_any_tool_schema_is_a_400_or_renders(tool):
    """Whatever a client sends as a tool, the request is refused with a 4xx or its tools
    render into the prompt (the rendering is what crashed with a 500)."""
    from mtrl_gym.rollout.template import render_tools

    shaped = {"type": "function", "function": {"name": "guess_word", "parameters": tool}}
    for tools in ([tool], [shaped]):
        try:
            req = parse_chat_request({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": tools})
        except ApiError as e:
            assert 400 <= e.status < 500
            continue
        assert "<tools>" in render_tools(req.tools)


def test_render_tools_survives_schemas_that_are_not_schemas():
    from mtrl_gym.rollout.template import render_tools

    for params in ("x", {"properties": ["guess"]}, {"properties": {"guess": "x"}, "required": 7},
                   {"properties": {"guess": {"type": {"a": 1}}}}, {"required": [1, "guess"]}):
        text = render_tools([{"type": "function", "function": {"name": "guess_word", "parameters": params}}])
        assert text.endswith("</tool_call>") and '"name": "guess_word"' in text.splitlines()[-1]
