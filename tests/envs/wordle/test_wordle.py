"""Wordle-v0: game rules, pinned texts and numbers, error paths, and hypothesis properties."""

import json
import os
import re
import subprocess
import sys
import time

import gymnasium
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mtrl_gym  # noqa: F401  (registers the envs)
from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.env import MIN_REWARD, SUCCESS_THRESHOLD, WordleEnv, solve_reward
from mtrl_gym.envs.wordle.solver import format_guess
from mtrl_gym.error import InvalidTask

G = format_guess


def make(answer="paste", **kw):
    env = WordleEnv(**kw)
    obs, info = env.reset(seed=0, options={"answer": answer})
    return env, obs, info


# ------------------------------------------------------------------ feedback rules


@pytest.mark.parametrize("guess, answer, expected", [
    ("speed", "abide", "gray gray yellow gray yellow"),   # one E in the answer: only the first E is marked
    ("eerie", "three", "yellow gray green gray green"),   # greens take their E first, then one E left
    ("llama", "hello", "yellow yellow gray gray gray"),   # answer has two Ls: both guess Ls are yellow
    ("hello", "llama", "gray gray yellow yellow gray"),   # guess has two Ls, answer two: both yellow
    ("lolly", "hello", "gray yellow green green gray"),  # both answer Ls are used by greens: first L gray
    ("crane", "crane", "green green green green green"),
    ("abbey", "kebab", "yellow yellow green yellow gray"),
])
def test_feedback_repeated_letters(guess, answer, expected):
    fb = [game.COLOR_NAMES[c] for c in game.feedback(guess, answer)]
    assert " ".join(fb) == expected
    env, _, _ = make(answer, invalid_word="play")
    _, _, _, _, info = env.step(G(guess))
    assert info["feedback"] == expected.split()


def test_pattern_table_agrees_with_scalar_feedback():
    rng = np.random.default_rng(0)
    table = game.pattern_table()
    for _ in range(2000):
        i, j = rng.integers(table.shape[0]), rng.integers(table.shape[1])
        assert game.decode_pattern(table[i, j]) == game.feedback(game.allowed_guesses()[i], game.answers()[j])


def test_word_lists():
    assert len(game.answers()) == 1923 and len(game.allowed_guesses()) == 11072
    assert set(game.answers()) <= set(game.allowed_guesses())


# ------------------------------------------------------------------ pinned episode text


def test_first_observation_and_reset_info():
    env, obs, info = make()
    assert obs.startswith("Let's play Wordle.")
    assert "guess_word" in info["system_prompt"] and info["tools"][0]["function"]["name"] == "guess_word"
    assert info["task_id"].startswith("wordle-") and "paste" not in info["task_id"]


def test_played_guess_text_is_pinned():
    env, _, _ = make()
    obs, reward, term, trunc, info = env.step(G("crane"))
    assert obs == (
        "Guess 1/6: CRANE\n"
        "Feedback: C gray, R gray, A yellow, N gray, E green\n"
        "Known so far:\n"
        "- Green (right letter, right place): _ _ _ _ E\n"
        "- Yellow (in the word, other place): A (not at 3)\n"
        "- Gray (not in the word): C, N, R\n"
        "- Guessed: CRANE\n"
        "You have 5 guesses left.")
    assert (reward, term, trunc) == (0.0, False, False)
    assert info["candidates_before"] == 1923 and info["candidates_remaining"] == 43
    assert info["tool_results"] == [{"tool_call_id": "call_0", "name": "guess_word", "content": obs}]
    obs, *_ = env.step(G("toast"))
    assert "- Yellow (in the word, other place): A (not at 3), S (not at 4), T (exactly 1; not at 1, 5)" in obs


def test_solve_rewards_for_every_guess_count():
    assert [solve_reward(n) for n in range(1, 7)] == pytest.approx([1.55, 1.45, 1.35, 1.25, 1.15, 1.05])
    words = ["crane", "toast", "tapes", "ample", "haste"]
    for n in range(1, 7):
        env, _, _ = make()
        for w in words[: n - 1]:
            assert env.step(G(w))[1] == 0.0
        obs, reward, term, _, info = env.step(G("paste"))
        assert term and info["solved"] and info["success"] and info["answer"] == "paste"
        assert reward == pytest.approx(solve_reward(n)) and reward >= SUCCESS_THRESHOLD
        assert obs.endswith(f"Solved in {n} guesses. The game is over.")


