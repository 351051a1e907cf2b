"""Reference policies and the text-policy episode loop.

A report places each model between two reference rows played through the same env,
tasks and seeds:

* the env's own reference policies, from its profile (:func:`mtrl_gym.envs.profile_of`):
  Wordle's entropy ``solver`` and ``random`` word player, an SOP domain's reference
  procedure as ``solver``, ... Asking for a policy the env does not have raises
  :class:`~mtrl_gym.error.ConfigError` naming the ones it has.
* ``random`` for any other env: a random call of a random tool from ``info["tools"]``
  with arguments drawn from each parameter's JSON-schema type (``enum`` values, short
  random words for strings, integers in [0, 100], ...), or a random word of text when the
  env has no tools.

A policy is a callable ``action = policy(observation, info)`` with
``reset(info, rng, seed=..., task=...)`` called after every ``env.reset`` (the reset info,
a generator seeded per episode, and the episode's reset seed and task row). :func:`play_episode` runs one
episode and returns a :class:`~mtrl_gym.rollout.trajectory.Trajectory` like the rollout
engine's, with the token fields left empty.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np

from mtrl_gym.envs.random_policy import RandomToolPolicy
from mtrl_gym.rollout.template import env_reply_messages
from mtrl_gym.rollout.metrics import episode_metrics
from mtrl_gym.rollout.trajectory import Trajectory, json_safe, turn_record

__all__ = ["make_policy", "play_episode", "RandomToolPolicy", "POLICY_MAX_TURNS", "TOKEN_METRICS"]

#: Turn cap of a policy episode when the evaluation sets no ``max_turns``.
POLICY_MAX_TURNS = 64
#: Per-episode metrics about tokens, which policy episodes do not have.
TOKEN_METRICS = frozenset({"prompt_tokens", "sampled_tokens", "env_tokens", "total_tokens", "prefill_tokens",
                           "cached_tokens", "cut_turns"})


def make_policy(name: str, env: gymnasium.Env):
    """The reference policy ``name`` for ``env``: one of its profile's, or the generic ``random``."""
    from mtrl_gym.envs.profile import profile_of

    return profile_of(env).policy(name, env, fallbacks={"random": lambda env: RandomToolPolicy()})


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
            traj.turn_info.append(turn_record(info))
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
