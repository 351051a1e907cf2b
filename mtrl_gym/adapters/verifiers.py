"""mtrl_gym envs as verifiers tasksets and envs (``verifiers>=0.4,<0.5``, the ``verifiers.v1`` stack).

Any registered env becomes a verifiers taskset plus env, loadable by verifiers' own
loader under the id ``mtrl-gym-verifiers`` (the top-level shim package
``mtrl_gym_verifiers``: verifiers imports a taskset id as one module name, so a dotted
path would not resolve, and ``mtrl-gym`` would name this library itself)::

    vf-eval mtrl-gym-verifiers --env.taskset.env-id mtrl/Wordle-v0 --env.taskset.split val \\
        --model my-model --client.base-url http://127.0.0.1:8000/v1 -n 8 -r 4

* **Tasks** (:class:`MtrlTaskset`): one per task of the env's split, task file or
  seeds (``env_id``, ``split`` / ``tasks_file``, ``limit``, ``seed``; task ``i`` resets
  with ``seed + i``, the same rule as :func:`mtrl_gym.adapters.episode.resolve_episode_tasks`).
  A task file is mtrl_gym's task-file format (:mod:`mtrl_gym.datasets`): one row per
  task, ``{"prompt": "<the task row as JSON>"}``, as ``write_tasks`` writes it.
  The prompt is the env's first observation and the system prompt the env's. The task
  row (which may hold the secret) rides in ``TaskData.info`` for the env; it is never in
  the prompt.
* **Tools** are registered with the harness (:mod:`mtrl_gym.adapters.verifiers_tools`,
  an MCP server of the env's tool schemas), so the model gets them as native ``tools``
  and may answer with native ``tool_calls``. Every call of an assistant message reaches
  the env: verifiers' tool gate asks :class:`MtrlTask` before the harness runs a call,
  and the task plays the whole message (its text and all its calls, as Hermes text) as
  one ``env.step``, answering each call with the env's ``tool_results`` entry for it.
  ``tools_in_prompt=True`` also writes the schemas into the system prompt (Hermes
  format) for a server that ignores ``tools``.
* **Episodes** (:class:`MtrlEnv`): the env runs host-side as the conversation's user.
  A reply without tool calls goes to ``env.step`` and the observation is the next user
  turn. The exchange ends when the env ends the episode or after ``max_turns`` assistant
  turns (env steps); either ends it inside a run of tool calls too (a ``@stop`` refuses
  the next model call), so a model that keeps calling tools cannot loop forever.
* **Reward**: one reward, ``outcome``, the bare env's outcome (weight 1; the env's
  minimum reward when the exchange stopped before the env ended it). Turn counts,
  format errors, tool calls, success and, with shaping ``wrappers``, the shaped return
  are **metrics**, never part of the reward.

verifiers runs the model side as a harness program built with ``uv`` (``uv sync
--script`` needs PyPI). :class:`MtrlHarness` is verifiers' plain chat harness (``null``:
no code execution, no tools of its own; it asks the tool gate), the default for these tasksets.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from typing import Any

from mtrl_gym.adapters.episode import (
    EPISODE_OVER,
    EnvEpisode,
    EpisodeTask,
    decode_row,
    encode_row,
    resolve_episode_tasks,
    tool_call_text,
)
from mtrl_gym.error import ConfigError, DependencyNotInstalled

try:
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.harnesses.null import NullHarness
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise DependencyNotInstalled("verifiers", "verifiers") from e

__all__ = [
    "TASKSET_ID",
    "MtrlData",
    "MtrlEnv",
    "MtrlEnvConfig",
    "MtrlHarness",
    "MtrlTask",
    "MtrlTaskset",
    "MtrlTasksetConfig",
    "reply_action",
]

#: The id verifiers' loader resolves to the shim package ``mtrl_gym_verifiers``.
TASKSET_ID = "mtrl-gym-verifiers"


class MtrlTasksetConfig(vf.TasksetConfig):
    """Which env and which of its tasks, under ``--env.taskset.*``."""

    env_id: str = "mtrl/Wordle-v0"
    """A registered mtrl_gym env id."""
    split: str | None = None
    """A named split (``train``, ``val``, ``seeds:N``); with no ``tasks_file`` either, ``seeds:N`` with N = ``limit``."""
    tasks_file: str | None = None
    """A task file (JSONL, JSON, CSV, Parquet) instead of a split: one ``{"prompt": "<task row as
    JSON>"}`` row per task (:func:`mtrl_gym.datasets.write_tasks`)."""
    limit: int | None = None
    """Keep the first ``limit`` tasks (default for seeds: 100)."""
    seed: int = 0
    """Task ``i`` resets with ``seed + i``."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make``."""
    wrappers: list[str] = Field(default_factory=list)
    """Shaping (or other) wrappers as ``module:callable`` import paths, applied in order;
    their rewards are logged as the ``shaped_return`` metric, the reward stays the outcome."""
    max_turns: int | None = None
    """Most assistant turns (env steps) per episode; ``None`` plays until the env ends it."""
    tools_in_prompt: bool = False
    """Also write the tool schemas into the system prompt (Hermes format), for a model server
    that ignores the native ``tools`` of a request."""


class MtrlData(vf.TaskData):
    info: dict[str, Any]
    """``env_id``, ``seed``, ``row`` (the task row as JSON, ``""`` when the seed draws it),
    ``env_kwargs``, ``wrappers``, ``max_turns``: what the env needs to replay the task."""


def reply_action(message: Any) -> str:
    """The env action of one assistant message: its text plus every native tool call (as
    Hermes text carrying the call's id), so the env's parser sees the whole turn."""
    text = getattr(message, "content", None) or ""
    text = text if isinstance(text, str) else " ".join(str(getattr(p, "text", "")) for p in text)
    calls = [tool_call_text(c.name, c.arguments, call_id=c.id) for c in getattr(message, "tool_calls", None) or ()]
    return "\n".join([text, *calls]) if calls else text


class _Play:
    """One rollout's episode, shared by the env's loop, the tool gate and the stop hook.

    The gate plays each assistant message with tool calls once, keyed by its place in the
    conversation (servers may reuse call ids such as ``call_0`` on every turn); the env's
    loop then walks the segment's messages in the same order and plays only the rest.
    """

    def __init__(self, episode: EnvEpisode, max_turns: int | None):
        self.episode, self.max_turns = episode, max_turns
        self.answers: dict[tuple[int, tuple[str, ...]], dict[str, str]] = {}
        self.gated: list[Any] = []  # the messages the gate answered, in conversation order
        self.cursor = 0
        self.lock = asyncio.Lock()

    @property
    def capped(self) -> bool:
        return self.max_turns is not None and len(self.episode.infos) >= self.max_turns

    @property
    def over(self) -> bool:
        return self.episode.done or self.capped

    def covers(self, message: Any) -> bool:
        """Whether the gate already answered ``message`` (the next one it answered, in order)."""
        if getattr(message, "tool_calls", None) and self.cursor < len(self.gated) \
                and self.gated[self.cursor] == message:
            self.cursor += 1
            return True
        return False

    async def play(self, message: Any) -> str:
        """One ``env.step`` with the whole assistant message."""
        return await asyncio.to_thread(self.episode.step, reply_action(message))

    async def tool_results(self, position: int, message: Any) -> dict[str, str]:
        """The env's reply to each call of ``message`` (at ``position`` of the conversation; played once)."""
        calls = list(message.tool_calls or ())
        key = (position, tuple(c.id for c in calls))
        async with self.lock:
            if key not in self.answers:
                self.gated.append(message)
                if self.over:
                    note = EPISODE_OVER if self.episode.done else (
                        f"The turn limit ({self.max_turns}) is reached; no further actions are played.")
                    self.answers[key] = dict.fromkeys(key[1], note)
                else:
                    obs = await self.play(message)
                    results = {str(r.get("tool_call_id")): str(r.get("content") or "")
                               for r in self.episode.infos[-1].get("tool_results") or () if isinstance(r, dict)}
                    # a call the env did not answer by id gets the whole observation; never "" (that
                    # would tell the gate to let the harness run the call itself)
                    self.answers[key] = {c.id: results.get(c.id) or obs or "(no output)" for c in calls}
            return self.answers[key]


#: The episodes being played in this process, by verifiers trace id.
_PLAYS: dict[str, _Play] = {}


class MtrlTask(vf.Task[MtrlData, vf.State, vf.TaskConfig]):
    """One mtrl_gym task (scored by :class:`MtrlEnv`, which plays the env).

    Its hooks let native tool calls reach the env: :meth:`env_tool_results` answers each
    call at verifiers' tool gate with the env's reply, and :meth:`episode_over` ends the
    exchange (refusing the next model call) once the env ended the episode or the turn
    cap is reached.
    """

    @vf.intercept
    async def env_tool_results(self, request: vf.Request, trace: vf.Trace) -> vf.Request | None:
        """Replace the result of the newest tool call with the env's reply to it."""
        play = _PLAYS.get(trace.id)
        messages = request.messages
        if play is None or not messages or not isinstance(messages[-1], vf.ToolMessage):
            return None
        probe = messages[-1]
        position = next((i for i in range(len(messages) - 2, -1, -1)
                         if isinstance(messages[i], vf.AssistantMessage)), None)
        if position is None or not any(c.id == probe.tool_call_id for c in messages[position].tool_calls or ()):
            return None
        content = (await play.tool_results(position, messages[position]))[probe.tool_call_id]
        return request.model_copy(update={"messages": [*messages[:-1], probe.model_copy(update={"content": content})]})

    @vf.stop
    def episode_over(self, trace: vf.Trace) -> bool:
        """The env ended the episode, or the taskset's ``max_turns`` is reached."""
        play = _PLAYS.get(trace.id)
        return play is not None and play.over


def _system_prompt(episode: EnvEpisode, tools_in_prompt: bool) -> str:
    from mtrl_gym.rollout.template import render_tools

    parts = [episode.system_prompt, render_tools(episode.tools) if tools_in_prompt else ""]
    return "\n\n".join(p for p in parts if p)


def _tasks(cfg: MtrlTasksetConfig, limit: int | None) -> list[EpisodeTask]:
    if cfg.tasks_file is not None and cfg.split is not None:
        raise ConfigError("give one of `split` and `tasks_file`, not both")
    # a task file is read (and each row checked by the env's validator) by resolve_tasks
    return resolve_episode_tasks(cfg.env_id, tasks=cfg.tasks_file, split=cfg.split, limit=limit, seed=cfg.seed)


class MtrlTaskset(vf.Taskset[MtrlTask, MtrlTasksetConfig]):
    """The tasks of an mtrl_gym env (see the module docstring)."""

    def load(self) -> Iterator[MtrlTask]:
        cfg = self.config
        if cfg.max_turns is not None and cfg.max_turns < 1:
            raise ConfigError(f"`max_turns` must be >= 1 or None, got {cfg.max_turns!r}")
        episode = EnvEpisode(cfg.env_id, env_kwargs=cfg.env_kwargs)
        try:
            for task in _tasks(cfg, cfg.limit):
                obs = episode.reset(task)
                task_id = str(episode.info.get("task_id") or "")
                info = {"env_id": cfg.env_id, "seed": task.seed, "row": encode_row(task.row),
                        "env_kwargs": dict(cfg.env_kwargs), "wrappers": list(cfg.wrappers),
                        "max_turns": cfg.max_turns}
                yield MtrlTask(MtrlData(id=task_id or None, name=f"{cfg.env_id}#{task.seed}", prompt=obs,
                                        system_prompt=_system_prompt(episode, cfg.tools_in_prompt), info=info),
                               cfg.task)
        finally:
            episode.close()

    @classmethod
    def toolsets(cls, config: MtrlTasksetConfig) -> list:
        """The env's tools as one tool server for the harness (those of the first task: verifiers
        asks for a taskset's tools before any task is loaded)."""
        from mtrl_gym.adapters.verifiers_tools import MtrlToolset, MtrlToolsetConfig

        episode = EnvEpisode(config.env_id, env_kwargs=config.env_kwargs)
        try:
            first = _tasks(config, 1)
            episode.reset(first[0] if first else None)
            tools = episode.tools
        finally:
            episode.close()
        return [MtrlToolset(MtrlToolsetConfig(tools=tools))] if tools else []


def _wrapper(path: str):
    module, _, name = path.partition(":")
    if not module or not name:
        raise ConfigError(f"a wrapper must be a `module:callable` import path, got {path!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"wrapper {path!r} could not be imported: {e}") from None


class MtrlEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The agent being evaluated or trained (``--env.player.*``). Its harness is a plain
    chat program that runs no code, so the default runtime is a local subprocess
    (verifiers' own default is a Prime sandbox); pick another with ``--env.player.runtime.type``."""


class MtrlEnv(vf.Env[MtrlEnvConfig]):
    """Plays the mtrl_gym env host-side as the conversation's user; records the outcome reward."""

    async def run(self, task, agents) -> None:
        info = task.data.info
        wrappers = [_wrapper(p) for p in info.get("wrappers") or ()]
        episode = EnvEpisode(info["env_id"], env_kwargs=info.get("env_kwargs") or {}, wrappers=wrappers)
        play = _Play(episode, info.get("max_turns"))
        try:
            episode.reset(EpisodeTask(seed=int(info["seed"]), row=decode_row(info.get("row"))))
            async with agents.player.interaction(task) as interaction:
                trace = interaction.trace
                _PLAYS[trace.id] = play
                try:
                    segment = await interaction.turn()  # the task's prompt (the first observation) opens
                    while not segment.terminated:
                        # the tool gate played the messages with tool calls; the rest (the final
                        # text reply, calls a harness ran without the gate) are played here, in order
                        for message in segment.messages:
                            if isinstance(message, vf.AssistantMessage) and not play.covers(message) \
                                    and not play.over:
                                await play.play(message)
                        if play.over:
                            break
                        segment = await interaction.turn(episode.observation)
                finally:
                    _PLAYS.pop(trace.id, None)
                # recorded before the exchange closes, so verifiers' close-out sees the reward
                trace.record_reward("outcome", episode.outcome(), 1.0)
                trace.record_metrics(episode.metrics())
                trace.info["task_id"] = str(episode.info.get("task_id") or "")
        finally:
            episode.close()


class MtrlHarness(NullHarness):
    """verifiers' plain chat harness (``null``): the default harness of these tasksets."""
