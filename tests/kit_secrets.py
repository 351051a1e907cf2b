"""What the agent must never see before the end, for every env id our suite runs through the kit.

``SECRETS`` (single-agent ids) and ``SEAT_SECRETS`` (multi-agent ids, per seat) are the
``secret=`` extractors of :func:`mtrl_gym.testing.check_text_env`. An id without one has
nothing the kit can search for: its answer is named in the prompt by design (Weather's
"which of Oslo, Bergen and Rome") or too short to be told from innocent text.
"""

from __future__ import annotations

from typing import Any

import gymnasium

from mtrl_gym.registry import list_envs


def _is_sop(env_id: str) -> bool:
    entry = gymnasium.spec(env_id).entry_point
    return isinstance(entry, str) and entry.startswith("mtrl_gym.envs.sop.")


#: Every SOP domain id (a domain package of mtrl_gym.envs.sop).
SOP_IDS = [e for e in list_envs() if _is_sop(e)]


def sop_secret(env: gymnasium.Env) -> Any:
    """The expected answer object: its JSON text must not be in an observation, nor the object in ``info``."""
    return env.unwrapped.expected_answer


SECRETS = {"mtrl/Wordle-v0": lambda env: env.unwrapped._answer,
           "mtrl/Wordle-Hard-v0": lambda env: env.unwrapped._answer,
           "mtrl/Sandbox-Orders-v0": lambda env: env.unwrapped.task["answer"]["order_id"],
           **dict.fromkeys(SOP_IDS, sop_secret)}


def duel_secret(env: Any) -> dict[str, str]:
    """Both players race to one word: neither may see it before the final cycle."""
    return {seat: env.game._secret for seat in env.possible_agents}


def call_secret(env: Any) -> dict[str, list[Any]]:
    """The agent never sees the caller's details unasked (the kit's customer seat only plays corpus
    text, never a fact) nor the expected answer; the customer never sees the world's records."""
    world = env.game.console.state
    records = [world["auth"]["session_token"], f"TKT-{world['ticket_number']}"]
    if world["auth"]["passcode"] != world["inputs"]["passcode"]:
        records.append(world["auth"]["passcode"])  # the real passcode, when the caller's is wrong
    expected = env.game.console.expected_answer
    facts = [env.game.facts[k] for k in ("caller_name", "passcode", "account_id")]
    return {"agent": [*facts, expected], "customer": [*records, expected]}


SEAT_SECRETS = {"mtrl/WordleDuel-v0": duel_secret, "mtrl/SOP-CustomerCall-v0": call_secret}
