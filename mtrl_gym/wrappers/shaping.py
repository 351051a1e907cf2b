"""Bounded reward shaping that can never reorder an environment's outcome tiers.

:class:`BoundedShaping` turns an episode's outcome reward into::

    reward = outcome + w * clip(S, -1, 1)      w = success_weight if the episode succeeded
                                                 else failure_weight

where ``S`` is the sum over the episode's steps of per-step terms divided by ``scale``,
computed only from the facts in ``info``. Because the shaping part lies in ``[-w, w]``,
choosing ``w`` below half the gap between two outcome tiers keeps every tier apart
whatever the agent does (:func:`tier_limits` reads the largest safe weights from the
env's profile, :func:`mtrl_gym.envs.profile_of`, and every layer checks its weights
against them).

Two ways to pay it:

* ``per_turn=False``: non-final steps return the env's reward unchanged; the final step
  (``terminated`` or ``truncated``) returns ``outcome + w * clip(S)``.
* ``per_turn=True``: step ``t`` also pays the shaping increment
  ``Phi_t - Phi_(t-1)`` with ``Phi_t = failure_weight * clip(S_t)``; the final step pays
  the rest, ``outcome + w * clip(S_T) - Phi_(T-1)``, so the episode's rewards add up to the
  same total as ``per_turn=False``. Shaping amounts are rounded toward zero onto the grid
  ``2**-40`` (below 1e-12, and never past ``w``), which makes the
  increments and their partial sums exact in floating point: for Wordle the per-turn
  rewards add up to the ``per_turn=False`` reward exactly, in any order.

Every step's ``info["reward_components"]`` shows the computation: ``terms`` (this step's
contributions to ``S``, by name), ``shaping_step``, ``shaping`` (``S`` so far), ``clipped``,
``weight``, ``bonus`` (the shaping paid so far in the episode), ``outcome`` (the env's
reward this step) and ``reward`` (what this wrapper returned).

Stacked shaping layers share **one** budget. A layer that finds an inner layer's
``reward_components`` in ``info`` adds that layer's terms to its own, takes the inner
outcome, and recomputes the reward: the outermost layer's weights, scale of its own terms
and ``per_turn`` decide the reward; inner layers' weights and modes are overridden.

>>> import gymnasium, mtrl_gym
>>> from mtrl_gym.wrappers import BoundedShaping
>>> env = BoundedShaping(gymnasium.make("mtrl/Wordle-v0"),
...                      terms=lambda info: {"played": 0.5 if info["valid"] else -0.5})
>>> _ = env.reset(seed=0, options={"answer": "paste"})
>>> _, reward, terminated, _, info = env.step('<guess>paste</guess>')
>>> terminated, round(reward, 9), info["reward_components"]["terms"]
(True, 1.57, {'played': 0.5})
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, SupportsFloat

import gymnasium
from gymnasium.utils import RecordConstructorArgs

from mtrl_gym.error import ConfigError

__all__ = ["BoundedShaping", "tier_limits", "SHAPING_GRID", "DEFAULT_SUCCESS_WEIGHT", "DEFAULT_FAILURE_WEIGHT"]

#: Shaping amounts are multiples of this (rounded toward zero), so sums of them are exact.
SHAPING_GRID = 2.0 ** -40

#: Default weights: small next to the outcome rewards of every mtrl_gym env, and within the
#: tier limits of the envs that declare them (Wordle: 0.04 / 0.15).
DEFAULT_SUCCESS_WEIGHT = 0.04
DEFAULT_FAILURE_WEIGHT = 0.15


def tier_limits(env: gymnasium.Env) -> tuple[float, float] | None:
    """``(max success_weight, max failure_weight)`` keeping ``env``'s outcome tiers apart.

    From the env's profile (``EnvProfile.shaping_limits``); ``None`` when the env declares
    no tiers (then the caller chooses).
    """
    from mtrl_gym.envs.profile import profile_of

    return profile_of(env).shaping_limits


def _on_grid(x: float) -> float:
    """``x`` rounded toward zero onto :data:`SHAPING_GRID` (exact for ``|x| < 2**12``)."""
    return math.trunc(x / SHAPING_GRID) * SHAPING_GRID


def check_amount(name: str, value: Any, *, positive: bool = False) -> float:
    """``value`` as a float, or :class:`~mtrl_gym.error.ConfigError`: a finite number, ``>= 0``
    (``> 0`` when ``positive``), as every shaping and penalty wrapper's weights must be."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"`{name}` must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ConfigError(f"`{name}` must be > 0, got {value!r}")
    if not positive and value < 0:
        raise ConfigError(f"`{name}` must be >= 0, got {value!r}; penalties are given as positive "
                          "amounts and subtracted")
    return float(value)


