"""The wrapper docs: docstring examples run, the example script runs, measured tables hold."""

import re
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.solver import SolverPolicy, format_guess
from mtrl_gym.wrappers import WordleShaping

ROOT = Path(__file__).resolve().parents[2]
def test_public_names_are_exported():
    import mtrl_gym.wrappers as w

    assert sorted(w.__all__) == sorted(set(w.__all__))
    for name in w.__all__:
        assert getattr(w, name) is not None
    assert mtrl_gym_wrappers_via_lazy_import() is w


def mtrl_gym_wrappers_via_lazy_import():
    import mtrl_gym

    return mtrl_gym.wrappers


def test_example_script_runs(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "examples/wordle_wrappers.py"), "--episodes", "2",
                          "--per-turn", "--out", str(tmp_path / "e.jsonl")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "2 episodes recorded" in out.stdout and "replayed identically" in out.stdout


def _mean_shaping(policy, n=200):
    env = WordleShaping(gymnasium.make("mtrl/Wordle-v0"))
    rng = np.random.default_rng(0)
    values = []
    for ep in range(n):
        obs, info = env.reset(seed=ep)
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(policy(obs, info, rng))
            done = terminated or truncated
        values.append(info["reward_components"]["shaping"])
    return float(np.mean(values)), float(np.min(values)), float(np.max(values))


@pytest.mark.slow
def test_measured_shaping_table_in_the_docs():
    text = (ROOT / "docs/wrappers.md").read_text()
    solver, noisy = SolverPolicy(), SolverPolicy(epsilon=0.3, rng=np.random.default_rng(1))
    words = game.allowed_guesses()
    rows = {
        "built-in solver": _mean_shaping(lambda o, i, r: solver(o, i)),
        "solver with 30 % random words": _mean_shaping(lambda o, i, r: noisy(o, i)),
        "random dictionary words": _mean_shaping(lambda o, i, r: format_guess(words[r.integers(len(words))])),
    }
    for label, (mean, lo, hi) in rows.items():
        m = re.search(rf"\| {re.escape(label)}\s*\| (-?\d\.\d\d)\s*\| (-?\d\.\d\d) to (-?\d\.\d\d)", text)
        assert m, label
        assert (float(m.group(1)), float(m.group(2)), float(m.group(3))) == (round(mean, 2), round(lo, 2), round(hi, 2))
