"""docs/scaling.md stays true to the code: its commands parse and resolve, its config table
states the real defaults, and the pieces it names exist."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from mtrl_gym.trainers.grpo.config import GRPOConfig

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "scaling.md").read_text(encoding="utf-8")


def commands(prefix: str) -> list[list[str]]:
    lines = [line for block in re.findall(r"```bash\n(.*?)```", DOC, re.S) for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith(prefix)]


def test_every_train_command_resolves_to_a_valid_config(capsys):
    pytest.importorskip("yaml")
    from mtrl_gym.cli import main

    found = commands("mtrl-gym train ")
    assert len(found) == 3
    for args in found:
        assert main([*args, "--print-config"]) == 0, args
    out = capsys.readouterr().out
    assert "name: ray" in out and "name: async" in out and "max_staleness: 2" in out
    assert "address: auto" in out and "reload_dir: /shared/adapters" in out


def test_the_serve_command_parses():
    from mtrl_gym.cli import build_parser

    (args,) = commands("mtrl-gym serve ")
    parsed = build_parser().parse_args(args)
    assert parsed.sampler == "vllm" and json.loads(parsed.sampler_kwargs)["sync"] == "lora"


def test_the_config_table_states_the_defaults():
    from mtrl_gym.rollout.sources.factory import SOURCES

    assert GRPOConfig().source == {"name": "local"}
    rows = re.findall(r"^\| `(\w+)\.(\w+)` \| `([^`]+)` \|", DOC, re.M)
    assert {f"{kind}.{name}" for kind, name, _ in rows} == {"async.max_staleness", "async.source", "ray.address",
                                                            "ray.workers", "ray.worker_retries"}
    for kind, name, default in rows:
        assert json.loads(default) == getattr(SOURCES[kind].options(), name), name
