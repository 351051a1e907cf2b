"""Advantage estimators: hand-computed examples, properties, selection and error messages."""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.grpo.advantages import (
    ADVANTAGE_ESTIMATORS,
    PER_TURN_ESTIMATORS,
    compute_advantages,
    get_advantage_estimator,
    group_based,
    group_based_per_turn,
    grpo_passk,
    pad_turn_rewards,
    rloo,
    turn_advantages_to_tokens,
)

F64 = torch.float64


def t(values, dtype=F64):
    return torch.tensor(values, dtype=dtype)


def close(actual: torch.Tensor, expected, atol: float = 1e-6) -> None:
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype),
                               atol=atol, rtol=0)


# --------------------------------------------------------------------------- hand-computed

def test_group_based_hand_computed():
    # group 0 = [4, 0, 2]: mean 2, deviations [2, -2, 0], sample variance (4 + 4 + 0) / 2 = 4,
    # std 2 -> advantages [1, -1, 0] (up to eps = 1e-6 in the divisor).
    # group 1 = [5, 5, 5]: constant -> [0, 0, 0] and counted.
    adv = group_based(t([4, 0, 2, 5, 5, 5]), group_size=3)
    close(adv.values, [1, -1, 0, 0, 0, 0])
    assert (adv.zero_variance_groups, adv.num_groups) == (1, 2)
    assert adv.metrics() == {"zero_variance_groups": 1.0, "zero_variance_frac": 0.5}
    assert not adv.per_turn


def test_group_based_dr_grpo_skips_std():
    # Dr. GRPO: deviations only, [2, -2, 0]; the constant group is still exactly 0.
    adv = group_based(t([4, 0, 2, 5, 5, 5]), group_size=3, normalize_std=False)
    assert adv.values.tolist() == [2.0, -2.0, 0.0, 0.0, 0.0, 0.0]
    assert adv.zero_variance_groups == 1


def test_constant_group_of_inexact_floats_is_exactly_zero():
    # (0.1 + 0.1 + 0.1) / 3 != 0.1 in floating point: without the explicit zeroing this
    # would give ~1e-17 / 1e-6 noise instead of 0.
    for fn in (group_based, rloo):
        adv = fn(t([0.1, 0.1, 0.1]), group_size=3)
        assert adv.values.tolist() == [0.0, 0.0, 0.0]
        assert adv.zero_variance_groups == 1


def test_rloo_hand_computed():
    # [4, 0, 2]: 4 - (0 + 2)/2 = 3, 0 - (4 + 2)/2 = -3, 2 - (4 + 0)/2 = 0; [5, 5, 5] -> 0.
    adv = rloo(t([4, 0, 2, 5, 5, 5]), group_size=3)
    assert adv.values.tolist() == [3.0, -3.0, 0.0, 0.0, 0.0, 0.0]
    assert adv.zero_variance_groups == 1


def test_grpo_passk_hand_computed():
    # Group 0, n = 4, successes [1, 0, 0, 0] (threshold 0.5), c = 1, k = 2:
    #   pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6 = 1/2
    #   success: 1 - 1/2 = 1/2
    #   failure: 1 - C(2,1)/C(3,1) - 1/2 = 1 - 2/3 - 1/2 = -1/6
    #   std = sqrt(1/2 * 1/2) = 1/2  ->  [1, -1/3, -1/3, -1/3]
    # Group 1, successes [1, 1, 1, 0]: n - c = 1 < k, every pair holds a success,
    #   pass@2 = 1 -> all zero, counted.
    rewards = t([0.9, 0.2, 0.1, 0.0, 0.5, 0.7, 1.0, 0.3])
    adv = grpo_passk(rewards, group_size=4, k=2, success_threshold=0.5)
    close(adv.values, [1, -1 / 3, -1 / 3, -1 / 3, 0, 0, 0, 0])
    assert (adv.zero_variance_groups, adv.num_groups) == (1, 2)
    raw = grpo_passk(rewards, group_size=4, k=2, success_threshold=0.5, normalize_std=False)
    close(raw.values, [1 / 2, -1 / 6, -1 / 6, -1 / 6, 0, 0, 0, 0])


