"""Properties of every registered sandbox env: any text and any tool arguments never raise,
rewards stay in range, secrets stay hidden, and the same actions replay identically in this
process and in another process with a different hash seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mtrl_gym  # noqa: F401 - registers the ids
from mtrl_gym.registry import list_envs

SANDBOX_IDS = [e for e in list_envs() if e.startswith("mtrl/Sandbox-")]
FINAL_ONLY = {"answer", "submitted_answer", "grade", "success", "end_reason"}
_ENVS: dict[str, gymnasium.Env] = {}


def env_for(env_id):
    if env_id not in _ENVS:
        _ENVS[env_id] = gymnasium.make(env_id).unwrapped
    return _ENVS[env_id]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**20) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


@st.composite
def tool_call_text(draw, schemas):
    """A tool call in one of the accepted formats, to a real or made-up tool, with any arguments."""
    fns = [s["function"] for s in schemas]
    fn = draw(st.sampled_from(fns))
    name = draw(st.sampled_from([fn["name"], fn["name"], draw(st.text(max_size=10))]))
    params = list(fn["parameters"]["properties"]) or ["x"]
    args = draw(st.dictionaries(st.sampled_from(params) | st.text(max_size=5), json_values, max_size=4))
    if draw(st.booleans()) and params:  # often: the right parameters with any values
        args = {p: draw(json_values) for p in params}
    body = json.dumps({"name": name, "arguments": args}, allow_nan=True)
    kind = draw(st.sampled_from(["hermes", "json", "call", "final", "broken"]))
    if kind == "hermes":
        return f"<tool_call>{body}</tool_call>"
    if kind == "json":
        return f"Sure. {body}"
    if kind == "call":
        inner = ", ".join(f"{k}={v!r}" for k, v in args.items() if str(k).isidentifier())
        return f"{name}({inner})"
    if kind == "final":
        return f"<final_answer>{draw(st.text(max_size=20) | json_values.map(json.dumps))}</final_answer>"
    return f"<tool_call>{body[:draw(st.integers(0, len(body)))]}"


def actions_for(env):
    call = tool_call_text(env.tool_schemas)
    one = st.one_of(st.text(max_size=80), call, st.lists(call, min_size=2, max_size=3).map(" ".join))
    return st.lists(one, min_size=1, max_size=6)


def run(env, seed, actions):
    """Play ``actions`` from ``reset(seed)``; return the trajectory as JSON-ready data."""
    obs, info = env.reset(seed=seed)
    out = [[obs, info["task_id"]]]
    for action in actions:
        obs, reward, term, trunc, info = env.step(action)
        out.append([obs, reward, term, trunc, info])
        if term or trunc:
            break
    return json.loads(json.dumps(out, default=repr, allow_nan=True))


@pytest.mark.parametrize("env_id", SANDBOX_IDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_any_text_and_any_arguments_never_raise(env_id, data, seed):
    env = env_for(env_id)
    obs, info = env.reset(seed=seed)
    answer = json.dumps(env.task.get("answer"))
    assert env.observation_space.contains(obs)
    for action in data.draw(actions_for(env)):
        obs, reward, term, trunc, info = env.step(action)
        assert env.observation_space.contains(obs) and isinstance(reward, float)
        assert env.reward_range[0] <= reward <= env.reward_range[1]
        assert len(info["tool_results"]) == len(info["tool_outcomes"])
        if term or trunc:
            assert FINAL_ONLY <= set(info) and reward == info["grade"]["score"]
            break
        assert not FINAL_ONLY & set(info) and reward == 0.0
        # Before the end, the expected answer shows only if a tool legitimately returned data
        # containing it (or the model wrote it): never from the env itself.
        ok = any(o["status"] == "ok" for o in info["tool_outcomes"])
        if len(answer) >= 4 and not ok and answer not in action:
            assert answer not in obs and answer not in json.dumps(info, default=repr)


@pytest.mark.parametrize("env_id", SANDBOX_IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_same_seed_and_actions_give_the_same_trajectory(env_id, data, seed):
    actions = data.draw(actions_for(env_for(env_id)))
    assert run(gymnasium.make(env_id).unwrapped, seed, actions) == run(env_for(env_id), seed, actions)


_WORKER = r"""
import json, sys
import gymnasium, mtrl_gym
sys.path.insert(0, sys.argv[1])
from test_sandbox_properties import run
envs = {}
for line in sys.stdin:
    job = json.loads(line)
    env = envs.setdefault(job["env_id"], gymnasium.make(job["env_id"]).unwrapped)
    print(json.dumps(run(env, job["seed"], job["actions"]), allow_nan=True), flush=True)
"""


@pytest.fixture(scope="module")
def other_process():
    """A worker process with another hash seed that plays episodes sent to it as JSON lines."""
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    proc = subprocess.Popen([sys.executable, "-c", _WORKER, os.path.dirname(__file__)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)

    def play(env_id, seed, actions):
        proc.stdin.write(json.dumps({"env_id": env_id, "seed": seed, "actions": actions}) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, "the worker process died"
        return json.loads(line)

    yield play
    proc.stdin.close()
    proc.wait(timeout=30)


@pytest.mark.parametrize("env_id", SANDBOX_IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_replay_is_deterministic_across_processes(other_process, env_id, data, seed):
    actions = data.draw(actions_for(env_for(env_id)))
    assert other_process(env_id, seed, actions) == run(env_for(env_id), seed, actions)
