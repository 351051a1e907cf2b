"""The built-in solver: solves every answer, mean guesses, hard mode, policy interface."""

import gymnasium
import numpy as np
import pytest

import mtrl_gym  # noqa: F401
from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.solver import SolverPolicy, WordleSolver, format_guess


def test_solves_all_answers_within_six_with_mean_at_most_3_6():
    solver = WordleSolver()
    lengths = []
    for answer in game.answers():
        guesses = solver.play(answer)
        assert guesses[-1] == answer, f"not solved: {answer} -> {guesses}"
        lengths.append(len(guesses))
    assert max(lengths) <= 6
    assert np.mean(lengths) <= 3.6
    print(f"solver: mean {np.mean(lengths):.3f} guesses, max {max(lengths)}")


def test_opener_is_the_highest_entropy_word():
    assert WordleSolver().next_guess([]) == "slate"


def test_hard_mode_solver_plays_only_consistent_words():
    solver = WordleSolver(hard_mode=True)
    rng = np.random.default_rng(0)
    for answer in rng.choice(game.answers(), size=40, replace=False):
        env = gymnasium.make("mtrl/Wordle-Hard-v0")
        obs, info = env.reset(options={"answer": str(answer)})
        policy = SolverPolicy(solver)
        done = False
        while not done:
            obs, reward, done, _, info = env.step(policy(obs, info))
            assert info["valid"], info["error"]
        assert info["solved"]


def test_policy_reads_history_from_info_and_resets():
    env = gymnasium.make("mtrl/Wordle-v0")
    policy = SolverPolicy()
    for answer in ["paste", "crane", "ghost"]:
        obs, info = env.reset(options={"answer": answer})
        done = False
        while not done:
            obs, reward, done, _, info = env.step(policy(obs, info))
        assert info["solved"] and reward >= 1.05


def test_noisy_policy_is_seeded():
    a = SolverPolicy(epsilon=0.5, rng=np.random.default_rng(3))
    b = SolverPolicy(epsilon=0.5, rng=np.random.default_rng(3))
    assert [a.choose() for _ in range(10)] == [b.choose() for _ in range(10)]
    with pytest.raises(ValueError, match=r"`epsilon` must be in \[0, 1\], got 2"):
        SolverPolicy(epsilon=2)


def test_format_guess_is_a_parsable_tool_call():
    assert format_guess("crane") == '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>'
