"""Expert demonstrations: a reference policy's episodes, as token-level training data.

A demonstration is an ordinary :class:`~mtrl_gym.rollout.trajectory.Trajectory` played by
the normal rollout engine, so its tokens are exactly the training format: the chat
template, the format prefill (``assistant_prefix``, masked out), the stop strings, and
``loss_mask = 1`` on the assistant's own tokens only. Only the sampler differs:
:class:`TeacherSampler` "samples" the text a reference policy chose for that episode's
board, tokenised, cut after the first stop string like a real sampler would cut it (the
completing token kept), or closed with the end-of-turn token. Its log-probs are 0.0 (a
teacher has none); supervised fine-tuning does not use them.

Each env of the engine is wrapped in :class:`PolicyDriven`, which runs the reference
policy beside the env: after every reset and step it asks the policy for the next action.
:class:`_DemoEngine` tells the sampler which episode (``session_id``) plays in which env.

Reference policies by name (:func:`reference_policy`), from the env's profile: Wordle
``teacher`` (:class:`~mtrl_gym.envs.wordle.teacher.ConsistentTeacher`, ``choice`` ranked /
random / solver) and ``solver`` (the entropy solver); SOP domains ``teacher``/``solver``
(the domain's reference procedure, :class:`~mtrl_gym.envs.sop.replay.OracleReplay`).

:func:`learner_demos` makes demonstrations from a *learner's* recorded games, replayed by the
same engine (:class:`Replay` plays the recorded actions, then the reference policy):
DAgger (the reference policy labels every board the learner reached; the learner's own turns
are context, without loss) or expert iteration (chosen games copied whole).

:func:`drill_demos` makes demonstrations without an env: one conversation in which the
assistant writes a given list of actions one after another, each answered by the same reply
(a spelling drill: the word list itself, in the serving format). It renders the turns the way
the engine does, so the tokens are the serving format's too.

Demonstrations are never made from evaluation tasks: ``split="val"`` (or an env made with
``split="val"``) raises :class:`~mtrl_gym.error.ConfigError`.

    mtrl-gym demos --config cpu --policy teacher -n 600 --out demos.jsonl
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from mtrl_gym.config_base import ConfigBase
from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.serving import ServingSettings, check_listed_once
from mtrl_gym.rollout.sources.local import build_wrappers, wrapper_spec
from mtrl_gym.rollout.engine import RolloutConfig, RolloutEngine
from mtrl_gym.rollout.samplers.base import (
    Sampler,
    SampleRequest,
    SampleResult,
    SamplingParams,
)
from mtrl_gym.rollout.trajectory import Trajectory, meta_path, read_meta, save_jsonl

__all__ = ["DemoConfig", "TeacherSampler", "PolicyDriven", "Replay", "reference_policy", "make_demos",
           "learner_demos", "drill_demos", "recorded_actions", "train_tasks", "teacher_tokens", "POLICY_NAMES", "read_demo_meta"]

POLICY_NAMES = ("teacher", "solver")
_POLICY_SALT = 0x54454143  # "TEAC": the policy's draws, apart from the env's


def reference_policy(name: str, env: gymnasium.Env, **kwargs: Any):
    """The reference policy ``name`` for ``env``, from the env's profile (``kwargs``: its options)."""
    from mtrl_gym.envs.profile import profile_of

    if name not in POLICY_NAMES:
        raise ConfigError(f"unknown demonstration policy {name!r}; use one of {POLICY_NAMES}")
    return profile_of(env).policy(name, env, **kwargs)


class PolicyDriven(gymnasium.Wrapper):
    """Runs a reference policy beside the env: :attr:`next_action` is its action for the
    current observation (recomputed after every reset and step).

    The policy's random draws come from ``np.random.default_rng([seed, salt])`` of the
    reset seed, so the same seed gives the same demonstration.
    """

    def __init__(self, env: gymnasium.Env, policy: Any):
        super().__init__(env)
        self.policy = policy
        self.next_action: str | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        rng = np.random.default_rng(None if seed is None else [int(seed), _POLICY_SALT])
        task = (options or {}).get("task")
        self.policy.reset(info, rng, seed=seed, task=task)
        self.next_action = str(self.policy(obs, info))
        return obs, info

    def step(self, action: str):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.next_action = None if (terminated or truncated) else str(self.policy(obs, info))
        return obs, reward, terminated, truncated, info


