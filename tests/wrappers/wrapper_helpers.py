"""Shared strategies and helpers for the wrapper tests (imported by the test modules)."""

from __future__ import annotations

import gymnasium
from hypothesis import strategies as st

import mtrl_gym  # noqa: F401  (registers the envs)
from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.env import solve_reward
from mtrl_gym.envs.wordle.solver import WordleSolver, format_guess

G = format_guess
WORDS = st.sampled_from(game.allowed_guesses())
ANSWERS = st.sampled_from(game.answers())

#: Any kind of model text: clean calls, loose text, garbage, bad arguments, unknown words.
ACTIONS = st.one_of(
    WORDS.map(G),
    ANSWERS.map(G),
    WORDS.map(lambda w: f"guess_word({w!r})"),
    ANSWERS.map(lambda w: f"My guess: {w.upper()}"),
    st.sampled_from(["slate", "crane", "paste"]).map(G),
    st.text(max_size=40),
    st.sampled_from(["<tool_call>{", G("zzzzz"), G("qwxyz"), G("toolong"), G(""), G("ab1de"),
                     '<tool_call>{"name": "guess_word", "arguments": {}}</tool_call>',
                     '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>' + G("crane"),
                     G("crane") + G("slate"), "<guess>x</guess>"]),
)


@st.composite
def games(draw, *, min_actions: int = 12, max_actions: int = 14):
    """(answer, actions): arbitrary play, with the answer sometimes slipped in (to get solves)."""
    answer = draw(ANSWERS)
    actions = draw(st.lists(ACTIONS, min_size=min_actions, max_size=max_actions))
    solve_at = draw(st.none() | st.integers(0, len(actions) - 1))
    if solve_at is not None:
        actions[solve_at] = draw(st.sampled_from([G(answer), f"guess: {answer}", f"<guess>{answer}</guess>"]))
    return answer, actions


def play(env: gymnasium.Env, actions, *, seed: int = 0, options=None):
    """Reset, then step through ``actions`` until the episode ends; returns (reset, [steps])."""
    first = env.reset(seed=seed, options=options)
    steps = []
    for a in actions:
        steps.append(env.step(a))
        if steps[-1][2] or steps[-1][3]:
            break
    return first, steps


def solver_actions(answer: str, *, prefix=()) -> list[str]:
    """The built-in solver's game against ``answer`` as actions (after optional prefix actions)."""
    return list(prefix) + [G(w) for w in WordleSolver().play(answer)]


def tier_interval(info) -> tuple[float, float]:
    """The documented reward interval of a finished shaped Wordle episode, from its last info."""
    if info["solved"]:
        o = solve_reward(info["guesses_used"])
        return o - 0.04, o + 0.04
    if info["guesses_used"] > 0:
        return -0.65, -0.35
    return -1.65, -1.5
