"""PriorGuesses: priors never solve, outcome counts from guess 1, seeding, pinned first observation."""


import gymnasium
import numpy as np
import pytest
from env_checks import strict_check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wrapper_helpers import ACTIONS, ANSWERS, G, play, tier_interval

from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.env import solve_reward
from mtrl_gym.error import ConfigError
from mtrl_gym.wrappers import ChatHistory, PriorGuesses, WordleShaping, safe_prior_words

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NON_ANSWERS = sorted(set(game.allowed_guesses()) - set(game.answers()))


def priors(env_id="mtrl/Wordle-v0", **kw):
    return PriorGuesses(gymnasium.make(env_id), **kw)


def test_first_observation_is_pinned():
    env = priors(num_priors=2, policy="solver", epsilon=0.0)
    obs, info = env.reset(seed=0, options={"answer": "paste"})
    assert obs == (
        "Let's play Wordle. I have chosen a secret 5-letter word. You have 6 guesses.\n"
        "Some guesses have already been played for you:\n"
        "Guess 1/6: REAST - R gray, E yellow, A yellow, S yellow, T yellow\n"
        "Guess 2/6: WHELP - W gray, H gray, E yellow, L gray, P yellow\n"
        "Known so far:\n"
        "- Green (right letter, right place): _ _ _ _ _\n"
        "- Yellow (in the word, other place): A (not at 3), E (not at 2, 3), P (not at 5), S (not at 4), T (not at 5)\n"
        "- Gray (not in the word): H, L, R, W\n"
        "- Guessed: REAST, WHELP\n"
        "You have 4 guesses left. Make your next guess with the guess_word tool.")
    assert info["prior_guesses"] == [
        {"guess": "reast", "feedback": ["gray", "yellow", "yellow", "yellow", "yellow"]},
        {"guess": "whelp", "feedback": ["gray", "gray", "yellow", "gray", "yellow"]}]
    assert (info["guesses_used"], info["turns_used"], info["candidates_remaining"]) == (2, 2, 1)
    assert "answer" not in info and "paste" not in obs.lower()
    assert env.observation_space.contains(obs)


def test_zero_priors_leaves_the_game_untouched():
    obs, info = priors(num_priors=0).reset(seed=4)
    bare_obs, bare_info = gymnasium.make("mtrl/Wordle-v0").reset(seed=4)
    assert obs == bare_obs and info == {**bare_info, "prior_guesses": []}


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(0, 5), policy=st.sampled_from(["random", "solver"]),
       env_id=st.sampled_from(["mtrl/Wordle-v0", "mtrl/Wordle-Hard-v0"]),
       secret=st.one_of(st.none(), ANSWERS, st.sampled_from(NON_ANSWERS), st.sampled_from(["abcde", "qqqqq"])))
def test_priors_never_solve_and_the_outcome_counts_from_guess_one(seed, k, policy, env_id, secret):
    env = priors(env_id, num_priors=k, policy=policy)
    options = None if secret is None else {"answer": secret}
    obs, info = env.reset(seed=seed, options=options)
    played = [p["guess"] for p in info["prior_guesses"]]
    hard = env_id.endswith("Hard-v0")
    assert len(played) == k or (hard and len(played) < k)
    assert info["guesses_used"] == info["turns_used"] == len(played)
    assert all(fb != ["green"] * 5 for fb in (p["feedback"] for p in info["prior_guesses"]))
    assert len(set(played)) == len(played) and all(w in game.allowed_index() for w in played)
    if secret is not None:
        assert secret not in played
        _, reward, terminated, _, step = env.step(G(secret))
        assert terminated and step["solved"] and reward == solve_reward(len(played) + 1)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), actions=st.lists(ACTIONS, min_size=12, max_size=14),
       env_id=st.sampled_from(["mtrl/Wordle-v0", "mtrl/Wordle-Hard-v0"]))