def teacher_tokens(tokenizer, text: str, *, assistant_prefix: str = "", stop: Sequence[str] = (),
                   end_token_id: int | None = None) -> tuple[list[int], str]:
    """Tokens a model would have to sample to write the action ``text``; ``(ids, finish)``.

    ``text`` is the whole action (prefill included). The prefill is removed (it is context),
    the rest is cut after the first stop string (kept, like a sampler keeps the completing
    token), or closed with ``end_token_id`` when no stop string occurs. The ids continue
    the prefill's tokens the way the tokenizer splits prefill + rest, when that tokenisation
    starts with the prefill's own tokens.
    """
    if not text.startswith(assistant_prefix):
        raise ConfigError(f"the reference action {text[:80]!r} does not start with the format prefill "
                          f"{assistant_prefix!r}; make demonstrations with the prefill the policy writes")
    rest = text[len(assistant_prefix):]
    cuts = [(rest.index(s) + len(s)) for s in stop if s in rest]
    finish = "stop"
    if cuts:
        rest = rest[:min(cuts)]
    def encode(s):
        return (list(tokenizer.encode(s, add_special_tokens=False)))
    ids = encode(rest)
    if assistant_prefix:
        head, whole = encode(assistant_prefix), encode(assistant_prefix + rest)
        if whole[:len(head)] == head:
            ids = whole[len(head):]
    if not cuts:
        if end_token_id is None:
            raise ConfigError("the action has no stop string and the tokenizer has no end-of-turn token")
        ids = ids + [int(end_token_id)]
    return ids, finish


class TeacherSampler(Sampler):
    """A sampler whose "samples" are a reference policy's actions (see the module docstring).

    Args:
        tokenizer: the trained model's tokenizer.
        assistant_prefix: the rollout's format prefill (the policy writes it, the sampler drops it).
        end_token_id: token that ends a turn without a stop string (default: the tokenizer's EOS).
    """

    name = "teacher"

    def __init__(self, tokenizer, *, assistant_prefix: str = "", end_token_id: int | None = None):
        self.tokenizer = tokenizer
        self.assistant_prefix = assistant_prefix
        self.end_token_id = end_token_id if end_token_id is not None else tokenizer.eos_token_id
        self._envs: dict[str, PolicyDriven] = {}

    def attach(self, session_id: str, env: gymnasium.Env) -> None:
        """Episode ``session_id`` plays in ``env`` (a :class:`PolicyDriven` somewhere in its stack)."""
        layer = env
        while not isinstance(layer, PolicyDriven):
            if not isinstance(layer, gymnasium.Wrapper):
                raise ConfigError("TeacherSampler needs envs wrapped in PolicyDriven (make_demos does this)")
            layer = layer.env
        self._envs[session_id] = layer

    def sample(self, requests: Sequence[SampleRequest]) -> list[SampleResult]:
        out = []
        for req in requests:
            env = self._envs.get(req.session_id or "")
            if env is None or env.next_action is None:
                out.append(SampleResult([], [], "error", prompt_tokens=len(req.prompt_ids),
                                        error=f"no reference action for session {req.session_id!r}"))
                continue
            try:
                ids, finish = teacher_tokens(self.tokenizer, env.next_action, assistant_prefix=self.assistant_prefix,
                                             stop=req.params.stop, end_token_id=self.end_token_id)
            except ConfigError as e:
                out.append(SampleResult([], [], "error", prompt_tokens=len(req.prompt_ids), error=str(e)))
                continue
            if len(ids) > req.params.max_new_tokens:
                ids, finish = ids[:req.params.max_new_tokens], "length"
            out.append(SampleResult(ids, [0.0] * len(ids), finish, prompt_tokens=len(req.prompt_ids)))
        return out

    def end_session(self, session_id: str) -> None:
        self._envs.pop(session_id, None)


class _DemoEngine(RolloutEngine):
    """The rollout engine, telling the teacher sampler which env each episode plays in."""

    def _start(self, task, g, k, base, run, reset_seed=None):
        ep = super()._start(task, g, k, base, run, reset_seed)
        if ep.env is not None and not ep.done:
            self.sampler.attach(ep.session, ep.env)
        return ep


