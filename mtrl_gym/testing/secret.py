"""Naming the secret of the kit's ``leak`` check so that another process can read it too.

A secret extractor is ``secret(env) -> value`` (see :mod:`mtrl_gym.testing.leak`). The kit
takes one of:

* a callable (``lambda env: env.unwrapped.answer``): used here; a module-level function is
  also found again by name in the fresh interpreter of the determinism check, a lambda is not;
* a dotted path, ``"my_pkg.secrets:answer"`` or ``"my_pkg.secrets.answer"`` (what
  ``mtrl-gym check --secret`` takes);
* nothing: the env profile's ``secret`` hook (:class:`~mtrl_gym.envs.profile.EnvProfile`),
  when the env registers one; else the leak check is skipped, and the report says so.

:func:`resolve_secret` turns any of these into a :class:`Secret`: the function and the
reference (:attr:`Secret.ref`) by which :func:`load_secret` finds it again in another process.

>>> s = resolve_secret("string:capwords", None)
>>> s.ref, s.source, s.fn("an env")
('string:capwords', 'string:capwords', 'An Env')
>>> resolve_secret(None, "mtrl/Wordle-v0").ref, resolve_secret(None, "mtrl/Sandbox-Shop-v0")
('profile', None)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["Secret", "resolve_secret", "load_secret", "profile_secret", "PROFILE"]

#: The reference of an env profile's ``secret`` hook.
PROFILE = "profile"


@dataclass(frozen=True)
class Secret:
    """A resolved secret extractor."""

    fn: Callable[[Any], Any]
    """``fn(env) -> value``, read after each reset."""
    ref: str | None
    """How another process finds it (a dotted path, or :data:`PROFILE`); None: it cannot (a lambda)."""
    source: str
    """Where it came from, for the report: the path, ``the env profile``, or ``a callable``."""


def profile_secret(env_id: Any) -> Callable[[Any], Any] | None:
    """The ``secret`` hook of ``env_id``'s profile (None: it has none, or ``env_id`` has no profile)."""
    from mtrl_gym.envs.profile import profile_of

    try:
        return profile_of(env_id).secret
    except Exception:  # noqa: BLE001 - not a registered id (a PettingZoo module, a typo reported elsewhere)
        return None


def _import(path: str) -> Callable[[Any], Any]:
    module_name, sep, name = path.partition(":")
    if not sep:
        module_name, _, name = path.rpartition(".")
    if not module_name or not name:
        raise ConfigError(f"secret {path!r}: give a dotted path to a function, e.g. 'my_pkg.secrets:answer' "
                          "or 'my_pkg.secrets.answer'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"secret {path!r}: cannot import {module_name!r} ({e}); is it on PYTHONPATH?") from None
    target: Any = module
    for part in name.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ConfigError(f"secret {path!r}: {module_name!r} has no {name!r}")
    if not callable(target):
        raise ConfigError(f"secret {path!r} is a {type(target).__name__}, not a function of the env")
    return target


def _ref_of(fn: Callable[[Any], Any]) -> str | None:
    """``module:qualname`` of a function another interpreter can import; None for a lambda or a closure."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    try:
        return f"{module}:{qualname}" if _import(f"{module}:{qualname}") is fn else None
    except ConfigError:
        return None


def resolve_secret(spec: Any, env_id: Any) -> Secret | None:
    """The :class:`Secret` of ``spec`` (a callable, a dotted path, or None: the profile hook of
    ``env_id``); None when nothing names one."""
    if spec is None:
        hook = profile_secret(env_id)
        return Secret(hook, PROFILE if isinstance(env_id, str) else None, "the env profile") if hook else None
    if isinstance(spec, str):
        if spec == PROFILE:
            return resolve_secret(None, env_id) or _no_hook(env_id)
        return Secret(_import(spec), spec, spec)
    if callable(spec):
        return Secret(spec, _ref_of(spec), "a callable")
    raise ConfigError(f"`secret` must be a function of the env, a dotted path to one or None, got {spec!r}")


def _no_hook(env_id: Any) -> Secret:
    raise ConfigError(f"secret 'profile': {env_id}'s profile has no `secret` hook; give a dotted path "
                      "(e.g. --secret my_pkg.secrets:answer)")


def load_secret(ref: str, env_id: str) -> Callable[[Any], Any]:
    """The extractor of a :attr:`Secret.ref` of ``env_id`` (in a fresh interpreter)."""
    if ref == PROFILE:
        return profile_secret(env_id) or _no_hook(env_id)
    return _import(ref)
