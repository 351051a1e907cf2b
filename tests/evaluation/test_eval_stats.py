"""pass@k against exact combinatorics, and bootstrap interval sanity."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.stats import (bootstrap_ci, default_ks, paired_bootstrap_ci, pass_at_k,
                                       pass_at_k_per_task)


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """1 - C(n - c, k) / C(n, k) in exact rational arithmetic."""
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def enumerated_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """The fraction of all k-subsets of n samples (c successes) that hold a success."""
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(samples[i] for i in s) for s in subsets), len(subsets))


@pytest.mark.parametrize("n,c,k", [(n, c, k) for n in range(1, 9) for c in range(n + 1) for k in range(1, n + 1)])
def test_pass_at_k_equals_enumeration_of_all_subsets(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(float(enumerated_pass_at_k(n, c, k)), abs=1e-12)


@pytest.mark.parametrize("n,c,k,expected", [
    (8, 2, 1, Fraction(1, 4)), (8, 2, 4, Fraction(11, 14)), (10, 1, 5, Fraction(1, 2)),
    (5, 0, 3, Fraction(0)), (5, 3, 3, Fraction(1)), (4, 4, 1, Fraction(1)), (1, 1, 1, Fraction(1)),
])
def test_pass_at_k_hand_values(n, c, k, expected):
    assert exact_pass_at_k(n, c, k) == expected
    assert pass_at_k(n, c, k) == pytest.approx(float(expected), abs=1e-15)


@given(st.integers(1, 400).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
@settings(max_examples=300, deadline=None)
def test_pass_at_k_matches_exact_rational_for_large_n(nck):
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(float(exact_pass_at_k(n, c, k)), rel=1e-9, abs=1e-12)


def test_pass_at_1_is_the_success_rate_and_pass_at_k_grows_with_k():
    successes = np.array([[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]])
    assert pass_at_k_per_task(successes, 1).tolist() == pytest.approx([0.25, 0.75, 0.0])
    curve = [pass_at_k_per_task(successes, k).mean() for k in (1, 2, 3, 4)]
    assert curve == sorted(curve) and curve[-1] == pytest.approx(2 / 3)


@pytest.mark.parametrize("bad", [(0, 0, 1), (4, 5, 1), (4, 2, 0), (4, 2, 5), (4, -1, 1)])
def test_pass_at_k_rejects_impossible_arguments(bad):
    with pytest.raises(ValueError):
        pass_at_k(*bad)


def test_default_ks():
    assert default_ks(1) == [1]
    assert default_ks(8) == [1, 2, 4, 8]
    assert default_ks(12) == [1, 2, 4, 8]


def test_bootstrap_interval_contains_mean_and_narrows_with_more_tasks():
    rng = np.random.default_rng(0)
    small = rng.random(20) < 0.4
    large = rng.random(2000) < 0.4
    a = bootstrap_ci(small, seed=1)
    b = bootstrap_ci(large, seed=1)
    assert a.low <= a.value <= a.high and b.low <= b.value <= b.high
    assert (b.high - b.low) < (a.high - a.low) / 5  # width shrinks like 1/sqrt(tasks)
    assert 0.0 <= a.low and a.high <= 1.0


def test_bootstrap_interval_matches_normal_theory():
    x = (np.arange(400) % 10 < 3).astype(float)  # 30% successes, 400 tasks
    ci = bootstrap_ci(x, confidence=0.95, resamples=4000, seed=3)
    half = 1.96 * math.sqrt(0.3 * 0.7 / 400)
    assert ci.value == pytest.approx(0.3)
    assert ci.low == pytest.approx(0.3 - half, abs=0.01)
    assert ci.high == pytest.approx(0.3 + half, abs=0.01)


def test_bootstrap_coverage_is_close_to_nominal():
    rng = np.random.default_rng(7)
    hits = 0
    trials = 200
    for i in range(trials):
        x = rng.normal(1.0, 2.0, size=60)
        ci = bootstrap_ci(x, confidence=0.9, resamples=500, seed=i)
        hits += ci.low <= 1.0 <= ci.high
    assert 0.8 <= hits / trials <= 0.97


def test_bootstrap_degenerate_inputs_and_determinism():
    const = bootstrap_ci([0.5] * 10)
    assert (const.value, const.low, const.high) == (0.5, 0.5, 0.5)
    one = bootstrap_ci([0.7])
    assert one.low == one.high == 0.7
    assert math.isnan(bootstrap_ci([]).value)
    assert bootstrap_ci([0, 1, 1, 0, 1], seed=5) == bootstrap_ci([0, 1, 1, 0, 1], seed=5)
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0], confidence=1.0)


def test_paired_interval_resolves_a_difference_that_separate_intervals_do_not():
    rng = np.random.default_rng(0)
    difficulty = rng.random(60)
    base = difficulty
    better = np.clip(difficulty + 0.05, 0, 1)  # the same tasks, each a little easier
    separate = bootstrap_ci(better), bootstrap_ci(base)
    assert separate[0].low < separate[1].high  # the two intervals overlap
    diff = paired_bootstrap_ci(better, base)
    assert diff.low > 0  # but the paired difference is clearly positive
    with pytest.raises(ValueError, match="same tasks"):
        paired_bootstrap_ci([1, 2], [1, 2, 3])
