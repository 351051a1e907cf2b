"""verifiers adapter: the taskset, the env and verifiers' own loader and runner (vf-eval)."""

from __future__ import annotations

import pytest

pytest.importorskip("verifiers", reason='needs verifiers: pip install "mtrl-gym[verifiers]"')

from conftest import BAD_TEXT_UTF8, WORDLE_SEED, WORDLE_TASK, run_vf_eval, wordle_script

from mtrl_gym.adapters.verifiers import (
    TASKSET_ID,
    MtrlTaskset,
    MtrlTasksetConfig,
    reply_action,
)
from mtrl_gym.datasets import write_tasks
from mtrl_gym.error import ConfigError
from mtrl_gym.registry import list_envs


def test_verifiers_loader_resolves_the_shim():
    from verifiers.v1.utils.loaders import (
        default_harness_id,
        environment_class,
        taskset_class,
        taskset_config_type,
    )

    from mtrl_gym.adapters.verifiers import MtrlEnv

    assert taskset_class(TASKSET_ID) is MtrlTaskset
    assert environment_class(TASKSET_ID) is MtrlEnv
    assert taskset_config_type(TASKSET_ID) is MtrlTasksetConfig
    assert default_harness_id(TASKSET_ID) == TASKSET_ID  # our plain chat harness, not verifiers' bash


def test_every_env_loads_as_tasks_without_its_secret():
    for env_id in list_envs():
        tasks = list(MtrlTaskset(MtrlTasksetConfig(id=TASKSET_ID, env_id=env_id, limit=2, seed=5)))
        assert [t.data.info["seed"] for t in tasks] == [5, 6]
        for t in tasks:  # the tools go to the harness natively (see MtrlTaskset.toolsets), not into the prompt
            assert t.data.prompt and "<tools>" not in (t.data.system_prompt or "")
        [tool_server] = MtrlTaskset.toolsets(MtrlTasksetConfig(id=TASKSET_ID, env_id=env_id, limit=2, seed=5))
        assert tool_server.config.tools and tool_server.server_name == ""  # bare tool names
    prompted = list(MtrlTaskset(MtrlTasksetConfig(id=TASKSET_ID, limit=1, tools_in_prompt=True)))
    assert "<tools>" in prompted[0].data.system_prompt and "guess_word" in prompted[0].data.system_prompt
    val = list(MtrlTaskset(MtrlTasksetConfig(id=TASKSET_ID, split="val", limit=3)))
    answers = {t.data.info["row"].split('"answer": "')[1][:5] for t in val}
    assert len(answers) == 3  # three secrets, one prompt: nothing of the secret is in it
    assert len({(t.data.prompt, t.data.system_prompt) for t in val}) == 1


def test_bad_taskset_config_is_rejected():
    with pytest.raises(ConfigError, match="`max_turns` must be >= 1"):
        list(MtrlTaskset(MtrlTasksetConfig(id=TASKSET_ID, max_turns=0)))


def test_every_call_of_a_message_is_in_its_action():
    import verifiers.v1 as vf

    calls = [vf.ToolCall(id="c1", name="guess_word", arguments='{"guess": "crane"}'),
             vf.ToolCall(id="c2", name="guess_word", arguments="{not json")]
    assert reply_action(vf.AssistantMessage(content="thinking", tool_calls=calls)) == (
        'thinking\n<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}, "id": "c1"}</tool_call>\n'
        '<tool_call>{"name": "guess_word", "arguments": {not json, "id": "c2"}</tool_call>')
    assert reply_action(vf.AssistantMessage(content="plain")) == "plain"


#: A tool-calling model: a call cut off by max_tokens (left in the text, as servers do), two
#: native calls in one message, the solving call; then text (never reached: the env ended it).
NATIVE_SCRIPT = [
    {"content": '<tool_call>{"name": "guess_word", "arguments": {"guess": "cra', "finish_reason": "length"},
    {"content": "two at once", "tool_calls": [{"name": "guess_word", "arguments": {"guess": "crane"}},
                                              {"name": "guess_word", "arguments": {"guess": "slate"}}]},
    {"tool_calls": [{"name": "guess_word", "arguments": {"guess": "paste"}}]},
    "never sent",
]


def _requests(tmp_path) -> list[dict]:
    import json

    return [json.loads(line) for line in (tmp_path / "script.json.requests.jsonl").read_text().splitlines()]


