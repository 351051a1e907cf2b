"""Sessions: the token-exact record of one agent episode, built from its chat requests.

An agent framework sends the whole conversation with every request. The policy must see
exactly the tokens it sampled in earlier turns, so a session keeps, per *segment*, the
context as token ids (``loss_mask`` 1 and the sampling log-probs on sampled tokens, 0
elsewhere) next to the messages the client is expected to send back:

* **First request** (or a new segment): the messages are rendered with the policy's chat
  template, exactly as the rollout engine renders an env's first prompt (tool schemas go
  into the system prompt when the template ignores ``tools``).
* **A request that extends the segment**: its messages start with every message of the
  segment so far (the assistant replies as the server returned them: same text, same tool
  calls), followed by new ones (tool results, a user turn). Only the new messages are
  rendered, by the rollout engine's rule (the template's text after the last sampled
  turn, minus the end-of-turn token the model already emitted, then the generation
  prompt), and appended with ``loss_mask = 0``. Earlier tokens are never re-tokenised.
* **Anything else** (the agent rewrote, dropped or summarised history, changed tools):
  the request starts a new segment, rendered from scratch; ``retokenized`` counts these.

The client's view of an assistant turn is OpenAI-shaped: ``content`` is the model's text
outside its tool calls and ``tool_calls`` hold the calls :mod:`mtrl_gym.parsing` found.
The segment keeps the raw sampled text, which is what the template renders next turn.

A format prefill (``ChatCapture(assistant_prefix=...)``, the serving setting a model was
trained with) is written after the generation prompt of every chat turn, as the rollout
engine writes it: its tokens are context (``loss_mask`` 0), and the turn's text, which the
client sees and sends back, is the prefill followed by the sampled text.

Hidden tool schemas (``ChatCapture(tool_schemas=False)``, for a model trained reading none:
``SystemPrompt(tools=False)``, ``serving.tools: false``): the request's ``tools`` still turn
the replies into ``tool_calls``, but the prompt is rendered without them, as the rollout
engine rendered it in training, and the segment records no tools (``Segment.offered`` says
the request had some).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mtrl_gym.parsing import parse_tool_calls
from mtrl_gym.serve.protocol import ApiError
from mtrl_gym.rollout.template import ChatRenderer, render_tools
from mtrl_gym.rollout.trajectory import Trajectory, json_safe

__all__ = ["ChatCapture", "PreparedTurn", "Segment", "Session", "assistant_reply", "message_key"]

SESSION_STATES = ("open", "closed")


@dataclass
class Segment:
    """One contiguous token sequence of a session (a new one starts when history is rewritten)."""

    index: int
    mode: str = "chat"
    """``chat`` (built from messages) or ``completion`` (raw prompts, token-level prefix match)."""
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    prompt_length: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The conversation as rendered: assistant contents are the raw sampled text."""
    keys: list[tuple] = field(default_factory=list)
    """What the client must send back to extend this segment (see :func:`message_key`)."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """The tool schemas the model read in its prompt (none when the server hides them)."""
    tools_key: str = ""
    offered: bool = False
    """Whether the requests offered tools (their replies are parsed into ``tool_calls``)."""
    end_text: str = ""
    call_names: dict[str, str] = field(default_factory=dict)
    """Tool-call id -> tool name of every call returned, to name ``tool`` messages."""
    prefill_tokens: int = 0
    cached_tokens: int = 0
    sampled_tokens: int = 0
    cut_turns: int = 0
    tool_calls: int = 0
    format_errors: int = 0

    @property
    def num_turns(self) -> int:
        return len(self.turn_spans)

    def append(self, ids: Sequence[int], *, sampled: bool, logprobs: Sequence[float] = ()) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([1 if sampled else 0] * len(ids))
        if sampled:
            self.logprobs.extend(float(x) for x in logprobs)
        else:
            self.logprobs.extend([0.0] * len(ids))


@dataclass
class Session:
    """One agent episode: its segments, reward report and state."""

    id: str
    seed: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    key: str = field(default="", repr=False)
    """The session's own API key: it reaches this session's routes and nothing else."""
    number: int = 0
    """Creation order on its server (seeds of requests without one derive from it)."""
    segments: list[Segment] = field(default_factory=list)
    state: str = "open"
    requests: int = 0
    reward: float | None = None
    reward_metrics: dict[str, float] = field(default_factory=dict)
    failed: bool = False
    failure_reason: str | None = None
    created: float = field(default_factory=time.monotonic)
    closed_at: float | None = None
    busy: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def retokenized(self) -> int:
        """Segments started because a request did not extend the previous one."""
        return max(len(self.segments) - 1, 0)

    @property
    def num_turns(self) -> int:
        return sum(s.num_turns for s in self.segments)

    def summary(self) -> dict[str, Any]:
        """JSON-safe view for ``GET /sessions/<id>``."""
        return json_safe({
            "id": self.id, "state": self.state, "requests": self.requests, "turns": self.num_turns,
            "segments": len(self.segments), "retokenized": self.retokenized, "reward": self.reward,
            "metrics": self.reward_metrics, "failed": self.failed, "failure_reason": self.failure_reason,
            "meta": self.meta,
            "trajectories": [segment_trajectory(self, s).to_dict() for s in self.segments]})


def message_key(m: Mapping[str, Any]) -> tuple:
    """What identifies a (checked) message when a client sends history back.

    Assistant messages compare by stripped text and tool calls (name and arguments), not
    by ids or formatting; tool messages by text and ``tool_call_id``; others by role and text.
    """
    role, text = m["role"], m.get("content") or ""
    if role == "assistant":
        calls = tuple((c["name"], json.dumps(c["arguments"], sort_keys=True, ensure_ascii=False))
                      for c in m.get("tool_calls") or ())
        return ("assistant", text.strip(), calls)
    if role == "tool":
        return ("tool", text, m.get("tool_call_id") or "")
    return (role, text)


def _hermes(calls: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join("<tool_call>" + json.dumps({"name": c["name"], "arguments": c["arguments"]},
                                                ensure_ascii=False) + "</tool_call>" for c in calls)


def assistant_reply(content: str, tools: Sequence[Mapping[str, Any]], tool_choice: Any,
                    call_prefix: str) -> tuple[dict[str, Any], tuple, int]:
    """The OpenAI message for sampled text, its :func:`message_key`, and the number of calls.

    With tools offered (and ``tool_choice`` not ``"none"``) the text is parsed by
    :mod:`mtrl_gym.parsing`; calls whose arguments decoded become ``tool_calls`` with ids
    ``<call_prefix><k>`` and the remaining text (stripped) is the ``content`` (``None`` when
    empty). Otherwise the raw text is the content.
    """
    calls = []
    if tools and tool_choice != "none":
        calls = [c for c in parse_tool_calls(content, tools=tools).calls if c.error is None]
    if not calls:
        message = {"role": "assistant", "content": content}
        return message, message_key(message), 0
    text, last = [], 0
    for c in calls:
        text.append(content[last:c.span[0]])
        last = c.span[1]
    text.append(content[last:])
    rest = "".join(text).strip()
    tool_calls = [{"id": f"{call_prefix}{k}", "type": "function",
                   "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                  for k, c in enumerate(calls)]
    message = {"role": "assistant", "content": rest or None, "tool_calls": tool_calls}
    key = ("assistant", rest, tuple((c.name, json.dumps(c.arguments, sort_keys=True, ensure_ascii=False))
                                    for c in calls))
    return message, key, len(calls)


@dataclass
class PreparedTurn:
    """A request turned into token ids, not yet committed to its session."""

    segment: Segment
    new_segment: bool
    delta_ids: list[int]
    """Ids appended (``loss_mask`` 0) before sampling: the whole prompt for a new segment."""
    new_messages: list[dict[str, Any]]
    new_keys: list[tuple]

    @property
    def prompt_ids(self) -> list[int]:
        return (list(self.segment.token_ids) if not self.new_segment else []) + self.delta_ids


class ChatCapture:
    """Renders chat requests into a session's segments with a policy's chat template."""

    def __init__(self, renderer: ChatRenderer, assistant_prefix: str = "", tool_schemas: bool = True):
        self.renderer = renderer
        self.assistant_prefix = assistant_prefix
        self.tool_schemas = tool_schemas
        self._prefix_ids = renderer.encode(assistant_prefix) if assistant_prefix else []

    # ---------------------------------------------------------------- messages

    def _canonical(self, m: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
        """The message as the template renders it (assistant tool calls as Hermes text)."""
        role = m["role"]
        if role == "assistant":
            text = m.get("content") or ""
            if m.get("tool_calls"):
                text = (text + "\n" if text else "") + _hermes(m["tool_calls"])
            return {"role": "assistant", "content": text}
        if role == "tool":
            cid = m.get("tool_call_id") or ""
            return {"role": "tool", "content": m.get("content") or "", "tool_call_id": cid,
                    "name": m.get("name") or names.get(cid, "")}
        return {"role": role, "content": m.get("content") or ""}

    def _with_tool_text(self, messages: list[dict[str, Any]], tools: Sequence[Mapping]) -> list[dict[str, Any]]:
        """Tool schemas in the system prompt when the template does not render ``tools``
        (the rollout engine's first-prompt rule)."""
        if not tools or self.renderer.tools_in_template:
            return messages
        text = render_tools(tools)
        if messages and messages[0]["role"] == "system":
            system = messages[0]["content"]
            return [{**messages[0], "content": f"{system}\n\n{text}" if system else text}] + messages[1:]
        return [{"role": "system", "content": text}] + messages

    @staticmethod
    def _as_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Runs of ``tool`` messages joined into one user message (templates with no tool role)."""
        out: list[dict[str, Any]] = []
        for m in messages:
            if m["role"] == "tool" and out and out[-1].get("_tools"):
                out[-1]["content"] += "\n" + m["content"]
            elif m["role"] == "tool":
                out.append({"role": "user", "content": m["content"], "_tools": True})
            else:
                out.append(m)
        return [{k: v for k, v in m.items() if k != "_tools"} for m in out]

    def turn_text(self, token_ids: Sequence[int]) -> tuple[str, str]:
        """``(text, end_text)`` of a sampled chat turn: the prefill and the sampled text, and the
        end-of-turn text the model emitted (see ``ChatRenderer.split_assistant``)."""
        content, end = self.renderer.split_assistant(token_ids)
        return self.assistant_prefix + content, end

    # ---------------------------------------------------------------- turns

    def prepare(self, segment: Segment | None, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                next_index: int) -> PreparedTurn:
        """Token ids for a checked chat request: extend ``segment`` if the request continues
        it, else start segment ``next_index``. Raises :class:`ApiError` (400) when the
        template cannot render the messages."""
        tools_key = json.dumps(tools, sort_keys=True, ensure_ascii=False)
        keys = [message_key(m) for m in messages]
        if segment is not None and segment.mode == "chat" and segment.num_turns and segment.tools_key == tools_key \
                and len(messages) > len(segment.keys) and keys[:len(segment.keys)] == segment.keys:
            n = len(segment.keys)
            names = dict(segment.call_names)
            new = [self._canonical(m, names) for m in messages[n:]]
            try:
                delta = self._extension(segment, new)
            except Exception:  # noqa: BLE001 - retry without a tool role, as the rollout engine does
                if not any(m["role"] == "tool" for m in new):
                    raise self._render_error(messages) from None
                new = self._as_user(new)
                try:
                    delta = self._extension(segment, new)
                except Exception as e:  # noqa: BLE001
                    raise self._render_error(messages, e) from None
            return PreparedTurn(segment, False, delta + self._prefix_ids, new, keys[n:])
        names: dict[str, str] = {}
        for m in messages:
            for c in m.get("tool_calls") or ():
                names[c["id"]] = c["name"]
        shown = list(tools) if self.tool_schemas else []
        canon = self._with_tool_text([self._canonical(m, names) for m in messages], shown)
        try:
            ids = self._first(canon, shown)
        except Exception:  # noqa: BLE001
            canon = self._as_user(canon)
            try:
                ids = self._first(canon, shown)
            except Exception as e:  # noqa: BLE001
                raise self._render_error(messages, e) from None
        seg = Segment(index=next_index, mode="chat", tools=json_safe(shown), tools_key=tools_key, offered=bool(tools),
                      call_names=names)
        return PreparedTurn(seg, True, ids + self._prefix_ids, canon, keys)

    def _first(self, canon: list[dict[str, Any]], tools) -> list[int]:
        if canon[-1]["role"] == "assistant":
            raise ApiError("the last message must not be an assistant message (the server samples the next "
                           "assistant turn)", param="messages")
        return self.renderer.prompt_ids(canon, tools)

    def _extension(self, segment: Segment, new: list[dict[str, Any]]) -> list[int]:
        """The segment's rendering after its last sampled turn, then the generation prompt."""
        if new and new[-1]["role"] == "assistant":
            raise ApiError("the last message must not be an assistant message (the server samples the next "
                           "assistant turn)", param="messages")
        marker = "\u2063mtrl-gym-serve-turn\u2063"
        probe = [dict(m) for m in segment.messages] + new
        probe[len(segment.messages) - 1]["content"] = marker
        text = self.renderer.render(probe, segment.tools)
        tail = text[text.index(marker) + len(marker):]
        if segment.end_text and tail.startswith(segment.end_text):
            tail = tail[len(segment.end_text):]
        full = segment.messages + new
        return self.renderer.encode(tail) + self.renderer.generation_prompt_ids(full, segment.tools)

    @staticmethod
    def _render_error(messages, e: BaseException | None = None) -> ApiError:
        if isinstance(e, ApiError):
            return e
        why = f": {type(e).__name__}: {e}" if e is not None else ""
        roles = ", ".join(m["role"] for m in messages)
        return ApiError(f"the policy's chat template cannot render these messages (roles: {roles}){why}",
                        param="messages", code="template_error")

    def commit(self, turn: PreparedTurn, token_ids: list[int], logprobs: list[float], finish: str, *,
               reply: dict[str, Any], key: tuple, calls: int, prompt_tokens: int, cached_tokens: int) -> None:
        """Record a sampled turn (``reply``/``key`` from :func:`assistant_reply`)."""
        seg = turn.segment
        seg.append(turn.delta_ids, sampled=False)
        if turn.new_segment:  # the first prompt, as the rollout engine counts it: without the prefill
            seg.prompt_length = len(turn.delta_ids) - (len(self._prefix_ids) if seg.mode == "chat" else 0)
        start = len(seg.token_ids)
        seg.append(token_ids, sampled=True, logprobs=logprobs)
        seg.turn_spans.append((start, len(seg.token_ids)))
        seg.sampled_tokens += len(token_ids)
        seg.prefill_tokens += prompt_tokens - cached_tokens
        seg.cached_tokens += cached_tokens
        seg.cut_turns += finish == "length"
        seg.tool_calls += calls
        seg.format_errors += seg.offered and calls == 0
        if seg.mode != "chat":
            seg.end_text = self.renderer.split_assistant(token_ids)[1]
            return
        content, seg.end_text = self.turn_text(token_ids)
        seg.messages.extend(turn.new_messages)
        seg.messages.append({"role": "assistant", "content": content})
        seg.keys.extend(turn.new_keys)
        seg.keys.append(key)
        for call in reply.get("tool_calls") or ():
            seg.call_names[call["id"]] = call["function"]["name"]


def segment_trajectory(session: Session, seg: Segment, *, env_id: str = "agent") -> Trajectory:
    """A segment as a :class:`~mtrl_gym.rollout.trajectory.Trajectory` (reward and failure
    from the session; metrics are left to the caller)."""
    meta = session.meta
    t = Trajectory(task_id=str(meta.get("task_id", "")), env_id=str(meta.get("env_id", env_id)),
                   group_id=int(meta.get("group_id", 0)), sample_index=int(meta.get("sample_index", 0)),
                   seed=session.seed)
    t.token_ids, t.loss_mask, t.logprobs = list(seg.token_ids), list(seg.loss_mask), list(seg.logprobs)
    t.prompt_length, t.turn_spans = seg.prompt_length, list(seg.turn_spans)
    t.messages = [dict(m) for m in seg.messages]
    t.tools = list(seg.tools)
    t.prefill_tokens, t.cached_tokens, t.sampled_tokens = seg.prefill_tokens, seg.cached_tokens, seg.sampled_tokens
    if session.reward is not None:
        t.reward = float(session.reward)
    t.failed, t.failure_reason = session.failed, session.failure_reason
    return t
