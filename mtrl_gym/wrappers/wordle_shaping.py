"""Wordle reward shaping: a dominant outcome term plus a small, clipped, per-guess score.

:class:`WordleShaping` is a :class:`~mtrl_gym.wrappers.BoundedShaping` whose per-step
terms are computed from the Wordle env's ``info`` facts by the pure function
:func:`wordle_step_terms`, with the weights of :data:`WORDLE_WEIGHTS`:

================== ======= =============================================================
term               weight  paid on a step when
================== ======= =============================================================
valid_guess        +0.10   a guess was played
opener             +0.30   the game's first guess was played, times its feedback entropy
                           over the answer list divided by the best opener's (SLATE)
new_letter         +0.02   per distinct letter of a played guess not in earlier guesses
elimination        +0.25   times the fraction of remaining candidate answers it removed
clue_violation     -0.10   per revealed clue a real word ignores (played or rejected)
repeated_word      -0.30   a word already guessed was played again
word_floor         +0.15   a new played word's terms never sum below -0.15 (the difference
                           is paid as ``word_floor``); a repeated word gets no floor
out_of_dictionary  -0.20   the word is not in the dictionary
malformed_guess    -0.25   the guess is not 5 letters a-z (wrong length, digits, spaces)
near_word          +0.04   a malformed guess, times how close it is to 5 letters a-z (share
                           of letters x closeness of its length to 5; always < 1)
format_error       -0.30   no parsable guess, or a guess_word call with bad arguments
================== ======= =============================================================

The last five make a ladder of partial credit for a model that cannot yet play, on every
step, whatever the clues so far: a new played word (>= -0.15) beats a 5-letter non-word
(-0.20), which beats a malformed guess (-0.25 to -0.21, the closer to a 5-letter word the
better), which beats no guess at all (-0.30); a repeated word scores at most -0.20. Clue violations count only for real words: were they
charged to non-words, a 5-letter attempt that ignores the board would score below
gibberish, and a small model learns gibberish. And were repeats floored like new words,
copying a guess from the board would beat every attempt at a new word, and a small model
learns to copy. And were all malformed guesses equal, a model whose every guess is
malformed would see identical rewards in every group, hence no gradient at all.

``S`` is the episode's sum of terms divided by ``scale = 2`` (the built-in solver scores
0.40 to 0.92, mean 0.66; random dictionary words 0.23 on average; a model that never
calls the tool -1.8, clipped to -1; see docs/wrappers.md). The
shaped reward is ``outcome + w * clip(S, -1, 1)`` with ``w = 0.04`` for a solve and
``0.15`` otherwise, so, whatever the play:

* a solve on guess ``n`` lies in ``[o_n - 0.04, o_n + 0.04]`` with ``o_n = 1.05 + 0.1 (6 - n)``:
  a solve in ``n`` guesses beats any solve in ``n + 1``, and the worst solve is 1.01 (above
  the success threshold 1.0);
* a loss lies in ``[-0.65, -0.35]``; an episode without a valid guess has no positive term,
  so it lies in ``[-1.65, -1.5]``.

>>> import gymnasium, mtrl_gym
>>> from mtrl_gym.envs.wordle.solver import format_guess
>>> env = WordleShaping(gymnasium.make("mtrl/Wordle-v0"))
>>> _ = env.reset(seed=0, options={"answer": "paste"})
>>> _, reward, _, _, info = env.step(format_guess("slate"))
>>> info["reward_components"]["terms"]["opener"]
0.15
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import gymnasium
from gymnasium.utils import RecordConstructorArgs

from mtrl_gym.envs.wordle.solver import max_opening_entropy, opening_entropy
from mtrl_gym.error import ConfigError
from mtrl_gym.envs.wordle.profile import MAX_FAILURE_WEIGHT, MAX_SUCCESS_WEIGHT
from mtrl_gym.wrappers.shaping import BoundedShaping

__all__ = ["WordleShaping", "WORDLE_WEIGHTS", "WORDLE_SCALE", "wordle_step_terms"]

#: Default per-step term weights (bonuses and penalties, all given as amounts >= 0).
WORDLE_WEIGHTS: Mapping[str, float] = MappingProxyType({
    "valid_guess": 0.10,
    "opener": 0.30,
    "new_letter": 0.02,
    "elimination": 0.25,
    "clue_violation": 0.10,
    "repeated_word": 0.30,
    "word_floor": 0.15,
    "out_of_dictionary": 0.20,
    "malformed_guess": 0.25,
    "near_word": 0.04,
    "format_error": 0.30,
})
#: Default divisor of the summed terms.
WORDLE_SCALE = 2.0


def wordle_step_terms(info: Mapping[str, Any], weights: Mapping[str, float] = WORDLE_WEIGHTS) -> dict[str, float]:
    """One Wordle step's shaping terms (before division by the scale), from its ``info``.

    Only the terms that apply are returned (a step with no guess at all returns just
    ``format_error``). Penalties are negative.

    >>> wordle_step_terms({"valid": False, "format_error": True, "error": "no_guess"})
    {'format_error': -0.3}
    """
    terms: dict[str, float] = {}
    valid = bool(info.get("valid"))
    if valid:
        terms["valid_guess"] = weights["valid_guess"]
        if info.get("guesses_used") == 1 and info.get("guess"):
            terms["opener"] = weights["opener"] * _opener_quality(info["guess"])
        terms["new_letter"] = weights["new_letter"] * int(info.get("new_letters") or 0)
        before = int(info.get("candidates_before") or 0)
        after = int(info.get("candidates_remaining") or 0)
        if before > 0:
            terms["elimination"] = weights["elimination"] * max(0, before - after) / before
        if info.get("repeated"):
            terms["repeated_word"] = -weights["repeated_word"]
    violations = int(info.get("clue_violations") or 0)
    real_word = info.get("error") not in _NOT_WORDS and info.get("in_dictionary") is not False
    if violations and real_word:
        terms["clue_violation"] = -weights["clue_violation"] * violations
    if info.get("error") == "not_in_dictionary" or (valid and info.get("in_dictionary") is False):
        terms["out_of_dictionary"] = -weights["out_of_dictionary"]
    if info.get("error") in ("not_letters", "wrong_length"):
        terms["malformed_guess"] = -weights["malformed_guess"]
        closeness = _closeness_to_a_word(info.get("guess_text") or info.get("guess") or "")
        if closeness > 0:
            terms["near_word"] = weights["near_word"] * closeness
    if info.get("format_error"):
        terms["format_error"] = -weights["format_error"]
    if valid and real_word and not info.get("repeated"):
        total = sum(terms.values())
        if total < -weights["word_floor"]:
            terms["word_floor"] = -weights["word_floor"] - total
    return terms


#: Errors of a guess that is not a real word (no clue-violation penalty for these).
_NOT_WORDS = frozenset({"not_in_dictionary", "not_letters", "wrong_length"})


def _closeness_to_a_word(text: str) -> float:
    """How close a malformed guess is to 5 letters a-z, in [0, 1): the share of its
    characters that are letters a-z times ``1 - |length - 5| / 5`` (0 from 10 characters)."""
    text = text.strip()
    if not text:
        return 0.0
    letters = sum("a" <= c <= "z" for c in text.lower())
    closeness = letters / len(text) * max(0.0, 1.0 - abs(len(text) - 5) / 5)
    return min(closeness, 0.99)  # 5 letters a-z is not malformed; keep the rung below a non-word


def _opener_quality(word: str) -> float:
    """Feedback entropy of ``word`` as an opener, relative to the best opener (0..1)."""
    return opening_entropy(word) / max_opening_entropy()


class WordleShaping(BoundedShaping):
    """Shaped Wordle reward: ``outcome + w * clip(sum of wordle_step_terms / scale, -1, 1)``.

    Args:
        env: a Wordle env (``gymnasium.make("mtrl/Wordle-v0")``, possibly wrapped).
        weights: overrides of :data:`WORDLE_WEIGHTS`, e.g. ``{"opener": 0.0}``.
        scale: divides the summed terms (default 2.0).
        success_weight: ``w`` for a solve (at most 0.04).
        failure_weight: ``w`` for a loss or no valid guess (at most 0.15).
        per_turn: pay the shaping as it accrues, each step (see :class:`BoundedShaping`).

    ``gymnasium.make("mtrl/Wordle-v0")`` then ``WordleShaping(env, per_turn=True)``.
    Put it outside :class:`~mtrl_gym.wrappers.PriorGuesses` so the pre-played guesses earn
    nothing (the opener bonus goes only to the game's first guess).
    """

    def __init__(self, env: gymnasium.Env, *, weights: Mapping[str, float] | None = None,
                 scale: float = WORDLE_SCALE, success_weight: float = MAX_SUCCESS_WEIGHT,
                 failure_weight: float = MAX_FAILURE_WEIGHT, per_turn: bool = False):
        self.weights = _merge_weights(weights)
        # Recorded before the base class does, so env.spec rebuilds this wrapper as given.
        RecordConstructorArgs.__init__(self, weights=None if weights is None else dict(weights), scale=scale,
                                       success_weight=success_weight, failure_weight=failure_weight,
                                       per_turn=per_turn)
        super().__init__(env, scale=scale, success_weight=success_weight, failure_weight=failure_weight,
                         per_turn=per_turn)

    def step_terms(self, info: Mapping[str, Any]) -> dict[str, float]:
        return wordle_step_terms(info, self.weights)


def _merge_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    merged = dict(WORDLE_WEIGHTS)
    if weights is None:
        return merged
    if not isinstance(weights, Mapping):
        raise ConfigError(f"`weights` must be a mapping term -> weight, e.g. {{'opener': 0.0}}, got {weights!r}")
    for name, value in weights.items():
        if name not in WORDLE_WEIGHTS:
            close = difflib.get_close_matches(str(name), list(WORDLE_WEIGHTS), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown Wordle shaping term {name!r}.{hint} Terms: {', '.join(WORDLE_WEIGHTS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"weight {name!r} must be a finite number >= 0 (penalties are subtracted), "
                              f"got {value!r}")
        merged[name] = float(value)
    return merged
