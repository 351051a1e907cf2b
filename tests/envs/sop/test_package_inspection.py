"""mtrl/SOP-PackageInspection-v0: SOP WI-05 on hand-checked worlds, its rules, the tools, label balance.

The shared checks (oracle, leak, determinism, robustness) run in ``test_domains.py``.
"""

from __future__ import annotations

import pytest
from harness import SOPHarness, check_pinned, direct_call, set_at

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop.package_inspection.procedure import kg, package_status
from mtrl_gym.envs.sop.package_inspection.tools import TOOLS
from mtrl_gym.envs.sop.package_inspection.world import DISPOSITIONS

H = SOPHarness("mtrl/SOP-PackageInspection-v0")
DOMAIN = H.domain
CLEAN = {"crushed": False, "wet": False, "punctured": False, "tape_broken": False}


def example_world() -> dict:
    """The SOP's worked example (section 9)."""
    def pkg(pid, kg_value, unit, damage, items):
        return {"package_id": pid, "measured_weight": {"value": kg_value, "unit": unit}, "damage": {**CLEAN, **damage},
                "seal_intact": True, "scanned_items": [{"sku": s, "quantity": q} for s, q in items]}
    return {
        "inputs": {"receipt_id": "RCV-100200"},
        "receipts": {"RCV-100200": {"receipt_id": "RCV-100200", "po_number": "PO-100200", "carrier": "Parcelway",
                                    "dock": "D2", "packages": [
                                        {"package_id": "PKG-000001", "declared_weight": {"value": 10, "unit": "kg"},
                                         "label": ""},
                                        {"package_id": "PKG-000002", "declared_weight": {"value": 8000, "unit": "g"},
                                         "label": "FRAGILE"},
                                        {"package_id": "PKG-000003", "declared_weight": {"value": 5, "unit": "kg"},
                                         "label": ""}]}},
        "purchase_orders": {"PO-100200": {"po_number": "PO-100200", "supplier_id": "SUP-1002",
                                          "lines": [{"sku": "SKU-11111", "quantity": 4},
                                                    {"sku": "SKU-22222", "quantity": 2}]}},
        "suppliers": {"SUP-1002": {"supplier_id": "SUP-1002", "name": "Brook Paper", "status": "Probation"}},
        "inspections": {
            "PKG-000001": pkg("PKG-000001", 22.6, "lb", {}, [("SKU-11111", 2)]),
            "PKG-000002": pkg("PKG-000002", 8.48, "kg", {}, [(" sku-11111", 2), ("SKU-22222", 1)]),
            "PKG-000003": pkg("PKG-000003", 5, "kg", {"punctured": True}, [("SKU-22222", 1)])},
        "records": [], "record_number": 424242, "plan": {},
    }


BASE = {"disposition": "partial_receipt", "rejected_packages": ["PKG-000003"], "held_packages": ["PKG-000002"],
        "short_skus": ["SKU-22222"], "over_skus": [], "inspection_id": "INSP-424242"}