def test_loss_after_six_guesses():
    env, _, _ = make()
    for w in ["crane", "toast", "tapes", "ample", "haste"]:
        env.step(G(w))
    obs, reward, term, trunc, info = env.step(G("lapse"))
    assert (reward, term, trunc) == (-0.5, True, False)
    assert info["answer"] == "paste" and not info["success"]
    assert "No guesses left: the word was PASTE." in obs


# ------------------------------------------------------------------ error paths


@pytest.mark.parametrize("action, error, format_error, text", [
    ("I am not sure.", "no_guess", True, "No guess found in your message."),
    ('<tool_call>{"name": "guess_word", "arguments": {"guess": 5}}</tool_call>', "bad_arguments", True,
     'Invalid call to guess_word: guess_word needs one argument "guess" with a 5-letter word.'),
    ('<tool_call>{"name": "guess_word", "arguments": "{oops"}</tool_call>', "bad_arguments", True,
     "Invalid call to guess_word: arguments are not a JSON object"),
    (G("cr4ne"), "not_letters", False, "Invalid guess 'cr4ne': use only the letters a-z. No guess was used."),
    (G("crånes"), "not_letters", False, "Invalid guess 'cr?nes': use only the letters a-z."),
    (G("cranes"), "wrong_length", False, "Invalid guess 'CRANES': it has 6 letters, not 5. No guess was used."),
    (G("xyzzy"), "not_in_dictionary", False, "XYZZY is not in the word list. No guess was used; try another word."),
    ('<tool_call>{"name": "submit", "arguments": {}}</tool_call>', "no_guess", True,
     "Unknown tool 'submit'. The only tool is guess_word.\nNo guess found in your message."),
])
def test_error_paths_use_no_guess(action, error, format_error, text):
    env, _, _ = make()
    obs, reward, term, trunc, info = env.step(action)
    assert obs.startswith(text)
    assert (info["error"], info["format_error"], info["valid"], info["guesses_used"]) == (error, format_error, False, 0)
    assert (reward, term, trunc) == (0.0, False, False)
    assert obs.endswith("You have 6 guesses left.")


def test_unknown_tool_gets_its_own_result_next_to_the_guess():
    env, _, _ = make()
    action = '<tool_call>{"name": "hint", "arguments": {}}</tool_call>' + G("crane")
    _, _, _, _, info = env.step(action)
    assert [r["name"] for r in info["tool_results"]] == ["hint", "guess_word"]
    assert info["tool_results"][0]["content"] == "Unknown tool 'hint'. The only tool is guess_word."
    assert info["valid"] and not info["format_error"]


def test_help_text_reaches_tool_results_when_no_guess_was_called():
    env, _, _ = make()
    obs, _, _, _, info = env.step('<tool_call>{"name": "hint", "arguments": {}}</tool_call>')
    assert info["error"] == "no_guess" and len(info["tool_results"]) == 1
    assert info["tool_results"][0]["content"] == obs
    assert obs.startswith("Unknown tool 'hint'. The only tool is guess_word.\nNo guess found in your message.")


def test_extra_calls_are_ignored_and_said_so():
    env, _, _ = make()
    obs, _, _, _, info = env.step(G("crane") + G("slate") + G("paste"))
    assert info["guess"] == "crane" and info["guesses_used"] == 1
    assert obs.endswith("You have 5 guesses left.\n" + "\n".join(["Ignored: only one guess per turn is played."] * 2))
    assert [r["content"] for r in info["tool_results"][1:]] == ["Ignored: only one guess per turn is played."] * 2


