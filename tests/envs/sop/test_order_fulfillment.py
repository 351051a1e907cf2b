"""mtrl/SOP-OrderFulfillment-v0: SOP OF-31 on hand-checked worlds, its rule tables, the tools, label balance.

The shared checks (oracle, leak, determinism, robustness) run in ``test_domains.py``.
"""

from __future__ import annotations

import json

import pytest
from harness import SOPHarness, check_pinned, direct_call, set_at

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop import generate_tasks, parse_task_inputs
from mtrl_gym.envs.sop.order_fulfillment.procedure import available, choose_service, region_of, unit_kg
from mtrl_gym.envs.sop.order_fulfillment.tools import TOOLS
from mtrl_gym.envs.sop.order_fulfillment.world import SERVICES, WAREHOUSES

H = SOPHarness("mtrl/SOP-OrderFulfillment-v0")
DOMAIN = H.domain


def _stock(**avail):
    return [{"warehouse": wh, "status": "open", "on_hand": a + 1, "reserved": 1} for wh, a in avail.items()]


def example_world() -> dict:
    """The SOP's worked example (section 10)."""
    return {
        "inputs": {"order_id": "SO-100200"},
        "orders": {"SO-100200": {
            "order_id": "SO-100200", "customer_id": "CU-10001", "placed_at": "2025-03-10T10:15:00Z",
            "lines": [{"sku": "LHG-11111", "quantity": 2}, {"sku": " lhg-22222 ", "quantity": 1},
                      {"sku": "LHG-11111", "quantity": 1}, {"sku": "LHG-33333", "quantity": 4}],
            "shipping_method": "standard", "allow_partial": True, "order_value": 180.0,
            "ship_to": {"name": "R. Quinn", "country": "GB", "postal_code": "NE4 5TY"},
            "payment": {"method": "card", "status": "Captured"}}},
        "customers": {"CU-10001": {"customer_id": "CU-10001", "name": "R. Quinn", "since": "2020-01-01",
                                   "tier": "Gold "}},
        "inventory": {
            "LHG-11111": {"sku": "LHG-11111", "name": "Wool throw", "status": "active", "hazmat": False,
                          "unit_weight": {"value": 1200, "unit": "g"},
                          "stock": _stock(**{"LHG-EAST": 3, "LHG-MID": 1, "LHG-WEST": 2})},
            "LHG-22222": {"sku": "LHG-22222", "name": "Kettle", "status": "active", "hazmat": False,
                          "unit_weight": {"value": 1.5, "unit": "kg"},
                          "stock": _stock(**{"LHG-EAST": 0, "LHG-MID": 1, "LHG-WEST": 1})},
            "LHG-33333": {"sku": "LHG-33333", "name": "Desk lamp", "status": "Discontinued", "hazmat": False,
                          "unit_weight": {"value": 2, "unit": "kg"},
                          "stock": _stock(**{"LHG-EAST": 9, "LHG-MID": 9, "LHG-WEST": 9})}},
        "shipments": [], "status_updates": [], "shipment_number": 424242, "plan": {},
    }


BASE = {"outcome": "ship_partial", "warehouse": "LHG-EAST", "service": "two_day", "shipped_units": 3,
        "backordered_skus": ["LHG-22222"], "cancelled_skus": ["LHG-33333"], "shipment_id": "SHP-424242"}
