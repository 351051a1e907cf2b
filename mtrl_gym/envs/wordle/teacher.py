"""A Wordle teacher for demonstrations: a strong opener, then only words that fit the clues.

:class:`ConsistentTeacher` is the reference policy that expert games for supervised
fine-tuning are made from. Its first guess is drawn (seeded) from :data:`STRONG_OPENERS`,
the answers whose feedback over the answer list carries the most information; every later
guess is an answer still *consistent with all feedback so far* (it could be the secret).
Such a teacher solves ~97 % of games, and, unlike the entropy solver, never makes an
information probe that breaks the clues: every guess it shows a model is one the board
allows, which is what a small model can learn to imitate.

How the next guess is picked among the candidates (``choice=``):

* ``"ranked"`` (default, low entropy): the candidate with the most common letters (the
  sum, over its distinct letters, of how many answers contain the letter). The same
  board always gets the same word, which a small model imitates from far fewer examples.
* ``"random"``: a uniform, seeded pick among the candidates (high entropy).
* ``"solver"``: the entropy solver's guess (:class:`~mtrl_gym.envs.wordle.solver.WordleSolver`),
  kept as an option; its later guesses often break the clues on purpose.

The policy interface is the evaluation's reference-policy one: ``reset(info, rng, seed=,
task=)`` after every ``env.reset``, then ``action = policy(observation, info)``; the action
is the canonical tool call (:func:`~mtrl_gym.envs.wordle.solver.format_guess`). It reads
``guess``/``feedback``/``valid`` from ``info`` and the pre-played guesses of
:class:`~mtrl_gym.wrappers.PriorGuesses` from the reset info (``prior_guesses``).

>>> import gymnasium, mtrl_gym, numpy as np
>>> env = gymnasium.make("mtrl/Wordle-v0")
>>> teacher = ConsistentTeacher()
>>> obs, info = env.reset(seed=0, options={"answer": "paste"})
>>> teacher.reset(info, np.random.default_rng(0))
>>> done = False
>>> while not done:
...     obs, reward, done, _, info = env.step(teacher(obs, info))
>>> info["solved"]
True
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.solver import WordleSolver, format_guess
from mtrl_gym.error import ConfigError

__all__ = ["ConsistentTeacher", "STRONG_OPENERS", "TEACHER_CHOICES", "consistent_answers", "letter_scores"]

#: Openers the teacher draws its first guess from: answers with the highest feedback
#: entropy over the answer list (all of them are on the answer list themselves).
STRONG_OPENERS = ("slate", "crane", "trace", "crate", "slant", "least", "stale", "arise", "raise", "irate")
TEACHER_CHOICES = ("ranked", "random", "solver")


@functools.cache
def letter_scores() -> np.ndarray:
    """``[len(answers)]``: per answer, the sum over its distinct letters of how many answers
    contain that letter (how common its letters are)."""
    answers = game.answers()
    counts = {c: sum(c in w for w in answers) for c in "abcdefghijklmnopqrstuvwxyz"}
    scores = np.array([sum(counts[c] for c in set(w)) for w in answers], dtype=np.float64)
    scores.flags.writeable = False
    return scores


def consistent_answers(history: Sequence[tuple[str, Sequence]]) -> np.ndarray:
    """Indices (into :func:`game.answers`) of the answers consistent with every
    ``(word, feedback)`` of ``history``."""
    return WordleSolver().candidates(history)


class ConsistentTeacher:
    """Strong opener, then a candidate consistent with all feedback (see the module docstring).

    Args:
        choice: ``"ranked"``, ``"random"`` or ``"solver"`` (how a candidate is picked).
        openers: the words the first guess is drawn from (default :data:`STRONG_OPENERS`);
            ``"answers"``: the whole answer list (a uniformly random answer word); an empty
            tuple lets ``choice`` pick the first guess too.
        spelled: write each guess spelled out, ``"R E S I N"`` (the env accepts every form).
        tagged: write each guess spelled out with its letters' positions, ``"R1 E2 S3 I4 N5"``.
    """

    def __init__(self, choice: str = "ranked", openers: Sequence[str] | str = STRONG_OPENERS, spelled: bool = False,
                 tagged: bool = False):
        if choice not in TEACHER_CHOICES:
            raise ConfigError(f"`choice` must be one of {TEACHER_CHOICES}, got {choice!r}")
        if isinstance(openers, str):
            if openers != "answers":
                raise ConfigError(f'`openers` must be a list of words or "answers", got {openers!r}')
            openers = game.answers()
        index = game.allowed_index()
        bad = [w for w in openers if w not in index]
        if bad:
            raise ConfigError(f"openers must be allowed 5-letter guesses, got {bad!r}")
        self.choice = choice
        self.openers = tuple(openers)
        self.spelled = bool(spelled)
        self.tagged = bool(tagged)
        self._solver = WordleSolver()
        self._rng = np.random.default_rng(0)
        self.history: list[tuple[str, list[str]]] = []

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        """Start a game; ``info`` is the reset info (its ``prior_guesses`` are on the board)."""
        self._rng = rng
        self.history = [(p["guess"], list(p["feedback"])) for p in info.get("prior_guesses") or []]

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        if info.get("valid") and info.get("feedback") is not None and "guess" in info:
            self.history.append((str(info["guess"]), list(info["feedback"])))
        return format_guess(self.choose(), spelled=self.spelled, tagged=self.tagged)

    def choose(self) -> str:
        """The next guess for the current history."""
        if not self.history and self.openers:
            return self.openers[int(self._rng.integers(len(self.openers)))]
        if self.choice == "solver":
            return self._solver.next_guess(self.history)
        cand = consistent_answers(self.history)
        guessed = {w for w, _ in self.history}
        cand = np.array([c for c in cand if game.answers()[c] not in guessed], dtype=np.int64)
        if len(cand) == 0:  # the secret is not on the answer list: fall back to the solver
            return self._solver.next_guess(self.history)
        if self.choice == "random":
            return game.answers()[int(cand[int(self._rng.integers(len(cand)))])]
        return game.answers()[int(cand[int(np.argmax(letter_scores()[cand]))])]  # ties: list order
