"""A bounded penalty for tool calls that were malformed or drifted into plain text.

Under RL, a model's tool calls tend to decay into prose ("My guess is CRANE") that the env
still accepts through its loose fallback; rewarding that equally teaches the drift. The
:class:`FormatPenalty` wrapper charges, per step, ``format_error`` when
``info["format_error"]`` is set (no parsable call, bad arguments) and ``loose_match`` when
the call was recovered only by the loose text fallback (``info["loose_match"]``); the
terms are named ``format_penalty`` and ``loose_match`` in ``info["reward_components"]``.

The penalty is a :class:`~mtrl_gym.wrappers.BoundedShaping` term, so it lives inside the
same clipped budget as any other shaping: alone, it moves a Wordle reward by at most 0.04
(solve) or 0.15 (otherwise), and stacked with :class:`~mtrl_gym.wrappers.WordleShaping`
(in either order) the two share one budget. Neither can reorder the outcome tiers.

>>> import gymnasium, mtrl_gym
>>> env = FormatPenalty(gymnasium.make("mtrl/Wordle-v0"))
>>> _ = env.reset(seed=0, options={"answer": "paste"})
>>> _, _, _, _, info = env.step("My guess: CRANE")
>>> info["reward_components"]["terms"]
{'loose_match': -0.25}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
from gymnasium.utils import RecordConstructorArgs

from mtrl_gym.wrappers.shaping import (
    DEFAULT_FAILURE_WEIGHT,
    DEFAULT_SUCCESS_WEIGHT,
    BoundedShaping,
    check_amount,
)

__all__ = ["FormatPenalty"]


class FormatPenalty(BoundedShaping):
    """Penalise format errors and loose (plain-text) tool calls, within a bounded budget.

    Args:
        env: any env whose ``info`` has ``format_error`` (and optionally ``loose_match``).
        format_error: amount added to ``S`` (negatively) per step with ``info["format_error"]``.
        loose_match: amount per step whose call was recovered by the loose text fallback.
        scale: divides the amounts (default 1: two format errors at the default 0.5 use
            the whole budget).
        success_weight, failure_weight, per_turn: as in :class:`BoundedShaping`.

    ``FormatPenalty(gymnasium.make("mtrl/Wordle-v0"), format_error=0.5, loose_match=0.25)``.
    """

    def __init__(self, env: gymnasium.Env, *, format_error: float = 0.5, loose_match: float = 0.25,
                 scale: float = 1.0, success_weight: float = DEFAULT_SUCCESS_WEIGHT,
                 failure_weight: float = DEFAULT_FAILURE_WEIGHT, per_turn: bool = False):
        RecordConstructorArgs.__init__(self, format_error=format_error, loose_match=loose_match, scale=scale,
                                       success_weight=success_weight, failure_weight=failure_weight,
                                       per_turn=per_turn)
        self.format_error = check_amount("format_error", format_error)
        self.loose_match = check_amount("loose_match", loose_match)
        super().__init__(env, scale=scale, success_weight=success_weight, failure_weight=failure_weight,
                         per_turn=per_turn)

    def step_terms(self, info: Mapping[str, Any]) -> dict[str, float]:
        terms: dict[str, float] = {}
        if info.get("format_error"):
            terms["format_penalty"] = -self.format_error
        if info.get("loose_match"):
            terms["loose_match"] = -self.loose_match
        return terms
