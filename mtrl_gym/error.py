"""Exceptions raised by mtrl_gym.

Every exception the library raises on purpose derives from :class:`Error`, so callers can
catch one type. Messages name the bad value and say how to fix it.

Bad *model text* is never an exception: environments turn it into an observation and an
``info`` flag (see docs/architecture.md). These exceptions are for programming and configuration
errors: an unknown env id, a broken task file, a missing optional dependency.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "InvalidTask",
    "DatasetError",
    "DependencyNotInstalled",
    "RolloutError",
    "UnknownEnv",
    "ConfigError",
    "CassetteError",
    "SamplerError",
    "ReplayMismatch",
]


class Error(Exception):
    """Base class of every exception mtrl_gym raises on purpose."""


class InvalidTask(Error, ValueError):
    """A task row (or ``reset`` option) does not describe a valid task for this env."""


class DatasetError(Error, ValueError):
    """A task file is unreadable or one of its rows is broken.

    The message names the file, the line (or row) and the field.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.path = path
        self.line = line
        self.field = field


class DependencyNotInstalled(Error, ImportError):
    """An optional dependency is missing; the message names the pip extra to install."""

    def __init__(self, package: str, extra: str | None = None, hint: str | None = None):
        if hint is None:
            hint = (f'pip install "mtrl-gym[{extra}]"' if extra else f"pip install {package}")
        super().__init__(f"{package} is not installed. Install it with: {hint}")
        self.package = package
        self.extra = extra


class UnknownEnv(Error, LookupError):
    """An environment id is not registered; the message suggests close matches."""


class ConfigError(Error, ValueError):
    """A configuration value is invalid; the message names the field, the value and the fix."""


class CassetteError(Error, ValueError):
    """A tool cassette is corrupt, of the wrong version, or a strict replay missed a call."""


class SamplerError(Error, RuntimeError):
    """A sampler could not produce tokens (endpoint down, model failure)."""


class RolloutError(Error, RuntimeError):
    """No batch of rollouts could be produced: the background producer failed, or no rollout
    worker could be started. (One failed episode is never an exception: it is a trajectory.)"""


class ReplayMismatch(Error, AssertionError):
    """A replayed episode differs from its recording (the env is not deterministic).

    The message names the step, the field and both values.
    """
