"""The whole conversation as the observation: OpenAI-style chat messages.

:class:`ChatHistory` turns a text env's observation into the tuple of messages so far:
``system`` (``info["system_prompt"]`` at reset, when the env gives one), ``user`` (the first
observation), then for every step an ``assistant`` message with the raw action text and
the parsed ``tool_calls``, one ``tool`` message per ``info["tool_results"]`` entry (with
its ``tool_call_id``), and a ``user`` message with any observation text the tool results
do not contain (all of it when the action had no tool call).

Every message has the same five keys, so the observation space is a proper gymnasium
space, ``Sequence(Dict(role, content, name, tool_call_id, tool_calls))``; unused fields are
``""`` or ``()``. :func:`to_openai` drops them for an API request.

>>> import gymnasium, mtrl_gym
>>> env = ChatHistory(gymnasium.make("mtrl/Wordle-v0"))
>>> obs, _ = env.reset(seed=0)
>>> obs, *_ = env.step('<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>')
>>> [m["role"] for m in obs], obs[3]["tool_call_id"] == obs[2]["tool_calls"][0]["id"]
(['system', 'user', 'assistant', 'tool'], True)
>>> env.observation_space.contains(obs)
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
from gymnasium import spaces
from gymnasium.utils import RecordConstructorArgs

from mtrl_gym.error import ConfigError
from mtrl_gym.messages import env_reply_messages

__all__ = ["ChatHistory", "ChatText", "message_space", "to_openai", "MAX_MESSAGE_CHARS"]

#: Longest message content the observation space admits (actions are capped far lower).
MAX_MESSAGE_CHARS = 1_000_000
ROLES = ("system", "user", "assistant", "tool")


class ChatText(spaces.Text):
    """``Text`` that contains any Unicode string up to ``max_length`` characters.

    Chat content is model output, so no charset can be promised; ``charset`` (printable
    ASCII by default) is used only by :meth:`sample`.
    """

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"ChatText({self.min_length}, {self.max_length})"


def message_space(max_chars: int = MAX_MESSAGE_CHARS) -> spaces.Dict:
    """The space of one chat message (all five keys always present)."""
    short = ChatText(256, min_length=0)
    call = spaces.Dict({
        "id": short,
        "type": short,
        "function": spaces.Dict({"name": short, "arguments": ChatText(max_chars, min_length=0)}),
    })
    return spaces.Dict({
        "role": ChatText(16, min_length=1),
        "content": ChatText(max_chars, min_length=0),
        "name": short,
        "tool_call_id": short,
        "tool_calls": spaces.Sequence(call, stack=False),
    })


def _message(role: str, content: str, *, name: str = "", tool_call_id: str = "",
             tool_calls: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {"role": role, "content": content, "name": name, "tool_call_id": tool_call_id,
            "tool_calls": tool_calls}


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """An ``info["tool_calls"]`` entry in the OpenAI shape (arguments as a JSON string)."""
    return {"id": str(call.get("id", ""))[:256], "type": "function",
            "function": {"name": str(call.get("name", ""))[:256],
                         "arguments": json.dumps(call.get("arguments", {}), ensure_ascii=False, sort_keys=True,
                                                 default=repr)}}


def _reply_messages(observation: str, info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages for an env reply (:func:`mtrl_gym.messages.env_reply_messages`), space-shaped."""
    return [_message(m["role"], m["content"][:MAX_MESSAGE_CHARS], name=m.get("name", "")[:256],
                     tool_call_id=m.get("tool_call_id", "")[:256])
            for m in env_reply_messages(observation, info)]


def to_openai(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Plain OpenAI chat messages: empty ``name``/``tool_call_id``/``tool_calls`` dropped, lists not tuples."""
    out = []
    for m in messages:
        msg: dict[str, Any] = {"role": m["role"], "content": m["content"]}
        if m.get("name"):
            msg["name"] = m["name"]
        if m.get("tool_call_id"):
            msg["tool_call_id"] = m["tool_call_id"]
        if m.get("tool_calls"):
            msg["tool_calls"] = [{"id": c["id"], "type": c["type"], "function": dict(c["function"])}
                                 for c in m["tool_calls"]]
        out.append(msg)
    return out


class ChatHistory(gymnasium.Wrapper, RecordConstructorArgs):
    """Observation = the conversation so far, as a tuple of chat messages.

    Args:
        env: a text env (``Text`` observations) following the mtrl_gym info contract.
        max_history: keep only the last ``max_history`` turns (an assistant message and
            the replies to it) after the system and first user messages; ``None`` keeps all.

    ``ChatHistory(gymnasium.make("mtrl/Wordle-v0"), max_history=4)``. Actions are still the
    raw assistant text. With ``gymnasium.make_vec(..., vectorization_mode="async")`` pass
    ``vector_kwargs={"shared_memory": False}`` (a ``Sequence`` space has no fixed size).
    """

    def __init__(self, env: gymnasium.Env, *, max_history: int | None = None):
        RecordConstructorArgs.__init__(self, max_history=max_history)
        gymnasium.Wrapper.__init__(self, env)
        if not isinstance(env.observation_space, spaces.Text):
            raise ConfigError(f"ChatHistory needs an env with Text observations, got {env.observation_space}; "
                              "apply it directly to a text env (before other observation wrappers)")
        if max_history is not None and (isinstance(max_history, bool) or not isinstance(max_history, int)
                                        or max_history < 1):
            raise ConfigError(f"`max_history` must be an int >= 1 (turns kept) or None (keep all), "
                              f"got {max_history!r}")
        self.max_history = max_history
        self.observation_space = spaces.Sequence(message_space(), stack=False)
        self._head: list[dict[str, Any]] = []
        self._turns: list[list[dict[str, Any]]] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        system = info.get("system_prompt")
        self._head = [_message("system", system[:MAX_MESSAGE_CHARS])] if isinstance(system, str) and system else []
        self._head.append(_message("user", str(obs)[:MAX_MESSAGE_CHARS]))
        self._turns = []
        return self._observation(), info

    def step(self, action: str):
        obs, reward, terminated, truncated, info = self.env.step(action)
        calls = tuple(_tool_call(c) for c in info.get("tool_calls") or () if isinstance(c, Mapping))
        turn = [_message("assistant", str(action)[:MAX_MESSAGE_CHARS], tool_calls=calls)]
        turn += _reply_messages(str(obs)[:MAX_MESSAGE_CHARS], info)
        self._turns.append(turn)
        if self.max_history is not None and len(self._turns) > self.max_history:
            del self._turns[:-self.max_history]
        return self._observation(), reward, terminated, truncated, info

    def _observation(self) -> tuple[dict[str, Any], ...]:
        """Fresh message dicts every time, so a caller that edits one changes nothing here."""
        messages = self._head + [m for turn in self._turns for m in turn]
        return tuple({**m, "tool_calls": tuple({**c, "function": dict(c["function"])} for c in m["tool_calls"])}
                     for m in messages)
