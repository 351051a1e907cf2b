"""verifiers' entry point for mtrl_gym: the taskset id ``mtrl-gym-verifiers`` imports this package.

verifiers resolves a taskset id to one top-level module name, so this shim re-exports the
taskset, env and harness of :mod:`mtrl_gym.adapters.verifiers`::

    vf-eval mtrl-gym-verifiers --env.taskset.env-id mtrl/Wordle-v0 --model M --client.base-url URL
"""

from mtrl_gym.adapters.verifiers import MtrlEnv, MtrlHarness, MtrlTaskset

__all__ = ["MtrlEnv", "MtrlHarness", "MtrlTaskset"]
