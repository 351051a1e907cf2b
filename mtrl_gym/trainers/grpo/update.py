"""The update phase of a GRPO step: train sequences in, optimiser steps out.

:func:`policy_update` splits the step's sequences into ``updates_per_step`` mini-batches,
each one optimiser step, and each mini-batch into micro-batches whose gradients accumulate.
Per micro-batch it computes the current log-probs, picks the old-policy log-probs,
optionally the truncated importance-sampling (TIS) weights and the reference log-probs,
calls the loss from :mod:`~mtrl_gym.trainers.grpo.losses`, and backpropagates.

Old-policy log-probs. In the first mini-batch the policy has not moved yet, so the old
log-probs *are* the current ones, detached: the ratio is exactly 1 and no forward pass is
spent on them (with one update per step this is the whole story). Later mini-batches use
log-probs computed before the first update (``recompute``: one no-grad forward over them)
or the sampler's (``sampler``).

Sampler mismatch. The tokens were drawn by the sampler, whose log-probs can differ from
the trainer's (other kernels, precision, a stale copy of the weights). Each step logs the
mean and max ``|log p_trainer - log p_sampler|`` over the first mini-batch's tokens, where
both describe the same weights; with ``tis_cap`` set every token is weighted by
``min(exp(old - sampler), tis_cap)``.

Gradient accumulation is exact: every micro-batch loss is divided by the mini-batch's
denominator (its trainable tokens for ``token_mean``, its sequences for
``seq_mean_token_mean``, sequences x ``max_episode_tokens`` for ``token_sum_norm``), so the
summed gradients equal those of the whole mini-batch in one piece.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from mtrl_gym.trainers.grpo.batching import MicroBatch, TrainSequence, make_micro_batches, token_logprobs
from mtrl_gym.trainers.grpo.losses import compute_loss, truncated_importance_weights
from mtrl_gym.trainers.grpo.policy import LRSchedule, autocast, trainable_parameters

__all__ = ["UpdateSettings", "policy_update", "loss_denominator", "split_minibatches"]


@dataclass
class UpdateSettings:
    """What :func:`policy_update` needs to know (a subset of :class:`GRPOConfig`)."""

    loss: str = "ppo"
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    aggregation: str = "token_mean"
    max_episode_tokens: int = 4096
    kl_coef: float = 0.0
    tis_cap: float | None = 2.0
    old_logprobs: str = "recompute"
    """``recompute`` or ``sampler`` (``auto`` resolved by the caller)."""
    updates_per_step: int = 1
    micro_batch_tokens: int = 8192
    packing: str = "sorted"
    """``shared_prefix``, ``padding_free`` or ``sorted`` (``auto`` resolved by the caller)."""
    temperature: float = 1.0
    max_grad_norm: float | None = 1.0
    autocast_dtype: torch.dtype | None = None
    pad_token_id: int = 0
    seed: int = 0

    @classmethod
    def from_config(cls, config: Any, *, old_logprobs: str, packing: str, pad_token_id: int,
                    autocast_dtype: torch.dtype | None) -> UpdateSettings:
        objective = config.objective
        return cls(loss=objective.loss, loss_kwargs=dict(objective.loss_kwargs), aggregation=objective.aggregation,
                   max_episode_tokens=config.episode.max_tokens, kl_coef=objective.kl_coef, tis_cap=objective.tis_cap,
                   old_logprobs=old_logprobs, updates_per_step=config.updates_per_step,
                   micro_batch_tokens=config.micro_batch_tokens, packing=packing,
                   temperature=config.serving.temperature, max_grad_norm=config.optimizer.max_grad_norm,
                   autocast_dtype=autocast_dtype, pad_token_id=pad_token_id, seed=config.seed)


class _Stats:
    """Accumulates micro-batch diagnostics into step metrics."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.weighted: dict[str, tuple[float, float]] = {}
        self.mins: dict[str, float] = {}
        self.maxs: dict[str, float] = {}

    def add(self, key: str, value: float) -> None:
        self.sums[key] = self.sums.get(key, 0.0) + float(value)

    def mean(self, key: str, value: float, weight: float) -> None:
        total, w = self.weighted.get(key, (0.0, 0.0))
        self.weighted[key] = (total + float(value) * weight, w + weight)

    def low(self, key: str, value: float) -> None:
        self.mins[key] = min(self.mins.get(key, math.inf), float(value))

    def high(self, key: str, value: float) -> None:
        self.maxs[key] = max(self.maxs.get(key, -math.inf), float(value))

    def result(self) -> dict[str, float]:
        out = dict(self.sums)
        out.update({k: t / w for k, (t, w) in self.weighted.items() if w > 0})
        out.update(self.mins)
        out.update(self.maxs)
        return out


