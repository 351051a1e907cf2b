"""An SOP domain's reference procedure played through an env's real text interface.

:func:`play_oracle` plays one episode with the domain's oracle (every call a
``<tool_call>`` message stepped through the env, the answer submitted with the ``submit``
tool); :class:`OracleError` says the oracle could not follow its procedure.
:class:`~mtrl_gym.envs.sop.replay.OracleReplay` builds the ``solver`` reference policy on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop.task_text import parse_task_inputs
from mtrl_gym.error import ConfigError, Error
from mtrl_gym.parsing import format_tool_call

__all__ = ["play_oracle", "OracleError"]


class OracleError(Error, RuntimeError):
    """The scripted oracle could not follow its procedure through the env (a bug in the domain)."""


def play_oracle(env: Any, *, seed: int | None = None, options: Mapping[str, Any] | None = None,
                transcript: list[tuple[str, str]] | None = None) -> tuple[float, dict[str, Any], int]:
    """Play one episode with the domain's oracle through ``env``'s real text interface.

    The oracle reads the task inputs from the first observation, every ``call`` is a
    ``<tool_call>`` message stepped through the env (its result decoded from the
    observation's tool result), and the answer is submitted with the ``submit`` tool.
    Returns ``(reward, final info, steps)``; ``transcript``, if given, receives the
    ``(action, observation)`` pairs, the reset observation first (action ``""``). Raises
    :class:`OracleError` when a call is rejected or the episode ends early.
    """
    sop_env = env.unwrapped
    if not callable(getattr(getattr(sop_env, "domain", None), "oracle", None)) or \
            getattr(sop_env, "final_answer", None) is None:  # an SOPEnv: a domain with its oracle, a final answer
        raise ConfigError(f"play_oracle needs an SOP env, got {type(sop_env).__name__}")
    obs, _ = env.reset(seed=seed, options=dict(options) if options is not None else None)
    inputs = parse_task_inputs(obs)
    steps = 0
    log = transcript if transcript is not None else []
    log.append(("", obs))

    def call(name: str, arguments: dict[str, Any]) -> Any:
        nonlocal steps
        text = format_tool_call(name, arguments)
        obs, _, terminated, truncated, info = env.step(text)
        log.append((text, obs))
        steps += 1
        outcome, content = info["tool_outcomes"][0], info["tool_results"][0]["content"]
        if terminated or truncated:
            raise OracleError(f"the episode ended at the oracle's call {name}({arguments}): {outcome['status']}")
        if outcome["status"] == "tool_error":
            raise ToolError(content.removeprefix("Error: "))
        if outcome["status"] != "ok":
            raise OracleError(f"the oracle's call {name}({arguments}) failed ({outcome['status']}): {content}")
        try:
            return json.loads(content)
        except ValueError:
            return content

    answer = sop_env.domain.oracle(inputs, call)
    submit = sop_env.final_answer.tool or "submit"
    text = format_tool_call(submit, {"answer": answer})
    obs, reward, terminated, truncated, info = env.step(text)
    log.append((text, obs))
    if not terminated:
        raise OracleError(f"the oracle's final answer was not accepted: {info['tool_results'][0]['content']}")
    return float(reward), info, steps + 1