@dataclass
class DemoConfig(ConfigBase):
    """How demonstrations are made (``mtrl-gym demos``)."""

    env: str = "mtrl/Wordle-v0"
    """Registered environment id."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the env."""
    env_wrappers: list[dict[str, Any]] = field(default_factory=list)
    """Wrappers between the env and the policy, e.g. the run's ``SystemPrompt`` (the format
    the model will be served in); same format as ``GRPOConfig.env_wrappers``."""
    policy: str = "teacher"
    """Reference policy: ``teacher`` or ``solver``."""
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    """Options of the policy, e.g. ``{"choice": "random"}`` for the Wordle teacher."""
    num_episodes: int = 600
    """Demonstrations to write (training tasks are cycled through in order)."""
    split: str = "train"
    """Task split; only ``train``: demonstrations are never made from evaluation tasks."""
    train_size: int = 640
    """Training tasks of the env's generated split (Wordle: ``wordle_split``)."""
    val_size: int = 128
    """Validation tasks of that split (kept out of the demonstrations)."""
    split_seed: int = 42
    """Seed of the generated split."""
    model: str = "smollm2-135m"
    """Model whose tokenizer and chat template the tokens are made with."""
    serving: ServingSettings = field(default_factory=ServingSettings)
    """The format the model will be served in: its format prefill (``assistant_prefix``) and
    stop strings shape the demonstrations' tokens; written to the ``.meta.json`` for SFT."""
    max_turns: int | None = None
    """Most assistant turns per demonstration; None: until the env ends the episode."""
    max_episode_tokens: int = 4096
    """Token budget of one demonstration."""
    seed: int = 0
    """Base reset seed (episode ``i`` resets with ``seed + i``)."""

    def __post_init__(self) -> None:
        from mtrl_gym.envs.external import refuse_training

        refuse_training(self.env)  # an evaluation-only benchmark: refused, with its licence, before any model loads
        super().__post_init__()
        if self.split != "train" or self.env_kwargs.get("split", "train") != "train":
            raise ConfigError(f"demonstrations are made from training tasks only, got split="
                              f"{self.env_kwargs.get('split', self.split)!r}: evaluation tasks must stay unseen. "
                              "Use split='train'")
        if self.num_episodes < 1:
            raise ConfigError(f"`num_episodes` must be >= 1, got {self.num_episodes!r}")
        self.env_wrappers = [wrapper_spec("env_wrappers", i, w) for i, w in enumerate(self.env_wrappers)]
        check_listed_once(self.env_wrappers, self.serving)
        if self.policy not in POLICY_NAMES:
            raise ConfigError(f"`policy` must be one of {POLICY_NAMES}, got {self.policy!r}")


def train_tasks(config: DemoConfig) -> list[dict[str, Any]] | None:
    """The training split's task rows of ``config`` (the rows demonstrations may be made from)."""
    from mtrl_gym.trainers.grpo.data import load_task_splits

    train, _ = load_task_splits(config.env, None, None, train_size=config.train_size, val_size=config.val_size,
                                split_seed=config.split_seed)
    return train


def make_demos(config: DemoConfig, tokenizer=None, *, env: str | Callable[[], gymnasium.Env] | None = None,
               tasks: Sequence[Mapping[str, Any] | None] | None = None,
               policy_wrapper: Callable[[Any], Any] | None = None) -> list[Trajectory]:
    """Play ``config.num_episodes`` demonstrations; returns their trajectories.

    ``tokenizer`` defaults to ``config.model``'s; ``env`` (an id or factory) replaces
    ``config.env``; ``tasks`` replaces the generated training split (None rows let the env
    draw tasks from the reset seeds); ``policy_wrapper`` wraps each env's reference policy
    (e.g. :class:`Replay`).
    """

    if tokenizer is None:
        from mtrl_gym import models

        tokenizer = models.load_tokenizer(config.model)
    source = env if env is not None else config.env
    wrappers = build_wrappers(config.env_wrappers) + config.serving.env_wrappers()  # what the model will read

    def driven(e: gymnasium.Env) -> gymnasium.Env:
        policy = reference_policy(config.policy, e, **config.policy_kwargs)
        return PolicyDriven(e, policy_wrapper(policy) if policy_wrapper is not None else policy)

    rows = list(tasks) if tasks is not None else train_tasks(config)
    if not rows:
        rows = [None]
    chosen = [rows[i % len(rows)] for i in range(config.num_episodes)]
    sampler = TeacherSampler(tokenizer, assistant_prefix=config.serving.assistant_prefix)
    rollout = RolloutConfig(group_size=1, sampling=SamplingParams(temperature=0.0, max_new_tokens=4096,
                                                                  stop=tuple(config.serving.stop)),
                            max_turns=config.max_turns, max_episode_tokens=config.max_episode_tokens,
                            seed=config.seed, env_kwargs=dict(config.env_kwargs),
                            assistant_prefix=config.serving.assistant_prefix, unfinished_reward="sum")
    with _DemoEngine(source, sampler, tokenizer, rollout, wrappers=[*wrappers, driven]) as engine:
        return engine.collect(chosen, seed=config.seed)


