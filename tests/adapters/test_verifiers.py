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
        for t in tasks:
            assert t.data.prompt and "<tools>" in t.data.system_prompt
    val = list(MtrlTaskset(MtrlTasksetConfig(id=TASKSET_ID, split="val", limit=3)))
    answers = {t.data.info["row"].split('"answer": "')[1][:5] for t in val}
    assert len(answers) == 3  # three secrets, one prompt: nothing of the secret is in it
    assert len({(t.data.prompt, t.data.system_prompt) for t in val}) == 1


def test_bad_taskset_config_is_rejected():
    with pytest.raises(ConfigError, match="`max_turns` must be >= 1"):
        list(MtrlTaskset(MtrlTasksetConfig(id=TASKSET_ID, max_turns=0)))


def test_native_tool_calls_reach_the_env_as_text():
    import verifiers.v1 as vf
    from verifiers.v1.agent import Segment

    call = vf.ToolCall(id="c1", name="guess_word", arguments='{"guess": "crane"}')
    seg = Segment(messages=[vf.AssistantMessage(content="thinking", tool_calls=[call])])
    assert reply_action(seg) == ('thinking\n<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}'
                                 "</tool_call>")


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
