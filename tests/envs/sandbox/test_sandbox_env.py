"""ToolSandboxEnv: the env contract, parallel calls, limits, final answers, secrets, isolation."""

from __future__ import annotations

import json

import gymnasium
import pytest

from mtrl_gym.datasets import encode_task, write_tasks
from mtrl_gym.envs.sandbox import (ERROR_STATUSES, STATUSES, Cassette, FinalAnswer, Grade, ToolContext, ToolError,
                                   ToolSandboxEnv, tool)
from mtrl_gym.error import CassetteError, ConfigError, InvalidTask
from mtrl_gym.rollout.template import env_reply_messages

STEP_KEYS = {"tool_calls", "tool_results", "tool_outcomes", "format_error", "message_truncated", "error",
             "num_tool_calls", "num_tool_errors", "num_unknown_tools", "num_bad_arguments", "num_refused", "num_not_available",
             "tool_calls_used", "tool_calls_left", "turns_used", "submitted"}
FINAL_KEYS = {"answer", "submitted_answer", "grade", "success", "end_reason"}


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: First term.
        b: Second term.
    """
    return a + b


@tool
def fail(why: str) -> str:
    """Always fails with a readable error."""
    raise ToolError(f"cannot do that: {why}")


@tool
def buggy() -> str:
    """A tool with a bug."""
    raise KeyError("oops")


@tool
def put(ctx: ToolContext, key: str, value: str) -> dict:
    """Store a value in the episode's state."""
    ctx.state[key] = value
    return {"stored": key}


@tool
def get(ctx: ToolContext, key: str) -> dict:
    """Read a value from the episode's state."""
    return {"value": ctx.state.get(key)}


TASK = {"id": "sum-1", "prompt": "What is 19 + 23?", "answer": 42, "checker": "number"}


def make(**kw):
    kw.setdefault("tools", [add, fail, buggy, put, get])
    kw.setdefault("tasks", [TASK])
    kw.setdefault("state_factory", lambda task, seed: {"seed": seed})
    return ToolSandboxEnv(**kw)


def call(name, **arguments):
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def test_reset_info_and_prompt():
    env = make()
    obs, info = env.reset(seed=0)
    assert obs == "What is 19 + 23?"
    assert set(info) == {"system_prompt", "tools", "task_id", "tool_calls_used", "tool_calls_left", "turns_used"}
    assert info["task_id"] == "sum-1"
    assert [t["function"]["name"] for t in info["tools"]] == ["add", "fail", "buggy", "put", "get", "submit"]
    assert "at most 20 tool calls" in info["system_prompt"] and "<final_answer>" in info["system_prompt"]
    assert "42" not in json.dumps(info) and "42" not in obs


def test_parallel_calls_run_in_order_with_one_result_each():
    env = make()
    env.reset(seed=0)
    text = call("put", key="x", value="1") + " then " + call("get", key="x") + ' and add(a=2, b=3) and fail("no")'
    obs, reward, term, trunc, info = env.step(text)
    assert set(STEP_KEYS) <= set(info) and not (FINAL_KEYS & set(info))
    assert [r["name"] for r in info["tool_results"]] == ["put", "get", "add", "fail"]
    assert [r["tool_call_id"] for r in info["tool_results"]] == [c["id"] for c in info["tool_calls"]]
    assert [r["content"] for r in info["tool_results"]] == [
        '{"stored": "x"}', '{"value": "1"}', "5", "Error: cannot do that: no"]
    assert [o["status"] for o in info["tool_outcomes"]] == ["ok", "ok", "ok", "tool_error"]
    assert info["num_tool_calls"] == 4 and info["num_tool_errors"] == 1 and info["error"] == "tool_error"
    assert obs == '{"stored": "x"}\n{"value": "1"}\n5\nError: cannot do that: no'
    assert env_reply_messages(obs, info)[-1] == {"role": "tool", "content": "Error: cannot do that: no",
                                                 "tool_call_id": "call_3", "name": "fail"}
    assert (reward, term, trunc) == (0.0, False, False)
    assert info["tool_calls_used"] == 4 and info["tool_calls_left"] == 16


def test_submit_tool_grades_and_ends():
    env = make()
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step(call("submit", answer=42))
    assert (reward, term, trunc) == (1.0, True, False)
    assert info["grade"] == {"score": 1.0, "passed": True, "reason": "correct", "details": {"got": 42.0}}
    assert info["answer"] == 42 and info["submitted_answer"] == 42 and info["success"] is True
    assert info["end_reason"] == "submitted"
    assert obs == "Final answer received.\nYour answer is correct. The episode is over."
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step("add(1)")


