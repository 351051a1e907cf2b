"""WordleShaping: pinned terms, tier ordering over arbitrary and solver play, per-turn totals."""

import math
import re
from fractions import Fraction
from pathlib import Path

import gymnasium
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from wrapper_helpers import ACTIONS, ANSWERS, G, games, play, solver_actions, tier_interval

from mtrl_gym.envs.wordle.env import SUCCESS_THRESHOLD, solve_reward
from mtrl_gym.envs.wordle.solver import max_opening_entropy, opening_entropy
from mtrl_gym.error import ConfigError
from mtrl_gym.wrappers import WORDLE_SCALE, WORDLE_WEIGHTS, WordleShaping, wordle_step_terms
from mtrl_gym.envs.wordle.profile import MAX_FAILURE_WEIGHT as WORDLE_MAX_FAILURE_WEIGHT
from mtrl_gym.envs.wordle.profile import MAX_SUCCESS_WEIGHT as WORDLE_MAX_SUCCESS_WEIGHT
from mtrl_gym.wrappers.shaping import SHAPING_GRID

ROOT = Path(__file__).resolve().parents[2]
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def shaped(per_turn=False, **kw):
    return WordleShaping(gymnasium.make("mtrl/Wordle-v0"), per_turn=per_turn, **kw)


def step_terms(actions, answer="paste", **kw):
    env = shaped(**kw)
    _, steps = play(env, actions, options={"answer": answer})
    return [s[4]["reward_components"]["terms"] for s in steps], steps


# ------------------------------------------------------------------ pinned terms


def test_entropy_helpers_are_pinned():
    assert opening_entropy("slate") == pytest.approx(5.885370934719264, abs=1e-12)
    assert max_opening_entropy() == opening_entropy("slate")
    assert opening_entropy("crane") == pytest.approx(5.766162061485055, abs=1e-12)
    assert opening_entropy("qwxyz") == pytest.approx(1.4701707018522923, abs=1e-12)  # not a word: still scored


def test_each_term_pinned_on_a_real_game():
    s = WORDLE_SCALE
    terms, steps = step_terms([G("crane"), G("crane"), G("zzzzz"), "no tool call here", G("slate")])
    # crane vs paste: 43 of 1,923 candidates remain; five new letters; the opener scales with entropy.
    assert terms[0] == pytest.approx({
        "valid_guess": 0.10 / s, "opener": 0.30 * 5.766162061485055 / 5.885370934719264 / s,
        "new_letter": 5 * 0.02 / s, "elimination": 0.25 * (1923 - 43) / 1923 / s}, abs=1e-12)
    # crane again: played (valid), repeated, and it ignores 4 revealed clues; nothing eliminated.
    # A repeat gets no floor (copying a word from the board must not beat a new attempt).
    assert terms[1] == pytest.approx({"valid_guess": 0.10 / s, "new_letter": 0.0, "elimination": 0.0,
                                      "repeated_word": -0.30 / s, "clue_violation": -4 * 0.10 / s}, abs=1e-12)
    assert steps[1][4]["clue_violations"] == 4
    # zzzzz: rejected (not a word); it misses the green E and the yellow A (2 violations),
    # which cost nothing: clue violations count only for real words.
    assert steps[2][4]["error"] == "not_in_dictionary"
    assert steps[2][4]["clue_violations"] == 2
    assert terms[2] == pytest.approx({"out_of_dictionary": -0.20 / s}, abs=1e-12)
    assert terms[3] == {"format_error": -0.30 / s}
    # slate: 3 new letters (s, l, t); not the first guess, so no opener.
    assert "opener" not in terms[4] and terms[4]["new_letter"] == pytest.approx(3 * 0.02 / s)


def test_opener_of_the_best_word_is_the_full_weight():
    terms, _ = step_terms([G("slate")])
    assert terms[0]["opener"] == 0.30 / WORDLE_SCALE


