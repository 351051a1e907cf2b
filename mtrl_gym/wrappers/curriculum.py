"""Curriculum for Wordle: start each game with some guesses already played.

:class:`PriorGuesses` plays ``k`` guesses for the agent right after every reset (``k`` is
drawn from ``num_priors``, 0..4 by default) and shows them in the first observation. A
game that starts three guesses in is shorter and richer in clues, so a weak policy sees
solves early in training.

The priors are ordinary ``env.step`` calls with public tool-call actions; nothing is
written into the env. They never solve the game: a prior is always a word that *cannot*
be the secret given only public facts, which are

* the feedback so far: a word that contradicts it (a clue violation) cannot be the secret;
* whether the secret is on the answer list, which the env's reset ``info`` tells
  (``candidates_remaining`` is 1,923, one more for a secret outside the list): then every
  word on the other side of the list cannot be the secret either.

In hard mode a prior must also respect every clue, so it is drawn from the second kind
only; when no such word is left, fewer priors are played. Rewards are unchanged: the
outcome still counts guesses from 1, so a solve on the first free guess after ``k``
priors is guess ``k + 1``. Apply reward wrappers *outside* this one (they then see only
the agent's steps).

Policies (``policy=``): ``"random"`` draws uniformly from the safe words; ``"solver"``
plays the safe word whose feedback has the highest entropy over the remaining candidate
answers (the built-in solver's criterion), or a random safe word with probability
``epsilon``. Draws use a generator seeded from the ``reset`` seed.

>>> import gymnasium, mtrl_gym
>>> env = PriorGuesses(gymnasium.make("mtrl/Wordle-v0"), num_priors=2, policy="solver")
>>> obs, info = env.reset(seed=0)
>>> obs.splitlines()[1], info["guesses_used"]
('Some guesses have already been played for you:', 2)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.utils import RecordConstructorArgs

from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.game import COLOR_NAMES, MAX_GUESSES
from mtrl_gym.envs.wordle.knowledge import Knowledge, describe_feedback
from mtrl_gym.envs.wordle.solver import WordleSolver, feedback_entropies, format_guess
from mtrl_gym.error import ConfigError

__all__ = ["PriorGuesses", "PRIOR_POLICIES", "safe_prior_words"]

PRIOR_POLICIES = ("random", "solver")
_SEED_SALT = 0x5052494F  # "PRIO": separates this wrapper's stream from the env's


@functools.cache
def _answer_mask() -> np.ndarray:
    """Boolean mask over the allowed guesses: which are on the answer list."""
    index = game.allowed_index()
    mask = np.zeros(len(game.allowed_guesses()), dtype=bool)
    mask[[index[w] for w in game.answers()]] = True
    mask.flags.writeable = False
    return mask


@functools.cache
def _guess_letters() -> np.ndarray:
    return game.letters_of(game.allowed_guesses())


def safe_prior_words(history: Sequence[tuple[str, Sequence[str]]], *, secret_in_list: bool | None,
                     hard_mode: bool = False) -> np.ndarray:
    """Indices (into ``game.allowed_guesses()``) of words that cannot be the secret.

    Args:
        history: ``[(word, feedback names), ...]`` played so far.
        secret_in_list: whether the secret is on the answer list (``None``: unknown).
        hard_mode: keep only words consistent with every clue (legal in hard mode).
    """
    guesses = _guess_letters()
    consistent = np.ones(len(guesses), dtype=bool)
    for word, fb in history:  # a word could be the secret iff it would have given the same feedback
        code = game.pattern_code([COLOR_NAMES.index(c) for c in fb])
        consistent &= game.feedback_codes(game.letters_of([word]), guesses)[0] == code
    safe = ~consistent
    if secret_in_list is not None:
        safe |= _answer_mask() != secret_in_list
    if hard_mode:
        safe &= consistent
    safe[[game.allowed_index()[w] for w, _ in history if w in game.allowed_index()]] = False
    return np.flatnonzero(safe)


def _parse_range(num_priors: Any) -> tuple[int, int]:
    if isinstance(num_priors, (int, np.integer)) and not isinstance(num_priors, bool):
        lo = hi = int(num_priors)
    elif (isinstance(num_priors, Sequence) and len(num_priors) == 2
          and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in num_priors)):
        lo, hi = int(num_priors[0]), int(num_priors[1])
    else:
        raise ConfigError(f"`num_priors` must be an int or a (min, max) pair of ints, got {num_priors!r}")
    if not 0 <= lo <= hi <= MAX_GUESSES - 1:
        raise ConfigError(f"`num_priors` must satisfy 0 <= min <= max <= {MAX_GUESSES - 1} (the agent needs "
                          f"at least one guess), got {num_priors!r}")
    return lo, hi


class PriorGuesses(gymnasium.Wrapper, RecordConstructorArgs):
    """Start every Wordle game with ``k`` safe guesses already played (see the module docstring).

    Args:
        env: a Wordle env, with no reward or observation wrapper below this one.
        num_priors: ``k``, or the inclusive range ``(min, max)`` it is drawn from; at most 5.
        policy: ``"random"`` or ``"solver"``.
        epsilon: with ``policy="solver"``, probability of a random safe word instead.

    ``PriorGuesses(gymnasium.make("mtrl/Wordle-v0"), num_priors=(0, 4), policy="solver")``.
    Reset ``info`` gains ``prior_guesses`` (``[{"guess", "feedback"}]``) and its
    ``guesses_used``/``turns_used``/``candidates_remaining`` count the priors.
    """

    def __init__(self, env: gymnasium.Env, *, num_priors: int | tuple[int, int] = (0, 4),
                 policy: str = "random", epsilon: float = 0.2):
        RecordConstructorArgs.__init__(self, num_priors=num_priors, policy=policy, epsilon=epsilon)
        gymnasium.Wrapper.__init__(self, env)
        from mtrl_gym.envs.wordle.env import WordleEnv

        if not isinstance(env.unwrapped, WordleEnv):
            raise ConfigError(f"PriorGuesses needs a Wordle env, got {env.unwrapped!r}; "
                              'use gymnasium.make("mtrl/Wordle-v0")')
        _check_below(env)
        self.num_priors = _parse_range(num_priors)
        if policy not in PRIOR_POLICIES:
            raise ConfigError(f"`policy` must be one of {PRIOR_POLICIES}, got {policy!r}")
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0.0 <= epsilon <= 1.0:
            raise ConfigError(f"`epsilon` must be a number in [0, 1], got {epsilon!r}")
        self.policy = policy
        self.epsilon = float(epsilon)
        self.hard_mode = bool(getattr(env.unwrapped, "hard_mode", False))
        self._rng: np.random.Generator | None = None
        self._solver = WordleSolver()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if seed is not None or self._rng is None:
            self._rng = np.random.default_rng(None if seed is None else [int(seed), _SEED_SALT])
        lo, hi = self.num_priors
        k = int(self._rng.integers(lo, hi + 1))
        size = info.get("candidates_remaining")
        secret_in_list = None if size is None else size == len(game.answers())
        history: list[tuple[str, list[str]]] = []
        last: dict[str, Any] = {}
        for _ in range(k):
            word = self._choose(history, secret_in_list)
            if word is None:
                break
            _, _, terminated, truncated, step_info = self.env.step(format_guess(word))
            if truncated:
                raise ConfigError(f"the prior guesses used up the episode's step limit after {len(history) + 1} "
                                  f"steps; lower `num_priors` (now {self.num_priors}) or raise max_episode_steps")
            if terminated or not step_info.get("valid"):  # excluded by construction
                raise RuntimeError(f"prior guess {word!r} was not a safe play ({step_info.get('error')}, "
                                   f"terminated={terminated}); please report this bug")
            history.append((word, list(step_info["feedback"])))
            last = step_info
        if not history:
            return obs, {**info, "prior_guesses": []}
        info = {**info, "prior_guesses": [{"guess": w, "feedback": fb} for w, fb in history],
                "guesses_used": last["guesses_used"], "turns_used": last["turns_used"],
                "candidates_remaining": last["candidates_remaining"]}
        return self._first_observation(history), info

    def _choose(self, history: list[tuple[str, list[str]]], secret_in_list: bool | None) -> str | None:
        safe = safe_prior_words(history, secret_in_list=secret_in_list, hard_mode=self.hard_mode)
        if len(safe) == 0:
            return None
        words = game.allowed_guesses()
        if self.policy == "random" or self._rng.random() < self.epsilon:
            return words[safe[int(self._rng.integers(len(safe)))]]
        scores = feedback_entropies(self._solver.candidates(history))[safe]
        return words[safe[int(np.argmax(scores))]]  # ties: the first word in list order

    @staticmethod
    def _first_observation(history: list[tuple[str, list[str]]]) -> str:
        known = Knowledge()
        lines = [f"Let's play Wordle. I have chosen a secret 5-letter word. You have {MAX_GUESSES} guesses.",
                 "Some guesses have already been played for you:"]
        for i, (word, fb) in enumerate(history, start=1):
            codes = [COLOR_NAMES.index(c) for c in fb]
            known.update(word, codes)
            lines.append(f"Guess {i}/{MAX_GUESSES}: {word.upper()} - {describe_feedback(word, codes)}")
        lines.append(known.summary())
        lines.append(f"You have {MAX_GUESSES - len(history)} guesses left. "
                     "Make your next guess with the guess_word tool.")
        return "\n".join(lines)


def _check_below(env: gymnasium.Env) -> None:
    """Priors must be played on the bare game: no shaping or chat view underneath."""
    from mtrl_gym.wrappers.chat import ChatHistory
    from mtrl_gym.wrappers.shaping import BoundedShaping

    layer = env
    while isinstance(layer, gymnasium.Wrapper):
        if isinstance(layer, (BoundedShaping, ChatHistory)):
            raise ConfigError(f"PriorGuesses must be applied before {type(layer).__name__}: write "
                              f"{type(layer).__name__}(PriorGuesses(env)) so the pre-played guesses are "
                              "neither rewarded nor shown as agent turns")
        layer = layer.env
    if not isinstance(env.observation_space, spaces.Text):
        raise ConfigError(f"PriorGuesses needs Text observations, got {env.observation_space}")