#: The task-row field :class:`Replay` reads the recorded actions from.
REPLAY_KEY = "replay_actions"


class Replay:
    """A text policy that first plays the actions its task row lists under ``key`` (a learner's
    recorded game), then hands over to ``policy``. ``policy`` sees every turn, replayed ones
    included, so its state follows the board; its choices for the replayed turns are dropped."""

    def __init__(self, policy: Any, key: str = REPLAY_KEY):
        self.policy = policy
        self.key = key
        self.actions: list[str] = []
        self.turn = 0

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        self.policy.reset(info, rng, **episode)
        task = episode.get("task")
        self.actions = [str(a) for a in (task.get(self.key) or [])] if isinstance(task, Mapping) else []
        self.turn = 0

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        label = self.policy(observation, info)
        turn, self.turn = self.turn, self.turn + 1
        return self.actions[turn] if turn < len(self.actions) else label


def recorded_actions(record: Mapping[str, Any]) -> list[str]:
    """The assistant texts of an episode record (``messages``), in order: the actions it played."""
    return [str(m.get("content") or "") for m in record.get("messages") or [] if m.get("role") == "assistant"]


def learner_demos(config: DemoConfig, games: Sequence[tuple[Mapping[str, Any], Sequence[str]]], *,
                  relabel: bool, tokenizer=None) -> list[Trajectory]:
    """Demonstrations made from a learner's own games: ``games`` are ``(task row, actions)``,
    the assistant texts the learner wrote in that task's episode (an evaluation record's).

    * ``relabel=True`` (DAgger): one example per turn ``t`` of every game: the learner's first
      ``t`` actions replayed as context (no loss on them), then the reference policy's action
      for the board they left (the target). The model learns the teacher's answer on the boards
      *it* reaches, mistakes included, which teacher-only games never show it.
    * ``relabel=False`` (expert iteration): the game itself, every action a target (pass only
      the games worth copying, e.g. a constrained policy's solved or clue-consistent ones).

    Episodes are replayed by the rollout engine, so the tokens are the serving format's, as
    in :func:`make_demos`. A replayed action the env takes differently than it did for the
    learner (another wrapper stack) changes the board, not the format. Returns the
    trajectories; a replay that fails, or that the env ends before the turn to label, is left
    out with a warning that counts them.
    """
    import warnings
    from dataclasses import replace

    if tokenizer is None:
        from mtrl_gym import models

        tokenizer = models.load_tokenizer(config.model)
    prefix = config.serving.assistant_prefix
    jobs: dict[int, list[dict[str, Any]]] = {}  # turns to play -> rows
    for row, actions in games:
        actions = [str(a) for a in actions]
        bad = next((a for a in actions if not a.startswith(prefix)), None)
        if bad is not None:
            raise ConfigError(f"the learner's action {bad[:80]!r} (task {row.get('id')!r}) does not start with the "
                              f"format prefill {prefix!r}: play the learner's games in the demonstrations' format "
                              "(the same serving settings)")
        cuts = range(len(actions)) if relabel else ([len(actions) - 1] if actions else [])
        for t in cuts:
            jobs.setdefault(t + 1, []).append({**row, REPLAY_KEY: actions[:t] if relabel else actions})
    out: list[Trajectory] = []
    dropped = 0
    for turns, rows in sorted(jobs.items()):
        demo = replace(config, num_episodes=len(rows), max_turns=turns)
        for traj in make_demos(demo, tokenizer, tasks=rows, policy_wrapper=Replay):
            if traj.failed or len(traj.turn_spans) < turns:
                dropped += 1  # the replay failed, or the env ended it early: no board to label
                continue
            if relabel:
                mask = list(traj.loss_mask)
                for start, end in traj.turn_spans[:turns - 1]:
                    mask[start:end] = [0] * (end - start)
                traj.loss_mask = mask
            out.append(traj)
    if dropped:
        warnings.warn(f"{dropped} of {dropped + len(out)} learner examples were left out: their replay failed or "
                      "ended before the turn to label (were the games played with other wrappers or tasks?)",
                      stacklevel=2)
    return out


