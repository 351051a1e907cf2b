"""Reference players for the seats of the multi-agent envs: opponents, scripted partners, baselines.

A policy is ``action = policy(observation_text, info)`` with ``reset(info, rng, **episode)``
called at the start of every game (the seat's reset info and a seeded generator), the
same protocol as the single-agent reference policies of the evaluation.

* ``mtrl/WordleDuel-v0``: ``solver`` (the entropy solver over the clues of both boards)
  and ``random`` (a random allowed word each turn).
* ``mtrl/SOP-CustomerCall-v0``: for the ``customer`` seat ``scripted`` (answers exactly what
  is asked, :func:`~mtrl_gym.envs.multiagent.customer_call.customer_reply`) and ``random``
  (a random fact); for the ``agent`` seat ``solver`` (asks for every detail once, then
  replays the domain's reference procedure) and ``random`` (a random tool call).

:func:`reference_policy` builds one by name for a made env.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.random_policy import RandomToolPolicy
from mtrl_gym.envs.wordle.profile import RandomWordPolicy  # the single-agent env's random player
from mtrl_gym.error import ConfigError
from mtrl_gym.parsing import format_tool_call

__all__ = ["DuelSolverPolicy", "RandomWordPolicy", "ScriptedCustomer", "RandomCustomer", "CallOraclePolicy",
           "RandomCallPolicy", "reference_policy", "policy_names", "play_game"]


class DuelSolverPolicy:
    """Wordle's entropy solver fed with the feedback of both boards (the seat's info after each cycle)."""

    def __init__(self) -> None:
        from mtrl_gym.envs.wordle.solver import WordleSolver

        self.solver = WordleSolver()
        self.history: list[tuple[str, list[str]]] = []

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        self.history = []

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        if not info.get("cycle"):
            self.history = []
        else:
            if info.get("valid") and info.get("feedback") is not None:
                self.history.append((info["guess"], list(info["feedback"])))
            if info.get("opponent_guess") and info.get("opponent_feedback") is not None:
                self.history.append((info["opponent_guess"], list(info["opponent_feedback"])))
        return format_tool_call("guess_word", {"guess": self.solver.next_guess(self.history)})


class ScriptedCustomer:
    """The deterministic customer: answers exactly the details a question asks for."""

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        pass

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        from mtrl_gym.envs.multiagent.customer_call import customer_reply

        return customer_reply(str(info.get("question") or ""), info.get("facts") or {})


class RandomCustomer:
    """A customer who answers every question with one of its details, at random."""

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        self._rng = rng

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        from mtrl_gym.envs.multiagent.customer_call import FACTS

        facts = info.get("facts") or {}
        key = list(FACTS)[int(self._rng.integers(len(FACTS)))]
        return f"{FACTS[key]}: {facts.get(key, '')}."


class CallOraclePolicy:
    """The agent seat's baseline: one question for every detail, then the domain's reference procedure.

    At reset it plays the domain's scripted oracle on a twin ``mtrl/SOP-CustomerService-v0``
    env with the call's world seed and difficulty (read from the game it is built for, as
    the single-agent oracle baseline does), and replays those calls after the customer's
    answer; the tool results are the same, since both worlds come from the same seed.
    """

    QUESTION = ("Could you tell me your account number, your name, your telephone passcode, the label on the "
                "faulty device and what the fault is?")

    def __init__(self, game: Any):
        from mtrl_gym.envs.sop.customer_service import CustomerServiceEnv

        self.game = game
        self._twin = CustomerServiceEnv(difficulty=game.console.difficulty)
        self._actions: list[str] = []

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        from mtrl_gym.envs.sop import OracleError, play_oracle

        task = self.game.console.task
        transcript: list[tuple[str, str]] = []
        try:
            play_oracle(self._twin, options={"task": {"id": "oracle", "seed": task["seed"],
                                                      "difficulty": task["difficulty"]}}, transcript=transcript)
        except OracleError:
            pass
        self._actions = [format_tool_call("ask_customer", {"question": self.QUESTION})] + [a for a, _ in transcript[1:]]

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        return self._actions.pop(0) if self._actions else ""


class RandomCallPolicy(RandomToolPolicy):
    """The agent seat's floor: a random tool of ``info["tools"]`` with arguments of the right
    types (the evaluation's generic ``random``); an empty message when the seat has no tools."""

    def no_tools(self) -> str:
        return ""


#: game class name -> seat -> policy name -> factory(game).
_POLICIES: dict[str, dict[str, dict[str, Any]]] = {
    "DuelGame": {seat: {"solver": lambda g: DuelSolverPolicy(), "random": lambda g: RandomWordPolicy()}
                 for seat in ("player_0", "player_1")},
    "CallGame": {"agent": {"solver": CallOraclePolicy, "random": lambda g: RandomCallPolicy()},
                 "customer": {"scripted": lambda g: ScriptedCustomer(), "random": lambda g: RandomCustomer()}},
}


def policy_names(env: Any, seat: str) -> list[str]:
    """The reference policies of ``seat`` in ``env`` (an AEC or Parallel env of this package)."""
    return sorted(_POLICIES.get(type(env.unwrapped.game).__name__, {}).get(seat, {}))


def reference_policy(env: Any, seat: str, name: str):
    """The reference policy ``name`` for ``seat`` of ``env``; unknown names list the known ones."""
    game = env.unwrapped.game
    seats = _POLICIES.get(type(game).__name__)
    if seats is None or seat not in seats:
        raise ConfigError(f"no reference policies for seat {seat!r} of {type(env.unwrapped).__name__}; its seats are "
                          f"{list(game.seats)}")
    if name not in seats[seat]:
        raise ConfigError(f"unknown policy {name!r} for seat {seat!r}; use one of {sorted(seats[seat])}")
    return seats[seat][name](game)


def play_game(env: Any, policies: Mapping[str, Any], *, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Play one game of a Parallel env with a policy per seat; ``{"rewards", "infos", "cycles", "texts"}``.

    Waiting seats are not asked. ``texts[seat]`` lists the seat's actions. Policy draws come
    from ``np.random.default_rng([seed, seat index])`` (seed 0 when None).
    """
    obs, infos = env.reset(seed=seed, options=dict(options) if options is not None else None)
    for i, seat in enumerate(env.possible_agents):
        policies[seat].reset(infos[seat], np.random.default_rng([seed or 0, i]))
    rewards = {s: 0.0 for s in env.possible_agents}
    texts: dict[str, list[str]] = {s: [] for s in env.possible_agents}
    cycles = 0
    while env.agents:
        actions = {}
        for seat in env.agents:
            if not infos[seat].get("waiting"):
                actions[seat] = str(policies[seat](obs[seat]["text"], infos[seat]))
                texts[seat].append(actions[seat])
        obs, step_rewards, _, _, infos = env.step(actions)
        cycles += 1
        for seat, r in step_rewards.items():
            rewards[seat] += r
    return {"rewards": rewards, "infos": infos, "cycles": cycles, "texts": texts}
