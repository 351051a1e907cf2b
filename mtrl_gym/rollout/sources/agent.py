"""The trainer's *agent* rollout source: your own agent plays, the policy endpoint records.

Instead of the built-in agent loop (:class:`~mtrl_gym.rollout.engine.RolloutEngine`),
:class:`AgentRolloutSource` starts an OpenAI-compatible policy server on 127.0.0.1
(:mod:`mtrl_gym.serve`) in front of the trainer's sampler and, for every task row, runs
``group_size`` episodes of the user's agent at once, each with its own session URL
``http://127.0.0.1:<port>/sessions/<id>/v1`` and that session's key (the server takes
no request without a key; a session's key reaches only its session). The agent is either

* a Python function ``run(task_row, base_url, api_key) -> reward`` (``"my_pkg.agent:run"``
  or ``"examples/agent_openai_sdk.py:run"``; ``api_key`` is passed by keyword, so it may
  be a keyword-only parameter or ``**kwargs``), called in a thread of its own; it may return
  a number, ``{"reward": x, "metrics": {...}}``, or ``None`` after POSTing the reward to
  ``<base_url>/../reward`` (:func:`mtrl_gym.serve.report_reward`); or
* an HTTP endpoint (``"http://host:port/rollout"``) that receives
  ``{"task": task_row, "base_url": ..., "api_key": ..., "session_id": ...}`` as a POST and answers with
  ``{"reward": x}`` or reports the reward itself.

``task_row`` has the managed service's dataset shape, ``{"prompt": "<the task as JSON>"}``
(rows already in that shape are passed unchanged; :func:`mtrl_gym.serve.task_payload`
decodes them). The row, with its answer, goes only to the agent: the policy sees nothing
but the messages the agent sends.

Failures never stop a step: an agent that raises, returns no reward, never calls the
model, or runs past its time budget yields a trajectory with ``failed=True``, the reason,
and the env's minimum reward. Each finished session becomes one
:class:`~mtrl_gym.rollout.trajectory.Trajectory` (its last segment; see
``AgentOptions.segments`` for sessions whose history the agent rewrote), so the
trainer computes advantages, metrics and logs exactly as for its own rollouts.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.metrics import episode_metrics
from mtrl_gym.rollout.samplers.base import Sampler, SamplingParams
from mtrl_gym.rollout.sources.base import RolloutSource
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = [
    "AGENT_SEGMENTS",
    "DEFAULT_AGENT_TIME_BUDGET_S",
    "AgentOptions",
    "AgentRolloutSource",
    "AgentSourceConfig",
    "agent_row",
    "load_agent",
    "make_agent_source",
]

#: Time budget of an agent episode when ``episode_time_budget_s`` is not set.
#: What ``source.segments`` may be: train the last segment of a rewritten session, or none of it.
AGENT_SEGMENTS = ("last", "drop")
DEFAULT_AGENT_TIME_BUDGET_S = 600.0

AgentFn = Callable[[Mapping[str, Any], str], Any]


class HttpAgent:
    """An agent behind an HTTP endpoint: POSTs ``{"task", "base_url", "session_id"}``."""

    def __init__(self, url: str, timeout_s: float = DEFAULT_AGENT_TIME_BUDGET_S):
        self.url, self.timeout_s = url, timeout_s
        self.__name__ = url

    def __call__(self, task_row: Mapping[str, Any], base_url: str, *, api_key: str | None = None) -> Any:
        import urllib.error
        import urllib.request

        from mtrl_gym.serve.reward import session_parts

        body = {"task": dict(task_row), "base_url": base_url, "api_key": api_key,
                "session_id": session_parts(base_url)[1]}
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"the agent endpoint {self.url} answered HTTP {e.code}: "
                               f"{e.read()[:300].decode('utf-8', 'replace')}") from None
        try:
            value = json.loads(raw) if raw.strip() else None
        except json.JSONDecodeError:
            raise RuntimeError(f"the agent endpoint {self.url} answered with invalid JSON: {raw[:200]!r}") from None
        return value if isinstance(value, dict) and "reward" in value else None


def load_agent(spec: str | AgentFn) -> AgentFn:
    """The agent a spec names: ``"pkg.module:function"``, ``"path/to/file.py:function"``,
    an ``http(s)://`` URL, or a callable (returned as is)."""
    if callable(spec):
        return spec
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"`agent` must be 'module:function', 'file.py:function' or an http(s) URL, got {spec!r}")
    if spec.startswith(("http://", "https://")):
        return HttpAgent(spec)
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise ConfigError(f"`agent` {spec!r} must name a function: 'my_pkg.agent:run' or 'agent.py:run'")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise ConfigError(f"`agent`: no such file {target!r}")
        module_name = f"mtrl_gym_agent_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
        module = sys.modules.get(module_name)
        if module is None:
            loader_spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[module_name] = module
            try:
                loader_spec.loader.exec_module(module)
            except Exception:
                sys.modules.pop(module_name, None)
                raise
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise ConfigError(f"`agent`: cannot import {target!r} ({e})") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConfigError(f"`agent`: {target!r} has no function {name!r}")
    return fn


