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
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _command_parser(parser, args.command)
        command.error(unrecognized_arguments(command, unknown))
    try:
        return int(args.func(args) or 0)
    except Error as e:  # our errors carry a message written for the user
        print(f"mtrl-gym {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"mtrl-gym {args.command}: interrupted", file=sys.stderr)
        return 130


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(command, parser)
    return parser


def unrecognized_arguments(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """argparse's "unrecognized arguments" message, with the closest flag of ``parser`` for each
    unknown one (an old flat name finds its group: ``--lora-rank`` -> ``--lora.rank``)."""
    from mtrl_gym.config_base import close_names

    flags = {o[2:].replace("-", "_"): o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    hints = []
    for item in unknown:
        flag = item.split("=", 1)[0]
        if flag.startswith("--"):
            negated = flag.startswith("--no-") and f"no_{flag[5:].replace('-', '_')}" not in flags
            close = close_names(flag[5:] if negated else flag, [f for f in flags if not f.startswith("no_")], n=1)
            if close:
                better = flags.get(f"no_{close[0]}", flags[close[0]]) if negated else flags[close[0]]
                hints.append(f"{flag}: did you mean {better}?")
    message = f"unrecognized arguments: {' '.join(unknown)}"
    return message + (f" ({'; '.join(hints)})" if hints else "")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
