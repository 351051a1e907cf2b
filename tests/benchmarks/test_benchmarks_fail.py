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


def test_step_floor_rates_are_measured_on_the_model_and_a_missed_limit_exits_1(monkeypatch, chatml_tokenizer):
    from tiny_models import build_tiny_llama

    bench = _load("step_floor")
    model = build_tiny_llama(len(chatml_tokenizer))  # its own copy: train_rate backpropagates
    model.train()
    for p in model.parameters():
        p.requires_grad_(True)
    rates = [bench.decode_rate(model, 4, 32, repeats=2), bench.prefill_rate(model, 16, 64, repeats=1),
             bench.train_rate(model, 24, 4, 96, repeats=1)]
    assert all(r > 0 and r == r and r != float("inf") for r in rates), rates
    assert all(p.grad is None for p in model.parameters())  # the rate runs leave no gradient behind
    seen = []
    monkeypatch.setattr(bench, "run_case", lambda name, steps, ratio, extra: seen.append((name, extra)) or False)
    monkeypatch.setattr(sys, "argv", ["step_floor.py", "--case", "cpu", "--set", "micro_batch_tokens=2048"])
    with pytest.raises(SystemExit) as stop:
        bench.main()
    assert stop.value.code == 1 and seen == [("cpu", ["micro_batch_tokens=2048"])]


def test_wordle_env_benchmark_fails_below_its_steps_floor(monkeypatch):
    bench = _load("wordle_env")
    monkeypatch.setattr(bench, "_round", lambda env, actions, episodes, seed: (5_000.0, 30_000.0))
    monkeypatch.setattr(bench, "_FLOOR_MISSES", [])
    bench.bench_steps(episodes=2, rounds=1, seed=0)
    assert bench._FLOOR_MISSES and "5,000 < floor 20,000" in bench._FLOOR_MISSES[0]


def test_the_projection_benchmark_fails_a_copy_that_costs_time_changes_a_game_or_measures_nothing(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # it shares precision_cpu's helpers
    bench = _load("sampler_head_cpu")
    games = [["a game"], ["another"]]
    view, copy = (14.0, 96, games, [True, False]), (8.0, 96, games, [True, True])
    assert bench.verdict("bfloat16", view, copy) == []
    assert bench.verdict("float32", view, (14.5, 96, games, [True])) == []  # within the noise allowance
    assert bench.verdict("float32", view, (16.0, 96, games, [True])) == ["the copy is slower"]
    changed = (8.0, 96, [["a game"], ["changed"]], [True])
    assert bench.verdict("bfloat16", view, changed) == ["a game differs"]
    assert bench.verdict("float32", view, changed) == []  # float32 may round differently: reported, not failed
    assert bench.verdict("bfloat16", (14.0, 96, games, [True, True]), copy) == [
        "the view side never strided the projection's input: nothing was measured"]
    assert bench.verdict("bfloat16", view, (8.0, 96, games, [False])) == ["the copy side left a strided input"]
