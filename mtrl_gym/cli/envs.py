"""``mtrl-gym envs``: list the registered environment ids."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("envs", help="list the registered environment ids")
    p.set_defaults(func=run)


def run(args) -> int:
    from mtrl_gym.registry import list_envs, list_multiagent_envs

    for env_id in list_envs():
        print(env_id)
    for env_id in list_multiagent_envs():
        print(f"{env_id}  (multi-agent, PettingZoo)")
    return 0