def test_invalid_word_play_mode():
    env, _, _ = make(invalid_word="play")
    _, _, _, _, info = env.step(G("xyzzy"))
    assert info["valid"] and not info["in_dictionary"] and info["guesses_used"] == 1
    # computed on the fly (not in the pattern table): answers without X, Y or Z remain
    assert info["candidates_remaining"] == sum(1 for a in game.answers() if not set("xyz") & set(a)) == 1539


def test_repeated_word_uses_a_guess_and_is_flagged():
    env, _, _ = make()
    env.step(G("crane"))
    obs, _, _, _, info = env.step(G("crane"))
    assert info["repeated"] and info["valid"] and info["guesses_used"] == 2
    assert obs.startswith("Guess 2/6: CRANE (you already guessed this word)")


def test_a_spelled_out_guess_plays_the_same_word_and_is_flagged():
    plain, _, _ = make()
    spelled, _, _ = make()
    _, r1, _, _, a = plain.step(G("crane"))
    obs, r2, _, _, b = spelled.step(G("C R A N E"))
    assert b["spelled"] and "spelled" not in a
    assert (b["guess"], b["feedback"], b["guesses_used"], r2) == (a["guess"], a["feedback"], 1, r1)
    assert obs.startswith("Guess 1/6: CRANE\n")
    _, _, _, _, info = spelled.step(G("s-l-a-t-e"))
    assert info["spelled"] and info["guess"] == "slate" and info["guesses_used"] == 2


def test_a_position_tagged_guess_plays_the_same_word_and_is_flagged():
    plain, _, _ = make()
    tagged, _, _ = make()
    _, r1, _, _, a = plain.step(G("crane"))
    obs, r2, _, _, b = tagged.step(G("C1 R2 A3 N4 E5"))
    assert b["spelled"] and (b["guess"], b["feedback"], b["guesses_used"], r2) == (a["guess"], a["feedback"], 1, r1)
    assert obs.startswith("Guess 1/6: CRANE\n")


@pytest.mark.parametrize("text, error, letters", [
    ("T1 A2 L3 O4 R5 Y6", "wrong_length", 6), ("C1 R2 A3 N4", "wrong_length", 4),
    ("C2 R1 A3 N4 E5", "not_letters", None), ("C1 R2 A3 N4 E6", "not_letters", None),
    ("C1  R2 A3 N4 E5", "not_letters", None), ("X1 Y2 Z3 Z4 Y5", "not_in_dictionary", None),
])
def test_malformed_tagged_spellings_use_no_guess_and_say_why(text, error, letters):
    env, _, _ = make()
    obs, _, _, _, info = env.step(G(text))
    assert (info["error"], info["valid"], info["guesses_used"]) == (error, False, 0)
    if letters is not None:  # a tagged spelling of the wrong length is read, so the reply counts its letters
        assert f"it has {letters} letters, not 5" in obs


@pytest.mark.parametrize("text, error", [
    ("C R A N", "not_letters"), ("C  R A N E", "not_letters"), ("C R A N E S", "not_letters"),
    ("CR A N E", "not_letters"), ("C R 4 N E", "not_letters"), ("X Y Z Z Y", "not_in_dictionary"),
])
def test_malformed_spellings_use_no_guess(text, error):
    env, _, _ = make()
    _, _, _, _, info = env.step(G(text))
    assert (info["error"], info["valid"], info["guesses_used"]) == (error, False, 0)


def test_spell_and_unspell_are_inverse_on_the_word_list():
    words = game.allowed_guesses()
    assert all(game.unspell(game.spell(w)) == w for w in words)
    assert game.unspell("crane") is None and game.unspell("C R A N E ") is None
    assert format_guess("crane", spelled=True) == G("C R A N E")
    assert all(game.unspell(game.spell(w, tagged=True)) == w for w in words)
    assert format_guess("crane", tagged=True) == G("C1 R2 A3 N4 E5")


def test_loose_fallback_is_flagged():
    env, _, _ = make()
    _, _, _, _, info = env.step("I will go with: guess CRANE")
    assert info["loose_match"] and info["valid"] and info["guess"] == "crane"
    _, _, _, _, info = env.step("slate")
    assert info["loose_match"] and info["guess"] == "slate"


