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
        self.log = tempfile.TemporaryFile(mode="w+")
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
                    raise RuntimeError(f"server did not answer {health} within {timeout:g} s:\n{self.output()}")
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
