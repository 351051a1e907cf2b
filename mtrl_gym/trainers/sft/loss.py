"""The SFT objective: token cross-entropy over the assistant's own tokens.

:func:`sft_loss` takes the logits at the positions that predict a target (the tokens with
``loss_mask == 1``: what the assistant produced) and returns the summed negative
log-likelihood divided by a given denominator, so gradients accumulate exactly over
micro-batches when the denominator is the whole batch's target count. Prompt, format
prefill and environment tokens are never targets.

>>> import torch
>>> logits = torch.tensor([[2.0, 0.0], [0.0, 2.0]])
>>> out = sft_loss(logits, torch.tensor([0, 0]), denominator=2)
>>> round(float(out.loss), 4), out.correct
(1.1269, 1)
"""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["sft_loss", "SFTLossOutput"]


class SFTLossOutput(NamedTuple):
    loss: torch.Tensor
    """Scalar: ``sum(-log p(target)) / denominator`` (differentiable)."""
    nll_sum: float
    """Summed negative log-likelihood of the targets (detached)."""
    correct: int
    """Targets that are the argmax of their logits (token accuracy numerator)."""
    count: int
    """Targets."""


def sft_loss(logits: torch.Tensor, targets: torch.Tensor, *, denominator: float | None = None) -> SFTLossOutput:
    """Cross-entropy of ``targets`` (``[N]``) under ``logits`` (``[N, vocab]``, float32).

    ``denominator`` defaults to ``N`` (the mean over targets).
    """
    if logits.shape[:1] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} disagree")
    z = logits.float()
    nll = torch.logsumexp(z, dim=-1) - z.gather(-1, targets[:, None]).squeeze(-1)
    total = nll.sum()
    denom = float(denominator) if denominator is not None else float(max(targets.numel(), 1))
    correct = int((z.detach().argmax(-1) == targets).sum())
    return SFTLossOutput(total / denom, float(total.detach()), correct, int(targets.numel()))
