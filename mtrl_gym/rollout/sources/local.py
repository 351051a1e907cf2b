"""The local rollout source: the built-in agent loop in this process, built from a run's config.

:func:`make_rollout_engine` turns a training config (any object with the GRPO config's
fields: env, wrappers, serving and episode settings) into a
:class:`~mtrl_gym.rollout.engine.RolloutEngine` (or, for a multi-agent env, a
:class:`~mtrl_gym.rollout.sources.multiagent.MultiAgentRolloutEngine`);
:func:`rollout_config` gives the engine's settings and :func:`build_wrappers` the env
wrappers named in a config.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium

from mtrl_gym.error import ConfigError

__all__ = ["LocalOptions", "resolve_wrapper", "build_wrappers", "wrapper_spec", "wrapper_arg", "rollout_config",
           "make_rollout_engine", "unfinished_reward_value"]


@dataclass
class LocalOptions:
    """The built-in agent loop (``source: {name: local}``) has no options of its own: the run's env,
    wrappers, serving and episode settings drive it."""


def resolve_wrapper(name: str) -> type:
    """A wrapper class by name: ``mtrl_gym.wrappers.<name>``, ``gymnasium.wrappers.<name>``,
    or ``"package.module:Class"``."""
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"cannot import wrapper {name!r}: {e}") from None
    from mtrl_gym import wrappers

    for namespace in (wrappers, gymnasium.wrappers):
        found = getattr(namespace, name, None)
        if isinstance(found, type):
            return found
    known = list(getattr(wrappers, "__all__", []))
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.5)
    hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise ConfigError(f"unknown env wrapper {name!r}.{hint} mtrl_gym.wrappers has: {', '.join(known)}; "
                      "gymnasium.wrappers names work too, and 'package.module:Class' imports any class")


def build_wrappers(specs: Sequence[Mapping[str, Any]]) -> list[Callable[[gymnasium.Env], gymnasium.Env]]:
    """``[{"name": ..., "kwargs": {...}}]`` -> callables ``env -> wrapped env``, in order."""
    return [functools.partial(resolve_wrapper(s["name"]), **dict(s.get("kwargs") or {})) for s in specs]


def wrapper_spec(field_name: str, index: int | None, spec: Any) -> dict[str, Any]:
    """One entry of a wrapper list (``env_wrappers``, ``serving.wrappers``), normalised to
    ``{"name": ..., "kwargs": {...}}``; ``index`` None: a single value (a command-line flag)."""
    where = field_name if index is None else f"{field_name}[{index}]"
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise ConfigError(f"`{where}` must be a wrapper name or {{'name': ..., 'kwargs': {{...}}}}, got {spec!r}")
    extra = sorted(set(spec) - {"name", "kwargs"})
    if extra:
        raise ConfigError(f"`{where}` has unknown key(s) {extra}; a wrapper entry has only 'name' and 'kwargs'")
    kwargs = spec.get("kwargs") or {}
    if not isinstance(kwargs, Mapping):
        raise ConfigError(f"`{where}.kwargs` must be a mapping, got {kwargs!r}")
    return {"name": spec["name"], "kwargs": dict(kwargs)}


def wrapper_arg(text: str, flag: str = "--wrapper") -> dict[str, Any]:
    """A wrapper spec from a command-line value: a name (``WordleRecap``) or a JSON object
    ``{"name": ..., "kwargs": {...}}``; anything else raises ConfigError naming ``flag``."""
    import json

    text = text.strip()
    if text.startswith("{"):
        try:
            return wrapper_spec(flag, None, json.loads(text))
        except json.JSONDecodeError as e:
            raise ConfigError(f"{flag} must be a wrapper name or a JSON object, got {text!r} ({e.msg})") from None
    if not text or any(c.isspace() for c in text):
        raise ConfigError(f'{flag} takes a wrapper name or a JSON object {{"name": ..., "kwargs": {{...}}}}, '
                          f"got {text!r}")
    return wrapper_spec(flag, None, text)


def rollout_config(config: Any, *, validation: bool = False, constraint: Any = None) -> Any:
    """The :class:`~mtrl_gym.rollout.engine.RolloutConfig` of training (or validation) rollouts
    (``constraint``: the :class:`~mtrl_gym.rollout.constraint.CompletionConstraint` of every turn)."""
    from mtrl_gym.rollout.engine import RolloutConfig

    serving, episode = config.serving, config.episode
    sampling = serving.sampling(constraint=constraint, **({"temperature": config.validation.temperature,
                                                           "top_p": 1.0, "top_k": 0} if validation else {}))
    return RolloutConfig(group_size=config.validation.group_size if validation else config.group_size,
                         sampling=sampling, max_turns=episode.max_turns, max_episode_tokens=episode.max_tokens,
                         time_budget_s=episode.time_budget_s, seed=config.seed, reply_mode=episode.reply_mode,
                         env_kwargs=dict(config.env_kwargs), env_workers=episode.env_workers,
                         unfinished_reward=unfinished_reward_value(episode.unfinished_reward),
                         assistant_prefix=serving.assistant_prefix)


def make_rollout_engine(config: Any, sampler: Any, tokenizer: Any, *, validation: bool = False,
                        env: str | Callable[[], gymnasium.Env] | None = None) -> Any:
    """A :class:`~mtrl_gym.rollout.engine.RolloutEngine` with the config's env and wrappers.

    ``env`` (an id or a factory returning a new env) replaces ``config.env``. Validation envs
    get :class:`~mtrl_gym.wrappers.EpisodeStats` outermost, so the held-out metrics include
    the bare env's outcome reward and per-turn play rates (``val/info/episode/...``).
    """
    from mtrl_gym.registry import is_multiagent
    from mtrl_gym.rollout.engine import RolloutEngine
    from mtrl_gym.wrappers.episode_stats import EpisodeStats

    if env is None and is_multiagent(config.env):
        raise ConfigError(f"{config.env!r} is a multi-agent env: its games are played by the 'selfplay' source "
                          "(source: {name: selfplay}, optionally with seats: {player_1: solver})")
    specs = config.validation.env_wrappers if validation else config.env_wrappers
    # what the policy reads (serving wrappers, then the system prompt): outermost but the stats
    wrappers = build_wrappers(specs) + config.serving.env_wrappers() + ([EpisodeStats] if validation else [])
    source = env if env is not None else config.env
    constraint = None
    if config.serving.constrained and not validation:  # dictionary decoding of training rollouts
        from mtrl_gym.rollout.constraint import vocabulary_constraint

        made = source() if callable(source) else None  # a factory: ask one env it makes
        try:
            constraint = vocabulary_constraint(made if made is not None else source, tokenizer,
                                               config.serving.stop[0], max_tokens=config.serving.max_new_tokens,
                                               what=f"`constrained` training: {config.env}")
        finally:
            if made is not None:
                made.close()
    return RolloutEngine(source, sampler, tokenizer, rollout_config(config, validation=validation,
                                                                    constraint=constraint), wrappers=wrappers)


def unfinished_reward_value(text: Any) -> float | str:
    """``"min"``/``"sum"`` as they are, a number (or its text) as a float; anything else raises."""
    if text in ("min", "sum"):
        return text
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(text, bool) or not math.isfinite(value):
        raise ConfigError(f'`unfinished_reward` must be "min", "sum" or a finite number, got {text!r}')
    return value
