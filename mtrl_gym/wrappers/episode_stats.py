"""``EpisodeStats``: an episode's play statistics in the bare environment's terms, in ``info``.

Training shapes the reward; a person reading a run wants what happened in the game. Put
:class:`EpisodeStats` *outside* every other wrapper (it then sees exactly the agent's turns,
not the moves a curriculum plays for it) and every step's ``info`` gets, for the episode so far:

* ``episode/outcome_reward``: the bare env's reward summed over the turns (a shaping layer's
  ``info["reward_components"]["outcome"]`` when there is one, else the step's reward);
* ``episode/turns``: the agent's turns;
* ``episode/<fact>_rate``: the share of turns where the env's per-turn fact ``<fact>`` held.

The facts come from the env profile's ``turn_facts(info) -> {name: bool}`` function, when it has
one (Wordle: ``valid_guess`` and ``new_word``, :mod:`mtrl_gym.envs.wordle.turn_facts`); an env
without it gets the outcome and turn count only. :func:`turn_facts_of` is the one place
that looks the hook up.

>>> import gymnasium, mtrl_gym
>>> from mtrl_gym.envs.wordle.solver import format_guess
>>> env = EpisodeStats(gymnasium.make("mtrl/Wordle-v0"))
>>> _ = env.reset(seed=0, options={"answer": "paste"})
>>> _ = env.step(format_guess("crane"))
>>> info = env.step(format_guess("crane"))[4]
>>> info["episode/turns"], info["episode/valid_guess_rate"], info["episode/new_word_rate"]
(2, 1.0, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium

__all__ = ["EpisodeStats", "turn_facts_of", "STATS_PREFIX"]

#: Prefix of the ``info`` keys :class:`EpisodeStats` writes.
STATS_PREFIX = "episode/"

TurnFacts = Callable[[Mapping[str, Any]], Mapping[str, bool]]


def turn_facts_of(env: gymnasium.Env) -> TurnFacts | None:
    """The per-turn facts function of ``env`` (its profile's ``turn_facts``), or None."""
    from mtrl_gym.envs.profile import profile_of

    return profile_of(env).turn_facts


def _outcome(reward: float, info: Mapping[str, Any]) -> float:
    comp = info.get("reward_components")
    if isinstance(comp, Mapping):
        value = comp.get("outcome")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return float(reward)


class EpisodeStats(gymnasium.Wrapper):
    """Adds the episode's outcome reward, turn count and per-turn fact rates to ``info``.

    Args:
        env: the (wrapped) environment; apply this wrapper last.
        facts: a ``turn_facts(info) -> {name: bool}`` function; default: the env's hook
            (:func:`turn_facts_of`).
    """

    def __init__(self, env: gymnasium.Env, facts: TurnFacts | None = None):
        super().__init__(env)
        self._facts = facts if facts is not None else turn_facts_of(env)
        self._clear()

    def _clear(self) -> None:
        self._outcome = 0.0
        self._turns = 0
        self._counts: dict[str, int] = {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._clear()
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        self._outcome += _outcome(float(reward), info)
        self._turns += 1
        if self._facts is not None:
            for name, held in self._facts(info).items():
                self._counts[name] = self._counts.get(name, 0) + bool(held)
        info[f"{STATS_PREFIX}outcome_reward"] = self._outcome
        info[f"{STATS_PREFIX}turns"] = self._turns
        for name, count in self._counts.items():
            info[f"{STATS_PREFIX}{name}_rate"] = count / self._turns
        return obs, reward, terminated, truncated, info
