"""The embedded SmolLM2-135M-Instruct through ``mtrl-gym eval`` (slow: loads the real model)."""

from __future__ import annotations

import json

import pytest

from mtrl_gym.cli import main

pytestmark = pytest.mark.slow


def test_smollm2_base_model_eval_smoke(tmp_path):
    pytest.importorskip("torch")
    import torch

    torch.set_num_threads(1)
    rc = main(["eval", "--model", "smollm2-135m", "--runs", "base:1.0", "base:0.0", "--policy", "solver",
               "--split", "val", "--limit", "2", "-n", "2", "--max-turns", "2", "--max-tokens", "32",
               "--device", "cpu", "--out", str(tmp_path), "--no-mlflow", "--quiet"])
    assert rc == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    for name in ("base:1.0", "base:0.0"):
        run = summary["runs"][name]
        assert run["episodes"] == 4 and run["trajectory"]["failure_rate"] == 0.0
        assert 0 < run["trajectory"]["sampled_tokens"] <= 2 * 32
    first = json.loads((tmp_path / "trajectories" / "base_0.0.jsonl").read_text().splitlines()[0])
    assert first["messages"][0]["role"] == "system" and first["messages"][2]["role"] == "assistant"
    assert first["messages"][2]["content"].strip()  # the model wrote something