def agent_row(task: Mapping[str, Any] | None, seed: int) -> dict[str, Any]:
    """A task row in the service's shape ``{"prompt": "<task JSON>"}`` (rows already in it pass through)."""
    if task is None:
        return {"prompt": json.dumps({"id": f"seed-{seed}", "seed": seed})}
    if set(task) == {"prompt"} and isinstance(task["prompt"], str):
        return dict(task)
    return {"prompt": json.dumps(dict(task), ensure_ascii=False)}


@dataclass
class AgentOptions:
    """Options of the ``agent`` source: train your own agent instead of the built-in loop."""

    target: str = ""
    """The agent: ``pkg.module:function``, ``path/to/agent.py:function`` (called as
    ``run(task_row, base_url) -> reward``) or an ``http(s)://`` endpoint that receives
    ``{"task", "base_url", "session_id"}``. Each episode gets its own OpenAI-compatible
    session URL on a local policy server; failures and episodes past
    ``episode_time_budget_s`` (default 600 s here) get the env's minimum reward. See docs/agents.md."""
    segments: str = "last"
    """Sessions whose history the agent rewrote (a new token segment): ``last`` trains on
    the last segment, ``drop`` keeps the reward in the group baseline but trains none of it."""

    def __post_init__(self) -> None:
        if not isinstance(self.target, str) or ":" not in self.target:
            raise ConfigError(f"`source.target` of the agent source must be 'pkg.module:function', "
                              f"'agent.py:function' or an http(s) URL, got {self.target!r}")
        if self.segments not in AGENT_SEGMENTS:
            raise ConfigError(f"`source.segments` must be one of {', '.join(map(repr, AGENT_SEGMENTS))}, "
                              f"got {self.segments!r}")


@dataclass
class AgentSourceConfig:
    """How agent episodes are run and recorded."""

    group_size: int = 1
    """Episodes per task row, run concurrently with the other rows' episodes."""
    sampling: SamplingParams = field(default_factory=SamplingParams)
    """Sampling of every turn; it replaces the agent's temperature/top-p/top-k, and its
    ``max_new_tokens`` caps the agent's ``max_tokens``."""
    assistant_prefix: str = ""
    """A format prefill: the server starts every chat turn with it (context, not trained), and
    the agent reads it back as part of the turn (``ServeConfig.assistant_prefix``)."""
    tool_schemas: bool = True
    """``False`` (``serving.tools: false``): the tools an agent offers are parsed from the
    replies but not shown in the policy's prompt (``ServeConfig.tool_schemas``)."""
    time_budget_s: float = DEFAULT_AGENT_TIME_BUDGET_S
    """Wall-clock seconds an episode may take; past it the episode fails."""
    failure_reward: float = 0.0
    """Reward of a failed episode (the trainer passes the env's minimum reward)."""
    segments: str = "last"
    """``last``: train on the session's last segment; ``drop``: a session with a rewritten
    history keeps its reward in the group baseline but gets no loss."""
    max_context_tokens: int | None = None
    """Token budget of a session's context (``None``: the sampler's context length)."""
    model_name: str = "policy"
    """The model id the server lists (agents can ask ``GET /v1/models``)."""
    seed: int = 0
    """Base seed (group ``g`` of call ``i`` derives its seeds from it, as the rollout engine does)."""
    success_threshold: float | None = None
    """Reward at or above which an episode counts as a success (metrics)."""
    env_id: str = "agent"
    """``Trajectory.env_id`` of the episodes."""

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ConfigError(f"`group_size` must be >= 1, got {self.group_size!r}")
        if not (self.time_budget_s > 0 and math.isfinite(self.time_budget_s)):
            raise ConfigError(f"`time_budget_s` must be a finite number > 0, got {self.time_budget_s!r}")
        if self.segments not in AGENT_SEGMENTS:
            raise ConfigError(f"`segments` must be one of {AGENT_SEGMENTS}, got {self.segments!r}")


@dataclass
class _Episode:
    session_id: str
    row: dict[str, Any]
    group_id: int
    sample_index: int
    url: str
    api_key: str = field(default="", repr=False)
    thread: threading.Thread | None = None
    value: Any = None
    error: BaseException | None = None
    finished: bool = False
    started: float = 0.0
    ended: float | None = None


