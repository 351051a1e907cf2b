"""One seat of a multi-agent env as a single-agent Gymnasium env, the other seats played by reference policies.

:class:`SeatEnv` is how single-agent tools (the rollout engine, ``mtrl-gym eval``,
``mtrl-gym play``, any Gymnasium agent loop) meet a multi-agent game: ``step(action)``
plays the seat's action, lets the opponents act (through every cycle in which the seat
is waiting), and returns what the seat observes next, with the rewards it earned in
between. The observation is the text (``obs["text"]`` of the multi-agent env).

>>> env = SeatEnv("mtrl/WordleDuel-v0", opponents={"player_1": "solver"})  # doctest: +SKIP
>>> obs, info = env.reset(seed=0)                                          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from mtrl_gym.envs.spaces import TextSpace
from mtrl_gym.error import ConfigError
from mtrl_gym.registry import normalize_id

__all__ = ["DEFAULT_OPPONENTS", "MATCH_OPPONENTS", "SeatEnv"]

#: Env id -> the policy that plays each seat the learner does not, by default.
DEFAULT_OPPONENTS: dict[str, str] = {"mtrl/WordleDuel-v0": "solver", "mtrl/SOP-CustomerCall-v0": "scripted"}
#: Env id -> the opponents an evaluation plays against by default (``mtrl-gym eval``).
MATCH_OPPONENTS: dict[str, tuple[str, ...]] = {"mtrl/WordleDuel-v0": ("solver", "random"),
                                               "mtrl/SOP-CustomerCall-v0": ("scripted", "random")}


class SeatEnv(gymnasium.Env[str, str]):
    """A seat of a multi-agent env; the others are played by text policies (see the module docstring).

    Args:
        env_id: a multi-agent id (``mtrl_gym.registry.list_multiagent_envs()``).
        seat: the seat this env plays (default: the first).
        opponents: seat -> reference policy name (:mod:`mtrl_gym.envs.multiagent.policies`) or a
            policy object, for every other seat (default: :data:`DEFAULT_OPPONENTS`).
        env_kwargs: arguments of the multi-agent env.

    ``reward_range`` and ``success_threshold`` are the game's; ``info`` is the seat's
    (``outcome`` at the end of a duel, ``success``, ...). :meth:`reference_policy` gives a
    reference player of this seat (``"solver"``, ``"random"``), for baselines.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, env_id: str, *, seat: str | None = None, opponents: Mapping[str, Any] | None = None,
                 render_mode: str | None = None, **env_kwargs: Any):
        from mtrl_gym.registry import make_multiagent

        self.env_id = env_id
        self.multi = make_multiagent(env_id, parallel=True, **env_kwargs)
        seats = list(self.multi.possible_agents)
        self.seat = seats[0] if seat is None else seat
        if self.seat not in seats:
            raise ConfigError(f"unknown seat {self.seat!r} for {env_id}; its seats are {seats}")
        given = dict(opponents or {})
        unknown = sorted(set(given) - set(seats) | ({self.seat} & set(given)))
        if unknown:
            raise ConfigError(f"`opponents` names {unknown}, which are not other seats of {env_id} "
                              f"(the learner plays {self.seat!r}; seats: {seats})")
        default = DEFAULT_OPPONENTS.get(normalize_id(env_id))
        self.opponents: dict[str, Any] = {}
        for s in seats:
            if s == self.seat:
                continue
            player = given.get(s, default)
            if player is None:
                raise ConfigError(f"give a policy for seat {s!r} of {env_id} in `opponents`")
            self.opponents[s] = self._policy(s, player) if isinstance(player, str) else player
        game = self.multi.unwrapped.game
        self.reward_range = game.reward_range
        self.success_threshold = getattr(game, "success_threshold", None)
        self.observation_space = TextSpace(game.observation_chars, min_length=0, charset=game.charset)
        self.action_space = spaces.Text(game.action_chars, min_length=0, charset=game.charset)
        self.render_mode = render_mode
        self._obs: dict[str, Any] = {}
        self._infos: dict[str, Any] = {}

    def _policy(self, seat: str, name: str):
        from mtrl_gym.envs.multiagent.policies import reference_policy

        return reference_policy(self.multi, seat, name)

    def profile(self):
        """The game's splits and success threshold, and the reference players of this seat."""
        import dataclasses

        from mtrl_gym.envs.multiagent.policies import policy_names
        from mtrl_gym.envs.profile import profile_of

        names = policy_names(self.multi, self.seat)
        return dataclasses.replace(profile_of(self.env_id), success_threshold=self.success_threshold, secret=None,
                                   reference_policies={n: (lambda env, n=n: env.unwrapped.reference_policy(n))
                                                       for n in names})

    def reference_policy(self, name: str):
        """A reference player of the learner's seat (``"solver"``, ``"random"``, ...), e.g. for baselines."""
        return self._policy(self.seat, name)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._obs, self._infos = self.multi.reset(seed=int(self.np_random.integers(2**31)) if seed is None else seed,
                                                  options=options)
        base = int(self.np_random.integers(2**31))
        for i, (s, policy) in enumerate(self.opponents.items()):
            policy.reset(self._infos[s], np.random.default_rng([base, i]))
        self._advance()  # the opponents' opening cycles, if the seat starts out waiting (no reward before a move)
        return self._text(), dict(self._infos[self.seat])

    def step(self, action: str):
        if not self.multi.agents:
            raise gymnasium.error.ResetNeeded("The episode has ended; call reset() before step().")
        reward, terminated, truncated = self._cycle({self.seat: action})
        if not (terminated or truncated):
            more, terminated, truncated = self._advance()
            reward += more
        return self._text(), reward, terminated, truncated, dict(self._infos[self.seat])

    def _cycle(self, actions: dict[str, Any]) -> tuple[float, bool, bool]:
        for s, policy in self.opponents.items():
            if not self._infos[s].get("waiting"):
                actions[s] = str(policy(self._text(s), self._infos[s]))
        self._obs, rewards, terms, truncs, self._infos = self.multi.step(actions)
        return float(rewards[self.seat]), bool(terms[self.seat]), bool(truncs[self.seat])

    def _advance(self) -> tuple[float, bool, bool]:
        """Play the cycles in which the learner's seat waits; the rewards it got and how the game stands."""
        reward, terminated, truncated = 0.0, False, False
        while self.multi.agents and self._infos[self.seat].get("waiting"):
            r, terminated, truncated = self._cycle({})
            reward += r
        return reward, terminated, truncated

    def _text(self, seat: str | None = None) -> str:
        obs = self._obs.get(seat or self.seat, {})
        return str(obs.get("text", "")) if isinstance(obs, Mapping) else str(obs)

    def render(self) -> str | None:
        return self._text() if self.render_mode == "ansi" else None

    def close(self) -> None:
        self.multi.close()
