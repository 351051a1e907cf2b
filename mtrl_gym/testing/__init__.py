"""Test helpers for text environments, shipped in the package so your own tests can use them.

* :mod:`~mtrl_gym.testing.corpus`: the adversarial corpus of assistant messages
  (:func:`adversarial_texts`, :data:`CATEGORIES`); standard library only.
* :func:`check_text_env` (:mod:`~mtrl_gym.testing.check`): Gymnasium's checker, the corpus,
  cross-process determinism and a secret-leak check on one env (``mtrl-gym check ENV_ID``).
* :func:`check_multiagent_env` (:mod:`~mtrl_gym.testing.multiagent`): the same checks per seat on a
  PettingZoo env, with PettingZoo's own checkers (``check_text_env`` hands multi-agent ids to it).
* :mod:`~mtrl_gym.testing.shrink`: the hypothesis search that shrinks a failing example for the report.
* :func:`env_contract_tests` (:mod:`~mtrl_gym.testing.pytest_plugin`): the same checks as
  pytest tests, one per check, in a three-line test file.
* :mod:`~mtrl_gym.testing.cost`: the time of one step on a text, and its growth with length.
* :mod:`~mtrl_gym.testing.strategies`: hypothesis strategies :func:`model_text`,
  :func:`tool_calls` and :func:`task_rows`, and the stateful :func:`episode_machine` (needs ``hypothesis``;
  imported on first use).

Importing this package imports neither torch nor hypothesis.
"""

from __future__ import annotations

from typing import Any

from mtrl_gym.testing.check import check_text_env
from mtrl_gym.testing.kit import CheckReport, CheckResult
from mtrl_gym.testing.corpus import CATEGORIES, BadText, adversarial_texts
from mtrl_gym.testing.cost import growth_ratio, step_seconds

__all__ = ["check_text_env", "check_multiagent_env", "CheckReport", "CheckResult", "CATEGORIES", "BadText", "adversarial_texts", "growth_ratio", "step_seconds", "model_text",
           "tool_calls", "json_values", "task_rows", "episode_machine", "env_contract_tests"]

_LAZY = {"model_text", "tool_calls", "json_values", "task_rows", "episode_machine"}


def __getattr__(name: str) -> Any:
    if name == "env_contract_tests":  # imports pytest
        from mtrl_gym.testing.pytest_plugin import env_contract_tests

        return env_contract_tests
    if name == "check_multiagent_env":  # imports pettingzoo when called
        from mtrl_gym.testing.multiagent import check_multiagent_env

        return check_multiagent_env
    if name in _LAZY:
        from mtrl_gym.testing import strategies

        return getattr(strategies, name)
    raise AttributeError(f"module 'mtrl_gym.testing' has no attribute {name!r}")
