"""One game digest per fresh interpreter: the same seeds must give the same games under any
``PYTHONHASHSEED`` (shared by the per-env test modules)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

_SCRIPT = """
import json, hashlib, sys
from mtrl_gym.envs.multiagent import policies
from mtrl_gym.registry import make_multiagent
env_id, seats, seeds = json.loads(sys.argv[1])
env = make_multiagent(env_id, parallel=True)
out = []
for seed in seeds:
    players = {seat: policies.reference_policy(env, seat, name) for seat, name in seats.items()}
    r = policies.play_game(env, players, seed=seed)
    out.append(json.dumps([r["rewards"], r["infos"], r["texts"]], sort_keys=True, default=str))
print(hashlib.sha256("".join(out).encode()).hexdigest())
"""


def game_digests(env_id: str, seats: Mapping[str, str], seeds: Sequence[int], hash_seeds: Sequence[str]) -> set[str]:
    """The digests of ``seeds``' games of ``env_id`` (seat -> reference policy name), one
    fresh interpreter per hash seed; a deterministic env gives a single digest."""
    import json

    arg = json.dumps([env_id, dict(seats), list(seeds)])
    digests = set()
    for hash_seed in hash_seeds:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", _SCRIPT, arg], env=env, capture_output=True, text=True,
                              check=True)
        digests.add(done.stdout.strip())
    return digests
