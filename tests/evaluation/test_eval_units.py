"""Run specs, task resolution, the external scorer, reference policies and the output store."""

from __future__ import annotations

import json

import gymnasium
import pytest

import mtrl_gym  # noqa: F401 - registers the envs
from mtrl_gym.datasets import write_tasks
from mtrl_gym.error import ConfigError, DatasetError
from mtrl_gym.evaluation.policies import RandomToolPolicy, make_policy, play_episode
from mtrl_gym.evaluation.scoring import OutcomeRecorder
from mtrl_gym.wrappers.system_prompt import SystemPrompt
from mtrl_gym.evaluation.specs import EvalConfig, RunSpec, parse_run, resolve_system_prompt
from mtrl_gym.evaluation.store import EvalStore, ResumeMismatch, read_records
from mtrl_gym.evaluation.tasks import check_tasks, resolve_tasks

SOURCES = {"base": {"model": "smollm2-135m"}, "trained": {"adapter": "out/final", "model": "smollm2-135m"}}


# ---------------------------------------------------------------- specs


def test_parse_run_names_and_settings():
    defaults = {"temperature": 0.5, "max_new_tokens": 64}
    assert parse_run("trained", SOURCES, defaults=defaults).name == "trained:0.5"
    spec = parse_run("trained:1", SOURCES, defaults=defaults)
    assert (spec.name, spec.serving.temperature, spec.adapter, spec.serving.max_new_tokens) == (
        "trained:1.0", 1.0, "out/final", 64)
    spec = parse_run("base:0.7:0.9", SOURCES)
    assert (spec.name, spec.kind, spec.serving.top_p) == ("base:0.7:0.9", "model", 0.9)
    solver = parse_run("solver", SOURCES, defaults=defaults)
    assert (solver.name, solver.kind) == ("solver", "policy")
    assert "temperature" not in solver.describe()


@pytest.mark.parametrize("token,match", [
    ("mystery:1.0", "unknown label 'mystery'"),
    ("base:hot", "temperature 'hot' is not a number"),
    ("base:1:1:1", r"LABEL\[:TEMPERATURE\[:TOP_P\]\]"),
    ("solver:1.0", "takes no sampling settings"),
    ("base:-1", "temperature"),
    ("base:1.0:0", "top_p"),
])
def test_parse_run_errors(token, match):
    with pytest.raises(ConfigError, match=match):
        parse_run(token, SOURCES)


def test_unknown_policies_name_what_the_env_has():
    import gymnasium

    from mtrl_gym.evaluation.policies import make_policy

    with pytest.raises(ConfigError, match=r"no reference policy 'oracle' for WordleEnv; it has: random, solver"):
        make_policy("oracle", gymnasium.make("mtrl/Wordle-v0"))
    with pytest.raises(ConfigError, match=r"no reference policy 'solver' for WeatherEnv; it has: random"):
        make_policy("solver", gymnasium.make("mtrl/Sandbox-Weather-v0"))


