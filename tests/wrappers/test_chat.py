"""ChatHistory: pinned conversations, tool-call ids, history trimming, space membership."""


import gymnasium
import pytest
from env_checks import strict_check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wrapper_helpers import ACTIONS, G, play

from mtrl_gym.error import ConfigError
from mtrl_gym.wrappers import ChatHistory, to_openai


def chat(**kw):
    return ChatHistory(gymnasium.make("mtrl/Wordle-v0"), **kw)


def test_conversation_is_pinned():
    env = chat()
    (obs0, info0), steps = play(env, [G("crane"), "hmm, let me think", "My guess: SLATE"], options={"answer": "paste"})
    assert [m["role"] for m in obs0] == ["system", "user"]
    assert obs0[0]["content"] == info0["system_prompt"] and obs0[1]["content"].startswith("Let's play Wordle.")
    obs = steps[-1][0]
    assert [m["role"] for m in obs] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
    assert obs[2] == {"role": "assistant", "content": G("crane"), "name": "", "tool_call_id": "",
                      "tool_calls": ({"id": "call_0", "type": "function",
                                      "function": {"name": "guess_word", "arguments": '{"guess": "crane"}'}},)}
    assert obs[3]["tool_call_id"] == "call_0" and obs[3]["name"] == "guess_word"
    assert obs[3]["content"].startswith("Guess 1/6: CRANE\nFeedback: C gray, R gray, A yellow, N gray, E green")
    assert obs[3]["content"].endswith("You have 5 guesses left.")  # the whole observation, nothing lost
    assert obs[5] == {"role": "user", "content": steps[1][0][-1]["content"], "name": "", "tool_call_id": "",
                      "tool_calls": ()}
    assert obs[5]["content"].startswith("No guess found in your message.")
    assert obs[6]["content"] == "My guess: SLATE"
    assert obs[6]["tool_calls"][0]["function"]["arguments"] == '{"guess": "SLATE"}'
    assert env.observation_space.contains(obs)


def test_every_call_is_answered_with_its_id():
    env = chat()
    action = '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>' + G("crane") + G("slate")
    (_, _), [(obs, *_)] = play(env, [action], options={"answer": "paste"})
    calls = [c["id"] for c in obs[2]["tool_calls"]]
    tools = [m for m in obs if m["role"] == "tool"]
    assert calls == [m["tool_call_id"] for m in tools] == ["call_0", "call_1", "call_2"]
    assert tools[0]["content"].startswith("Unknown tool 'search'")
    assert tools[2]["content"] == "Ignored: only one guess per turn is played."


def test_max_history_keeps_system_first_user_and_last_turns():
    env = chat(max_history=2)
    _, steps = play(env, [G("crane"), G("slate"), "no call", G("pious")], options={"answer": "paste"})
    obs = steps[-1][0]
    assert [m["role"] for m in obs] == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert obs[2]["content"] == "no call" and obs[4]["content"] == G("pious")
    full = play(chat(), [G("crane"), G("slate"), "no call", G("pious")], options={"answer": "paste"})[1][-1][0]
    assert obs == full[:2] + full[-4:]


def test_observations_are_fresh_objects():
    env = chat()
    env.reset(seed=0)
    obs, *_ = env.step(G("crane"))
    obs[2]["content"] = "edited"
    obs[2]["tool_calls"][0]["function"]["name"] = "edited"
    again, *_ = env.step(G("slate"))
    assert again[2]["content"] == G("crane") and again[2]["tool_calls"][0]["function"]["name"] == "guess_word"


def test_to_openai_drops_empty_fields():
    env = chat()
    _, [(obs, *_)] = play(env, [G("crane")], options={"answer": "paste"})
    msgs = to_openai(obs)
    assert msgs[0] == {"role": "system", "content": obs[0]["content"]}
    assert msgs[2]["tool_calls"] == [{"id": "call_0", "type": "function",
                                      "function": {"name": "guess_word", "arguments": '{"guess": "crane"}'}}]
    assert msgs[3] == {"role": "tool", "content": obs[3]["content"], "name": "guess_word", "tool_call_id": "call_0"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1),
       actions=st.lists(st.one_of(ACTIONS, st.text(alphabet=st.characters(), max_size=30)), min_size=1, max_size=13),
       max_history=st.none() | st.integers(1, 4))
def test_any_play_stays_in_the_space_and_passes_everything_else_through(seed, actions, max_history):
    env = chat(max_history=max_history)
    (obs0, info0), steps = play(env, actions, seed=seed)
    bare = play(gymnasium.make("mtrl/Wordle-v0"), actions, seed=seed)[1]
    assert env.observation_space.contains(obs0)
    for i, ((obs, r, t, u, info), (bobs, br, bt, bu, binfo)) in enumerate(zip(steps, bare), start=1):
        assert env.observation_space.contains(obs)
        assert (r, t, u, info) == (br, bt, bu, binfo)
        assert obs[:2] == obs0
        turns = [k for k, m in enumerate(obs) if m["role"] == "assistant"]
        assert len(turns) == (i if max_history is None else min(max_history, i))
        reply = obs[turns[-1] + 1:]
        assert reply and all(m["role"] in ("tool", "user") for m in reply)
        assert "\n".join(m["content"] for m in reply) == bobs  # the env's observation, whole


def test_gymnasium_checker_passes():
    # The wrapper itself is what is checked, so gymnasium's note that it is not the raw env is expected.
    strict_check_env(chat(max_history=3), allow=["different from the unwrapped"])


@pytest.mark.parametrize("value", [0, -1, True, "3", 2.5])
def test_bad_max_history(value):
    with pytest.raises(ConfigError, match=r"`max_history` must be an int >= 1 \(turns kept\) or None"):
        chat(max_history=value)


def test_needs_text_observations():
    with pytest.raises(ConfigError, match="ChatHistory needs an env with Text observations"):
        ChatHistory(gymnasium.make("CartPole-v1"))
