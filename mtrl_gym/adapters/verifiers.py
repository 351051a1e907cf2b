"""mtrl_gym envs as verifiers tasksets and envs (``verifiers==0.4.0``, the ``verifiers.v1`` stack).

Any registered env becomes a verifiers taskset plus env, loadable by verifiers' own
loader under the id ``mtrl-gym-verifiers`` (the top-level shim package
``mtrl_gym_verifiers``: verifiers imports a taskset id as one module name, so a dotted
path would not resolve, and ``mtrl-gym`` would name this library itself)::

    vf-eval mtrl-gym-verifiers --env.taskset.env-id mtrl/Wordle-v0 --env.taskset.split val \\
        --model my-model --client.base-url http://127.0.0.1:8000/v1 -n 8 -r 4

* **Tasks** (:class:`MtrlTaskset`): one per task of the env's split, task file or
  seeds (``env_id``, ``split`` / ``tasks_file``, ``limit``, ``seed``; task ``i`` resets
  with ``seed + i``, the same rule as :func:`mtrl_gym.adapters.episode.resolve_episode_tasks`).
  The prompt is the env's first observation and the system prompt the env's, with the
  tool schemas written into it (Hermes format, :func:`mtrl_gym.rollout.template.render_tools`):
  the model answers in text and the env parses it. The task row (which may hold the
  secret) rides in ``TaskData.info`` for the env; it is never in the prompt.
* **Episodes** (:class:`MtrlEnv`): the env runs host-side as the conversation's user.
  Each assistant reply (its text, plus any native tool calls as Hermes text) goes to
  ``env.step``; the observation is the next user turn; the exchange ends when the env
  ends the episode or after ``max_turns``.
* **Reward**: one reward, ``outcome``, the bare env's outcome (weight 1; the env's
  minimum reward when the exchange stopped before the env ended it). Turn counts,
  format errors, tool calls, success and, with shaping ``wrappers``, the shaped return
  are **metrics**, never part of the reward.

verifiers runs the model side as a harness program built with ``uv`` (``uv sync
--script`` needs PyPI). :class:`MtrlHarness` is verifiers' plain chat harness (``null``:
no code execution, no tools of its own), the default for these tasksets.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from typing import Any

from mtrl_gym.adapters.episode import (
    EnvEpisode,
    EpisodeTask,
    decode_row,
    encode_row,
    resolve_episode_tasks,
)
from mtrl_gym.adapters.episode import tool_call_text as _tool_call_text
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
    """A task file (JSONL, JSON, CSV, Parquet) instead of a split."""
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
    """Most assistant turns per episode; ``None`` plays until the env ends it."""


class MtrlData(vf.TaskData):
    info: dict[str, Any]
    """``env_id``, ``seed``, ``row`` (the task row as JSON, ``""`` when the seed draws it),
    ``env_kwargs``, ``wrappers``, ``max_turns``: what the env needs to replay the task."""


class MtrlTask(vf.Task[MtrlData, vf.State, vf.TaskConfig]):
    """One mtrl_gym task (scored by :class:`MtrlEnv`, which plays the env)."""


def _system_prompt(episode: EnvEpisode) -> str:
    from mtrl_gym.rollout.template import render_tools

    parts = [episode.system_prompt, render_tools(episode.tools)]
    return "\n\n".join(p for p in parts if p)


class MtrlTaskset(vf.Taskset[MtrlTask, MtrlTasksetConfig]):
    """The tasks of an mtrl_gym env (see the module docstring)."""

    def load(self) -> Iterator[MtrlTask]:
        cfg = self.config
        if cfg.max_turns is not None and cfg.max_turns < 1:
            raise ConfigError(f"`max_turns` must be >= 1 or None, got {cfg.max_turns!r}")
        tasks = None
        if cfg.tasks_file is not None:
            if cfg.split is not None:
                raise ConfigError("give one of `split` and `tasks_file`, not both")
            from mtrl_gym.datasets import read_tasks

            tasks = read_tasks(cfg.tasks_file, required=())
        episode = EnvEpisode(cfg.env_id, env_kwargs=cfg.env_kwargs)
        try:
            for task in resolve_episode_tasks(cfg.env_id, tasks=tasks, split=cfg.split, limit=cfg.limit,
                                              seed=cfg.seed):
                obs = episode.reset(task)
                task_id = str(episode.info.get("task_id") or "")
                info = {"env_id": cfg.env_id, "seed": task.seed, "row": encode_row(task.row),
                        "env_kwargs": dict(cfg.env_kwargs), "wrappers": list(cfg.wrappers),
                        "max_turns": cfg.max_turns}
                yield MtrlTask(MtrlData(id=task_id or None, name=f"{cfg.env_id}#{task.seed}", prompt=obs,
                                        system_prompt=_system_prompt(episode), info=info), cfg.task)
        finally:
            episode.close()


def _wrapper(path: str):
    module, _, name = path.partition(":")
    if not module or not name:
        raise ConfigError(f"a wrapper must be a `module:callable` import path, got {path!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"wrapper {path!r} could not be imported: {e}") from None


def reply_action(segment: Any) -> str:
    """The env action of one verifiers segment: the reply text plus any native tool calls
    (as Hermes text), so a model served with tool calling still reaches the env's parser."""
    text = segment.last_reply
    calls = []
    for message in getattr(segment, "messages", ()) or ():
        if isinstance(message, vf.AssistantMessage) and message.tool_calls:
            calls = [_tool_call_text(c.name, c.arguments) for c in message.tool_calls]
    return "\n".join([text, *calls]) if calls else text


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
        max_turns = info.get("max_turns")
        try:
            episode.reset(EpisodeTask(seed=int(info["seed"]), row=decode_row(info.get("row"))))
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # the task's prompt (the first observation) opens
                while not segment.terminated:
                    observation = await asyncio.to_thread(episode.step, reply_action(segment))
                    if episode.done or (max_turns is not None and len(episode.infos) >= max_turns):
                        break
                    segment = await interaction.turn(observation)
                # recorded before the exchange closes, so verifiers' close-out sees the reward
                trace = interaction.trace
                trace.record_reward("outcome", episode.outcome(), 1.0)
                trace.record_metrics(episode.metrics())
                trace.info["task_id"] = str(episode.info.get("task_id") or "")
        finally:
            episode.close()


class MtrlHarness(NullHarness):
    """verifiers' plain chat harness (``null``): the default harness of these tasksets."""
