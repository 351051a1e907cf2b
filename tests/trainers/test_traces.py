"""Episodes as MLflow traces, read back from a real ``mlflow server`` on 127.0.0.1.

The module starts one server (SQLite backend, temporary folder, free port), trains two GRPO
steps and runs a small evaluation on the tiny model with the tracker pointing at it, then
reads the traces back with MLflow's own client (``mlflow.search_traces``) and checks the span
tree, the assessments and the tags against the trajectory files the run wrote.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("torch")
pytest.importorskip("peft")

from tiny_models import build_tiny_llama  # noqa: E402

from mtrl_gym.rollout.samplers.base import SampleResult, Sampler  # noqa: E402
from mtrl_gym.rollout.samplers.hf import HFSampler  # noqa: E402
from mtrl_gym.rollout.trajectory import load_jsonl  # noqa: E402

GUESS = '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """``http://127.0.0.1:<port>`` of a fresh ``mlflow server``; stopped after the module."""
    folder = tmp_path_factory.mktemp("mlflow_server")
    port = _free_port()
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                             "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
                             "--artifacts-destination", str(folder / "artifacts"), "--workers", "1"],
                            cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=open(folder / "server.log", "w"),
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("mlflow server did not start: " + (folder / "server.log").read_text()[-2000:])
        time.sleep(0.3)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)  # the server and its worker processes
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class FailSample1(Sampler):
    """A real sampler, except that every request of sample 1 of group 0 fails (a failed episode)."""

    name = "fail-one"

    def __init__(self, inner: HFSampler):
        self.inner = inner
        self.eos_token_ids = inner.eos_token_ids

    def sample(self, requests):
        results = self.inner.sample(requests)
        return [SampleResult([], [], "error", error="backend hiccup") if r.session_id.endswith("-0-1") else res
                for r, res in zip(requests, results)]

    def update_policy(self, model=None, *, adapter_path=None, version=None):
        self.inner.update_policy(model, version=version)


def _by_key(traces, *keys):
    return {tuple(t.info.tags[f"mtrl_gym.{k}"] for k in keys): t for t in traces}


def _check_span_tree(trace, traj):
    """The trace's spans against the trajectory file: turns, tool calls, env replies, statuses."""
    import mlflow  # noqa: F401

    spans = trace.data.spans
    [root] = [s for s in spans if s.parent_id is None]
    assert root.name == "episode" and root.span_type == "AGENT"
    turns = sorted((s for s in spans if s.parent_id == root.span_id), key=lambda s: int(s.name.split()[1]))
    assistant = [i for i, m in enumerate(traj.messages) if m["role"] == "assistant"]
    assert [s.name for s in turns] == [f"turn {k + 1}" for k in range(len(assistant))]
    for k, (span, j) in enumerate(zip(turns, assistant)):
        assert span.span_type == "CHAT_MODEL"
        assert span.inputs["messages"] == traj.messages[:j]           # what the model saw
        assert span.outputs["content"] == traj.messages[j]["content"]  # its raw reply
        assert span.attributes["reward"] == pytest.approx(traj.turn_rewards[k]) if k < len(traj.turn_rewards) else True
        children = [s for s in spans if s.parent_id == span.span_id]
        info = traj.turn_info[k] if k < len(traj.turn_info) else {}
        tools = [s for s in children if s.span_type == "TOOL"]
        assert [(s.name, s.inputs) for s in tools] == [(c["name"], c["arguments"]) for c in info.get("tool_calls", [])]
        replies = [m for m in traj.messages[j + 1:(assistant + [len(traj.messages)])[k + 1]]]
        tool_results = {m["tool_call_id"]: m["content"] for m in replies if m["role"] == "tool"}
        for s, c in zip(tools, info.get("tool_calls", [])):
            assert s.outputs == tool_results.get(c["id"])
        envs = [s for s in children if s.name == "env"]
        assert [e.outputs["messages"] for e in envs] == ([replies] if replies else [])
        if info.get("format_error"):
            assert span.status.status_code == "ERROR" and "format error" in span.status.description
        elif traj.failed and k == len(assistant) - 1 and not replies:
            assert span.status.status_code == "ERROR" and span.status.description == traj.failure_reason
        else:
            assert span.status.status_code == "OK"
    if traj.failed:
        assert root.status.status_code == "ERROR" and root.status.description == traj.failure_reason
        assert trace.info.state == "ERROR"


def _assessments(trace):
    return {a.name: a.value for a in trace.info.assessments}


