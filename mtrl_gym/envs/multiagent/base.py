"""The shared machinery of the multi-agent text envs: one cycle-based game behind both PettingZoo APIs.

A multi-agent env here is a :class:`CycleGame`: in every *cycle* each seat may act once,
the game resolves the cycle's actions together, and every seat's observation, reward and
``info`` change only at the end of a cycle. :class:`CycleAECEnv` (PettingZoo's AEC API:
seats act in turn order within a cycle) and :class:`CycleParallelEnv` (the Parallel API:
one ``step`` per cycle) are thin views of the same game, so the two APIs play a seeded
game identically by construction.

A seat whose action a cycle ignores (the customer while nobody asked it anything, a Wordle
player out of guesses) is *waiting*: its ``info["waiting"]`` is True, any action (``None``
too) is accepted and ignored, and a rollout loop need not ask a model.

Observations are ``{"text": str}`` in a ``Dict({"text": Text})`` space, not a bare
``Text``: ``pettingzoo.test.api_test`` (1.27, gymnasium 1.4) compares the observation
space's ``dtype`` with the observation's, which a ``str`` does not have, while it checks a
top-level ``Dict`` only under the key ``"observation"``. The dict form passes every
PettingZoo checker unchanged and leaves room for structured fields; ``obs["text"]`` is what
a model reads.

PettingZoo is optional (``pip install "mtrl-gym[pettingzoo]"``); ``import mtrl_gym`` never
imports this module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from mtrl_gym.envs.spaces import TextSpace
from mtrl_gym.error import ConfigError, DependencyNotInstalled

try:
    from pettingzoo import AECEnv, ParallelEnv
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise DependencyNotInstalled("pettingzoo", extra="pettingzoo") from e

__all__ = ["CycleGame", "SeatUpdate", "CycleAECEnv", "CycleParallelEnv", "text_observation_space", "OBS_KEY",
           "check_max_cycles"]

#: The key of the text in every observation dict.
OBS_KEY = "text"


def text_observation_space(max_chars: int, charset: str) -> spaces.Dict:
    """``Dict({"text": TextSpace(max_chars)})``: the observation space of every seat."""
    return spaces.Dict({OBS_KEY: TextSpace(max_chars, min_length=0, charset=charset)})


def check_max_cycles(max_cycles: Any) -> int:
    """``max_cycles`` as an int >= 1, or :class:`ConfigError`."""
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, (int, np.integer)) or max_cycles < 1:
        raise ConfigError(f"`max_cycles` must be an int >= 1, got {max_cycles!r}")
    return int(max_cycles)


@dataclass
class SeatUpdate:
    """What one seat gets at reset or at the end of a cycle."""

    text: str
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class CycleGame(ABC):
    """The rules of a multi-agent text game, resolved one cycle at a time.

    Subclasses set the class attributes and implement :meth:`reset`, :meth:`waiting` and
    :meth:`resolve`. Every random draw uses the ``rng`` given to :meth:`reset`, so the same
    seed and actions give the same updates in every process. Every update's ``info``
    carries ``waiting`` (the seat's next action is ignored); the game sets it.
    """

    seats: tuple[str, ...] = ()
    """Seat names in turn order (PettingZoo's ``possible_agents``)."""
    observation_chars: int = 8192
    action_chars: int = 100_000
    charset: str = ""
    """Characters observations and actions may contain."""
    reward_range: tuple[float, float] = (-1.0, 1.0)
    """Lowest and highest reward of a seat in one game."""

    def __init__(self, max_cycles: int):
        self.max_cycles = check_max_cycles(max_cycles)

    @abstractmethod
    def reset(self, rng: np.random.Generator, options: Mapping[str, Any]) -> dict[str, SeatUpdate]:
        """Start a game; every seat's first update (``info``: ``system_prompt``, ``tools``, ``task_id``, ...)."""

    @abstractmethod
    def waiting(self, seat: str) -> bool:
        """Whether ``seat``'s action in the coming cycle is ignored."""

    @abstractmethod
    def resolve(self, actions: Mapping[str, str | None]) -> dict[str, SeatUpdate]:
        """Play one cycle and update every seat (``actions[seat]`` is None for a waiting seat).

        The game truncates itself (every update ``truncated``) at the end of cycle
        :attr:`max_cycles` if it has not ended.
        """


def _action_text(action: Any) -> str:
    return action if isinstance(action, str) else ("" if action is None else str(action))


class _Views:
    """What both API views share: the game, the seeded RNG and one cached space per seat."""

    game_class: type[CycleGame]
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "is_parallelizable": True}

    def _setup(self, render_mode: str | None, game_kwargs: Mapping[str, Any]) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"`render_mode` must be one of {self.metadata['render_modes']} or None, "
                              f"got {render_mode!r}")
        self.render_mode = render_mode
        self.game = self.game_class(**game_kwargs)
        self.possible_agents = list(self.game.seats)
        self.agents: list[str] = []
        self._obs_spaces = {s: text_observation_space(self.game.observation_chars, self.game.charset)
                            for s in self.game.seats}
        self._act_spaces = {s: spaces.Text(self.game.action_chars, min_length=0, charset=self.game.charset)
                            for s in self.game.seats}
        self._np_random, _ = seeding.np_random()
        self._texts: dict[str, str] = {}

    @property
    def max_cycles(self) -> int:
        return self.game.max_cycles

    @max_cycles.setter
    def max_cycles(self, value: int) -> None:  # parallel_api_test assigns it
        self.game.max_cycles = check_max_cycles(value)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_spaces[agent]

    def _start(self, seed: int | None, options: dict[str, Any] | None) -> dict[str, SeatUpdate]:
        if seed is not None or not hasattr(self, "_seeded"):
            self._np_random, _ = seeding.np_random(seed)
            self._seeded = True
        updates = self.game.reset(self._np_random, dict(options or {}))
        self.agents = list(self.game.seats)
        self._texts = {s: u.text for s, u in updates.items()}
        return updates

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n\n".join(f"[{s}]\n{t}" for s, t in self._texts.items())

    def close(self) -> None:
        pass


