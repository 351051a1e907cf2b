"""The adapter extras give version ranges (not pins), and CI tests each range's lowest version."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="needs Python 3.11 (tomllib)")
packaging = pytest.importorskip("packaging.requirements")

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
#: The extra of each adapter framework.
FRAMEWORKS = {"trl": "trl", "openenv": "openenv", "verifiers": "verifiers"}


def _ranges() -> dict[str, Requirement]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    out = {}
    for extra, name in FRAMEWORKS.items():
        [req] = [Requirement(r) for r in extras[extra] if Requirement(r).name == name]
        out[name] = req
    return out


def _lowest() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / ".ci" / "adapters-lowest.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            [spec] = req.specifier
            assert spec.operator == "==", line
            pins[req.name] = Version(spec.version)
    return pins


def test_adapter_extras_are_ranges_with_a_lower_and_an_upper_bound():
    for name, req in _ranges().items():
        ops = {s.operator for s in req.specifier}
        assert ops == {">=", "<"}, f"{name}: give a range like >=1.8,<2, got {req.specifier}"


def test_ci_lowest_versions_are_the_ranges_lower_bounds():
    lowest = _lowest()
    for name, req in _ranges().items():
        [low] = [Version(s.version) for s in req.specifier if s.operator == ">="]
        assert lowest.get(name) == low, f".ci/adapters-lowest.txt must pin {name}=={low}"
        assert req.specifier.contains(lowest[name])


def test_installed_frameworks_are_in_range():
    """In each CI venv the installed framework is in its range (the lowest venv: exactly the lowest)."""
    checked = 0
    for name, req in _ranges().items():
        try:
            installed = Version(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            continue
        checked += 1
        assert req.specifier.contains(installed), f"{name} {installed} is outside {req.specifier}"
        if os.environ.get("MTRL_GYM_ADAPTERS_LOWEST"):
            assert installed == _lowest()[name], f"the lowest venv has {name} {installed}"
    if not checked:
        pytest.skip("no adapter framework installed here")
