"""How an environment's reply becomes chat messages — one rule for every agent loop.

The rollout engine (``mtrl_gym.rollout.template``) and the ``ChatHistory`` wrapper both turn
the result of ``env.step`` into OpenAI-style messages with :func:`env_reply_messages`, so
a model sees the same conversation in training, evaluation and wrapped environments.

>>> info = {"tool_results": [{"tool_call_id": "call_0", "name": "guess_word", "content": "CRANE: ..."}]}
>>> [m["role"] for m in env_reply_messages("CRANE: ...\\nGame over.", info)]
['tool', 'user']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["REPLY_MODES", "env_reply_messages"]

REPLY_MODES = ("auto", "tool", "user")


def env_reply_messages(observation: str, info: Mapping[str, Any], mode: str = "auto") -> list[dict[str, Any]]:
    """The chat messages for an environment reply (the result of one ``env.step``).

    * ``"tool"``: one ``tool`` message per entry of ``info["tool_results"]``; a user
      message with the observation when there are none.
    * ``"user"``: the observation as one user message.
    * ``"auto"`` (default): like ``"tool"``, plus a user message with any observation text
      the tool results do not already contain (an end-of-game note, a format hint), so the
      model never loses part of the observation. Envs that join their tool results with
      newlines at the start of the observation (the convention of mtrl_gym envs) give no
      duplicate text.
    """
    if mode not in REPLY_MODES:
        raise ValueError(f"reply mode must be one of {REPLY_MODES}, got {mode!r}")
    results = [r for r in info.get("tool_results") or () if isinstance(r, Mapping)] if mode != "user" else []
    if not results:
        return [{"role": "user", "content": observation}]
    messages = [{"role": "tool", "content": str(r.get("content", "")), "tool_call_id": str(r.get("tool_call_id", "")),
                 "name": str(r.get("name", ""))} for r in results]
    if mode == "auto":
        joined = "\n".join(m["content"] for m in messages)
        rest = observation[len(joined):] if observation.startswith(joined) else observation
        if rest.strip("\n"):
            messages.append({"role": "user", "content": rest.strip("\n")})
    return messages
