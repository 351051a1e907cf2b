"""mtrl_gym envs as OpenEnv servers, and OpenEnv servers as Gymnasium text envs (``openenv>=0.10,<0.11``).

**Serve** any registered env: :func:`create_app` builds OpenEnv's FastAPI app (``/ws``
sessions, ``/reset``, ``/step``, ``/schema``, ``/health``) around :class:`MtrlEnvironment`;
:func:`serve` runs it with uvicorn (``mtrl-gym openenv-serve mtrl/Wordle-v0 --port 8000``).

* Action :class:`MtrlAction`: ``{"text": "<raw model text>"}``, or a structured call
  ``{"tool": "guess_word", "arguments": {"guess": "crane"}}`` (played as its Hermes text).
* Observation :class:`MtrlObservation`: ``text`` (the env's observation), ``info`` (the
  env's ``info``, JSON-safe: ``system_prompt``, ``tools``, ``task_id`` at reset;
  ``format_error``, ``tool_results``, ... on steps; plus ``terminated``/``truncated``),
  and OpenEnv's ``reward`` (the step reward of the bare env) and ``done``.
* ``reset`` takes ``seed`` and ``task`` (a task row, dict or JSON string) and passes them
  to the env: ``reset(seed=s)`` gives the same task every time, over one WebSocket
  session or many (unlike OpenEnv's bundled textarena env, upstream issue #1102). A reset
  without a seed draws one and reports it in ``info["seed"]``.

Episodes persist only over the WebSocket (``/ws``): OpenEnv's HTTP ``/reset`` and ``/step``
build a fresh env per call.

**Connect** to any running OpenEnv server with :class:`OpenEnvTextEnv`, a
``gymnasium.Env[str, str]``, so mtrl_gym's rollout engine, trainer and evaluation can play
it (``RolloutEngine(lambda: OpenEnvTextEnv(url), ...)``). Against an mtrl_gym server it is
the served env, seeds and ``info`` included; other OpenEnv servers work when their action
takes the text in one field (``action_key``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces

from mtrl_gym.adapters.episode import (
    EnvEpisode,
    EpisodeTask,
    decode_row,
    tool_call_text,
)
from mtrl_gym.error import ConfigError, DependencyNotInstalled
from mtrl_gym.serialization import json_safe

__all__ = [
    "MtrlAction",
    "MtrlEnvironment",
    "MtrlObservation",
    "MtrlState",
    "OpenEnvTextEnv",
    "create_app",
    "serve",
]


try:
    from openenv.core import Action, Environment, Observation, State
    from openenv.core import create_app as _openenv_app
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise DependencyNotInstalled("openenv", "openenv") from e
from pydantic import Field


class MtrlAction(Action):
    """The model's raw text (``text``), or one structured tool call (``tool``, ``arguments``)."""

    text: str = Field(default="", description="The model's raw assistant text; the env parses it.")
    tool: str | None = Field(default=None, description="A tool name; with it, `arguments` are played as one "
                                                       "tool call instead of `text`.")
    arguments: dict[str, Any] | None = Field(default=None, description="Arguments of `tool`.")


class MtrlObservation(Observation):
    """The env's observation text and its ``info`` (JSON-safe)."""

    text: str = Field(default="", description="The env's observation.")
    info: dict[str, Any] = Field(default_factory=dict, description="The env's info dict, JSON-safe.")


class MtrlState(State):
    """Where the session's episode stands."""

    env_id: str = ""
    task_id: str = ""
    seed: int | None = None
    total_reward: float = 0.0
    done: bool = False


