"""The SFT loop: demonstrations -> LoRA adapter, with the GRPO trainer's machinery.

One step of :class:`SFTTrainer` (:meth:`SFTTrainer.train_step`): take ``batch_size``
demonstrations (:class:`~mtrl_gym.trainers.sft.data.DemoStream`), cut them into
micro-batches (the GRPO layouts, shared-prefix packing included), compute the token
cross-entropy of the assistant tokens (:func:`~mtrl_gym.trainers.sft.loss.sft_loss`,
divided by the whole batch's target count so accumulation is exact), clip, AdamW step.
The games of ``config.distill`` (a constrained policy's) join the pool, their targets scored
by ``-log P(allowed)`` instead of cross-entropy (distillation of that policy; the loss module
says why); with ``config.distill_fitting``, "allowed" narrows to the actions that fit the board
(the env profile's ``fitting_actions``) while the played action still begins one.

Reused from the GRPO trainer: model loading (``factory.load_model``), LoRA
(``policy.prepare_policy``), optimiser and schedule, checkpoints and exact resume
(``checkpoint``), ``metrics.jsonl`` + MLflow (``tracking.RunRecorder``) and the progress
bar. The result is a checkpoint folder whose ``adapter/`` GRPO starts from
(``GRPOConfig.init_adapter``) and ``mtrl-gym eval --adapter`` evaluates.

Metrics per step: ``train/loss`` (mean cross-entropy per assistant token),
``train/token_accuracy`` (argmax = target), ``train/grad_norm``, ``train/lr``,
``train/targets``, ``throughput/tokens_per_s`` (token positions computed, per second),
``throughput/target_tokens_per_s``, ``time/step_s``, ``data/epoch``; with ``distill``, also
``train/distill_loss`` (mean ``-log P(allowed)`` of the distilled targets) and ``train/distilled``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch

from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.grpo import checkpoint as ckpt
from mtrl_gym.trainers.grpo.batching import (
    make_micro_batches,
    resolve_packing,
    target_logits,
)
from mtrl_gym.trainers.grpo.factory import load_model
from mtrl_gym.trainers.grpo.policy import (
    LRSchedule,
    autocast,
    build_optimizer,
    prepare_policy,
    resolve_autocast,
    trainable_parameters,
)
from mtrl_gym.trainers.grpo.tracking import RunRecorder, StepProgress, make_tracker
from mtrl_gym.rollout.serving import SERVING_FILE, ServingSettings
from mtrl_gym.trainers.sft.config import SFTConfig
from mtrl_gym.envs.external import refuse_training
from mtrl_gym.trainers.sft.data import DemoStream, demo_sequences, distill_targets, load_demonstrations
from mtrl_gym.trainers.sft.loss import AllowedTokens, sft_loss
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["SFTTrainer"]


def _fitting_texts(game: Trajectory) -> list:
    """Per assistant turn of ``game``, the actions that fit its board (``EnvProfile.fitting_actions``),
    or None where any fits; ConfigError for an env without them, or a turn where none fits (the
    secret always fits what it answered, so the env's replay then disagrees with the game)."""
    from mtrl_gym.envs.profile import profile_of

    fitting_actions = profile_of(game.env_id).fitting_actions
    if fitting_actions is None:
        raise ConfigError(f"`distill_fitting`: {game.env_id!r} declares no fitting actions "
                          "(EnvProfile.fitting_actions); distil toward its vocabulary instead")
    turns = list(fitting_actions(game))
    empty = next((t for t, texts in enumerate(turns, 1) if texts is not None and not texts), None)
    if empty is not None:
        raise ConfigError(f"`distill_fitting`: no action fits turn {empty} of game {game.task_id!r} by its env's "
                          "replay, which therefore differs from the game as played; distil it toward the vocabulary")
    return turns


class SFTTrainer:
    """Supervised fine-tuning of a LoRA adapter (or all weights) on demonstrations.

    Args:
        config: the run's :class:`SFTConfig`.
        model, tokenizer: a transformers causal LM and its tokenizer; default: ``config.model``.
        demos: trajectories to train on instead of ``config.demos`` files.
        tracker: where metrics go besides ``metrics.jsonl``; default from ``config.tracking``.
        resume: a checkpoint folder or a run folder (its latest checkpoint) to continue from.
    """

    def __init__(self, config: SFTConfig, *, model: Any = None, tokenizer: Any = None,
                 demos: list[Trajectory] | None = None, tracker: Any = None, resume: str | Path | None = None):
        from mtrl_gym.trainers.grpo.trainer import load_init_adapter, seed_everything

        self.config = c = config
        self.run_dir = Path(c.output_dir)
        seed_everything(c.seed)
        if (model is None) != (tokenizer is None):
            raise ConfigError("pass both `model` and `tokenizer`, or neither (then config.model is loaded)")
        trajectories = demos if demos is not None else load_demonstrations(c.demos)  # refused before any model loads
        refuse_training(trajectories=trajectories, what="demonstration")
        distilled = load_demonstrations(c.distill) if c.distill else []
        refuse_training(trajectories=distilled, what="distillation game")
        # the fitting actions of every distilled turn, replayed before any model loads (a game that cannot be is refused)
        fitting = [_fitting_texts(game) for game in distilled] if c.distill_fitting else None
        if model is None:
            model, tokenizer = load_model(c)
        self.tokenizer = tokenizer
        if c.init_adapter is not None:
            model = load_init_adapter(model, c.init_adapter)
        self.policy = prepare_policy(model, **c.lora.policy_kwargs(),
                                     gradient_checkpointing=c.gradient_checkpointing, seed=c.seed)
        self.device = next(self.policy.parameters()).device
        vocab = getattr(getattr(self.policy, "config", None), "vocab_size", None)
        self._distilled: dict[int, AllowedTokens] = {}  # a distilled sequence's index -> its targets' allowed tokens
        sequences = demo_sequences(trajectories, vocab_size=vocab) if trajectories or not distilled else []
        if distilled:
            sequences += self._distill_sequences(distilled, vocab, start=len(trajectories), fitting=fitting) \
                * c.distill_repeat
        self.data = DemoStream(sequences, c.batch_size, c.seed)
        self.total_steps = self._total_steps()
        opt = c.optimizer
        self.optimizer = build_optimizer(self.policy, learning_rate=c.learning_rate, weight_decay=opt.weight_decay,
                                         betas=opt.adam_betas, eps=opt.adam_eps)
        self.schedule = LRSchedule(c.learning_rate, opt.lr_schedule, total_steps=self.total_steps,
                                   warmup_steps=opt.warmup_steps, min_ratio=opt.min_lr_ratio)
        self.autocast_dtype = resolve_autocast(c.autocast_dtype, self.device)
        self.packing = resolve_packing(c.packing, self.policy, gradient_checkpointing=c.gradient_checkpointing)
        self.pad_token_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        self.step = 0
        self.seconds = 0.0
        self.last_saved_step: int | None = None
        tracker_run_id = None
        if resume is not None:
            state = ckpt.load_checkpoint(resume, policy=self.policy, optimizer=self.optimizer)
            self.step = int(state["step"])
            self.schedule.load_state_dict(state["schedule"])
            self.data.load_state_dict(state["data"])
            self.seconds = float(state.get("seconds", 0.0))
            tracker_run_id = state.get("tracker_run_id")
            ckpt.restore_rng(state["rng"])
            self.last_saved_step = self.step
        self._tracker_run_id = tracker_run_id
        self.recorder = RunRecorder(self.run_dir, tracker if tracker is not None else make_tracker(
            c.tracking.tracker, tracking_uri=c.tracking.uri, experiment=c.tracking.experiment,
            run_name=c.resolved_run_name, run_dir=self.run_dir))

    def serving(self) -> ServingSettings:
        """The serving settings of the adapter: the config's, else those the first demonstration
        file was made with (its ``.meta.json``), else the defaults. Its ``wrappers`` are what the
        demonstrations were read through (their serving wrappers and any ``observation_only``
        env wrapper) when the config names none: the tokens the adapter learnt from hold that text."""
        from mtrl_gym.trainers.demos import demo_view_wrappers, read_demo_meta

        made = ((read_demo_meta(self.config.demos[0]) or {}).get("config") or {}) if self.config.demos else {}
        serving = self.config.serving
        if serving is None:
            serving = ServingSettings.from_dict(made["serving"]) if isinstance(made.get("serving"), dict) \
                else ServingSettings()
        views = demo_view_wrappers(made)
        return serving.replace(wrappers=views) if views and not serving.wrappers else serving

    def _distill_sequences(self, games: list[Trajectory], vocab: int | None, *, start: int,
                           fitting: list | None = None) -> list:
        """The train sequences of ``config.distill``'s games, and each target's allowed tokens
        (:func:`~mtrl_gym.trainers.sft.data.distill_targets`) recorded by sequence index;
        ``fitting``: each game's fitting texts per turn (``distill_fitting``)."""
        from mtrl_gym.rollout.constraint import vocabulary_constraint

        stop = self.serving().stop
        if not stop:
            raise ConfigError("`distill` needs a stop string in the serving settings: the constraint's allowed texts "
                              "are the env's actions followed by it, as in dictionary decoding")
        constraints: dict[str, Any] = {}
        encoded: dict[str, list[int]] = {}  # a fitting action's text -> its ids followed by stop's, for every game
        sequences = demo_sequences(games, vocab_size=vocab, start=start)
        by_index = {seq.index: seq for seq in sequences}
        for i, game in enumerate(games, start):
            if i not in by_index:
                continue
            if game.env_id not in constraints:
                constraints[game.env_id] = vocabulary_constraint(game.env_id, self.tokenizer, stop[0],
                                                                 what=f"distillation game {game.task_id!r}")
            narrow = None if fitting is None else self._fitting(fitting[i - start], stop[0], encoded)
            sets = distill_targets(game, constraints[game.env_id], narrow)  # one per target: both read the loss mask
            self._distilled[i] = AllowedTokens(
                torch.tensor([t for t, ids in enumerate(sets) for _ in ids], dtype=torch.long),
                torch.tensor([token for ids in sets for token in ids], dtype=torch.long))
        return sequences

    def _fitting(self, turns: list, stop: str, encoded: dict[str, list[int]]) -> list:
        """The constraints of one game's fitting texts (:func:`_fitting_texts`), each followed by
        ``stop``, per turn; None where any action fits. ``encoded`` caches each text's token ids
        (with ``stop``, the same for every game of the run)."""
        from mtrl_gym.rollout.constraint import CompletionConstraint

        out = []
        for texts in turns:
            if texts is None:
                out.append(None)
                continue
            for text in texts:
                if text not in encoded:
                    encoded[text] = self.tokenizer.encode(text + stop, add_special_tokens=False)
            out.append(CompletionConstraint([encoded[t] for t in texts], name="fitting"))
        return out

    def _allowed(self, micro) -> AllowedTokens | None:
        """The allowed tokens of a micro-batch's distilled targets, in its target order (each
        sequence's, made once, shifted to where its targets start)."""
        rows, tokens, offset = [], [], 0
        for seq in micro.sequences:
            own = self._distilled.get(seq.index)
            if own is not None:
                rows.append(own.target + offset)
                tokens.append(own.token)
            offset += seq.num_targets
        if not rows:
            return None
        return AllowedTokens(torch.cat(rows).to(self.device), torch.cat(tokens).to(self.device))

    def _total_steps(self) -> int:
        c = self.config
        limits = [c.max_steps] if c.max_steps is not None else []
        if c.max_epochs is not None:
            limits.append(math.ceil(c.max_epochs * len(self.data) / c.batch_size))
        return max(min(limits), 1)

    # ------------------------------------------------------------------ the loop

    def train(self) -> dict[str, Any]:
        """Run until the step (or time) limit; returns the summary (also in ``summary.json``)."""
        c = self.config
        self.run_dir.mkdir(parents=True, exist_ok=True)
        c.save(self.run_dir / "config.yaml")
        self.serving().save(self.run_dir / SERVING_FILE)  # what `mtrl-gym eval --adapter` serves it with
        if self.step:
            self.recorder.truncate_after(self.step)
        self.recorder.tracker.start({**c.to_dict(), "total_steps": self.total_steps, "packing": self.packing,
                                     "autocast": str(self.autocast_dtype), "demonstrations": len(self.data)},
                                    run_id=self._tracker_run_id)
        progress = StepProgress(self.total_steps, self.step, c.progress, desc="sft")
        status = "FAILED"
        started = time.monotonic() - self.seconds
        try:
            while self.step < self.total_steps:
                metrics = self.train_step()
                progress.update(metrics)
                self.seconds = time.monotonic() - started
                if c.checkpoints.save_every and self.step % c.checkpoints.save_every == 0:
                    self.save_checkpoint()
                if c.max_minutes is not None and self.seconds >= 60 * c.max_minutes:
                    progress.write(f"sft: stopping after {self.seconds / 60:.1f} min (max_minutes={c.max_minutes})")
                    break
            if self.last_saved_step != self.step:
                self.save_checkpoint()
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            progress.write(f"interrupted: checkpointed step {self.step} in {self.save_checkpoint()}")
            raise
        finally:
            progress.close()
            summary = {"run_dir": str(self.run_dir), "status": status, "steps": self.step,
                       "seconds": self.seconds, "epochs": self.data.epochs_done,
                       "adapter": str(self.adapter_path()), "tracker_run_id": self.recorder.tracker.run_id}
            self.recorder.summary(summary)
            self.recorder.tracker.finish(status)
        return summary

    def train_step(self) -> dict[str, float]:
        """One optimiser step on the next batch; returns (and logs) its metrics."""
        c = self.config
        started = time.perf_counter()
        batch = self.data.next_batch()
        micro_batches = make_micro_batches(batch, c.micro_batch_tokens, self.packing, pad_token_id=self.pad_token_id)
        denominator = float(max(sum(s.num_targets for s in batch), 1))
        lr = self.schedule.apply(self.optimizer)
        self.policy.train()
        nll = distill_nll = 0.0
        correct = count = slots = distilled = 0
        for micro in micro_batches:
            on_device = micro.to(self.device)
            with autocast(self.device, self.autocast_dtype):
                logits = target_logits(self.policy, on_device)
            out = sft_loss(logits, micro.cat("targets").to(self.device), denominator=denominator,
                           allowed=self._allowed(micro) if self._distilled else None)
            out.loss.backward()
            nll += out.nll_sum
            correct += out.correct
            count += out.count
            distill_nll += out.distill_nll
            distilled += out.distill_count
            slots += micro.num_slots
        params = [p for p in trainable_parameters(self.policy) if p.grad is not None]
        norm = float(torch.nn.utils.clip_grad_norm_(params, c.optimizer.max_grad_norm or math.inf)) if params else 0.0
        if math.isfinite(norm):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        seconds = time.perf_counter() - started
        metrics = {"train/loss": nll / max(count, 1), "train/token_accuracy": correct / max(count, 1),
                   "train/grad_norm": norm, "train/lr": lr, "train/targets": float(count),
                   "train/micro_batches": float(len(micro_batches)),
                   "throughput/tokens_per_s": slots / seconds, "throughput/target_tokens_per_s": count / seconds,
                   "time/step_s": seconds, "data/epoch": self.data.epochs_done}
        if self._distilled:  # -log P(allowed) of the distilled targets, and how many (part of loss and targets)
            metrics.update({"train/distill_loss": distill_nll / max(distilled, 1), "train/distilled": float(distilled)})
        if self.step % c.log_every == 0 or self.step == self.total_steps:
            self.recorder.log(metrics, self.step)
        return metrics

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self) -> Path:
        state = {"schedule": self.schedule.state_dict(), "data": self.data.state_dict(), "rng": ckpt.capture_rng(),
                 "seconds": self.seconds, "tracker_run_id": self.recorder.tracker.run_id}
        path = ckpt.save_checkpoint(self.run_dir, self.step, policy=self.policy, optimizer=self.optimizer,
                                    state=state, config=self.config, tokenizer=self.tokenizer,
                                    keep=self.config.checkpoints.keep)
        self.last_saved_step = self.step
        return path

    def adapter_path(self) -> Path:
        """The adapter folder of the latest checkpoint (``.../step_N/adapter``)."""
        return self.run_dir / "checkpoints" / f"step_{self.step:06d}" / ("model" if self.config.lora.full_finetune
                                                                          else "adapter")
