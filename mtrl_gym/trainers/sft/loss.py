"""The SFT objective: token cross-entropy over the assistant's own tokens.

:func:`sft_loss` takes the logits at the positions that predict a target (the tokens with
``loss_mask == 1``: what the assistant produced) and returns the summed negative
log-likelihood divided by a given denominator, so gradients accumulate exactly over
micro-batches when the denominator is the whole batch's target count. Prompt, format
prefill and environment tokens are never targets.

Targets given :class:`AllowedTokens` (distillation of a constrained policy) are scored by
``-log P(allowed)`` instead: the mass the model puts on every token the constraint allows
there. That is the KL divergence from the constrained policy (the model masked to the allowed
tokens and renormalised) to the model, and its gradient on the logits is ``p - q``, with ``q``
that masked, renormalised distribution: mass moves from the disallowed tokens to the allowed
ones in proportion to what the model already gives each.

>>> import torch
>>> logits = torch.tensor([[2.0, 0.0], [0.0, 2.0]])
>>> out = sft_loss(logits, torch.tensor([0, 0]), denominator=2)
>>> round(float(out.loss), 4), out.correct
(1.1269, 1)
>>> both = AllowedTokens(target=torch.tensor([1, 1]), token=torch.tensor([0, 1]))  # any token allowed
>>> out = sft_loss(logits, torch.tensor([0, 0]), denominator=2, allowed=both)
>>> round(float(out.loss), 4), out.distill_count
(0.0635, 1)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

__all__ = ["sft_loss", "SFTLossOutput", "AllowedTokens"]


class AllowedTokens(NamedTuple):
    """Which targets are distilled, and the tokens allowed at each: pairs ``(target[i], token[i])``."""

    target: torch.Tensor
    """``[M]`` int64: a target's row in the logits (repeated once per allowed token)."""
    token: torch.Tensor
    """``[M]`` int64: a token id the constraint allows at that target."""


class SFTLossOutput(NamedTuple):
    loss: torch.Tensor
    """Scalar: ``sum(-log p(target)) / denominator`` (differentiable)."""
    nll_sum: float
    """Summed negative log-likelihood of the targets (detached)."""
    correct: int
    """Targets that are the argmax of their logits (token accuracy numerator)."""
    count: int
    """Targets."""
    distill_nll: float = 0.0
    """Summed ``-log P(allowed)`` of the distilled targets (detached; part of ``nll_sum``)."""
    distill_count: int = 0
    """Distilled targets (part of ``count``)."""


def sft_loss(logits: torch.Tensor, targets: torch.Tensor, *, denominator: float | None = None,
             allowed: AllowedTokens | None = None) -> SFTLossOutput:
    """Cross-entropy of ``targets`` (``[N]``) under ``logits`` (``[N, vocab]``, float32), and
    ``-log P(allowed)`` at the targets ``allowed`` names (a target counts as correct there when
    the model's top token is allowed).

    ``denominator`` defaults to ``N`` (the mean over targets).
    """
    if logits.shape[:1] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} disagree")
    z = logits.float()
    lse = torch.logsumexp(z, dim=-1)
    nll = lse - z.gather(-1, targets[:, None]).squeeze(-1)
    hit = z.detach().argmax(-1) == targets
    distill_nll, distill_count = 0.0, 0
    if allowed is not None and allowed.target.numel():
        rows, slot = torch.unique(allowed.target, return_inverse=True)
        values = z[allowed.target, allowed.token]
        top = torch.full((len(rows),), -math.inf, device=z.device).scatter_reduce(0, slot, values.detach(), "amax")
        mass = torch.zeros(len(rows), device=z.device).index_add(0, slot, (values - top[slot]).exp())
        distilled = lse[rows] - (mass.log() + top)  # -log P(allowed), one per distilled target
        nll = nll.index_put((rows,), distilled)
        top_allowed = (z.detach().argmax(-1)[allowed.target] == allowed.token).long()
        in_set = torch.zeros(len(rows), dtype=torch.long, device=z.device).index_add(0, slot, top_allowed) > 0
        hit = hit.index_put((rows,), in_set)
        distill_nll, distill_count = float(distilled.detach().sum()), int(len(rows))
    total = nll.sum()
    denom = float(denominator) if denominator is not None else float(max(targets.numel(), 1))
    return SFTLossOutput(total / denom, float(total.detach()), int(hit.sum()), int(targets.numel()),
                         distill_nll, distill_count)