class MtrlEnvironment(Environment):
    """One mtrl_gym env per OpenEnv session.

    Args:
        env_id: a registered env id.
        env_kwargs: keyword arguments for ``gymnasium.make``.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None = None):
        super().__init__()
        self.env_id = env_id
        self._episode = EnvEpisode(env_id, env_kwargs=env_kwargs)
        self._seed: int | None = None
        self._episode_id: str | None = None
        self._steps = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Any = None,
              **kwargs: Any) -> MtrlObservation:
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0] % (2**31))
        obs = self._episode.reset(EpisodeTask(seed=int(seed), row=decode_row(task)))
        self._seed, self._episode_id, self._steps = int(seed), episode_id, 0
        info = dict(self._episode.info)
        info.update(seed=int(seed), reward_range=list(_reward_range(self._episode.env)),
                    terminated=False, truncated=False)
        return MtrlObservation(text=obs, info=json_safe(info), done=False, reward=None)

    def step(self, action: MtrlAction | Mapping[str, Any], timeout_s: float | None = None,
             **kwargs: Any) -> MtrlObservation:
        if isinstance(action, Mapping):
            action = MtrlAction(**action)
        text = tool_call_text(action.tool, action.arguments or {}) if action.tool is not None else action.text
        ep = self._episode
        if not ep.started:
            self.reset()
        was_done = ep.done
        obs = ep.step(text)
        if not was_done:
            self._steps += 1
        info = {} if was_done else dict(ep.infos[-1])
        info.update(terminated=ep.terminated, truncated=ep.truncated)
        reward = 0.0 if was_done else ep.rewards[-1]
        return MtrlObservation(text=obs, info=json_safe(info), done=ep.done, reward=float(reward))

    @property
    def state(self) -> MtrlState:
        ep = self._episode
        return MtrlState(episode_id=self._episode_id, step_count=self._steps, env_id=self.env_id,
                         task_id=str(ep.info.get("task_id") or ""), seed=self._seed,
                         total_reward=float(sum(ep.rewards)), done=ep.done)

    def close(self) -> None:
        self._episode.close()


def _reward_range(env: gymnasium.Env) -> tuple[float | None, float | None]:
    try:
        low, high = env.get_wrapper_attr("reward_range")
    except (AttributeError, TypeError, ValueError):
        return None, None
    return (float(low) if np.isfinite(low) else None, float(high) if np.isfinite(high) else None)


def create_app(env_id: str, *, env_kwargs: Mapping[str, Any] | None = None, max_sessions: int = 64):
    """OpenEnv's FastAPI app serving ``env_id``: one env per WebSocket session."""
    from mtrl_gym.rollout.envs import make_env

    if max_sessions < 1:
        raise ConfigError(f"`max_sessions` must be >= 1, got {max_sessions!r}")
    make_env(env_id, env_kwargs).close()  # an unknown id or bad kwargs fail now, not per session
    kwargs = dict(env_kwargs or {})
    return _openenv_app(lambda: MtrlEnvironment(env_id, kwargs), MtrlAction, MtrlObservation, env_name=env_id,
                        max_concurrent_envs=max_sessions, state_cls=MtrlState)


def serve(env_id: str, *, host: str = "127.0.0.1", port: int = 8000, env_kwargs: Mapping[str, Any] | None = None,
          max_sessions: int = 64, log_level: str = "warning") -> None:
    """Serve ``env_id`` as an OpenEnv environment until interrupted."""
    try:
        import uvicorn
    except ImportError as e:
        raise DependencyNotInstalled("uvicorn", "openenv") from e
    app = create_app(env_id, env_kwargs=env_kwargs, max_sessions=max_sessions)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


