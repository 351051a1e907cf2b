"""The adapters without their outside packages: clear install hints, and a light ``import mtrl_gym``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


def test_import_mtrl_gym_imports_no_adapter_or_framework():
    code = ("import sys, mtrl_gym, mtrl_gym.adapters, mtrl_gym.adapters.episode; "
            "print(sorted(m for m in ('torch', 'trl', 'verifiers', 'openenv', 'mtrl_gym.adapters.trl') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.skipif(importlib.util.find_spec("verifiers") is not None, reason="verifiers is installed here")
def test_verifiers_adapter_names_its_extra():
    from mtrl_gym.error import DependencyNotInstalled

    with pytest.raises(DependencyNotInstalled, match=r'pip install "mtrl-gym\[verifiers\]"'):
        importlib.import_module("mtrl_gym.adapters.verifiers")


@pytest.mark.skipif(importlib.util.find_spec("openenv") is not None, reason="openenv is installed here")
def test_openenv_serve_names_its_extra():
    proc = subprocess.run([sys.executable, "-m", "mtrl_gym.cli", "openenv-serve", "mtrl/Wordle-v0"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert 'openenv is not installed. Install it with: pip install "mtrl-gym[openenv]"' in proc.stderr


def test_openenv_serve_rejects_bad_arguments():
    proc = subprocess.run([sys.executable, "-m", "mtrl_gym.cli", "openenv-serve", "mtrl/Wordle-v0",
                           "--env-kwargs", "[1]"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "--env-kwargs must be a JSON object, got '[1]'" in proc.stderr
