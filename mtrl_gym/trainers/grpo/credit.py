"""Credit assignment for a step: trajectories' rewards in, train sequences with advantages out.

:func:`trajectory_advantages` runs the configured estimator of
:mod:`~mtrl_gym.trainers.grpo.advantages` on a batch of trajectories (groups contiguous,
as the rollout engine returns them) and gives each trajectory either one advantage or one
per token (per-turn estimators). :func:`train_sequences` then keeps what the update should
see (dropping zero-variance groups if asked, and failed rollouts' tokens if asked) and
builds :class:`~mtrl_gym.trainers.grpo.batching.TrainSequence` records.

Failed rollouts take part like any other: their reward is the environment's minimum
(the rollout engine sets it), so they pull their group's baseline and get a negative
advantage on whatever they sampled before failing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from mtrl_gym.trainers.grpo.advantages import (
    PER_TURN_ESTIMATORS,
    Advantages,
    compute_advantages,
    pad_turn_rewards,
    turn_advantages_to_tokens,
)
from mtrl_gym.trainers.grpo.batching import TrainSequence, build_sequence
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["trajectory_advantages", "train_sequences", "zero_variance_mask"]


def _turn_rewards(t: Trajectory, reward: float | None = None) -> list[float]:
    """One reward per sampled turn, summing to the episode reward.

    A failed episode may have sampled a turn the env never scored, and its reward (the
    env's minimum) is not the sum of its turn rewards: missing turns get 0 and the last
    turn absorbs the difference, so per-turn credit still sees the failure.
    """
    total = t.reward if reward is None else reward
    rewards = list(t.turn_rewards[:t.num_turns]) + [0.0] * max(t.num_turns - len(t.turn_rewards), 0)
    if rewards and sum(rewards) != total:
        rewards[-1] += total - sum(rewards)
    return rewards


def trajectory_advantages(trajectories: Sequence[Trajectory], group_size: int, estimator: str = "group_based",
                          options: Mapping[str, Any] | None = None,
                          penalties: Sequence[float] | None = None) -> tuple[list[Any], Advantages]:
    """Advantages of a batch: ``(per_trajectory, record)``.

    ``penalties`` (one per trajectory, e.g. the collapse guards of
    :mod:`~mtrl_gym.trainers.grpo.diversity`) are subtracted from the rewards first (per-turn
    estimators: from the last turn's reward).

    ``per_trajectory[i]`` is a float (sequence-level estimators) or a ``[len(token_ids)]``
    float tensor (per-turn estimators, 0 outside the turns); ``record`` is the estimator's
    :class:`Advantages` (with the zero-variance group count).
    """
    options = dict(options or {})
    penalties = list(penalties) if penalties is not None else [0.0] * len(trajectories)
    totals = [float(t.reward) - float(p) for t, p in zip(trajectories, penalties)]
    rewards = torch.tensor(totals, dtype=torch.float64)
    if estimator not in PER_TURN_ESTIMATORS:
        adv = compute_advantages(estimator, rewards, group_size, **options)
        return [float(v) for v in adv.values.tolist()], adv
    turn_rewards, turn_mask = pad_turn_rewards([_turn_rewards(t, r) for t, r in zip(trajectories, totals)], dtype=torch.float64)
    adv = compute_advantages(estimator, rewards, group_size, turn_rewards=turn_rewards, turn_mask=turn_mask,
                             **options)
    out = []
    for i, t in enumerate(trajectories):
        spans = [tuple(s) for s in t.turn_spans]
        tokens = turn_advantages_to_tokens(adv.values[i:i + 1], [spans], len(t.token_ids))
        out.append(tokens[0].float())
    return out, adv


def zero_variance_mask(advantages: Sequence[Any], group_size: int) -> list[bool]:
    """Per trajectory: whether every advantage of its group is exactly 0 (no learning signal).

    The estimators zero such groups explicitly (equal rewards; for ``grpo_passk`` also no
    success or saturation), so this finds exactly the groups they counted.
    """
    def is_zero(a: Any) -> bool:
        return not bool(a.any()) if isinstance(a, torch.Tensor) else a == 0

    flags: list[bool] = []
    for g in range(0, len(advantages), group_size):
        group = advantages[g:g + group_size]
        flags.extend([all(is_zero(a) for a in group)] * len(group))
    return flags


def train_sequences(trajectories: Sequence[Trajectory], advantages: Sequence[Any], *, group_size: int,
                    drop_zero_variance_groups: bool = True, train_on_failed: bool = True) -> list[TrainSequence]:
    """The sequences the update trains on, in batch order.

    Dropped: trajectories without trainable tokens, those of zero-variance groups when
    ``drop_zero_variance_groups`` (their advantage is 0, so only a KL term could move
    them), and failed ones unless ``train_on_failed``.
    """
    zero = zero_variance_mask(advantages, group_size) if drop_zero_variance_groups else [False] * len(trajectories)
    out = []
    for i, (t, adv) in enumerate(zip(trajectories, advantages)):
        if zero[i] or (t.failed and not train_on_failed) or not t.trainable_tokens:
            continue
        seq = build_sequence(t.token_ids, t.loss_mask, t.logprobs, adv, index=i)
        if seq is not None:
            out.append(seq)
    return out