class OpenEnvTextEnv(gymnasium.Env[str, str]):
    """A running OpenEnv server as a Gymnasium text env (one WebSocket session per instance).

    Args:
        base_url: the server's URL (``http://127.0.0.1:8000``).
        action_key: the action field that takes the model's text (``"text"`` for mtrl_gym servers).
        observation_key: the observation field holding the text; when the server's
            observation has no such field, the observation is its JSON.
        reward_range: the env's reward range; ``None`` reads it from an mtrl_gym server's
            reset ``info`` (other servers: ``(-inf, inf)``).
        message_timeout_s: seconds to wait for each server reply.

    ``reset(seed=s, options={"task": row})`` sends ``seed`` and ``task`` to the server;
    ``step(text)`` returns ``(observation, reward, terminated, truncated, info)`` with the
    server's ``done`` as ``terminated`` (``truncated`` when an mtrl_gym server says so).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, base_url: str, *, action_key: str = "text", observation_key: str = "text",
                 reward_range: tuple[float, float] | None = None, message_timeout_s: float = 60.0,
                 client_factory: Callable[[str], Any] | None = None):
        if not base_url:
            raise ConfigError("`base_url` must be the OpenEnv server's URL, e.g. http://127.0.0.1:8000")
        self.base_url = base_url
        self.action_key, self.observation_key = action_key, observation_key
        self.observation_space = spaces.Text(1_000_000, min_length=0, charset=_ALL_CHARS)
        self.action_space = spaces.Text(1_000_000, min_length=0, charset=_ALL_CHARS)
        self._range: tuple[float, float] | None = tuple(reward_range) if reward_range is not None else None
        self.success_threshold = None
        self._timeout = float(message_timeout_s)
        self._client_factory = client_factory
        self._client = None
        self._done = True

    @property
    def reward_range(self) -> tuple[float, float]:
        """The env's reward range: given, or read from an mtrl_gym server's reset ``info``
        (before the first reset, from one HTTP ``/reset``, which builds and drops a fresh env)."""
        if self._range is None:
            self._range = self._probe_range()
        return self._range

    def _probe_range(self) -> tuple[float, float]:
        import urllib.error
        import urllib.request

        url = self.base_url.replace("ws://", "http://", 1).replace("wss://", "https://", 1).rstrip("/") + "/reset"
        request = urllib.request.Request(url, data=json.dumps({"seed": 0}).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                body = json.loads(response.read() or b"{}")
        except (urllib.error.URLError, OSError, ValueError):
            return (-np.inf, np.inf)
        return _range_of((body.get("observation") or {}).get("info") or {}) or (-np.inf, np.inf)

    def _connect(self):
        if self._client is None:
            if self._client_factory is not None:
                self._client = self._client_factory(self.base_url)
            else:
                from openenv.core.generic_client import GenericEnvClient

                self._client = GenericEnvClient(base_url=self.base_url, message_timeout_s=self._timeout).sync()
                self._client.connect()
        return self._client

    def _text(self, observation: Any) -> str:
        if isinstance(observation, Mapping) and isinstance(observation.get(self.observation_key), str):
            return observation[self.observation_key]
        return json.dumps(json_safe(observation), ensure_ascii=False, sort_keys=True)

    @staticmethod
    def _info(result, observation: Any) -> dict[str, Any]:
        info = dict(observation.get("info") or {}) if isinstance(observation, Mapping) else {}
        if getattr(result, "metadata", None):
            info.setdefault("metadata", result.metadata)
        return info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(2**31))
        kwargs: dict[str, Any] = {"seed": int(seed)}
        options = dict(options or {})
        if "task" in options:
            kwargs["task"] = options.pop("task")
        kwargs.update(options)
        result = self._connect().reset(**kwargs)
        obs = result.observation
        info = self._info(result, obs)
        if self._range is None:
            self._range = _range_of(info) or (-np.inf, np.inf)
        self._done = bool(result.done)
        return self._text(obs), info

    def step(self, action: str):
        if self._client is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        result = self._client.step({self.action_key: str(action)})
        obs = result.observation
        info = self._info(result, obs)
        truncated = bool(info.get("truncated", False))
        terminated = bool(result.done) and not truncated
        return self._text(obs), float(result.reward or 0.0), terminated, truncated, info

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None


def _range_of(info: Mapping[str, Any]) -> tuple[float, float] | None:
    value = info.get("reward_range")
    if not isinstance(value, list) or len(value) != 2:
        return None
    low, high = value
    return (-np.inf if low is None else float(low), np.inf if high is None else float(high))


_ALL_CHARS = "".join(chr(c) for c in range(32, 127)) + "\n\t"
