"""Pins of what a model meets in every SOP domain: the system prompt, the tool schemas (as sent, key
order included) and the first task rows with their worlds. A refactor of the domain kit must leave
them byte for byte; ``scripts/dump_sop_worlds.py --compare`` checks the same over hundreds of seeds.

After an intended change to a domain, regenerate its task files (``mtrl-gym make-dataset``) and
update its digest here: ``python tests/envs/sop/test_sop_pins.py`` prints the current ones.
"""

from __future__ import annotations

import hashlib
import json

import gymnasium
import numpy as np
import pytest

import mtrl_gym  # noqa: F401 - registers the ids
from mtrl_gym.envs.sop import canonical, generate_tasks
from mtrl_gym.registry import list_envs

#: env id -> digest of its system prompt, tool schemas, first four task rows and their worlds.
PINS = {
    "mtrl/SOP-AircraftInspection-v0": "e13031ff25ea6269",
    "mtrl/SOP-ContentFlagging-v0": "840ac702c05b7cde",
    "mtrl/SOP-CustomerService-v0": "ccccaa5bc60bddf2",
    "mtrl/SOP-DangerousGoods-v0": "5a04845f7af45c6b",
    "mtrl/SOP-KYBReview-v0": "85b0c93b2e01e52e",
    "mtrl/SOP-OrderFulfillment-v0": "d872aeda75554173",
    "mtrl/SOP-PackageInspection-v0": "15268b6a16daa0fc",
    "mtrl/SOP-PatientIntake-v0": "ad5e1bfa0899fa04",
    "mtrl/SOP-ReferralAbuse-v0": "164b801224f5f930",
    "mtrl/SOP-SellerEmailIntent-v0": "a3c998b7e12bae89",
    "mtrl/SOP-TrafficSpoofing-v0": "9a6c275c0a80ca7b",
    "mtrl/SOP-VideoAnnotationQA-v0": "5bfafdeb0b8fbdb6",
    "mtrl/SOP-VideoClassification-v0": "93f909348cf61ec8",
}


def digest(env_id: str) -> str:
    env = gymnasium.make(env_id).unwrapped
    rows = generate_tasks(env.domain, 4, seed=0, split="train")
    worlds = [canonical(env.domain.generate(np.random.default_rng(r["seed"]), r["difficulty"])) for r in rows]
    payload = json.dumps([env.system_prompt, json.dumps(env.tool_schemas), canonical(rows), worlds])
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def test_every_sop_domain_is_pinned():
    assert sorted(PINS) == sorted(e for e in list_envs() if e.startswith("mtrl/SOP-"))


@pytest.mark.parametrize("env_id", sorted(PINS))
def test_prompt_tools_and_worlds_are_unchanged(env_id):
    assert digest(env_id) == PINS[env_id], (
        f"{env_id}: its system prompt, tool schemas or generated worlds changed; if that is intended, regenerate "
        "its task files and update PINS (python tests/envs/sop/test_sop_pins.py prints the digests)")


if __name__ == "__main__":
    for env_id in sorted(e for e in list_envs() if e.startswith("mtrl/SOP-")):
        print(f'    "{env_id}": "{digest(env_id)}",')
