"""Reference policies and the text-policy episode loop.

A report places each model between two reference rows played through the same env,
tasks and seeds:

* ``solver``: the env's built-in near-optimal player. Wordle: the entropy solver
  (:class:`mtrl_gym.envs.wordle.solver.SolverPolicy`, hard-mode aware). SOP domains: the
  domain's reference procedure (:func:`mtrl_gym.envs.sop.play_oracle`), played at each
  reset on a twin env with the same seed and task and then replayed message by message.
  Envs without one raise :class:`~mtrl_gym.error.ConfigError`.
* ``random``: Wordle plays a uniformly random allowed word every turn, as a well-formed
  tool call. Any other env gets a random call of a random tool from ``info["tools"]``
  with arguments drawn from each parameter's JSON-schema type (``enum`` values, short
  random words for strings, integers in [0, 100], ...), or a random word of text when the
  env has no tools.

A policy is a callable ``action = policy(observation, info)`` with
``reset(info, rng, seed=..., task=...)`` called after every ``env.reset`` (the reset info,
a generator seeded per episode, and the episode's reset seed and task row). :func:`play_episode` runs one
episode and returns a :class:`~mtrl_gym.trainers.trajectory.Trajectory` like the rollout
engine's, with the token fields left empty.
"""

from __future__ import annotations

import json
import string
import time
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np

from mtrl_gym.envs.sop.replay import OracleReplay
from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.chat import env_reply_messages
from mtrl_gym.trainers.rollout_metrics import episode_metrics
from mtrl_gym.trainers.trajectory import Trajectory, json_safe

__all__ = ["make_policy", "play_episode", "RandomWordlePolicy", "RandomToolPolicy", "SolverBaseline", "OracleReplay",
           "POLICY_MAX_TURNS", "TOKEN_METRICS"]

#: Turn cap of a policy episode when the evaluation sets no ``max_turns``.
POLICY_MAX_TURNS = 64
#: Per-episode metrics about tokens, which policy episodes do not have.
TOKEN_METRICS = frozenset({"prompt_tokens", "sampled_tokens", "env_tokens", "total_tokens", "prefill_tokens",
                           "cached_tokens", "cut_turns"})


def _tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": dict(arguments)}) + "</tool_call>"


class SolverBaseline:
    """Wordle's entropy solver (hard-mode aware) as a reference policy."""

    def __init__(self, hard_mode: bool = False):
        from mtrl_gym.envs.wordle.solver import SolverPolicy, WordleSolver

        self._policy = SolverPolicy(WordleSolver(hard_mode=hard_mode))

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        self._policy.reset()

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        return self._policy(observation, dict(info))


class RandomWordlePolicy:
    """A uniformly random allowed Wordle word each turn, as a ``guess_word`` tool call."""

    def __init__(self) -> None:
        from mtrl_gym.envs.wordle.game import allowed_guesses

        self._words = allowed_guesses()
        self._rng = np.random.default_rng(0)

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        self._rng = rng

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        return _tool_call("guess_word", {"guess": self._words[int(self._rng.integers(len(self._words)))]})


class RandomToolPolicy:
    """A random call of a random tool of ``info["tools"]`` (random text when there are none)."""

    def __init__(self) -> None:
        self._tools: list[dict[str, Any]] = []
        self._rng = np.random.default_rng(0)

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        self._tools = [t.get("function", t) for t in info.get("tools") or [] if isinstance(t, Mapping)]
        self._rng = rng

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        if not self._tools:
            return self._word()
        fn = self._tools[int(self._rng.integers(len(self._tools)))]
        props = (fn.get("parameters") or {}).get("properties") or {}
        return _tool_call(str(fn.get("name", "")), {k: self._value(v) for k, v in props.items()})

    def _word(self) -> str:
        letters = string.ascii_lowercase
        return "".join(letters[int(i)] for i in self._rng.integers(len(letters), size=int(self._rng.integers(1, 9))))

    def _value(self, schema: Any) -> Any:
        schema = schema if isinstance(schema, Mapping) else {}
        if schema.get("enum"):
            return schema["enum"][int(self._rng.integers(len(schema["enum"])))]
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = kind[0] if kind else None
        if kind == "integer":
            return int(self._rng.integers(0, 101))
        if kind == "number":
            return round(float(self._rng.uniform(0, 100)), 2)
        if kind == "boolean":
            return bool(self._rng.integers(2))
        if kind == "array":
            return [self._value(schema.get("items"))] if self._rng.integers(2) else []
        if kind == "object":
            return {k: self._value(v) for k, v in (schema.get("properties") or {}).items()}
        return self._word()


