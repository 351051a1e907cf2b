"""WordleRecap: one line of clues at the end of each observation; the game itself unchanged."""

import gymnasium
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mtrl_gym  # noqa: F401
from mtrl_gym.envs.wordle.game import feedback
from mtrl_gym.error import ConfigError
from mtrl_gym.wrappers import PriorGuesses, WordleRecap, WordleShaping
from tests.wrappers.wrapper_helpers import ACTIONS, G, play


def _recap_of(guesses, answer):
    """The recap an independent reading of the rules gives (gray: never marked; yellow: marked,
    not all copies placed; green: placed letters)."""
    green = ["_"] * 5
    marked, grays = {}, set()
    for guess in guesses:
        fb = feedback(guess, answer)
        count = {}
        for i, (ch, c) in enumerate(zip(guess, fb)):
            if c == 2:
                green[i] = ch.upper()
            if c:
                count[ch] = count.get(ch, 0) + 1
        for ch, n in count.items():
            marked[ch] = max(marked.get(ch, 0), n)
        grays |= {ch for ch, c in zip(guess, fb) if c == 0 and ch not in count}
    gray = sorted(ch.upper() for ch in grays if ch not in marked)
    yellow = sorted(ch.upper() for ch, n in marked.items() if n > green.count(ch.upper()))
    return f"Recap: gray {' '.join(gray) or '-'}; yellow {' '.join(yellow) or '-'}; green {' '.join(green)}"


def test_the_recap_is_pinned_and_the_game_is_the_bare_one():
    bare, env = gymnasium.make("mtrl/Wordle-v0"), WordleRecap(gymnasium.make("mtrl/Wordle-v0"))
    o1, i1 = bare.reset(options={"answer": "shard"})
    o2, i2 = env.reset(options={"answer": "shard"})
    assert o2 == o1 + "\nRecap: gray -; yellow -; green _ _ _ _ _" and i1 == i2
    for word, line in [("crane", "Recap: gray C E N; yellow R; green _ _ A _ _"),
                       ("zzzzz", "Recap: gray C E N; yellow R; green _ _ A _ _"),  # rejected: no new clue
                       ("sharp", "Recap: gray C E N P; yellow -; green S H A R _")]:
        a, b = bare.step(G(word)), env.step(G(word))
        assert b[0] == a[0] + "\n" + line and b[1:] == a[1:]
    a, b = bare.step(G("shard")), env.step(G("shard"))
    assert b == a  # the game is over: no recap


@given(seed=st.integers(0, 2**31 - 1), k=st.integers(0, 4), actions=st.lists(ACTIONS, min_size=1, max_size=8))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_play_keeps_the_bare_game_and_a_recap_that_fits_the_board(seed, k, actions):
    """The inner game (rewards, info, observation up to the recap) is unchanged by the recap, and
    the recap says what the played guesses revealed, by an independent reading of the rules."""
    inner = WordleShaping(PriorGuesses(gymnasium.make("mtrl/Wordle-v0"), num_priors=k), per_turn=True)
    outer = WordleShaping(WordleRecap(PriorGuesses(gymnasium.make("mtrl/Wordle-v0"), num_priors=k)), per_turn=True)
    (o1, i1), s1 = play(inner, actions, seed=seed)
    (o2, i2), s2 = play(outer, actions, seed=seed)
    answer = inner.unwrapped.expected_answer
    played = [p["guess"] for p in i1["prior_guesses"]]
    assert i1 == i2 and o2 == f"{o1}\n{_recap_of(played, answer)}"
    for a, b in zip(s1, s2, strict=True):
        assert b[1:] == a[1:]
        if a[4].get("valid"):
            played.append(a[4]["guess"])
        ended = a[2] or a[3]
        assert b[0] == (a[0] if ended else f"{a[0]}\n{_recap_of(played, answer)}")


def test_a_flood_of_calls_is_cut_before_the_recap_and_stays_in_the_space():
    env = WordleRecap(gymnasium.make("mtrl/Wordle-v0"))
    env.reset(options={"answer": "shard"})
    obs = env.step(G("crane") + 'guess_word("slate")' * 3000)[0]
    limit = env.observation_space.max_length
    assert len(obs) == limit and env.observation_space.contains(obs)
    assert obs.endswith("\nRecap: gray C E N; yellow R; green _ _ A _ _")


def test_same_seed_same_text_and_a_config_names_it():
    from mtrl_gym.rollout.sources.local import resolve_wrapper

    assert resolve_wrapper("WordleRecap") is WordleRecap
    runs = [play(WordleRecap(PriorGuesses(gymnasium.make("mtrl/Wordle-v0"), num_priors=(1, 3))),
                 [G("crane"), G("pilot")], seed=7) for _ in range(2)]
    assert runs[0] == runs[1]


def test_a_non_wordle_env_is_refused():
    with pytest.raises(ConfigError, match="WordleRecap needs a Wordle env"):
        WordleRecap(gymnasium.make("mtrl/Sandbox-Weather-v0"))
