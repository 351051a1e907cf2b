"""Choosing a function of the GRPO package by name, and checking the options it is given.

The advantage estimators, losses and aggregations are tables of functions selected by name
(:data:`~mtrl_gym.trainers.grpo.advantages.ADVANTAGE_ESTIMATORS`, ...); the options of a
selected function are its keyword-only parameters. Both checks live here, so every table
reports an unknown name or option the same way.

>>> lookup_by_name({"grpo": 1, "rloo": 2}, "rlo", "advantage estimator")
Traceback (most recent call last):
...
mtrl_gym.error.ConfigError: unknown advantage estimator 'rlo'. Did you mean 'rloo', 'grpo'? Valid: grpo, rloo
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["lookup_by_name", "check_options"]


def lookup_by_name(table: Mapping[str, Any], name: str, kind: str) -> Any:
    """``table[name]``, or a ConfigError naming ``name``, close matches and every valid name.

    Shared by the selection functions of this package (advantages, losses, aggregations).
    """
    if isinstance(name, str) and name in table:
        return table[name]
    key = str(name).replace("-", "_").lower()
    close = [n for n in table if key and key in n]  # "seq_mean" -> "seq_mean_token_mean" first
    close += difflib.get_close_matches(key, list(table), n=3, cutoff=0.5)
    close = list(dict.fromkeys(close))[:3]
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ConfigError(f"unknown {kind} {name!r}.{hint} Valid: {', '.join(sorted(table))}")


def check_options(fn: Callable[..., Any], options: Mapping[str, Any], what: str,
                   reserved: Sequence[str] = ()) -> None:
    """Raise ConfigError when ``options`` are not keyword-only parameters of ``fn``, or when
    a required one is missing. ``reserved`` names keyword-only parameters the caller fills."""
    params = {p.name: p for p in inspect.signature(fn).parameters.values()
              if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in reserved}
    unknown = sorted(set(options) - set(params))
    if unknown:
        accepted = ", ".join(sorted(params)) or "(none)"
        raise ConfigError(f"{what} got unknown option(s) {', '.join(map(repr, unknown))}; "
                          f"it accepts: {accepted}")
    missing = [n for n, p in params.items() if p.default is p.empty and n not in options]
    if missing:
        raise ConfigError(f"{what} needs option(s) {', '.join(map(repr, missing))}")