def _is_sop(env: gymnasium.Env) -> bool:
    try:
        from mtrl_gym.envs.sop.base import SOPEnv
    except ImportError:
        return False
    return isinstance(env.unwrapped, SOPEnv)


def make_policy(name: str, env: gymnasium.Env):
    """The reference policy ``name`` (``"solver"`` or ``"random"``) for ``env``."""
    from mtrl_gym.envs.wordle.env import WordleEnv

    wordle = isinstance(env.unwrapped, WordleEnv)
    if name == "solver":
        if wordle:
            return SolverBaseline(hard_mode=bool(getattr(env.unwrapped, "hard_mode", False)))
        if _is_sop(env):
            return OracleReplay(env)
        raise ConfigError(f"no built-in solver for {env.unwrapped.__class__.__name__}; the solver baseline exists "
                          "for the Wordle and SOP envs. Use --policy random, or leave it out")
    if name == "random":
        return RandomWordlePolicy() if wordle else RandomToolPolicy()
    raise ConfigError(f"unknown policy {name!r}; use 'solver' or 'random'")


def play_episode(env: gymnasium.Env, policy, task: Mapping[str, Any] | None, *, seed: int, task_index: int,
                 sample_index: int, env_id: str, max_turns: int | None, failure_reward: float) -> Trajectory:
    """Play one episode of ``policy`` and return its trajectory (token fields empty).

    The random draws of the policy come from ``np.random.default_rng([seed, task_index,
    sample_index])``. An exception in the env or the policy gives a failed trajectory with
    ``failure_reward``, like the rollout engine.
    """
    traj = Trajectory(task_id=str((task or {}).get("id", "")), env_id=env_id, group_id=task_index,
                      sample_index=sample_index, seed=seed)
    start = time.monotonic()
    tool_calls = format_errors = turns = 0
    try:
        obs, info = env.reset(seed=seed, options={"task": dict(task)} if task is not None else None)
        traj.task_id = str(info.get("task_id") or traj.task_id)
        traj.tools = json_safe(list(info.get("tools") or []))
        system = str(info.get("system_prompt") or "")
        traj.messages = ([{"role": "system", "content": system}] if system else []) + \
            [{"role": "user", "content": str(obs)}]
        policy.reset(info, np.random.default_rng([seed, task_index, sample_index]), seed=seed, task=task)
        limit = max_turns or POLICY_MAX_TURNS
        stop = "max_turns"
        for _ in range(limit):
            action = str(policy(obs, info))
            traj.messages.append({"role": "assistant", "content": action})
            obs, reward, terminated, truncated, info = env.step(action)
            turns += 1
            traj.turn_rewards.append(float(reward))
            tool_calls += len(info.get("tool_calls") or [])
            format_errors += bool(info.get("format_error"))
            traj.final_info = json_safe(dict(info))
            traj.messages.extend(env_reply_messages(str(obs), info))
            if terminated or truncated:
                traj.terminated, traj.truncated = bool(terminated), bool(truncated)
                stop = "terminated" if terminated else "truncated"
                break
        traj.stop_reason = stop
        traj.reward = float(sum(traj.turn_rewards))
    except Exception as e:  # noqa: BLE001 - one broken episode never stops an evaluation
        traj.failed, traj.stop_reason = True, "failed"
        traj.failure_reason = f"policy episode: {type(e).__name__}: {e}"
        traj.reward = float(failure_reward)
    metrics = episode_metrics(traj, tool_calls=tool_calls, format_errors=format_errors, cut_turns=0,
                              wall_time_s=time.monotonic() - start)
    # A text policy has turns but no tokens: count the turns here, drop the token numbers.
    metrics["turns"] = float(turns)
    metrics["format_error_rate"] = format_errors / turns if turns else 0.0
    traj.metrics = {k: v for k, v in metrics.items() if k not in TOKEN_METRICS}
    return traj
