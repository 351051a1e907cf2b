"""SOP business domains: follow a standard operating procedure with tools, answer one JSON object.

The framework (this package) and one sub-package per domain:

* :mod:`~mtrl_gym.envs.sop.grading` — :class:`Field`, :func:`grade`, :class:`GradeResult`:
  strict per-field grading with documented normalisation;
* :mod:`~mtrl_gym.envs.sop.base` — :class:`SOPDomain` (the SOP document, world generator,
  tools, reference procedure, oracle, output schema) and :class:`SOPEnv`, the
  :class:`~mtrl_gym.envs.sandbox.ToolSandboxEnv` that runs a domain;
* :mod:`~mtrl_gym.envs.sop.oracle` — :func:`play_oracle`, the reference procedure played through an env;
* :mod:`~mtrl_gym.envs.sop.task_text` — :func:`render_task` / :func:`parse_task_inputs`, the first observation;
* :mod:`~mtrl_gym.envs.sop.tasks` — seeded, split-disjoint task rows (``mtrl-gym make-dataset``).

Domains are registered as ``mtrl/SOP-<Name>-v0``; the user guide, the grading rules and the
table of domains are in ``docs/sop.md``. Importing this package does not import the domains.
"""

from __future__ import annotations

from mtrl_gym.envs.sop.base import NOISE_LEVELS, RecordCheck, SOPDomain, SOPEnv, canonical
from mtrl_gym.envs.sop.oracle import OracleError, play_oracle
from mtrl_gym.envs.sop.task_text import parse_task_inputs, render_task
from mtrl_gym.envs.sop.grading import FIELD_TYPES, ITEM_TYPES, Field, GradeResult, check_expected, grade, normalize_enum
from mtrl_gym.envs.sop.tasks import SPLITS, generate_tasks, parse_difficulty, split_seeds, task_id

__all__ = [
    "SOPDomain", "SOPEnv", "RecordCheck", "SPLITS", "NOISE_LEVELS", "OracleError", "play_oracle", "render_task",
    "parse_task_inputs", "canonical",
    "Field", "GradeResult", "grade", "check_expected", "normalize_enum", "FIELD_TYPES", "ITEM_TYPES",
    "generate_tasks", "split_seeds", "task_id", "parse_difficulty",
]