@pytest.mark.parametrize("text, answer, reward", [
    ("<final_answer>42</final_answer>", 42, 1.0),
    ("<final_answer> 41.5 </final_answer>", 41.5, 0.0),
    ("Let me think. <final_answer>forty-two</final_answer>", "forty-two", 0.0),
    ('submit(answer="42")', 42, 1.0),
])
def test_final_answer_forms(text, answer, reward):
    env = make()
    env.reset(seed=0)
    _, r, term, _, info = env.step(text)
    assert term and r == reward and info["submitted_answer"] == answer


def test_calls_after_the_final_answer_are_not_run():
    env = make()
    env.reset(seed=0)
    _, _, term, _, info = env.step("<final_answer>42</final_answer> " + call("put", key="k", value="v"))
    assert term and [o["status"] for o in info["tool_outcomes"]] == ["final", "ignored"]
    assert "k" not in env.state


def test_json_inside_a_final_answer_is_the_answer_not_a_call():
    env = make(final_answer=FinalAnswer(schema={"type": "object"}),
               tasks=[{"prompt": "p", "answer": {"name": "Ann", "arguments": 1}}])
    env.reset(seed=0)
    _, reward, term, _, info = env.step('<final_answer>{"name": "Ann", "arguments": 1}</final_answer>')
    assert term and reward == 1.0 and [c["name"] for c in info["tool_calls"]] == ["submit"]


def test_an_invalid_final_answer_does_not_end_the_episode():
    env = make(final_answer=FinalAnswer(schema={"type": "object", "required": ["n"]}),
               tasks=[{"prompt": "p", "answer": {"n": 1}}])
    env.reset(seed=0)
    obs, _, term, _, info = env.step("<final_answer>just text</final_answer>")
    assert not term and info["tool_outcomes"][0]["status"] == "bad_arguments" and info["format_error"]
    assert obs.startswith("Invalid final answer: 'answer' must be an object, got 'just text'.")
    obs, _, term, _, info = env.step(call("submit", answer={"m": 1}))
    assert not term and obs.startswith("Invalid final answer: 'answer'.n is required.")
    _, reward, term, _, _ = env.step(call("submit", answer='{"n": 1}'))  # a JSON string is decoded
    assert term and reward == 1.0


def test_model_errors_are_tool_results_never_exceptions():
    env = make()
    env.reset(seed=0)
    obs, _, _, _, info = env.step("I will just chat.")
    assert info["format_error"] and info["error"] == "no_tool_call" and info["tool_results"] == []
    assert obs.startswith("No tool call found in your message. Call a tool by writing <tool_call>")
    _, _, _, _, info = env.step(call("ad", a=1))
    assert info["tool_results"][0]["content"] == ("Unknown tool 'ad'. Did you mean add? Available tools: add, fail, "
                                                  "buggy, put, get, submit.")
    assert info["num_unknown_tools"] == 1 and not info["format_error"]
    _, _, _, _, info = env.step(call("add", a="two", c=3))
    assert info["tool_results"][0]["content"] == (
        "Invalid arguments for add: 'a' must be an integer, got 'two'; unexpected argument 'c' (allowed: 'a', 'b'). "
        "Expected add(a: integer, b: integer = 1).")
    assert info["num_bad_arguments"] == 1 and info["format_error"]
    _, _, _, _, info = env.step('<tool_call>{"name": "add", "arguments": "{not json"}</tool_call>')
    assert info["tool_outcomes"][0]["status"] == "bad_arguments"
    assert info["tool_results"][0]["content"].startswith("Invalid call to add: arguments are not a JSON object")
    _, _, _, _, info = env.step("add(a=2.0)")  # an integral float is an integer
    assert info["tool_results"][0]["content"] == "3"


def test_tool_exceptions_raise_by_default_or_are_reported():
    env = make()
    env.reset(seed=0)
    with pytest.raises(KeyError, match="oops"):
        env.step("buggy()")
    env = make(tool_exceptions="report")
    env.reset(seed=0)
    _, _, _, _, info = env.step("buggy()")
    assert info["tool_outcomes"][0]["status"] == "exception"
    assert info["tool_results"][0]["content"] == "Error: the tool failed (KeyError: 'oops')"