STOCK = ["inventory", "LHG-22222", "stock"]
CASES = {
    "the worked example": ([], BASE),
    "east gets the kettle: it fills the order": (
        [set_at([*STOCK, 0, "on_hand"], 2)],
        {**BASE, "outcome": "ship_full", "shipped_units": 4, "backordered_skus": []}),
    "no partial shipments: back-order every live SKU": (
        [set_at(["orders", "SO-100200", "allow_partial"], False)],
        {**BASE, "outcome": "backorder", "warehouse": None, "service": None, "shipped_units": 0,
         "backordered_skus": ["LHG-11111", "LHG-22222"], "shipment_id": None}),
    "a missing allow_partial flag is false": (
        [lambda w: w["orders"]["SO-100200"].pop("allow_partial")],
        {**BASE, "outcome": "backorder", "warehouse": None, "service": None, "shipped_units": 0,
         "backordered_skus": ["LHG-11111", "LHG-22222"], "shipment_id": None}),
    "payment pending: hold, nothing else counts": (
        [set_at(["orders", "SO-100200", "payment", "status"], " PENDING")],
        {"outcome": "hold_payment", "warehouse": None, "service": None, "shipped_units": 0, "backordered_skus": [],
         "cancelled_skus": [], "shipment_id": None}),
    "an authorised payment is good": ([set_at(["orders", "SO-100200", "payment", "status"], "authorized")], BASE),
    "every SKU discontinued": (
        [set_at(["inventory", s, "status"], "discontinued") for s in ("LHG-11111", "LHG-22222")],
        {**BASE, "outcome": "cancel_unavailable", "warehouse": None, "service": None, "shipped_units": 0,
         "backordered_skus": [], "cancelled_skus": ["LHG-11111", "LHG-22222", "LHG-33333"], "shipment_id": None}),
    "hazmat abroad is held": (
        [set_at(["orders", "SO-100200", "ship_to"], {"name": "R", "country": "fr", "postal_code": "75011"}),
         set_at(["inventory", "LHG-22222", "hazmat"], True)],
        {**BASE, "outcome": "hold_compliance", "warehouse": None, "service": None, "shipped_units": 0,
         "backordered_skus": [], "shipment_id": None}),
    "abroad without hazmat: the international ranking and economy service": (
        [set_at(["orders", "SO-100200", "ship_to"], {"name": "R", "country": "FR", "postal_code": "75011"})],
        {**BASE, "service": "international_economy"}),
    "a closed warehouse has nothing available": (
        [set_at(["inventory", "LHG-11111", "stock", 0, "status"], "Closed")],
        {**BASE, "warehouse": "LHG-WEST", "shipped_units": 3, "backordered_skus": ["LHG-11111"]}),
    "over-reserved stock is 0, not negative": (
        [set_at(["inventory", "LHG-11111", "stock", 2, "reserved"], 9)],
        BASE),
    "hazmat at home goes by ground": ([set_at(["inventory", "LHG-11111", "hazmat"], True)],
                                      {**BASE, "service": "ground"}),
    "a standard tier gets ground": ([set_at(["customers", "CU-10001", "tier"], "standard")],
                                    {**BASE, "service": "ground"}),
    "a missing tier is standard": ([lambda w: w["customers"]["CU-10001"].pop("tier")], {**BASE, "service": "ground"}),
    "149.99 is below the upgrade": ([set_at(["orders", "SO-100200", "order_value"], 149.99)],
                                    {**BASE, "service": "ground"}),
    "express up to 5 kg flies overnight": ([set_at(["orders", "SO-100200", "shipping_method"], "Express")],
                                           {**BASE, "service": "overnight"}),
    "express above 5 kg is two-day": (
        [set_at(["orders", "SO-100200", "shipping_method"], "express"),
         set_at(["inventory", "LHG-11111", "unit_weight"], {"value": 3.7, "unit": "lb"})],  # 3 x 1.678 = 5.03 kg
        {**BASE, "service": "two_day"}),
    "above 30 kg is freight": ([set_at(["inventory", "LHG-11111", "unit_weight"], {"value": 10.01, "unit": "kg"})],
                               {**BASE, "service": "freight"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, want = CASES[case]
    check_pinned(DOMAIN, example_world(), want, edits)


def test_rules_in_isolation():
    assert region_of("gb", " ne4 5ty") == "north" and region_of("GB", "BS1 1ST") == "west"
    assert region_of("IE", "D02 X285") == "international" and region_of("GB", "ZZ1 1AA") is None
    assert unit_kg({"value": 2, "unit": " LB"}) == pytest.approx(0.90718474) and unit_kg({"value": 250, "unit": "g"}) == 0.25
    assert available({"on_hand": 2, "reserved": 5}) == 0
    assert choose_service(True, "express", "standard", 10, 5.0, False) == "overnight"
    assert choose_service(True, "express", "standard", 10, 5.01, True) == "ground"
    assert choose_service(False, "express", "gold", 500, 30.0, False) == "international_priority"
    assert choose_service(False, "standard", "gold", 500, 30.01, False) == "freight"


def test_tools_answer_like_the_warehouse_system():
    call, ctx = direct_call(TOOLS, example_world())
    with pytest.raises(ToolError, match="no order 'SO-1'; order ids look like 'SO-123456'"):
        call("get_order", {"order_id": "SO-1"})
    with pytest.raises(ToolError, match="no SKU 'LHG-9' in the catalogue"):
        call("check_inventory", {"sku": "LHG-9"})
    assert call("check_inventory", {"sku": " lhg-11111"})["sku"] == "LHG-11111"
    with pytest.raises(ToolError, match="postcode 'ZZ1 1AA' is not in a delivery area"):
        call("lookup_zone", {"country": "GB", "postal_code": "ZZ1 1AA"})
    with pytest.raises(ToolError, match="SKU 'LHG-44444' is not on order SO-100200"):
        call("create_shipment", {"order_id": "SO-100200", "warehouse": "LHG-EAST", "service": "ground",
                                 "lines": [{"sku": "LHG-44444", "quantity": 1}]})
    with pytest.raises(ToolError, match="each line must be"):
        call("create_shipment", {"order_id": "SO-100200", "warehouse": "LHG-EAST", "service": "ground",
                                 "lines": [{"sku": "LHG-11111", "quantity": "3"}]})
    made = call("create_shipment", {"order_id": "so-100200", "warehouse": "LHG-MID", "service": "ground",
                                    "lines": [{"sku": "lhg-11111", "quantity": 1}, {"sku": "LHG-11111", "quantity": 1}]})
    assert made["shipment_id"] == "SHP-424242" and made["lines"] == {"LHG-11111": 2}
    with pytest.raises(ToolError, match="already has shipment SHP-424242; an order gets one action"):
        call("update_order_status", {"order_id": "SO-100200", "status": "backorder"})
    # The shipment does not match the SOP's allocation: the shipment id fails.
    assert DOMAIN.state_errors(ctx.state, BASE) == {"shipment_id": "the shipment ships {'LHG-11111': 2} from LHG-MID "
                                                                   "by ground: not the SOP's allocation"}


def test_the_status_must_match_an_outcome_without_shipment():
    world = example_world()
    world["orders"]["SO-100200"]["allow_partial"] = False
    want = DOMAIN.expected(world)
    call, ctx = direct_call(TOOLS, world)
    assert DOMAIN.state_errors(ctx.state, want) == {"outcome": "the order's status was never set, not 'backorder'"}
    call("update_order_status", {"order_id": "SO-100200", "status": "hold_payment"})
    assert DOMAIN.state_errors(ctx.state, want) == {"outcome": "the order's status was 'hold_payment', not "
                                                               "'backorder'"}
    env = H.env
    task = generate_tasks(DOMAIN, 1, seed=3)[0]
    env.reset(options={"task": task})
    order_id = parse_task_inputs(task["prompt"])["order_id"]
    wrong = "hold_payment" if task["answer"]["outcome"] != "hold_payment" else "backorder"
    env.step("<tool_call>" + json.dumps({"name": "update_order_status", "arguments": {"order_id": order_id,
                                                                                     "status": wrong}}) + "</tool_call>")
    _, reward, terminated, _, info = env.step(f"<final_answer>{json.dumps(task['answer'])}</final_answer>")
    assert terminated and reward == 0.0


def test_the_tool_schemas_use_the_output_enums():
    props = TOOLS["create_shipment"].parameters["properties"]
    assert tuple(props["warehouse"]["enum"]) == WAREHOUSES and tuple(props["service"]["enum"]) == SERVICES
    assert DOMAIN.output_schema["warehouse"].values == WAREHOUSES


def test_generated_outcomes_are_the_planned_ones():
    H.check_planned(lambda seed, world: {"outcome": world["plan"]["outcome"]}, n=200, difficulty={"lines": 4})


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    assert report["fields"]["outcome"] <= 0.36 and len(report["classes"]["outcome"]) == 6
    assert report["fields"]["service"] <= 0.55 and report["fields"]["warehouse"] <= 0.55
    assert report["answer"] <= 0.15  # the payment hold: every other field is empty by rule 9
    tasks = H.tasks(500)
    assert sum(bool(t["answer"]["backordered_skus"]) for t in tasks) >= 100
    assert sum(bool(t["answer"]["cancelled_skus"]) for t in tasks) >= 80


def test_noise_adds_the_traps_the_sop_handles():
    def order(w):
        return w["orders"][w["inputs"]["order_id"]]

    def skus(w):
        return [ln["sku"].strip().upper() for ln in order(w)["lines"]]

    H.check_noise_traps({
        "split line": lambda w: len(skus(w)) != len(set(skus(w))),
        "odd unit": lambda w: any(i["unit_weight"]["unit"] != "kg" for i in w["inventory"].values()),
        "closed site": lambda w: any(s["status"].strip().lower() == "closed" for i in w["inventory"].values()
                                     for s in i["stock"]),
        "over-reserved": lambda w: any(s["reserved"] > s["on_hand"] for i in w["inventory"].values()
                                       for s in i["stock"])})


def test_oracle_steps():
    stats = H.check_oracle(100, difficulty={"lines": 6})
    assert stats["max_steps"] <= 6 + 5 and stats["stateful_rate"] == 1.0
