"""One strict Gymnasium env check for every env test: the checker's warnings are failures.

Gymnasium's ``check_env`` reports most problems as warnings, which pytest would only
collect; :func:`strict_check_env` turns each into an ``AssertionError`` naming it, except
the ones a caller allows explicitly by regex (``allow=``), so an allowance is visible in
the test that needs it.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence

import gymnasium
from gymnasium.utils.env_checker import check_env

__all__ = ["strict_check_env"]


def strict_check_env(env: gymnasium.Env, *, allow: Sequence[str] = ()) -> None:
    """``check_env(env, skip_render_check=True)``; any warning not matched by ``allow`` fails."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    bad = [str(w.message) for w in caught if not any(re.search(a, str(w.message)) for a in allow)]
    assert not bad, f"gymnasium's env checker warned about {type(env.unwrapped).__name__}:\n" + "\n".join(bad)
