"""Fixtures of the adapter tests: tiny tokenizers and models, scripted policies.

The adapter tests run against the real outside packages (verifiers, TRL, OpenEnv), each in
the venv that has it; a test whose package is missing is skipped with the install line.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from tiny_models import build_chatml_tokenizer, build_tiny_llama

#: The scripted Wordle game every cross-adapter test plays: a miss, a bad message, the solve.
WORDLE_TASK = {"answer": "paste", "id": "cross-0"}
WORDLE_SEED = 7
WORDLE_GUESSES = ["crane", "paste"]
BAD_TEXT = "I think... \ud800 <tool_call>{not json</tool_call> guess_word(" + "x" * 50
#: The same without the lone surrogate: verifiers 0.4 cannot write a trace holding one (its
#: trace store raises UnicodeEncodeError on the model's own message, before any env code runs).
BAD_TEXT_UTF8 = BAD_TEXT.replace("\ud800", "\u00e9\u4e2d")



def _hide_test_folder_named_vllm() -> None:
    """``tests/`` is on ``sys.path`` (pytest ``pythonpath``), so ``tests/vllm`` is found as a
    namespace package ``vllm``; TRL probes for vLLM at import and fails on its missing version.
    Where no real vLLM is installed, mark ``vllm`` absent."""
    spec = importlib.util.find_spec("vllm") if "vllm" not in sys.modules else None
    tests = Path(__file__).resolve().parents[1]
    if spec is not None and spec.origin is None and all(
            Path(p).resolve().parent == tests for p in spec.submodule_search_locations or ()):
        sys.modules["vllm"] = None


_hide_test_folder_named_vllm()


@pytest.fixture(scope="session")
def tool_tokenizer():
    """A tiny BPE tokenizer with TRL's Qwen2.5 chat template (renders tools and tool calls)."""
    pytest.importorskip("trl")
    from trl.chat_template_utils import qwen2_5_chat_template

    tok = build_chatml_tokenizer(vocab_size=600)
    tok.chat_template = qwen2_5_chat_template
    return tok


@pytest.fixture()
def tool_model(tool_tokenizer):
    """A tiny random Llama for ``tool_tokenizer`` (fresh per test: the trainer updates it)."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return build_tiny_llama(len(tool_tokenizer), seed=0)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A command started on 127.0.0.1 for a test, stopped after it (its output kept for failures)."""

    def __init__(self, argv, port: int, health: str = "/health", timeout: float = 60.0, env=None):
        import os
        import subprocess
        import tempfile
        import time
        import urllib.request

        self.port, self.url = port, f"http://127.0.0.1:{port}"
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - lives as long as the server
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(self.url + health, timeout=2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"server did not answer {health} within {timeout:g} s:\n{self.output()}") from None
                time.sleep(0.2)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait()


@pytest.fixture()
def openenv_server():
    """Starts ``mtrl-gym openenv-serve ENV`` (the real CLI) and stops it after the test."""
    pytest.importorskip("openenv", reason='needs openenv: pip install "mtrl-gym[openenv]"')
    started = []

    def start(env_id: str = "mtrl/Wordle-v0", *extra: str) -> Server:
        port = free_port()
        server = Server([sys.executable, "-m", "mtrl_gym.cli", "openenv-serve", env_id, "--port", str(port),
                         *extra], port)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def wordle_script() -> list[str]:
    """The scripted replies of the cross-adapter game: bad text, a miss, the solve (reward 1.45)."""
    from mtrl_gym.adapters.episode import tool_call_text

    return [BAD_TEXT_UTF8] + [tool_call_text("guess_word", {"guess": g}) for g in WORDLE_GUESSES]


class ScriptedTextSampler:
    """A sampler (mtrl_gym's interface) whose turn ``i`` of every episode is ``texts[i]`` plus EOS."""

    name = "scripted"

    def __init__(self, tokenizer, texts):
        self.tok, self.texts, self.turns = tokenizer, list(texts), {}

    def sample(self, requests):
        from mtrl_gym.rollout.samplers.base import SampleResult

        out = []
        for req in requests:
            turn = self.turns.get(req.session_id, 0)
            self.turns[req.session_id] = turn + 1
            ids = self.tok.encode(self.texts[min(turn, len(self.texts) - 1)], add_special_tokens=False)
            ids = ids[:req.params.max_new_tokens - 1] + [self.tok.eos_token_id]
            out.append(SampleResult(ids, [-0.5] * len(ids), "stop", prompt_tokens=len(req.prompt_ids)))
        return out

    def end_session(self, session_id):
        pass


