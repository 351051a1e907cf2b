"""pytest integration: a test file of three lines checks an env's whole text contract.

::

    # test_my_env.py
    from mtrl_gym.testing import env_contract_tests
    test_my_env = env_contract_tests("my_pkg/MyEnv-v0", secret=lambda env: env.unwrapped.answer)

pytest then runs one test per check (``gymnasium``, ``corpus``, ``determinism``, ``leak``;
``pettingzoo`` instead of ``gymnasium`` for a multi-agent env), each failing with the check's
line (the failing example shrunk by hypothesis included); a check the kit could not run
(``leak`` without a secret: no ``secret=`` and no profile hook) is reported as skipped, with the reason. Installed as a pytest plugin (entry point ``pytest11``),
this module also gives every test the fixture ``check_text_env``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mtrl_gym.testing.check import CheckReport
from mtrl_gym.testing.check import check_text_env as _check_text_env
from mtrl_gym.testing.check import is_pettingzoo

__all__ = ["env_contract_tests"]


def env_contract_tests(env_id: str, *, secret: Callable[[Any], Any] | str | None = None,
                       **kwargs: Any) -> Callable[..., None]:
    """A pytest test function, parametrised by check, running :func:`check_text_env` once on
    ``env_id`` (extra keyword arguments go to it, e.g. ``imports=["my_pkg"]``)."""
    import pytest

    first = "pettingzoo" if is_pettingzoo(env_id) else "gymnasium"
    names = [first, "corpus", "determinism", "leak"]
    cache: dict[str, CheckReport] = {}

    @pytest.mark.parametrize("check", names)
    def test_env_contract(check: str) -> None:
        if "report" not in cache:
            cache["report"] = _check_text_env(env_id, secret=secret, **kwargs)
        report = cache["report"]
        if check in report.skipped:
            pytest.skip(f"{env_id}: {check}: {report.skipped[check]}")
        result = next(c for c in report.checks if c.name == check)
        assert result.ok, f"{env_id}: {result.line()}"

    test_env_contract.__name__ = f"test_env_contract_{env_id.replace('/', '_').replace('-', '_')}"
    return test_env_contract


try:  # the fixture exists only where pytest does
    import pytest as _pytest

    @_pytest.fixture
    def check_text_env() -> Callable[..., CheckReport]:
        """:func:`mtrl_gym.testing.check_text_env`, as a fixture."""
        return _check_text_env
except ImportError:  # pragma: no cover
    pass
