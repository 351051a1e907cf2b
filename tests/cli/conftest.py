"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail the test if anything tries to load a model or build the trainer."""
    import mtrl_gym.models as models

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the config was validated")

    monkeypatch.setattr(models, "load", refuse)
    monkeypatch.setattr(models, "load_tokenizer", refuse)
    monkeypatch.delitem(sys.modules, "mtrl_gym.trainers.grpo.trainer", raising=False)
