"""Issue items 1-3: deep answers, quadratic redaction, writers and hostile model text."""

from __future__ import annotations

import json
import time

import gymnasium
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.envs.sandbox.grading import _norm, make_checker
from mtrl_gym.envs.sandbox.redact import Redactor
from mtrl_gym.serialization import json_line, json_safe, safe_text
from mtrl_gym.rollout.trajectory import Trajectory, load_jsonl, save_jsonl
from mtrl_gym.wrappers import RecordEpisodes
from mtrl_gym.wrappers.recording import load_episodes

DEEP_ANSWER = "<final_answer>" + "[" * 500 + "1" + "]" * 500 + "</final_answer>"


# ------------------------------------------------------------------ item 1: deep final answers

@pytest.mark.parametrize("env_id", ["mtrl/Sandbox-Shop-v0", "mtrl/Sandbox-Weather-v0", "mtrl/Sandbox-Orders-v0"])
def test_deeply_nested_final_answer_is_graded_not_raised(env_id):
    env = gymnasium.make(env_id)
    env.reset(seed=1)
    obs, reward, _terminated, _, _info = env.step(DEEP_ANSWER)
    assert env.observation_space.contains(obs) and reward == 0.0


def test_normaliser_is_iterative_and_keeps_order():
    deep: object = "X "
    for _ in range(20_000):
        deep = [deep]
    out = _norm(deep, True, True)
    for _ in range(20_000):
        out = out[0]
    assert out == "x"
    assert _norm({"b": [" A ", {"c": " X"}], "a": 1}, True, True) == {"b": ["a", {"c": "x"}], "a": 1}
    assert list(_norm({"z": 1, "a": [1]}, False, True)) == ["z", "a"]


@pytest.mark.parametrize("spec", ["exact", "one_of", "set", "json_fields"])
def test_every_checker_survives_a_deep_answer(spec):
    deep: object = 1
    for _ in range(5_000):
        deep = [deep]
    expected = {"exact": "a", "one_of": ["a"], "set": ["a"], "json_fields": {"a": 1}}[spec]
    grade = make_checker(spec)(deep, expected)
    assert not grade.passed


# ------------------------------------------------------------------ item 2: linear redaction

@pytest.mark.parametrize("unit", ["a", "a.", "eyJ-", "a@a-", "://a:", "sk-", "%"])
def test_redaction_grows_linearly(unit):
    r = Redactor()

    def cost(n: int) -> float:
        text = unit * (n // len(unit))
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            r.redact_text(text)
            best = min(best, time.perf_counter() - t)
        return best

    small, big = cost(25_000), cost(100_000)
    assert big <= 6 * small + 0.02, f"4x text took {big / small:.1f}x time ({small * 1e3:.1f} -> {big * 1e3:.1f} ms)"


def test_weather_city_argument_of_45k_characters_is_cheap():
    env = gymnasium.make("mtrl/Sandbox-Weather-v0")
    env.reset(seed=0)
    call = json.dumps({"name": "get_daily_weather", "arguments": {"city": "a" * 45_000, "date": "2024-06-01"}})
    t = time.perf_counter()
    obs, *_ = env.step(f"<tool_call>{call}</tool_call>")
    assert time.perf_counter() - t < 1.0  # 2.3-2.6 s before; benchmarks/bad_text.py checks the 50 ms bound
    assert env.observation_space.contains(obs)


def test_redaction_still_finds_secrets():
    r = Redactor()
    assert r.redact_text("mail ann.lee@example.com now").startswith("mail [REDACTED:email:")
    jwt = "eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl"
    assert r.redact_text(f"token {jwt}").startswith("token [REDACTED:jwt:")


# ------------------------------------------------------------------ item 3: writers

@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
                    max_leaves=20))
@settings(max_examples=150, deadline=None)
def test_json_line_writes_any_value(value):
    line = json_line(value)
    line.encode("utf-8")
    json.loads(line)


def test_json_safe_replaces_lone_surrogates_and_caps_depth():
    assert safe_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert safe_text("ok \U0001f600") == "ok \U0001f600"
    deep: list = []
    node = deep
    for _ in range(100_000):
        node.append([])
        node = node[0]
    json.loads(json_line({"deep": deep}))
    cyclic: list = []
    cyclic.append(cyclic)
    assert "cut" in json_line(cyclic)
    assert json_safe({"\udc80": 1}) == {"\ufffd": 1}


def _surrogate_call() -> str:
    return '<tool_call>{"name": "get_daily_weather", "arguments": {"city": "Os\\ud800lo", "date": "2024-06-01"}}' \
           "</tool_call>"


def _deep_call(depth: int = 900) -> str:
    return ('<tool_call>{"name": "list_cities", "arguments": {"country": ' + "[" * depth + "1" + "]" * depth
            + "}}</tool_call>")


@pytest.mark.parametrize("action", [_surrogate_call(), _deep_call()], ids=["surrogate", "deep"])
def test_record_episodes_survives_model_text(tmp_path, action):
    path = tmp_path / "episodes.jsonl"
    env = RecordEpisodes(gymnasium.make("mtrl/Sandbox-Weather-v0"), path)
    env.reset(seed=0)
    env.step(action)
    env.step("<final_answer>Oslo</final_answer>")
    env.close()
    [record] = load_episodes(path)
    assert record["finished"] and len(record["steps"]) == 2


def test_trajectory_file_survives_surrogates_and_depth(tmp_path):
    deep: object = 1
    for _ in range(900):
        deep = [deep]
    traj = Trajectory(task_id="t\ud800", messages=[{"role": "assistant", "content": "x\udfff"}],
                      final_info={"args": deep})
    path = save_jsonl([traj], tmp_path / "t.jsonl")
    [back] = load_jsonl(path)
    assert back.task_id == "t\ufffd" and back.messages[0]["content"] == "x\ufffd"


def test_cassettes_recorded_with_the_old_quadratic_patterns_replay_linearly():
    old_email = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"
    r = Redactor.from_config({"patterns": {"email": old_email}, "keys": [], "hashed": True})
    assert r.patterns["email"] != old_email
    assert r.redact_text("x ann@example.com") == Redactor().redact_text("x ann@example.com")
    t = time.perf_counter()
    r.redact_text("a" * 45_000)
    assert time.perf_counter() - t < 0.2


def test_a_huge_integer_final_answer_is_graded_not_raised():
    env = gymnasium.make("mtrl/Sandbox-Weather-v0")
    for seed in range(6):  # every question kind, numbers included
        env.reset(seed=seed)
        _obs, reward, terminated, _, _info = env.step("<final_answer>2" + "0" * 400 + "</final_answer>")
        assert terminated and reward == 0.0