def _passk_by_enumeration(success: list[int], k: int) -> list[float]:
    """Advantages straight from the definition: mean score of the k-subsets holding i,
    minus the mean score of all k-subsets, over the population std of subset scores."""
    subsets = list(itertools.combinations(range(len(success)), k))
    score = {s: max(success[j] for j in s) for s in subsets}
    mean = sum(score.values()) / len(subsets)
    std = math.sqrt(sum((v - mean) ** 2 for v in score.values()) / len(subsets))
    out = []
    for i in range(len(success)):
        holding = [score[s] for s in subsets if i in s]
        out.append((sum(holding) / len(holding) - mean) / std if std > 0 else 0.0)
    return out


@settings(max_examples=40, deadline=None)
@given(data=st.data(), n=st.integers(1, 7))
def test_grpo_passk_matches_subset_enumeration(data, n):
    success = data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    k = data.draw(st.integers(1, n))
    adv = grpo_passk(t(success), group_size=n, k=k)
    close(adv.values, _passk_by_enumeration(success, k), atol=1e-9)
    assert adv.zero_variance_groups == int(all(v == 0 for v in _passk_by_enumeration(success, k)))


def test_grpo_passk_with_k1_is_group_based_with_population_std():
    success = t([1, 0, 0, 1, 1, 0, 0, 0])
    population_std = success.std(correction=0)
    expected = (success - success.mean()) / population_std
    close(grpo_passk(success, group_size=8, k=1).values, expected, atol=1e-12)


def test_group_based_per_turn_hand_computed():
    # Group 0: rollout A rewards [0, 1] -> returns [1, 1]; rollout B [0] -> [0].
    #   mean = (mean(A) + mean(B)) / 2 = (1 + 0) / 2 = 0.5
    #   var  = (1/2 * (0.5^2 + 0.5^2) + 0.5^2) / (2 - 1) = 0.5, std = 0.70711
    #   A -> [0.70711, 0.70711], B -> [-0.70711, pad 0]
    # Group 1: rollout C [0] -> [0]; rollout D [1, 0] -> [1, 0].
    #   mean = (0 + 0.5) / 2 = 0.25
    #   var  = (0.25^2 + 1/2 * (0.75^2 + 0.25^2)) / 1 = 0.0625 + 0.3125 = 0.375, std = 0.61237
    #   C -> [-0.40825], D -> [1.22474, -0.40825]
    rewards, mask = pad_turn_rewards([[0, 1], [0], [0], [1, 0]], dtype=F64)
    adv = group_based_per_turn(rewards, 2, turn_mask=mask)
    close(adv.values, [[0.70711, 0.70711], [-0.70711, 0], [-0.40825, 0], [1.22474, -0.40825]],
          atol=1e-5)
    assert adv.per_turn and adv.zero_variance_groups == 0 and adv.num_groups == 2


def test_group_based_per_turn_discount_hand_computed():
    # gamma = 0.5, rollout X rewards [1, 2, 4]: returns G2 = 4, G1 = 2 + 0.5*4 = 4,
    # G0 = 1 + 0.5*4 = 3; rollout Y [0, 0, 0] -> [0, 0, 0].
    # mean = (mean(3, 4, 4) + 0) / 2 = (11/3) / 2 = 11/6; without std:
    # X -> [3 - 11/6, 4 - 11/6, 4 - 11/6] = [7/6, 13/6, 13/6], Y -> -11/6 each.
    adv = group_based_per_turn(t([[1, 2, 4], [0, 0, 0]]), 2, gamma=0.5, normalize_std=False)
    close(adv.values, [[7 / 6, 13 / 6, 13 / 6], [-11 / 6] * 3], atol=1e-12)