def test_vf_eval_plays_native_tool_calls(tmp_path, chatml_tokenizer):
    """Native tool calls reach the env (all calls of a message, one env step per message), each
    call gets the env's reply as its tool result, and the exchange ends when the env ends it."""
    import verifiers.v1 as vf
    from conftest import ScriptedTextSampler

    from mtrl_gym.rollout.engine import collect

    write_tasks([WORDLE_TASK], tmp_path / "tasks.jsonl")
    traces = run_vf_eval(tmp_path, NATIVE_SCRIPT, "--env.taskset.env-id", "mtrl/Wordle-v0",
                         "--env.taskset.tasks-file", str(tmp_path / "tasks.jsonl"),
                         "--env.taskset.seed", str(WORDLE_SEED), timeout=180)
    trace = traces[0]
    # the same turns as text through mtrl_gym's engine give the same reward
    texts = [NATIVE_SCRIPT[0]["content"]] + [reply_action(vf.AssistantMessage(
        content=e.get("content"), tool_calls=[vf.ToolCall(id=f"call_{i}_{k}", name=c["name"],
                                                          arguments=__import__("json").dumps(c["arguments"]))
                                              for k, c in enumerate(e["tool_calls"])])) for i, e in
        enumerate(NATIVE_SCRIPT[1:3], start=1)]
    ours = collect("mtrl/Wordle-v0", [WORDLE_TASK], ScriptedTextSampler(chatml_tokenizer, texts), chatml_tokenizer,
                   seed=WORDLE_SEED)[0]
    assert ours.terminated and ours.reward == pytest.approx(1.45)
    assert trace["rewards"]["outcome"]["score"] == pytest.approx(ours.reward)
    assert trace["metrics"]["turns"] == 3 and trace["metrics"]["tool_calls"] == 4  # cut-off + 2 + 1
    assert trace["metrics"]["success"] == 1.0 and trace["stop_condition"] == "episode_over"
    requests = _requests(tmp_path)
    assert len(requests) == 3  # no request after the env ended the episode
    assert all([t["function"]["name"] for t in r["tools"]] == ["guess_word"] for r in requests)
    tools = {m["tool_call_id"]: m["content"] for m in requests[2]["messages"] if m["role"] == "tool"}
    assert tools["call_1_0"].startswith("Guess 1/6: CRANE")  # the env's reply to each call
    assert tools["call_1_1"].startswith("Ignored: only one guess per turn")
    assert not any("unknown tool" in str(m.get("content")) for r in requests for m in r["messages"])


def test_vf_eval_turn_cap_ends_a_run_of_tool_calls(tmp_path):
    """A model that never stops calling a tool is stopped by `max-turns` inside the harness's loop
    (its server reuses the call id `call_0` every turn: each turn is still played)."""
    looping = [{"tool_calls": [{"name": "guess_word", "arguments": {"guess": "zzzzz"}, "id": "call_0"}]}]
    traces = run_vf_eval(tmp_path, looping, "--env.taskset.env-id", "mtrl/Wordle-v0", "--env.taskset.limit", "1",
                         "--env.taskset.max-turns", "3", timeout=180)
    trace = traces[0]
    assert trace["metrics"]["turns"] == 3 and trace["metrics"]["finished"] == 0.0
    assert trace["stop_condition"] == "episode_over" and len(_requests(tmp_path)) == 3
    assert trace["rewards"]["outcome"]["score"] == -1.5  # stopped before the env ended it: its minimum


def test_vf_eval_records_the_env_outcome(tmp_path, chatml_tokenizer):
    from conftest import ScriptedTextSampler

    from mtrl_gym.rollout.engine import collect

    write_tasks([WORDLE_TASK], tmp_path / "tasks.jsonl")
    traces = run_vf_eval(tmp_path, wordle_script(), "--env.taskset.env-id", "mtrl/Wordle-v0",
                         "--env.taskset.tasks-file", str(tmp_path / "tasks.jsonl"),
                         "--env.taskset.seed", str(WORDLE_SEED))
    assert len(traces) == 1 and traces[0]["ok"]
    trace = traces[0]
    ours = collect("mtrl/Wordle-v0", [WORDLE_TASK], ScriptedTextSampler(chatml_tokenizer, wordle_script()),
                   chatml_tokenizer, seed=WORDLE_SEED)[0]
    assert trace["rewards"] == {"outcome": {"score": pytest.approx(ours.reward), "weight": 1.0}}
    assert ours.reward == pytest.approx(1.45)
    assert trace["metrics"]["turns"] == 3 and trace["metrics"]["format_errors"] == 1
    assert trace["metrics"]["success"] == 1.0 and trace["info"]["task_id"] == "cross-0"
    users = [n["message"]["content"] for n in trace["nodes"] if n["message"]["role"] == "user"]
    assert all("paste" not in u.lower() for u in users[:-1])  # the secret appears only after the solve


def test_vf_eval_bad_text_on_an_sop_env(tmp_path):
    traces = run_vf_eval(tmp_path, [BAD_TEXT_UTF8], "--env.taskset.env-id", "mtrl/SOP-KYBReview-v0",
                         "--env.taskset.limit", "1", "--env.taskset.max-turns", "2")
    trace = traces[0]
    assert trace["ok"] and trace["metrics"]["turns"] == 2 and trace["metrics"]["format_errors"] == 2
    assert trace["rewards"]["outcome"]["score"] == pytest.approx(
        __import__("mtrl_gym").make("mtrl/SOP-KYBReview-v0").unwrapped.reward_range[0])
