"""FormatPenalty: pinned penalties, bounds alone and stacked, both stacking orders agree."""

import gymnasium
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wrapper_helpers import G, games, play, tier_interval

from mtrl_gym.envs.wordle.env import solve_reward
from mtrl_gym.error import ConfigError
from mtrl_gym.wrappers import FormatPenalty, WordleShaping

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def wordle():
    return gymnasium.make("mtrl/Wordle-v0")


def test_penalties_pinned():
    env = FormatPenalty(wordle(), format_error=0.5, loose_match=0.2, scale=2.0)
    _, steps = play(env, ["no tool call here", "My guess: CRANE", G("slate"),
                          '<tool_call>{"name": "guess_word", "arguments": {}}</tool_call>'],
                    options={"answer": "paste"})
    assert [s[4]["reward_components"]["terms"] for s in steps] == [
        {"format_penalty": -0.25}, {"loose_match": -0.1}, {}, {"format_penalty": -0.25}]
    assert steps[1][4]["loose_match"] and steps[3][4]["error"] == "bad_arguments"
    assert steps[-1][4]["reward_components"]["shaping"] == pytest.approx(-0.6)


@SETTINGS
@given(game=games(), per_turn=st.booleans())
def test_alone_it_only_lowers_rewards_and_keeps_the_tiers(game, per_turn):
    answer, actions = game
    bare = play(wordle(), actions, options={"answer": answer})[1]
    _, steps = play(FormatPenalty(wordle(), per_turn=per_turn), actions, options={"answer": answer})
    assert [(s[0], s[2], s[3]) for s in steps] == [(s[0], s[2], s[3]) for s in bare]
    info = steps[-1][4]
    total = sum(s[1] for s in steps)
    lo, hi = tier_interval(info)
    assert lo <= total <= hi and total <= bare[-1][1]
    if info["solved"]:
        assert solve_reward(info["guesses_used"]) - 0.04 <= total >= 1.01


@SETTINGS
@given(game=games(), per_turn=st.booleans())
def test_both_stacking_orders_give_the_same_rewards(game, per_turn):
    answer, actions = game
    a = FormatPenalty(WordleShaping(wordle()), per_turn=per_turn)
    b = WordleShaping(FormatPenalty(wordle()), per_turn=per_turn)
    _, sa = play(a, actions, options={"answer": answer})
    _, sb = play(b, actions, options={"answer": answer})
    assert [s[1] for s in sa] == [s[1] for s in sb]
    assert [s[4]["reward_components"]["terms"] for s in sa] == [s[4]["reward_components"]["terms"] for s in sb]
    lo, hi = tier_interval(sa[-1][4])
    assert lo <= sum(s[1] for s in sa) <= hi


@pytest.mark.parametrize("kwargs, match", [
    ({"format_error": -0.5}, r"`format_error` must be >= 0, got -0.5; penalties are given as positive amounts"),
    ({"loose_match": "high"}, r"`loose_match` must be a finite number, got 'high'"),
    ({"success_weight": 0.1}, r"`success_weight` must be <= 0.04 for WordleEnv"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        FormatPenalty(wordle(), **kwargs)
