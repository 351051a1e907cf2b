"""A small SOP domain for the framework tests (registered as ``test/SOP-Toy-v0`` on import).

Parcels are weighed and inspected; the SOP keeps heavy or fragile parcels for review and
files a disposition whose id the answer must carry.
"""

from __future__ import annotations

from typing import Any

import gymnasium

from mtrl_gym.envs.sandbox import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop import Field, SOPDomain, SOPEnv

SOP = """# Parcel disposition SOP (test domain)

1. Look the parcel up with `get_parcel`.
2. If `weight_kg` is missing, the weight class is "unknown"; otherwise "heavy" when weight_kg >= 20,
   else "light".
3. Keep the parcel for review when it is heavy, fragile, or of unknown weight; otherwise release it.
4. File the disposition with `file_disposition` and report its id.
5. List the parcel's flags (from `get_parcel`) in the answer, any order.
"""


def _parcel(ctx: ToolContext, parcel_id: str) -> dict[str, Any]:
    parcel = ctx.state["parcels"].get(parcel_id.strip().upper())
    if parcel is None:
        raise ToolError(f"no parcel {parcel_id!r}")
    return parcel


@tool
def get_parcel(ctx: ToolContext, parcel_id: str) -> dict:
    """Look up a parcel.

    Args:
        parcel_id: The parcel id, e.g. "P-1".
    """
    return _parcel(ctx, parcel_id)


@tool
def file_disposition(ctx: ToolContext, parcel_id: str, disposition: str) -> dict:
    """File the disposition of a parcel.

    Args:
        parcel_id: The parcel id.
        disposition: "keep" or "release".
    """
    parcel = _parcel(ctx, parcel_id)
    if disposition not in ("keep", "release"):
        raise ToolError(f"disposition must be 'keep' or 'release', got {disposition!r}")
    filing = {"filing_id": f"F-{ctx.state['next_filing']}", "parcel_id": parcel["id"], "disposition": disposition}
    ctx.state["next_filing"] += 1
    ctx.state["filings"].append(filing)
    return filing


@tool
def get_weather(city: str) -> dict:
    """Today's weather in a city.

    Args:
        city: The city name.
    """
    return {"city": city, "sky": "clear"}


class Toy(SOPDomain):
    name = "Toy"
    sop_text = SOP
    output_schema = {
        "weight_class": Field("enum", values=("light", "heavy", "unknown")),
        "keep": Field("bool"),
        "flags": Field("list", item_type="str"),
        "weight_kg": Field("int", nullable=True),
        "filing_id": Field("str"),
    }
    tools = ToolSet([get_parcel, file_disposition, get_weather])
    distractor_tools = ("get_weather",)
    default_difficulty = {"noise": 1, "distractors": True, "flags": 2}

    def check_difficulty(self, difficulty):
        super().check_difficulty(difficulty)
        if not 0 <= difficulty["flags"] <= 3:
            from mtrl_gym.error import ConfigError
            raise ConfigError(f"difficulty knob 'flags' must be in 0..3, got {difficulty['flags']}")

    def generate(self, rng, difficulty):
        weight = None if rng.random() < 0.2 * difficulty["noise"] else int(rng.integers(1, 40))
        flags = sorted(rng.choice(["fragile", "liquid", "perishable"], size=int(rng.integers(0, difficulty["flags"] + 1)),
                                  replace=False).tolist())
        return {"parcels": {"P-1": {"id": "P-1", "weight_kg": weight, "flags": flags}}, "filings": [],
                "next_filing": int(rng.integers(100, 999))}

    def task_inputs(self, world):
        return {"parcel_id": "P-1"}

    def expected(self, world):
        p = world["parcels"]["P-1"]
        wc = "unknown" if p["weight_kg"] is None else ("heavy" if p["weight_kg"] >= 20 else "light")
        keep = wc != "light" or "fragile" in p["flags"]
        return {"weight_class": wc, "keep": keep, "flags": p["flags"], "weight_kg": p["weight_kg"],
                "filing_id": f"F-{world['next_filing']}"}

    def oracle(self, inputs, call):
        p = call("get_parcel", {"parcel_id": inputs["parcel_id"]})
        wc = "unknown" if p["weight_kg"] is None else ("heavy" if p["weight_kg"] >= 20 else "light")
        keep = wc != "light" or "fragile" in p["flags"]
        filing = call("file_disposition", {"parcel_id": p["id"], "disposition": "keep" if keep else "release"})
        return {"weight_class": wc, "keep": keep, "flags": p["flags"], "weight_kg": p["weight_kg"],
                "filing_id": filing["filing_id"]}

    def state_errors(self, state, expected):
        filed = [f for f in state["filings"] if f["filing_id"] == expected["filing_id"]]
        want = "keep" if expected["keep"] else "release"
        if not filed or filed[0]["disposition"] != want:
            return {"filing_id": f"no filing {expected['filing_id']} with disposition {want!r}"}
        return {}


class ToyEnv(SOPEnv):
    """The test domain's env."""

    domain = Toy()


if "test/SOP-Toy-v0" not in gymnasium.registry:
    gymnasium.register("test/SOP-Toy-v0", entry_point=ToyEnv)
