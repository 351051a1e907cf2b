"""Policy losses, aggregations, KL and TIS: hand-computed examples, gradients, errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.grpo.losses import (
    AGGREGATIONS,
    LOSSES,
    cispo_loss,
    compute_loss,
    get_aggregation,
    get_loss,
    gspo_loss,
    importance_sampling_loss,
    kl_k3,
    masked_mean,
    ppo_loss,
    seq_mean_token_mean,
    token_mean,
    token_sum_norm,
    truncated_importance_weights,
)

F64 = torch.float64

# The running example: 2 sequences x 3 positions, position (0, 2) is not trainable.
# Token ratios r = exp(logp - old_logp) are chosen directly; old_logp is -1 on row 0 and
# -2 on row 1, so logp = old_logp + log(r):
#   row 0: r = [1.5, 0.5, (1.0)]   logp = [-0.594535, -1.693147, (-1)]     A = +1
#   row 1: r = [1.0, 0.7, 3.5]     logp = [-2.0, -2.356675, -0.747237]     A = -1
# Five trainable tokens, so token_mean divides by N = 5.
RATIOS = [[1.5, 0.5, 1.0], [1.0, 0.7, 3.5]]
MASK = [[1, 1, 0], [1, 1, 1]]
ADV = [1.0, -1.0]


def example():
    old = torch.tensor([[-1.0] * 3, [-2.0] * 3], dtype=F64)
    logp = (old + torch.tensor(RATIOS, dtype=F64).log()).requires_grad_()
    return logp, old, torch.tensor(ADV, dtype=F64), torch.tensor(MASK)


def grad_of(out, logp):
    logp.grad = None
    out.loss.backward()
    return logp.grad


def close(actual, expected, atol=1e-6):
    actual = torch.as_tensor(actual)
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype),
                               atol=atol, rtol=0)


# --------------------------------------------------------------------------- ppo

def test_ppo_hand_computed():
    # L = max(-r A, -clip(r, 0.8, 1.2) A):
    #   row 0 (A=+1): r=1.5 -> max(-1.5, -1.2) = -1.2  (clipped high: gradient 0)
    #                 r=0.5 -> max(-0.5, -0.8) = -0.5  (A > 0: the low bound does not bite)
    #   row 1 (A=-1): r=1.0 -> 1.0;  r=0.7 -> max(0.7, 0.8) = 0.8 (clipped low: gradient 0)
    #                 r=3.5 -> max(3.5, 1.2) = 3.5     (A < 0 and r high: not clipped)
    # token_mean = (-1.2 - 0.5 + 1.0 + 0.8 + 3.5) / 5 = 3.6 / 5 = 0.72
    # d/dlogp of -r A is -A r, divided by N = 5: row 0 [0, -0.1, 0], row 1 [0.2, 0, 0.7]
    logp, old, adv, mask = example()
    out = ppo_loss(logp, old, adv, mask)
    close(out.loss, 0.72)
    close(grad_of(out, logp), [[0, -0.1, 0], [0.2, 0, 0.7]])
    m = out.metrics
    close(m["clip_frac_low"], 0.2)   # 1 of 5 tokens
    close(m["clip_frac_high"], 0.2)  # 1 of 5 tokens
    close(m["ratio_mean"], 7.2 / 5)  # (1.5 + 0.5 + 1.0 + 0.7 + 3.5) / 5
    close(m["ratio_min"], 0.5)
    close(m["ratio_max"], 3.5)
    close(m["policy_loss"], 0.72)
    assert "kl_ref" not in m and "dual_clip_frac" not in m
    assert all(not v.requires_grad and v.dim() == 0 for v in m.values())


def test_ppo_dual_clip_caps_negative_advantage_loss():
    # dual_clip = 3: for A < 0 the loss is capped at -3 A = 3, so r = 3.5 gives 3, not 3.5,
    # and that token loses its gradient. token_mean = (-1.2 - 0.5 + 1.0 + 0.8 + 3.0) / 5 = 0.62
    logp, old, adv, mask = example()
    out = ppo_loss(logp, old, adv, mask, dual_clip=3.0)
    close(out.loss, 0.62)
    close(out.metrics["dual_clip_frac"], 0.2)
    close(grad_of(out, logp), [[0, -0.1, 0], [0.2, 0, 0]])


def test_ppo_asymmetric_bounds():
    # Clip-higher: ratio_high = 1.6 lets r = 1.5 through (loss -1.5, gradient -1.5/5 = -0.3).
    logp, old, adv, mask = example()
    out = ppo_loss(logp, old, adv, mask, ratio_low=0.8, ratio_high=1.6)
    close(out.loss, (-1.5 - 0.5 + 1.0 + 0.8 + 3.5) / 5)
    close(out.metrics["clip_frac_high"], 0.0)
    close(grad_of(out, logp)[0, 0], -0.3)


# --------------------------------------------------------------------------- cispo

def test_cispo_hand_computed_and_weight_is_detached():
    # L = -sg(clip(r, 0, 5)) * A * logp; nothing is clipped with the defaults:
    #   row 0: -1.5 * 1 * -0.594535 = 0.891802;   -0.5 * 1 * -1.693147 = 0.846574
    #   row 1: -1.0 * -1 * -2.0 = -2.0;  -0.7 * -1 * -2.356675 = -1.649672;
    #          -3.5 * -1 * -0.747237 = -2.615330
    # token_mean = (0.891802 + 0.846574 - 2.0 - 1.649672 - 2.615330) / 5 = -0.905325
    # With the weight detached, dL/dlogp = -w A / 5: row 0 [-0.3, -0.1], row 1 [0.2, 0.14, 0.7].
    # Had the weight kept its gradient (w = r depends on logp), row 0 token 0 would get
    # -A (r + r logp) / 5 = -(1.5 - 0.891802) / 5 = -0.121640 instead of -0.3.
    logp, old, adv, mask = example()
    out = cispo_loss(logp, old, adv, mask)
    close(out.loss, -0.905325)
    close(grad_of(out, logp), [[-0.3, -0.1, 0], [0.2, 0.14, 0.7]])
    close(out.metrics["clip_frac_low"], 0.0)
    close(out.metrics["clip_frac_high"], 0.0)


def test_cispo_clipped_weights_keep_a_bounded_gradient():
    # Bounds [0.8, 2]: r = 0.5 and 0.7 get weight 0.8, r = 3.5 gets weight 2; unlike PPO no
    # token loses its gradient: row 0 [-1.5, -0.8] / 5, row 1 [1.0, 0.8, 2.0] / 5.
    logp, old, adv, mask = example()
    out = cispo_loss(logp, old, adv, mask, ratio_low=0.8, ratio_high=2.0)
    close(grad_of(out, logp), [[-0.3, -0.16, 0], [0.2, 0.16, 0.4]])
    close(out.metrics["clip_frac_low"], 0.4)   # r = 0.5 and 0.7, whatever the sign of A
    close(out.metrics["clip_frac_high"], 0.2)  # r = 3.5


# --------------------------------------------------------------------------- importance sampling

def test_importance_sampling_hand_computed():
    # L = -r A: row 0 [-1.5, -0.5], row 1 [1.0, 0.7, 3.5]; token_mean = 3.2 / 5 = 0.64.
    # Gradient -A r / 5 = CISPO's while nothing is clipped.
    logp, old, adv, mask = example()
    out = importance_sampling_loss(logp, old, adv, mask)
    close(out.loss, 0.64)
    close(grad_of(out, logp), [[-0.3, -0.1, 0], [0.2, 0.14, 0.7]])
    assert out.metrics["clip_frac_low"] == 0 and out.metrics["clip_frac_high"] == 0


# --------------------------------------------------------------------------- gspo

S0 = math.sqrt(1.5 * 0.5)           # geometric mean of row 0's ratios = 0.866025
S1 = (1.0 * 0.7 * 3.5) ** (1 / 3)   # row 1: 2.45^(1/3) = 1.348100


def test_gspo_sequence_ratio_clipping():
    # Advantages [-1, +1], bounds [0.9, 1.1]:
    #   row 0 (A=-1): s = 0.866 < 0.9 -> max(0.866, 0.9) = 0.9 on both tokens, clipped low
    #   row 1 (A=+1): s = 1.348 > 1.1 -> max(-1.348, -1.1) = -1.1 on 3 tokens, clipped high
    # token_mean = (2 * 0.9 - 3 * 1.1) / 5 = -0.3; every token clipped -> zero gradient.
    logp, old, _, mask = example()
    adv = torch.tensor([-1.0, 1.0], dtype=F64)
    out = gspo_loss(logp, old, adv, mask, ratio_low=0.9, ratio_high=1.1)
    close(out.loss, -0.3)
    close(out.metrics["clip_frac_low"], 0.4)
    close(out.metrics["clip_frac_high"], 0.6)
    close(out.metrics["ratio_mean"], (2 * S0 + 3 * S1) / 5)
    close(out.metrics["ratio_min"], S0)
    close(grad_of(out, logp), torch.zeros(2, 3))


def test_gspo_token_form_matches_sequence_level_gspo():
    # Unclipped (bounds [0.5, 2]) with seq_mean_token_mean:
    #   loss = (-(-1) * 0.866025 + -(1) * 1.348100) / 2 = -0.241037
    #   dL/dlogp_t = -A_i s_i / (|y_i| * 2): row 0 +0.866025/4 = 0.216506,
    #   row 1 -1.348100/6 = -0.224683
    logp, old, _, mask = example()
    adv = torch.tensor([-1.0, 1.0], dtype=F64)
    out = gspo_loss(logp, old, adv, mask, ratio_low=0.5, ratio_high=2.0,
                    aggregation="seq_mean_token_mean")
    close(out.loss, -0.241037)
    grad = grad_of(out, logp)
    close(grad, [[0.216506, 0.216506, 0], [-0.224683, -0.224683, -0.224683]])
    # The same gradient from the paper's sequence-level objective, written directly.
    logp2 = logp.detach().clone().requires_grad_()
    m = mask.bool()
    s = (torch.where(m, logp2 - old, 0.0).sum(1) / m.sum(1)).exp()
    (-(s * adv).mean()).backward()
    close(grad, logp2.grad, atol=1e-12)


# --------------------------------------------------------------------------- aggregations

def test_aggregations_hand_computed():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    # token_mean: (1 + 2 + 4) / 3 = 7/3
    close(token_mean(x, mask), 7 / 3)
    # seq_mean_token_mean: (mean(1, 2) + mean(4)) / 2 = (1.5 + 4) / 2 = 2.75
    close(seq_mean_token_mean(x, mask), 2.75)
    # token_sum_norm: (1 + 2 + 4) / (2 rows * 5 max_tokens) = 0.7
    close(token_sum_norm(x, mask, max_tokens=5), 0.7)
    # denominator override (micro-batching): the numerator divided by the given count
    close(token_mean(x, mask, denominator=7), 1.0)
    close(seq_mean_token_mean(x, mask, denominator=5.5), 1.0)
    close(token_sum_norm(x, mask, denominator=14), 0.5)
    # a sequence without trainable tokens is left out of the sequence mean
    close(seq_mean_token_mean(x, torch.tensor([[1, 1, 0], [0, 0, 0]])), 1.5)


def test_empty_mask_gives_zero_loss_zero_gradient_and_finite_metrics():
    logp, old, adv, _ = example()
    empty = torch.zeros(2, 3, dtype=torch.long)
    for name in LOSSES:
        for agg in AGGREGATIONS:
            out = compute_loss(name, logp, old, adv, empty, aggregation=agg, max_tokens=4,
                               ref_logp=old, kl_coef=0.1)
            assert out.loss.item() == 0.0
            assert grad_of(out, logp).abs().sum() == 0
            assert all(torch.isfinite(v) for v in out.metrics.values()), (name, agg)


# --------------------------------------------------------------------------- KL and TIS

def test_kl_k3_hand_computed():
    # k3 = exp(d) - d - 1 with d = ref - logp:
    #   d = log 2  -> 2 - 0.693147 - 1 = 0.306853;  d = -log 2 -> 0.5 + 0.693147 - 1 = 0.193147
    logp = torch.zeros(3, dtype=F64)
    ref = torch.tensor([math.log(2), -math.log(2), 0.0], dtype=F64)
    close(kl_k3(logp, ref), [0.306853, 0.193147, 0.0])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-30, 0), min_size=1, max_size=8), st.data())
def test_kl_k3_is_nonnegative_and_zero_when_equal(logps, data):
    refs = data.draw(st.lists(st.floats(-30, 0), min_size=len(logps), max_size=len(logps)))
    logp, ref = torch.tensor(logps, dtype=F64), torch.tensor(refs, dtype=F64)
    kl = kl_k3(logp, ref)
    assert (kl >= 0).all() and torch.isfinite(kl).all()
    assert (kl_k3(logp, logp) == 0).all()


def test_kl_penalty_is_added_with_its_coefficient():
    # ref = logp + d with d = [log 2, -log 2, -] on row 0 and 0 on row 1:
    #   k3 = [0.306853, 0.193147] on row 0 -> masked mean 0.5 / 5 = 0.1
    #   loss = IS 0.64 + 0.5 * 0.1 = 0.69; policy_loss stays 0.64
    #   d k3 / d logp = 1 - exp(d): -1 and +0.5, times 0.5 / 5 -> -0.1 and +0.05 on row 0
    logp, old, adv, mask = example()
    d = torch.tensor([[math.log(2), -math.log(2), 0.0], [0.0, 0.0, 0.0]], dtype=F64)
    ref = logp.detach() + d
    out = importance_sampling_loss(logp, old, adv, mask, ref_logp=ref, kl_coef=0.5)
    close(out.loss, 0.69)
    close(out.metrics["policy_loss"], 0.64)
    close(out.metrics["kl_ref"], 0.1)
    close(grad_of(out, logp), [[-0.4, -0.05, 0], [0.2, 0.14, 0.7]])
    # kl_coef = 0 still reports the KL, without adding it
    out = importance_sampling_loss(logp, old, adv, mask, ref_logp=ref)
    close(out.loss, 0.64)
    close(out.metrics["kl_ref"], 0.1)


def test_truncated_importance_weights_hand_computed():
    # old - sampler = [[log 3, log 0.5, (10)], [0, log 1.5, log 0.25]], cap 2:
    #   weights [[2 (capped), 0.5, 1 (masked)], [1, 1.5, 0.25]]
    #   mean over 5 tokens = (2 + 0.5 + 1 + 1.5 + 0.25) / 5 = 1.05; at the cap: 1 of 5
    #   sampler_kl: k3(d) = e^d - d - 1 = 0.901388, 0.193147, 0, 0.094535, 0.636294 -> /5 = 0.365073
    _, old, adv, mask = example()
    d = torch.tensor([[math.log(3), math.log(0.5), 10.0],
                      [0.0, math.log(1.5), math.log(0.25)]], dtype=F64)
    tis = truncated_importance_weights(old, old - d, mask, cap=2.0)
    close(tis.weights, [[2, 0.5, 1], [1, 1.5, 0.25]])
    assert not tis.weights.requires_grad
    close(tis.metrics["tis_weight_mean"], 1.05)
    close(tis.metrics["tis_clip_frac"], 0.2)
    close(tis.metrics["sampler_kl"], 0.365073)
    # Applied to the IS loss: -r A w = [-3, -0.25], [1, 1.05, 0.875] -> -0.325 / 5 = -0.065
    logp, old, adv, mask = example()
    out = importance_sampling_loss(logp, old, adv, mask, is_weights=tis.weights)
    close(out.loss, -0.065)
    close(out.metrics["is_weight_mean"], 1.05)


# --------------------------------------------------------------------------- gradients

@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradients_flow_only_through_current_logprobs(name):
    logp, old, adv, mask = example()
    old.requires_grad_()
    adv.requires_grad_()
    ref = (logp.detach() - 0.1).requires_grad_()
    weights = torch.full((2, 3), 0.9, dtype=F64, requires_grad=True)
    out = compute_loss(name, logp, old, adv, mask, ref_logp=ref, kl_coef=0.1,
                       is_weights=weights)
    out.loss.backward()
    assert logp.grad is not None and logp.grad.abs().sum() > 0
    for other in (old, adv, ref, weights):
        assert other.grad is None


@settings(max_examples=40, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(1, 5))
def test_all_losses_share_the_on_policy_gradient(data, rows, cols):
    # At logp == old_logp every ratio is 1 and nothing is clipped, so all four losses give
    # the vanilla policy gradient: dL/dlogp = -A * mask / N with token_mean.
    floats = st.floats(-5, 5, allow_nan=False)
    logp0 = torch.tensor(data.draw(st.lists(st.lists(floats, min_size=cols, max_size=cols),
                                            min_size=rows, max_size=rows)), dtype=F64)
    mask = torch.tensor(data.draw(st.lists(st.lists(st.integers(0, 1), min_size=cols,
                                                    max_size=cols), min_size=rows,
                                           max_size=rows)))
    adv = torch.tensor(data.draw(st.lists(floats, min_size=rows, max_size=rows)), dtype=F64)
    expected = -adv[:, None] * mask / mask.sum().clamp(min=1)
    for name in LOSSES:
        logp = logp0.clone().requires_grad_()
        out = compute_loss(name, logp, logp0, adv, mask)
        close(grad_of(out, logp), expected, atol=1e-9)
        assert out.metrics["clip_frac_low"] == 0 and out.metrics["clip_frac_high"] == 0


def test_nan_and_inf_off_the_mask_never_leak():
    logp, old, _, mask = example()
    off = ~mask.bool()
    bad_old = old.masked_fill(off, float("nan"))
    bad_logp = logp.detach().masked_fill(off, -float("inf")).requires_grad_()
    adv = torch.tensor([[1.0, 1.0, float("nan")], [-1.0, -1.0, -1.0]], dtype=F64)
    ref = old.masked_fill(off, float("nan"))
    weights = torch.ones(2, 3, dtype=F64).masked_fill(off, float("inf"))
    for name in LOSSES:
        out = compute_loss(name, bad_logp, bad_old, adv, mask, ref_logp=ref, kl_coef=0.1,
                           is_weights=weights, aggregation="seq_mean_token_mean")
        grad = grad_of(out, bad_logp)
        assert torch.isfinite(out.loss) and torch.isfinite(grad).all(), name
        assert grad[0, 2] == 0
        assert all(torch.isfinite(v) for v in out.metrics.values()), name


def test_per_token_advantages_equal_broadcast_sequence_advantages():
    logp, old, adv, mask = example()
    a = ppo_loss(logp, old, adv, mask).loss
    b = ppo_loss(logp, old, adv[:, None].expand(2, 3), mask).loss
    close(a, b, atol=0)


def test_masked_mean():
    close(masked_mean(torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([1, 0, 1])), 2.0)
    assert masked_mean(torch.tensor([5.0]), torch.tensor([0])) == 0


# --------------------------------------------------------------------------- selection and errors

def test_registry_names():
    assert set(LOSSES) == {"ppo", "cispo", "importance_sampling", "gspo"}
    assert set(AGGREGATIONS) == {"token_mean", "seq_mean_token_mean", "token_sum_norm"}
    assert get_loss("cispo") is cispo_loss
    assert get_aggregation("token_mean") is token_mean


def test_unknown_names_suggest_close_matches():
    with pytest.raises(ConfigError, match=r"unknown loss 'ppo2'\. Did you mean 'ppo'.*"
                                          r"Valid: cispo, gspo, importance_sampling, ppo"):
        get_loss("ppo2")
    with pytest.raises(ConfigError, match=r"unknown aggregation 'token-mean'\. Did you mean "
                                          r"'token_mean'"):
        get_aggregation("token-mean")
    logp, old, adv, mask = example()
    with pytest.raises(ConfigError, match=r"unknown aggregation 'seq_mean'\. Did you mean "
                                          r"'seq_mean_token_mean'"):
        ppo_loss(logp, old, adv, mask, aggregation="seq_mean")


def test_option_and_value_errors():
    logp, old, adv, mask = example()
    with pytest.raises(ConfigError, match=r"loss 'cispo' got unknown option\(s\) 'dual_clip'; "
                                          r"it accepts: aggregation, denominator, is_weights, "
                                          r"kl_coef, max_tokens, ratio_high, ratio_low, ref_logp"):
        compute_loss("cispo", logp, old, adv, mask, dual_clip=3.0)
    with pytest.raises(ConfigError, match=r"`kl_coef` is 0.1 but no `ref_logp` was given"):
        ppo_loss(logp, old, adv, mask, kl_coef=0.1)
    with pytest.raises(ConfigError, match=r"0 <= ratio_low <= 1 <= ratio_high, got "
                                          r"ratio_low=1.2, ratio_high=0.8"):
        ppo_loss(logp, old, adv, mask, ratio_low=1.2, ratio_high=0.8)
    with pytest.raises(ConfigError, match=r"`dual_clip` must be > 1 \(or None to disable\), "
                                          r"got 0.5"):
        ppo_loss(logp, old, adv, mask, dual_clip=0.5)
    with pytest.raises(ConfigError, match=r"aggregation 'token_sum_norm' needs `max_tokens` >= 1"):
        ppo_loss(logp, old, adv, mask, aggregation="token_sum_norm")
    with pytest.raises(ConfigError, match=r"`denominator` must be a finite number > 0, got 0"):
        token_mean(logp, mask, denominator=0)
    with pytest.raises(ConfigError, match=r"`cap` must be >= 1"):
        truncated_importance_weights(old, old, mask, cap=0.5)
    with pytest.raises(ValueError, match=r"`advantages` must have shape \[batch\]=2 or "
                                         r"\[batch, seq\]=\(2, 3\), got \(3,\)"):
        ppo_loss(logp, old, torch.zeros(3), mask)
    with pytest.raises(ValueError, match=r"`old_logp` has shape \(2, 2\) but `mask` has \(2, 3\)"):
        ppo_loss(logp, old[:, :2], adv, mask)
