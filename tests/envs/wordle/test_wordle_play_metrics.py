"""Wordle play metrics: hand-checked games, the random baseline, the shuffled control, Wilson."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.play_metrics import (
    RANDOM_ANSWER_SOLVE_RATE,
    board_consistent,
    letter_clues,
    play_metrics,
    random_consistency,
    wilson_interval,
)
from mtrl_gym.envs.wordle.solver import format_guess
from mtrl_gym.evaluation.play_metrics import env_play_metrics

G = format_guess


def test_a_hand_checked_game():
    # secret paste: crane gives A yellow (not at 3), E green; slate has its A at 3, so it breaks
    # that clue; "crane" again is a repeat; "zzzzz" is not a word; paste fits everything
    m = play_metrics([("paste", [G("crane"), G("slate"), G("crane"), G("zzzzz"), G("paste")])])
    assert m["turns"] == 5 and m["later_turns"] == 4
    assert m["valid_word_rate"] == pytest.approx(4 / 5)       # zzzzz is not a word
    assert m["new_word_rate"] == pytest.approx(3 / 5)         # the repeat is valid, not new
    assert m["consistency"] == pytest.approx(1 / 4)           # only paste fits all feedback
    assert m["solve_rate"] == 1.0 and m["solved"] == 1
    assert m["top_guess"] == "crane" and m["top_guess_share"] == pytest.approx(2 / 4)  # of the 4 valid turns


def test_letter_clues_score_any_five_letters_against_the_board_by_hand():
    # secret shard: crane -> C gray, R yellow, A green, N gray, E gray. Then
    #   "X X A X X" (not a word, so not played): keeps the A, no gray letter, lacks the yellow R;
    #   "crane" again: a repeat, not scored (it would keep its own green for free);
    #   "adorn": A not in place, uses N, has R; it shows R green, A and D yellow, O and N gray;
    #   "sharp" and "shark": keep A and R, no gray letter, lack the yellow D;
    #   "S H A" (3 letters) is not scored.
    m = play_metrics([("shard", [G("crane"), G("X X A X X"), G("crane"), G("adorn"), G("sharp"), G("shark"),
                                 G("S H A")])])
    assert (m["green_turns"], m["greens_kept_n"]) == (4, 3)    # all but adorn
    assert (m["gray_turns"], m["grays_avoided_n"]) == (4, 3)   # xxaxx, sharp, shark
    assert (m["yellow_turns"], m["yellows_used_n"]) == (4, 1)  # adorn has the R
    assert m["greens_kept"] == pytest.approx(3 / 4)
    assert letter_clues([], "crane") == ((None, None, None), (0.0, 0.0, 0.0))
    for bad in ("cran", "cr4ne", "cr\u00e9ne", "\ud800rane"):
        with pytest.raises(ValueError, match="five letters a-z"):
            letter_clues([], bad)


def test_the_random_letter_clue_shares_count_the_allowed_words():
    """The exact random-word baselines against a brute-force count over the word list."""
    board = [(w, game.pattern_code(game.feedback(w, "shard"))) for w in ("crane", "moist")]
    gray, yellow = set("cenmoit"), set("r") | set("s")  # S yellow (not at 4), R yellow; A green
    words = game.allowed_guesses()
    expect = (sum(w[2] == "a" for w in words), sum(not set(w) & gray for w in words),
              sum(yellow <= set(w) for w in words))
    follows, chance = letter_clues(board, "shard")
    assert follows == (True, True, True)
    assert chance == pytest.approx(tuple(n / len(words) for n in expect))


def test_the_most_common_guess_counts_real_words_only():
    m = play_metrics([("paste", [G("zzzzz"), G("zzzzz"), G("zzzzz"), G("crane")])])
    assert m["top_guess"] == "crane" and m["top_guess_share"] == 1.0 and m["top_guess_n"] == 1
    none = play_metrics([("paste", [G("zzzzz"), G("qqqqq")])])
    assert none["top_guess"] == "" and none["top_guess_share"] == 0.0


def test_random_consistency_is_the_share_of_allowed_words_that_fit():
    board = [("crane", game.pattern_code(game.feedback("crane", "paste")))]
    share = random_consistency(board)
    fit = sum(board_consistent(w, board) for w in game.allowed_guesses())
    assert share == pytest.approx(fit / len(game.allowed_guesses()))
    assert random_consistency([]) == 1.0


def test_the_shuffled_control_separates_reading_from_ignoring_feedback():
    import gymnasium
    import numpy as np

    from mtrl_gym.envs.wordle.teacher import (
        ConsistentTeacher,  # reads the feedback: always consistent
    )

    env, teacher, games = gymnasium.make("mtrl/Wordle-v0"), ConsistentTeacher(), []
    for secret in game.answers()[:60]:
        obs, info = env.reset(options={"answer": secret})
        teacher.reset(info, np.random.default_rng(0))
        actions, done = [], False
        while not done:
            actions.append(teacher(obs, info))
            obs, _, done, _, info = env.step(actions[-1])
        games.append((secret, actions))
    m = play_metrics(games)
    assert m["consistency"] == 1.0 and m["control_consistency"] < 0.2
    assert m["consistency_vs_random"] > 3


def test_wilson_interval_and_the_random_answer_floor():
    low, high = wilson_interval(5, 128)
    assert low == pytest.approx(0.0168, abs=1e-4) and high == pytest.approx(0.0882, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert RANDOM_ANSWER_SOLVE_RATE == pytest.approx(6 / 1923)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=6))
def test_any_text_scores_within_bounds(actions):
    m = play_metrics([("paste", actions)])
    for key in ("valid_word_rate", "new_word_rate", "consistency", "control_consistency", "top_guess_share"):
        assert 0.0 <= m[key] <= 1.0
    for key in ("greens_kept", "grays_avoided", "yellows_used"):
        assert 0.0 <= m[key] <= 1.0 and 0.0 <= m[f"random_{key}"] <= 1.0


def test_env_play_metrics_reads_eval_records_and_skips_other_envs():
    record = {"task_id": "wordle_val_0000", "final_info": {},
              "messages": [{"role": "assistant", "content": G("crane")}]}
    m = env_play_metrics("mtrl/Wordle-v0", [record])
    assert m["games"] == 1 and m["turns"] == 1
    assert env_play_metrics("mtrl/SOP-DangerousGoods-v0", [record]) is None


def test_valid_and_new_words_come_with_their_counts_and_wilson_intervals():
    from mtrl_gym.envs.wordle.play_metrics import play_metrics, wilson_interval
    from mtrl_gym.envs.wordle.solver import format_guess

    m = play_metrics([("paste", [format_guess("crane"), format_guess("crane"), "zzzzz", format_guess("paste")])])
    assert (m["turns"], m["valid_words"], m["new_words"]) == (4, 3, 2)
    assert (m["valid_word_low"], m["valid_word_high"]) == wilson_interval(3, 4)
    assert (m["new_word_low"], m["new_word_high"]) == wilson_interval(2, 4)
