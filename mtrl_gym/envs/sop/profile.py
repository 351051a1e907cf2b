"""What the SOP envs tell the rest of mtrl_gym (their :class:`~mtrl_gym.envs.profile.EnvProfile`).

* **Splits.** ``train`` and ``val``: :func:`~mtrl_gym.envs.sop.tasks.generate_tasks` rows
  whose world seeds lie in disjoint ranges, :data:`SPLIT_SIZE` tasks unless ``n`` is given;
  the option ``difficulty`` (a dict of knobs) changes the worlds. ``val`` is held out.
* **Reference policies.** ``solver``: the domain's reference procedure, replayed as text
  (:class:`OracleReplay`).
* **Success.** The strict outcome: 1.0 exactly when every field is right.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np

from mtrl_gym.envs.profile import EnvProfile
from mtrl_gym.error import ConfigError

__all__ = ["sop_profile", "OracleReplay", "SPLIT_SIZE"]

#: Tasks of an SOP split when no ``n`` is given (the size of Wordle's validation split).
SPLIT_SIZE = 128


class OracleReplay:
    """An SOP domain's reference procedure as a text policy.

    At each reset the oracle plays the episode on a twin env (same registered id and
    arguments, same seed and task); its messages are then replayed in order, so the real
    env sees exactly the oracle's calls and answer. If the oracle cannot finish a task
    (:class:`~mtrl_gym.envs.sop.OracleError`), what it did is replayed and the episode
    ends like any other that stops short.
    """

    def __init__(self, env: gymnasium.Env):
        spec = env.unwrapped.spec
        if spec is None:
            raise ConfigError(f"the oracle policy needs a registered env (made with gymnasium.make), got "
                              f"{type(env.unwrapped).__name__} without a spec")
        self._twin = gymnasium.make(spec)
        self._actions: list[str] = []

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, *, seed: int | None = None,
              task: Mapping[str, Any] | None = None, **episode: Any) -> None:
        from mtrl_gym.envs.sop.base import OracleError, play_oracle

        transcript: list[tuple[str, str]] = []
        try:
            play_oracle(self._twin, seed=seed, options={"task": dict(task)} if task is not None else None,
                        transcript=transcript)
        except OracleError:
            pass
        self._actions = [action for action, _ in transcript[1:]]

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        return self._actions.pop(0) if self._actions else ""


def sop_profile(env_cls: type) -> EnvProfile:
    """The profile of an :class:`~mtrl_gym.envs.sop.SOPEnv` subclass (its class attribute ``domain``)."""
    domain = env_cls.domain

    def split(name: str):
        def make(n: int | None, seed: int | None, *, difficulty: Mapping[str, Any] | None = None) -> list[dict]:
            from mtrl_gym.envs.sop.tasks import generate_tasks

            return generate_tasks(domain, n or SPLIT_SIZE, seed=seed or 0, split=name, difficulty=difficulty)
        return make

    splits = {"train": split("train"), "val": split("val")} if domain is not None else {}
    return EnvProfile(splits=splits, eval_splits=frozenset({"val"}),
                      reference_policies={"solver": OracleReplay} if domain is not None else {},
                      success_threshold=float(env_cls.success_threshold))
