"""The OpenAI wire format: request bodies checked into dataclasses, responses built as dicts.

Only the standard library is used here, so the rules are testable without a web
framework. Every problem with a request becomes an :class:`ApiError` with an HTTP status
and an OpenAI-shaped body::

    {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code": null}}

Accepted ``POST /v1/chat/completions`` fields: ``model``, ``messages``, ``tools``,
``tool_choice``, ``temperature``, ``top_p``, ``top_k`` (extension), ``max_tokens`` /
``max_completion_tokens``, ``stop``, ``seed``, ``n`` (1 only), ``stream``,
``stream_options.include_usage``, ``logprobs`` / ``top_logprobs`` (0 only) and the
extension ``return_token_ids``. Unknown fields are ignored, as OpenAI-compatible servers
do; known fields of the wrong type are a 400.

>>> req = parse_chat_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop": "x"})
>>> req.messages[0]["content"], req.stop
('hi', ('x',))
>>> parse_chat_request({"model": "m", "messages": []})
Traceback (most recent call last):
...
mtrl_gym.serve.protocol.ApiError: `messages` must be a non-empty list of chat messages
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ROLES",
    "TOOL_CHOICES",
    "ApiError",
    "ChatRequest",
    "CompletionRequest",
    "message_text",
    "parse_chat_request",
    "parse_completion_request",
    "parse_json_body",
]

#: Message roles a chat request may use (``developer`` is read as ``system``).
ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_CHOICES = ("auto", "none", "required")


class ApiError(Exception):
    """A request the server refuses; ``status`` is the HTTP status, :meth:`body` the JSON."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None, code: str | None = None,
                 type: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code
        self.type = type or ("invalid_request_error" if status < 500 else "server_error")

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass
class ChatRequest:
    """A checked ``/chat/completions`` request (messages as plain dicts, text contents)."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = "auto"
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    stream: bool = False
    include_usage: bool = False
    logprobs: bool = False
    return_token_ids: bool = False


@dataclass
class CompletionRequest:
    """A checked ``/completions`` request; ``prompt`` is text or token ids."""

    model: str
    prompt: str | list[int]
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: int | None = None
    return_token_ids: bool = False
    tokens_as_token_ids: bool = False


def parse_json_body(raw: bytes) -> dict[str, Any]:
    """The JSON object of a request body, or a 400 saying what is wrong with it."""
    try:
        value = json.loads(raw.decode("utf-8")) if raw else None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ApiError(f"the request body is not valid JSON ({e})", code="invalid_json") from None
    if not isinstance(value, dict):
        raise ApiError(f"the request body must be a JSON object, got {type(value).__name__}", code="invalid_json")
    return value


def message_text(content: Any, where: str) -> str:
    """Text of a message ``content``: a string, ``None`` or a list of ``{"type": "text"}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if isinstance(part, str):
                parts.append(part)
                continue
            if not isinstance(part, Mapping) or part.get("type", "text") != "text" or not isinstance(
                    part.get("text"), str):
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise ApiError(f"{where}.content[{i}] must be a text part "
                               f'{{"type": "text", "text": "..."}}, got {kind!r} (only text is supported)',
                               param=f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(f"{where}.content must be a string, null or a list of text parts, got {type(content).__name__}",
                   param=f"{where}.content")


def _tool_calls(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ApiError(f"{where}.tool_calls must be a list, got {type(value).__name__}", param=f"{where}.tool_calls")
    calls = []
    for i, call in enumerate(value):
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise ApiError(f'{where}.tool_calls[{i}] must be {{"type": "function", "function": {{"name": ..., '
                           f'"arguments": "<json>"}}}}', param=f"{where}.tool_calls")
        args = fn.get("arguments", "{}")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                args = {"_raw": args}
        calls.append({"id": str(call.get("id") or ""), "name": fn["name"], "arguments": args})
    return calls


def _message(m: Any, i: int) -> dict[str, Any]:
    where = f"messages[{i}]"
    if not isinstance(m, Mapping):
        raise ApiError(f"{where} must be an object with `role` and `content`, got {type(m).__name__}", param=where)
    role = m.get("role")
    if role not in ROLES:
        raise ApiError(f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", param=f"{where}.role")
    out: dict[str, Any] = {"role": "system" if role == "developer" else role,
                           "content": message_text(m.get("content"), where)}
    if role == "assistant":
        out["tool_calls"] = _tool_calls(m.get("tool_calls"), where)
    if role == "tool":
        cid = m.get("tool_call_id")
        if cid is not None and not isinstance(cid, str):
            raise ApiError(f"{where}.tool_call_id must be a string, got {type(cid).__name__}",
                           param=f"{where}.tool_call_id")
        out["tool_call_id"] = cid or ""
    name = m.get("name")
    if isinstance(name, str) and name:
        out["name"] = name
    return out


def _number(body: Mapping, key: str, low: float, high: float, *, low_open: bool = False) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ApiError(f"`{key}` must be a number, got {value!r}", param=key)
    if value < low or value > high or (low_open and value == low):
        bracket = "(" if low_open else "["
        raise ApiError(f"`{key}` must be in {bracket}{low:g}, {high:g}], got {value!r}", param=key)
    return float(value)


def _integer(body: Mapping, key: str, low: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(f"`{key}` must be an integer, got {value!r}", param=key)
    if value < low:
        raise ApiError(f"`{key}` must be >= {low}, got {value}", param=key)
    return int(value)


def _flag(body: Mapping, key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(f"`{key}` must be true or false, got {value!r}", param=key)
    return value


def _model(body: Mapping) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(f"`model` must be a non-empty string (GET /v1/models lists them), got {model!r}",
                       param="model")
    return model


def _stop(body: Mapping) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise ApiError(f"`stop` must be a non-empty string or a list of them, got {stop!r}", param="stop")
    return tuple(stop)


def _n(body: Mapping) -> None:
    n = _integer(body, "n", 1)
    if n not in (None, 1):
        raise ApiError(f"`n` must be 1 (one completion per request; send one request per sample), got {n}",
                       param="n")


_TOOL_SHAPE = '{"type": "function", "function": {"name": ..., "parameters": {"type": "object", "properties": {...}}}}'


def _tool_schema(t: Any, i: int) -> None:
    """Check one tool: an OpenAI function whose ``parameters`` is a JSON-schema object."""
    where = f"tools[{i}]"
    fn = t.get("function") if isinstance(t, Mapping) else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise ApiError(f"`{where}` must be {_TOOL_SHAPE}", param="tools")
    if t.get("type", "function") != "function":
        raise ApiError(f"`{where}.type` must be \"function\", got {t.get('type')!r}", param=f"{where}.type")
    where += ".function"
    if not isinstance(fn.get("description", ""), (str, type(None))):
        raise ApiError(f"`{where}.description` must be a string, got {type(fn['description']).__name__}",
                       param=f"{where}.description")
    params = fn.get("parameters")
    if params is None:
        return
    where += ".parameters"
    if not isinstance(params, Mapping):
        raise ApiError(f"`{where}` must be a JSON schema object such as {{\"type\": \"object\", \"properties\": "
                       f"{{...}}}}, got {type(params).__name__}", param=where)
    if params.get("type", "object") != "object":
        raise ApiError(f"`{where}.type` must be \"object\", got {params.get('type')!r}", param=f"{where}.type")
    props = params.get("properties")
    if props is not None:
        if not isinstance(props, Mapping):
            raise ApiError(f"`{where}.properties` must be an object of parameter schemas, got "
                           f"{type(props).__name__}", param=f"{where}.properties")
        for name, schema in props.items():
            kind = schema.get("type") if isinstance(schema, Mapping) else None
            if not isinstance(schema, Mapping) or not (kind is None or isinstance(kind, str) or (
                    isinstance(kind, list) and all(isinstance(k, str) for k in kind))):
                raise ApiError(f"`{where}.properties.{name}` must be a JSON schema object (its `type` a string "
                               f"or a list of strings), got {schema!r}"[:400], param=f"{where}.properties")
    required = params.get("required")
    if required is not None and not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
        raise ApiError(f"`{where}.required` must be a list of parameter names, got {required!r}"[:400],
                       param=f"{where}.required")


def _tools(body: Mapping) -> list[dict[str, Any]]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ApiError(f"`tools` must be a list of function schemas, got {type(tools).__name__}", param="tools")
    for i, t in enumerate(tools):
        _tool_schema(t, i)
    return [dict(t) for t in tools]


def _tool_choice(body: Mapping, tools: Sequence[Mapping]) -> Any:
    choice = body.get("tool_choice")
    if choice is None:
        return "auto"
    if isinstance(choice, str) and choice in TOOL_CHOICES:
        return choice
    fn = choice.get("function") if isinstance(choice, Mapping) else None
    if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
        name = choice["function"]["name"]
        if name not in {t["function"]["name"] for t in tools}:
            raise ApiError(f"`tool_choice` names the function {name!r}, which is not in `tools`",
                           param="tool_choice")
        return dict(choice)
    raise ApiError(f'`tool_choice` must be "auto", "none", "required" or {{"type": "function", "function": '
                   f'{{"name": ...}}}}, got {choice!r}', param="tool_choice")


def parse_chat_request(body: Mapping[str, Any]) -> ChatRequest:
    """Check a chat-completions body; raises :class:`ApiError` (400) naming the bad field."""
    model = _model(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError("`messages` must be a non-empty list of chat messages", param="messages")
    _n(body)
    if _integer(body, "top_logprobs", 0):
        raise ApiError("`top_logprobs` must be 0 or absent: the server reports the sampled token's log-prob only",
                       param="top_logprobs")
    tools = _tools(body)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, Mapping):
        raise ApiError(f"`stream_options` must be an object, got {options!r}", param="stream_options")
    max_tokens = _integer(body, "max_completion_tokens", 1)
    legacy = _integer(body, "max_tokens", 1)
    return ChatRequest(
        model=model, messages=[_message(m, i) for i, m in enumerate(messages)], tools=tools,
        tool_choice=_tool_choice(body, tools), temperature=_number(body, "temperature", 0.0, 2.0),
        top_p=_number(body, "top_p", 0.0, 1.0, low_open=True), top_k=_integer(body, "top_k", -1),
        max_tokens=max_tokens if max_tokens is not None else legacy, stop=_stop(body),
        seed=_integer(body, "seed", 0), stream=_flag(body, "stream"),
        include_usage=_flag(options or {}, "include_usage"), logprobs=_flag(body, "logprobs"),
        return_token_ids=_flag(body, "return_token_ids"))


def parse_completion_request(body: Mapping[str, Any]) -> CompletionRequest:
    """Check a completions body (``prompt``: a string, token ids, or a one-item list of either)."""
    model = _model(body)
    _n(body)
    if _flag(body, "stream"):
        raise ApiError("`stream` is not supported on /completions; use /chat/completions", param="stream")
    if _flag(body, "echo"):
        raise ApiError("`echo` is not supported", param="echo")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, list):
        if not prompt or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt):
            raise ApiError("`prompt` as a list must hold token ids (integers >= 0), one prompt per request",
                           param="prompt")
    elif not isinstance(prompt, str) or not prompt:
        raise ApiError(f"`prompt` must be a non-empty string or a list of token ids, got {type(prompt).__name__}",
                       param="prompt")
    return CompletionRequest(
        model=model, prompt=prompt, temperature=_number(body, "temperature", 0.0, 2.0),
        top_p=_number(body, "top_p", 0.0, 1.0, low_open=True), top_k=_integer(body, "top_k", -1),
        max_tokens=_integer(body, "max_tokens", 1), stop=_stop(body), seed=_integer(body, "seed", 0),
        logprobs=_integer(body, "logprobs", 0), return_token_ids=_flag(body, "return_token_ids"),
        tokens_as_token_ids=_flag(body, "return_tokens_as_token_ids"))


# ---------------------------------------------------------------------- responses


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}


def chat_response(model: str, message: dict[str, Any], finish_reason: str, use: dict[str, Any], *,
                  logprobs: list[dict[str, Any]] | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish_reason,
                              "logprobs": {"content": logprobs} if logprobs is not None else None}
    choice.update(extra or {})
    return {"id": new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [choice], "usage": use}


def stream_chunks(response: Mapping[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events of a finished response: role, content, each
    tool call, the finish reason and (if asked) a usage chunk with no choices."""
    base = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
            "model": response["model"]}
    choice = response["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None, **more}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        out.append(chunk({"content": message["content"]}))
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": dict(call["function"])}]}))
    extra = {k: v for k, v in choice.items() if k in ("token_ids", "prompt_token_ids")}
    out.append(chunk({}, choice["finish_reason"], **extra))
    if include_usage:
        out.append({**base, "choices": [], "usage": response["usage"]})
    return out


def completion_response(model: str, text: str, finish_reason: str, use: dict[str, Any], *,
                        logprobs: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish_reason, "logprobs": logprobs}
    choice.update(extra or {})
    return {"id": new_id("cmpl"), "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": [choice], "usage": use}
