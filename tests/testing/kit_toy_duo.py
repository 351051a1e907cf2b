"""A small third-party PettingZoo game for the multi-agent kit tests, correct or broken on request.

Two seats each hold a secret word; every cycle each seat says something and sees the turn
number. ``parallel_env(broken="leak")`` puts the other seat's secret in ``player_0``'s info,
``broken="surrogate"`` raises on a lone surrogate in ``player_1``'s action, and
``broken="space"`` echoes ``player_1``'s action into its observation (outside the space) and
``broken="hash"`` orders an observation by ``hash()`` (differs under another ``PYTHONHASHSEED``),
``broken="tell"`` tells ``player_1`` the other word when it asks for the "secret".
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

pytest.importorskip("pettingzoo")  # also when pytest's doctest run imports this module

from pettingzoo import ParallelEnv  # noqa: E402
from pettingzoo.utils.conversions import parallel_to_aec  # noqa: E402

CHARSET = "".join(chr(i) for i in range(32, 127)) + "\n"
WORDS = ["amber", "cobalt", "sienna", "umber"]


class Duo(ParallelEnv):
    metadata = {"name": "kit_duo_v0", "is_parallelizable": True, "render_modes": []}

    def __init__(self, broken: str = "", render_mode=None):
        self.possible_agents = ["player_0", "player_1"]
        self.agents: list[str] = []
        self.broken, self.render_mode = broken, render_mode
        self._obs = {a: spaces.Dict({"text": spaces.Text(2000, min_length=0, charset=CHARSET)})
                     for a in self.possible_agents}
        self._act = {a: spaces.Text(100_000, min_length=0) for a in self.possible_agents}
        self.secrets: dict[str, str] = {}

    def observation_space(self, agent):
        return self._obs[agent]

    def action_space(self, agent):
        return self._act[agent]

    def reset(self, seed=None, options=None):
        rng = np.random.default_rng(seed)
        self.secrets = {a: f"{WORDS[int(rng.integers(len(WORDS)))]}-{a}" for a in self.possible_agents}
        self.agents, self.turn = list(self.possible_agents), 0
        return ({a: {"text": "Say anything."} for a in self.agents},
                {a: {"tools": [], "system_prompt": "Talk."} for a in self.agents})

    def step(self, actions):
        self.turn += 1
        said = {a: str(actions.get(a, "")) for a in self.agents}
        if self.broken == "surrogate":
            said["player_1"].encode("utf-8")
        obs = {a: {"text": f"turn {self.turn}"} for a in self.agents}
        if self.broken == "space":
            obs["player_1"] = {"text": said["player_1"][:50]}
        if self.broken == "tell" and "secret" in said["player_1"].lower():
            obs["player_1"] = {"text": f"It is {self.secrets['player_0']}."}
        if self.broken == "hash":
            obs["player_0"] = {"text": ",".join(sorted(set("abcdefghijklmnopqrstuvwxyz"), key=hash))}
        infos = {a: {"length": len(said[a])} for a in self.agents}
        if self.broken == "leak":
            infos["player_0"]["debug"] = {"other": [self.secrets["player_1"]]}
        done = self.turn >= 6
        rewards = {a: 0.0 for a in self.agents}
        terms = {a: done for a in self.agents}
        truncs = {a: False for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos


def parallel_env(**kwargs) -> Duo:
    return Duo(**kwargs)


def env(**kwargs):
    return parallel_to_aec(parallel_env(**kwargs))
