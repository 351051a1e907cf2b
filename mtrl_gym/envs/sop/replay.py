"""An SOP domain's reference procedure as a text policy (for baselines and demonstrations).

:class:`OracleReplay` plays each episode's oracle (:func:`~mtrl_gym.envs.sop.oracle.play_oracle`)
on a twin env at reset and then replays its messages one by one, so the real env (and
anything recording it, such as the rollout engine) sees exactly the oracle's calls and
answer. The policy interface is the reference-policy one: ``reset(info, rng, seed=,
task=)``, then ``action = policy(observation, info)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np

from mtrl_gym.envs.sop.oracle import OracleError, play_oracle
from mtrl_gym.error import ConfigError

__all__ = ["OracleReplay"]


class OracleReplay:
    """An SOP domain's reference procedure as a text policy.

    At each reset the oracle plays the episode on a twin env (same registered id and
    arguments, same seed and task); its messages are then replayed in order, so the real
    env sees exactly the oracle's calls and answer. If the oracle cannot finish a task
    (:class:`~mtrl_gym.envs.sop.oracle.OracleError`), what it did is replayed and the episode
    ends like any other that stops short.
    """

    def __init__(self, env: gymnasium.Env):
        spec = env.unwrapped.spec
        if spec is None:
            raise ConfigError(f"the oracle baseline needs a registered env (made with gymnasium.make), got "
                              f"{type(env.unwrapped).__name__} without a spec")
        self._twin = gymnasium.make(spec)
        self._actions: list[str] = []

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, *, seed: int | None = None,
              task: Mapping[str, Any] | None = None, **episode: Any) -> None:
        transcript: list[tuple[str, str]] = []
        try:
            play_oracle(self._twin, seed=seed, options={"task": dict(task)} if task is not None else None,
                        transcript=transcript)
        except OracleError:
            pass
        self._actions = [action for action, _ in transcript[1:]]

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        return self._actions.pop(0) if self._actions else ""
