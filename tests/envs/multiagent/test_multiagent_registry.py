"""Multi-agent ids: make, errors with close matches, the CLI listing, no heavy imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mtrl_gym import registry
from mtrl_gym.error import UnknownEnv


def test_make_multiagent_gives_both_apis():
    pytest.importorskip("pettingzoo")
    from pettingzoo import AECEnv, ParallelEnv

    for env_id in registry.list_multiagent_envs():
        assert isinstance(registry.make_multiagent(env_id), AECEnv)
        assert isinstance(registry.make_multiagent(env_id, parallel=True), ParallelEnv)
    assert registry.make_multiagent("mtrl/WordleDuel-v0", max_cycles=3).max_cycles == 3


def test_unknown_ids_suggest_close_ones():
    with pytest.raises(UnknownEnv, match=r"unknown multi-agent environment id 'mtrl/WordleDuell-v0'\. Did you mean "
                                         r"'mtrl/WordleDuel-v0'.*list_multiagent_envs\(\) lists all 2 ids"):
        registry.make_multiagent("mtrl/WordleDuell-v0")
    with pytest.raises(UnknownEnv, match="It is a multi-agent env: make it with mtrl_gym.registry.make_multiagent"):
        registry.make("mtrl/WordleDuel-v0")
    assert registry.is_multiagent("mtrl_gym:mtrl/WordleDuel-v0") and not registry.is_multiagent("mtrl/Wordle-v0")
    assert not set(registry.list_multiagent_envs()) & set(registry.list_envs())


def test_cli_lists_them_and_import_stays_light():
    out = subprocess.run([sys.executable, "-m", "mtrl_gym.cli", "envs"], capture_output=True, text=True,
                         check=True).stdout
    assert "mtrl/WordleDuel-v0  (multi-agent, PettingZoo)" in out and "mtrl/SOP-CustomerCall-v0" in out
    code = "import sys, mtrl_gym; print('pettingzoo' in sys.modules, 'torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.split() == ["False", "False"]
