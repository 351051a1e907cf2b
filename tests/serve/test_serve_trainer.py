"""The trainer's agent rollout source: user agents (a function in a file, the openai-SDK
example) play through a local policy server; failures become failed trajectories and
GRPO steps complete."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fastapi")
pytest.importorskip("peft")

from tiny_models import build_tiny_llama
from toy_envs import VowelEnv

from mtrl_gym.rollout.sources.agent import (
    AgentRolloutSource,
    AgentSourceConfig,
    agent_row,
    load_agent,
)
from mtrl_gym.trainers.grpo.config import GRPOConfig
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer
from mtrl_gym.rollout.samplers.base import SamplingParams
from mtrl_gym.rollout.samplers.hf import HFSampler

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

AGENTS = textwrap.dedent('''
    import time
    from openai import OpenAI
    from mtrl_gym.serve import report_reward, task_payload

    def _ask(base_url, api_key, text):
        c = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        model = c.models.list().data[0].id
        r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": text}])
        return r.choices[0].message.content or ""

    def vowels(task_row, base_url, api_key):
        text = _ask(base_url, api_key, "Say something.")
        letters = [ch for ch in text.lower() if ch.isalpha()]
        return {"reward": sum(ch in "aeiou" for ch in letters) / max(len(letters), 1), "metrics": {"chars": len(text)}}

    def prefilled(task_row, base_url, api_key):
        return 1.0 if _ask(base_url, api_key, "Say something.").startswith("Answer: a") else 0.0

    TOOL = {"type": "function", "function": {"name": "shout", "description": "Shout a word.",
            "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}}

    def with_tools(task_row, base_url, api_key):
        c = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        c.chat.completions.create(model=c.models.list().data[0].id, tools=[TOOL],
                                  messages=[{"role": "user", "content": "Say something."}])
        return 1.0

    def mixed(task_row, base_url, *, api_key):
        mode = task_payload(task_row)["mode"]
        if mode == "ok":
            _ask(base_url, api_key, "hi")
            return 0.5
        if mode == "posts":
            _ask(base_url, api_key, "hi")
            report_reward(base_url, 0.25, {"x": 1}, api_key=api_key)
            return None
        if mode == "raises":
            _ask(base_url, api_key, "hi")
            raise ValueError("tool exploded")
        if mode == "hangs":
            time.sleep(3)
            _ask(base_url, api_key, "too late")
            return 1.0
        if mode == "silent":
            return 1.0
        if mode == "no_reward":
            _ask(base_url, api_key, "hi")
            return None
''')


@pytest.fixture
def agents_file(tmp_path):
    path = tmp_path / "my_agents.py"
    path.write_text(AGENTS)
    return path


def test_failures_become_failed_trajectories_and_the_batch_completes(agents_file, tiny_model, chatml_tokenizer):
    modes = ["ok", "posts", "raises", "hangs", "silent", "no_reward"]
    config = AgentSourceConfig(group_size=2, sampling=SamplingParams(max_new_tokens=4), time_budget_s=1.5,
                               failure_reward=-1.0, model_name="tiny")
    with AgentRolloutSource(f"{agents_file}:mixed", HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer,
                            config) as source:
        trajs = source.collect([{"id": m, "mode": m} for m in modes], seed=3)
        assert source.service.live_sessions() == 0
    assert [(t.task_id, t.sample_index) for t in trajs] == [(m, k) for m in modes for k in range(2)]
    by = {t.task_id: t for t in trajs}
    assert by["ok"].reward == 0.5 and not by["ok"].failed and by["ok"].trainable_tokens > 0
    assert by["posts"].reward == 0.25 and by["posts"].metrics["info/x"] == 1.0
    expected = {"raises": "the agent raised ValueError: tool exploded",
                "hangs": "the agent ran longer than its time budget of 1.5 s",
                "silent": "the agent never called the model",
                "no_reward": "the agent ended without reporting a reward"}
    for mode, reason in expected.items():
        t = by[mode]
        assert t.failed and t.reward == -1.0 and t.failure_reason.startswith(reason), (mode, t.failure_reason)
    assert by["hangs"].stop_reason == "time_budget" and by["hangs"].token_ids == []
    assert by["raises"].trainable_tokens > 0  # what it sampled before crashing is kept (train_on_failed)


def test_rows_reach_the_agent_in_the_service_shape_and_secrets_stay_out_of_the_prompt():
    row = agent_row({"answer": "paste", "id": "t1"}, 0)
    assert row == {"prompt": json.dumps({"answer": "paste", "id": "t1"})}
    assert agent_row(row, 0) == row
    with pytest.raises(Exception, match="must name a function"):
        load_agent("examples/agent_openai_sdk.py")
    with pytest.raises(Exception, match="no function 'nope'"):
        load_agent(f"{EXAMPLES / 'agent_openai_sdk.py'}:nope")


def _config(tmp_path, **overrides) -> GRPOConfig:
    values = {"output_dir": str(tmp_path / "run"), "global_batch_size": 2, "group_size": 4, "max_steps": 2,
              "serving": {"max_new_tokens": 6}, "episode": {"max_tokens": 512}, "lora": {"rank": 4, "alpha": 8.0},
              "learning_rate": 5e-2, "tracking": {"tracker": "none", "log_trajectories": 2}, "progress": False,
              "validation": {"every": 0}, "checkpoints": {"save_every": 0}, "seed": 0}
    return GRPOConfig.load(values, overrides)


def test_grpo_steps_on_an_agents_sessions_update_the_adapter(tmp_path, agents_file, chatml_tokenizer):
    config = _config(tmp_path, source={"name": "agent", "target": f"{agents_file}:vowels"}, env="mtrl/Wordle-v0")
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                          env=VowelEnv, train_tasks=[{"id": f"t{i}"} for i in range(4)], val_tasks=[])
    try:
        before = {n: p.detach().clone() for n, p in trainer.policy.named_parameters() if "lora_B" in n}
        m = trainer.train_step()
        after = {n: p.detach() for n, p in trainer.policy.named_parameters() if "lora_B" in n}
        assert any(not torch.equal(before[n], after[n]) for n in before)
        assert m["rollout/episodes"] == 8 and m["rollout/failure_rate"] == 0
        assert m["train/trained_tokens"] > 0 and m["rollout/tokens_sampled"] <= 8 * 6
        assert m["rollout/info/chars"] >= 0 and m["rollout/info/retokenized"] == 0
        trainer.train_step()
        assert trainer.step == 2
        logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
        assert len(logged) == 2
    finally:
        trainer.close()


def test_cli_trains_the_openai_sdk_example_for_two_steps(tmp_path, chatml_tokenizer, monkeypatch):
    """... with the default tracker: MLflow's store goes into the run folder, nothing into
    the working directory."""
    from mtrl_gym.cli import main

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    model_dir = tmp_path / "tiny"
    build_tiny_llama(len(chatml_tokenizer), seed=0).save_pretrained(model_dir)
    chatml_tokenizer.save_pretrained(model_dir)
    argv = ["train", "--set", "source.name=agent", "--set", f"source.target={EXAMPLES / 'agent_openai_sdk.py'}:run",
            "--model", str(model_dir),
            "--output-dir", str(tmp_path / "run"), "--max-steps", "2", "--global-batch-size", "2",
            "--group-size", "2", "--serving.max-new-tokens", "8", "--lora.rank", "4",
            "--validation.every", "0", "--checkpoints.save-every", "0", "--no-progress", "--train-size", "8",
            "--val-size", "2"]
    assert main(argv) == 0
    assert list(cwd.iterdir()) == []
    import mlflow

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'run' / 'mlflow.db'}")
    assert "rollout/reward_mean" in client.get_run(summary["tracker_run_id"]).data.metrics
    assert (tmp_path / "run" / "mlruns").is_dir()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["rollout/episodes"] == 4 for r in rows)
    assert all(r["rollout/failure_rate"] == 0 for r in rows)  # the agent ran; the random model just loses
    assert rows[-1]["rollout/reward_mean"] == -1.5
    saved = sorted((tmp_path / "run" / "trajectories").glob("*.jsonl"))
    assert saved
    traj = json.loads(saved[0].read_text().splitlines()[0])
    assert traj["env_id"] == "mtrl/Wordle-v0" and traj["trainable_tokens"] > 0
    masked = [t for t, m in zip(traj["token_ids"], traj["loss_mask"]) if m == 0]
    from mtrl_gym.envs.wordle.profile import wordle_split

    answers = {r["id"]: r["answer"] for r in wordle_split(train=8, val=2, seed=42)[0]}
    context = chatml_tokenizer.decode(masked)
    assert "Wordle" in context and answers[traj["task_id"]] not in context.lower()  # the secret stayed agent-side


def test_a_format_prefill_is_written_by_the_server_and_read_back_by_the_agent(tmp_path, agents_file,
                                                                              chatml_tokenizer):
    """`serving.assistant_prefix` with an agent: the server starts every turn with it (context,
    loss mask 0, as the built-in loop does) and the agent's reply text starts with it."""
    config = _config(tmp_path, source={"name": "agent", "target": f"{agents_file}:prefilled"},
                     serving={"assistant_prefix": "Answer: a", "max_new_tokens": 6}, group_size=2)
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                          env=VowelEnv, train_tasks=[{"id": f"t{i}"} for i in range(2)], val_tasks=[])
    try:
        assert trainer.source.config.assistant_prefix == "Answer: a"
        trajs = trainer.source.collect([{"id": "t0"}, {"id": "t1"}], seed=0)
    finally:
        trainer.close()
    prefix = chatml_tokenizer.encode("Answer: a", add_special_tokens=False)
    assert len(trajs) == 4 and all(t.reward == 1.0 and not t.failed for t in trajs)  # every reply began with it
    for t in trajs:
        (start, end), = t.turn_spans
        assert t.token_ids[start - len(prefix):start] == prefix and t.loss_mask[start - len(prefix):end] == \
            [0] * len(prefix) + [1] * (end - start)
        assert t.prompt_length == start - len(prefix)
    with pytest.raises(Exception, match="`source.target` of the agent source must be 'pkg.module:function'"):
        _config(tmp_path, source={"name": "agent", "target": "just_a_name"})


