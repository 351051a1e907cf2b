"""Naming a rollout source in a config, and building it: one table, one function.

A run's config names exactly one source, with that source's own options next to its name::

    source: {name: local}                                   # the built-in agent loop (default)
    source: {name: agent, target: examples/agent_openai_sdk.py:run}
    source: {name: ray, workers: 4, worker_retries: 1}
    source: {name: selfplay, seats: {player_1: solver}}     # multi-agent envs
    source: {name: async, max_staleness: 1, source: {name: ray, workers: 2}}
    source: {name: dynamic, max_draws: 3, source: {name: local}}   # more rows while groups agree

:data:`SOURCES` maps each name to its options class (the field docstrings document the
options) and its builder; :func:`parse_source` checks a mapping against it and
:func:`make_source` builds a run's training (or validation) source. Options of a
source that is not named cannot be written, so no combination of them needs a check.

>>> parse_source({"name": "ray", "workers": "4"})
SourceSpec(name='ray', options=RayOptions(address=None, workers=4, worker_retries=0))
>>> parse_source("local").name
'local'
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from mtrl_gym.error import ConfigError
from mtrl_gym.registry import is_multiagent
from mtrl_gym.rollout.sources.agent import AgentOptions, make_agent_source
from mtrl_gym.rollout.sources.asynchronous import AsyncOptions, AsyncRollouts
from mtrl_gym.rollout.sources.base import RolloutSource
from mtrl_gym.rollout.sources.dynamic import DynamicOptions, DynamicSampling
from mtrl_gym.rollout.sources.local import LocalOptions, make_rollout_engine
from mtrl_gym.rollout.sources.multiagent import SelfPlayOptions, make_selfplay_engine
from mtrl_gym.rollout.sources.ray_workers import RayOptions, RayRolloutEngine

__all__ = ["SOURCES", "SourceKind", "SourceSpec", "BuildContext", "parse_source", "check_source", "make_source"]


@dataclass(frozen=True)
class BuildContext:
    """What a source builder gets besides its options: the run's config and live objects."""

    config: Any
    """The run's config (the GRPO config's fields: env, wrappers, serving and episode settings)."""
    policy: Any
    """The policy being trained (Ray workers and the async shadow copy it)."""
    sampler: Any
    """The sampler of this process (the local loop, the agent server and validation use it)."""
    tokenizer: Any
    env: Any = None
    """An env id or factory replacing ``config.env``."""


class SourceKind(NamedTuple):
    """One entry of :data:`SOURCES`."""

    options: type
    """The dataclass of the source's options (everything in its mapping but ``name``)."""
    build: Callable[[Any, BuildContext, bool], RolloutSource]
    """``build(options, context, validation) -> the training (or validation) source``."""
    description: str
    check: Callable[[Any, Any], None] | None = None
    """``check(options, config)``: refuse, when the config is made, run settings this source
    cannot serve (before any model loads)."""


class SourceSpec(NamedTuple):
    """A parsed ``source`` mapping."""

    name: str
    options: Any


def _build_local(options: LocalOptions, ctx: BuildContext, validation: bool) -> RolloutSource:
    if ctx.env is None and is_multiagent(ctx.config.env):  # every seat played by the policy: self-play
        return _build_selfplay(SelfPlayOptions(), ctx, validation)
    return make_rollout_engine(ctx.config, ctx.sampler, ctx.tokenizer, validation=validation, env=ctx.env)


def _build_selfplay(options: SelfPlayOptions, ctx: BuildContext, validation: bool) -> RolloutSource:
    return make_selfplay_engine(ctx.config, options, ctx.sampler, ctx.tokenizer, validation=validation, env=ctx.env)


def _build_agent(options: AgentOptions, ctx: BuildContext, validation: bool) -> RolloutSource:
    return make_agent_source(ctx.config, options, ctx.sampler, ctx.tokenizer, validation=validation, env=ctx.env)


def _build_ray(options: RayOptions, ctx: BuildContext, validation: bool) -> RolloutSource:
    if validation:  # validation stays in the trainer's process
        return make_rollout_engine(ctx.config, ctx.sampler, ctx.tokenizer, validation=True, env=ctx.env)
    return RayRolloutEngine(ctx.config, ctx.policy, ctx.tokenizer, options=options, env=ctx.env,
                            local_sampler=ctx.sampler)


def _build_async(options: AsyncOptions, ctx: BuildContext, validation: bool) -> RolloutSource:
    inner = parse_source(options.source)
    built = SOURCES[inner.name].build(inner.options, ctx, validation)
    if validation:  # validation plays the inner source's episodes now, with the newest weights
        return built
    return AsyncRollouts(built, ctx.policy, max_staleness=options.max_staleness, group_size=ctx.config.group_size)