def test_run_spec_validation():
    with pytest.raises(ConfigError, match="has no source"):
        RunSpec("x")
    with pytest.raises(ConfigError, match="several sources"):
        RunSpec("x", model="m", policy="solver")
    with pytest.raises(ConfigError, match="tokenizer"):
        RunSpec("x", endpoint="http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="must be a policy name"):
        RunSpec("x", policy=3)
    assert RunSpec("x", endpoint="http://h:1", model="tok").kind == "endpoint"
    assert RunSpec("x", adapter="dir").kind == "adapter"


def test_eval_config_validation():
    assert EvalConfig(n=8, ks=(4, 1, 4)).ks == (1, 4)
    with pytest.raises(ConfigError, match=r"`ks` must be non-empty values in \[1, n=4\]"):
        EvalConfig(n=4, ks=(8,))
    with pytest.raises(ConfigError, match="`n`"):
        EvalConfig(n=0)


def test_the_record_names_a_configured_wrapper_by_its_class():
    """A wrapper built from a config (a functools.partial with its kwargs) is recorded by the class
    it makes, so a resumed folder knows which observation or reward wrappers its episodes had."""
    import functools

    from mtrl_gym.wrappers import PriorGuesses, WordleRecap

    config = EvalConfig(wrappers=[functools.partial(PriorGuesses, num_priors=1), WordleRecap])
    assert config.fingerprint()["wrappers"] == ["PriorGuesses", "WordleRecap"]


def test_system_prompt_variants(tmp_path):
    assert resolve_system_prompt("default") is None
    assert resolve_system_prompt("none") == ""
    f = tmp_path / "prompt.txt"
    f.write_text("Be brief.\n")
    assert resolve_system_prompt(str(f)) == "Be brief."
    with pytest.raises(ConfigError, match="neither 'default', 'none' nor an existing file"):
        resolve_system_prompt(str(tmp_path / "missing.txt"))


# ---------------------------------------------------------------- tasks


def test_resolve_tasks_sources(tmp_path):
    assert len(resolve_tasks("mtrl/Wordle-v0", split="val")) == 128
    sop = resolve_tasks("mtrl/SOP-DangerousGoods-v0", split="train", limit=3)
    assert [t["id"] for t in sop] == [f"sop-dangerous-goods-train-0000{i}" for i in range(3)]
    assert resolve_tasks("mtrl/Wordle-v0", split="train", limit=2)[1]["id"] == "wordle_train_0001"
    assert resolve_tasks("mtrl/Wordle-v0", split="seeds:2") == [None, None]
    path = write_tasks([{"prompt": "p", "answer": "crane", "id": "a"}], tmp_path / "t.jsonl")
    assert resolve_tasks("mtrl/Wordle-v0", tasks=path) == [{"prompt": "p", "answer": "crane", "id": "a"}]
    with pytest.raises(ConfigError, match="exactly one of"):
        resolve_tasks("mtrl/Wordle-v0")
    with pytest.raises(ConfigError, match="unknown split 'dev'"):
        resolve_tasks("mtrl/Wordle-v0", split="dev")
    with pytest.raises(ConfigError, match="seeds:N"):
        resolve_tasks("mtrl/Wordle-v0", split="seeds:x")


def test_empty_task_file_and_bad_rows_fail_early(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(DatasetError, match="holds no task rows"):
        resolve_tasks("mtrl/Wordle-v0", tasks=empty)
    env = gymnasium.make("mtrl/Wordle-v0")
    assert check_tasks(env, [{"answer": "crane", "id": "ok"}]) == ["ok"]
    with pytest.raises(DatasetError, match=r"task 1 \(id 'bad'\) is not valid.*5-letter"):
        check_tasks(env, [{"answer": "crane"}, {"answer": "toolong", "id": "bad"}])


# ---------------------------------------------------------------- scoring


class CheatingShaping(gymnasium.Wrapper):
    """A 'shaping' wrapper that pays +1 per step and claims success: the eval must ignore both."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info, success=True)
        return obs, reward + 1.0, terminated, truncated, info


def test_outcome_recorder_sees_the_bare_env_inside_shaping():
    env = SystemPrompt(CheatingShaping(OutcomeRecorder(gymnasium.make("mtrl/Wordle-v0"))), "Short.")
    _, info = env.reset(seed=0, options={"answer": "crane"})
    assert info["system_prompt"] == "Short."
    total = 0.0
    for text in ["no guess here", "<guess>slate</guess>", "<guess>pious</guess>", "<guess>zzzzz</guess>"] + \
            ["<guess>about</guess>"] * 4:
        _, reward, terminated, _, info = env.step(text)
        total += reward
        if terminated:
            break
    assert terminated and info["success"] is True  # the wrapper lies ...
    assert info["eval/success"] is False  # ... the recorder, inside it, does not
    assert info["eval/outcome_reward"] == -0.5 and total == pytest.approx(-0.5 + 8)
    assert info["eval/format_errors"] == 1
    assert info["eval/invalid_actions"] == 2  # no guess + a word not in the dictionary
    assert info["eval/tool_calls"] == 7


# ---------------------------------------------------------------- policies


def test_reference_policies_play_wordle():
    env = OutcomeRecorder(gymnasium.make("mtrl/Wordle-v0"))
    kw = dict(seed=3, task_index=0, env_id="mtrl/Wordle-v0", max_turns=None, failure_reward=-1.5)
    solved = play_episode(env, make_policy("solver", env), {"answer": "crane", "id": "t"}, sample_index=0, **kw)
    assert solved.final_info["solved"] and solved.stop_reason == "terminated" and solved.reward > 1
    assert solved.messages[0]["role"] == "system" and solved.messages[2]["role"] == "assistant"
    assert "sampled_tokens" not in solved.metrics and solved.metrics["turns"] == len(solved.turn_rewards)
    rand = make_policy("random", env)
    a = play_episode(env, rand, {"answer": "crane"}, sample_index=0, **kw)
    b = play_episode(env, rand, {"answer": "crane"}, sample_index=0, **kw)
    c = play_episode(env, rand, {"answer": "crane"}, sample_index=1, **kw)
    assert a.messages == b.messages != c.messages  # seeded by (seed, task, sample)
    assert a.metrics["format_errors"] == 0 and a.metrics["tool_calls"] == 6


def test_sop_oracle_and_random_baselines(tmp_path):
    from mtrl_gym.evaluation import evaluate

    runs = [RunSpec("solver", policy="solver"), RunSpec("random", policy="random")]
    result = evaluate("mtrl/SOP-DangerousGoods-v0", runs, split="val", limit=2, config=EvalConfig(n=1),
                      out_dir=tmp_path, report=False)
    assert result.summary["task_ids"] == ["sop-dangerous-goods-val-00000", "sop-dangerous-goods-val-00001"]
    solver, rand = result.run("solver"), result.run("random")
    assert solver["success_rate"]["value"] == 1.0 and solver["trajectory"]["format_error_rate"] == 0.0
    assert rand["success_rate"]["value"] == 0.0 and rand["trajectory"]["tool_calls"] > 0
    first = read_records(tmp_path / "trajectories" / "solver.jsonl")[0]
    said = [m["content"] for m in first["messages"] if m["role"] == "assistant"]
    assert '"name": "submit"' in said[-1]  # the oracle's answer, replayed


def test_random_tool_policy_follows_schemas():
    import numpy as np

    tools = [{"type": "function", "function": {"name": "book", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}, "cls": {"type": "string", "enum": ["eco", "biz"]}, "ok": {"type": "boolean"}}}}}]
    policy = RandomToolPolicy()
    policy.reset({"tools": tools}, np.random.default_rng(0))
    call = json.loads(policy("obs", {}).removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert call["name"] == "book" and call["arguments"]["cls"] in ("eco", "biz")
    assert isinstance(call["arguments"]["n"], int) and isinstance(call["arguments"]["ok"], bool)
    policy.reset({"tools": []}, np.random.default_rng(0))
    assert policy("obs", {}).isalpha()


def test_policy_episode_that_raises_is_a_failed_record():
    env = gymnasium.make("mtrl/Wordle-v0")

    class Broken:
        def reset(self, info, rng, **episode):
            pass

        def __call__(self, obs, info):
            raise RuntimeError("boom")

    t = play_episode(env, Broken(), None, seed=0, task_index=0, sample_index=0, env_id="e", max_turns=3,
                     failure_reward=-1.5)
    assert t.failed and t.reward == -1.5 and "boom" in t.failure_reason


# ---------------------------------------------------------------- store


def test_store_appends_reads_back_and_cuts_a_half_written_line(tmp_path):
    header = {"env_id": "e", "tasks": {"count": 2}, "config": {"n": 1}}
    store = EvalStore(tmp_path, header)
    store.add_run("a:1.0", {"kind": "model"})
    store.append("a:1.0", [{"task_index": 0, "sample_index": 0, "v": 1}])
    path = store.path("a:1.0")
    assert path.name == "a_1.0.jsonl"
    with open(path, "a") as f:
        f.write('{"task_index": 1, "sample_')  # killed mid-write
    assert [r["v"] for r in read_records(path)] == [1]
    again = EvalStore(tmp_path, header, resume=True)
    again.add_run("a:1.0", {"kind": "model"})
    assert again.done("a:1.0") == {(0, 0)}
    again.append("a:1.0", [{"task_index": 1, "sample_index": 0, "v": 2, "failed": True}])
    assert [r["v"] for r in read_records(path)] == [1, 2]
    assert again.done("a:1.0", retry_failed=True) == {(0, 0)}
    with pytest.raises(ConfigError, match="already holds an evaluation"):
        EvalStore(tmp_path, header)
    with pytest.raises(ConfigError, match="its config differs"):
        EvalStore(tmp_path, dict(header, config={"n": 2}), resume=True)
    with pytest.raises(ConfigError, match="settings changed: kind"):
        again.add_run("a:1.0", {"kind": "adapter"})
    again.add_run("old", {"kind": "adapter", "adapter": "runs/a"})  # recorded before runs kept the adapter's digest
    with pytest.raises(ConfigError, match="settings changed: adapter"):  # then only the path can be compared
        again.add_run("old", {"kind": "adapter", "adapter": "runs/b", "adapter_sha256": "0123"})
    with pytest.warns(UserWarning, match="recorded without its adapter's digest"):
        again.add_run("old", {"kind": "adapter", "adapter": "runs/a", "adapter_sha256": "0123"})
    with pytest.raises(ResumeMismatch, match=r"adapter's files changed .*\(adapter_sha256 0123 -> 4567\)") as e:
        EvalStore(tmp_path, header, resume=True).add_run("old", {"kind": "adapter", "adapter": "elsewhere",
                                                                 "adapter_sha256": "4567"})
    assert e.value.reason.endswith("so they came from another adapter")  # the digest was recorded on the upgrade
    with pytest.raises(ResumeMismatch, match="no adapter files at runs/a now"):
        again.add_run("old", {"kind": "adapter", "adapter": "runs/a"})
    prompt = {"kind": "adapter", "system_prompt": "run/prompts/a.txt", "system_prompt_sha256": "89ab"}
    again.add_run("prompted", prompt)
    again.add_run("prompted", dict(prompt, system_prompt="copy/prompts/a.txt"))  # the same text in a copied folder
    with pytest.raises(ResumeMismatch, match="settings changed: system_prompt_sha256"):
        again.add_run("prompted", dict(prompt, system_prompt_sha256="cdef"))  # another text at the same path
    with pytest.raises(ResumeMismatch, match="settings changed: system_prompt, system_prompt_sha256 "):
        again.add_run("prompted", {"kind": "adapter", "system_prompt": "default"})  # a named variant: no digest
    path.write_text('{"task_index": 0, "sample_index": 0}\nnot json\n{"task_index": 1, "sample_index": 0}\n')
    with pytest.raises(DatasetError, match="line 2"):
        read_records(path)


# ---------------------------------------------------------------- command line


def _cli_runs(*argv):
    from mtrl_gym.cli import build_parser
    from mtrl_gym.cli.eval import build_runs

    return build_runs(build_parser().parse_args(["eval", *argv]))


def test_cli_run_grammar_and_defaults():
    runs = _cli_runs("--model", "m", "--adapter", "out/a", "--adapter", "late=out/b", "--temperature", "0.7",
                     "--runs", "base", "trained:0", "late:1.0:0.9", "--policy", "solver")
    assert [(r.name, r.kind, r.serving.temperature, r.serving.top_p) for r in runs[:3]] == [
        ("base:0.7", "model", 0.7, 1.0), ("trained:0.0", "adapter", 0.0, 1.0), ("late:1.0:0.9", "adapter", 1.0, 0.9)]
    assert (runs[3].name, runs[3].kind) == ("solver", "policy")
    assert runs[2].adapter == "out/b" and runs[2].model == "m"
    # Without --runs every source runs once; with --endpoint, --model is only its tokenizer.
    assert [r.name for r in _cli_runs("--model", "m", "--adapter", "out/a")] == ["base:1.0", "trained:1.0"]
    endpoint = _cli_runs("--model", "tok", "--endpoint", "http://127.0.0.1:9/v1", "--policy", "random")
    assert [(r.name, r.kind) for r in endpoint] == [("endpoint:1.0", "endpoint"), ("random", "policy")]
    assert endpoint[0].endpoint == "http://127.0.0.1:9/v1" and endpoint[0].model == "tok"
    with pytest.raises(ConfigError, match="label 'trained' is given twice"):
        _cli_runs("--adapter", "a", "--adapter", "b")
    prefixed = _cli_runs("--model", "m", "--assistant-prefix", "<tool_call>", "--stop", '"', "--policy", "solver")
    assert prefixed[0].serving.assistant_prefix == "<tool_call>"
    assert prefixed[0].describe()["assistant_prefix"] == "<tool_call>"
    assert prefixed[0].serving.stop == ['"'] and prefixed[0].describe()["stop"] == ['"']
    assert "assistant_prefix" not in prefixed[1].describe()  # a text policy is not prefilled
    assert "constrained" not in prefixed[0].describe()
    constrained = _cli_runs("--model", "m", "--assistant-prefix", "x", "--stop", '"', "--constrained",
                            "--policy", "random")
    assert [(r.name, r.serving.constrained) for r in constrained] == [("base:1.0:constrained", True), ("random", False)]
    with pytest.raises(ConfigError, match="needs a model run .* with a `stop`"):
        _cli_runs("--model", "m", "--constrained")


def test_seeded_split_for_any_env(tmp_path):
    from mtrl_gym.evaluation import evaluate

    result = evaluate("mtrl/Wordle-v0", [RunSpec("solver", policy="solver")], split="seeds:3",
                      config=EvalConfig(n=1, seed=5), out_dir=tmp_path, report=False)
    direct = [gymnasium.make("mtrl/Wordle-v0").reset(seed=5 + i)[1]["task_id"] for i in range(3)]
    assert result.summary["task_ids"] == direct
    assert [r["task_id"] for r in read_records(tmp_path / "trajectories" / "solver.jsonl")] == direct
