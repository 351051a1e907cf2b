"""The fuzz suite: every registered env, wrapper and writer takes the adversarial corpus and
hypothesis-drawn model text without raising, answers inside its observation space, writes
``info`` as JSON, and costs linear time in the text (4x text -> at most ~6x time).

The absolute bound (50 ms per step at 100k characters) is measured by
``benchmarks/bad_text.py``, not here: a unit test cannot know how busy the machine is.
"""

from __future__ import annotations

import json

import gymnasium
import pytest
from hypothesis import HealthCheck, given, settings

from mtrl_gym import wrappers as W
from mtrl_gym.error import Error
from mtrl_gym.registry import list_envs
from mtrl_gym.serialization import json_line
from mtrl_gym.testing import CATEGORIES, adversarial_texts, growth_ratio, model_text
from mtrl_gym.rollout.trajectory import Trajectory, load_jsonl, save_jsonl
from mtrl_gym.wrappers import RecordEpisodes, load_episodes

ENVS = list_envs()
FAMILIES = ["mtrl/Wordle-v0", "mtrl/Sandbox-Weather-v0", "mtrl/SOP-CustomerService-v0"]


def _tools(env_id: str) -> list:
    env = gymnasium.make(env_id)
    return env.reset(seed=0)[1].get("tools") or []


def _check_step(env, text: str, where: str) -> dict:
    obs, reward, terminated, truncated, info = env.step(text)
    assert env.observation_space.contains(obs), f"{where}: observation outside the space"
    assert isinstance(reward, float) and isinstance(terminated, bool) and isinstance(truncated, bool), where
    json.loads(json_line(info))
    return info


def test_the_corpus_covers_every_category_of_the_issue():
    cases = adversarial_texts(_tools("mtrl/Sandbox-Weather-v0"), size=10_000)
    assert {c.category for c in cases} == set(CATEGORIES)
    assert set(CATEGORIES) >= {"long", "nul", "surrogate", "deep", "huge_number", "many_calls", "unknown_tool",
                               "wrong_types", "injection"}
    assert len({c.name for c in cases}) == len(cases) >= 60


@pytest.mark.parametrize("env_id", ENVS)
def test_every_env_takes_the_corpus_and_the_recorder_writes_it(env_id, tmp_path):
    path = tmp_path / "episodes.jsonl"
    env = RecordEpisodes(gymnasium.make(env_id), path)
    _, info = env.reset(seed=0)
    cases = adversarial_texts(info.get("tools") or [], size=20_000)
    for case in cases:
        env.reset(seed=0)
        _check_step(env, case.text, f"{env_id} {case.name}")
    env.close()
    assert len(load_episodes(path)) == len(cases)


@pytest.mark.parametrize("env_id", FAMILIES)
def test_every_wrapper_takes_the_corpus(env_id, tmp_path):
    factories = {
        "FormatPenalty": W.FormatPenalty, "ChatHistory": W.ChatHistory, "SystemPrompt": lambda e: W.SystemPrompt(e, "x"),
        "WordleShaping": W.WordleShaping, "PriorGuesses": W.PriorGuesses, "FieldReward": W.FieldReward,
        "RecordEpisodes": lambda e: W.RecordEpisodes(e, tmp_path / "r.jsonl"), "EpisodeStats": W.EpisodeStats,
        "WordleRecap": W.WordleRecap,
    }
    assert set(factories) | {"BoundedShaping", "ChatText"} >= {n for n in W.__all__ if n[0].isupper() and
                                                                 isinstance(getattr(W, n), type)}
    cases = adversarial_texts(_tools(env_id), size=5_000)
    used = []
    for name, wrap in factories.items():
        try:
            env = wrap(gymnasium.make(env_id))
            env.reset(seed=0)
        except Error:
            continue  # the wrapper is for another env family and says so
        used.append(name)
        for case in cases:
            env.reset(seed=0)
            obs, *_ = env.step(case.text)
            assert env.observation_space.contains(obs), f"{name}({env_id}) {case.name}"
        env.close()
    assert {"FormatPenalty", "ChatHistory", "SystemPrompt", "RecordEpisodes"} <= set(used)


def test_the_trajectory_writer_takes_the_corpus(tmp_path):
    env = gymnasium.make("mtrl/Sandbox-Orders-v0")
    trajs = []
    for case in adversarial_texts(_tools("mtrl/Sandbox-Orders-v0"), size=5_000):
        env.reset(seed=0)
        info = env.step(case.text)[4]
        trajs.append(Trajectory(task_id=case.name, messages=[{"role": "assistant", "content": case.text}],
                                final_info=dict(info)))
    assert len(load_jsonl(save_jsonl(trajs, tmp_path / "t.jsonl"))) == len(trajs)


@pytest.mark.parametrize("env_id", ENVS)
def test_hypothesis_model_text_never_breaks_an_env(env_id):
    env = gymnasium.make(env_id)
    tools = env.reset(seed=0)[1].get("tools") or []

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(model_text(tools))
    def check(text):
        env.reset(seed=1)
        _check_step(env, text, env_id)

    check()


# Cases built by repeating a unit: a rescan from each repetition shows as quadratic growth.
GROWTH_CASES = ["unclosed/<final_answer>", "unclosed/<tool_call>", "unclosed/<tool_call>{", "unclosed/{",
                "unclosed/<guess>", "unclosed/```json", "unclosed/<", "many_calls/tool-call-blocks",
                "many_calls/call-syntax", "many_calls/bare-json", "many_calls/final-answers", "long/argument",
                "long/email-like-argument", "long/dotted-argument", "surrogate/raw", "nul/nul-run", "deep/array"]


@pytest.mark.parametrize("env_id", ENVS)
def test_step_cost_grows_linearly(env_id):
    tools = _tools(env_id)
    names = GROWTH_CASES + [n for n in (c.name for c in adversarial_texts(tools, size=100))
                            if n.startswith("unclosed/") and n.endswith("(")]
    slow = []
    for name in names:
        def text_of(size, name=name):
            return next(c.text for c in adversarial_texts(tools, size=size) if c.name == name)

        ratio, small, big = growth_ratio(lambda: gymnasium.make(env_id), text_of, small=12_500, factor=4,
                                         repeat=2, floor_s=0.003)
        if ratio > 6:
            slow.append(f"{name}: {small * 1e3:.1f} -> {big * 1e3:.1f} ms ({ratio:.1f}x for 4x text)")
    assert not slow, "super-linear steps:\n" + "\n".join(slow)


@pytest.mark.parametrize("env_id", ENVS)
def test_stateful_episodes_keep_the_contract(env_id):
    from hypothesis import settings as hsettings
    from hypothesis.stateful import run_state_machine_as_test

    from mtrl_gym.testing import episode_machine

    run_state_machine_as_test(episode_machine(env_id), settings=hsettings(
        max_examples=8, stateful_step_count=12, deadline=None, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]))
