"""The external scorer: the bare environment's outcome, whatever wraps it.

Training often shapes the reward (format penalties, partial credit). An evaluation must
not score with that reward: a shaped reward can rise while the task's real success rate
falls. :class:`OutcomeRecorder` sits directly on the environment, *inside* any shaping
wrapper, and adds to every step's ``info``:

* ``eval/outcome_reward``: the bare env's reward summed over the episode so far;
* ``eval/success``: on the final step, the env's ``info["success"]`` when it reports one,
  else ``outcome_reward >= success_threshold`` of the unwrapped env;
* ``eval/invalid_actions``, ``eval/format_errors``, ``eval/tool_calls``: counts so far
  (a step is *invalid* when it has a format error, ``info["valid"] is False`` or a
  non-empty ``info["error"]``).

(System-prompt variants use :class:`mtrl_gym.wrappers.SystemPrompt`.)

It is a plain ``gymnasium.Wrapper``; it reads only what ``step`` returns.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium


__all__ = ["OutcomeRecorder", "success_threshold", "OUTCOME_KEYS"]

#: ``info`` keys written by :class:`OutcomeRecorder`.
OUTCOME_KEYS = ("eval/outcome_reward", "eval/success", "eval/invalid_actions", "eval/format_errors",
                "eval/tool_calls")


def success_threshold(env: gymnasium.Env) -> float | None:
    """The unwrapped env's ``success_threshold`` (``None`` when it defines none)."""
    value = getattr(env.unwrapped, "success_threshold", None)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _invalid(info: dict[str, Any]) -> bool:
    return bool(info.get("format_error")) or info.get("valid") is False or bool(info.get("error"))


class OutcomeRecorder(gymnasium.Wrapper):
    """Records the bare env's outcome reward and success into ``info`` (see module docstring).

    Wrap the env with this **first**, before any shaping wrapper.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self._threshold = success_threshold(env)
        self._clear()

    def _clear(self) -> None:
        self._reward = 0.0
        self._invalid = 0
        self._format_errors = 0
        self._tool_calls = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._clear()
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        self._reward += float(reward)
        self._invalid += _invalid(info)
        self._format_errors += bool(info.get("format_error"))
        self._tool_calls += len(info.get("tool_calls") or [])
        info["eval/outcome_reward"] = self._reward
        info["eval/invalid_actions"] = self._invalid
        info["eval/format_errors"] = self._format_errors
        info["eval/tool_calls"] = self._tool_calls
        if terminated or truncated:
            if isinstance(info.get("success"), (bool, int)):
                info["eval/success"] = bool(info["success"])
            elif self._threshold is not None:
                info["eval/success"] = self._reward >= self._threshold
            else:
                info["eval/success"] = False
        return obs, reward, terminated, truncated, info