def test_max_tool_calls_ends_the_episode_as_a_failure_without_running_the_call():
    env = make(max_tool_calls=2)
    env.reset(seed=0)
    obs, _, term, _, info = env.step("add(1) add(2)")
    assert not term and obs == "2\n3\nYou have 0 tool call(s) left."
    assert env_reply_messages(obs, info)[-1] == {"role": "user", "content": "You have 0 tool call(s) left."}
    obs, reward, term, trunc, info = env.step(call("put", key="late", value="x") + call("submit", answer=42))
    assert (reward, term, trunc) == (0.0, True, False)
    assert [o["status"] for o in info["tool_outcomes"]] == ["limit", "ignored"]
    assert "late" not in env.state and info["end_reason"] == "tool_limit" and info["success"] is False
    assert info["grade"]["reason"] == "no final answer (tool-call limit reached)"
    assert obs.endswith("The limit of 2 tool calls was reached without a final answer. The episode is over.")


def test_submit_is_allowed_after_the_last_permitted_call():
    env = make(max_tool_calls=1)
    env.reset(seed=0)
    env.step("add(1)")
    _, reward, term, _, _ = env.step("<final_answer>42</final_answer>")
    assert term and reward == 1.0


def test_turn_limit_truncates():
    env = make(max_turns=2)
    env.reset(seed=0)
    assert env.step("hello")[3] is False
    obs, reward, term, trunc, info = env.step("hello again")
    assert (reward, term, trunc) == (0.0, False, True) and info["end_reason"] == "turn_limit"
    assert obs.endswith("The turn limit (2) was reached without a final answer. The episode is over.")


def test_state_is_isolated_between_episodes_and_rebuilt_from_the_seed():
    env = make(tasks=[dict(TASK, state_seed=7)])
    env.reset(seed=0)
    assert env.state == {"seed": 7}
    env.step(call("put", key="secret", value="leak"))
    env.reset(seed=1)
    assert env.state == {"seed": 7}
    _, _, _, _, info = env.step(call("get", key="secret"))
    assert info["tool_results"][0]["content"] == '{"value": null}'


def test_cached_snapshot_is_copied_so_writes_do_not_reach_it():
    snapshot = {"n": 0}
    env = make(state_factory=lambda task, seed: snapshot)
    env.reset(seed=0)
    env.step(call("put", key="n", value="changed"))
    assert snapshot == {"n": 0}


def test_state_isolation_between_vector_env_copies():
    envs = gymnasium.vector.SyncVectorEnv([lambda: make(tasks=[dict(TASK, state_seed=3)]) for _ in range(2)])
    envs.reset(seed=0)
    _, _, _, _, infos = envs.step([call("put", key="k", value="copy0"), call("get", key="k")])
    assert infos["tool_results"][1][0]["content"] == '{"value": null}'
    _, _, _, _, infos = envs.step([call("get", key="k"), call("get", key="k")])
    assert [r[0]["content"] for r in infos["tool_results"]] == ['{"value": "copy0"}', '{"value": null}']
    envs.close()


def test_state_isolation_between_async_vector_env_copies():
    envs = gymnasium.vector.AsyncVectorEnv(
        [lambda: make(tasks=[dict(TASK, state_seed=3)]) for _ in range(2)])
    try:
        envs.reset(seed=0)
        obs, _, _, _, _ = envs.step([call("put", key="k", value="copy0"), call("get", key="k")])
        assert list(obs) == ['{"stored": "k"}', '{"value": null}']
        obs, _, _, _, _ = envs.step([call("get", key="k"), call("get", key="k")])
        assert list(obs) == ['{"value": "copy0"}', '{"value": null}']
    finally:
        envs.close()


def test_tasks_from_a_file_and_encoded_rows(tmp_path):
    path = write_tasks([TASK, dict(TASK, id="sum-2", prompt="What is 40 + 2?")], tmp_path / "tasks.jsonl")
    env = make(tasks=path)
    prompts = {env.reset(seed=s)[0] for s in range(8)}
    assert prompts == {"What is 19 + 23?", "What is 40 + 2?"}
    obs, info = env.reset(options={"task": encode_task(TASK)})
    assert obs == "What is 19 + 23?" and info["task_id"] == "sum-1"


