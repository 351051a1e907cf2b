"""Fixtures for the sandbox tests."""

from __future__ import annotations

import pytest
from sandbox_api import ApiServer


@pytest.fixture
def api_server():
    """A real JSON API on 127.0.0.1 (see ``sandbox_api.py``), stopped after the test."""
    server = ApiServer()
    try:
        yield server
    finally:
        server.stop()
