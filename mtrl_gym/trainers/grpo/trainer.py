"""The GRPO training loop: sample groups of episodes, score them, update the policy, repeat.

One step of :class:`GRPOTrainer` reads top to bottom in :meth:`GRPOTrainer.train_step`:

1. **rollout**: ``global_batch_size`` tasks x ``group_size`` episodes through the sampler
   (:class:`~mtrl_gym.rollout.engine.RolloutEngine`); failed episodes come back with the
   env's minimum reward and never stop the step;
2. **advantages**: the configured estimator over each group
   (:mod:`~mtrl_gym.trainers.grpo.credit`), zero-variance groups counted (and dropped);
3. **update**: micro-batched forward/backward with the configured loss, gradient clipping,
   AdamW step(s) (:mod:`~mtrl_gym.trainers.grpo.update`);
4. **sync**: the sampler gets the new policy (HF: drop stale KV caches; vLLM: new weights;
   Ray workers: the new trainable tensors);
5. **logging**: metrics to ``metrics.jsonl`` and the tracker, a sample of trajectories.

Step 1 asks the run's one rollout source (:mod:`mtrl_gym.rollout.sources`, named by
``config.source``) for the step's batch: the built-in loop, your own agent, Ray actors,
self-play or a producer that samples ahead all answer the same calls, so the loop never
asks which one it has (docs/architecture.md).

:meth:`GRPOTrainer.train` runs steps until ``max_steps``/``max_epochs``, validates every
``validation.every`` steps on held-out tasks, checkpoints every ``checkpoints.save_every`` steps, and on
Ctrl-C or SIGTERM checkpoints the last completed step (an interrupt during an update is held until
the update is done). ``GRPOTrainer(config, resume=run_dir)`` continues a run exactly.

>>> from mtrl_gym.trainers.grpo.config import GRPOConfig
>>> cfg = GRPOConfig.load("cpu", overrides=["max_steps=2"])  # doctest: +SKIP
>>> summary = GRPOTrainer(cfg).train()                        # doctest: +SKIP
"""

from __future__ import annotations

import math
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.grpo import checkpoint as ckpt
from mtrl_gym.trainers.grpo.batching import resolve_packing
from mtrl_gym.trainers.grpo.config import GRPOConfig
from mtrl_gym.trainers.grpo.credit import train_sequences, trajectory_advantages
from mtrl_gym.trainers.grpo.data import TaskStream, load_task_splits
from mtrl_gym.trainers.grpo.diversity import (
    diversity_metrics,
    diversity_penalties,
    shown_action,
    top_action,
    trajectory_actions,
)
from mtrl_gym.trainers.grpo.factory import load_model
from mtrl_gym.rollout.samplers.factory import make_sampler
from mtrl_gym.rollout.serving import SERVING_FILE
from mtrl_gym.rollout.sources.base import RolloutSource, TaskFeed
from mtrl_gym.rollout.sources.factory import BuildContext, make_source
from mtrl_gym.trainers.grpo.metrics import PhaseTimer, RunTotals, rollout_metrics
from mtrl_gym.trainers.grpo.policy import (
    LRSchedule,
    build_optimizer,
    prepare_policy,
    reference_logprobs_fn,
    resolve_autocast,
)
from mtrl_gym.trainers.grpo.tracking import (
    RunRecorder,
    StepProgress,
    Tracker,
    format_summary,
    make_tracker,
)
from mtrl_gym.trainers.grpo.update import UpdateSettings, policy_update
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["GRPOTrainer", "seed_everything", "load_init_adapter", "FROM_CONFIG"]

#: Default of ``train_tasks``/``val_tasks``: read them as the config says.
FROM_CONFIG: Any = object()


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    import random

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _seed_for(*parts: int) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