def test_clue_violations_and_new_letters():
    env, _, _ = make()
    env.step(G("crane"))  # C R N gray, A yellow (not 3), E green at 5
    _, _, _, _, info = env.step(G("brain"))
    # R and N are gray (2), A placed at its excluded position 3 (1), the green E left out (1).
    assert info["clue_violations"] == 4 and info["new_letters"] == 2  # B and I
    _, _, _, _, info = env.step(G("paste"))
    assert info["clue_violations"] == 0


def test_twelve_step_cap_without_valid_guess():
    env, _, _ = make()
    for i in range(11):
        _, reward, term, _, info = env.step("no idea")
        assert not term and reward == 0.0
    obs, reward, term, trunc, info = env.step("still no idea")
    assert (reward, term, trunc) == (MIN_REWARD, True, False) and info["turns_used"] == 12
    assert "The turn limit (12) was reached: the word was PASTE." in obs
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step(G("paste"))


def test_twelve_step_cap_with_a_valid_guess_is_a_loss():
    env, _, _ = make()
    env.step(G("crane"))
    for _ in range(10):
        env.step("hmm")
    _, reward, term, _, _ = env.step(G("xyzzy"))
    assert term and reward == -0.5


def test_hard_mode_rejects_guesses_that_ignore_clues():
    env = gymnasium.make("mtrl/Wordle-Hard-v0")
    env.reset(seed=0, options={"answer": "paste"})
    env.step(G("crane"))
    obs, _, _, _, info = env.step(G("toast"))  # drops the green E at 5 and puts A at 3 again
    assert info["error"] == "hard_mode" and not info["valid"] and info["guesses_used"] == 1
    assert obs.startswith("TOAST ignores 2 revealed clue(s)")
    _, _, _, _, info = env.step(G("haste"))  # consistent with all clues
    assert info["valid"] and info["guesses_used"] == 2
    assert "Hard mode is on" in env.unwrapped.system_prompt


def test_reset_options():
    env = WordleEnv()
    _, info = env.reset(options={"task": {"prompt": json.dumps({"prompt": "p", "answer": "Riser", "id": "t1"})}})
    assert info["task_id"] == "t1"
    env.step(G("riser"))
    with pytest.raises(InvalidTask, match="a Wordle answer must be a 5-letter word a-z, got 'toolong'"):
        env.reset(options={"answer": "toolong"})
    with pytest.raises(InvalidTask, match=r"unknown reset option\(s\) \['word'\]"):
        env.reset(options={"word": "paste"})
    with pytest.raises(ValueError, match='`invalid_word` must be "reject" or "play", got \'skip\''):
        WordleEnv(invalid_word="skip")


def test_secret_outside_the_answer_list_still_counts_as_candidate():
    env = WordleEnv()
    env.reset(options={"answer": "zzzzz"})
    _, _, _, _, info = env.step(G("crane"))
    assert info["candidates_remaining"] >= 1
    _, reward, term, _, info = env.step(G("zzzzz"))  # the secret is always an accepted guess
    assert term and info["solved"] and reward == pytest.approx(1.45)


def test_seeded_reset_draws_from_env_rng_not_global():
    a = [WordleEnv().reset(seed=s)[1]["task_id"] for s in range(5)]
    np.random.seed(123)
    b = [WordleEnv().reset(seed=s)[1]["task_id"] for s in range(5)]
    assert a == b and len(set(a)) > 1


# ------------------------------------------------------------------ hypothesis properties

_WORDS = st.sampled_from(game.allowed_guesses())
_actions = st.one_of(
    _WORDS.map(G),
    _WORDS.map(lambda w: f"guess_word({w!r})"),
    st.sampled_from(["paste", "crane", "slate"]).map(G),
    st.text(max_size=60),
    st.sampled_from(["<tool_call>{", G("abcde"), G("toolong"), G(""), "<guess>x</guess>", "guess: tapes"]),
)

REWARDS = {0.0, -0.5, -1.5, *(solve_reward(n) for n in range(1, 7))}


