"""BoundedShaping: the generic base, stacking into one budget, validation, spec round trip."""

import math
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from wrapper_helpers import ACTIONS, G, games, play, tier_interval

from mtrl_gym.envs.wordle.env import solve_reward
from mtrl_gym.error import ConfigError
from mtrl_gym.wrappers import BoundedShaping, FormatPenalty, PriorGuesses, RecordEpisodes, WordleShaping, tier_limits
from mtrl_gym.wrappers.shaping import SHAPING_GRID


class Corridor(gymnasium.Env):
    """A tiny non-Wordle env: walk right (1) or left (0); 5 steps; reward 2 at the end if x >= 3,
    plus 0.5 on every step that moves right (so intermediate rewards are not zero)."""

    observation_space = spaces.Discrete(10)
    action_space = spaces.Discrete(2)
    success_threshold = 2.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = 0, 0
        return self.x, {}

    def step(self, action):
        self.t += 1
        self.x = max(0, self.x + (1 if action == 1 else -1))
        done = self.t == 5
        reward = 0.5 * (action == 1) + (2.0 if done and self.x >= 3 else 0.0)
        return self.x, reward, done, False, {"moved_right": action == 1}


def right_bonus(info):
    return {"right": 0.4 if info["moved_right"] else -0.4}


def run(env, actions, seed=0):
    env.reset(seed=seed)
    return [env.step(a) for a in actions]


def test_generic_env_final_and_per_turn_modes():
    actions = [1, 1, 0, 1, 1]
    final = run(BoundedShaping(Corridor(), right_bonus, success_weight=0.3, failure_weight=0.2), actions)
    per_turn = run(BoundedShaping(Corridor(), right_bonus, success_weight=0.3, failure_weight=0.2, per_turn=True),
                   actions)
    s = 0.4 * 4 - 0.4  # 1.2 -> clipped to 1
    env_return = 0.5 * 4 + 2.0
    assert [r for _, r, *_ in final[:-1]] == [0.5, 0.5, 0.0, 0.5]  # env rewards pass through
    comp = final[-1][4]["reward_components"]
    assert comp["shaping"] == pytest.approx(s) and comp["clipped"] == 1.0 and comp["weight"] == 0.3
    assert sum(r for _, r, *_ in final) == pytest.approx(env_return + 0.3, abs=1e-12)
    assert math.isclose(sum(r for _, r, *_ in per_turn), sum(r for _, r, *_ in final), rel_tol=0, abs_tol=1e-12)
    assert per_turn[0][1] == 0.5 + math.trunc(0.2 * 0.4 / SHAPING_GRID) * SHAPING_GRID


def test_failure_weight_when_the_success_threshold_is_missed():
    steps = run(BoundedShaping(Corridor(), right_bonus, success_weight=0.3, failure_weight=0.2), [0, 0, 0, 0, 0])
    comp = steps[-1][4]["reward_components"]
    assert comp["weight"] == 0.2 and comp["clipped"] == -1.0
    assert steps[-1][1] == -math.trunc(0.2 / SHAPING_GRID) * SHAPING_GRID


def test_tier_limits_come_from_the_env_profile():
    assert tier_limits(gymnasium.make("mtrl/Wordle-v0")) == (0.04, 0.15)
    assert tier_limits(Corridor()) is None
    BoundedShaping(Corridor(), right_bonus, success_weight=5.0, failure_weight=5.0)  # the user's call


@pytest.mark.parametrize("kwargs, match", [
    ({}, r"BoundedShaping needs `terms`"),
    ({"terms": 3}, r"`terms` must be a function info -> \{name: value\}, got 3"),
    ({"terms": right_bonus, "success_weight": True}, r"`success_weight` must be a finite number, got True"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        BoundedShaping(Corridor(), **kwargs)


def test_terms_that_are_not_a_mapping_are_reported():
    env = BoundedShaping(Corridor(), lambda info: 0.5)
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"shaping terms must be a mapping \{name: value\}, got 0.5"):
        env.step(1)


@pytest.mark.parametrize("wrap", [
    lambda e, p: WordleShaping(e, per_turn=True),
    lambda e, p: FormatPenalty(e),
    lambda e, p: RecordEpisodes(FormatPenalty(WordleShaping(PriorGuesses(e))), p),
])
def test_gymnasium_checker_passes(tmp_path, wrap):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped.*")
        check_env(wrap(gymnasium.make("mtrl/Wordle-v0"), tmp_path / "e.jsonl"), skip_render_check=True)


def test_non_finite_term_is_reported():
    env = BoundedShaping(Corridor(), lambda info: {"bad": float("nan")})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shaping term 'bad' is nan"):
        env.step(1)


# ------------------------------------------------------------------ stacking: one budget


def test_stacked_layers_share_one_budget_and_the_outer_layer_decides():
    inner = WordleShaping(gymnasium.make("mtrl/Wordle-v0"), success_weight=0.01, per_turn=True)
    outer = BoundedShaping(inner, lambda info: {"extra": 0.2})
    _, steps = play(outer, [G("crane"), G("paste")], options={"answer": "paste"})
    comp = steps[-1][4]["reward_components"]
    assert set(comp["terms"]) == {"valid_guess", "new_letter", "elimination", "extra"}
    assert steps[0][1] == 0.0  # the outer layer is per_turn=False: the inner increments are replaced
    assert comp["weight"] == 0.04 and comp["outcome"] == solve_reward(2)
    assert steps[-1][1] == solve_reward(2) + math.trunc(0.04 * comp["clipped"] / SHAPING_GRID) * SHAPING_GRID


def test_a_reward_transform_between_layers_is_kept():
    inner = WordleShaping(gymnasium.make("mtrl/Wordle-v0"))
    middle = gymnasium.wrappers.TransformReward(inner, lambda r: r + 1.0)
    outer = FormatPenalty(middle)
    _, steps = play(outer, ["no call", G("paste")], options={"answer": "paste"})
    assert steps[0][4]["reward_components"]["outcome"] == 1.0
    assert steps[-1][4]["reward_components"]["outcome"] == pytest.approx(solve_reward(1) + 1.0, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(game=games(), per_turn=st.booleans())
def test_deep_stacks_stay_in_their_tier(game, per_turn):
    answer, actions = game
    env = gymnasium.make("mtrl/Wordle-v0")
    env = FormatPenalty(WordleShaping(FormatPenalty(env, per_turn=True), per_turn=True), per_turn=per_turn)
    _, steps = play(env, actions, options={"answer": answer})
    lo, hi = tier_interval(steps[-1][4])
    assert lo <= sum(s[1] for s in steps) <= hi


# ------------------------------------------------------------------ spec round trip


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), actions=st.lists(ACTIONS, min_size=1, max_size=13))
def test_make_from_spec_rebuilds_the_same_shaped_env(seed, actions):
    env = FormatPenalty(WordleShaping(gymnasium.make("mtrl/Wordle-v0"), weights={"opener": 0.5}, per_turn=True),
                        loose_match=0.1)
    twin = gymnasium.make(env.spec)
    assert isinstance(twin, FormatPenalty) and twin.loose_match == 0.1 and twin.env.weights["opener"] == 0.5
    a, b = play(env, actions, seed=seed), play(twin, actions, seed=seed)
    assert a[0][0] == b[0][0]
    assert [(s[0], s[1], s[2], s[3]) for s in a[1]] == [(s[0], s[1], s[2], s[3]) for s in b[1]]
    assert all(np.isfinite(s[1]) for s in a[1])
