"""How episodes get their env: one constructor from an id or a factory, and one failure reward.

Every place that plays episodes (the rollout engine, the agent source, evaluation, the
adapters) builds its envs with :func:`make_env` and scores a failed episode with
:func:`failure_reward`, so an id means the same env everywhere and a failure costs the
same everywhere.

>>> env = make_env("mtrl_gym:mtrl/Wordle-v0")
>>> failure_reward(env, what="mtrl/Wordle-v0", fix="pass failure_reward=")
-1.5
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np

from mtrl_gym.error import ConfigError

__all__ = ["EnvSource", "make_env", "min_reward", "failure_reward"]

#: An env id (``"mtrl/Wordle-v0"``, ``"mtrl_gym:mtrl/Wordle-v0"``, any gymnasium id) or a zero-argument factory.
EnvSource = str | Callable[[], gymnasium.Env]


def make_env(source: EnvSource, env_kwargs: Mapping[str, Any] | None = None,
             wrappers: Sequence[Callable[[gymnasium.Env], gymnasium.Env]] = ()) -> gymnasium.Env:
    """A new env of ``source``, with ``wrappers`` applied in order (the first innermost).

    * a factory is called (``env_kwargs`` are its business, not passed);
    * a registered mtrl_gym id is made by :func:`mtrl_gym.registry.make` with ``env_kwargs``;
    * a multi-agent id is one seat of the game (:class:`~mtrl_gym.envs.multiagent.seat.SeatEnv`;
      the other seats are played as ``env_kwargs["opponents"]`` says);
    * any other id gymnasium knows (or a ``"module:Id"`` id it imports) goes to ``gymnasium.make``;
      an unknown id raises :class:`~mtrl_gym.error.UnknownEnv` with close matches.
    """
    from mtrl_gym import registry

    kwargs = dict(env_kwargs or {})
    if callable(source):
        env = source()
    else:
        bare = registry.normalize_id(source)
        if bare in registry.ENV_SPECS:
            env = registry.make(bare, **kwargs)
        elif registry.is_multiagent(bare):
            from mtrl_gym.envs.multiagent.seat import SeatEnv

            env = SeatEnv(bare, **kwargs)
        elif bare in gymnasium.registry or ":" in bare:
            env = gymnasium.make(bare, **kwargs)
        else:
            registry.spec(bare)  # raises UnknownEnv with close matches
            raise AssertionError("unreachable: registry.spec accepts only registered ids")
    for wrap in wrappers:
        env = wrap(env)
    return env


def min_reward(env: gymnasium.Env) -> float | None:
    """``env``'s finite minimum reward (``reward_range[0]``, read through its wrappers), else ``None``."""
    try:
        low = env.get_wrapper_attr("reward_range")[0]
    except (AttributeError, TypeError, IndexError):
        return None
    if isinstance(low, bool) or not isinstance(low, (int, float, np.number)) or not np.isfinite(low):
        return None
    return float(low)


def failure_reward(env: gymnasium.Env, *, what: str, fix: str) -> float:
    """The reward of a failed episode of ``env``: its minimum (:func:`min_reward`).

    An env without a finite minimum raises :class:`~mtrl_gym.error.ConfigError` naming
    ``what`` (the env) and ``fix`` (what the caller can do about it). Pass ``env.unwrapped``
    to score by the bare env's outcome, whatever its wrappers do to rewards.
    """
    low = min_reward(env)
    if low is None:
        try:
            shown = env.get_wrapper_attr("reward_range")
        except AttributeError:
            shown = None
        raise ConfigError(f"{what} has no finite minimum reward (reward_range = {shown}); {fix}")
    return low
