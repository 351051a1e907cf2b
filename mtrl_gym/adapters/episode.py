"""One episode of any mtrl_gym env, driven from outside: the piece every adapter shares.

Outside trainers (verifiers, TRL, OpenEnv) each have their own agent loop; the adapters
only need to reset an env on a task, hand it the model's text (or a tool call built from
structured arguments) and read the outcome. :class:`EnvEpisode` does that with the same
rules as mtrl_gym's own rollout engine, so a task scores the same under every framework:

* **Tasks** are ``(seed, row)`` pairs (:class:`EpisodeTask`): ``reset(seed=seed,
  options={"task": row})``, or no options when ``row`` is ``None`` (the seed draws the
  task). :func:`resolve_episode_tasks` builds them from a task list, a named split or
  ``seeds:N``; task ``i`` resets with ``seed + i``.
* **Steps** take raw model text, as every mtrl_gym env does; :func:`tool_call_text` turns a
  structured call (a framework's parsed tool call) into the Hermes text the env parses.
  Bad text is the env's business: it answers with an observation and
  ``info["format_error"]``. A step after the episode ended is answered with a note, never
  an exception.
* **Reward** is the bare env's outcome: the sum of the step rewards once the env ends the
  episode (``terminated`` or ``truncated``); an episode that stops before that (a turn or
  token limit of the outside trainer) gets the env's minimum reward
  (``reward_range[0]``), like the engine's default ``unfinished_reward="min"``. Shaping
  wrappers change :attr:`EnvEpisode.rewards`, never the outcome.

>>> ep = EnvEpisode("mtrl/Wordle-v0")
>>> obs = ep.reset(EpisodeTask(seed=0, row={"answer": "paste", "id": "t0"}))
>>> "guess" in ep.info["system_prompt"].lower(), ep.info["task_id"]
(True, 't0')
>>> print(ep.call("guess_word", {"guess": "paste"}).splitlines()[0])
Guess 1/6: PASTE
>>> ep.done, ep.outcome()
(True, 1.55)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.envs import make_env

__all__ = [
    "EPISODE_OVER",
    "EnvEpisode",
    "EpisodeTask",
    "decode_row",
    "encode_row",
    "resolve_episode_tasks",
    "tool_call_text",
]

#: What a step after the end of the episode returns (frameworks may call tools after the end).
EPISODE_OVER = "The episode is over; no further actions are played."


@dataclass(frozen=True)
class EpisodeTask:
    """One task of an adapter: the reset seed and the task row (``None``: the seed draws it)."""

    seed: int
    row: dict[str, Any] | None = None

    def options(self) -> dict[str, Any] | None:
        """The ``reset`` options of this task."""
        return {"task": dict(self.row)} if self.row is not None else None


def encode_row(row: Mapping[str, Any] | None) -> str:
    """A task row as a JSON string (``""`` for ``None``), for frameworks that store flat columns."""
    return "" if row is None else json.dumps(dict(row), sort_keys=True, ensure_ascii=False)


def decode_row(text: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The inverse of :func:`encode_row` (a mapping is passed through)."""
    if text is None or text == "":
        return None
    if isinstance(text, Mapping):
        return dict(text)
    return dict(json.loads(text))


def tool_call_text(name: str, arguments: Mapping[str, Any] | str | None, call_id: str | None = None) -> str:
    """The Hermes text of one tool call, the first format every mtrl_gym env parses.

    ``arguments`` may be a mapping or a JSON string (as OpenAI-style calls carry them); a
    string that is not JSON is passed through unparsed so the env reports the bad arguments.
    ``call_id`` (a native call's id) becomes the ``tool_call_id`` of the env's
    ``info["tool_results"]`` entry for this call.

    >>> tool_call_text("guess_word", {"guess": "crane"})
    '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>'
    >>> tool_call_text("guess_word", '{"guess": "crane"}', call_id="call_7")
    '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}, "id": "call_7"}</tool_call>'
    """
    tail = "" if call_id is None else ", \"id\": " + json.dumps(str(call_id), ensure_ascii=False)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):  # not a JSON object: the env reports the bad arguments
            body = json.dumps(str(name), ensure_ascii=False)
            return f'<tool_call>{{"name": {body}, "arguments": {arguments}{tail}}}</tool_call>'
        arguments = parsed
    payload = json.dumps({"name": str(name), "arguments": dict(arguments or {})}, ensure_ascii=False, default=str)
    return f"<tool_call>{payload[:-1]}{tail}}}</tool_call>"


def resolve_episode_tasks(env_id: str, *, tasks: str | os.PathLike | Sequence[Mapping[str, Any] | None] | None = None,
                          split: str | None = None, limit: int | None = None,
                          seed: int = 0) -> list[EpisodeTask]:
    """Episode tasks from a task file or list, or a named split (``train``, ``val``, ``seeds:N``, ...).

    Task ``i`` resets with ``seed + i``. With neither ``tasks`` nor ``split``, ``seeds:N``
    with ``N = limit`` (default 100) is used: tasks drawn from the reset seeds.
    """
    if seed < 0:
        raise ConfigError(f"`seed` must be >= 0, got {seed!r}")
    from mtrl_gym.evaluation.tasks import resolve_tasks

    if tasks is None and split is None:
        split = f"seeds:{limit or 100}"
    rows = resolve_tasks(env_id, tasks=tasks, split=split, limit=limit)
    return [EpisodeTask(seed=seed + i, row=None if row is None else dict(row)) for i, row in enumerate(rows)]


