"""``mtrl-gym check``: the text-env contract checks of :mod:`mtrl_gym.testing.check` on env ids.

    mtrl-gym check mtrl/Wordle-v0
    mtrl-gym check my_pkg/MyEnv-v0 --import my_pkg --bound-ms 50
    mtrl-gym check mtrl/WordleDuel-v0              # a PettingZoo env: the checks per seat
    mtrl-gym check my_pkg.my_game                  # a module with PettingZoo's env() / parallel_env()
    mtrl-gym check --all                           # every registered id, multi-agent ones included
    mtrl-gym check my_pkg/MyEnv-v0 --import my_pkg --secret my_pkg.secrets:answer   # the leak check

Each check prints one line (PASS or FAIL), and each check that did not run a SKIP line with
the reason: the ``leak`` check runs with ``--secret`` or with the env profile's ``secret`` hook.
"""

from __future__ import annotations

import importlib
import sys


def register(sub) -> None:
    p = sub.add_parser("check", help="check an env's text contract (any text, determinism, JSON info)",
                       description="Run mtrl_gym.testing.check_text_env on env ids: one line per check, exit 1 "
                                   "on a failure.")
    p.add_argument("env", nargs="*", metavar="ENV_ID", help="env ids to check (or modules of PettingZoo envs)")
    p.add_argument("--all", action="store_true", help="check every registered mtrl env, multi-agent ones included")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import this module first (where your env registers itself); repeatable")
    p.add_argument("--secret", default=None, metavar="DOTTED.PATH",
                   help="secret(env) -> what the agent must not see before the end, as a dotted path "
                        "(my_pkg.secrets:answer or my_pkg.secrets.answer), or 'profile'; default: the env "
                        "profile's secret hook, if it has one (else the leak check is skipped, and says so)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--corpus-size", type=int, default=20_000,
                   help="characters per adversarial case (the cases also reach the action space's max_length)")
    p.add_argument("--bound-ms", type=float, default=None, help="fail a step slower than this")
    p.add_argument("--shrink-examples", type=int, default=100,
                   help="hypothesis examples per pass when shrinking a failing example (0: report it unshrunk)")
    p.add_argument("--shrink-seconds", type=float, default=10.0, help="time limit of one shrinking search")
    p.set_defaults(func=run)


def run(args) -> int:
    from mtrl_gym.error import ConfigError
    from mtrl_gym.registry import list_envs, list_multiagent_envs, spec
    from mtrl_gym.testing.check import check_text_env, is_pettingzoo

    for module in args.imports:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError(f"--import {module}: {e}") from None
    envs = list(args.env) + (list_envs() + list_multiagent_envs() if args.all else [])
    if not envs:
        raise ConfigError("give an env id (e.g. mtrl/Wordle-v0) or --all")
    import gymnasium

    for env_id in envs:
        if env_id not in gymnasium.registry and not is_pettingzoo(env_id):
            spec(env_id)  # unknown ids: an error with close matches
    failed = 0
    for env_id in envs:
        report = check_text_env(env_id, secret=args.secret, seed=args.seed, corpus_size=args.corpus_size, imports=args.imports,
                                step_bound_s=args.bound_ms / 1e3 if args.bound_ms else None,
                                shrink_examples=args.shrink_examples, shrink_deadline_s=args.shrink_seconds)
        print(report, flush=True)
        failed += not report.ok
    print(f"{len(envs) - failed} of {len(envs)} env(s) pass", file=sys.stderr)
    return 1 if failed else 0