def loss_denominator(aggregation: str, sequences: Sequence[TrainSequence], max_episode_tokens: int) -> float:
    """The whole mini-batch's divisor for ``aggregation`` (see the module docstring)."""
    if aggregation == "token_mean":
        return float(max(sum(s.num_targets for s in sequences), 1))
    if aggregation == "seq_mean_token_mean":
        return float(max(len(sequences), 1))
    return float(max(len(sequences), 1) * max_episode_tokens)


def split_minibatches(sequences: Sequence[TrainSequence], n: int, seed: Sequence[int]) -> list[list[TrainSequence]]:
    """``n`` mini-batches of nearly equal size, in an order shuffled by ``seed`` (n > 1)."""
    if n == 1:
        return [list(sequences)]
    order = np.random.default_rng(list(seed)).permutation(len(sequences))
    return [[sequences[i] for i in chunk] for chunk in np.array_split(order, n) if len(chunk)]


def _micro_batches(sequences: Sequence[TrainSequence], s: UpdateSettings) -> list[MicroBatch]:
    return make_micro_batches(sequences, s.micro_batch_tokens, s.packing, pad_token_id=s.pad_token_id)


def _recompute_old(model: Any, minibatches: list[list[TrainSequence]], s: UpdateSettings,
                   device: torch.device) -> None:
    """Store no-grad log-probs of the current policy on every sequence of mini-batches 2..n."""
    with torch.no_grad(), autocast(device, s.autocast_dtype):
        for mb in minibatches[1:]:
            for micro in _micro_batches(mb, s):
                logp, _ = token_logprobs(model, micro.to(device), temperature=s.temperature)
                for seq, part in zip(micro.sequences, torch.split(logp.float().cpu(), micro.counts)):
                    seq.old_logp = part