def test_any_play_after_the_priors_is_safe_and_ends_within_the_step_cap(seed, actions, env_id):
    env = priors(env_id, num_priors=(0, 5))
    (obs, info), steps = play(env, actions, seed=seed)
    k = len(info["prior_guesses"])
    assert steps[-1][2] and len(steps) <= 12 - k and steps[-1][4]["turns_used"] == k + len(steps)
    rewards = {0.0, -0.5, -1.5, *(solve_reward(n) for n in range(k + 1, 7))}
    assert all(s[1] in rewards for s in steps)
    if k:
        assert steps[-1][1] != -1.5  # the priors are valid guesses: never "no valid guess at all"
    assert all(env.observation_space.contains(s[0]) for s in steps)


def test_safe_words_exclude_every_possible_secret():
    history = [("crane", ["gray", "gray", "yellow", "gray", "green"])]  # feedback of CRANE on PASTE
    in_list = safe_prior_words(history, secret_in_list=True)
    words = np.array(game.allowed_guesses())
    assert "paste" not in set(words[in_list]) and "crane" not in set(words[in_list])
    assert set(words[in_list]) >= set(NON_ANSWERS) - {"crane"}
    hard = safe_prior_words(history, secret_in_list=True, hard_mode=True)
    assert set(hard) <= set(in_list) and all(w not in game.answers() for w in words[hard])
    assert len(safe_prior_words([], secret_in_list=None)) == 0  # nothing is provably not the secret


def test_seeding_is_reproducible_and_continues_without_a_seed():
    def run(seeds):
        env = priors(num_priors=(0, 4))
        return [[p["guess"] for p in env.reset(seed=s)[1]["prior_guesses"]] for s in seeds]

    assert run([7, None, None]) == run([7, None, None])
    first = run([7, None, None, None, None, None])
    assert len({tuple(x) for x in first}) > 1
    counts = {len(run([s])[0]) for s in range(40)}
    assert counts == {0, 1, 2, 3, 4}


def test_with_shaping_outside_the_priors_earn_nothing():
    env = WordleShaping(priors(num_priors=3, policy="solver", epsilon=0.0))
    env.reset(seed=1, options={"answer": "paste"})
    _, reward, terminated, _, info = env.step(G("paste"))
    assert terminated and info["guesses_used"] == 4
    assert "opener" not in info["reward_components"]["terms"]
    lo, hi = tier_interval(info)
    assert lo <= reward <= hi


def test_gymnasium_checker_passes():
    # The wrapper itself is what is checked, so gymnasium's note that it is not the raw env is expected.
    strict_check_env(priors(num_priors=(1, 3)), allow=["different from the unwrapped"])


@pytest.mark.parametrize("make_env, kwargs, match", [
    (lambda: WordleShaping(gymnasium.make("mtrl/Wordle-v0")), {},
     r"PriorGuesses must be applied before WordleShaping: write WordleShaping\(PriorGuesses\(env\)\)"),
    (lambda: ChatHistory(gymnasium.make("mtrl/Wordle-v0")), {}, r"PriorGuesses must be applied before ChatHistory"),
    (lambda: gymnasium.make("CartPole-v1"), {}, r"PriorGuesses needs a Wordle env"),
    (lambda: gymnasium.make("mtrl/Wordle-v0"), {"num_priors": 6}, r"0 <= min <= max <= 5 .* got 6"),
    (lambda: gymnasium.make("mtrl/Wordle-v0"), {"num_priors": (3, 1)}, r"got \(3, 1\)"),
    (lambda: gymnasium.make("mtrl/Wordle-v0"), {"num_priors": "2"}, r"an int or a \(min, max\) pair of ints, got '2'"),
    (lambda: gymnasium.make("mtrl/Wordle-v0"), {"policy": "greedy"}, r"one of \('random', 'solver'\), got 'greedy'"),
    (lambda: gymnasium.make("mtrl/Wordle-v0"), {"epsilon": 1.5}, r"`epsilon` must be a number in \[0, 1\], got 1.5"),
])
def test_bad_arguments(make_env, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        PriorGuesses(make_env(), **kwargs)


def test_a_step_limit_too_short_for_the_priors_is_reported():
    env = PriorGuesses(gymnasium.make("mtrl/Wordle-v0", max_episode_steps=2), num_priors=2)
    with pytest.raises(ConfigError, match=r"used up the episode's step limit after 2 steps; lower `num_priors`"):
        env.reset(seed=0)