class AgentRolloutSource(RolloutSource):
    """Runs a user's agent against a local policy server; ``collect`` returns trajectories.

    A :class:`~mtrl_gym.rollout.sources.base.RolloutSource`, as the built-in loop is, so a
    trainer uses either without knowing which.

    Args:
        agent: a spec for :func:`load_agent` or a callable ``(task_row, base_url) -> reward``.
        sampler: the trainer's sampler (the server batches the agents' requests onto it).
        tokenizer: the policy's tokenizer.
        config: an :class:`AgentSourceConfig`.
    """

    def __init__(self, agent: str | AgentFn, sampler: Sampler, tokenizer, config: AgentSourceConfig | None = None):
        from mtrl_gym.serve.app import PolicyServer
        from mtrl_gym.serve.reward import accepts_api_key
        from mtrl_gym.serve.service import PolicyService, ServeConfig

        self.config = config or AgentSourceConfig()
        self.sampler = sampler
        self.agent = load_agent(agent)
        self.agent_name = getattr(self.agent, "__name__", type(self.agent).__name__)
        if not accepts_api_key(self.agent):
            raise ConfigError(f"the agent {self.agent_name!r} takes no `api_key`: the policy server answers only "
                              "requests with a key. Add the parameter, run(task_row, base_url, api_key=None), and "
                              "pass it to the client: OpenAI(base_url=base_url, api_key=api_key)")
        c = self.config
        serve = ServeConfig(model_name=c.model_name, max_new_tokens=c.sampling.max_new_tokens,
                            assistant_prefix=c.assistant_prefix, tool_schemas=c.tool_schemas,
                            max_context_tokens=c.max_context_tokens,
                            sampling=c.sampling, seed=c.seed,
                            closed_session_ttl_s=None)  # collect() pops every session itself
        self.service = PolicyService(sampler, tokenizer, serve)
        self.server = PolicyServer(self.service).start()
        self.service.worker.pause()  # only sample while collect() runs (never during an update)
        self._calls = 0

    @property
    def url(self) -> str:
        return self.server.url

    def close(self) -> None:
        self.server.close()

    def update_policy(self, model: Any, *, version: int) -> None:
        """Hand the sampler behind the server the new weights."""
        self.sampler.update_policy(model, version=version)

    # ------------------------------------------------------------------ one batch

    def collect(self, tasks: Sequence[Mapping[str, Any] | None], *, seed: int | None = None,
                on_episode: Callable[[Trajectory], None] | None = None) -> list[Trajectory]:
        """Run ``group_size`` agent episodes per task at once; trajectories in (task, sample) order."""
        self._calls += 1
        base = int(seed) if seed is not None else \
            int(np.random.SeedSequence([self.config.seed, self._calls]).generate_state(1)[0])
        episodes = []
        for g, task in enumerate(tasks):
            row = agent_row(task, base + g)
            task_id = str(task.get("id", "")) if isinstance(task, Mapping) else ""
            for k in range(self.config.group_size):
                session = self.service.create_session(seed=base + g, meta={
                    "task_id": task_id, "group_id": g, "sample_index": k, "env_id": self.config.env_id})
                episodes.append(_Episode(session.id, row, g, k, self.server.session_url(session.id), session.key))
        self.service.worker.resume()
        try:
            self._run(episodes)
        finally:
            self.service.worker.pause()
        out = []
        for ep in episodes:
            traj = self._trajectory(ep, base)
            if on_episode is not None:
                on_episode(traj)
            out.append(traj)
        return out

    def _run(self, episodes: list[_Episode]) -> None:
        for ep in episodes:
            ep.started = time.monotonic()
            ep.thread = threading.Thread(target=self._play, args=(ep,), daemon=True,
                                         name=f"mtrl-agent-{ep.session_id}")
            ep.thread.start()
        deadline = time.monotonic() + self.config.time_budget_s
        for ep in episodes:
            ep.thread.join(max(0.0, deadline - time.monotonic()))
        for ep in episodes:
            if not ep.finished:  # a hung agent: its thread lives on, its session takes no more requests
                self.service.close_session(ep.session_id)

    def _play(self, ep: _Episode) -> None:
        try:
            ep.value = self.agent(dict(ep.row), ep.url, api_key=ep.api_key)
        except BaseException as e:  # noqa: BLE001 - an agent's crash is a failed episode
            ep.error = e
        finally:
            ep.ended = time.monotonic()
            ep.finished = True
            try:
                self.service.close_session(ep.session_id)  # fewer live sessions: batches stop waiting for it
            except Exception:  # noqa: BLE001,S110
                pass

    # ------------------------------------------------------------------ results

    def _outcome(self, ep: _Episode, session) -> tuple[float | None, dict[str, float], str | None, str]:
        """``(reward, metrics, failure reason or None, stop reason)``."""
        from mtrl_gym.serve.reward import reward_of

        if not ep.finished:
            return None, {}, f"the agent ran longer than its time budget of {self.config.time_budget_s:g} s", \
                "time_budget"
        if ep.error is not None:
            text = str(ep.error) or type(ep.error).__name__
            return None, {}, f"the agent raised {type(ep.error).__name__}: {text}"[:2000], "failed"
        if session.failed:
            return None, {}, session.failure_reason or "the agent reported a failure", "failed"
        try:
            reward, metrics = reward_of(ep.value)
        except ConfigError as e:
            return None, {}, str(e), "failed"
        if reward is None:
            reward, metrics = session.reward, dict(session.reward_metrics)
        if reward is None:
            return None, {}, ("the agent ended without reporting a reward (return it, or POST it to "
                              "/sessions/<id>/reward)"), "failed"
        if not session.segments:
            return None, {}, "the agent never called the model", "failed"
        return reward, metrics, None, "terminated"

    def _trajectory(self, ep: _Episode, base: int) -> Trajectory:
        from mtrl_gym.serve.sessions import segment_trajectory

        session = self.service.pop_session(ep.session_id)
        reward, metrics, failure, stop = self._outcome(ep, session)
        if session.segments:
            traj = segment_trajectory(session, session.segments[-1], env_id=self.config.env_id)
        else:
            traj = Trajectory(task_id=str(session.meta.get("task_id", "")), env_id=self.config.env_id,
                              group_id=ep.group_id, sample_index=ep.sample_index, seed=base + ep.group_id)
        if self.config.segments == "drop" and session.retokenized:
            traj.loss_mask = [0] * len(traj.loss_mask)
        traj.failed, traj.failure_reason, traj.stop_reason = failure is not None, failure, stop
        traj.terminated = failure is None
        traj.reward = self.config.failure_reward if failure is not None else float(reward)
        # The agent plays the env's part: what it reports, and the session's counts, are the
        # episode's final "info" (the trainer logs them as rollout/info/<key>).
        traj.final_info = {"task_id": traj.task_id, **metrics, "retokenized": session.retokenized,
                           "requests": session.requests}
        segs = session.segments
        wall = (ep.ended if ep.ended is not None else time.monotonic()) - ep.started
        traj.metrics = episode_metrics(traj, tool_calls=sum(s.tool_calls for s in segs),
                                       format_errors=sum(s.format_errors for s in segs),
                                       cut_turns=sum(s.cut_turns for s in segs), wall_time_s=wall,
                                       success_threshold=self.config.success_threshold)
        return traj


