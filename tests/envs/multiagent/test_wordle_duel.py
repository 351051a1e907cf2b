"""Wordle Duel: the rules, rewards, secrets, hostile text and determinism across processes."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("pettingzoo")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mtrl_gym.envs.multiagent import policies  # noqa: E402
from cross_process import game_digests  # noqa: E402
from mtrl_gym.envs.multiagent.wordle_duel import DuelGame, parallel_env  # noqa: E402
from mtrl_gym.envs.wordle.solver import format_guess  # noqa: E402
from mtrl_gym.error import ConfigError, InvalidTask  # noqa: E402
from mtrl_gym.registry import make_multiagent  # noqa: E402

P0, P1 = "player_0", "player_1"


def test_first_to_solve_wins_zero_sum():
    env = parallel_env()
    env.reset(options={"answer": "paste"})
    obs, rewards, terms, truncs, infos = env.step({P0: format_guess("paste"), P1: format_guess("crane")})
    assert rewards == {P0: 1.0, P1: -1.0}
    assert terms == {P0: True, P1: True} and truncs == {P0: False, P1: False}
    assert infos[P0]["outcome"] == "win" and infos[P1]["outcome"] == "loss"
    assert infos[P0]["winner"] == P0 and infos[P1]["success"] is False
    assert "you lose" in obs[P1]["text"] and env.agents == []


def test_both_solving_in_the_same_cycle_is_a_draw_and_moving_second_reveals_nothing():
    env = parallel_env()
    obs, _ = env.reset(options={"answer": "paste"})
    obs, rewards, terms, _, infos = env.step({P0: format_guess("crane"), P1: format_guess("slate")})
    # Each seat sees the other's guess only after the cycle, with the clues of both boards combined.
    assert "Opponent's guess 1/6: SLATE" in obs[P0]["text"] and "Guessed: CRANE, SLATE" in obs[P0]["text"]
    assert infos[P0]["opponent_guess"] == "slate" and infos[P1]["opponent_guess"] == "crane"
    obs, rewards, terms, _, infos = env.step({P0: format_guess("paste"), P1: format_guess("paste")})
    assert rewards == {P0: 0.0, P1: 0.0} and all(terms.values())
    assert infos[P0]["outcome"] == infos[P1]["outcome"] == "draw"
    assert "same turn" in obs[P0]["text"]


def test_invalid_actions_use_the_turn_not_a_guess_as_in_wordle():
    env = parallel_env()
    env.reset(options={"answer": "paste"})
    _, _, _, _, infos = env.step({P0: "no guess here", P1: format_guess("zzzzz")})
    assert infos[P0]["format_error"] and infos[P0]["error"] == "no_guess" and infos[P0]["guesses_used"] == 0
    assert infos[P1]["error"] == "not_in_dictionary" and infos[P1]["guesses_used"] == 0
    assert infos[P0]["cycle"] == 1


def test_a_seat_out_of_guesses_waits_and_the_turn_limit_is_a_truncated_draw():
    env = parallel_env(max_cycles=8)
    env.reset(options={"answer": "paste"})
    words = ["crane", "slate", "pious", "audio", "riser", "other"]
    for w in words:
        _, rewards, terms, truncs, infos = env.step({P0: format_guess(w), P1: "pass"})
    assert infos[P0]["waiting"] and not infos[P1]["waiting"] and not any(terms.values())
    _, _, _, _, infos = env.step({P0: format_guess("paste"), P1: "pass"})  # ignored: P0 is waiting
    assert infos[P0]["guess"] is None and not infos[P0]["solved"]
    obs, rewards, terms, truncs, infos = env.step({P1: "still nothing"})
    assert truncs == {P0: True, P1: True} and not any(terms.values())
    assert rewards == {P0: 0.0, P1: 0.0} and infos[P0]["outcome"] == "draw" and infos[P0]["answer"] == "paste"
    assert "turn limit (8)" in obs[P1]["text"]


def test_the_secret_and_the_opponents_text_never_reach_a_seat_before_the_end():
    env = parallel_env()
    for seed in range(6):
        obs, infos = env.reset(seed=seed)
        secret = env.game._secret
        seen = [obs]
        steps = 0
        while env.agents:
            actions = {P0: f"SECRETPLAN-{seed} {format_guess(['crane', 'slate', 'pious'][steps % 3])}",
                       P1: "I think the word is " + secret[:4] + "? " + format_guess("audio")}
            obs, _, terms, truncs, infos = env.step(actions)
            steps += 1
            over = not env.agents
            for s in (P0, P1):
                text = obs[s]["text"]
                assert f"SECRETPLAN-{seed}" not in text and "I think" not in text
                if not over:
                    assert re.search(rf"\b{secret}\b", text, re.IGNORECASE) is None, text
                    assert "answer" not in infos[s] and infos[s]["outcome"] is None
            seen.append(obs)


def test_reset_options_and_arguments_are_checked():
    env = parallel_env()
    with pytest.raises(InvalidTask, match="5-letter word a-z, got 'toolong'"):
        env.reset(options={"answer": "toolong"})
    obs, infos = env.reset(options={"task": {"id": "w1", "answer": "Paste"}})
    assert infos[P0]["task_id"] == "w1" and env.game._secret == "paste"
    with pytest.raises(ConfigError, match="`max_cycles` must be an int >= 1, got 0"):
        parallel_env(max_cycles=0)
    with pytest.raises(ConfigError, match="render_mode"):
        parallel_env(render_mode="human")


def test_solver_beats_random_and_draws_itself():
    env = make_multiagent("mtrl/WordleDuel-v0", parallel=True)
    wins = 0
    for seed in range(10):
        players = {P0: policies.reference_policy(env, P0, "solver"), P1: policies.reference_policy(env, P1, "random")}
        result = policies.play_game(env, players, seed=seed)
        wins += result["infos"][P0]["outcome"] == "win"
        players = {P0: policies.reference_policy(env, P0, "solver"), P1: policies.reference_policy(env, P1, "solver")}
        assert policies.play_game(env, players, seed=seed)["infos"][P0]["outcome"] == "draw"
    assert wins >= 9
    with pytest.raises(ConfigError, match="unknown policy 'oracle' for seat 'player_0'; use one of"):
        policies.reference_policy(env, P0, "oracle")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(st.tuples(st.text(max_size=300), st.text(max_size=300)), min_size=1, max_size=14))
def test_any_text_is_a_legal_action_and_rewards_stay_in_range(actions):
    env = parallel_env()
    env.reset(seed=1)
    space = env.observation_space(P0)
    for a0, a1 in actions:
        if not env.agents:
            break
        obs, rewards, _, _, infos = env.step({P0: a0, P1: a1 + format_guess("crane")})
        for s in (P0, P1):
            assert space.contains(obs[s]), obs[s]
            assert DuelGame.reward_range[0] <= rewards[s] <= DuelGame.reward_range[1]
        assert sum(rewards.values()) == 0.0


def test_hostile_text_lone_surrogates_and_deep_nesting():
    env = parallel_env()
    env.reset(seed=2)
    nasty = ["\ud800" * 50 + "guess_word('crane')", "[" * 5000 + "]" * 5000, "<tool_call>" * 2000,
             '{"name": "guess_word", "arguments": ' * 300, "\x00\x1b[31m" * 100]
    for text in nasty:
        obs, _, _, _, infos = env.step({P0: text, P1: text})
        assert env.observation_space(P0).contains(obs[P0])


def test_same_seed_same_game_in_other_processes():
    assert len(game_digests("mtrl/WordleDuel-v0", {"player_0": "solver", "player_1": "random"}, seeds=(3, 11), hash_seeds=("0", "123"))) == 1