class EnvEpisode:
    """Plays one episode at a time of an env given by id (or a factory), from outside.

    Args:
        env: a registered id (``"mtrl/Wordle-v0"``) or a callable returning a new env.
        env_kwargs: keyword arguments for ``gymnasium.make`` when ``env`` is an id.
        wrappers: callables ``env -> env`` applied in order (e.g. a shaping wrapper).
            :meth:`outcome` reads the bare env's rewards underneath them; the wrapped
            rewards are :attr:`rewards` and the ``shaped_return`` metric.
    """

    def __init__(self, env: str | Callable[[], gymnasium.Env], *, env_kwargs: Mapping[str, Any] | None = None,
                 wrappers: Sequence[Callable[[gymnasium.Env], gymnasium.Env]] = ()):
        self.env_id = env if isinstance(env, str) else getattr(env, "__name__", type(env).__name__)
        bare = make_env(env, env_kwargs)
        self._tap = _RewardTap(bare)
        self.env: gymnasium.Env = self._tap
        for wrap in wrappers:
            self.env = wrap(self.env)
        self.shaped = bool(wrappers)
        low = _attr(self._tap, "reward_range", (-np.inf, np.inf))[0]
        #: Outcome of an episode stopped before the env ended it (``None``: no finite minimum).
        self.min_reward: float | None = float(low) if np.isfinite(low) else None
        self.success_threshold = _attr(self._tap, "success_threshold", None)
        self.observation = ""
        self.info: dict[str, Any] = {}
        self.rewards: list[float] = []
        self.infos: list[dict[str, Any]] = []
        self.terminated = self.truncated = False
        self.started = False

    # ------------------------------------------------------------------ play

    def reset(self, task: EpisodeTask | None = None) -> str:
        """Start the episode of ``task`` (default: seed 0, no row); returns the first observation."""
        task = task or EpisodeTask(seed=0)
        obs, info = self.env.reset(seed=int(task.seed), options=task.options())
        self.observation, self.info = str(obs), dict(info)
        self.rewards, self.infos = [], []
        self._tap.rewards.clear()
        self.terminated = self.truncated = False
        self.started = True
        return self.observation

    @property
    def done(self) -> bool:
        """The env ended the episode (``terminated`` or ``truncated``)."""
        return self.terminated or self.truncated

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool schemas of the current task (``info["tools"]`` at reset)."""
        return list(self.info.get("tools") or [])

    @property
    def system_prompt(self) -> str:
        """The system prompt of the current task (``info["system_prompt"]`` at reset)."""
        return str(self.info.get("system_prompt") or "")

    def step(self, text: str) -> str:
        """Play the model's raw text; returns the observation (a note once the episode is over)."""
        if not self.started:
            raise ConfigError("call reset() before step(): the episode has not started")
        if self.done:
            return EPISODE_OVER
        obs, reward, terminated, truncated, info = self.env.step(str(text))
        self.observation = str(obs)
        self.rewards.append(float(reward))
        self.infos.append(dict(info))
        self.terminated, self.truncated = bool(terminated), bool(truncated)
        return self.observation

    def call(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """Play one structured tool call (see :func:`tool_call_text`); returns the observation."""
        return self.step(tool_call_text(name, arguments))

    # ------------------------------------------------------------------ scores

    def outcome(self) -> float:
        """The bare env's outcome: the summed rewards once the env ended the episode, else
        the env's minimum reward (an episode stopped from outside has no outcome; an env
        without a finite minimum gives the rewards so far)."""
        total = float(sum(self._tap.rewards))
        return total if self.done or self.min_reward is None else self.min_reward

    def metrics(self) -> dict[str, float]:
        """Facts of the episode for logging next to the reward (never part of it)."""
        n = len(self.infos)
        out = {
            "turns": float(n),
            "format_errors": float(sum(bool(i.get("format_error")) for i in self.infos)),
            "tool_calls": float(sum(len(i.get("tool_calls") or ()) for i in self.infos)),
            "finished": float(self.done),
        }
        if self.success_threshold is not None:
            out["success"] = float(self.outcome() >= float(self.success_threshold))
        if self.shaped:
            out["shaped_return"] = float(sum(self.rewards))
        return out

    def close(self) -> None:
        """Close the env."""
        self.env.close()


class _RewardTap(gymnasium.Wrapper):
    """Records the bare env's step rewards under any shaping wrappers."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.rewards: list[float] = []

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.rewards.append(float(reward))
        return obs, reward, terminated, truncated, info


def _attr(env: gymnasium.Env, name: str, default: Any) -> Any:
    try:
        value = env.get_wrapper_attr(name)
    except AttributeError:
        return default
    return default if value is None else value
