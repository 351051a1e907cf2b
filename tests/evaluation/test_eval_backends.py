"""Models, adapters and endpoints: early checks with clear messages, and runs through each."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mtrl_gym.error import ConfigError, SamplerError
from mtrl_gym.evaluation import EvalConfig, ModelPool, RunSpec, adapter_shape_problems, evaluate, probe_endpoint
from mtrl_gym.evaluation.backends import same_base_model

peft = pytest.importorskip("peft")


def _save_model(folder, model, tokenizer):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory, tiny_model, chatml_tokenizer):
    return _save_model(tmp_path_factory.mktemp("base"), tiny_model, chatml_tokenizer)


def _adapter(folder, base_path, *, hidden: int = 32, seed: int = 1):
    """A LoRA adapter trained (randomly perturbed) on the tiny Llama saved at ``base_path``."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base_path)
    assert model.config.hidden_size == hidden
    lora = peft.get_peft_model(model, peft.LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    lora.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory, base_dir):
    return _adapter(tmp_path_factory.mktemp("adapter"), str(base_dir))


@pytest.fixture(scope="module")
def other_base_dir(tmp_path_factory, tiny_model, chatml_tokenizer):
    """Another architecture: the tiny Llama with wider layers (hidden size 48)."""
    from transformers import LlamaForCausalLM

    config = tiny_model.config.__class__(**{**tiny_model.config.to_dict(), "hidden_size": 48})
    return _save_model(tmp_path_factory.mktemp("other-base"), LlamaForCausalLM(config), chatml_tokenizer)


def test_same_base_model_names():
    assert same_base_model("smollm2-135m", "SmolLM2")
    assert same_base_model("HuggingFaceTB/SmolLM2-135M-Instruct", "/cache/models/smollm2-135m-instruct/")
    assert not same_base_model("Qwen/Qwen2.5-0.5B-Instruct", "smollm2-135m")


def test_adapter_run_loads_merges_and_differs_from_base(tmp_path, base_dir, adapter_dir):
    pool = ModelPool(device="cpu")
    base = RunSpec("base", model=str(base_dir), serving={"temperature": 0.0, "max_new_tokens": 4})
    trained = RunSpec("trained", model=str(base_dir), adapter=str(adapter_dir), serving={"temperature": 0.0, "max_new_tokens": 4})
    pool.preflight(trained)
    base_model = pool.open(base)[0].model
    merged = pool.open(trained)[0].model
    q_base = base_model.model.layers[0].self_attn.q_proj.weight
    q_merged = merged.model.layers[0].self_attn.q_proj.weight
    assert q_base.shape == q_merged.shape and not (q_base == q_merged).all()
    assert pool.open(base)[0].model is base_model  # loaded once, shared between runs
    pool.release([trained])
    assert list(pool._models) == [(str(base_dir), str(adapter_dir))]
    # Without --model the adapter's recorded base is loaded.
    assert ModelPool().base_of(RunSpec("t", adapter=str(adapter_dir))) == str(base_dir)
    result = evaluate("mtrl/Wordle-v0", [base, trained], split="val", limit=1,
                      config=EvalConfig(n=1, max_turns=1), out_dir=tmp_path, pool=ModelPool(device="cpu"),
                      report=False)
    assert result.run("trained")["spec"]["adapter"] == str(adapter_dir)