def policy_update(model: Any, optimizer: torch.optim.Optimizer, schedule: LRSchedule,
                  sequences: Sequence[TrainSequence], settings: UpdateSettings, *, step: int,
                  reference: Callable[[Callable[[Any], Any]], Any] | None = None,
                  device: torch.device | str | None = None) -> dict[str, float]:
    """Run the optimiser steps of one GRPO step on ``sequences``; returns its metrics.

    Metrics: ``loss`` and ``policy_loss`` (summed over mini-batches' full losses, averaged
    over mini-batches), the loss diagnostics (``clip_frac_low``, ``ratio_mean``,
    ``approx_kl_old``, ``kl_ref``... token-weighted means; ``ratio_min``/``ratio_max``),
    ``entropy``, ``grad_norm`` (before clipping, mean over optimiser steps), ``lr``,
    ``logprob_mismatch_mean``/``_max`` (trainer vs sampler), TIS statistics, and counts
    ``optimizer_steps``, ``micro_batches``, ``trained_tokens``, ``forward_tokens`` (token
    positions computed, padding included) and ``padding_tokens``. An empty ``sequences``
    takes no optimiser step (the learning-rate schedule still advances). Seconds spent in
    parts of the update: ``recompute_s`` (old log-probs of mini-batches 2..n), ``reference_s``
    (the reference model's forward passes, with ``kl_coef``) and ``optimizer_s`` (clipping and
    the optimiser steps); the trainer reports them under ``time/``.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    stats = _Stats()
    minibatches = split_minibatches(sequences, settings.updates_per_step, (settings.seed, step, 7)) \
        if sequences else []
    if settings.old_logprobs == "recompute" and len(minibatches) > 1:
        started = time.perf_counter()
        _recompute_old(model, minibatches, settings, device)
        stats.add("recompute_s", time.perf_counter() - started)
    params = trainable_parameters(model)
    model.train()
    for k in range(settings.updates_per_step):
        lr = schedule.apply(optimizer)
        if k >= len(minibatches):
            continue
        denominator = loss_denominator(settings.aggregation, minibatches[k], settings.max_episode_tokens)
        for micro in _micro_batches(minibatches[k], settings):
            _micro_step(model, micro, settings, denominator, first=(k == 0), reference=reference,
                        device=device, stats=stats)
        started = time.perf_counter()
        norm = _clip(params, settings.max_grad_norm)
        stats.mean("grad_norm", norm, 1.0)
        stats.high("grad_norm_max", norm)
        if math.isfinite(norm):
            optimizer.step()
        else:
            stats.add("skipped_nonfinite_steps", 1.0)
        optimizer.zero_grad(set_to_none=True)
        stats.add("optimizer_s", time.perf_counter() - started)
        stats.add("optimizer_steps", 1.0)
        stats.mean("lr", lr, 1.0)
    out = stats.result()
    out.setdefault("optimizer_steps", 0.0)
    out.setdefault("trained_tokens", 0.0)
    out.setdefault("lr", schedule.lr(max(schedule.step_count - 1, 0)))
    if minibatches:
        out["loss"] = out.get("loss", 0.0) / len(minibatches)
        out["policy_loss"] = out.get("policy_loss", 0.0) / len(minibatches)
    return out


def _clip(params: list[torch.nn.Parameter], max_norm: float | None) -> float:
    with_grad = [p for p in params if p.grad is not None]
    if not with_grad:
        return 0.0
    norm = torch.nn.utils.clip_grad_norm_(with_grad, max_norm if max_norm is not None else math.inf)
    return float(norm)


def _micro_step(model: Any, micro: MicroBatch, s: UpdateSettings, denominator: float, *, first: bool,
                reference, device: torch.device, stats: _Stats) -> None:
    """Forward, loss and backward of one micro-batch; diagnostics go into ``stats``."""
    batch = micro.to(device)
    with autocast(device, s.autocast_dtype):
        logp_flat, entropy = token_logprobs(model, batch, temperature=s.temperature, with_entropy=True)
    sampler_flat = micro.cat("sampler_logp").to(device)
    if first:
        old_flat = logp_flat.detach()
        diff = (old_flat - sampler_flat).abs()
        stats.mean("logprob_mismatch_mean", float(diff.mean()), diff.numel())
        stats.high("logprob_mismatch_max", float(diff.max()))
    elif s.old_logprobs == "sampler":
        old_flat = sampler_flat
    else:
        old_flat = micro.cat("old_logp").to(device)
    logp, mask = micro.rows(logp_flat)
    old, _ = micro.rows(old_flat)
    adv, _ = micro.rows(micro.cat("advantages").to(device))
    options: dict[str, Any] = dict(s.loss_kwargs)
    if s.tis_cap is not None and not (not first and s.old_logprobs == "sampler"):
        sampler, _ = micro.rows(sampler_flat)
        tis = truncated_importance_weights(old, sampler, mask, cap=s.tis_cap)
        options["is_weights"] = tis.weights
        n = micro.num_targets
        for key, value in tis.metrics.items():
            stats.mean(key, float(value), n)
    if reference is not None and s.kl_coef > 0:
        started = time.perf_counter()
        with autocast(device, s.autocast_dtype):
            ref_flat, _ = reference(lambda m: token_logprobs(m, batch, temperature=s.temperature))
        stats.add("reference_s", time.perf_counter() - started)
        options["ref_logp"], _ = micro.rows(ref_flat.float())
        options["kl_coef"] = s.kl_coef
    out = compute_loss(s.loss, logp, old, adv, mask, aggregation=s.aggregation, denominator=denominator, **options)
    out.loss.backward()
    n = micro.num_targets
    stats.add("loss", float(out.loss.detach()))
    for key, value in out.metrics.items():
        if key == "policy_loss":
            stats.add(key, float(value))
        elif key == "ratio_min":
            stats.low(key, float(value))
        elif key == "ratio_max":
            stats.high(key, float(value))
        else:
            stats.mean(key, float(value), n)
    stats.mean("entropy", float(entropy.mean()), n)
    stats.add("trained_tokens", n)
    stats.add("forward_tokens", micro.num_slots)
    stats.add("padding_tokens", micro.num_slots - micro.num_tokens)
    stats.add("micro_batches", 1.0)