class ScriptedGeneration:
    """Stands in for a GRPOTrainer's generation in rollout_func tests, through TRL's public
    surface (``use_vllm``, ``vllm_generation.generate``, ``processing_class``, ``args``): the
    same scripted reply for every prompt of call ``i`` (the engine samples one turn of all
    live episodes per call). ``calls`` counts generation calls (also through TRL's older
    private ``_generate_single_turn``, which earlier adapters used)."""

    use_vllm = True
    accelerator = None

    def __init__(self, tokenizer, texts, max_completion_length: int = 256):
        from types import SimpleNamespace

        self.processing_class = tokenizer
        self.texts, self.calls = list(texts), 0
        self.args = SimpleNamespace(temperature=1.0, max_completion_length=max_completion_length)
        self.temperature, self.max_completion_length = 1.0, max_completion_length
        self.eos_token_ids = [tokenizer.eos_token_id]
        self.vllm_generation = SimpleNamespace(generate=self._generate)

    def _completion(self) -> list[int]:
        text = self.texts[min(self.calls, len(self.texts) - 1)]
        self.calls += 1
        return self.processing_class.encode(text, add_special_tokens=False) + [self.processing_class.eos_token_id]

    def _generate(self, prompts, images, num_generations, profiler=None):
        ids = self._completion()
        return list(prompts), [list(ids) for _ in prompts], [[[-0.5]] * len(ids) for _ in prompts], None

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
        ids = self._completion()
        return [list(ids) for _ in prompt_ids], None


def verifiers_eval_command() -> list[str] | None:
    """``vf-eval`` of the venv that has verifiers: ``$MTRL_GYM_VERIFIERS_VENV/bin/vf-eval``, else
    this venv's when verifiers is importable here, else ``None``."""
    import os
    import shutil

    venv = os.environ.get("MTRL_GYM_VERIFIERS_VENV")
    if venv:
        path = Path(venv) / "bin" / "vf-eval"
        if not path.exists():
            raise RuntimeError(f"MTRL_GYM_VERIFIERS_VENV={venv} has no bin/vf-eval")
        return [str(path)]
    if importlib.util.find_spec("verifiers") is not None:
        found = shutil.which("vf-eval", path=str(Path(sys.executable).parent))
        return [found] if found else None
    return None


def run_vf_eval(tmp_path, script: list[str], *taskset_args: str, timeout: float = 300.0) -> list[dict]:
    """Run verifiers' own ``vf-eval`` on the mtrl_gym taskset against the scripted stand-in
    endpoint (started here on 127.0.0.1); returns the traces it wrote."""
    import json
    import os
    import subprocess

    command = verifiers_eval_command()
    if command is None:
        pytest.skip('needs verifiers: pip install "mtrl-gym[verifiers]" (or set MTRL_GYM_VERIFIERS_VENV)')
    bin_dir = str(Path(command[0]).parent)
    env = {"PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    if shutil_which("uv", env["PATH"]) is None:
        pytest.skip("verifiers builds its harness with uv: pip install uv")
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps(script))
    port = free_port()
    standin = Server([sys.executable, str(Path(__file__).with_name("openai_standin.py")), str(port), str(script_path)],
                     port, health="/health")
    out = tmp_path / "vf-out"
    try:
        proc = subprocess.run([*command, "mtrl-gym-verifiers", *taskset_args, "--model", "scripted",
                               "--client.base-url", f"{standin.url}/v1", "--client.api-key-var", "NONE",
                               "-n", "1", "-r", "1", "--output-dir", str(out), "--no-push"],
                              capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, **env, "PYTHONPATH": _pythonpath()})
    finally:
        standin.stop()
    if proc.returncode != 0:
        raise AssertionError(f"vf-eval failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    traces = []
    for path in out.glob("*/traces.jsonl"):
        for line in path.read_text().splitlines():
            traces += json.loads(line)["traces"]
    return traces


def shutil_which(name: str, path: str):
    import shutil

    return shutil.which(name, path=path)


def _pythonpath() -> str:
    """This checkout first, so the vf-eval subprocess imports the mtrl_gym under test."""
    import os

    root = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH", "")
    return root + (os.pathsep + rest if rest else "")
