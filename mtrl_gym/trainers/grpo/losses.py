"""Policy-gradient losses of the GRPO trainer: log-probs and advantages in, a scalar out.

Every loss is a pure function ``loss(logp, old_logp, advantages, mask, **options)``
returning a :class:`LossOutput`: the differentiable scalar and a dict of detached
diagnostics (clip fractions, ratio statistics, KL) for the trainer to log. Losses are
selected by name from :data:`LOSSES`, reductions from :data:`AGGREGATIONS`
(:func:`get_loss`, :func:`get_aggregation`, :func:`compute_loss`).

Shapes. ``B`` rows (sequences), ``S`` token positions:

* ``logp`` ``[B, S]``: log-probs of the taken tokens under the current policy (requires
  grad; the only tensor gradients flow through).
* ``old_logp`` ``[B, S]``: the same under the policy that produced the batch, recomputed by
  the trainer before the first update of the step. Detached.
* ``advantages`` ``[B]`` (one per sequence) or ``[B, S]`` (per token, e.g. per-turn
  advantages through :func:`~mtrl_gym.trainers.grpo.advantages.turn_advantages_to_tokens`).
  Detached.
* ``mask`` ``[B, S]``: 1 on trainable (sampled) tokens, 0 on prompt, environment turns and
  padding. Values of the other tensors at masked positions are ignored, even NaN or -inf.

Shared options of every loss: ``aggregation`` (name in :data:`AGGREGATIONS`), ``max_tokens``
and ``denominator`` (passed to the aggregation), ``ref_logp`` and ``kl_coef`` (a KL penalty
to the base model with the k3 estimator, see :func:`kl_k3`), and ``is_weights`` (per-token
truncated importance-sampling weights from :func:`truncated_importance_weights`, multiplied
onto the policy term).

Numerics. Log-ratios are clamped to ``[-20, 20]`` before ``exp`` so one runaway token cannot
overflow to ``inf``; a batch with no trainable token gives loss 0 (still differentiable,
with zero gradient) and diagnostics 0, never NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.grpo.selection import check_options, lookup_by_name

__all__ = [
    "LossOutput",
    "TISWeights",
    "ppo_loss",
    "cispo_loss",
    "importance_sampling_loss",
    "gspo_loss",
    "token_mean",
    "seq_mean_token_mean",
    "token_sum_norm",
    "masked_mean",
    "kl_k3",
    "truncated_importance_weights",
    "LOSSES",
    "AGGREGATIONS",
    "get_loss",
    "get_aggregation",
    "compute_loss",
]

_LOG_RATIO_CLAMP = 20.0


class LossOutput(NamedTuple):
    """What a loss returns."""

    loss: torch.Tensor
    """0-d tensor to call ``.backward()`` on."""
    metrics: dict[str, torch.Tensor]
    """Detached 0-d tensors (no GPU sync until the trainer calls ``.item()``). Every loss
    reports ``policy_loss`` (the aggregated policy term, without KL), ``clip_frac_low``,
    ``clip_frac_high`` (fractions of trainable tokens), ``ratio_mean``, ``ratio_min``,
    ``ratio_max`` (the ratio the loss clips: per token, or per sequence for GSPO) and
    ``approx_kl_old`` (k3 estimate of KL(old || current)). Also ``kl_ref`` when ``ref_logp``
    is given, ``is_weight_mean`` when ``is_weights`` is, and ``dual_clip_frac`` for PPO with
    ``dual_clip``."""


class TISWeights(NamedTuple):
    """What :func:`truncated_importance_weights` returns."""

    weights: torch.Tensor
    """``[B, S]`` detached weights, 1 where ``mask == 0``."""
    metrics: dict[str, torch.Tensor]
    """``tis_weight_mean``, ``tis_clip_frac`` (tokens at the cap) and ``sampler_kl`` (k3
    estimate of KL(sampler || old policy), the size of the sampler/trainer mismatch)."""


# --------------------------------------------------------------------------- helpers

def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over positions where ``mask`` is 1; 0 when the mask is empty.

    ``x`` and ``mask`` broadcast to the same shape; masked-out values are never read
    (``torch.where``, so NaN there does not leak).
    """
    m = mask.to(torch.bool)
    total = torch.where(m, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum()
    return total / m.sum().clamp(min=1)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref) from tokens sampled from ``pi``.

    ``k3 = exp(d) - d - 1`` with ``d = ref_logp - logp`` (Schulman, "Approximating KL
    divergence"). It is unbiased, and ``>= 0`` everywhere because ``exp(d) >= 1 + d``, with
    equality exactly when ``d == 0``. ``d`` is clamped to ``[-20, 20]``. Same shape as the
    inputs; gradients flow through both arguments, so detach the reference yourself (the
    losses do).
    """
    d = (ref_logp - logp).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    return torch.expm1(d) - d


def truncated_importance_weights(old_logp: torch.Tensor, sampler_logp: torch.Tensor,
                                 mask: torch.Tensor, *, cap: float = 2.0) -> TISWeights:
    """Truncated importance sampling (TIS) for a sampler whose log-probs differ from the
    trainer's (vLLM kernels, lower precision, a stale policy).

    Tokens were drawn from the sampler's distribution ``q`` but the loss treats them as
    drawn from the old policy ``pi_old`` recomputed by the trainer. Weighting each token by
    ``pi_old / q = exp(old_logp - sampler_logp)`` corrects this; truncating the weight at
    ``cap`` bounds its variance at the price of a small bias (Yao et al. 2025, "Your
    efficient RL framework secretly brings you off-policy RL training"). The weight is a
    constant of the loss: it is detached. Pass it to a loss as ``is_weights``.

    Args:
        old_logp: ``[B, S]`` log-probs recomputed by the trainer.
        sampler_logp: ``[B, S]`` log-probs reported by the sampler (``Trajectory.logprobs``).
        mask: ``[B, S]`` trainable-token mask.
        cap: upper bound of the weight, ``>= 1``.

    Returns:
        :class:`TISWeights` with ``weights = min(exp(old_logp - sampler_logp), cap)``,
        ``[B, S]``, and 1 where ``mask == 0``.
    """
    if not cap >= 1.0:
        raise ConfigError(f"`cap` must be >= 1 (a weight cap below 1 shrinks every "
                          f"token's gradient), got {cap!r}")
    _check_same_shape(mask, old_logp=old_logp, sampler_logp=sampler_logp)
    m = mask.to(torch.bool)
    with torch.no_grad():
        d = torch.where(m, old_logp - sampler_logp, 0.0).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
        weights = d.exp().clamp(max=cap)
        metrics = {"tis_weight_mean": masked_mean(weights, m),
                   "tis_clip_frac": masked_mean((weights >= cap).to(weights.dtype), m),
                   "sampler_kl": masked_mean(torch.expm1(d) - d, m)}
    return TISWeights(weights, metrics)


def _check_same_shape(mask: torch.Tensor, **tensors: torch.Tensor | None) -> None:
    if mask.dim() != 2:
        raise ValueError(f"`mask` must have shape [batch, seq], got {tuple(mask.shape)}")
    for name, t in tensors.items():
        if t is not None and t.shape != mask.shape:
            raise ValueError(f"`{name}` has shape {tuple(t.shape)} but `mask` has "
                             f"{tuple(mask.shape)}; both must be [batch, seq]")


def _token_advantages(advantages: torch.Tensor, mask: torch.Tensor,
                      dtype: torch.dtype) -> torch.Tensor:
    """``[B]`` or ``[B, S]`` advantages as a detached ``[B, S]``-broadcastable tensor."""
    a = advantages.detach().to(dtype)
    if a.dim() == 1 and a.shape[0] == mask.shape[0]:
        return a[:, None]
    if a.shape == mask.shape:  # zero off the mask so NaN padding cannot reach a gradient
        return torch.where(mask.to(torch.bool), a, 0.0)
    raise ValueError(f"`advantages` must have shape [batch]={mask.shape[0]} or "
                     f"[batch, seq]={tuple(mask.shape)}, got {tuple(a.shape)}")


def _check_bounds(ratio_low: float, ratio_high: float) -> None:
    if not (0.0 <= ratio_low <= 1.0 <= ratio_high):
        raise ConfigError(f"ratio bounds must satisfy 0 <= ratio_low <= 1 <= ratio_high, got "
                          f"ratio_low={ratio_low!r}, ratio_high={ratio_high!r}")


def _log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """``logp - old_logp`` on trainable tokens, 0 elsewhere, clamped to ``[-20, 20]``."""
    d = torch.where(m, logp - old_logp.detach(), 0.0)
    return d.clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)


# --------------------------------------------------------------------------- aggregations

def token_mean(per_token: torch.Tensor, mask: torch.Tensor, *, max_tokens: int | None = None,
               denominator: float | None = None) -> torch.Tensor:
    """Mean over every trainable token of the batch (DAPO): long sequences weigh more.

    ``sum(mask * x) / denominator`` with ``denominator = sum(mask)`` by default. When the
    batch is split into micro-batches whose gradients are accumulated, pass the token count
    of the whole batch as ``denominator`` so the sum of micro-batch losses equals the loss
    of the batch. ``max_tokens`` is unused (uniform signature). 0 for an empty mask.
    """
    m = mask.to(torch.bool)
    total = torch.where(m, per_token, 0.0).sum()
    return total / _denominator(denominator, m.sum().clamp(min=1))


def seq_mean_token_mean(per_token: torch.Tensor, mask: torch.Tensor, *,
                        max_tokens: int | None = None,
                        denominator: float | None = None) -> torch.Tensor:
    """Mean over sequences of each sequence's token mean (original GRPO): every sequence
    weighs the same, so each token of a long sequence weighs less.

    Sequences without trainable tokens are left out (they have no mean).
    ``denominator`` defaults to the number of sequences with at least one trainable token;
    pass the whole-batch count when accumulating micro-batches. 0 for an empty mask.
    """
    m = mask.to(torch.bool)
    count = m.sum(dim=1)
    per_seq = torch.where(m, per_token, 0.0).sum(dim=1) / count.clamp(min=1)
    return per_seq.sum() / _denominator(denominator, (count > 0).sum().clamp(min=1))


def token_sum_norm(per_token: torch.Tensor, mask: torch.Tensor, *,
                   max_tokens: int | None = None,
                   denominator: float | None = None) -> torch.Tensor:
    """Token sum divided by a constant (Dr. GRPO, Liu et al. 2025): no length bias.

    ``sum(mask * x) / (B * max_tokens)``. Dividing by the same constant whatever the
    sequence lengths means no token is up- or down-weighted for the length of its
    sequence (a per-sequence ``1/|y|`` favours short correct and long wrong answers).
    ``max_tokens`` is that constant, e.g. the generation budget per episode; it is
    required unless ``denominator`` (the whole divisor) is given.
    """
    if denominator is None:
        if max_tokens is None or max_tokens < 1:
            raise ConfigError("aggregation 'token_sum_norm' needs `max_tokens` >= 1 (the "
                              "constant Dr. GRPO divides by, e.g. the token budget per "
                              f"episode), got {max_tokens!r}")
        denominator = per_token.shape[0] * max_tokens
    m = mask.to(torch.bool)
    return torch.where(m, per_token, 0.0).sum() / _denominator(denominator, None)


def _denominator(given: float | None, default: torch.Tensor | None) -> torch.Tensor | float:
    if given is None:
        return default
    if not (given > 0 and math.isfinite(given)):
        raise ConfigError(f"`denominator` must be a finite number > 0, got {given!r}")
    return given


#: name -> aggregation ``fn(per_token [B, S], mask [B, S], *, max_tokens, denominator)``.
AGGREGATIONS: dict[str, Callable[..., torch.Tensor]] = {
    "token_mean": token_mean,
    "seq_mean_token_mean": seq_mean_token_mean,
    "token_sum_norm": token_sum_norm,
}


def get_aggregation(name: str) -> Callable[..., torch.Tensor]:
    """The aggregation called ``name`` in :data:`AGGREGATIONS` (ConfigError if unknown)."""
    return lookup_by_name(AGGREGATIONS, name, "aggregation")


# --------------------------------------------------------------------------- common tail

def _finish(per_token: torch.Tensor, logp: torch.Tensor, log_ratio: torch.Tensor,
            m: torch.Tensor, clip_low: torch.Tensor, clip_high: torch.Tensor, *,
            aggregation: str, max_tokens: int | None, denominator: float | None,
            ref_logp: torch.Tensor | None, kl_coef: float,
            is_weights: torch.Tensor | None, clipped_ratio_log: torch.Tensor | None = None,
            ) -> LossOutput:
    """Apply IS weights and the KL term, aggregate, and gather the diagnostics.

    ``clipped_ratio_log`` is the log of the ratio the loss clips (defaults to
    ``log_ratio``; GSPO passes its sequence ratio broadcast onto the tokens).
    """
    agg = get_aggregation(aggregation)
    if not (kl_coef >= 0 and math.isfinite(kl_coef)):
        raise ConfigError(f"`kl_coef` must be a finite number >= 0, got {kl_coef!r}")
    if kl_coef > 0 and ref_logp is None:
        raise ConfigError(f"`kl_coef` is {kl_coef} but no `ref_logp` was given: compute the "
                          "base model's log-probs (adapter disabled) or set kl_coef=0")
    _check_same_shape(m, ref_logp=ref_logp, is_weights=is_weights)
    metrics: dict[str, torch.Tensor] = {}
    if is_weights is not None:
        is_w = is_weights.detach().to(per_token.dtype)
        per_token = per_token * torch.where(m, is_w, 0.0)
        metrics["is_weight_mean"] = masked_mean(is_w, m)
    total = per_token
    if ref_logp is not None:
        # both log-probs are zeroed off the mask, so the KL is exactly 0 there
        kl = kl_k3(torch.where(m, logp, 0.0), torch.where(m, ref_logp.detach(), 0.0))
        metrics["kl_ref"] = masked_mean(kl.detach(), m)
        if kl_coef > 0:
            total = per_token + kl_coef * kl
    kw = {"max_tokens": max_tokens, "denominator": denominator}
    loss = agg(total, m, **kw)
    with torch.no_grad():
        ratio = (log_ratio if clipped_ratio_log is None else clipped_ratio_log).detach().exp()
        any_token = m.any()  # a tensor: no host sync
        metrics.update(
            policy_loss=agg(per_token.detach(), m, **kw),
            clip_frac_low=masked_mean(clip_low.to(per_token.dtype), m),
            clip_frac_high=masked_mean(clip_high.to(per_token.dtype), m),
            ratio_mean=masked_mean(ratio, m),
            ratio_min=torch.where(any_token, torch.where(m, ratio, math.inf).amin(), 1.0),
            ratio_max=torch.where(any_token, torch.where(m, ratio, -math.inf).amax(), 1.0),
            # samples come from the old policy: KL(old || new) ~ E_old[k3] with d = logp - old
            approx_kl_old=masked_mean(torch.expm1(log_ratio.detach()) - log_ratio.detach(), m),
        )
    return LossOutput(loss, metrics)


# --------------------------------------------------------------------------- losses

def ppo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
             mask: torch.Tensor, *, ratio_low: float = 0.8, ratio_high: float = 1.2,
             dual_clip: float | None = None, aggregation: str = "token_mean",
             max_tokens: int | None = None, denominator: float | None = None,
             ref_logp: torch.Tensor | None = None, kl_coef: float = 0.0,
             is_weights: torch.Tensor | None = None) -> LossOutput:
    """PPO clipped surrogate per token, as in GRPO (Shao et al. 2024).

    With ``r = exp(logp - old_logp)`` and advantage ``A``:
    ``L = max(-r * A, -clip(r, ratio_low, ratio_high) * A)``. The clip removes the gradient
    of a token once the update already moved it far enough in the advantage's direction:
    ``r < ratio_low`` with ``A < 0`` (counted in ``clip_frac_low``) or ``r > ratio_high``
    with ``A > 0`` (``clip_frac_high``). Separate bounds allow DAPO's clip-higher
    (e.g. ``ratio_high=1.28``).

    ``dual_clip`` (Ye et al. 2020, ``c > 1``, e.g. 3): for ``A < 0`` the unclipped term
    ``-r * A`` grows without bound as ``r`` grows; dual clip caps the loss at ``-c * A``
    (tokens where the cap bites are counted in ``dual_clip_frac``).

    Shapes and shared options: see the module docstring. Returns :class:`LossOutput`.
    """
    _check_bounds(ratio_low, ratio_high)
    if dual_clip is not None and not dual_clip > 1.0:
        raise ConfigError(f"`dual_clip` must be > 1 (or None to disable), got {dual_clip!r}")
    _check_same_shape(mask, logp=logp, old_logp=old_logp)
    m = mask.to(torch.bool)
    adv = _token_advantages(advantages, mask, logp.dtype)
    log_ratio = _log_ratio(logp, old_logp, m)
    ratio = log_ratio.exp()
    per_token = torch.maximum(-adv * ratio, -adv * ratio.clamp(ratio_low, ratio_high))
    dual = torch.zeros_like(m)
    if dual_clip is not None:
        cap = -adv * dual_clip  # positive where adv < 0
        dual = (adv < 0) & (per_token > cap) & m
        per_token = torch.where(adv < 0, torch.minimum(per_token, cap), per_token)
    out = _finish(per_token, logp, log_ratio, m,
                  (ratio < ratio_low) & (adv < 0) & m, (ratio > ratio_high) & (adv > 0) & m,
                  aggregation=aggregation, max_tokens=max_tokens, denominator=denominator,
                  ref_logp=ref_logp, kl_coef=kl_coef, is_weights=is_weights)
    if dual_clip is not None:
        out.metrics["dual_clip_frac"] = masked_mean(dual.to(logp.dtype), m)
    return out


def cispo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
               mask: torch.Tensor, *, ratio_low: float = 0.0, ratio_high: float = 5.0,
               aggregation: str = "token_mean", max_tokens: int | None = None,
               denominator: float | None = None, ref_logp: torch.Tensor | None = None,
               kl_coef: float = 0.0, is_weights: torch.Tensor | None = None) -> LossOutput:
    """CISPO (MiniMax-M1, Chen et al. 2025): clip the importance weight, not the update.

    ``L = -sg(clip(r, ratio_low, ratio_high)) * A * logp`` where ``sg`` stops the gradient.
    The gradient ``-clip(r) * A * grad logp`` equals PPO's ``-A * grad r`` while ``r`` is
    inside the bounds, but a token outside them keeps a (bounded) gradient instead of
    losing it, so rare high-information tokens are never dropped. The default has no lower
    bound (``ratio_low=0``, as in the paper) and a wide upper bound. ``clip_frac_low`` /
    ``clip_frac_high`` count tokens whose weight was truncated, whatever the sign of ``A``.
    The loss *value* depends on ``logp`` itself and is not comparable with PPO's; its
    gradient is what matters.

    Shapes and shared options: see the module docstring. Returns :class:`LossOutput`.
    """
    _check_bounds(ratio_low, ratio_high)
    _check_same_shape(mask, logp=logp, old_logp=old_logp)
    m = mask.to(torch.bool)
    adv = _token_advantages(advantages, mask, logp.dtype)
    log_ratio = _log_ratio(logp, old_logp, m)
    ratio = log_ratio.detach().exp()
    weight = ratio.clamp(ratio_low, ratio_high)  # detached: built from log_ratio.detach()
    per_token = -weight * adv * torch.where(m, logp, 0.0)
    return _finish(per_token, logp, log_ratio, m, (ratio < ratio_low) & m,
                   (ratio > ratio_high) & m, aggregation=aggregation, max_tokens=max_tokens,
                   denominator=denominator, ref_logp=ref_logp, kl_coef=kl_coef,
                   is_weights=is_weights)


def importance_sampling_loss(logp: torch.Tensor, old_logp: torch.Tensor,
                             advantages: torch.Tensor, mask: torch.Tensor, *,
                             aggregation: str = "token_mean", max_tokens: int | None = None,
                             denominator: float | None = None,
                             ref_logp: torch.Tensor | None = None, kl_coef: float = 0.0,
                             is_weights: torch.Tensor | None = None) -> LossOutput:
    """Plain importance-sampled policy gradient: ``L = -r * A``, no clipping.

    Its gradient ``-A * r * grad logp`` is the unbiased off-policy REINFORCE gradient; with
    a single update per batch (``r == 1``) it is the on-policy one. Nothing bounds ``r``, so
    use it on-policy or with few updates per batch. Clip fractions are always 0.

    Shapes and shared options: see the module docstring. Returns :class:`LossOutput`.
    """
    _check_same_shape(mask, logp=logp, old_logp=old_logp)
    m = mask.to(torch.bool)
    adv = _token_advantages(advantages, mask, logp.dtype)
    log_ratio = _log_ratio(logp, old_logp, m)
    per_token = -adv * log_ratio.exp()
    never = torch.zeros_like(m)
    return _finish(per_token, logp, log_ratio, m, never, never, aggregation=aggregation,
                   max_tokens=max_tokens, denominator=denominator, ref_logp=ref_logp,
                   kl_coef=kl_coef, is_weights=is_weights)


def gspo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, *, ratio_low: float = 1.0 - 3e-4,
              ratio_high: float = 1.0 + 4e-4, aggregation: str = "token_mean",
              max_tokens: int | None = None, denominator: float | None = None,
              ref_logp: torch.Tensor | None = None, kl_coef: float = 0.0,
              is_weights: torch.Tensor | None = None) -> LossOutput:
    """GSPO (Zheng et al. 2025): clip a sequence-level ratio instead of token ratios.

    The sequence ratio is the geometric mean of the token ratios over the sequence's
    trainable tokens, ``s_i = exp(mean_t(logp - old_logp))``, so it does not grow with
    length; it is clipped PPO-style with much tighter bounds (defaults from the paper,
    ``1 - 3e-4`` and ``1 + 4e-4``), and a whole sequence is clipped or not.

    Implemented in the paper's GSPO-token form, which also accepts per-token advantages:
    token ``t`` uses ``s_it = sg(s_i) * exp(logp_t - sg(logp_t))`` (value ``s_i``, gradient
    ``s_i * grad logp_t``) in ``max(-s_it * A_it, -clip(s_it) * A_it)``. With one advantage
    per sequence and ``aggregation="seq_mean_token_mean"`` the gradient equals GSPO's
    exactly (``grad s_i = s_i * mean_t grad logp_t``); ``token_mean`` weights sequences by
    their length. Ratio statistics are those of ``s_i`` over trainable tokens; a sequence
    without trainable tokens has ``s_i = 1``.

    Shapes and shared options: see the module docstring. Returns :class:`LossOutput`.
    """
    _check_bounds(ratio_low, ratio_high)
    _check_same_shape(mask, logp=logp, old_logp=old_logp)
    m = mask.to(torch.bool)
    adv = _token_advantages(advantages, mask, logp.dtype)
    log_ratio = _log_ratio(logp, old_logp, m)
    seq_log_ratio = log_ratio.sum(dim=1) / m.sum(dim=1).clamp(min=1)        # [B]
    seq_log_ratio = seq_log_ratio.detach()[:, None].expand_as(log_ratio)    # [B, S]
    logp_m = torch.where(m, logp, 0.0)
    ratio = (seq_log_ratio + logp_m - logp_m.detach()).exp()               # value s_i
    per_token = torch.maximum(-adv * ratio, -adv * ratio.clamp(ratio_low, ratio_high))
    seq_ratio = seq_log_ratio.exp()
    return _finish(per_token, logp, log_ratio, m,
                   (seq_ratio < ratio_low) & (adv < 0) & m,
                   (seq_ratio > ratio_high) & (adv > 0) & m,
                   aggregation=aggregation, max_tokens=max_tokens, denominator=denominator,
                   ref_logp=ref_logp, kl_coef=kl_coef, is_weights=is_weights,
                   clipped_ratio_log=seq_log_ratio)


# --------------------------------------------------------------------------- selection

#: name -> loss ``fn(logp, old_logp, advantages, mask, **options) -> LossOutput``.
LOSSES: dict[str, Callable[..., LossOutput]] = {
    "ppo": ppo_loss,
    "cispo": cispo_loss,
    "importance_sampling": importance_sampling_loss,
    "gspo": gspo_loss,
}


def get_loss(name: str) -> Callable[..., LossOutput]:
    """The loss called ``name`` in :data:`LOSSES`.

    Raises:
        ConfigError: unknown name; the message suggests close matches and lists all names.
    """
    return lookup_by_name(LOSSES, name, "loss")


def compute_loss(name: str, logp: torch.Tensor, old_logp: torch.Tensor,
                 advantages: torch.Tensor, mask: torch.Tensor, **options: Any) -> LossOutput:
    """Run the loss ``name`` with keyword ``options`` (checked: an unknown option, such as
    ``dual_clip`` for ``cispo``, raises ConfigError listing the accepted ones)."""
    fn = get_loss(name)
    check_options(fn, options, f"loss {name!r}")
    return fn(logp, old_logp, advantages, mask, **options)
