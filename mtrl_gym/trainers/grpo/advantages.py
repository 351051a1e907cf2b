"""Advantage estimators for group-relative policy optimisation: rewards in, advantages out.

Every estimator is a pure function of a reward tensor and ``group_size`` that returns an
:class:`Advantages` record: the advantage values plus how many groups carried no learning
signal (all rewards equal), which the trainer logs. Estimators are selected by name from
:data:`ADVANTAGE_ESTIMATORS` (:func:`get_advantage_estimator`, :func:`compute_advantages`).

Layout. A batch holds ``num_groups * group_size`` rollouts and the rollouts of one group
(one task) are **contiguous**: rows ``g * group_size ... (g + 1) * group_size - 1`` form
group ``g``. Every group is full: a failed rollout still has a trajectory and a reward
(docs/architecture.md), so there is no ragged case.

Conventions shared by all estimators.

* Arithmetic is done in float64 and the result has the dtype of the rewards (the default
  float dtype for integer rewards) on the rewards' device.
* A *zero-variance group* (every reward equal, or ``group_size == 1``) gets advantage
  exactly 0 on every rollout, never ``0 / eps`` noise: a group mean of identical floats is
  not always bit-identical to them (``(0.1 + 0.1 + 0.1) / 3 != 0.1``), so these groups are
  detected with ``max == min`` and zeroed explicitly. They are counted in
  :attr:`Advantages.zero_variance_groups`.
* Non-finite rewards raise ``ValueError``: a NaN would silently poison the whole batch.

>>> import torch
>>> adv = group_based(torch.tensor([1.0, 0.0, 1.0, 1.0]), group_size=2)
>>> [round(v, 4) for v in adv.values.tolist()], adv.zero_variance_groups
([0.7071, -0.7071, 0.0, 0.0], 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.grpo.selection import check_options, lookup_by_name

__all__ = [
    "Advantages",
    "group_based",
    "group_based_per_turn",
    "rloo",
    "grpo_passk",
    "ADVANTAGE_ESTIMATORS",
    "PER_TURN_ESTIMATORS",
    "get_advantage_estimator",
    "compute_advantages",
    "pad_turn_rewards",
    "turn_advantages_to_tokens",
]


class Advantages(NamedTuple):
    """What an advantage estimator returns."""

    values: torch.Tensor
    """``[batch]`` for sequence-level estimators, ``[batch, max_turns]`` for per-turn ones
    (0 on padded turns); turn per-turn values into per-token ones with
    :func:`turn_advantages_to_tokens`."""
    zero_variance_groups: int
    """Groups whose advantages are all zero because the group carries no signal: every
    reward equal (for ``grpo_passk``: every k-subset scores the same), or ``group_size == 1``."""
    num_groups: int
    """Number of groups in the batch (``batch // group_size``)."""

    @property
    def per_turn(self) -> bool:
        """Whether :attr:`values` holds one advantage per turn (``[batch, max_turns]``)."""
        return self.values.dim() == 2

    def metrics(self) -> dict[str, float]:
        """Numbers to log: ``zero_variance_groups`` and ``zero_variance_frac``."""
        frac = self.zero_variance_groups / self.num_groups if self.num_groups else 0.0
        return {"zero_variance_groups": float(self.zero_variance_groups),
                "zero_variance_frac": frac}


# --------------------------------------------------------------------------- validation

def _check_group_size(group_size: int) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ConfigError(f"`group_size` must be an int >= 1, got {group_size!r}")


def _check_eps(eps: float) -> None:
    if not (eps >= 0 and math.isfinite(eps)):
        raise ConfigError(f"`eps` must be a finite number >= 0, got {eps!r}")


def _out_dtype(rewards: torch.Tensor) -> torch.dtype:
    return rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()


def _grouped(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Validate ``[batch]`` rewards and return them as float64 ``[num_groups, group_size]``."""
    _check_group_size(group_size)
    if rewards.dim() != 1:
        raise ValueError(f"`rewards` must have shape [batch], got {tuple(rewards.shape)}")
    n = rewards.shape[0]
    if n % group_size:
        raise ValueError(f"a batch of {n} rewards is not a whole number of groups of "
                         f"group_size={group_size}; every group must be full and contiguous")
    r = rewards.detach().to(torch.float64)
    bad = (~torch.isfinite(r)).nonzero().flatten().tolist()
    if bad:
        raise ValueError(f"rewards must be finite; non-finite values at rows {bad[:10]}")
    return r.reshape(-1, group_size)


def _result(values: torch.Tensor, zero: torch.Tensor, like: torch.Tensor) -> Advantages:
    """Pack float64 values (already zeroed on ``zero`` groups) in the caller's dtype/device."""
    return Advantages(values.to(dtype=_out_dtype(like), device=like.device),
                      int(zero.sum().item()), int(zero.numel()))


# --------------------------------------------------------------------------- estimators

def group_based(rewards: torch.Tensor, group_size: int, *, normalize_std: bool = True,
                eps: float = 1e-6) -> Advantages:
    """GRPO advantages: reward minus group mean, divided by the group's standard deviation.

    ``A_i = (r_i - mean_g) / (std_g + eps)`` where ``std_g`` is the sample (Bessel-corrected,
    ``n - 1``) standard deviation, as in TRL and verl. With ``normalize_std=False`` the
    division is skipped (Dr. GRPO, Liu et al. 2025): std normalisation up-weights groups
    whose rewards barely differ (too easy or too hard tasks), a difficulty bias.

    Args:
        rewards: ``[batch]`` episode rewards, groups contiguous.
        group_size: rollouts per group (``batch % group_size == 0``).
        normalize_std: divide by the group std (GRPO) or not (Dr. GRPO).
        eps: added to the std before dividing. Zero-variance groups never reach the
            division, so ``eps`` only matters for tiny non-zero spreads.

    Returns:
        :class:`Advantages` with ``values`` of shape ``[batch]``; each group sums to 0.
    """
    _check_eps(eps)
    r = _grouped(rewards, group_size)
    if r.numel() == 0:
        return _result(r.flatten(), torch.zeros(0, dtype=torch.bool), rewards)
    zero = r.amax(dim=1) == r.amin(dim=1)  # [num_groups]; always true when group_size == 1
    if group_size == 1:  # no baseline exists; avoid the n - 1 = 0 std (NaN + warning)
        return _result(torch.zeros_like(r).flatten(), zero, rewards)
    values = r - r.mean(dim=1, keepdim=True)
    if normalize_std:
        values = values / (r.std(dim=1, keepdim=True) + eps)
    values = values.masked_fill(zero[:, None], 0.0)
    return _result(values.flatten(), zero, rewards)


def rloo(rewards: torch.Tensor, group_size: int) -> Advantages:
    """REINFORCE leave-one-out: each reward minus the mean of the *other* rewards of its group.

    ``A_i = r_i - (sum_g - r_i) / (n - 1) = n / (n - 1) * (r_i - mean_g)``. The baseline does
    not depend on sample ``i``, so the policy-gradient estimate stays unbiased (Kool et al.
    2019; Ahmadian et al. 2024). No std normalisation. With ``group_size == 1`` there is no
    other sample to form a baseline: advantages are 0 and the group is counted.

    Args:
        rewards: ``[batch]`` episode rewards, groups contiguous.
        group_size: rollouts per group.

    Returns:
        :class:`Advantages` with ``values`` of shape ``[batch]``; each group sums to 0.
    """
    r = _grouped(rewards, group_size)
    zero = r.amax(dim=1) == r.amin(dim=1)
    if group_size == 1:
        return _result(torch.zeros_like(r).flatten(), zero, rewards)
    others_mean = (r.sum(dim=1, keepdim=True) - r) / (group_size - 1)
    values = (r - others_mean).masked_fill(zero[:, None], 0.0)
    return _result(values.flatten(), zero, rewards)


def _all_fail_probability(failures: torch.Tensor, pool: int, draws: int) -> torch.Tensor:
    """``C(failures, draws) / C(pool, draws)``: chance that ``draws`` samples drawn without
    replacement from ``pool`` all fail, as the product ``prod_j (failures - j) / (pool - j)``
    (exact for integers, no factorial overflow). Zero once ``failures < draws``."""
    p = torch.ones_like(failures)
    for j in range(draws):
        p = p * (failures - j).clamp(min=0) / (pool - j)
    return p


def grpo_passk(rewards: torch.Tensor, group_size: int, *, k: int,
               success_threshold: float = 1.0, normalize_std: bool = True) -> Advantages:
    """Advantages that maximise pass@k instead of the mean reward (Chen et al. 2025,
    "Pass@k Training for Adaptively Balancing Exploration and Exploitation").

    Derivation. A sample succeeds when ``reward >= success_threshold``. With ``n`` samples
    of which ``c`` succeed, the unbiased pass@k estimate is the average, over all
    ``C(n, k)`` subsets ``S`` of size ``k``, of the subset reward ``max_{j in S} success_j``:
    ``passk = 1 - C(n - c, k) / C(n, k)``. Its policy gradient is a sum over subsets of
    ``max(S) * sum_{i in S} grad log pi(y_i)``; regrouping by sample, sample ``i`` is
    weighted by the mean reward of the subsets that contain it. Subtracting the mean
    subset reward ``passk`` as baseline gives

    * a success: every subset holding it scores 1, so ``A = 1 - passk``;
    * a failure: a subset holding it scores 0 exactly when its other ``k - 1`` members all
      fail, so ``A = 1 - C(n - c - 1, k - 1) / C(n - 1, k - 1) - passk``.

    With ``normalize_std`` both are divided by the std of the (Bernoulli) subset reward,
    ``sqrt(passk * (1 - passk))``. The advantages of a group sum to 0 (because
    ``n * C(n-c, k) / C(n, k) == (n - c) * C(n-c-1, k-1) / C(n-1, k-1)``). With ``k = 1``
    this is ``group_based`` on the 0/1 successes with the population (``n``) std.

    Edge cases: no success (``passk = 0``) or saturation (``n - c < k``: every k-subset
    holds a success, ``passk = 1``; a failure then gets ``1 - 0 - 1 = 0`` too) give zero
    advantages and count as zero-variance groups. Reward magnitudes beyond the threshold
    are ignored.

    Args:
        rewards: ``[batch]`` episode rewards, groups contiguous.
        group_size: rollouts per group ``n``.
        k: the k of pass@k, ``1 <= k <= group_size``.
        success_threshold: a rollout succeeds when ``reward >= success_threshold``.
        normalize_std: divide by the subset-reward std (as in the paper) or not.

    Returns:
        :class:`Advantages` with ``values`` of shape ``[batch]``.
    """
    _check_group_size(group_size)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= group_size:
        raise ConfigError(f"`k` must be an int between 1 and group_size={group_size}, got {k!r}")
    if not math.isfinite(success_threshold):
        raise ConfigError(f"`success_threshold` must be a finite number, got {success_threshold!r}")
    r = _grouped(rewards, group_size)
    n = group_size
    success = r >= success_threshold                               # [num_groups, n]
    failures = (~success).sum(dim=1, keepdim=True).to(torch.float64)  # n - c
    all_fail = _all_fail_probability(failures, n, k)               # C(n-c, k) / C(n, k)
    passk = 1.0 - all_fail
    # For a failing sample the pool is the other n - 1 samples, of which n - c - 1 fail.
    rest_fail = _all_fail_probability(failures - 1, n - 1, k - 1)
    values = torch.where(success, all_fail, all_fail - rest_fail)
    zero = ((passk <= 0) | (passk >= 1)).squeeze(1)
    if normalize_std:
        std = torch.sqrt(passk * (1.0 - passk))
        values = values / torch.where(std > 0, std, 1.0)
    values = values.masked_fill(zero[:, None], 0.0)
    return _result(values.flatten(), zero, rewards)


def _returns_to_go(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """``G_t = r_t + gamma * G_{t+1}`` along the last dim (padding must already be 0)."""
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def group_based_per_turn(turn_rewards: torch.Tensor, group_size: int, *,
                         turn_mask: torch.Tensor | None = None, gamma: float = 1.0,
                         normalize_std: bool = True, eps: float = 1e-6) -> Advantages:
    """Per-turn GRPO: each turn's return-to-go, normalised against its group.

    Turn ``t`` of rollout ``i`` has return ``G_it = sum_{t' >= t} gamma^(t'-t) r_it'``: a
    turn is credited with what happened from it on, not with earlier turns' rewards.
    The returns are then normalised with the group's statistics, pooled over every turn of
    every rollout of the group, each rollout weighted equally (its turns share weight 1):

        mean_g = 1/m * sum_i 1/n_i * sum_t G_it
        var_g  = 1/(m - 1) * sum_i 1/n_i * sum_t (G_it - mean_g)^2
        A_it   = (G_it - mean_g) / (sqrt(var_g) + eps)

    with ``n_i`` the turns of rollout ``i`` and ``m`` the rollouts with at least one turn
    (a rollout without turns has no tokens to train and is left out). The equal weighting
    keeps long episodes from dominating the baseline, and makes the estimator reduce
    exactly to :func:`group_based` when the only reward comes at the last turn and
    ``gamma == 1`` (every turn of rollout ``i`` then has ``G_it = R_i``).

    A group is zero-variance (all advantages 0, counted) when all its returns are equal or
    fewer than two of its rollouts have turns.

    Args:
        turn_rewards: ``[batch, max_turns]`` reward after each assistant turn, padded;
            groups contiguous along ``batch``. Build it with :func:`pad_turn_rewards`.
        group_size: rollouts per group.
        turn_mask: ``[batch, max_turns]``, 1 (True) on real turns, 0 on padding; ``None``
            means every entry is a real turn. Padded rewards are ignored (may be NaN).
        gamma: discount in ``[0, 1]`` applied from turn to turn.
        normalize_std: divide by the pooled std (GRPO) or not (Dr. GRPO).
        eps: added to the std before dividing.

    Returns:
        :class:`Advantages` with ``values`` of shape ``[batch, max_turns]``, 0 on padding.
    """
    _check_group_size(group_size)
    _check_eps(eps)
    if not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"`gamma` must be in [0, 1], got {gamma!r}")
    if turn_rewards.dim() != 2:
        raise ValueError(f"`turn_rewards` must have shape [batch, max_turns], "
                         f"got {tuple(turn_rewards.shape)}")
    if turn_mask is None:
        mask = torch.ones(turn_rewards.shape, dtype=torch.bool, device=turn_rewards.device)
    elif turn_mask.shape != turn_rewards.shape:
        raise ValueError(f"`turn_mask` has shape {tuple(turn_mask.shape)} but `turn_rewards` "
                         f"has {tuple(turn_rewards.shape)}")
    else:
        mask = turn_mask.to(torch.bool)
    batch, max_turns = turn_rewards.shape
    r = torch.where(mask, turn_rewards.detach().to(torch.float64), 0.0)
    _grouped(r.sum(dim=1), group_size)  # same checks as the other estimators (shape, NaN)
    num_groups = batch // group_size
    if max_turns == 0 or group_size == 1:
        zero = torch.ones(num_groups, dtype=torch.bool)
        return _result(torch.zeros_like(r), zero, turn_rewards)

    ret = _returns_to_go(r, gamma).reshape(num_groups, group_size, max_turns)
    m3 = mask.reshape(num_groups, group_size, max_turns)
    n_turns = m3.sum(dim=2, keepdim=True)                          # [g, n, 1]
    weight = m3.to(torch.float64) / n_turns.clamp(min=1)           # each rollout sums to 1
    rollouts = (n_turns > 0).sum(dim=(1, 2))                       # m, per group
    mean = (weight * ret).sum(dim=(1, 2)) / rollouts.clamp(min=1)
    dev = ret - mean[:, None, None]
    hi = ret.masked_fill(~m3, -math.inf).amax(dim=(1, 2))
    lo = ret.masked_fill(~m3, math.inf).amin(dim=(1, 2))
    zero = (rollouts < 2) | (hi == lo)
    if normalize_std:
        var = (weight * dev.square()).sum(dim=(1, 2)) / (rollouts - 1).clamp(min=1)
        dev = dev / (var.sqrt() + eps)[:, None, None]
    values = dev.masked_fill(zero[:, None, None] | ~m3, 0.0)
    return _result(values.reshape(batch, max_turns), zero, turn_rewards)


# --------------------------------------------------------------------------- selection

#: name -> estimator. Sequence-level ones take ``(rewards [batch], group_size, **options)``;
#: per-turn ones (:data:`PER_TURN_ESTIMATORS`) take ``(turn_rewards [batch, max_turns],
#: group_size, turn_mask=..., **options)``.
ADVANTAGE_ESTIMATORS: dict[str, Callable[..., Advantages]] = {
    "group_based": group_based,
    "group_based_per_turn": group_based_per_turn,
    "rloo": rloo,
    "grpo_passk": grpo_passk,
}

#: Estimators that need per-turn rewards and return ``[batch, max_turns]`` values.
PER_TURN_ESTIMATORS: frozenset[str] = frozenset({"group_based_per_turn"})


def get_advantage_estimator(name: str) -> Callable[..., Advantages]:
    """The estimator called ``name`` in :data:`ADVANTAGE_ESTIMATORS`.

    Raises:
        ConfigError: unknown name; the message suggests close matches and lists all names.
    """
    return lookup_by_name(ADVANTAGE_ESTIMATORS, name, "advantage estimator")


def compute_advantages(name: str, rewards: torch.Tensor | None, group_size: int, *,
                       turn_rewards: torch.Tensor | None = None,
                       turn_mask: torch.Tensor | None = None, **options: Any) -> Advantages:
    """Run the estimator ``name`` with ``options``, feeding it the rewards it needs.

    Args:
        name: a key of :data:`ADVANTAGE_ESTIMATORS`.
        rewards: ``[batch]`` episode rewards (used by sequence-level estimators).
        group_size: rollouts per group, groups contiguous.
        turn_rewards: ``[batch, max_turns]`` padded per-turn rewards (used by
            :data:`PER_TURN_ESTIMATORS`); see :func:`pad_turn_rewards`.
        turn_mask: ``[batch, max_turns]`` real-turn mask for ``turn_rewards``.
        **options: the estimator's keyword options (``normalize_std``, ``k``, ...).

    Raises:
        ConfigError: unknown estimator, unknown or missing option, or the rewards the
            estimator needs were not given.
    """
    fn = get_advantage_estimator(name)
    check_options(fn, options, f"advantage estimator {name!r}", reserved=("turn_mask",))
    if name in PER_TURN_ESTIMATORS:
        if turn_rewards is None:
            raise ConfigError(f"advantage estimator {name!r} needs per-turn rewards: pass "
                              "`turn_rewards` (and `turn_mask`), e.g. from pad_turn_rewards()")
        return fn(turn_rewards, group_size, turn_mask=turn_mask, **options)
    if rewards is None:
        raise ConfigError(f"advantage estimator {name!r} needs episode rewards: pass `rewards`")
    return fn(rewards, group_size, **options)


# --------------------------------------------------------------------------- per-turn helpers

def pad_turn_rewards(turn_rewards: Sequence[Sequence[float]], *,
                     dtype: torch.dtype = torch.float32,
                     device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad ragged per-turn rewards (e.g. ``[t.turn_rewards for t in trajectories]``).

    Returns:
        ``(rewards, mask)``, both ``[batch, max_turns]``: rewards padded with 0 and a bool
        mask that is True on real turns. ``max_turns`` is 0 when no rollout has a turn.

    >>> r, m = pad_turn_rewards([[0.0, 1.0], [0.5]])
    >>> r.tolist(), m.tolist()
    ([[0.0, 1.0], [0.5, 0.0]], [[True, True], [True, False]])
    """
    max_turns = max((len(t) for t in turn_rewards), default=0)
    rewards = torch.zeros(len(turn_rewards), max_turns, dtype=dtype, device=device)
    mask = torch.zeros(len(turn_rewards), max_turns, dtype=torch.bool, device=device)
    for i, row in enumerate(turn_rewards):
        if len(row):
            rewards[i, :len(row)] = torch.as_tensor(list(row), dtype=dtype)
            mask[i, :len(row)] = True
    return rewards, mask


def turn_advantages_to_tokens(turn_advantages: torch.Tensor,
                              turn_spans: Sequence[Sequence[tuple[int, int]]], seq_len: int,
                              *, offset: int = 0) -> torch.Tensor:
    """Broadcast per-turn advantages onto the tokens of each turn.

    Token ``p`` of row ``b`` gets ``turn_advantages[b, t]`` when ``start_t <= p - offset <
    end_t`` for the ``t``-th span of row ``b``; every other token gets 0 (prompt,
    environment turns, padding — those carry ``mask == 0`` in the loss anyway).

    Args:
        turn_advantages: ``[batch, max_turns]``, e.g. ``Advantages.values`` of a per-turn
            estimator.
        turn_spans: per row, the ``[start, end)`` token positions of each assistant turn in
            trajectory coordinates (``Trajectory.turn_spans``), in order, not overlapping.
        seq_len: length of the per-token tensors the result must match.
        offset: added to every span. Spans index ``token_ids``; if the per-token tensors
            are aligned with ``token_ids[1:]`` (log-prob of token ``p`` sits at ``p - 1``),
            pass ``offset=-1``; with left padding of ``L`` tokens pass ``L``. Positions that
            land outside ``[0, seq_len)`` (truncated context) are dropped.

    Returns:
        ``[batch, seq_len]`` tensor with the dtype and device of ``turn_advantages``.
    """
    if turn_advantages.dim() != 2:
        raise ValueError(f"`turn_advantages` must have shape [batch, max_turns], "
                         f"got {tuple(turn_advantages.shape)}")
    batch, max_turns = turn_advantages.shape
    if len(turn_spans) != batch:
        raise ValueError(f"got turn spans for {len(turn_spans)} rows but {batch} rows "
                         "of advantages")
    out = turn_advantages.new_zeros(batch, seq_len)
    for b, spans in enumerate(turn_spans):
        if len(spans) > max_turns:
            raise ValueError(f"row {b} has {len(spans)} turn spans but only {max_turns} "
                             f"turn advantages")
        prev_end = None
        for t, (start, end) in enumerate(spans):
            if start > end or (prev_end is not None and start < prev_end):
                raise ValueError(f"row {b}: turn spans must be ordered, non-overlapping "
                                 f"[start, end) pairs, got {list(spans)}")
            prev_end = end
            lo, hi = max(start + offset, 0), min(end + offset, seq_len)
            if lo < hi:
                out[b, lo:hi] = turn_advantages[b, t]
    return out