class BoundedShaping(gymnasium.Wrapper, RecordConstructorArgs):
    """Adds a bounded shaping term to the outcome reward (see the module docstring).

    Subclass it and override :meth:`step_terms`, or pass ``terms``: a function
    ``info -> {name: value}`` called on every step. Values are divided by ``scale`` and
    summed into ``S``.

    Args:
        env: the environment; its ``info`` must carry the facts the terms read.
        terms: per-step terms function (``None`` in subclasses that override ``step_terms``).
        scale: divides every term; choose it so a good episode's ``S`` is about 1.
        success_weight: ``w`` when the episode succeeded (``info["success"]`` on the last
            step, else ``outcome >= env.success_threshold``).
        failure_weight: ``w`` otherwise (losses, truncation, no success threshold).
        per_turn: pay shaping increments on every step (see the module docstring).
    """

    def __init__(self, env: gymnasium.Env, terms: Callable[[Mapping[str, Any]], Mapping[str, float]] | None = None,
                 *, scale: float = 1.0, success_weight: float = DEFAULT_SUCCESS_WEIGHT,
                 failure_weight: float = DEFAULT_FAILURE_WEIGHT, per_turn: bool = False):
        RecordConstructorArgs.__init__(self, terms=terms, scale=scale, success_weight=success_weight,
                                       failure_weight=failure_weight, per_turn=per_turn)
        gymnasium.Wrapper.__init__(self, env)
        if terms is not None and not callable(terms):
            raise ConfigError(f"`terms` must be a function info -> {{name: value}}, got {terms!r}")
        if terms is None and type(self).step_terms is BoundedShaping.step_terms:
            raise ConfigError("BoundedShaping needs `terms` (a function info -> {name: value}); "
                              "or subclass it and override step_terms()")
        if not isinstance(per_turn, bool):
            raise ConfigError(f"`per_turn` must be True or False, got {per_turn!r}")
        self.terms_fn = terms
        self.scale = check_amount("scale", scale, positive=True)
        self.success_weight = check_amount("success_weight", success_weight)
        self.failure_weight = check_amount("failure_weight", failure_weight)
        self.per_turn = per_turn
        self._check_tiers()
        self._shaping = 0.0
        self._paid = 0.0
        self._outcome_return = 0.0

    def _check_tiers(self) -> None:
        limits = tier_limits(self.env)
        if limits is None:
            return
        max_s, max_f = limits
        name = self.env.unwrapped.__class__.__name__
        if self.success_weight > max_s:
            raise ConfigError(f"`success_weight` must be <= {max_s} for {name} so shaping cannot reorder "
                              f"its outcome tiers (see its profile's shaping_limits), got {self.success_weight}; "
                              "lower it or rescale the terms instead")
        if self.failure_weight > max_f:
            raise ConfigError(f"`failure_weight` must be <= {max_f} for {name} so shaping cannot reorder "
                              f"its outcome tiers (see its profile's shaping_limits), got {self.failure_weight}; "
                              "lower it")

    # ------------------------------------------------------------------ hooks

    def step_terms(self, info: Mapping[str, Any]) -> Mapping[str, float]:
        """This step's terms (before division by ``scale``), read from ``info``."""
        return self.terms_fn(info)

    def is_success(self, info: Mapping[str, Any], outcome_return: float) -> bool:
        """Whether the finished episode succeeded (selects ``success_weight``)."""
        if "success" in info:
            return bool(info["success"])
        threshold = getattr(self.env.unwrapped, "success_threshold", None)
        return threshold is not None and outcome_return >= threshold

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._shaping = 0.0
        self._paid = 0.0
        self._outcome_return = 0.0
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        outcome, terms = self._inner(reward, info)
        own = self.step_terms(info)
        if not isinstance(own, Mapping):
            raise TypeError(f"shaping terms must be a mapping {{name: value}}, got {own!r}")
        for name, value in own.items():
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"shaping term {name!r} is {value}; terms must be finite numbers")
            terms[name] = terms.get(name, 0.0) + value / self.scale
        step_sum = math.fsum(terms.values())
        self._shaping += step_sum
        self._outcome_return += outcome
        clipped = min(1.0, max(-1.0, self._shaping))
        if terminated or truncated:
            success = self.is_success(info, self._outcome_return)
            weight = self.success_weight if success else self.failure_weight
            bonus = _on_grid(weight * clipped)
            total = outcome + bonus
            out = total - self._paid if self.per_turn else total
        else:
            weight = self.failure_weight
            bonus = self._paid
            out = outcome
            if self.per_turn:
                bonus = _on_grid(weight * clipped)
                out = outcome + (bonus - self._paid)
                self._paid = bonus
        info = dict(info)
        info["reward_components"] = {
            "terms": terms, "shaping_step": step_sum, "shaping": self._shaping, "clipped": clipped,
            "weight": weight, "bonus": bonus, "outcome": outcome, "reward": out,
        }
        return obs, out, terminated, truncated, info

    @staticmethod
    def _inner(reward: SupportsFloat, info: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
        """The env's outcome this step and the terms of inner shaping layers, if any."""
        reward = float(reward)
        comp = info.get("reward_components")
        if not (isinstance(comp, Mapping) and {"terms", "outcome", "reward"} <= comp.keys()):
            return reward, {}
        outcome = float(comp["outcome"])
        if reward != comp["reward"]:  # a reward transform sits between the layers: keep its effect
            outcome = reward - (float(comp["reward"]) - outcome)
        return outcome, {str(k): float(v) for k, v in comp["terms"].items()}
