"""Issue item 9: a benchmark whose measured side fails exits non-zero."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sampler_benchmark_exits_1_when_a_sub_run_fails(monkeypatch, capsys):
    bench = _load("sampler_cpu")
    monkeypatch.setattr(bench, "_spawn", lambda name, args: {"config": name, "error": "exit 1:\nNo module named x"})
    monkeypatch.setattr(sys, "argv", ["sampler_cpu.py", "--only", "hf", "--skip-grpo"])
    assert bench.main() == 1
    assert "FAILED: hf" in capsys.readouterr().err


def test_sampler_benchmark_exits_1_when_nothing_is_measured():
    proc = subprocess.run([sys.executable, str(BENCH / "sampler_cpu.py"), "--only", "nosuch", "--skip-grpo"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "nothing was measured" in proc.stderr


@pytest.mark.parametrize("script", ["bad_text.py"])
def test_bad_text_benchmark_exits_1_over_its_bound(script):
    proc = subprocess.run([sys.executable, str(BENCH / script), "--env", "mtrl/Sandbox-Shop-v0", "--chars", "2000",
                           "--bound-ms", "0.000001", "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "OVER" in proc.stdout