def test_adapter_for_another_base_model_fails_early(tmp_path, base_dir, other_base_dir):
    adapter = _adapter(tmp_path / "wide-adapter", str(other_base_dir), hidden=48)
    spec = RunSpec("trained", model=str(base_dir), adapter=str(adapter))
    with pytest.raises(ConfigError, match=r"was trained on base model .*other-base.*--allow-base-mismatch"):
        ModelPool().preflight(spec)
    with pytest.raises(ConfigError, match=r"does not fit base model .*q_proj\.lora_A\.weight: adapter shape \[2, 48\], "
                                          r"the model needs \[2, 32\]"):
        ModelPool(allow_base_mismatch=True).preflight(spec)
    # evaluate() checks every run before playing the first episode.
    with pytest.raises(ConfigError, match="was trained on base model"):
        evaluate("mtrl/Wordle-v0", [RunSpec("solver", policy="solver"), spec], split="val", limit=1,
                 out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_adapter_shape_check_names_missing_modules(adapter_dir, chatml_tokenizer):
    import torch

    class NoAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm_head = torch.nn.Linear(32, 8)

    problems = adapter_shape_problems(adapter_dir, NoAttention())
    assert problems and all("the model has no module" in p for p in problems)


def test_adapter_folder_errors(tmp_path, adapter_dir):
    with pytest.raises(ConfigError, match="does not exist"):
        ModelPool().base_of(RunSpec("t", adapter=str(tmp_path / "nope")))
    nested = tmp_path / "run"
    (nested / "checkpoints").mkdir(parents=True)
    import shutil

    shutil.copytree(adapter_dir, nested / "checkpoints" / "final")
    with pytest.raises(ConfigError, match=r"not a peft adapter folder.*checkpoints/final"):
        ModelPool().base_of(RunSpec("t", adapter=str(nested)))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "adapter_config.json").write_text("{}")
    with pytest.raises(ConfigError, match="no weights"):
        ModelPool().base_of(RunSpec("t", adapter=str(tmp_path / "empty")))


def test_unloadable_model_fails_early(tmp_path):
    with pytest.raises(ConfigError, match="cannot load model"):
        ModelPool().preflight(RunSpec("m", model=str(tmp_path / "no-such-model")))


# ---------------------------------------------------------------- endpoints


class FixedServer:
    """An OpenAI-compatible server whose every completion is the same token ids."""

    def __init__(self, completion_ids: list[int]):
        ids = completion_ids

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._send({"object": "list", "data": [{"id": "tiny", "object": "model"}]})

            def do_POST(self):
                json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send({"choices": [{"token_ids": ids, "finish_reason": "stop",
                                         "logprobs": {"token_logprobs": [-0.5] * len(ids)}}]})

            def _send(self, payload):
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def crane_server(chatml_tokenizer):
    text = '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call><|im_end|>'
    server = FixedServer(chatml_tokenizer.encode(text, add_special_tokens=False))
    yield server
    server.close()