def make_agent_source(config: Any, options: AgentOptions, sampler: Sampler, tokenizer, *, validation: bool = False,
                      env: Any = None) -> AgentRolloutSource:
    """The agent source of a run (``source: {name: agent, target: ...}``), for training or
    validation. The failure reward and success threshold come from the configured env
    (``env`` replaces ``config.env``)."""
    from mtrl_gym.rollout.envs import failure_reward, make_env
    from mtrl_gym.rollout.sources.local import rollout_config

    given = {"env_wrappers": config.env_wrappers, "validation.env_wrappers": config.validation.env_wrappers,
             "serving.wrappers": config.serving.wrappers, "episode.max_turns": config.episode.max_turns}
    ignored = [name for name, value in given.items() if value]
    if ignored and not validation:
        warnings.warn(f"{', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} not used with `agent`: the "
                      "agent runs its own env, turns and reward", stacklevel=5)
    rc = rollout_config(config, validation=validation)
    probe = make_env(env if env is not None else config.env, config.env_kwargs)
    try:
        threshold = probe.get_wrapper_attr("success_threshold")
    except AttributeError:
        threshold = None
    try:
        low = failure_reward(probe, what=f"environment {config.env!r}",
                             fix="failed agent episodes get it: use an env with a finite reward_range")
    finally:
        probe.close()
    budget = config.episode.time_budget_s or DEFAULT_AGENT_TIME_BUDGET_S
    limit = getattr(sampler, "max_context_length", None)
    context = min(config.episode.max_tokens, limit) if limit else config.episode.max_tokens
    return AgentRolloutSource(options.target, sampler, tokenizer, AgentSourceConfig(
        group_size=rc.group_size, sampling=rc.sampling, assistant_prefix=config.serving.assistant_prefix,
        tool_schemas=config.serving.tools,
        time_budget_s=budget, failure_reward=low,
        segments=options.segments, max_context_tokens=context, model_name=config.model,
        seed=config.seed, success_threshold=threshold,
        env_id=config.env if isinstance(config.env, str) else "agent"))
