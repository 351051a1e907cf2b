"""Evaluation-only task sources that live outside the package's data: official benchmarks a user checks out.

Each entry names the module that knows the benchmark's layout; the module provides
``setup(path, domain) -> (env_id, task rows, env kwargs)`` (it prints the benchmark's
licence and any checks) and ``official_report(files) -> str`` (the benchmark's own
success measure beside the strict one). ``mtrl-gym eval --sop-bench PATH --domain NAME``
is the command-line spelling of ``external_benchmark("sop-bench")``. Tasks from these
sources are refused for training: :func:`refuse_training` raises, with the benchmark's
licence, for the env ids of :data:`EVALUATION_ONLY_ENVS` and for trajectories or task rows
that came from them; every entry that can train (``mtrl-gym train``, ``sft``, ``demos`` and
their Python configs) calls it before any model loads.

>>> sorted(EXTERNAL_BENCHMARKS)
['sop-bench']
>>> refuse_training("mtrl/Wordle-v0")  # a trainable env passes
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from mtrl_gym.error import ConfigError
from mtrl_gym.registry import normalize_id

__all__ = ["EXTERNAL_BENCHMARKS", "EVALUATION_ONLY_ENVS", "external_benchmark", "refuse_training"]

#: Benchmark name -> module with ``setup`` and ``official_report``.
EXTERNAL_BENCHMARKS = {"sop-bench": "mtrl_gym.envs.sop.sop_bench.cli"}
#: Env id of an evaluation-only benchmark -> (the id prefix of its task rows, the module holding ``LICENCE_TERMS``).
EVALUATION_ONLY_ENVS = {"mtrl/SOP-Bench-v0": ("sop-bench-", "mtrl_gym.envs.sop.sop_bench.data")}


def _refusal(env_id: str, what: str) -> ConfigError:
    terms = importlib.import_module(EVALUATION_ONLY_ENVS[env_id][1]).LICENCE_TERMS
    return ConfigError(f"{what} {env_id}, an evaluation-only benchmark: {terms} Train on the generated mtrl/SOP-* "
                       "domains instead, and evaluate on this one.")


def refuse_training(env: str | None = None, *, trajectories: Iterable[Any] = (), what: str = "") -> None:
    """Raise :class:`ConfigError`, with the licence text, when ``env`` (an env id) is an evaluation-only benchmark
    or one of ``trajectories`` (objects with ``env_id``/``task_id``, or task-row dicts) came from one."""
    env = normalize_id(str(env or ""))
    if env in EVALUATION_ONLY_ENVS:
        raise _refusal(env, what or "cannot train on")
    for i, t in enumerate(trajectories):
        get = t.get if isinstance(t, dict) else (lambda k, t=t: getattr(t, k, None))
        env_id, task_id = normalize_id(str(get("env_id") or "")), str(get("task_id") or get("id") or "")
        for eval_env, (prefix, _) in EVALUATION_ONLY_ENVS.items():
            if env_id == eval_env or task_id.startswith(prefix) or get("evaluation_only") is True:
                raise _refusal(eval_env, f"{what or 'trajectory'} {i} ({task_id or env_id!r}) comes from")


def external_benchmark(name: str) -> ModuleType:
    """The module of the external benchmark ``name`` (see the module docstring)."""
    try:
        return importlib.import_module(EXTERNAL_BENCHMARKS[name])
    except KeyError:
        raise ConfigError(f"unknown benchmark {name!r}; known: {sorted(EXTERNAL_BENCHMARKS)}") from None
