"""End to end: the solver, the random policy and a tiny random model through ``mtrl-gym eval``;
resume after an interruption; the external scorer with shaping wrappers; bad input."""

from __future__ import annotations

import json

import gymnasium
import pytest
from eval_helpers import assert_valid_png

from mtrl_gym.cli import main
from mtrl_gym.error import ConfigError, DatasetError, SamplerError, UnknownEnv
from mtrl_gym.evaluation import EvalConfig, RunSpec, evaluate, read_records

@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, chatml_tokenizer, tiny_model):
    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_model.save_pretrained(folder)
    chatml_tokenizer.save_pretrained(folder)
    return folder


def test_solver_and_random_end_to_end_through_the_cli(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["eval", "--policy", "solver", "--policy", "random", "--split", "val", "--limit", "4", "-n", "2",
               "--out", str(out), "--no-mlflow", "--quiet"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "solver" in printed and "random" in printed and "summary:" in printed
    summary = json.loads((out / "summary.json").read_text())
    solver, rand = summary["runs"]["solver"], summary["runs"]["random"]
    assert solver["success_rate"]["value"] == 1.0 and rand["success_rate"]["value"] == 0.0
    assert set(solver["pass_at_k"]) == {"1", "2"} and solver["episodes"] == 8
    assert rand["reward"]["value"] == -0.5 and rand["trajectory"]["turns"] == 6.0
    assert solver["trajectory"]["sampled_tokens"] is None  # policies have no tokens
    assert summary["baselines"] == {"random": 0.0, "solver": 1.0}
    assert solver["baseline_position"] == 1.0 and summary["reference"] is None
    lines = (out / "trajectories" / "solver.jsonl").read_text().splitlines()
    assert len(lines) == 8
    record = json.loads(lines[0])
    assert {record["task_id"], record["run"], record["task_index"], record["success"]} == \
        {"wordle_val_0000", "solver", 0, True}
    assert_valid_png(out / "report" / "success_pass_at_k.png")
    report = (out / "report" / "report.md").read_text()
    assert "| solver | policy solver |" in report and "**policy, turn 1:**" in report
    assert "**tool `guess_word` result:**" in report and "Feedback:" in report


def test_tiny_model_end_to_end_through_the_cli(tmp_path, tiny_model_dir):
    out = tmp_path / "out"
    prompt = tmp_path / "system.txt"
    prompt.write_text("You are a terse Wordle player.")
    rc = main(["eval", "--model", str(tiny_model_dir), "--runs", "base:1.0", "base:0.0", "--policy", "solver",
               "--policy", "random", "--split", "val", "--limit", "2", "-n", "2", "--max-tokens", "6",
               "--max-episode-tokens", "640", "--system-prompt", str(prompt), "--device", "cpu", "--out", str(out),
               "--no-mlflow", "--quiet"])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["runs"]) == ["base:1.0", "base:0.0", "solver", "random"]
    assert summary["reference"] == "base:1.0"
    base = summary["runs"]["base:1.0"]
    assert base["spec"]["temperature"] == 1.0 and base["spec"]["max_new_tokens"] == 6
    assert base["trajectory"]["sampled_tokens"] > 0 and base["trajectory"]["turns"] >= 2
    # Cut by the token budget before the env ended the game: no outcome, scored as the env's minimum.
    assert base["trajectory"]["stop_reasons"] == {"token_budget": 1.0}
    assert base["trajectory"]["unfinished_rate"] == 1.0 and base["reward"]["value"] == -1.5
    assert summary["runs"]["solver"]["vs_reference"]["success_rate"]["value"] == 1.0
    records = read_records(out / "trajectories" / "base_0.0.jsonl")
    assert len(records) == 4 and "token_ids" not in records[0]
    assert records[0]["messages"][0]["content"].startswith("You are a terse Wordle player.")
    # Greedy decoding: both samples of a task are the same episode.
    assert records[0]["messages"] == records[1]["messages"]
    assert_valid_png(out / "report" / "success_pass_at_k.png")
    report = (out / "report" / "report.md").read_text()
    assert "**model, turn 2:**" in report and "| base:0.0 | model " in report


class Interrupting:
    """Wraps a sampler; raises KeyboardInterrupt (like Ctrl-C) on call number ``at``."""

    name = "interrupting"

    def __init__(self, inner, at: int, error: type[BaseException] = KeyboardInterrupt):
        self.inner, self.at, self.calls, self.error = inner, at, 0, error
        self.eos_token_ids = inner.eos_token_ids
        self.max_context_length = inner.max_context_length

    def sample(self, requests):
        self.calls += 1
        if self.calls >= self.at:
            raise self.error("simulated crash")
        return self.inner.sample(requests)

    def end_session(self, session_id):
        self.inner.end_session(session_id)

    def close(self):
        pass


def _comparable(record):
    keep = ("task_id", "messages", "reward", "outcome_reward", "success", "stop_reason", "turn_rewards")
    return {k: record[k] for k in keep} | {"tokens": record["metrics"]["total_tokens"]}


def test_resume_after_interruption_reproduces_the_uninterrupted_run(tmp_path, tiny_model, chatml_tokenizer):
    from mtrl_gym.rollout.samplers.hf import HFSampler

    def spec(sampler):
        return RunSpec("tiny", sampler=sampler, tokenizer=chatml_tokenizer, serving={"max_new_tokens": 6})

    config = EvalConfig(n=2, max_turns=2, batch_tasks=1, report_examples=0)
    kw = dict(split="val", limit=3, config=config, report=False)
    whole = evaluate("mtrl/Wordle-v0", [spec(HFSampler(tiny_model, chatml_tokenizer))],
                     out_dir=tmp_path / "whole", **kw)

    out = tmp_path / "crashed"
    with pytest.raises(KeyboardInterrupt):
        # 2 sampler calls per task (2 turns): the crash hits the middle of the second task.
        evaluate("mtrl/Wordle-v0", [spec(Interrupting(HFSampler(tiny_model, chatml_tokenizer), at=4))],
                 out_dir=out, **kw)
    path = out / "trajectories" / "tiny.jsonl"
    assert len(read_records(path)) == 2  # the first task's episodes are on disk
    assert not (out / "summary.json").exists()
    with open(path, "a") as f:
        f.write('{"task_index": 1, "sample_index": 0, "mess')  # and a record cut mid-write

    with pytest.raises(ConfigError, match="already holds an evaluation"):
        evaluate("mtrl/Wordle-v0", [spec(HFSampler(tiny_model, chatml_tokenizer))], out_dir=out, **kw)
    with pytest.raises(ConfigError, match="config differs"):
        evaluate("mtrl/Wordle-v0", [spec(HFSampler(tiny_model, chatml_tokenizer))], out_dir=out, resume=True,
                 split="val", limit=3, config=EvalConfig(n=2, max_turns=2, batch_tasks=2), report=False)

    counting = Interrupting(HFSampler(tiny_model, chatml_tokenizer), at=10**9)
    resumed = evaluate("mtrl/Wordle-v0", [spec(counting)], out_dir=out, resume=True, **kw)
    assert counting.calls == 4  # only the two missing tasks were played
    assert [_comparable(r) for r in read_records(path)] == \
        [_comparable(r) for r in read_records(tmp_path / "whole" / "trajectories" / "tiny.jsonl")]
    assert resumed.run("tiny")["success_rate"] == whole.run("tiny")["success_rate"]


class GuessSampler:
    """Always answers ``guess_word(word)``; raises KeyboardInterrupt on call number ``crash_at``."""

    name = "guess"

    def __init__(self, tokenizer, word: str = "crane", crash_at: int | None = None):
        text = '<tool_call>{"name": "guess_word", "arguments": {"guess": "%s"}}</tool_call><|im_end|>' % word
        self.ids = tokenizer.encode(text, add_special_tokens=False)
        self.eos_token_ids = {tokenizer.eos_token_id}
        self.max_context_length = None
        self.crash_at, self.calls = crash_at, 0

    def sample(self, requests):
        from mtrl_gym.rollout.samplers.base import SampleResult

        self.calls += 1
        if self.calls == self.crash_at:
            raise KeyboardInterrupt
        return [SampleResult(list(self.ids), [0.0] * len(self.ids), "stop", prompt_tokens=len(r.prompt_ids))
                for r in requests]

    def end_session(self, session_id):
        pass

    def close(self):
        pass


def test_episodes_are_saved_as_they_finish_within_a_batch(tmp_path, chatml_tokenizer):
    tasks = [{"answer": "crane", "id": "quick"}, {"answer": "paste", "id": "slow"}, {"answer": "crane", "id": "q2"}]
    kw = dict(tasks=tasks, config=EvalConfig(n=2, batch_tasks=8), out_dir=tmp_path, report=False)
    with pytest.raises(KeyboardInterrupt):  # one batch; the crash comes at its second turn
        evaluate("mtrl/Wordle-v0", [RunSpec("m", sampler=GuessSampler(chatml_tokenizer, crash_at=2),
                                            tokenizer=chatml_tokenizer)], **kw)
    saved = read_records(tmp_path / "trajectories" / "m.jsonl")
    assert [(r["task_id"], r["sample_index"], r["success"]) for r in saved] == \
        [("quick", 0, True), ("quick", 1, True), ("q2", 0, True), ("q2", 1, True)]
    result = evaluate("mtrl/Wordle-v0", [RunSpec("m", sampler=GuessSampler(chatml_tokenizer),
                                                 tokenizer=chatml_tokenizer)], resume=True, **kw)
    records = read_records(tmp_path / "trajectories" / "m.jsonl")
    assert len(records) == 6 and (tmp_path / "trajectories" / "m.jsonl").read_text().count("\n") == 6
    assert result.run("m")["success_rate"]["value"] == pytest.approx(2 / 3)
    assert [r["metrics"]["turns"] for r in records] == [1, 1, 6, 6, 1, 1]


def test_a_batch_where_every_episode_fails_stops_the_run_and_resume_finishes(tmp_path, tiny_model,
                                                                               chatml_tokenizer):
    from mtrl_gym.rollout.samplers.hf import HFSampler

    kw = dict(split="val", limit=2, config=EvalConfig(n=1, max_turns=1, batch_tasks=1), report=False)
    down = Interrupting(HFSampler(tiny_model, chatml_tokenizer), at=2, error=ConnectionError)
    runs = [RunSpec("tiny", sampler=down, tokenizer=chatml_tokenizer, serving={"max_new_tokens": 4})]
    with pytest.raises(SamplerError, match=r"every episode of tasks 1\.\.1 failed.*ConnectionError.*--resume"):
        evaluate("mtrl/Wordle-v0", runs, out_dir=tmp_path, **kw)
    assert len(read_records(tmp_path / "trajectories" / "tiny.jsonl")) == 1
    runs = [RunSpec("tiny", sampler=HFSampler(tiny_model, chatml_tokenizer), tokenizer=chatml_tokenizer,
                    serving={"max_new_tokens": 4})]
    result = evaluate("mtrl/Wordle-v0", runs, out_dir=tmp_path, resume=True, **kw)
    assert result.run("tiny")["trajectory"]["failure_rate"] == 0.0


class PaysToStall(gymnasium.Wrapper):
    """Training shaping that rewards every step and claims success: evaluation must not trust it."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward + 1.0, terminated, truncated, dict(info, success=True)


def test_success_and_reward_come_from_the_bare_env_even_with_shaping_wrappers(tmp_path):
    result = evaluate("mtrl/Wordle-v0", [RunSpec("random", policy="random"), RunSpec("solver", policy="solver")],
                      split="val", limit=3, config=EvalConfig(n=1, wrappers=[PaysToStall]), out_dir=tmp_path,
                      report=False)
    rand = result.run("random")
    assert rand["success_rate"]["value"] == 0.0 and rand["reward"]["value"] == -0.5
    assert rand["training_reward"]["value"] == pytest.approx(-0.5 + 6)
    assert result.run("solver")["success_rate"]["value"] == 1.0


def test_bad_input_fails_before_any_episode(tmp_path):
    runs = [RunSpec("solver", policy="solver")]
    with pytest.raises(UnknownEnv, match="Did you mean 'mtrl/Wordle-v0'"):
        evaluate("mtrl/Wordle-v1", runs, split="seeds:1", out_dir=tmp_path / "a")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DatasetError, match="holds no task rows"):
        evaluate("mtrl/Wordle-v0", runs, tasks=empty, out_dir=tmp_path / "b")
    with pytest.raises(ConfigError, match="unique"):
        evaluate("mtrl/Wordle-v0", runs * 2, split="val", out_dir=tmp_path / "c")
    with pytest.raises(ConfigError, match="neither 'default', 'none' nor an existing file"):
        evaluate("mtrl/Wordle-v0", [RunSpec("s", policy="solver", serving={"system_prompt": "nope.txt"})], split="val",
                 out_dir=tmp_path / "d")
    assert not any((tmp_path / d).exists() for d in "abcd")  # nothing was written


def test_cli_reports_bad_input_as_an_error_message(tmp_path, capsys):
    assert main(["eval", "--runs", "trained:1.0", "--out", str(tmp_path / "x"), "--no-mlflow"]) == 2
    assert "unknown label 'trained'" in capsys.readouterr().err
    assert main(["eval", "--policy", "solver", "--resume", "--no-mlflow"]) == 2
    assert "--resume needs --out" in capsys.readouterr().err
    assert main(["eval", "--no-mlflow"]) == 2
    assert "nothing to evaluate" in capsys.readouterr().err


def test_missing_report_or_tracking_packages_fail_before_any_episode(tmp_path, monkeypatch):
    import importlib.util

    from mtrl_gym.error import DependencyNotInstalled

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("matplotlib", "mlflow")
                        else real(name, *a))
    runs = [RunSpec("solver", policy="solver")]
    with pytest.raises(DependencyNotInstalled, match=r"matplotlib is not installed.*report=False"):
        evaluate("mtrl/Wordle-v0", runs, split="val", limit=1, out_dir=tmp_path / "a")
    with pytest.raises(DependencyNotInstalled, match=r"mlflow is not installed.*--no-mlflow"):
        evaluate("mtrl/Wordle-v0", runs, split="val", limit=1, out_dir=tmp_path / "b", report=False, mlflow=True)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
