"""Wordle-v0 after the speed rewrite behaves exactly as before it: old vs new, byte for byte.

The reference is the frozen pre-rewrite copy in ``tests/envs/wordle/wordle_frozen`` (env, knowledge,
prompts and parser). Both envs get the same seeds, reset options and actions; the test
compares ``repr`` of every observation, reward, flag and ``info`` (so key order, types and
float values all count). The one intended difference is ``info["task_id"]`` at reset for
a secret without a row id: the old id was a hash with a public key (it revealed the
answer), the new one uses a private key; it is compared separately.

``MTRL_GYM_DIFF_EPISODES`` scales the run (default 50,000 episodes: 35,000 of random play
over every action shape, 15,000 of solver play with random interruptions).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from wordle_frozen.env import WordleEnv as OldWordleEnv

from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.env import WordleEnv
from mtrl_gym.envs.wordle.solver import WordleSolver

EPISODES = int(os.environ.get("MTRL_GYM_DIFF_EPISODES", "50000"))
SOLVER_SHARE = 0.3
SOLVER_ANSWERS = 120  # solver games are precomputed for this many answers (a few seconds)

VARIANTS = [
    {},
    {"hard_mode": True},
    {"invalid_word": "play"},
    {"max_steps": 6},
    {"hard_mode": True, "invalid_word": "play", "max_steps": 8},
]

_NOISE = ["", " ", "\n", "Let me think. ", "<think>hmm, crane?</think>", "Sure! "]
_GARBAGE = ["", "hello", "{", "(", "<tool_call>", "<tool_call>{not json</tool_call>", '{"name": "guess_word"}',
            "guess_word()", "guess_word(1, 2)", "<guess></guess>", "\x00\ud800", "word" + " " * 300 + "x",
            '<tool_call>{"name": "look", "arguments": {}}</tool_call>', '{"arguments": {"guess": "crane"}}',
            "<tool_call>[]</tool_call>", '<tool_call>{"name": "guess_word", "arguments": "oops"}</tool_call>']


def _write(word: str, rng: np.random.Generator) -> str:
    """``word`` as one of the action shapes a model writes (mostly the canonical one)."""
    k = int(rng.integers(12))
    pre, post = (_NOISE[int(rng.integers(len(_NOISE)))] for _ in range(2))
    if k <= 4:
        return '<tool_call>{"name": "guess_word", "arguments": {"guess": "%s"}}</tool_call>' % word
    if k == 5:
        return '{"name": "guess_word", "arguments": {"guess": "%s"}}' % word
    if k == 6:
        return pre + '<TOOL_CALL>\n{"name": "guess_word", "arguments": {"guess": %s}}\n</TOOL_CALL>' % json.dumps(
            word) + post
    if k == 7:
        return pre + f'guess_word("{word}")' + post
    if k == 8:
        return pre + f"<guess>{word}</guess>" + post
    if k == 9:
        return f"My guess is {word.upper()}"
    if k == 10:  # two calls: only the first is played
        return (f'<tool_call>{{"name": "guess_word", "arguments": {{"guess": "{word}"}}}}</tool_call>'
                '<tool_call>{"name": "guess_word", "arguments": {"guess": "slate"}}</tool_call>')
    return (f'<tool_call>{{"name": "hint", "arguments": {{}}}}</tool_call>'
            f'<tool_call>{{"name": "guess_word", "arguments": {{"guess": "{word}"}}}}</tool_call>')


def _random_action(rng: np.random.Generator, env: WordleEnv) -> str:
    k = int(rng.integers(20))
    words = game.allowed_guesses()
    if k < 11:
        return _write(words[int(rng.integers(len(words)))], rng)
    if k == 11:  # a word consistent with the feedback so far (hard mode accepts it)
        cands = env._candidates
        answers = game.answers()
        return _write(answers[int(cands[int(rng.integers(len(cands)))])] if len(cands) else "crane", rng)
    if k == 12:  # the secret (a solve), or a word already played
        return _write(env._answer if rng.random() < 0.5 else (env._knowledge.guesses or ["crane"])[-1], rng)
    if k == 13:  # not in the dictionary
        return _write("".join(chr(97 + int(c)) for c in rng.integers(26, size=5)), rng)
    if k == 14:  # wrong length, or not letters
        return _write(["cat", "planet", "cr4ne", "  Crane. ", "CRANE", "é" * 5][int(rng.integers(6))], rng)
    return _GARBAGE[int(rng.integers(len(_GARBAGE)))]


@pytest.fixture(scope="module")
def solver_games() -> dict[str, list[str]]:
    rng = np.random.default_rng(7)
    solver = WordleSolver()
    chosen = rng.choice(len(game.answers()), size=SOLVER_ANSWERS, replace=False)
    return {game.answers()[int(i)]: solver.play(game.answers()[int(i)]) for i in chosen}


def _reset_args(i: int, rng: np.random.Generator, solver_games: dict[str, list[str]], solver: bool):
    if solver:
        answer = list(solver_games)[i % len(solver_games)]
        return {"seed": i, "options": {"answer": answer} if i % 2 else {"task": {"answer": answer, "id": f"t{i}"}}}
    k = int(rng.integers(10))
    if k == 0:
        return {"seed": i, "options": {"answer": game.answers()[int(rng.integers(len(game.answers())))]}}
    if k == 1:
        return {"seed": i, "options": {"task": {"answer": "zzzzz", "id": f"row-{i}"}}}  # outside the answer list
    return {"seed": i}


@pytest.mark.slow  # 50,000 episodes against the frozen env: a minute or more
def test_old_and_new_envs_agree_byte_for_byte(solver_games):
    olds = [OldWordleEnv(**kw) for kw in VARIANTS]
    news = [WordleEnv(**kw) for kw in VARIANTS]
    steps = 0
    for i in range(EPISODES):
        rng = np.random.default_rng(i)
        v = i % len(VARIANTS)
        old, new = olds[v], news[v]
        solver = i % 10 < SOLVER_SHARE * 10
        args = _reset_args(i, rng, solver_games, solver)
        o_obs, o_info = old.reset(**args)
        n_obs, n_info = new.reset(**args)
        old_id, new_id = o_info.pop("task_id"), n_info.pop("task_id")
        assert repr((o_obs, o_info)) == repr((n_obs, n_info)), (i, args)
        row_id = (args.get("options") or {}).get("task", {}).get("id")
        assert new_id == (row_id or new_id) and new_id.startswith("wordle-" if row_id is None else "")
        assert (old_id == new_id) == (row_id is not None)
        plan = list(solver_games[new._answer]) if solver else []
        done = False
        while not done:
            if plan and rng.random() > 0.15:
                action = _write(plan.pop(0), rng)
            else:
                action = _random_action(rng, new)
            o = old.step(action)
            n = new.step(action)
            assert repr(o) == repr(n), (i, args, action)
            done = n[2] or n[3]
            steps += 1
    assert steps > EPISODES * 3
