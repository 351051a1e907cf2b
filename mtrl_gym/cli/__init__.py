"""The ``mtrl-gym`` command line.

Each sub-command lives in its own module in this package and defines
``register(subparsers)``, which adds its parser and sets ``func`` to the function that
runs it (``func(args) -> int`` exit status). Add a command by adding its module name to
:data:`COMMANDS`. Modules are imported only when the command line is built, and heavy
dependencies only when a command runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from mtrl_gym.error import Error

__all__ = ["main", "build_parser", "COMMANDS"]

#: Sub-command modules, in the order ``mtrl-gym --help`` lists them.
COMMANDS: list[str] = ["play", "solve", "envs", "eval", "rollout", "demos", "sft", "train", "serve", "make_dataset",
                      "openenv", "check", "export"]


def build_parser() -> argparse.ArgumentParser:
    from mtrl_gym import __version__

    parser = argparse.ArgumentParser(
        prog="mtrl-gym",
        description="Multi-turn RL for LLM agents: environments, training and evaluation.")
    parser.add_argument("--version", action="version", version=f"mtrl-gym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"mtrl_gym.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except Error as e:  # our errors carry a message written for the user
        print(f"mtrl-gym {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"mtrl-gym {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