def drill_demos(actions: Sequence[Sequence[str]], tokenizer, serving: ServingSettings, *, system: str,
                first_message: str, reply: str = "OK", task_id: str = "drill") -> list[Trajectory]:
    """One demonstration per entry of ``actions``: a conversation (``system``, then
    ``first_message`` as the user) in which the assistant writes those actions in turn, each
    answered by ``reply`` as a tool message. Every action starts with the serving format's
    prefill (``serving.assistant_prefix``, context) and is cut after its first stop string,
    like :func:`make_demos`' turns; the loss mask covers the rest. The turns are rendered the
    way the rollout engine renders them (:class:`~mtrl_gym.rollout.template.ChatRenderer`), so
    ``decode(token_ids)`` is the chat template's rendering of ``messages`` up to the last turn's
    end-of-turn text (a turn cut at a stop string is closed by the next reply, as in a rollout).
    """
    from mtrl_gym.rollout.template import ChatRenderer

    chat = ChatRenderer(tokenizer)
    prefix = serving.assistant_prefix
    prefix_ids = chat.encode(prefix) if prefix else []
    out = []
    for n, conversation in enumerate(actions):
        messages = chat.first_messages(system, None, first_message)
        ids = chat.prompt_ids(messages)
        traj = Trajectory(task_id=f"{task_id}-{n}", prompt_length=len(ids))
        mask = [0] * len(ids)
        end_text = ""
        for turn, action in enumerate(conversation):
            if turn:  # the previous turn's reply, then the next generation prompt
                messages.append({"role": "tool", "content": reply})
                step = chat.reply_ids(messages, None, end_text) + chat.generation_prompt_ids(messages)
                ids += step
                mask += [0] * len(step)
            target, _ = teacher_tokens(tokenizer, action, assistant_prefix=prefix, stop=serving.stop,
                                       end_token_id=tokenizer.eos_token_id)
            ids += prefix_ids
            traj.turn_spans.append((len(ids), len(ids) + len(target)))
            ids += target
            mask += [0] * len(prefix_ids) + [1] * len(target)
            content, end_text = chat.split_assistant(target)  # an action without a stop string ends the turn
            messages.append({"role": "assistant", "content": prefix + content})
        traj.token_ids, traj.loss_mask, traj.logprobs, traj.messages = ids, mask, [0.0] * len(ids), messages
        traj.sampled_tokens = sum(mask)
        out.append(traj)
    return out


def write_demos(trajectories: Sequence[Trajectory], path: str | os.PathLike, config: DemoConfig) -> Path:
    """Save demonstrations as trajectory JSONL, with ``<path>.meta.json`` describing how they were made."""
    path = save_jsonl(trajectories, path)
    meta = {"config": config.to_dict(), "episodes": len(trajectories),
            "solved": sum(bool(t.metrics.get("success")) for t in trajectories),
            "failed": sum(t.failed for t in trajectories),
            "assistant_tokens": sum(t.trainable_tokens for t in trajectories),
            "tokens": sum(len(t.token_ids) for t in trajectories)}
    meta_path(path).write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return path


def read_demo_meta(path: str | os.PathLike) -> dict[str, Any] | None:
    """The ``.meta.json`` written next to a demonstration file, or None."""
    return read_meta(path)


def demo_view_wrappers(made: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the policy read in demonstrations made with config ``made`` (a ``.meta.json``'s
    ``config``): its ``observation_only`` env wrappers, then its serving wrappers."""
    from mtrl_gym.rollout.serving import observation_wrappers

    serving = made.get("serving") if isinstance(made.get("serving"), Mapping) else {}
    return observation_wrappers([*(made.get("env_wrappers") or []), *(serving.get("wrappers") or [])])