def _run(seed, actions, env_id="mtrl/Wordle-v0"):
    env = gymnasium.make(env_id)
    obs, info = env.reset(seed=seed)
    steps = [(obs, info)]
    for a in actions:
        step = env.step(a)
        steps.append(step)
        if step[2] or step[3]:
            break
    return steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), actions=st.lists(_actions, min_size=1, max_size=14),
       env_id=st.sampled_from(["mtrl/Wordle-v0", "mtrl/Wordle-Hard-v0"]))
def test_any_action_is_safe_and_rewards_are_documented_values(seed, actions, env_id):
    steps = _run(seed, actions, env_id)
    env = gymnasium.make(env_id)
    assert env.observation_space.contains(steps[0][0])
    for i, (obs, reward, term, trunc, info) in enumerate(steps[1:]):
        assert env.observation_space.contains(obs)
        assert reward in REWARDS and trunc is False
        assert reward == 0.0 or term
        assert ("answer" in info) == term
        assert info["turns_used"] == i + 1 <= 12


def _strip(step):
    """A step without what may legitimately depend on the secret's identity."""
    if len(step) == 2:
        obs, info = step
        return obs, {k: v for k, v in info.items() if k != "task_id"}
    return step


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=st.sampled_from(game.answers()), actions=st.lists(_actions, min_size=1, max_size=14),
       pick=st.integers(0, 10_000))
def test_secret_never_leaks_before_the_final_step(answer, actions, pick):
    """Two secrets that give the same feedback to every guess played produce identical
    observations and info (but the task id) until the final step: nothing else about the
    secret reaches the agent."""
    def play(secret, n=None):
        env = WordleEnv()
        out = [env.reset(seed=0, options={"answer": secret})]
        for a in actions[:n]:
            out.append(env.step(a))
            if out[-1][2]:
                break
        return out

    steps = play(answer)
    final = len(steps) - 1 if steps[-1][2] else len(steps)
    history = [(s[4]["guess"], s[4]["feedback"]) for s in steps[1:final] if s[4]["valid"]]
    from mtrl_gym.envs.wordle.solver import WordleSolver

    twins = WordleSolver().candidates(history)
    twin = game.answers()[twins[pick % len(twins)]]
    other = play(twin, n=final - 1 if final < len(steps) else None)
    assert [_strip(s) for s in steps[:final]] == [_strip(s) for s in other[:final]]
    for s in steps[1:final]:
        assert "answer" not in s[4] and "success" not in s[4]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), actions=st.lists(_actions, min_size=1, max_size=8))
def test_same_seed_same_actions_same_trajectory(seed, actions):
    assert _run(seed, actions) == _run(seed, actions)


_SCRIPT = """
import json, sys
import gymnasium, mtrl_gym
from mtrl_gym.envs.wordle.solver import format_guess
actions = [format_guess(w) for w in ["crane", "toast", "pilot"]] + ["junk", "guess_word('lapse')"]
out = []
for seed in range(4):
    env = gymnasium.make("mtrl/Wordle-v0")
    out.append(env.reset(seed=seed))
    for a in actions:
        step = env.step(a)
        out.append(step)
        if step[2]:
            break
print(json.dumps(out, sort_keys=True))
"""


def test_determinism_across_processes_and_hash_seeds():
    outs = []
    for hash_seed in ["0", "12345"]:
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        res = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, check=True)
        outs.append(res.stdout)
    assert outs[0] == outs[1] and len(outs[0]) > 1000


@settings(max_examples=100, deadline=None)
@given(answer=st.sampled_from(game.answers()), guesses=st.lists(_WORDS, min_size=1, max_size=4),
       probe=st.sampled_from(game.answers()))
def test_zero_violations_iff_consistent_with_all_feedback(answer, guesses, probe):
    from mtrl_gym.envs.wordle.knowledge import Knowledge

    k = Knowledge()
    for g in guesses:
        k.update(g, game.feedback(g, answer))
    consistent = all(game.feedback(g, probe) == game.feedback(g, answer) for g in guesses)
    assert (k.violations(probe) == 0) == consistent
    assert k.violations(answer) == 0


