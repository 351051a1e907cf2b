"""Agent-side helpers: read a task row, report the episode's reward to its session.

Standard library only, so an agent process needs nothing but its own framework. An agent
gets a *session base URL* (``http://host:port/sessions/<id>/v1``) and the session's key,
points its OpenAI client at them (``OpenAI(base_url=base_url, api_key=api_key)``), plays
its episode, and reports one reward:

* return it from the function the trainer calls (``run(task_row, base_url, api_key) -> reward``),
* or ``report_reward(base_url, 1.0, {"turns": 3}, api_key=api_key)`` (``POST /sessions/<id>/reward``),
* or decorate the entry point with :func:`rollout_handler`, which reports the returned
  reward, or the failure when the function raises.

Where ``api_key`` is not given, the helpers send ``$MTRL_GYM_API_KEY`` if it is set.

>>> task_payload({"prompt": '{"prompt": "Guess the word", "answer": "paste", "id": "t0"}'})["answer"]
'paste'
>>> session_parts("http://127.0.0.1:8000/sessions/abc/v1")
('http://127.0.0.1:8000', 'abc')
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from mtrl_gym.error import ConfigError, Error

__all__ = ["accepts_api_key", "report_failure", "report_reward", "reward_of", "rollout_handler", "session_parts",
           "task_payload"]


def task_payload(row: Mapping[str, Any]) -> dict[str, Any]:
    """The task inside a dataset row.

    Rows in the managed service's format hold the task as a JSON string under ``"prompt"``
    (``{"prompt": "{\\"prompt\\": ..., \\"answer\\": ..., \\"id\\": ...}"}``); that string is
    decoded. Any other mapping is returned as a plain dict.
    """
    if not isinstance(row, Mapping):
        raise ConfigError(f"a task row must be a mapping, got {type(row).__name__}")
    inner = row.get("prompt")
    if set(row) == {"prompt"} and isinstance(inner, str) and inner.lstrip().startswith("{"):
        try:
            value = json.loads(inner)
        except json.JSONDecodeError:
            return dict(row)
        if isinstance(value, dict):
            return value
    return dict(row)


def session_parts(base_url: str) -> tuple[str, str]:
    """``(server root, session id)`` of a session base URL ``<root>/sessions/<id>/v1``."""
    url = base_url.rstrip("/")
    head, sep, tail = url.rpartition("/sessions/")
    sid = tail.removesuffix("/v1")
    if not sep or not sid or "/" in sid:
        raise ConfigError(f"not a session URL (expected http://host:port/sessions/<id>/v1): {base_url!r}")
    return head, sid


def accepts_api_key(fn: Callable[..., Any]) -> bool:
    """Whether an agent function can be called with ``api_key=`` (a parameter of that name
    or ``**kwargs``)."""
    try:
        params = inspect.signature(fn, follow_wrapped=False).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is p.VAR_KEYWORD or (p.name == "api_key" and p.kind is not p.POSITIONAL_ONLY) for p in params)


def _post(url: str, body: Mapping[str, Any], timeout_s: float, api_key: str | None) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    key = api_key if api_key is not None else os.environ.get("MTRL_GYM_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        detail = e.read()[:500].decode("utf-8", "replace")
        raise Error(f"POST {url} failed with HTTP {e.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
        raise Error(f"POST {url} failed: {getattr(e, 'reason', e)}") from None


def report_reward(base_url: str, reward: float, metrics: Mapping[str, float] | None = None, *,
                  api_key: str | None = None, timeout_s: float = 30.0) -> dict[str, Any]:
    """Report the episode's reward (and numeric metrics) to the session of ``base_url``
    (``api_key``: the session's key or the server's; default ``$MTRL_GYM_API_KEY``)."""
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        raise ConfigError(f"`reward` must be a finite number, got {reward!r}")
    root, sid = session_parts(base_url)
    return _post(f"{root}/sessions/{sid}/reward", {"reward": float(reward), "metrics": dict(metrics or {})},
                 timeout_s, api_key)


def report_failure(base_url: str, reason: str, *, api_key: str | None = None,
                   timeout_s: float = 30.0) -> dict[str, Any]:
    """Mark the session's episode as failed (it gets the failure reward)."""
    root, sid = session_parts(base_url)
    return _post(f"{root}/sessions/{sid}/reward", {"failed": True, "reason": str(reason)[:2000]}, timeout_s,
                 api_key)


def reward_of(value: Any) -> tuple[float | None, dict[str, float]]:
    """``(reward, metrics)`` from what an agent returned: a number, ``{"reward": x,
    "metrics": {...}}`` or ``None`` (no reward)."""
    if value is None:
        return None, {}
    if isinstance(value, Mapping):
        metrics = value.get("metrics") or {}
        reward = value.get("reward")
        if not isinstance(metrics, Mapping):
            raise ConfigError(f"the agent's `metrics` must be a mapping, got {type(metrics).__name__}")
        return _finite(reward), {str(k): float(v) for k, v in metrics.items()}
    return _finite(value), {}


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"the agent's reward must be a finite number, got {value!r}")
    return float(value)


def rollout_handler(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``fn(task_row, base_url, ...)`` so that its reward reaches the session.

    The returned reward (see :func:`reward_of`) is POSTed to ``base_url``'s session; if
    ``fn`` raises, the failure is reported and the exception re-raised. The decorated
    function returns what ``fn`` returned, so the trainer's in-process call sees it too.
    It takes the session's key as ``api_key=`` and passes it on when ``fn`` accepts it.
    """
    passes_key = accepts_api_key(fn)

    @functools.wraps(fn)
    def wrapper(task_row, base_url: str, *args, api_key: str | None = None, **kwargs):
        if passes_key:
            kwargs["api_key"] = api_key
        try:
            value = fn(task_row, base_url, *args, **kwargs)
        except BaseException as e:
            try:
                report_failure(base_url, f"{type(e).__name__}: {e}", api_key=api_key)
            except Error:
                pass  # the session may already be closed (time budget); the original error matters
            raise
        reward, metrics = reward_of(value)
        if reward is not None:
            try:
                report_reward(base_url, reward, metrics, api_key=api_key)
            except Error as e:
                if "reward_already_reported" not in str(e):
                    raise
        return value

    return wrapper
