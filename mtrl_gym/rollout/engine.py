"""The multi-turn agent loop: environments + a sampler -> token-level trajectories.

:func:`collect` (or a reusable :class:`RolloutEngine`) plays ``len(tasks) * group_size``
episodes of any mtrl_gym environment at once, turn by turn:

1. **Reset.** Episode ``k`` of group ``g`` resets with ``seed + g`` and
   ``options={"task": tasks[g]}`` (no options when the row is ``None``), so every episode of
   a group plays the same task. The first prompt is the chat template's rendering of
   ``info["system_prompt"]``, ``info["tools"]`` and the first observation
   (:class:`~mtrl_gym.rollout.template.ChatRenderer`).
2. **Sample.** One sampler call for all live episodes; each request names its episode
   (``session_id``) so samplers can reuse the KV cache of earlier turns. The sampled
   tokens are appended exactly as sampled, with ``loss_mask = 1`` and their log-probs.
3. **Step.** The decoded assistant text goes to ``env.step``. The reply (``tool`` messages
   from ``info["tool_results"]`` and/or a user message, see
   :func:`~mtrl_gym.rollout.template.env_reply_messages`) is rendered through the chat
   template and appended with ``loss_mask = 0``; every turn's reward is kept.
4. **Stop** on ``terminated``/``truncated``, ``max_turns``, the per-episode token budget,
   the model's context length, or the wall-clock budget; else append the generation
   prompt and go to 2.

Nothing stops a run: a sampler error, an exception in the env, or an episode over its
time budget yields a trajectory with ``failed=True``, the error text in
``failure_reason`` and the env's minimum reward (``reward_range[0]``; Wordle: -1.5).

>>> from mtrl_gym.rollout.engine import RolloutConfig
>>> RolloutConfig(group_size=4, max_turns=6).group_size
4

Typical use (see ``mtrl-gym rollout`` for a command line)::

    from mtrl_gym import models
    from mtrl_gym.rollout.engine import collect, aggregate_metrics
    from mtrl_gym.rollout.samplers import SamplingParams
    from mtrl_gym.rollout.samplers.hf import HFSampler

    model, tok = models.load("smollm2-135m")
    trajs = collect("mtrl/Wordle-v0", [{"answer": "paste", "id": "t0"}], HFSampler(model, tok), tok,
                    group_size=8, sampling=SamplingParams(temperature=1.0, max_new_tokens=128))
    print(aggregate_metrics(trajs)["reward_mean"])
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.envs import EnvSource, failure_reward, make_env
from mtrl_gym.rollout.observers import ProgressBar, RolloutObserver
from mtrl_gym.rollout.template import REPLY_MODES, ChatRenderer, env_reply_messages
from mtrl_gym.rollout.metrics import STOP_REASONS, aggregate_metrics, episode_metrics
from mtrl_gym.rollout.samplers.base import SampleRequest, SampleResult, Sampler, SamplingParams
from mtrl_gym.rollout.sources.base import RolloutSource
from mtrl_gym.rollout.trajectory import Trajectory, json_safe, turn_record

__all__ = ["RolloutConfig", "RolloutEngine", "EpisodeState", "collect", "aggregate_metrics", "failure_text",
           "STOP_REASONS", "UNFINISHED_STOPS"]

#: Stop reasons of episodes that ended without an outcome (see ``RolloutConfig.unfinished_reward``).
UNFINISHED_STOPS = frozenset({"truncated", "max_turns", "token_budget", "context_length"})


@dataclass
class RolloutConfig:
    """How episodes are played."""

    group_size: int = 1
    """Episodes per task (GRPO's group); all of a group reset with the same seed and task."""
    sampling: SamplingParams = field(default_factory=SamplingParams)
    """Sampling parameters of every turn (its ``seed`` is replaced per request, see ``seed``)."""
    max_turns: int | None = None
    """Most assistant turns per episode; ``None`` plays until the env ends the episode."""
    max_episode_tokens: int = 4096
    """Token budget of an episode's context: a turn is sampled only while the context has room
    for it, and never past the budget. The final (loss-masked) env reply may go beyond it."""
    time_budget_s: float | None = None
    """Wall-clock seconds an episode may use: its own env calls plus the sampler calls it takes
    part in (not time spent waiting for other episodes' env steps). Over it, the episode fails."""
    seed: int | None = 0
    """Base seed. Call ``i`` of :meth:`RolloutEngine.collect` without its own seed derives one
    from ``(seed, i)``; ``None`` draws fresh randomness each call."""
    reply_mode: str = "auto"
    """How an env reply becomes messages: ``"auto"``, ``"tool"`` or ``"user"``
    (:func:`mtrl_gym.rollout.template.env_reply_messages`)."""
    failure_reward: float | None = None
    """Reward of a failed episode; ``None`` reads the env's ``reward_range[0]``."""
    unfinished_reward: float | str = "min"
    """Reward of an episode that ends without an outcome (``truncated`` by a wrapper, or cut
    at ``max_turns``, the token budget or the context length): ``"min"`` gives it the failure
    reward, ``"sum"`` the sum of its turn rewards, a number that number. Outcome rewards
    arrive on the final step, so ``"sum"`` would pay an unfinished Wordle game 0, more than
    a lost one (-0.5): a policy could learn to stall. ``"min"`` closes that hole."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make`` when the env is given by id."""
    env_workers: int = 0
    """0 calls ``reset``/``step`` in the calling thread; N > 0 uses N threads (envs that wait on I/O)."""
    env_timeout_s: float | None = None
    """Seconds one ``reset``/``step`` may take (needs ``env_workers > 0``); over it, the episode fails."""
    tools_in_template: bool | None = None
    """Pass tools to the chat template (True), into the system prompt (False), or detect (None)."""
    assistant_prefix: str = ""
    """Text every assistant turn starts with, written into the context before sampling (a
    "format prefill", e.g. ``'<tool_call>{"name": "guess_word", "arguments": {"guess": "'``).
    Its tokens have ``loss_mask = 0`` (the model did not sample them); the env receives
    prefix + sampled text, and the chat messages show the same."""
    progress: bool = False
    """Show a tqdm progress bar of finished episodes."""

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ConfigError(f"`group_size` must be >= 1, got {self.group_size!r}")
        if self.seed is not None and self.seed < 0:
            raise ConfigError(f"`seed` must be >= 0 or None, got {self.seed!r}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError(f"`max_turns` must be >= 1 or None, got {self.max_turns!r}")
        if self.max_episode_tokens < 2:
            raise ConfigError(f"`max_episode_tokens` must be >= 2, got {self.max_episode_tokens!r}")
        if self.time_budget_s is not None and self.time_budget_s <= 0:
            raise ConfigError(f"`time_budget_s` must be > 0 or None, got {self.time_budget_s!r}")
        if self.reply_mode not in REPLY_MODES:
            raise ConfigError(f"`reply_mode` must be one of {REPLY_MODES}, got {self.reply_mode!r}")
        if self.env_workers < 0:
            raise ConfigError(f"`env_workers` must be >= 0, got {self.env_workers!r}")
        if not (self.unfinished_reward in ("min", "sum") or (
                isinstance(self.unfinished_reward, (int, float)) and not isinstance(self.unfinished_reward, bool))):
            raise ConfigError(f'`unfinished_reward` must be "min", "sum" or a number, got {self.unfinished_reward!r}')
        if self.env_timeout_s is not None and self.env_workers == 0:
            raise ConfigError("`env_timeout_s` needs `env_workers` >= 1 (a call in the calling thread "
                              "cannot be interrupted)")
        if not isinstance(self.sampling, SamplingParams):
            raise ConfigError(f"`sampling` must be a SamplingParams, got {type(self.sampling).__name__}")


class _EnvFailure(Exception):
    """An env call raised or timed out; ``stop`` is the trajectory's stop reason."""

    def __init__(self, message: str, stop: str = "failed"):
        super().__init__(message)
        self.stop = stop


@dataclass
class EpisodeState:
    """One episode in flight: its env, the trajectory so far, its sampler session, time and
    counters. The engine's turn loop (and a subclass's, such as multi-agent self-play) drives it."""

    env: gymnasium.Env
    traj: Trajectory
    session: str
    start: float
    elapsed: float = 0.0
    """Seconds counted against the episode's time budget (sampling and env calls)."""
    env_s: float = 0.0
    """Seconds inside the env's ``reset`` and ``step``."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    end_text: str = ""
    action: str = ""
    done: bool = False
    tool_calls: int = 0
    format_errors: int = 0
    cut_turns: int = 0
    env_hung: bool = False


class RolloutEngine(RolloutSource):
    """Plays batches of episodes with one sampler; reuse it across training steps.

    The local :class:`~mtrl_gym.rollout.sources.base.RolloutSource`: new weights go to its sampler.

    Args:
        env: a registered env id (``"mtrl/Wordle-v0"``) or a callable returning a new env.
        sampler: any :class:`~mtrl_gym.rollout.samplers.base.Sampler`.
        tokenizer: the sampled model's tokenizer (chat template, decoding).
        config: a :class:`RolloutConfig`; keyword arguments override its fields.
        wrappers: callables ``env -> env`` applied, in order, to every env made.
        observers: :class:`~mtrl_gym.rollout.observers.RolloutObserver` s told about every
            sampler call, sampled token and turn (progress bars, logging).
    """

    def __init__(self, env: EnvSource, sampler: Sampler, tokenizer, config: RolloutConfig | None = None, *,
                 wrappers: Sequence[Callable[[gymnasium.Env], gymnasium.Env]] = (),
                 observers: Sequence[RolloutObserver] = (), **overrides: Any):
        config = config or RolloutConfig()
        self.config = dataclasses.replace(config, **overrides) if overrides else config
        self.env_source = env
        self.env_id = env if isinstance(env, str) else getattr(env, "__name__", type(env).__name__)
        self.sampler = sampler
        self.wrappers = tuple(wrappers)
        self.observers = list(observers)
        self._watching = self.observers  # during collect: also the progress bar
        ends = set(getattr(sampler, "eos_token_ids", ()) or ())
        if tokenizer.eos_token_id is not None:
            ends.add(int(tokenizer.eos_token_id))
        self.renderer = ChatRenderer(tokenizer, tools_in_template=self.config.tools_in_template,
                                     end_token_ids=sorted(ends))
        self._idle_envs: list[gymnasium.Env] = []
        self._pool = ThreadPoolExecutor(self.config.env_workers, thread_name_prefix="mtrl-env") \
            if self.config.env_workers else None
        self._calls = 0
        self._prefix_ids = list(tokenizer.encode(self.config.assistant_prefix, add_special_tokens=False)) \
            if self.config.assistant_prefix else []
        probe = self._make_env()
        self.failure_reward = self._failure_reward(probe)
        self.success_threshold = _wrapper_attr(probe, "success_threshold")
        self._idle_envs.append(probe)

    # ------------------------------------------------------------------ setup

    def _make_env(self) -> gymnasium.Env:
        return make_env(self.env_source, self.config.env_kwargs, self.wrappers)

    def _failure_reward(self, env: gymnasium.Env) -> float:
        if self.config.failure_reward is not None:
            return float(self.config.failure_reward)
        return failure_reward(env, what=f"environment {self.env_id!r}", fix="pass failure_reward= to the rollout config")

    def close(self) -> None:
        """Close the pooled envs and threads."""
        for env in self._idle_envs:
            env.close()
        self._idle_envs.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def update_policy(self, model: Any, *, version: int) -> None:
        """Hand the sampler the new weights (HF: drop stale KV caches; vLLM: load them)."""
        self.sampler.update_policy(model, version=version)

    @property
    def samples_off_policy(self) -> bool:
        """Constrained sampling: the log-probs are the constrained distribution's, not the policy's."""
        return self.config.sampling.constraint is not None

    # ------------------------------------------------------------------ main loop

    def collect(self, tasks: Sequence[Mapping[str, Any] | None], *, seed: int | None = None,
                on_episode: Callable[[Trajectory], None] | None = None, group_offset: int = 0,
                reset_seeds: Sequence[int] | None = None) -> list[Trajectory]:
        """Play ``group_size`` episodes of every task; trajectories in (task, sample) order.

        ``seed``: group ``g`` resets with ``seed + g``; sampling seeds derive from it too, so
        the same seed, tasks, sampler and weights give the same trajectories.
        ``on_episode(trajectory)`` is called as soon as each episode ends (its metrics set),
        e.g. to save it before the rest of the batch is done.
        ``group_offset``: ``tasks`` are groups ``group_offset, group_offset + 1, ...`` of a
        larger batch (a shard played by a worker): group ids, reset seeds and sampling seeds
        are those the whole batch would give them.
        ``reset_seeds``: the reset seed of each task's group instead of ``seed + g`` (tasks
        whose seeds come from elsewhere, e.g. a dataset column).
        """
        base = self._base_seed(seed)
        run = uuid.uuid4().hex[:12]
        if group_offset < 0:
            raise ConfigError(f"`group_offset` must be >= 0, got {group_offset!r}")
        if reset_seeds is not None and len(reset_seeds) != len(tasks):
            raise ConfigError(f"`reset_seeds` needs one seed per task: {len(reset_seeds)} for {len(tasks)} tasks")
        episodes = [self._start(task, group_offset + g, k, base, run,
                                None if reset_seeds is None else int(reset_seeds[g]))
                    for g, task in enumerate(tasks) for k in range(self.config.group_size)]
        released: set[int] = set()

        def release_finished() -> None:
            for i, e in enumerate(episodes):
                if e.done and i not in released:
                    released.add(i)
                    self._release(e)
                    if on_episode is not None:
                        on_episode(e.traj)

        bar = ProgressBar.open(len(episodes)) if self.config.progress else None
        self._watching = [*self.observers, bar] if bar is not None else self.observers
        try:
            release_finished()
            while live := [e for e in episodes if not e.done]:
                self._sample_turn(live, base)
                self._step_envs([e for e in live if not e.done])
                release_finished()
                finished = sum(e.done for e in episodes)
                for observer in self._watching:
                    observer.on_turn([e.traj for e in episodes], finished)
        finally:
            self._watching = self.observers
            if bar is not None:
                bar.close()
            for i, e in enumerate(episodes):
                if i not in released:
                    self._release(e)
        return [e.traj for e in episodes]

    @contextlib.contextmanager
    def _tokens_to_observers(self) -> Iterator[None]:
        """Forward the sampler's ``on_tokens`` callback (if it has one) to the observers while
        a sampler call runs, chaining a callback already set; the sampler is left as it was."""
        if not self._watching or not hasattr(self.sampler, "on_tokens"):
            yield
            return
        saved = self.sampler.on_tokens
        observers = list(self._watching)

        def forward(n: int) -> None:
            if saved is not None:
                saved(n)
            for observer in observers:
                observer.on_tokens(n)

        self.sampler.on_tokens = forward
        try:
            yield
        finally:
            self.sampler.on_tokens = saved

    def _base_seed(self, seed: int | None) -> int:
        self._calls += 1
        if seed is not None:
            if seed < 0:
                raise ConfigError(f"`seed` must be >= 0, got {seed!r}")
            return int(seed)
        if self.config.seed is None:
            return int(np.random.SeedSequence().generate_state(1)[0])
        return int(np.random.SeedSequence([self.config.seed, self._calls]).generate_state(1)[0])

    def _start(self, task, g: int, k: int, base: int, run: str, reset_seed: int | None = None) -> EpisodeState:
        row_id = str(task.get("id", "")) if isinstance(task, Mapping) else ""
        reset_seed = base + g if reset_seed is None else reset_seed
        traj = Trajectory(task_id=row_id, env_id=self.env_id, group_id=g, sample_index=k, seed=reset_seed)
        env = self._idle_envs.pop() if self._idle_envs else None
        ep = EpisodeState(env=env, traj=traj, session=f"{run}-{g}-{k}", start=time.monotonic())
        try:
            if ep.env is None:
                ep.env = self._make_env()
            options = {"task": dict(task)} if task is not None else None
            obs, info = self._call(ep, lambda: ep.env.reset(seed=reset_seed, options=options))
        except Exception as e:  # noqa: BLE001 - a broken reset is a failed episode
            self._fail(ep, failure_text("env reset", e), getattr(e, "stop", "failed"))
            return ep
        self._open(ep, obs, info, row_id)
        return ep

    def _open(self, ep: EpisodeState, obs: Any, info: Mapping[str, Any], row_id: str = "") -> None:
        """Render an episode's first prompt (system prompt, tools, first observation) from a reset's result."""
        traj = ep.traj
        traj.task_id = str(info.get("task_id") or row_id)
        ep.tools = list(info.get("tools") or [])
        traj.tools = json_safe(ep.tools)
        traj.messages = self.renderer.first_messages(str(info.get("system_prompt") or ""), ep.tools, str(obs))
        try:
            traj.token_ids = self.renderer.prompt_ids(traj.messages, ep.tools)
        except Exception as e:  # noqa: BLE001 - the chat template rejected the first prompt
            self._fail(ep, failure_text("first prompt", e))
            return
        traj.loss_mask = [0] * len(traj.token_ids)
        traj.logprobs = [0.0] * len(traj.token_ids)
        traj.prompt_length = len(traj.token_ids)
        if self._room(ep) < 1:
            limit, kind = self._budget()
            where = ("the model's context length" if kind == "context_length"
                     else "the episode budget, max_episode_tokens (mtrl-gym eval --max-episode-tokens)")
            self._fail(ep, f"the first prompt has {traj.prompt_length} tokens: no room to sample within "
                           f"{limit} tokens ({kind}: {where})", "token_budget")

    def _budget(self) -> tuple[int, str]:
        limit = getattr(self.sampler, "max_context_length", None)
        if limit is not None and limit < self.config.max_episode_tokens:
            return int(limit), "context_length"
        return self.config.max_episode_tokens, "token_budget"

    def _room(self, ep: EpisodeState) -> int:
        """Tokens that can still be sampled this turn (after the assistant prefix, if any)."""
        return self._budget()[0] - len(ep.traj.token_ids) - len(self._prefix_ids)

    # ------------------------------------------------------------------ sampling

    def _sample_turn(self, live: list[EpisodeState], base: int) -> None:
        requests = []
        for ep in live:
            t = ep.traj
            room = self._room(ep)
            if self._prefix_ids:  # the prefill is context, not a sample: masked out of the loss
                t.token_ids.extend(self._prefix_ids)
                t.loss_mask.extend([0] * len(self._prefix_ids))
                t.logprobs.extend([0.0] * len(self._prefix_ids))
            seed = int(np.random.SeedSequence([base, t.group_id, t.sample_index, t.num_turns]).generate_state(1)[0])
            params = dataclasses.replace(self.config.sampling, seed=seed,
                                         max_new_tokens=min(self.config.sampling.max_new_tokens, room))
            requests.append(SampleRequest(list(t.token_ids), params, session_id=ep.session))
        for observer in self._watching:
            observer.on_sample(len(requests))
        started = time.monotonic()
        try:
            with self._tokens_to_observers():
                results = self.sampler.sample(requests)
            if len(results) != len(requests):
                raise RuntimeError(f"sampler returned {len(results)} results for {len(requests)} requests")
        except Exception as e:  # noqa: BLE001 - a sampler crash fails these episodes, not the run
            for ep in live:
                self._fail(ep, failure_text("sampler", e))
            return
        for ep in live:
            ep.elapsed += time.monotonic() - started
        for ep, result in zip(live, results):
            self._record_turn(ep, result)

    def _record_turn(self, ep: EpisodeState, result: SampleResult) -> None:
        t = ep.traj
        t.prefill_tokens += result.prefill_tokens
        t.cached_tokens += result.cached_tokens
        if result.finish_reason == "error" or not result.token_ids:
            self._fail(ep, f"sampler: {result.error or 'no tokens were sampled'}")
            return
        start = len(t.token_ids)
        t.token_ids.extend(result.token_ids)
        t.loss_mask.extend([1] * len(result.token_ids))
        t.logprobs.extend(float(x) for x in result.logprobs)
        t.turn_spans.append((start, len(t.token_ids)))
        t.sampled_tokens += len(result.token_ids)
        ep.cut_turns += result.finish_reason == "length"
        content, ep.end_text = self.renderer.split_assistant(result.token_ids)
        content = self.config.assistant_prefix + content
        t.messages.append({"role": "assistant", "content": content})
        ep.action = content
        self._check_time(ep)

    # ------------------------------------------------------------------ env steps

    def _step_envs(self, live: list[EpisodeState]) -> None:
        if self._pool is None:
            outcomes = []
            for ep in live:
                started = time.monotonic()
                try:
                    outcomes.append(ep.env.step(ep.action))
                except Exception as e:  # noqa: BLE001
                    outcomes.append(e)
                seconds = time.monotonic() - started
                ep.elapsed += seconds
                ep.env_s += seconds
        else:
            started = time.monotonic()
            futures = [self._pool.submit(_timed, ep.env.step, ep.action) for ep in live]
            outcomes = [self._wait(ep, f, started) for ep, f in zip(live, futures)]
        for ep, outcome in zip(live, outcomes):
            if isinstance(outcome, Exception):
                self._fail(ep, failure_text("env step", outcome), getattr(outcome, "stop", "failed"))
                continue
            try:
                self._after_step(ep, *outcome)
            except Exception as e:  # noqa: BLE001 - e.g. a reply the chat template cannot render
                self._fail(ep, failure_text("env reply", e))

    def _after_step(self, ep: EpisodeState, obs, reward, terminated, truncated, info) -> None:
        t = ep.traj
        t.turn_rewards.append(float(reward))
        ep.tool_calls += len(info.get("tool_calls") or [])
        ep.format_errors += bool(info.get("format_error"))
        t.final_info = json_safe(dict(info))
        t.turn_info.append(turn_record(info))
        new = env_reply_messages(str(obs), info, self.config.reply_mode)
        try:
            reply = self.renderer.reply_ids(t.messages + new, ep.tools, ep.end_text)
        except Exception:
            if not any(m["role"] == "tool" for m in new):
                raise
            # The template has no tool role (strict user/assistant alternation): one user message.
            new = env_reply_messages(str(obs), info, "user")
            reply = self.renderer.reply_ids(t.messages + new, ep.tools, ep.end_text)
        t.messages.extend(new)
        self._append_env(t, reply)
        t.terminated, t.truncated = bool(terminated), bool(truncated)
        if terminated or truncated:
            self._finish(ep, "terminated" if terminated else "truncated")
        elif self.config.max_turns is not None and t.num_turns >= self.config.max_turns:
            self._finish(ep, "max_turns")
        elif not self._check_time(ep):
            gen = self.renderer.generation_prompt_ids(t.messages, ep.tools)
            if self._room(ep) - len(gen) < 1:
                self._finish(ep, self._budget()[1])
            else:
                self._append_env(t, gen)

    @staticmethod
    def _append_env(t: Trajectory, ids: list[int]) -> None:
        t.token_ids.extend(ids)
        t.loss_mask.extend([0] * len(ids))
        t.logprobs.extend([0.0] * len(ids))

    def _check_time(self, ep: EpisodeState) -> bool:
        """Fail the episode if it is over its time budget; True when it was."""
        budget = self.config.time_budget_s
        if budget is not None and not ep.done and ep.elapsed > budget:
            self._fail(ep, f"the episode ran longer than its time budget of {budget:g} s", "time_budget")
            return True
        return ep.done

    def _call(self, ep: EpisodeState, fn):
        started = time.monotonic()
        if self._pool is None:
            try:
                return fn()
            finally:
                seconds = time.monotonic() - started
                ep.elapsed += seconds
                ep.env_s += seconds
        outcome = self._wait(ep, self._pool.submit(_timed, fn), started)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _wait(self, ep: EpisodeState, future, started: float):
        """The result of an env call run by the pool, or the exception it raised / timed out with."""
        timeout, stop = self.config.env_timeout_s, "failed"
        if self.config.time_budget_s is not None:
            left = max(0.0, self.config.time_budget_s - ep.elapsed)
            if timeout is None or left < timeout:
                timeout, stop = left, "time_budget"
        # the call was submitted at `started`; wait for what is left of its allowance
        wait = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        try:
            seconds, outcome = future.result(timeout=wait)
        except FutureTimeout:
            ep.env_hung = True
            ep.elapsed += time.monotonic() - started
            ep.env_s += time.monotonic() - started
            return _EnvFailure(f"the env call did not return within {timeout:g} s", stop)
        ep.elapsed += seconds
        ep.env_s += seconds
        return outcome

    # ------------------------------------------------------------------ endings

    def _finish(self, ep: EpisodeState, stop: str) -> None:
        ep.done = True
        ep.traj.stop_reason = stop
        ep.traj.reward = float(sum(ep.traj.turn_rewards))
        rule = self.config.unfinished_reward
        if stop in UNFINISHED_STOPS and rule != "sum":
            ep.traj.reward = self.failure_reward if rule == "min" else float(rule)

    def _fail(self, ep: EpisodeState, reason: str, stop: str = "failed") -> None:
        t = ep.traj
        ep.done = True
        t.failed, t.failure_reason, t.stop_reason = True, reason, stop
        t.reward = self.failure_reward

    def _release(self, ep: EpisodeState) -> None:
        self.sampler.end_session(ep.session)
        t = ep.traj
        t.metrics = episode_metrics(t, tool_calls=ep.tool_calls, format_errors=ep.format_errors,
                                    cut_turns=ep.cut_turns, wall_time_s=time.monotonic() - ep.start,
                                    env_time_s=ep.env_s,
                                    success_threshold=self.success_threshold)
        if ep.env is None:
            return
        if ep.env_hung:  # a thread may still be inside it: never reuse
            return
        self._idle_envs.append(ep.env)


def _timed(fn, *args):
    """Run ``fn(*args)`` in a worker: ``(seconds, result or the exception it raised)``."""
    started = time.monotonic()
    try:
        result = fn(*args)
    except Exception as e:  # noqa: BLE001 - handed back to the loop, which fails the episode
        result = e
    return time.monotonic() - started, result


def _wrapper_attr(env: gymnasium.Env, name: str):
    try:
        return env.get_wrapper_attr(name)
    except AttributeError:
        return None


def failure_text(where: str, e: BaseException) -> str:
    """The ``failure_reason`` of an episode that failed at ``where`` (``"sampler"``, ``"env step"``, ...)."""
    text = str(e) or type(e).__name__
    return f"{where}: {type(e).__name__}: {text}" if not isinstance(e, _EnvFailure) else f"{where}: {text}"


def collect(env: EnvSource, tasks: Sequence[Mapping[str, Any] | None], sampler: Sampler, tokenizer, *,
            config: RolloutConfig | None = None, seed: int | None = None,
            wrappers: Sequence[Callable[[gymnasium.Env], gymnasium.Env]] = (), **overrides: Any) -> list[Trajectory]:
    """Play ``group_size`` episodes of each task and return their trajectories.

    A one-call form of :class:`RolloutEngine`: ``env`` is an id or env factory, ``tasks``
    a list of task rows (``None`` lets the env draw a task from the seed), ``overrides``
    set :class:`RolloutConfig` fields (``group_size=8, max_turns=6, sampling=...``).
    ``seed`` defaults to ``config.seed`` (group ``g`` resets with ``seed + g``).
    """
    with RolloutEngine(env, sampler, tokenizer, config, wrappers=wrappers, **overrides) as engine:
        base = engine.config.seed if seed is None else seed
        return engine.collect(tasks, seed=base)