def _build_dynamic(options: DynamicOptions, ctx: BuildContext, validation: bool) -> RolloutSource:
    inner = parse_source(options.source)
    built = SOURCES[inner.name].build(inner.options, ctx, validation)
    if validation:  # validation plays every task it is given, once
        return built
    return DynamicSampling(built, group_size=ctx.config.group_size, max_draws=options.max_draws)


def _check_ray(options: RayOptions, config: Any) -> None:
    if config.sampler not in ("hf", "openai"):
        raise ConfigError(f"source 'ray' cannot be combined with sampler {config.sampler!r}: Ray workers sample "
                          "with 'hf' (a model copy each) or 'openai' (e.g. a `vllm serve` endpoint: "
                          "sampler=openai, sampler_kwargs={base_url: ...}); see docs/scaling.md")


def _check_agent(options: AgentOptions, config: Any) -> None:
    if config.serving.constrained:
        raise ConfigError("`constrained` sampling needs the built-in rollout loop (source 'local'): the agent "
                          "source serves the sampler's own distribution")


def _check_wrapped(options: AsyncOptions | DynamicOptions, config: Any) -> None:
    check_source(options.source, config)


#: Every source a config can name: its options class, builder and one line about it.
SOURCES: dict[str, SourceKind] = {
    "local": SourceKind(LocalOptions, _build_local, "the built-in agent loop in this process"),
    "agent": SourceKind(AgentOptions, _build_agent, "your own agent, against a local policy endpoint", _check_agent),
    "ray": SourceKind(RayOptions, _build_ray, "the built-in loop on Ray actors (docs/scaling.md)", _check_ray),
    "selfplay": SourceKind(SelfPlayOptions, _build_selfplay, "multi-agent games, trained seats against each other"),
    "async": SourceKind(AsyncOptions, _build_async, "another source, sampled ahead of the optimiser", _check_wrapped),
    "dynamic": SourceKind(DynamicOptions, _build_dynamic,
                          "another source, with more task rows played while its groups agree", _check_wrapped),
}


def parse_source(value: str | Mapping[str, Any]) -> SourceSpec:
    """Check a ``source`` setting (a name, or a mapping with ``name`` and that source's options)."""
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
        raise ConfigError(f"`source` must name a rollout source, e.g. {{'name': 'local'}} or "
                          f"{{'name': 'ray', 'workers': 4}}, got {value!r}")
    name = value["name"]
    kind = SOURCES.get(name)
    if kind is None:
        close = difflib.get_close_matches(name, list(SOURCES), n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown rollout source {name!r}.{hint} Sources: {', '.join(map(repr, SOURCES))}")
    fields = {f.name: f for f in dataclasses.fields(kind.options)}
    given = {k: v for k, v in value.items() if k != "name"}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        known = ", ".join(fields) or "none"
        raise ConfigError(f"`source` {name!r} has no option(s) {unknown}; its options: {known}")
    hints = typing.get_type_hints(kind.options)
    return SourceSpec(name, kind.options(**{k: _coerce(f"source.{k}", v, hints[k]) for k, v in given.items()}))


def check_source(value: str | Mapping[str, Any], config: Any) -> SourceSpec:
    """:func:`parse_source`, then the named source's check of the run's other settings."""
    spec = parse_source(value)
    kind = SOURCES[spec.name]
    if kind.check is not None:
        kind.check(spec.options, config)
    return spec


def make_source(value: str | Mapping[str, Any], ctx: BuildContext, *, validation: bool = False) -> RolloutSource:
    """The training (or, with ``validation``, the validation) source a ``source`` setting names."""
    spec = parse_source(value)
    return SOURCES[spec.name].build(spec.options, ctx, validation)


def _coerce(name: str, value: Any, tp: Any) -> Any:
    """Numbers and booleans written as text (``--set source.workers=4``) become numbers and booleans."""
    if not isinstance(value, str):
        return value
    union = typing.get_origin(tp) in (typing.Union, types.UnionType)
    options = typing.get_args(tp) if union else (tp,)
    if type(None) in options and value.strip().lower() in ("none", "null", "~"):
        return None
    for option in options:
        if option is bool and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if option in (int, float):
            try:
                return option(value)
            except ValueError:
                continue
    if str in options or any(typing.get_origin(o) in (dict, list) for o in options):
        if any(typing.get_origin(o) in (dict, list) for o in options) and value.lstrip()[:1] in "[{":
            import json

            try:
                return json.loads(value)
            except ValueError:
                raise ConfigError(f"`{name}`: cannot parse {value[:80]!r} as JSON") from None
        return value
    raise ConfigError(f"`{name}` must be {' or '.join(getattr(o, '__name__', str(o)) for o in options)}, "
                      f"got {value!r}")
