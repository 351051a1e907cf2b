"""A built-in Wordle player: entropy-maximising guesses over the remaining candidates.

Use it as a reference policy (baselines in evaluation, curricula that pre-play guesses,
tests). Each decision keeps the answers consistent with the feedback so far and picks
the guess whose feedback pattern over them has the highest entropy, with a small bonus
for guesses that could themselves be the answer; with one or two candidates left it
guesses a candidate. Decisions are memoised per history, so playing many games is cheap.

>>> solver = WordleSolver()
>>> guesses = solver.play("paste")
>>> guesses[-1], len(guesses) <= 6
('paste', True)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.game import COLOR_NAMES, MAX_GUESSES
from mtrl_gym.parsing import format_tool_call

__all__ = ["WordleSolver", "SolverPolicy", "format_guess", "opening_entropy", "max_opening_entropy", "feedback_entropies"]

_N_PATTERNS = 243


def format_guess(word: str, *, spelled: bool = False, tagged: bool = False) -> str:
    """The canonical tool-call text for a guess (what a well-behaved model writes);
    ``spelled``: the word spelled out, ``"R E S I N"``; ``tagged``: spelled with each letter's
    position, ``"R1 E2 S3 I4 N5"`` (:func:`game.spell`)."""
    text = game.spell(word, tagged=tagged) if spelled or tagged else word
    return format_tool_call("guess_word", {"guess": text})


def _as_codes(fb: Sequence) -> int:
    """Feedback as names ("green"), ints, or an already-encoded pattern code -> pattern code."""
    if isinstance(fb, (int, np.integer)):
        return int(fb)
    ints = [COLOR_NAMES.index(c) if isinstance(c, str) else int(c) for c in fb]
    return game.pattern_code(ints)


@functools.cache
def _guess_letters() -> np.ndarray:
    return game.letters_of(game.allowed_guesses())


def _codes_vs_answers(word: str) -> np.ndarray:
    """Pattern codes of ``word`` against every answer (a table row when possible)."""
    row = game.allowed_index().get(word)
    if row is not None:
        return np.asarray(game.pattern_table()[row])
    return game.feedback_codes(game.letters_of([word]), game.answer_letters())[0]


class WordleSolver:
    """Entropy-maximising Wordle solver.

    Args:
        hard_mode: only guess words consistent with all feedback (valid in hard mode).
        candidate_bonus: bits of entropy a guess gains for possibly being the answer.
    """

    def __init__(self, *, hard_mode: bool = False, candidate_bonus: float = 0.3):
        self.hard_mode = hard_mode
        self.candidate_bonus = float(candidate_bonus)
        self._memo: dict[tuple, str] = {}

    def candidates(self, history: Sequence[tuple[str, Sequence]]) -> np.ndarray:
        """Indices (into :func:`game.answers`) of answers consistent with ``history``."""
        mask = np.ones(len(game.answers()), dtype=bool)
        for word, fb in history:
            mask &= _codes_vs_answers(word) == _as_codes(fb)
        return np.flatnonzero(mask)

    def next_guess(self, history: Sequence[tuple[str, Sequence]] = ()) -> str:
        """The solver's guess after ``history`` = [(guess, feedback), ...]."""
        key = tuple((w, _as_codes(fb)) for w, fb in history)
        if key not in self._memo:
            self._memo[key] = self._decide(key)
        return self._memo[key]

    def _decide(self, key: tuple) -> str:
        cand = self.candidates(key)
        answers = game.answers()
        if len(cand) == 0:  # feedback inconsistent with every answer (e.g. an unusual secret)
            return self._fallback(key)
        if len(cand) <= 2:
            return answers[cand[0]]
        pool = self._pool(key)
        scores = _entropies(pool, cand)
        cand_rows = [game.allowed_index()[answers[c]] for c in cand]
        is_cand = np.isin(pool, cand_rows)
        scores = scores + self.candidate_bonus * is_cand
        guessed = {game.allowed_index().get(w, -1) for w, _ in key}
        scores[np.isin(pool, list(guessed))] = -np.inf
        # Deterministic: the highest score, ties broken by the word order of the list.
        return game.allowed_guesses()[pool[int(np.argmax(scores))]]

    def _pool(self, key: tuple) -> np.ndarray:
        rows = np.arange(len(game.allowed_guesses()))
        if not self.hard_mode or not key:
            return rows
        mask = np.ones(len(rows), dtype=bool)
        letters = _guess_letters()
        for word, code in key:
            mask &= game.feedback_codes(game.letters_of([word]), letters)[0] == code
        return rows[mask] if mask.any() else rows

    def _fallback(self, key: tuple) -> str:
        guessed = {w for w, _ in key}
        pool = self._pool(key)
        return next(game.allowed_guesses()[r] for r in pool if game.allowed_guesses()[r] not in guessed)

    def play(self, answer: str, max_guesses: int = MAX_GUESSES) -> list[str]:
        """Play a whole game against ``answer``; returns the guesses (the last is the answer if solved)."""
        history: list[tuple[str, tuple[int, ...]]] = []
        for _ in range(max_guesses):
            word = self.next_guess(history)
            fb = game.feedback(word, answer)
            history.append((word, fb))
            if game.pattern_code(fb) == game.SOLVED_CODE:
                break
        return [w for w, _ in history]