INSP = ["inspections"]
CASES = {
    "the worked example": ([], BASE),
    "a standard supplier's 6 % is within 10 %": (
        [set_at(["suppliers", "SUP-1002", "status"], "standard")], {**BASE, "held_packages": []}),
    "a broken tape is a security hold": (
        [set_at([*INSP, "PKG-000001", "damage", "tape_broken"], True)],
        {**BASE, "disposition": "security_hold", "rejected_packages": ["PKG-000001", "PKG-000003"],
         "short_skus": ["SKU-11111", "SKU-22222"]}),
    "a missing seal field is intact, a false one is tampering": (
        [lambda w: w["inspections"]["PKG-000001"].pop("seal_intact"),
         set_at([*INSP, "PKG-000002", "seal_intact"], False)],
        {**BASE, "disposition": "security_hold", "rejected_packages": ["PKG-000002", "PKG-000003"], "held_packages": [],
         "short_skus": ["SKU-11111", "SKU-22222"]}),
    "two of three rejected is at least half": (
        [set_at([*INSP, "PKG-000002", "damage"], {**CLEAN, "crushed": True, "wet": True})],
        {**BASE, "disposition": "reject_all", "rejected_packages": ["PKG-000002", "PKG-000003"], "held_packages": [],
         "short_skus": ["SKU-11111", "SKU-22222"]}),
    "crushed alone holds the package": (
        [set_at([*INSP, "PKG-000003", "damage"], {**CLEAN, "crushed": True})],
        {**BASE, "disposition": "hold_for_review", "rejected_packages": [],
         "held_packages": ["PKG-000002", "PKG-000003"], "short_skus": []}),
    "an unexpected SKU is over": (
        [set_at([*INSP, "PKG-000003", "damage"], CLEAN),
         set_at([*INSP, "PKG-000003", "scanned_items"], [{"sku": "SKU-22222", "quantity": 1},
                                                         {"sku": "SKU-99999", "quantity": 1}]),
         set_at([*INSP, "PKG-000002", "measured_weight"], {"value": 8.2, "unit": "kg"})],
        {**BASE, "disposition": "hold_for_review", "rejected_packages": [], "held_packages": [], "short_skus": [],
         "over_skus": ["SKU-99999"]}),
    "all clean and exact: accept": (
        [set_at([*INSP, "PKG-000003", "damage"], CLEAN),
         set_at([*INSP, "PKG-000002", "measured_weight"], {"value": 8.4, "unit": "kg"})],  # exactly 5 %: within
        {**BASE, "disposition": "accept", "rejected_packages": [], "held_packages": [], "short_skus": []}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, want = CASES[case]
    check_pinned(DOMAIN, example_world(), want, edits)


def test_rules_in_isolation():
    assert kg({"value": 22.6, "unit": " LB"}) == pytest.approx(22.6 * 0.45359237)
    insp = {"measured_weight": {"value": 11.0, "unit": "kg"}, "damage": CLEAN, "seal_intact": True}
    assert package_status({"value": 10, "unit": "kg"}, insp, False) == "accept"       # exactly 10 %
    assert package_status({"value": 10, "unit": "kg"}, insp, True) == "hold"
    assert package_status({"value": 10, "unit": "kg"}, {**insp, "seal_intact": None}, False) == "accept"


def test_tools_answer_like_the_receiving_system():
    call, ctx = direct_call(TOOLS, example_world())
    with pytest.raises(ToolError, match="no receipt 'RCV-1'; receipt ids look like 'RCV-123456'"):
        call("get_receipt", {"receipt_id": "RCV-1"})
    with pytest.raises(ToolError, match="no package 'PKG-9' at the dock"):
        call("inspect_package", {"package_id": "PKG-9"})
    with pytest.raises(ToolError, match=r"package\(s\) \['PKG-9'\] are not on receipt RCV-100200"):
        call("record_inspection", {"receipt_id": "RCV-100200", "disposition": "accept", "rejected_packages": ["PKG-9"]})
    call("record_inspection", {"receipt_id": "rcv-100200", "disposition": "partial_receipt", "rejected_packages": []})
    with pytest.raises(ToolError, match="is already recorded \\(INSP-424242\\)"):
        call("record_inspection", {"receipt_id": "RCV-100200", "disposition": "accept", "rejected_packages": []})
    assert DOMAIN.state_errors(ctx.state, BASE) == {"inspection_id": "the inspection was recorded rejecting []"}


def test_the_tool_schema_uses_the_output_enum():
    assert tuple(TOOLS["record_inspection"].parameters["properties"]["disposition"]["enum"]) == DISPOSITIONS


def test_generated_dispositions_are_the_planned_ones():
    H.check_planned(lambda seed, world: {"disposition": world["plan"]["disposition"]}, n=200, difficulty={"packages": 5})


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    assert report["fields"]["disposition"] <= 0.25 and len(report["classes"]["disposition"]) == 5
    assert report["answer"] <= 0.01
    tasks = H.tasks(500)
    assert sum(bool(t["answer"]["held_packages"]) for t in tasks) >= 100
    assert sum(bool(t["answer"]["short_skus"]) for t in tasks) >= 100


def test_noise_adds_the_traps_the_sop_handles():
    H.check_noise_traps({
        "odd unit": lambda w: any(i["measured_weight"]["unit"] != "kg" for i in w["inspections"].values()),
        "no seal field": lambda w: any("seal_intact" not in i for i in w["inspections"].values()),
        "odd sku": lambda w: any(x["sku"] != x["sku"].strip().upper() for i in w["inspections"].values()
                                 for x in i["scanned_items"])})


def test_oracle_steps():
    stats = H.check_oracle(100, difficulty={"packages": 6})
    assert stats["max_steps"] <= 6 + 5 and stats["stateful_rate"] == 1.0
