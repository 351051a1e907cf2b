"""Shared pytest fixtures.

Trainer tests never download anything: they use a small byte-level BPE tokenizer trained
here in a few milliseconds (with SmolLM2's ChatML chat template and special tokens) and
tiny randomly initialised Llama models built from a config. Both are deterministic.
"""

from __future__ import annotations

import pytest

from tiny_models import build_chatml_tokenizer, build_tiny_llama


def load_example(name: str):
    """The script ``examples/<name>.py`` as a module (examples are files, not a package)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recipe():
    """examples/train_wordle_cpu.py, the CPU recipe."""
    return load_example("train_wordle_cpu")


@pytest.fixture(scope="module")
def probe():
    """examples/wordle_board_probe.py."""
    return load_example("wordle_board_probe")


@pytest.fixture(scope="module")
def spelling_prior():
    """examples/wordle_spelling_prior.py."""
    return load_example("wordle_spelling_prior")


@pytest.fixture(scope="session")
def chatml_tokenizer():
    """Small BPE tokenizer with the SmolLM2 ChatML template (session-wide; do not mutate)."""
    pytest.importorskip("transformers")
    return build_chatml_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(chatml_tokenizer):
    """Tiny random Llama matching :func:`chatml_tokenizer` (session-wide; eval mode, do not train)."""
    torch = pytest.importorskip("torch")
    # Tiny matrices run far faster on one thread, and a shared CI machine stays responsive.
    torch.set_num_threads(1)
    return build_tiny_llama(len(chatml_tokenizer))


def pytest_ignore_collect(collection_path, config):
    """conftest files are plugins, not test modules: keep ``--doctest-modules`` from importing
    them a second time under the shared name ``conftest`` (one per test folder)."""
    return True if collection_path.name == "conftest.py" else None