def test_pure_term_function_on_hand_built_info():
    info = {"valid": True, "guesses_used": 2, "guess": "trace", "new_letters": 2, "candidates_before": 40,
            "candidates_remaining": 10, "repeated": False, "clue_violations": 1, "in_dictionary": True,
            "error": None, "format_error": False}
    assert wordle_step_terms(info) == pytest.approx(
        {"valid_guess": 0.10, "new_letter": 0.04, "elimination": 0.25 * 30 / 40, "clue_violation": -0.10})
    assert wordle_step_terms({"valid": False, "format_error": True, "error": "bad_arguments"}) == {"format_error": -0.3}
    played_non_word = {"valid": True, "guesses_used": 3, "guess": "zzzzz", "in_dictionary": False,
                       "candidates_before": 5, "candidates_remaining": 5}
    assert wordle_step_terms(played_non_word)["out_of_dictionary"] == -0.20  # invalid_word="play"
    assert wordle_step_terms({}) == {}
    for error in ("not_letters", "wrong_length"):
        assert wordle_step_terms({"valid": False, "error": error}) == {"malformed_guess": -0.25}
    # near_word: share of letters x closeness of the length to 5
    near = {"valid": False, "error": "not_letters", "guess_text": "cr4ne"}
    assert wordle_step_terms(near) == pytest.approx({"malformed_guess": -0.25, "near_word": 0.04 * 4 / 5})
    far = {"valid": False, "error": "wrong_length", "guess": "cranes", "guess_text": "cranes"}
    assert wordle_step_terms(far) == pytest.approx({"malformed_guess": -0.25, "near_word": 0.04 * 4 / 5})
    assert "near_word" not in wordle_step_terms({"valid": False, "error": "not_letters", "guess_text": "1234567890"})


def test_partial_credit_ladder_for_a_model_that_cannot_play_yet():
    """word > 5-letter non-word > malformed guess > no guess, step by step (fresh games)."""
    def first_step_shaping(action):
        terms, _ = step_terms([action])
        return math.fsum(terms[0].values())

    ladder = [first_step_shaping(a) for a in (G("crane"), G("zzzzz"), G("cr4ne"), "no guess here")]
    assert ladder == sorted(ladder, reverse=True) and len(set(ladder)) == 4