def test_group_based_per_turn_edge_cases():
    # Padded entries may hold NaN: they are never read.
    rewards = t([[1.0, float("nan")], [0.0, 2.0]])
    mask = t([[1, 0], [1, 1]]).bool()
    assert torch.isfinite(group_based_per_turn(rewards, 2, turn_mask=mask).values).all()
    # Identical returns everywhere -> zero-variance group.
    adv = group_based_per_turn(t([[1, 1], [1, 1]]), 2, gamma=0.0)
    assert adv.values.abs().sum() == 0 and adv.zero_variance_groups == 1
    # Only one rollout of the group has turns -> no baseline -> zero, counted.
    r, m = pad_turn_rewards([[3.0, 1.0], []], dtype=F64)
    adv = group_based_per_turn(r, 2, turn_mask=m)
    assert adv.values.abs().sum() == 0 and adv.zero_variance_groups == 1
    # No turn at all in the batch.
    r, m = pad_turn_rewards([[], []])
    adv = group_based_per_turn(r, 2, turn_mask=m)
    assert adv.values.shape == (2, 0) and adv.zero_variance_groups == 1


def test_group_size_one_gives_zero_and_counts_every_group():
    rewards = t([1.0, 2.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "degrees of freedom <= 0" warning from std
        for adv in (group_based(rewards, 1), rloo(rewards, 1),
                    grpo_passk(rewards, 1, k=1, success_threshold=2.0),
                    group_based_per_turn(rewards[:, None], 1)):
            assert adv.values.abs().sum() == 0
            assert (adv.zero_variance_groups, adv.num_groups) == (3, 3)


def test_dtype_and_device_follow_the_rewards():
    f32 = torch.tensor([1.0, 0.0], dtype=torch.float32)
    assert group_based(f32, 2).values.dtype == torch.float32
    assert rloo(torch.tensor([1, 0]), 2).values.dtype == torch.get_default_dtype()
    empty = group_based(torch.zeros(0), 4)
    assert (empty.values.shape, empty.zero_variance_groups, empty.num_groups) == ((0,), 0, 0)


# --------------------------------------------------------------------------- properties

# Multiples of 1/4 in [-8, 8]: sums and shifts of these are exact in float64, so the
# properties below are tested on the maths, not on rounding.
quarter = st.integers(-32, 32).map(lambda i: i / 4)


@st.composite
def grouped_rewards(draw, max_groups=4, max_size=6):
    group_size = draw(st.integers(1, max_size))
    num_groups = draw(st.integers(1, max_groups))
    values = draw(st.lists(quarter, min_size=group_size * num_groups,
                           max_size=group_size * num_groups))
    return t(values), group_size


SEQUENCE_ESTIMATORS = [
    lambda r, g: group_based(r, g),
    lambda r, g: group_based(r, g, normalize_std=False),
    rloo,
    lambda r, g: grpo_passk(r, g, k=max(1, g // 2), success_threshold=0.0),
]


@settings(max_examples=50, deadline=None)
@given(grouped_rewards(), st.sampled_from(range(len(SEQUENCE_ESTIMATORS))))
def test_advantages_have_zero_mean_per_group(rg, which):
    rewards, g = rg
    adv = SEQUENCE_ESTIMATORS[which](rewards, g)
    close(adv.values.reshape(-1, g).sum(dim=1), torch.zeros(rewards.numel() // g), atol=1e-9)


@settings(max_examples=50, deadline=None)
@given(grouped_rewards(), st.data())
def test_adding_a_constant_to_a_group_changes_nothing(rg, data):
    rewards, g = rg
    shifts = t(data.draw(st.lists(quarter, min_size=rewards.numel() // g,
                                  max_size=rewards.numel() // g)))
    shifted = rewards + shifts.repeat_interleave(g)
    for fn in (group_based, rloo, lambda r, g: group_based(r, g, normalize_std=False)):
        a, b = fn(rewards, g), fn(shifted, g)
        close(b.values, a.values, atol=1e-9)
        assert a.zero_variance_groups == b.zero_variance_groups


@settings(max_examples=50, deadline=None)
@given(grouped_rewards(), st.sampled_from([0.25, 2.0, 1000.0]))
def test_std_normalised_advantages_are_scale_invariant(rg, scale):
    rewards, g = rg
    a = group_based(rewards, g, eps=0.0)
    b = group_based(rewards * scale, g, eps=0.0)
    close(b.values, a.values, atol=1e-9)


@settings(max_examples=50, deadline=None)
@given(grouped_rewards(), st.sampled_from(range(len(SEQUENCE_ESTIMATORS))))
def test_constant_groups_are_zero_and_counted(rg, which):
    rewards, g = rg
    groups = rewards.reshape(-1, g)
    constant = groups.amax(dim=1) == groups.amin(dim=1)
    adv = SEQUENCE_ESTIMATORS[which](rewards, g)
    assert (adv.values.reshape(-1, g)[constant] == 0).all()
    if which < 3:  # grpo_passk also counts saturated groups (checked by enumeration above)
        assert adv.zero_variance_groups == int(constant.sum())
    assert torch.isfinite(adv.values).all()


@settings(max_examples=40, deadline=None)
@given(grouped_rewards(), st.data(), st.booleans())
def test_per_turn_with_terminal_reward_reduces_to_group_based(rg, data, normalize_std):
    # Reward only at the last turn and gamma = 1: every turn of rollout i has return R_i,
    # and the equal per-rollout weighting makes the pooled statistics the group's.
    rewards, g = rg
    turns = data.draw(st.lists(st.integers(1, 4), min_size=rewards.numel(),
                               max_size=rewards.numel()))
    rows = [[0.0] * (n - 1) + [float(r)] for n, r in zip(turns, rewards.tolist())]
    turn_rewards, mask = pad_turn_rewards(rows, dtype=F64)
    per_turn = group_based_per_turn(turn_rewards, g, turn_mask=mask, normalize_std=normalize_std)
    flat = group_based(rewards, g, normalize_std=normalize_std)
    expected = torch.where(mask, flat.values[:, None], 0.0)
    close(per_turn.values, expected, atol=1e-9)
    assert per_turn.zero_variance_groups == flat.zero_variance_groups


# --------------------------------------------------------------------------- helpers

def test_pad_turn_rewards():
    r, m = pad_turn_rewards([[0.0, 1.0], [], [0.5]])
    assert r.tolist() == [[0.0, 1.0], [0.0, 0.0], [0.5, 0.0]]
    assert m.tolist() == [[True, True], [False, False], [True, False]]


def test_turn_advantages_to_tokens():
    adv = t([[1.0, -2.0], [3.0, 0.0]])
    spans = [[(2, 4), (6, 7)], [(1, 3)]]
    out = turn_advantages_to_tokens(adv, spans, seq_len=8)
    assert out.tolist() == [[0, 0, 1, 1, 0, 0, -2, 0], [0, 3, 3, 0, 0, 0, 0, 0]]
    # Per-token tensors aligned with token_ids[1:]: shift left by one, drop what falls off.
    out = turn_advantages_to_tokens(adv, spans, seq_len=6, offset=-1)
    assert out.tolist() == [[0, 1, 1, 0, 0, -2], [3, 3, 0, 0, 0, 0]]


def test_turn_advantages_to_tokens_rejects_bad_spans():
    adv = t([[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"row 0: turn spans must be ordered, non-overlapping"):
        turn_advantages_to_tokens(adv, [[(0, 4), (3, 5)]], seq_len=8)
    with pytest.raises(ValueError, match=r"row 0 has 3 turn spans but only 2 turn advantages"):
        turn_advantages_to_tokens(adv, [[(0, 1), (1, 2), (2, 3)]], seq_len=8)
    with pytest.raises(ValueError, match=r"got turn spans for 2 rows but 1 rows"):
        turn_advantages_to_tokens(adv, [[], []], seq_len=8)


# --------------------------------------------------------------------------- selection

def test_registry_names():
    assert set(ADVANTAGE_ESTIMATORS) == {"group_based", "group_based_per_turn", "rloo",
                                         "grpo_passk"}
    assert PER_TURN_ESTIMATORS <= set(ADVANTAGE_ESTIMATORS)
    assert get_advantage_estimator("rloo") is rloo


def test_unknown_estimator_suggests_close_match():
    with pytest.raises(ConfigError, match=r"unknown advantage estimator 'group-based'\. "
                                          r"Did you mean 'group_based'.*Valid: group_based, "
                                          r"group_based_per_turn, grpo_passk, rloo"):
        get_advantage_estimator("group-based")
    with pytest.raises(ConfigError, match=r"unknown advantage estimator 'ppo'\. Valid: "):
        get_advantage_estimator("ppo")


def test_compute_advantages_dispatches_and_checks_options():
    rewards = t([4, 0, 2, 5, 5, 5])
    assert compute_advantages("rloo", rewards, 3).values.tolist() == [3.0, -3.0, 0, 0, 0, 0]
    adv = compute_advantages("grpo_passk", rewards, 3, k=2, success_threshold=2.0)
    assert adv.values.tolist() == grpo_passk(rewards, 3, k=2, success_threshold=2.0).values.tolist()
    r, m = pad_turn_rewards([[0, 1], [0]], dtype=F64)
    adv = compute_advantages("group_based_per_turn", None, 2, turn_rewards=r, turn_mask=m)
    assert adv.per_turn
    with pytest.raises(ConfigError, match=r"'rloo' got unknown option\(s\) 'normalize_std'; "
                                          r"it accepts: \(none\)"):
        compute_advantages("rloo", rewards, 3, normalize_std=False)
    with pytest.raises(ConfigError, match=r"'group_based' got unknown option\(s\) 'normalise_std'; "
                                          r"it accepts: eps, normalize_std"):
        compute_advantages("group_based", rewards, 3, normalise_std=False)
    with pytest.raises(ConfigError, match=r"'grpo_passk' needs option\(s\) 'k'"):
        compute_advantages("grpo_passk", rewards, 3)
    with pytest.raises(ConfigError, match=r"'group_based_per_turn' needs per-turn rewards"):
        compute_advantages("group_based_per_turn", rewards, 3)
    with pytest.raises(ConfigError, match=r"'rloo' needs episode rewards"):
        compute_advantages("rloo", None, 3, turn_rewards=r)


# --------------------------------------------------------------------------- errors

@pytest.mark.parametrize("group_size", [0, -2, 2.0, True])
def test_bad_group_size(group_size):
    with pytest.raises(ConfigError, match=r"`group_size` must be an int >= 1, got"):
        group_based(t([1.0, 0.0]), group_size)


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"a batch of 5 rewards is not a whole number of "
                                         r"groups of group_size=2"):
        rloo(t([1, 2, 3, 4, 5]), 2)
    with pytest.raises(ValueError, match=r"rewards must be finite; non-finite values at "
                                         r"rows \[1\]"):
        group_based(t([1.0, float("nan")]), 2)
    with pytest.raises(ValueError, match=r"`rewards` must have shape \[batch\], got \(2, 2\)"):
        group_based(t([[1.0, 0.0], [0.0, 1.0]]), 2)
    with pytest.raises(ConfigError, match=r"`k` must be an int between 1 and group_size=4, got 5"):
        grpo_passk(t([1, 0, 0, 0]), 4, k=5)
    with pytest.raises(ConfigError, match=r"`gamma` must be in \[0, 1\], got 1.5"):
        group_based_per_turn(t([[1.0], [0.0]]), 2, gamma=1.5)
    with pytest.raises(ConfigError, match=r"`eps` must be a finite number >= 0, got -1"):
        group_based(t([1.0, 0.0]), 2, eps=-1)
    with pytest.raises(ValueError, match=r"`turn_mask` has shape \(2, 1\) but `turn_rewards` "
                                         r"has \(2, 2\)"):
        group_based_per_turn(t([[1, 0], [0, 1]]), 2, turn_mask=t([[1], [1]]))