class CycleAECEnv(_Views, AECEnv):
    """The AEC view of a :class:`CycleGame`: seats act in turn order; a cycle resolves after the last seat.

    Rewards, observations and infos of every seat change when a cycle resolves; until
    then a seat observes what the previous cycle left it (the reset text at first).
    Subclasses set :attr:`game_class` and pass game arguments as keywords.
    """

    def __init__(self, *, render_mode: str | None = None, **game_kwargs: Any):
        super().__init__()
        self._setup(render_mode, game_kwargs)
        self._pending: dict[str, str | None] = {}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        updates = self._start(seed, options)
        self.rewards = {s: 0.0 for s in self.agents}
        self._cumulative_rewards = {s: 0.0 for s in self.agents}
        self.terminations = {s: False for s in self.agents}
        self.truncations = {s: False for s in self.agents}
        self.infos = {s: updates[s].info for s in self.agents}
        self._pending = {}
        self._turn = 0
        self.agent_selection = self.agents[0]

    def observe(self, agent: str) -> dict[str, str]:
        return {OBS_KEY: self._texts[agent]}

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._pending[agent] = None if self.game.waiting(agent) else _action_text(action)
        self._turn += 1
        if self._turn < len(self.agents):
            self._clear_rewards()
        else:
            updates = self.game.resolve(self._pending)
            self._pending, self._turn = {}, 0
            for s in self.agents:
                u = updates[s]
                self._texts[s] = u.text
                self.rewards[s] = float(u.reward)
                self.terminations[s], self.truncations[s] = bool(u.terminated), bool(u.truncated)
                self.infos[s] = u.info
        self.agent_selection = self.agents[self._turn]
        self._accumulate_rewards()


class CycleParallelEnv(_Views, ParallelEnv):
    """The Parallel view of a :class:`CycleGame`: one ``step`` plays one cycle.

    ``step(actions)`` takes one action per live seat; a waiting seat's action (or its
    absence) is ignored. When the game ends every seat leaves ``agents``.
    """

    def __init__(self, *, render_mode: str | None = None, **game_kwargs: Any):
        self._setup(render_mode, game_kwargs)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        updates = self._start(seed, options)
        return ({s: {OBS_KEY: updates[s].text} for s in self.agents}, {s: updates[s].info for s in self.agents})

    def step(self, actions: Mapping[str, Any]):
        if not self.agents:
            raise RuntimeError("the game has ended; call reset() before step()")
        pending = {s: None if self.game.waiting(s) else _action_text(actions.get(s)) for s in self.agents}
        updates = self.game.resolve(pending)
        seats = list(self.agents)
        self._texts = {s: updates[s].text for s in seats}
        obs = {s: {OBS_KEY: updates[s].text} for s in seats}
        rewards = {s: float(updates[s].reward) for s in seats}
        terminations = {s: bool(updates[s].terminated) for s in seats}
        truncations = {s: bool(updates[s].truncated) for s in seats}
        infos = {s: updates[s].info for s in seats}
        if any(terminations.values()) or any(truncations.values()):
            self.agents = []
        return obs, rewards, terminations, truncations, infos
