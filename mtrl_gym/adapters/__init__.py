"""Adapters: mtrl_gym environments under other training and serving stacks.

Each module adapts any registered env (Wordle, SOP, sandboxes, your own) to one outside
framework and imports that framework when it is imported (a missing one raises
:class:`mtrl_gym.error.DependencyNotInstalled` naming the pip extra):

=====================  ============================================================  ==================
``episode``            one episode driven from outside: tasks, steps, outcome        (no extra)
``schema``             JSON-schema tool parameters as Python type hints              (no extra)
``verifiers``          verifiers 0.4 taskset + env (``vf-eval mtrl-gym-verifiers``)  ``[verifiers]``
``verifiers_tools``    the env's tools as a verifiers (MCP) tool server              ``[verifiers]``
``trl``                TRL >= 1.8 ``environment_factory`` and ``rollout_func``       ``[trl]``
``openenv``            OpenEnv 0.10 server and Gymnasium client                      ``[openenv]``
=====================  ============================================================  ==================

Every adapter scores an episode with the bare env's outcome (shaping is logged apart),
hands the model's text to ``env.step`` so bad text gets the env's usual observation and
``info["format_error"]``, and seeds tasks the same way, so one task and one sequence of
actions give one reward under all of them.
"""

__all__ = ["episode", "openenv", "schema", "trl", "verifiers", "verifiers_tools"]
