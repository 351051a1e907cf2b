"""Record-replay tool sandboxes: turn a tool API into a cheap, reproducible training environment.

The pieces, each in its own module:

* :mod:`~mtrl_gym.envs.sandbox.tools` — :func:`tool`, :class:`Tool`, :class:`ToolSet`,
  :class:`ToolContext`, :class:`ToolError`: typed Python functions with generated schemas;
* :mod:`~mtrl_gym.envs.sandbox.schema` — schema generation and argument validation;
* :mod:`~mtrl_gym.envs.sandbox.cassette` — :class:`Cassette`: record / replay / replay_or_record;
* :mod:`~mtrl_gym.envs.sandbox.canonical` — canonical argument matching;
* :mod:`~mtrl_gym.envs.sandbox.redact` — :class:`Redactor`: secrets out of cassettes;
* :mod:`~mtrl_gym.envs.sandbox.isolation` — :func:`sandbox_guard`: no network, no stray writes;
* :mod:`~mtrl_gym.envs.sandbox.grading` — :class:`Grade` and task-selectable checkers;
* :mod:`~mtrl_gym.envs.sandbox.final` — :class:`FinalAnswer`: ``submit`` / ``<final_answer>``;
* :mod:`~mtrl_gym.envs.sandbox.env` — :class:`ToolSandboxEnv`, the environment base.

Worked examples (registered): ``mtrl/Sandbox-Weather-v0`` (read-only tools answered from a
cassette), ``mtrl/Sandbox-Orders-v0`` (stateful tools over a per-episode order store) and
``mtrl/Sandbox-Shop-v0`` (pure tools, final answers graded by task-provided checkers).
The user guide and the cassette format specification are in ``docs/sandbox.md``.
"""

from __future__ import annotations

from mtrl_gym.envs.sandbox.canonical import argument_distance, call_key, canonical_json, canonicalize
from mtrl_gym.envs.sandbox.cassette import (MODES as CASSETTE_MODES, ON_MISSING, CallOutcome, Cassette, Interaction,
                                            ToolResponse)
from mtrl_gym.envs.sandbox.env import ERROR_STATUSES, MODES, STATUSES, ToolSandboxEnv
from mtrl_gym.envs.sandbox.final import CHARSET, FinalAnswer, clean_text
from mtrl_gym.envs.sandbox.grading import CHECKERS, Grade, make_checker, register_checker
from mtrl_gym.envs.sandbox.isolation import GuardReport, SandboxViolation, sandbox_guard
from mtrl_gym.envs.sandbox.redact import DEFAULT_PATTERNS, DEFAULT_SECRET_KEYS, Redactor
from mtrl_gym.envs.sandbox.schema import type_schema, validate, validate_arguments
from mtrl_gym.envs.sandbox.tools import Tool, ToolContext, ToolError, ToolSet, render_result, tool

__all__ = [
    "tool", "Tool", "ToolSet", "ToolContext", "ToolError", "render_result",
    "Cassette", "Interaction", "CallOutcome", "ToolResponse", "CASSETTE_MODES", "ON_MISSING",
    "ToolSandboxEnv", "MODES", "STATUSES", "ERROR_STATUSES",
    "FinalAnswer", "CHARSET", "clean_text",
    "Grade", "CHECKERS", "make_checker", "register_checker",
    "sandbox_guard", "SandboxViolation", "GuardReport",
    "Redactor", "DEFAULT_PATTERNS", "DEFAULT_SECRET_KEYS",
    "canonicalize", "canonical_json", "call_key", "argument_distance",
    "type_schema", "validate", "validate_arguments",
]