_ANY_5 = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=5)


@settings(max_examples=150, deadline=None)
@given(answer=st.one_of(st.sampled_from(game.answers()), _WORDS, _ANY_5),
       guesses=st.lists(st.one_of(_WORDS, _WORDS, _ANY_5), min_size=1, max_size=6))
def test_candidate_counts_match_brute_force(answer, guesses):
    # Covers every filtering path: the first-guess table row, numpy gathers, the short list
    # kept once few candidates remain, and words outside the table (invalid_word="play").
    env, _, _ = make(answer, invalid_word="play")
    played = []
    for g in guesses:
        _, _, done, _, info = env.step(G(g))
        played.append(g)
        assert info["feedback"] == [game.COLOR_NAMES[c] for c in game.feedback(g, answer)]
        fits = sum(all(game.feedback(p, a) == game.feedback(p, answer) for p in played) for a in game.answers())
        assert info["candidates_remaining"] == fits + (answer not in game.answers())
        if done:
            break


@settings(max_examples=150, deadline=None)
@given(answer=st.sampled_from(game.answers()), guesses=st.lists(_WORDS, min_size=1, max_size=5))
def test_knowledge_summary_states_only_true_facts(answer, guesses):
    from mtrl_gym.envs.wordle.knowledge import Knowledge

    k = Knowledge()
    for g in guesses:
        k.update(g, game.feedback(g, answer))
    lines = dict(line[2:].split(": ", 1) for line in k.summary().splitlines()[1:])
    secret = answer.upper()
    for pos, ch in enumerate(lines["Green (right letter, right place)"].split()):
        assert ch == "_" or secret[pos] == ch
    for ch in lines.get("Gray (not in the word)", "").split(", "):
        assert ch == "" or ch not in secret
    for ch in lines.get("No other copies of", "").split(", "):
        assert ch == "" or secret.count(ch) == lines["Green (right letter, right place)"].split().count(ch)
    for ch, facts in re.findall(r"([A-Z])(?: \(([^)]*)\))?", lines.get("Yellow (in the word, other place)", "")):
        assert ch in secret
        for fact in facts.split("; ") if facts else []:
            kind, _, value = fact.rpartition(" ")
            if kind == "exactly":
                assert secret.count(ch) == int(value)
            elif kind == "at least":
                assert secret.count(ch) >= int(value)
            else:
                assert fact.startswith("not at ")
                assert all(secret[int(p) - 1] != ch for p in fact.removeprefix("not at ").split(", "))
    assert lines["Guessed"] == ", ".join(guesses).upper()


# ------------------------------------------------------------------ task ids (no answer inside)

_ID_SCRIPT = """
import json, mtrl_gym, gymnasium
env = gymnasium.make("mtrl/Wordle-v0")
ids = [env.reset(seed=s)[1]["task_id"] for s in range(50)]
ids.append(env.reset(options={"answer": "paste"})[1]["task_id"])
print(json.dumps(ids))
"""


def _ids_in_subprocess(cache, **extra_env):
    env = {k: v for k, v in os.environ.items() if k != "MTRL_GYM_TASK_ID_KEY"}
    env.update(MTRL_GYM_CACHE=str(cache), **extra_env)
    res = subprocess.run([sys.executable, "-c", _ID_SCRIPT], capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout)


def test_task_ids_are_stable_across_processes_and_private_to_the_install(tmp_path):
    first = _ids_in_subprocess(tmp_path / "a")
    assert _ids_in_subprocess(tmp_path / "a") == first  # same install: same ids
    assert (tmp_path / "a" / "wordle" / "task-id.key").stat().st_size == 32
    other = _ids_in_subprocess(tmp_path / "b")  # another install: another key
    assert all(x != y for x, y in zip(first, other))
    shared = _ids_in_subprocess(tmp_path / "c", MTRL_GYM_TASK_ID_KEY="cluster-secret")
    assert shared == _ids_in_subprocess(tmp_path / "d", MTRL_GYM_TASK_ID_KEY="cluster-secret") != first