class GRPOTrainer:
    """Group-relative policy optimisation of an LLM agent on a multi-turn environment.

    Args:
        config: the run's :class:`GRPOConfig`.
        model, tokenizer: a transformers causal LM and its tokenizer; default: loaded from
            ``config.model``.
        sampler: any :class:`~mtrl_gym.rollout.samplers.base.Sampler`; default: built from
            ``config.sampler`` (the ``hf`` sampler shares ``model``).
        train_tasks, val_tasks: task lists (dicts) or None (the env draws tasks from
            seeds); default: as ``config`` says (task files or the env's generated split).
        env: an env factory (a callable returning a new env) or id, instead of ``config.env``.
        source: a ready :class:`~mtrl_gym.rollout.sources.base.RolloutSource` of the training
            episodes, instead of the one ``config.source`` names (validation still plays
            ``config.source``'s validation episodes).
        tracker: where metrics go besides the run folder; default from ``config.tracking``.
        resume: a checkpoint folder or a run folder (its latest checkpoint) to continue from.

    Attributes ``policy``, ``optimizer``, ``schedule``, ``sampler``, ``tasks`` (a
    :class:`TaskStream`), ``step`` and ``totals`` are public, for scripts that drive the
    parts themselves.
    """

    def __init__(self, config: GRPOConfig, *, model: Any = None, tokenizer: Any = None, sampler: Any = None,
                 train_tasks: Any = FROM_CONFIG, val_tasks: Any = FROM_CONFIG, env: Any = None,
                 source: RolloutSource | None = None, tracker: Tracker | None = None,
                 resume: str | Path | None = None):
        self.config = config
        self.run_dir = Path(config.output_dir)
        seed_everything(config.seed)
        if (model is None) != (tokenizer is None):
            raise ConfigError("pass both `model` and `tokenizer`, or neither (then config.model is loaded)")
        if model is None:
            model, tokenizer = load_model(config)
        self.tokenizer = tokenizer
        if config.init_adapter is not None:
            model = load_init_adapter(model, config.init_adapter)
        self.policy = prepare_policy(model, **config.lora.policy_kwargs(),
                                     gradient_checkpointing=config.gradient_checkpointing, seed=config.seed)
        self.device = next(self.policy.parameters()).device
        opt = config.optimizer
        self.optimizer = build_optimizer(self.policy, learning_rate=config.learning_rate,
                                         weight_decay=opt.weight_decay, betas=opt.adam_betas, eps=opt.adam_eps)
        self._load_tasks(train_tasks, val_tasks)
        self.total_steps = self._total_steps()
        self.schedule = LRSchedule(config.learning_rate, opt.lr_schedule,
                                   total_steps=self.total_steps * config.updates_per_step,
                                   warmup_steps=opt.warmup_steps, min_ratio=opt.min_lr_ratio)
        self.update_intervals: list[tuple[float, float]] = []
        """``time.monotonic()`` start and end of every update, and of the rollout of every batch
        trained on (``rollout_intervals``): how much sampling and training overlap."""
        self.rollout_intervals: list[tuple[float, float]] = []
        self.sampler = sampler if sampler is not None else make_sampler(
            config.sampler, policy=self.policy, tokenizer=tokenizer, model_name=config.model, seed=config.seed,
            **config.sampler_kwargs)
        self.source: RolloutSource
        """Where the training episodes come from (``config.source``); ``val_source``: the validation ones."""
        context = BuildContext(config, self.policy, self.sampler, tokenizer, env)
        self.source = source if source is not None else make_source(config.source, context)
        self.val_source: RolloutSource | None = make_source(config.source, context, validation=True) \
            if config.validation.every and self.val_tasks != [] else None
        self._feed = TaskFeed(draw=self._next_tasks, seed=lambda step: _seed_for(config.seed, 1, step),
                              last_step=self.total_steps - 1)
        self._consumed_data = self.tasks.state_dict()
        self.settings = self._update_settings()
        # With an initial adapter the reference is a frozen copy of that policy, not the base.
        self._reference = reference_logprobs_fn(self.policy, config.lora.full_finetune
                                                or config.init_adapter is not None) \
            if config.objective.kl_coef > 0 else None
        self.step = 0
        self.totals = RunTotals()
        self.last_step_seconds: dict[str, float] = {}
        """Seconds per phase of the latest step (``rollout``, ``advantages``, ``update``, ``sync``, ``step``, ``logging``)."""
        self.last_val_step: int | None = None
        self.last_saved_step: int | None = None
        self._step_start: dict[str, Any] | None = None
        self._in_update = False
        self._tracker_run_id: str | None = None
        if config.group_size == 1 and config.objective.advantage != "grpo_passk":
            warnings.warn("group_size=1: every group has a single rollout, so every advantage is 0 and only a "
                          "KL term can move the policy; use group_size >= 2", stacklevel=2)
        if resume is not None:
            self._resume(resume)
        self.recorder = RunRecorder(self.run_dir, tracker if tracker is not None else make_tracker(
            config.tracking.tracker, tracking_uri=config.tracking.uri, experiment=config.tracking.experiment,
            run_name=config.resolved_run_name, run_dir=self.run_dir, traces=config.tracking.traces))

    # ------------------------------------------------------------------ set-up helpers

    def _load_tasks(self, train_tasks: Any, val_tasks: Any) -> None:
        c = self.config
        if train_tasks is FROM_CONFIG or val_tasks is FROM_CONFIG:
            train, val = load_task_splits(c.env, c.train_tasks, c.val_tasks, train_size=c.train_size,
                                          val_size=c.val_size, split_seed=c.split_seed)
            train_tasks = train if train_tasks is FROM_CONFIG else train_tasks
            val_tasks = val if val_tasks is FROM_CONFIG else val_tasks
        self.tasks = TaskStream(train_tasks, c.global_batch_size, c.seed)
        if val_tasks is None:  # the env draws validation tasks from fixed seeds
            val_tasks = [None] * (c.validation.max_tasks or c.val_size)
        self.val_tasks = list(val_tasks)[:c.validation.max_tasks] if c.validation.max_tasks else list(val_tasks)

    def _total_steps(self) -> int:
        c = self.config
        limits = [c.max_steps] if c.max_steps is not None else []
        if c.max_epochs is not None:
            if not len(self.tasks):
                raise ConfigError("`max_epochs` needs a task list (the env draws tasks from seeds here); "
                                  "set `max_steps` or give `train_tasks`")
            limits.append(math.ceil(c.max_epochs * len(self.tasks) / c.global_batch_size))
        return max(min(limits), 1)

    def _update_settings(self) -> UpdateSettings:
        c = self.config
        autocast_dtype = resolve_autocast(c.autocast_dtype, self.device)
        old = c.objective.old_logprobs
        if old == "auto":  # stale or constrained batches: their sampling log-probs are not the policy's
            old = "sampler" if (c.sampler == "hf" and autocast_dtype is None and c.lora.dropout == 0
                                and not self.source.samples_off_policy) else "recompute"
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        packing = resolve_packing(c.packing, self.policy, gradient_checkpointing=c.gradient_checkpointing)
        return UpdateSettings.from_config(c, old_logprobs=old, packing=packing,
                                          pad_token_id=int(pad), autocast_dtype=autocast_dtype)

    # ------------------------------------------------------------------ the loop

    def train(self) -> dict[str, Any]:
        """Run until the step limit; returns the run summary (also in ``summary.json``)."""
        c = self.config
        self._start_tracking()
        progress = StepProgress(self.total_steps, self.step, c.progress)
        status = "FAILED"
        restore_sigterm = _sigterm_as_interrupt()  # schedulers and `docker stop` send SIGTERM
        try:
            every = c.validation.every
            if every and self.step == 0 and self.last_val_step is None:
                self.validate()
            while self.step < self.total_steps:
                metrics = self.train_step()
                progress.update(metrics)
                if c.checkpoints.save_every and self.step % c.checkpoints.save_every == 0:
                    self.save_checkpoint()
                if every and self.step % every == 0:
                    self.validate()
            if every and self.last_val_step != self.step:
                self.validate()
            if self.last_saved_step != self.step:
                self.save_checkpoint()
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            self._stop_rollouts()
            progress.write(self._save_after_interrupt())
            raise
        finally:
            restore_sigterm()
            progress.close()
            self._stop_rollouts()  # batches drawn ahead are discarded
            summary = self._finish(status)
        return summary

    def train_step(self) -> dict[str, float]:
        """One GRPO step (rollout, advantages, update, sync, logging); returns its metrics."""
        c, guards, objective = self.config, self.config.collapse, self.config.objective
        timer = PhaseTimer()
        self._step_start = {"data": self._consumed_data, "rng": ckpt.capture_rng()}
        with timer("step"):
            with timer("rollout"):
                batch = self.source.batch(self.step, self._feed)
                self._consumed_data = batch.data_state
                self.rollout_intervals.extend(batch.intervals)
                trajectories = batch.trajectories
            with timer("advantages"):
                actions = [trajectory_actions(t) for t in trajectories]
                penalties = diversity_penalties(actions, c.group_size, coef_group=guards.repeat_penalty,
                                                coef_batch=guards.dominance_penalty,
                                                threshold=guards.dominance_threshold) \
                    if (guards.repeat_penalty or guards.dominance_penalty) else None
                per_trajectory, adv = trajectory_advantages(trajectories, c.group_size, objective.advantage,
                                                            objective.advantage_kwargs, penalties=penalties)
                sequences = train_sequences(trajectories, per_trajectory, group_size=c.group_size,
                                            drop_zero_variance_groups=objective.drop_zero_variance_groups,
                                            train_on_failed=objective.train_on_failed)
            with timer("update"), self._hold_interrupts():
                started = time.monotonic()
                update = policy_update(self.policy, self.optimizer, self.schedule, sequences, self.settings,
                                       step=self.step, reference=self._reference, device=self.device)
                self.update_intervals.append((started, time.monotonic()))
                self.step += 1
                self._step_start = None
                with timer("sync"):
                    self.source.update_policy(self.policy, version=self.step)
        metrics = self._step_metrics(trajectories, adv.metrics(), update, timer, len(sequences))
        metrics.update(batch.engine_metrics)
        if batch.sample_s > 0:  # sampled outside the step: its own time, not the step's
            metrics["throughput/sampled_tokens_per_s"] = metrics["rollout/tokens_sampled"] / batch.sample_s
        if penalties is not None:
            metrics["diversity/penalty_mean"] = float(np.mean(penalties))
        action, share = top_action(actions)
        if share > guards.warning_share:
            shown = shown_action(action, c.serving.assistant_prefix)
            print(f"warning: step {self.step}: {share:.0%} of the sampled actions are {shown!r} "
                  f"(over {guards.warning_share:.0%}): the policy may be collapsing; see collapse.repeat_penalty, "
                  "collapse.dominance_penalty and diversity/* in metrics.jsonl", file=sys.stderr)
        with timer("logging"):  # after the step's metrics: its own time is in the run totals, not in them
            self.recorder.log(metrics, self.step)
            self.recorder.trajectories(_sample(trajectories, c.group_size, c.tracking.log_trajectories),
                                       f"step_{self.step:06d}")
            self.recorder.traces(_sample(trajectories, c.group_size, c.tracking.traces.per_step), step=self.step,
                                 policy_version=self.step - 1)
        self.totals.add_step(metrics, timer.seconds)
        self.last_step_seconds = dict(timer.seconds)
        return metrics

    # ------------------------------------------------------------------ rollouts

    def _next_tasks(self) -> tuple[list[Any], dict[str, Any]]:
        tasks = self.tasks.next_batch()
        return tasks, self.tasks.state_dict()

    def _stop_rollouts(self) -> None:
        """Stop the source sampling ahead; the task stream goes back to the last batch taken (drawn-ahead
        batches are discarded, so a later step or checkpoint continues exactly from there)."""
        self.source.stop()
        self.tasks.load_state_dict(self._consumed_data)

    def validate(self) -> dict[str, float]:
        """Play the validation tasks with the current policy; logs and returns ``val/...`` metrics."""
        if self.val_source is None or not self.val_tasks:
            return {}
        timer = PhaseTimer()
        with timer("validation"), self.source.paused():
            trajectories = self.val_source.collect(self.val_tasks, seed=_seed_for(self.config.seed, 2))
        group_size, tracking = self.config.validation.group_size, self.config.tracking
        metrics = rollout_metrics(trajectories, group_size, prefix="val/")
        metrics["time/validation_s"] = timer.seconds["validation"]
        self.totals.add_validation(metrics, timer.seconds["validation"])
        self.recorder.log(metrics, self.step, kind="val")
        self.recorder.trajectories(_sample(trajectories, group_size, tracking.log_trajectories),
                                   f"val_step_{self.step:06d}")
        self.recorder.traces(_sample(trajectories, group_size, tracking.traces.per_step),
                             step=self.step, kind="val", policy_version=self.step)
        self.last_val_step = self.step
        self.last_val_metrics = metrics
        return metrics

    # ------------------------------------------------------------------ metrics

    def _step_metrics(self, trajectories: Sequence[Trajectory], adv: Mapping[str, float],
                      update: Mapping[str, float], timer: PhaseTimer, trained_sequences: int) -> dict[str, float]:
        c = self.config
        metrics = rollout_metrics(trajectories, c.group_size, prefix="rollout/")
        metrics.update({f"train/{k}": v for k, v in adv.items()})
        metrics["train/sequences"] = float(trained_sequences)
        metrics.update({f"train/{k}": v for k, v in update.items()})
        metrics.update(timer.metrics())
        metrics["time/env_s"] = float(sum(t.metrics.get("env_time_s", 0.0) for t in trajectories))
        for key in ("recompute_s", "reference_s", "optimizer_s"):  # parts of the update, timed inside it
            if f"train/{key}" in metrics:
                metrics[f"time/{key}"] = metrics.pop(f"train/{key}")
        rollout_s, update_s = timer.seconds.get("rollout", 0.0), timer.seconds.get("update", 0.0)
        metrics["throughput/sampled_tokens_per_s"] = metrics["rollout/tokens_sampled"] / rollout_s if rollout_s else 0.0
        metrics["throughput/trained_tokens_per_s"] = update.get("trained_tokens", 0.0) / update_s if update_s else 0.0
        metrics["data/epoch"] = self.tasks.epochs_done
        metrics.update({f"diversity/{k}": v for k, v in diversity_metrics(trajectories, c.group_size).items()})
        metrics["diversity/zero_variance_frac"] = float(adv.get("zero_variance_frac", 0.0))
        return metrics

    # ------------------------------------------------------------------ checkpoints

    def _state(self) -> dict[str, Any]:
        return {"schedule": self.schedule.state_dict(), "data": self._consumed_data, "rng": ckpt.capture_rng(),
                "totals": self.totals.state_dict(), "last_val_step": self.last_val_step,
                "tracker_run_id": self.recorder.tracker.run_id}

    def save_checkpoint(self) -> Path:
        """Checkpoint the current (completed) step; returns the checkpoint folder."""
        path = ckpt.save_checkpoint(self.run_dir, self.step, policy=self.policy, optimizer=self.optimizer,
                                    state=self._state(), config=self.config, tokenizer=self.tokenizer,
                                    keep=self.config.checkpoints.keep)
        self.last_saved_step = self.step
        return path

    def _resume(self, source: str | Path) -> None:
        state = ckpt.load_checkpoint(source, policy=self.policy, optimizer=self.optimizer)
        self.step = int(state["step"])
        self.schedule.load_state_dict(state["schedule"])
        self.tasks.load_state_dict(state["data"])
        self._consumed_data = self.tasks.state_dict()
        self.totals.load_state_dict(state.get("totals", {}))
        self.last_val_step = state.get("last_val_step")
        self.last_saved_step = self.step
        self._tracker_run_id = state.get("tracker_run_id")
        ckpt.restore_rng(state["rng"])
        self.source.update_policy(self.policy, version=self.step)
        self.resumed_from = state["path"]

    def _save_after_interrupt(self) -> str:
        if self._in_update:
            return ("interrupted during an update: the step is half-applied, so nothing was saved; the last "
                    f"checkpoint is {ckpt.latest_checkpoint(self.run_dir)}")
        if self._step_start is not None:  # interrupted before the update: rewind the step's draws
            self._consumed_data = self._step_start["data"]
            self.tasks.load_state_dict(self._consumed_data)
            ckpt.restore_rng(self._step_start["rng"])
            self._step_start = None
        path = self.save_checkpoint()
        return f"interrupted: checkpointed step {self.step} in {path}; continue with --resume {self.run_dir}"

    @contextmanager
    def _hold_interrupts(self) -> Iterator[None]:
        """Hold a Ctrl-C until the update is done (a second one interrupts at once)."""
        if threading.current_thread() is not threading.main_thread():
            self._in_update = True
            try:
                yield
            finally:
                self._in_update = False
            return
        pending: list[int] = []

        def handler(signum, frame):
            if pending:
                raise KeyboardInterrupt
            pending.append(signum)

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        self._in_update = True
        try:
            yield
            self._in_update = False
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
        if pending:
            raise KeyboardInterrupt

    # ------------------------------------------------------------------ tracking

    def _start_tracking(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config.save(self.run_dir / "config.yaml")
        self.config.serving.save(self.run_dir / SERVING_FILE)  # what `mtrl-gym eval --adapter` serves it with
        if self.step:
            self.recorder.truncate_after(self.step)
        params = {**self.config.to_dict(), "total_steps": self.total_steps,
                  "update.old_logprobs": self.settings.old_logprobs, "update.packing": self.settings.packing,
                  "update.autocast": str(self.settings.autocast_dtype)}
        self.recorder.tracker.start(params, run_id=self._tracker_run_id)
        self.recorder.tracker.log_artifact(self.run_dir / "config.yaml")

    def _finish(self, status: str) -> dict[str, Any]:
        c = self.config
        vals = self.recorder.records("val")  # the first one is step 0's, also after a resume
        summary = {"run_dir": str(self.run_dir), "status": status, "steps": self.step,
                   "episodes": self.totals.episodes, "optimizer_steps": self.totals.optimizer_steps,
                   "tokens": self.totals.tokens, "seconds": self.totals.seconds,
                   "first_val": vals[0] if vals else {},
                   "final_val": getattr(self, "last_val_metrics", {}),
                   "validation": {"tasks": len(self.val_tasks), "group_size": c.validation.group_size,
                                  "temperature": c.validation.temperature, "max_turns": c.episode.max_turns,
                                  "last_step": self.last_val_step},
                   "tracker_run_id": self.recorder.tracker.run_id,
                   "tracking_uri": getattr(self.recorder.tracker, "tracking_uri", None)}
        self.recorder.summary(summary)
        self.recorder.tracker.finish(status)
        if self.config.progress:
            print(format_summary(summary))
        return summary

    def close(self) -> None:
        """Release the rollout sources (their envs, servers and workers) and the sampler."""
        self._stop_rollouts()
        self.source.close()
        if self.val_source is not None:
            self.val_source.close()
        self.sampler.close()


def _sigterm_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM raise KeyboardInterrupt (a checkpoint and a summary, as Ctrl-C); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, previous)


def load_init_adapter(model: Any, path: str | Path) -> Any:
    """``model`` with the peft adapter in ``path`` loaded, trainable (GRPO from an SFT policy)."""
    try:
        from peft import PeftModel
    except ImportError:
        from mtrl_gym.error import DependencyNotInstalled

        raise DependencyNotInstalled("peft", extra="train") from None
    folder = Path(path)
    if not (folder / "adapter_config.json").is_file():
        raise ConfigError(f"`init_adapter` {str(path)!r} is not a LoRA adapter folder (no adapter_config.json); "
                          "give a checkpoint's adapter folder, e.g. runs/sft/checkpoints/step_000080/adapter")
    return PeftModel.from_pretrained(model, str(folder), is_trainable=True)


def _sample(trajectories: Sequence[Trajectory], group_size: int, n: int) -> list[Trajectory]:
    """Up to ``n`` trajectories, one per group first (so different tasks are shown)."""
    if n <= 0:
        return []
    firsts = list(trajectories[::group_size])
    rest = [t for i, t in enumerate(trajectories) if i % group_size]
    return (firsts + rest)[:n]