def test_training_and_eval_episodes_are_traces_in_a_real_mlflow_server(tmp_path, mlflow_server, chatml_tokenizer,
                                                                       tiny_model, monkeypatch):
    import mlflow

    from mtrl_gym.evaluation import EvalConfig, RunSpec, evaluate
    from mtrl_gym.evaluation.store import read_records
    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    # Two steps of two Wordle groups of two; every turn starts with a real guess_word call.
    config = GRPOConfig(env="mtrl/Wordle-v0", output_dir=str(tmp_path / "run"), global_batch_size=2, group_size=2,
                        max_steps=2, episode={"max_turns": 2, "max_tokens": 1200},
                        serving={"max_new_tokens": 4, "assistant_prefix": GUESS}, lora={"rank": 4},
                        tracking={"tracker": "mlflow", "uri": mlflow_server, "experiment": "traces",
                                  "log_trajectories": 4, "traces": {"per_step": 3}},
                        run_name="tiny-grpo", progress=False, validation={"every": 0}, checkpoints={"save_every": 0},
                        seed=0)
    model = build_tiny_llama(len(chatml_tokenizer), seed=0)
    trainer = GRPOTrainer(config, model=model, tokenizer=chatml_tokenizer)
    trainer.sampler = FailSample1(HFSampler(trainer.policy, chatml_tokenizer))
    trainer.source.sampler = trainer.sampler
    summary = trainer.train()
    run_id = summary["tracker_run_id"]

    mlflow.set_tracking_uri(mlflow_server)
    experiment = mlflow.MlflowClient(mlflow_server).get_experiment_by_name("traces").experiment_id
    traces = mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list")
    assert len(traces) == 2 * 3  # capped per step
    for step in (1, 2):
        saved = load_jsonl(tmp_path / "run" / "trajectories" / f"step_{step:06d}.jsonl")
        # the trace sample is the file's first per_step episodes (one per group first)
        found = _by_key([t for t in traces if t.info.tags["mtrl_gym.step"] == str(step)], "group", "sample")
        assert set(found) == {(str(t.group_id), str(t.sample_index)) for t in saved[:3]}
        for traj in saved[:3]:
            trace = found[(str(traj.group_id), str(traj.sample_index))]
            tags = trace.info.tags
            assert tags["mtrl_gym.run"] == "tiny-grpo" and tags["mtrl_gym.kind"] == "train"
            assert tags["mtrl_gym.task_id"] == traj.task_id and tags["mtrl_gym.seed"] == str(traj.seed)
            assert traj.policy_version is None  # synchronous: the trainer tags the version that played it
            assert tags["mtrl_gym.policy_version"] == str(step - 1)
            assert trace.info.request_metadata.get("mlflow.sourceRun") == run_id
            _check_span_tree(trace, traj)
            scores = _assessments(trace)
            assert scores["reward"] == pytest.approx(traj.reward)
            assert scores["success"] == bool(traj.metrics["success"])
            if not traj.failed:
                assert scores["outcome_reward"] == pytest.approx(sum(traj.turn_rewards))  # no shaping here
    failed = [t for t in traces if t.info.state == "ERROR"]
    assert len(failed) == 2 and {(t.info.tags["mtrl_gym.group"], t.info.tags["mtrl_gym.sample"]) for t in failed} == {("0", "1")}
    tool_spans = [s for t in traces for s in t.data.spans if s.span_type == "TOOL"]
    assert tool_spans and all(s.name == "guess_word" and s.inputs == {"guess": "crane"} for s in tool_spans)

    # A small eval: the tiny base model (format errors) against the solver, every episode traced.
    runs = [RunSpec("base", sampler=HFSampler(tiny_model, chatml_tokenizer), tokenizer=chatml_tokenizer,
                    serving={"max_new_tokens": 4}), RunSpec("solver", policy="solver")]
    result = evaluate("mtrl/Wordle-v0", runs, split="val", limit=2, out_dir=tmp_path / "eval",
                      config=EvalConfig(n=1, max_turns=2, max_episode_tokens=900), mlflow=True,
                      tracking_uri=mlflow_server, experiment="traces-eval")
    logged = result.summary["mlflow"]
    eval_exp = logged["experiment_id"]
    for name in ("base", "solver"):
        records = read_records(result.files[f"trajectories/{name}"])
        found = mlflow.search_traces(locations=[eval_exp], filter_string=f"tags.`mtrl_gym.run` = '{name}'",
                                     return_type="list")
        assert len(found) == len(records) == 2
        by_task = _by_key(found, "task_id", "sample")
        for r in records:
            trace = by_task[(r["task_id"], str(r["sample_index"]))]
            assert trace.info.tags["mtrl_gym.kind"] == "eval"
            assert trace.info.request_metadata.get("mlflow.sourceRun") == logged["runs"][name]
            scores = _assessments(trace)
            assert scores["success"] == r["success"] and scores["outcome_reward"] == pytest.approx(r["outcome_reward"])
            from mtrl_gym.rollout.trajectory import Trajectory

            _check_span_tree(trace, Trajectory.from_dict(r))
    # the same task is listed under every policy
    task = read_records(result.files["trajectories/base"])[0]["task_id"]
    same = mlflow.search_traces(locations=[eval_exp], filter_string=f"tags.`mtrl_gym.task_id` = '{task}'",
                                return_type="list")
    assert {t.info.tags["mtrl_gym.run"] for t in same} == {"base", "solver"}
    base_turns = [s for t in same if t.info.tags["mtrl_gym.run"] == "base" for s in t.data.spans
                  if s.span_type == "CHAT_MODEL"]
    assert any(s.status.status_code == "ERROR" for s in base_turns)  # the random model's format errors