def test_task_ids_are_stable_digests_even_for_rows_with_odd_values(tmp_path):
    path = Cassette(tmp_path / "empty.jsonl", mode="record").save()
    row = {"prompt": "p", "answer": 1, "cassette": path, "checker": lambda a, e: Grade.correct()}
    env = make(tools=[add])
    first = env.reset(seed=0, options={"task": row})[1]["task_id"]
    assert first == env.reset(seed=5, options={"task": dict(row)})[1]["task_id"] and first.startswith("sandbox-")


def test_custom_grader_and_step_facts():
    class Counting(ToolSandboxEnv):
        tools = [add]
        domain_prompt = "Count."

        def step_facts(self):
            return {"calls_so_far": self._calls_used}

    env = Counting(tasks=[{"prompt": "p"}], grader=lambda answer, task, state: Grade(0.5, False, "half"))
    env.reset(seed=0)
    assert env.step("add(1)")[4]["calls_so_far"] == 1
    _, reward, _, _, info = env.step("<final_answer>x</final_answer>")
    assert reward == 0.5 and info["grade"]["reason"] == "half" and info["success"] is False
    assert "answer" not in info  # the task has no expected answer


def test_results_are_cut_and_cleaned():
    @tool
    def big() -> str:
        """A long result."""
        return "x" * 500 + "\x00\u6771"

    env = make(tools=[big], max_result_chars=100)
    env.reset(seed=0)
    obs, *_ = env.step("big()")
    assert obs == "x" * 100 + "\n[... 402 more characters cut]"
    env = make(tools=[big])
    env.reset(seed=0)
    assert env.step("big()")[0].endswith("x??")


@pytest.mark.parametrize("kwargs, match", [
    ({"max_tool_calls": 0}, r"`max_tool_calls` must be an int >= 1, got 0"),
    ({"mode": "replays"}, r"`mode` must be one of \('replay', 'record', 'replay_or_record', 'live'\), got 'replays'"),
    ({"on_missing": "skip"}, r'`on_missing` must be "error", "nearest" or "strict", got \'skip\''),
    ({"tool_exceptions": "ignore"}, r'`tool_exceptions` must be "raise" or "report", got \'ignore\''),
    ({"tasks": []}, r"`tasks` is empty"),
    ({"cassette": Cassette(), "mode": "record"}, r"`mode` is 'record' but the given Cassette has mode 'replay'"),
    ({"cassette": Cassette(), "on_missing": "strict"},
     r"`on_missing` is 'strict' but the given Cassette has on_missing 'error'"),
])
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        make(**kwargs)


def test_task_errors():
    env = make()
    with pytest.raises(InvalidTask, match=r"unknown reset option\(s\) \['answer'\]"):
        env.reset(options={"answer": 1})
    with pytest.raises(InvalidTask, match=r"task 'x' has no 'answer' and the env has no grader"):
        env.reset(options={"task": {"id": "x", "prompt": "p"}})
    with pytest.raises(InvalidTask, match=r"unknown checker 'fuzzy'; choose one of"):
        env.reset(options={"task": {"prompt": "p", "answer": 1, "checker": "fuzzy"}})
    with pytest.raises(InvalidTask, match=r"checker 'number' needs a numeric expected answer, got 'x'"):
        env.reset(options={"task": {"prompt": "p", "answer": "x", "checker": "number"}})
    with pytest.raises(InvalidTask, match=r"'state_seed' must be an int >= 0, got -1"):
        env.reset(options={"task": {"prompt": "p", "answer": 1, "state_seed": -1}})
    with pytest.raises(InvalidTask, match=r"ToolSandboxEnv has no tasks"):
        ToolSandboxEnv(tools=[add]).reset()


def test_recorded_tool_without_cassette_is_a_clear_error():
    @tool(network=True)
    def remote(q: str) -> str:
        """Remote."""
        return q

    with pytest.raises(CassetteError, match=r"tool 'remote' is answered from a cassette, but none was given"):
        make(tools=[remote]).reset(seed=0)
    env = make(tools=[remote], mode="live")
    env.reset(seed=0)
    assert env.step('remote("hi")')[4]["tool_outcomes"][0] == {
        "tool_call_id": "call_0", "name": "remote", "status": "ok", "source": "live"}


def test_statuses_are_documented_constants():
    assert ERROR_STATUSES < set(STATUSES)


def test_render_ansi():
    env = make(render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert env.render() == obs
    assert make().render() is None
