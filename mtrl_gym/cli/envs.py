"""``mtrl-gym envs``: list the registered environment ids."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("envs", help="list the registered environment ids")
    p.set_defaults(func=run)


def run(args) -> int:
    from mtrl_gym.registry import list_envs

    for env_id in list_envs():
        print(env_id)
    return 0