@pytest.mark.parametrize("shown", [False, True])
def test_serving_tools_false_hides_the_agents_tool_schemas_from_the_policy(tmp_path, agents_file, chatml_tokenizer,
                                                                           shown):
    """`serving.tools: false` with an agent: the tools it offers are not in the prompt the
    policy reads (as the built-in loop renders it under ``SystemPrompt(tools=False)``)."""
    config = _config(tmp_path, source={"name": "agent", "target": f"{agents_file}:with_tools"},
                     serving={"tools": shown, "max_new_tokens": 4}, group_size=2)
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                          env=VowelEnv, train_tasks=[{"id": "t0"}], val_tasks=[])
    try:
        assert trainer.source.config.tool_schemas is shown
        trajs = trainer.source.collect([{"id": "t0"}], seed=0)
    finally:
        trainer.close()
    for traj in trajs:
        prompt = chatml_tokenizer.decode(traj.token_ids[:traj.prompt_length])
        assert traj.reward == 1.0 and ("Shout a word." in prompt) is shown and bool(traj.tools) is shown


def test_an_http_agent_endpoint_gets_the_row_and_its_session_url(tiny_model, chatml_tokenizer):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from openai import OpenAI

    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            c = OpenAI(base_url=body["base_url"], api_key=body["api_key"], max_retries=0)
            c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
            out = json.dumps({"reward": 0.5 if body["task"]["prompt"].find("t0") >= 0 else 0.0}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        config = AgentSourceConfig(group_size=2, sampling=SamplingParams(max_new_tokens=4), model_name="tiny")
        url = f"http://127.0.0.1:{httpd.server_address[1]}/rollout"
        with AgentRolloutSource(url, HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer, config) as source:
            trajs = source.collect([{"id": "t0", "answer": "x"}, {"id": "t1", "answer": "y"}], seed=0)
    finally:
        httpd.shutdown()
    assert [t.reward for t in trajs] == [0.5, 0.5, 0.0, 0.0] and not any(t.failed for t in trajs)
    assert sorted(b["session_id"] for b in seen) == sorted(b["base_url"].split("/")[-2] for b in seen)
    assert json.loads(seen[0]["task"]["prompt"])["answer"] in ("x", "y")


def test_an_agent_that_takes_no_key_is_refused_with_the_fix(tmp_path, tiny_model, chatml_tokenizer):
    path = tmp_path / "old_agent.py"
    path.write_text("def run(task_row, base_url):\n    return 1.0\n")
    with pytest.raises(Exception, match=r"takes no `api_key`.*OpenAI\(base_url=base_url, api_key=api_key\)"):
        AgentRolloutSource(f"{path}:run", HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer,
                           AgentSourceConfig(model_name="tiny"))


def test_each_agent_gets_its_own_sessions_key_and_cannot_touch_the_others(agents_file, tiny_model, chatml_tokenizer):
    """A hostile agent (one of the group) tries to report rewards for every other
    session it can name; with session keys it reaches only its own."""
    import urllib.error
    import urllib.request

    seen: list[tuple[str, str]] = []

    def hostile(task_row, base_url, api_key):
        from openai import OpenAI

        from mtrl_gym.serve import session_parts

        OpenAI(base_url=base_url, api_key=api_key, max_retries=0).chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}])
        root, sid = session_parts(base_url)
        seen.append((sid, api_key))
        for other, _ in list(seen):
            if other == sid:
                continue
            req = urllib.request.Request(f"{root}/sessions/{other}/reward", data=b'{"reward": 99}', method="POST",
                                         headers={"Authorization": f"Bearer {api_key}"})
            try:
                urllib.request.urlopen(req, timeout=30)
                raise AssertionError("another session's reward was set")
            except urllib.error.HTTPError as e:
                assert e.code == 404
        return 0.5

    config = AgentSourceConfig(group_size=4, sampling=SamplingParams(max_new_tokens=3), model_name="tiny")
    with AgentRolloutSource(hostile, HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer, config) as source:
        trajs = source.collect([{"id": "a"}, {"id": "b"}], seed=0)
        assert source.service.num_sessions() == (0, 0)
    assert [t.reward for t in trajs] == [0.5] * 8 and not any(t.failed for t in trajs)
    assert len({sid for sid, _ in seen}) == 8 and len({key for _, key in seen}) == 8
