"""The shared episode driver: tasks, structured calls as text, outcome rules (no outside package needed)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtrl_gym.adapters.episode import (
    EPISODE_OVER,
    EnvEpisode,
    EpisodeTask,
    decode_row,
    encode_row,
    resolve_episode_tasks,
    tool_call_text,
)
from mtrl_gym.error import ConfigError, UnknownEnv
from mtrl_gym.parsing import ToolCallParser
from mtrl_gym.registry import list_envs
from mtrl_gym.wrappers import WordleShaping

_ARGS = st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=20), st.integers(), st.none(),
                                                       st.lists(st.booleans(), max_size=3)), max_size=3)


@given(name=st.text(max_size=20), arguments=st.one_of(_ARGS, st.text(max_size=40)))
@settings(max_examples=150, deadline=None)
def test_tool_call_text_never_raises_and_round_trips(name, arguments):
    text = tool_call_text(name, arguments)
    assert text.startswith("<tool_call>") and text.endswith("</tool_call>")
    if isinstance(arguments, dict) and name.isidentifier():
        calls = ToolCallParser([{"type": "function", "function": {"name": name, "parameters": {}}}])(text).calls
        assert calls and calls[0].name == name


@pytest.mark.parametrize("env_id", list_envs())
@given(text=st.text(max_size=300), guess=st.text(max_size=30))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_text_or_call_is_an_observation(env_id, text, guess):
    ep = EnvEpisode(env_id)
    ep.reset(EpisodeTask(seed=1))
    for action in (text, tool_call_text(ep.tools[0]["function"]["name"], {"x": guess}), tool_call_text("nope", guess)):
        obs = ep.step(action)
        assert isinstance(obs, str) and obs
    low = ep.min_reward
    assert ep.outcome() == (sum(ep.rewards) if ep.done else low)


def test_outcome_is_the_bare_env_under_shaping():
    shaped = EnvEpisode("mtrl/Wordle-v0", wrappers=[WordleShaping])
    bare = EnvEpisode("mtrl/Wordle-v0")
    task = EpisodeTask(seed=2, row={"answer": "paste"})
    for ep in (shaped, bare):
        ep.reset(task)
        for guess in ("crane", "paste"):
            ep.call("guess_word", {"guess": guess})
    assert shaped.outcome() == bare.outcome() == pytest.approx(1.45)
    assert shaped.metrics()["shaped_return"] == pytest.approx(sum(shaped.rewards))
    assert "shaped_return" not in bare.metrics()
    assert shaped.step("crane") == EPISODE_OVER


def test_unfinished_episode_gets_the_minimum_and_steps_need_a_reset():
    ep = EnvEpisode("mtrl/Wordle-v0")
    with pytest.raises(ConfigError, match=r"call reset\(\) before step\(\)"):
        ep.step("crane")
    ep.reset(EpisodeTask(seed=0))
    ep.call("guess_word", {"guess": "crane"})
    assert not ep.done and ep.outcome() == -1.5
    assert ep.metrics() == {"turns": 1.0, "format_errors": 0.0, "tool_calls": 1.0, "finished": 0.0, "success": 0.0}


def test_tasks_from_lists_splits_and_seeds():
    assert resolve_episode_tasks("mtrl/Wordle-v0", limit=3, seed=4) == [EpisodeTask(4), EpisodeTask(5), EpisodeTask(6)]
    val = resolve_episode_tasks("mtrl/Wordle-v0", split="val", limit=2)
    assert [t.row["id"] for t in val] == ["wordle_val_0000", "wordle_val_0001"] and val[1].seed == 1
    rows = resolve_episode_tasks("mtrl/SOP-KYBReview-v0", split="val", limit=1)
    assert rows[0].row is not None
    assert decode_row(encode_row(rows[0].row)) == rows[0].row and decode_row("") is None
    assert json.loads(encode_row({"b": 1, "a": 2})) == {"a": 2, "b": 1}
    with pytest.raises(ConfigError, match="`seed` must be >= 0, got -1"):
        resolve_episode_tasks("mtrl/Wordle-v0", seed=-1)


def test_unknown_env_suggests_close_ids():
    with pytest.raises(UnknownEnv, match="Did you mean 'mtrl/Wordle-v0'"):
        EnvEpisode("mtrl/Wordle-v9")


@pytest.mark.parametrize("env_id", list_envs())
def test_every_env_tool_list_renders_as_prompt_text(env_id):
    """The verifiers adapter writes tools into the system prompt; union types (["string", "null"]) included."""
    from mtrl_gym.rollout.template import render_tools

    ep = EnvEpisode(env_id)
    ep.reset(EpisodeTask(seed=0))
    text = render_tools(ep.tools)
    assert text.startswith("# Tools") and text.endswith("</tool_call>")
