"""Bring your own agent: an OpenAI-compatible policy endpoint with token-exact sessions.

The agent runs wherever it likes and calls the policy through
``http://host:port/sessions/<id>/v1`` with the session's key; the server renders each
request with the policy's chat template, re-uses the recorded tokens of earlier turns, and keeps per session the
exact sampled token ids and log-probs (env/tool tokens masked), ready for training.

* :class:`PolicyService` / :class:`ServeConfig`: the server logic, no HTTP
  (:mod:`mtrl_gym.serve.service`);
* :class:`PolicyServer`: the FastAPI app under uvicorn in a thread
  (:mod:`mtrl_gym.serve.app`, extra ``[serve]``);
* :func:`report_reward`, :func:`rollout_handler`, :func:`task_payload`: agent-side helpers
  (standard library only, :mod:`mtrl_gym.serve.reward`).

Names load lazily: ``import mtrl_gym.serve`` imports neither torch nor fastapi.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "PolicyServer",
    "PolicyService",
    "ServeConfig",
    "accepts_api_key",
    "create_app",
    "report_failure",
    "report_reward",
    "reward_of",
    "rollout_handler",
    "session_parts",
    "task_payload",
]

_WHERE = {"PolicyService": "service", "ServeConfig": "service", "PolicyServer": "app", "create_app": "app",
          "report_reward": "reward", "report_failure": "reward", "rollout_handler": "reward",
          "task_payload": "reward", "session_parts": "reward", "reward_of": "reward",
          "accepts_api_key": "reward"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"mtrl_gym.serve.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'mtrl_gym.serve' has no attribute {name!r}")
