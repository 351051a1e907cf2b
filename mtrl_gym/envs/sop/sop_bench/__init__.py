"""Evaluation-only access to a user's own checkout of the official SOP-Bench data.

Nothing of SOP-Bench ships with mtrl_gym: :func:`load_benchmark` reads a domain folder the
user points at (``sop.txt``, ``toolspecs.json``, ``tools.py``, ``metadata.json``,
``test_set_with_outputs.csv``) and prints the licence terms, :class:`SOPBenchEnv` exposes
each row as an evaluation task with the benchmark's SOP and tools (run in a separate
process), :func:`leak_report` checks whether the official tools hand the expected outputs to
the agent, :func:`input_leakage` how well each input column alone predicts each output,
:func:`official_success` scores an answer as the benchmark's own parser does, and
:func:`check_trainable` refuses these rows as training tasks. Importing this
package registers ``mtrl/SOP-Bench-v0`` (``gymnasium.make("mtrl/SOP-Bench-v0", path=...,
domain=...)``); it is not in :func:`mtrl_gym.registry.list_envs`, which lists trainable envs.
"""

from __future__ import annotations

import gymnasium

from mtrl_gym.envs.sop.sop_bench.data import (LICENCE_TERMS, REQUIRED_FILES, Benchmark, benchmark_tasks,
                                              list_domains, load_benchmark)
from mtrl_gym.envs.sop.sop_bench.env import EVALUATION_ONLY, SOPBenchEnv, check_trainable, leaks_in
from mtrl_gym.envs.sop.sop_bench.leaks import input_leakage, leak_report
from mtrl_gym.envs.sop.sop_bench.official import official_match, official_success

__all__ = ["SOPBenchEnv", "Benchmark", "load_benchmark", "benchmark_tasks", "list_domains", "leak_report",
           "check_trainable", "official_match", "official_success", "input_leakage", "leaks_in", "LICENCE_TERMS", "REQUIRED_FILES", "EVALUATION_ONLY",
           "ENV_ID"]

ENV_ID = "mtrl/SOP-Bench-v0"
if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point="mtrl_gym.envs.sop.sop_bench.env:SOPBenchEnv", disable_env_checker=True)