def test_endpoint_down_fails_early_with_a_clear_message(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(SamplerError, match=rf"endpoint {url} is not reachable.*vllm serve"):
        probe_endpoint(url, timeout_s=2)
    with pytest.raises(SamplerError, match="not reachable"):
        evaluate("mtrl/Wordle-v0", [RunSpec("e", endpoint=url, model="unused")], split="val", limit=1,
                 out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_endpoint_run_end_to_end(tmp_path, crane_server, chatml_tokenizer):
    assert probe_endpoint(crane_server.url) == ["tiny"]
    with pytest.raises(ConfigError, match=r"does not serve model 'big'; it serves \['tiny'\]"):
        probe_endpoint(crane_server.url, model="big")
    spec = RunSpec("endpoint:1.0", endpoint=crane_server.url, tokenizer=chatml_tokenizer, serving={"max_new_tokens": 64})
    tasks = [{"answer": "crane", "id": "win"}, {"answer": "paste", "id": "lose"}]
    result = evaluate("mtrl/Wordle-v0", [spec], tasks=tasks, config=EvalConfig(n=2), out_dir=tmp_path, report=False)
    run = result.run("endpoint:1.0")
    assert run["success_rate"]["value"] == 0.5 and run["pass_at_k"]["2"]["value"] == 0.5
    assert run["trajectory"]["tool_calls"] == pytest.approx((1 + 6) / 2)  # solved at once / six repeats
    assert run["trajectory"]["format_error_rate"] == 0.0
    assert run["reward"]["value"] == pytest.approx((1.55 - 0.5) / 2)


def test_runs_that_load_the_same_model_play_back_to_back(base_dir, adapter_dir):
    from mtrl_gym.evaluation.runner import _execution_order

    runs = [RunSpec("base:1.0", model=str(base_dir)), RunSpec("solver", policy="solver"),
            RunSpec("trained:1.0", model=str(base_dir), adapter=str(adapter_dir)),
            RunSpec("base:0.0", model=str(base_dir), serving={"temperature": 0.0}),
            RunSpec("trained:0.0", model=str(base_dir), adapter=str(adapter_dir), serving={"temperature": 0.0})]
    order = [s.name for s in _execution_order(runs, ModelPool())]
    assert order == ["base:1.0", "base:0.0", "solver", "trained:1.0", "trained:0.0"]
    with pytest.raises(ConfigError, match="`backend` must be one of"):
        ModelPool(backend="onnx")


def test_resume_knows_an_adapter_by_its_files_not_its_path(tmp_path, base_dir, capsys):
    """An adapter retrained into the same folder is another model: resuming its evaluation is
    refused, where the same files moved to another folder continue it."""
    import shutil

    from mtrl_gym.cli import main

    adapter = _adapter(tmp_path / "adapter", str(base_dir), seed=1)
    out = tmp_path / "eval"
    argv = ["eval", "mtrl/Wordle-v0", "--model", str(base_dir), "--adapter", str(adapter), "--runs", "trained:0",
            "--split", "val", "--limit", "2", "-n", "1", "--max-turns", "1", "--max-tokens", "4", "--out", str(out),
            "--no-mlflow", "--quiet"]
    assert main(argv) == 0
    saved = json.loads((out / "eval_config.json").read_text())["runs"]["trained:0.0"]["spec"]
    assert len(saved["adapter_sha256"]) == 16 and saved["adapter"] == str(adapter)
    played = (out / "trajectories" / "trained_0.0.jsonl").read_text()
    moved = shutil.copytree(adapter, tmp_path / "copied" / "adapter")
    assert main([*argv[:5], str(moved), *argv[6:], "--resume"]) == 0  # the same files elsewhere: nothing to replay
    assert (out / "trajectories" / "trained_0.0.jsonl").read_text() == played
    _adapter(adapter, str(base_dir), seed=2)  # trained again, into the same folder
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"cannot resume run 'trained:0.0' in {out}: the adapter's files changed since its episodes were played " \
           f"(adapter_sha256 {saved['adapter_sha256']} -> " in err
    assert (out / "trajectories" / "trained_0.0.jsonl").read_text() == played  # nothing mixed in
    spec = RunSpec("trained:0.0", model=str(base_dir), adapter=str(adapter), serving={"temperature": 0.0})
    assert spec.describe()["adapter_sha256"] != saved["adapter_sha256"]
    assert "adapter_sha256" not in RunSpec("t", model="m", adapter=str(tmp_path / "nowhere")).describe()


def test_resume_refuses_another_dtype_so_one_run_never_mixes_numerics(tmp_path, base_dir, capsys):
    """The pool's dtype is part of a model run's record: a bfloat16 resume of a float32
    evaluation is refused (nothing is appended), the same dtype resumes, and a default pool
    records nothing (the record older evaluations resume against)."""
    from mtrl_gym.cli import main

    out = tmp_path / "eval"
    argv = ["eval", "mtrl/Wordle-v0", "--model", str(base_dir), "--runs", "base:0", "--split", "val", "--limit", "2",
            "-n", "1", "--max-turns", "1", "--max-tokens", "4", "--out", str(out), "--no-mlflow", "--quiet"]
    assert main([*argv, "--dtype", "float32"]) == 0
    spec = json.loads((out / "eval_config.json").read_text())["runs"]["base:0.0"]["spec"]
    assert spec["dtype"] == "float32" and "backend" not in spec
    assert json.loads((out / "summary.json").read_text())["runs"]["base:0.0"]["spec"]["dtype"] == "float32"
    played = (out / "trajectories" / "base_0.0.jsonl").read_text()
    assert main([*argv, "--dtype", "bfloat16", "--resume"]) == 2
    assert f"cannot resume run 'base:0.0' in {out}: its settings changed: dtype" in capsys.readouterr().err
    assert main([*argv, "--dtype", "float32", "--resume"]) == 0
    assert (out / "trajectories" / "base_0.0.jsonl").read_text() == played
    pool = ModelPool()
    assert pool.numerics(RunSpec("b", model="m")) == {}
    assert ModelPool(dtype="torch.bfloat16").numerics(RunSpec("b", model="m")) == {"dtype": "bfloat16"}
    assert ModelPool(backend="vllm").numerics(RunSpec("b", model="m", adapter="a")) == {"backend": "vllm"}
    assert ModelPool(backend="vllm", vllm_kwargs={"dtype": "float16"}).numerics(RunSpec("b", model="m")) == \
        {"backend": "vllm", "dtype": "float16"}
    assert ModelPool(dtype="bfloat16").numerics(RunSpec("s", policy="solver")) == {}