@settings(max_examples=60, deadline=None)
@given(answer=ANSWERS, priors=st.lists(ANSWERS, max_size=4), word=ANSWERS, non_word=st.text("abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=5),
       malformed=st.sampled_from(["cr4ne", "crane!", "cranes", "ab", "a b c", "..."]))
def test_partial_credit_ladder_holds_whatever_the_board(answer, priors, word, non_word, malformed):
    """On any board, a new played word >= -0.15 > a 5-letter non-word > malformed > no guess,
    and a repeated word <= a non-word."""
    from mtrl_gym.envs.wordle import game

    assume(non_word not in game.allowed_index() and non_word != answer)

    def step_sum(action):
        terms, steps = step_terms([G(p) for p in priors] + [action], answer=answer)
        return math.fsum(terms[-1].values()) * WORDLE_SCALE, steps[-1]

    if answer in priors:  # the game may be over before the last guess
        return
    played, step = step_sum(G(word))
    assert step[4]["valid"]
    if step[4]["repeated"]:
        assert played <= -0.20 + 1e-12
        return
    assert played >= -0.15 - 1e-12
    rungs = [played, step_sum(G(non_word))[0], step_sum(G(malformed))[0], step_sum("no guess here")[0]]
    assert rungs[1] == pytest.approx(-0.20, abs=1e-12) and rungs[3] == pytest.approx(-0.30, abs=1e-12)
    assert rungs[0] > rungs[1] > rungs[2] >= -0.25 - 1e-12


def test_weights_override_and_components_layout():
    terms, steps = step_terms([G("slate")], weights={"opener": 0.0, "valid_guess": 0.5})
    assert terms[0]["opener"] == 0.0 and terms[0]["valid_guess"] == 0.25
    comp = steps[0][4]["reward_components"]
    assert set(comp) == {"terms", "shaping_step", "shaping", "clipped", "weight", "bonus", "outcome", "reward"}
    assert comp["shaping_step"] == math.fsum(comp["terms"].values()) == comp["shaping"]


def test_final_reward_formula_pinned():
    env = shaped()
    _, steps = play(env, [G("crane"), G("paste")], options={"answer": "paste"})
    comp = steps[-1][4]["reward_components"]
    s = comp["shaping"]
    assert 0 < s < 1 and comp["weight"] == 0.04
    assert comp["bonus"] == math.trunc(0.04 * s / SHAPING_GRID) * SHAPING_GRID
    assert steps[-1][1] == solve_reward(2) + comp["bonus"] == comp["reward"]
    assert abs(steps[-1][1] - (solve_reward(2) + 0.04 * s)) < 1e-12
    assert [st_[1] for st_ in steps[:-1]] == [0.0]  # per_turn=False: nothing before the end


@pytest.mark.parametrize("kwargs, match", [
    ({"success_weight": 0.05}, r"`success_weight` must be <= 0.04 .* got 0.05"),
    ({"failure_weight": 0.2}, r"`failure_weight` must be <= 0.15 .* got 0.2"),
    ({"failure_weight": -0.1}, r"`failure_weight` must be >= 0, got -0.1"),
    ({"scale": 0}, r"`scale` must be > 0, got 0"),
    ({"scale": float("nan")}, r"`scale` must be a finite number, got nan"),
    ({"per_turn": "yes"}, r"`per_turn` must be True or False, got 'yes'"),
    ({"weights": {"openr": 0.1}}, r"unknown Wordle shaping term 'openr'. Did you mean 'opener'\?"),
    ({"weights": {"opener": -1}}, r"weight 'opener' must be a finite number >= 0 .* got -1"),
    ({"weights": [("opener", 1)]}, r"`weights` must be a mapping"),
])
def test_bad_arguments_name_the_value_and_the_fix(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        shaped(**kwargs)


# ------------------------------------------------------------------ tier ordering


def test_tier_intervals_are_disjoint_and_ordered():
    """The documented intervals, from the env's own reward function and the weight limits."""
    ws, wf = WORDLE_MAX_SUCCESS_WEIGHT, WORDLE_MAX_FAILURE_WEIGHT
    for n in range(1, 6):
        assert solve_reward(n) - ws > solve_reward(n + 1) + ws
    assert solve_reward(6) - ws >= 1.01 > SUCCESS_THRESHOLD
    assert -0.5 - wf >= -0.65 and -0.5 + wf <= -0.35
    assert -0.65 > -1.5  # and a no-valid-guess episode has no positive term: it lies in [-1.65, -1.5]


@SLOW
@given(game=games(), per_turn=st.booleans())
def test_every_shaped_episode_lies_in_its_tier(game, per_turn):
    answer, actions = game
    env = shaped(per_turn=per_turn)
    _, steps = play(env, actions, options={"answer": answer})
    assert steps[-1][2], "12 actions always end a game"
    info = steps[-1][4]
    total = sum(s[1] for s in steps)
    lo, hi = tier_interval(info)
    assert lo <= total <= hi
    if info["solved"]:
        assert total >= 1.01
    elif info["guesses_used"] == 0:
        assert info["reward_components"]["shaping"] <= 0


@SLOW
@given(a=games(), b=games())
def test_tier_ordering_between_any_two_games(a, b):
    """Any solve beats any loss beats any game without a valid guess; fewer guesses win."""
    def final(game):
        _, steps = play(shaped(), game[1], options={"answer": game[0]})
        info = steps[-1][4]
        rank = (2, -info["guesses_used"]) if info["solved"] else ((1, 0) if info["guesses_used"] else (0, 0))
        return rank, steps[-1][1]

    (rank_a, ra), (rank_b, rb) = final(a), final(b)
    if rank_a > rank_b:
        assert ra > rb
    elif rank_b > rank_a:
        assert rb > ra


@settings(max_examples=25, deadline=None)
@given(answer=ANSWERS, junk=st.lists(ACTIONS, max_size=5))
def test_solver_games_are_solves_in_their_tier(answer, junk):
    env = shaped()
    _, steps = play(env, solver_actions(answer, prefix=junk), options={"answer": answer})
    info = steps[-1][4]
    if info["solved"]:  # junk may have used guesses; the solver still finds most words
        lo, hi = tier_interval(info)
        assert lo <= steps[-1][1] <= hi and steps[-1][1] >= 1.01


def test_worst_solve_and_extreme_losses():
    # Four repeated, clue-ignoring words then a solve on guess 6, and 6 junk steps in between.
    bad = [G("crane")] + [G("crane")] * 4 + ["no call"] * 6 + [G("paste")]
    _, steps = play(shaped(), bad, options={"answer": "paste"})
    info = steps[-1][4]
    assert info["solved"] and info["guesses_used"] == 6
    assert info["reward_components"]["clipped"] == -1.0
    assert steps[-1][1] == solve_reward(6) - math.trunc(0.04 / SHAPING_GRID) * SHAPING_GRID
    assert steps[-1][1] >= 1.01
    _, steps = play(shaped(), ["no call"] * 12, options={"answer": "paste"})
    assert steps[-1][1] == -1.5 - math.trunc(0.15 / SHAPING_GRID) * SHAPING_GRID >= -1.65


# ------------------------------------------------------------------ per-turn mode


@SLOW
@given(game=games(min_actions=1), tail=st.booleans())
def test_per_turn_rewards_sum_exactly_to_the_final_step_total(game, tail):
    answer, actions = game
    if tail:
        actions = actions + ["no call"] * 12  # make sure the game ends
    _, final_steps = play(shaped(per_turn=False), actions, options={"answer": answer})
    _, turn_steps = play(shaped(per_turn=True), actions, options={"answer": answer})
    assert [s[0] for s in final_steps] == [s[0] for s in turn_steps]
    assert [(s[2], s[3]) for s in final_steps] == [(s[2], s[3]) for s in turn_steps]
    if not final_steps[-1][2]:
        return
    total = final_steps[-1][1]
    rewards = [s[1] for s in turn_steps]
    assert all(r == 0.0 for r in (s[1] for s in final_steps[:-1]))
    assert sum(rewards) == total                      # left-to-right float sum
    assert math.fsum(rewards) == total                # exactly rounded sum
    assert sum(map(Fraction, rewards)) == Fraction(total)  # exact rational sum
    for s in turn_steps[:-1]:  # increments are paid with the failure weight
        assert abs(s[1]) <= 2 * 0.15


@SLOW
@given(seed=st.integers(0, 2**31 - 1), actions=st.lists(ACTIONS, min_size=1, max_size=14),
       per_turn=st.booleans())
def test_never_raises_and_preserves_everything_but_the_reward(seed, actions, per_turn):
    bare = gymnasium.make("mtrl/Wordle-v0")
    r0, bare_steps = play(bare, actions, seed=seed)
    r1, steps = play(shaped(per_turn=per_turn), actions, seed=seed)
    assert r0[0] == r1[0]
    for (o0, _, t0, u0, i0), (o1, _, t1, u1, i1) in zip(bare_steps, steps):
        assert (o0, t0, u0) == (o1, t1, u1)
        assert {k: v for k, v in i1.items() if k != "reward_components"} == i0
        assert "reward_components" not in i0  # the wrapper does not write into the env's info


def test_truncation_settles_the_shaping_with_the_failure_weight():
    env = WordleShaping(gymnasium.make("mtrl/Wordle-v0", max_episode_steps=2), per_turn=True)
    _, steps = play(env, [G("slate"), G("crane")], options={"answer": "paste"})
    assert steps[-1][3] and not steps[-1][2]
    comp = steps[-1][4]["reward_components"]
    assert comp["outcome"] == 0.0 and comp["weight"] == 0.15
    assert sum(s[1] for s in steps) == comp["bonus"] == math.trunc(0.15 * comp["clipped"] / SHAPING_GRID) * SHAPING_GRID


# ------------------------------------------------------------------ docs


def _table_rows(text: str) -> dict[str, float]:
    rows = {}
    for m in re.finditer(r"^\|?\s*`?([a-z_]+)`?\s*\|?\s+([+-]\d\.\d+)\s", text, re.MULTILINE):
        rows[m.group(1)] = float(m.group(2))
    return rows


@pytest.mark.parametrize("source", ["docs/wrappers.md", "mtrl_gym/wrappers/wordle_shaping.py"])
def test_weight_tables_match_the_code(source):
    rows = _table_rows((ROOT / source).read_text())
    signs = {k: (1 if k in ("valid_guess", "opener", "new_letter", "elimination", "word_floor", "near_word") else -1) for k in WORDLE_WEIGHTS}
    assert rows == {k: signs[k] * v for k, v in WORDLE_WEIGHTS.items()}


def test_docs_state_the_scale_and_weights():
    text = (ROOT / "docs/wrappers.md").read_text()
    _, steps = play(shaped(), ["no tool call"] * 12)
    never_calls = steps[-1][4]["reward_components"]["shaping"]
    assert f"| no tool call at all (12 steps)             | {never_calls:.2f}  |" in text
    assert f"scale = {WORDLE_SCALE:g}" in text
    assert f"success_weight = {WORDLE_MAX_SUCCESS_WEIGHT}" in text
    assert f"failure_weight = {WORDLE_MAX_FAILURE_WEIGHT}" in text