def _entropies(pool: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Shannon entropy (bits) of each pool guess's feedback pattern over the candidates."""
    if len(cand) == len(game.answers()) and len(pool) == len(game.allowed_guesses()):
        return _opening_entropies().copy()
    table = game.pattern_table()
    sub = np.asarray(table[pool][:, cand], dtype=np.int64)
    offsets = (np.arange(len(pool), dtype=np.int64) * _N_PATTERNS)[:, None]
    counts = np.bincount((sub + offsets).ravel(), minlength=len(pool) * _N_PATTERNS).reshape(len(pool), _N_PATTERNS)
    n = len(cand)
    c_log_c = np.zeros(n + 1)
    c_log_c[1:] = np.arange(1, n + 1) * np.log2(np.arange(1, n + 1))
    return np.log2(n) - c_log_c[counts].sum(axis=1) / n


@functools.cache
def _opening_entropies() -> np.ndarray:
    """Entropy of every allowed guess over all answers (the first move), computed once."""
    table = game.pattern_table()
    out = np.empty(table.shape[0])
    n = table.shape[1]
    for start in range(0, table.shape[0], 1024):
        block = np.asarray(table[start:start + 1024], dtype=np.int64)
        offsets = (np.arange(len(block), dtype=np.int64) * _N_PATTERNS)[:, None]
        counts = np.bincount((block + offsets).ravel(), minlength=len(block) * _N_PATTERNS)
        p = counts.reshape(len(block), _N_PATTERNS) / n
        with np.errstate(divide="ignore", invalid="ignore"):
            out[start:start + len(block)] = -np.where(p > 0, p * np.log2(p), 0.0).sum(axis=1)
    out.flags.writeable = False
    return out


def opening_entropy(word: str) -> float:
    """Feedback entropy (bits) of ``word`` as the first guess, over every answer.

    ``word`` is lower-case a-z, 5 letters; words outside the guess list are scored too.
    The best opener, SLATE, has :func:`max_opening_entropy` (about 5.885 bits).
    """
    row = game.allowed_index().get(word)
    if row is not None:
        return float(_opening_entropies()[row])
    counts = np.bincount(_codes_vs_answers(word).astype(np.int64), minlength=_N_PATTERNS)
    p = counts[counts > 0] / len(game.answers())
    return float(-(p * np.log2(p)).sum())


def max_opening_entropy() -> float:
    """The highest :func:`opening_entropy` of any allowed guess (SLATE, about 5.885 bits)."""
    return float(_opening_entropies().max())


def feedback_entropies(candidates: Sequence[int] | np.ndarray) -> np.ndarray:
    """Entropy (bits) of each allowed guess's feedback over the answers ``candidates``.

    ``candidates`` are indices into :func:`game.answers` (e.g. :meth:`WordleSolver.candidates`);
    the result is indexed like :func:`game.allowed_guesses`.
    """
    cand = np.asarray(candidates, dtype=np.int64)
    if len(cand) == 0:
        return np.zeros(len(game.allowed_guesses()))
    return _entropies(np.arange(len(game.allowed_guesses())), cand)


class SolverPolicy:
    """The solver as a text policy for an env: ``action = policy(observation, info)``.

    It reads the facts of the last step's ``info`` (``guess``, ``feedback``, ``valid``), so
    it works through any wrapper that keeps them. ``epsilon`` plays a random allowed word
    instead with that probability (drawn from ``rng``), for noisy reference play.
    """

    def __init__(self, solver: WordleSolver | None = None, *, epsilon: float = 0.0,
                 rng: np.random.Generator | None = None):
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"`epsilon` must be in [0, 1], got {epsilon}")
        self.solver = solver or WordleSolver()
        self.epsilon = epsilon
        self.rng = rng or np.random.default_rng(0)
        self.history: list[tuple[str, list[str]]] = []

    def reset(self) -> None:
        self.history = []

    def __call__(self, observation: str, info: dict) -> str:
        if "guess" not in info:  # a reset info: new episode
            self.history = []
        elif info.get("valid") and info.get("feedback") is not None:
            self.history.append((info["guess"], info["feedback"]))
        return format_guess(self.choose())

    def choose(self) -> str:
        if self.epsilon > 0 and self.rng.random() < self.epsilon:
            words = game.allowed_guesses()
            return words[int(self.rng.integers(len(words)))]
        return self.solver.next_guess(self.history)
