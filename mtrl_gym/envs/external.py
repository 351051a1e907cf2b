"""Evaluation-only task sources that live outside the package's data: official benchmarks a user checks out.

Each entry names the module that knows the benchmark's layout; the module provides
``setup(path, domain) -> (env_id, task rows, env kwargs)`` (it prints the benchmark's
licence and any checks) and ``official_report(files) -> str`` (the benchmark's own
success measure beside the strict one). ``mtrl-gym eval --sop-bench PATH --domain NAME``
is the command-line spelling of ``external_benchmark("sop-bench")``. Tasks from these
sources are refused for training.

>>> sorted(EXTERNAL_BENCHMARKS)
['sop-bench']
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mtrl_gym.error import ConfigError

__all__ = ["EXTERNAL_BENCHMARKS", "external_benchmark"]

#: Benchmark name -> module with ``setup`` and ``official_report``.
EXTERNAL_BENCHMARKS = {"sop-bench": "mtrl_gym.envs.sop.sop_bench.cli"}


def external_benchmark(name: str) -> ModuleType:
    """The module of the external benchmark ``name`` (see the module docstring)."""
    try:
        return importlib.import_module(EXTERNAL_BENCHMARKS[name])
    except KeyError:
        raise ConfigError(f"unknown benchmark {name!r}; known: {sorted(EXTERNAL_BENCHMARKS)}") from None