def test_task_ids_cannot_be_inverted_by_hashing_the_answer_list():
    import hashlib

    from mtrl_gym.envs.wordle.task_ids import task_id_for

    def public(word):  # the old scheme: a hash keyed with a constant anyone can read
        return "wordle-" + hashlib.blake2b(word.encode(), digest_size=5, key=b"mtrl_gym").hexdigest()

    table = {public(w): w for w in game.answers()}
    env = WordleEnv()
    ids = [env.reset(seed=s)[1]["task_id"] for s in range(300)]
    assert not any(i in table for i in ids)
    assert len(set(ids)) == len({env.reset(seed=s) and env._answer for s in range(300)})  # one id per secret
    assert task_id_for("paste") == WordleEnv().reset(options={"answer": "paste"})[1]["task_id"]
    row = {"answer": "paste", "id": "wordle_val_0003"}
    assert WordleEnv().reset(options={"task": row})[1]["task_id"] == "wordle_val_0003"


# ------------------------------------------------------------------ hostile text stays cheap

_HOSTILE_UNITS = ["<guess>", "<tool_call>", "guess_word(", "word ", "word" + " " * 999, "{", "<think>",
                  "guess_word('", "<guess></guess>", '{"name": "guess_word", "arguments": '] + [G("crane")]


@pytest.mark.parametrize("unit", _HOSTILE_UNITS)
def test_step_time_on_long_hostile_text_grows_linearly(unit):
    # 25k -> 100k characters: at most ~6x the time (the old loose fallback took 27 s on
    # "word" + 100k spaces); the 50 ms bound itself is checked by the benchmarks.
    def once(text):
        env, _, _ = make()
        t0 = time.perf_counter()
        obs, _, _, _, info = env.step(text)
        assert env.observation_space.contains(obs)
        return time.perf_counter() - t0

    small_text, big_text = unit * (25_000 // len(unit)), unit * (100_000 // len(unit))
    small = big = float("inf")
    for _ in range(7):  # interleaved, best of 7: a loaded machine slows both sides alike
        small, big = min(small, once(small_text)), min(big, once(big_text))
    assert big <= 6 * small + 0.01, (unit, small, big)


def test_loose_fallback_regex_matches_as_before():
    from wordle_frozen.env import _LOOSE_RE as OLD

    from mtrl_gym.envs.wordle.env import _LOOSE_RE as NEW

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.sampled_from(["word", "guess", "guess_word", "answer", " ", "  ", "\n", "is", ":", "=", "->",
                                     '"', "*", "`", "crane", "CRANE", "isabc", "de", "x", "é", "1"]), max_size=14))
    def check(pieces):
        text = "".join(pieces)
        assert OLD.findall(text) == NEW.findall(text)

    check()


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.one_of(_WORDS, _ANY_5), st.lists(st.integers(0, 2), min_size=5, max_size=5)),
                min_size=1, max_size=7))
def test_incremental_summary_equals_the_full_rebuild_even_on_contradictory_feedback(history):
    # The cached summary lines must read exactly as the old summary rebuilt from scratch,
    # for any feedback sequence (the env only produces consistent ones; curricula replay others).
    from wordle_frozen.knowledge import Knowledge as Rebuilt

    from mtrl_gym.envs.wordle.knowledge import Knowledge

    new, old = Knowledge(), Rebuilt()
    for word, fb in history:
        assert new.violations(word) == old.violations(word)
        new.update(word, fb)
        old.update(word, fb)
        assert new.summary() == old.summary()


def test_a_message_cut_by_the_parser_is_flagged_and_explained():
    import gymnasium

    from mtrl_gym.parsing import MAX_PARSE_CHARS

    env = gymnasium.make("mtrl/Wordle-v0")
    env.reset(seed=0)
    call = '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>'
    obs, _, _, _, info = env.step(" " * MAX_PARSE_CHARS + call)  # the valid call lies past the cut
    assert info["message_truncated"] is True and info["error"] == "no_guess"
    assert "your message was too long; only its beginning was read" in obs
    assert "message_truncated" not in env.step(call)[4]
