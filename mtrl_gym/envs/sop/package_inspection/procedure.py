"""SOP WI-05 as code: the reference procedure over records, and the scripted oracle over tool calls.

:func:`inspect_receipt` applies the SOP to the records the tools return (the receipt, the
purchase order, the supplier, one inspection per package); :func:`expected` feeds it the
world's records and :func:`oracle` what it fetched through ``call``, then records it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mtrl_gym.envs.sop.package_inspection.world import LB_KG, PROBATION_VARIANCE_LIMIT, VARIANCE_LIMIT

__all__ = ["inspect_receipt", "package_status", "kg", "norm_sku", "expected", "oracle", "record_number"]


def kg(weight: Mapping[str, Any]) -> float:
    """Rule 1.3: a weight in kilograms."""
    return float(weight["value"]) * {"kg": 1.0, "g": 0.001, "lb": LB_KG}[str(weight["unit"]).strip().lower()]


def norm_sku(text: str) -> str:
    return "".join(str(text).split()).upper()


def package_status(declared: Mapping[str, Any], inspection: Mapping[str, Any], probation: bool) -> str:
    """Section 4: ``tamper``, ``reject``, ``hold`` or ``accept`` for one package."""
    damage = inspection["damage"]
    if damage["tape_broken"] or inspection.get("seal_intact", True) is False:
        return "tamper"
    if damage["punctured"] or (damage["crushed"] and damage["wet"]):
        return "reject"
    limit = PROBATION_VARIANCE_LIMIT if probation else VARIANCE_LIMIT
    want = kg(declared)
    # Compared to the milligram, so a difference of exactly the limit stays within it (rule 4.3).
    if damage["crushed"] or damage["wet"] or round(abs(kg(inspection["measured_weight"]) - want), 6) > \
            round(limit * want, 6):
        return "hold"
    return "accept"


def record_number(world_number: int) -> str:
    return f"INSP-{world_number}"


def inspect_receipt(receipt: Mapping[str, Any], po: Mapping[str, Any], supplier: Mapping[str, Any],
                    inspection_of: Callable[[str], Mapping[str, Any]]) -> dict[str, Any]:
    """Sections 3-6: every answer field but the inspection id."""
    probation = str(supplier["status"]).strip().lower() == "probation"
    status = {p["package_id"]: package_status(p["declared_weight"], inspection_of(p["package_id"]), probation)
              for p in receipt["packages"]}
    counted: dict[str, int] = {}
    for pid, st in status.items():
        if st in ("accept", "hold"):
            for item in inspection_of(pid)["scanned_items"]:
                sku = norm_sku(item["sku"])
                counted[sku] = counted.get(sku, 0) + int(item["quantity"])
    ordered = {norm_sku(line["sku"]): int(line["quantity"]) for line in po["lines"]}
    short = sorted(s for s, q in ordered.items() if counted.get(s, 0) < q)
    over = sorted(s for s, q in counted.items() if q > ordered.get(s, 0))
    rejected = sorted(p for p, st in status.items() if st in ("reject", "tamper"))
    held = sorted(p for p, st in status.items() if st == "hold")
    if "tamper" in status.values():
        disposition = "security_hold"
    elif 2 * len(rejected) >= len(status):
        disposition = "reject_all"
    elif rejected or short:
        disposition = "partial_receipt"
    elif held or over:
        disposition = "hold_for_review"
    else:
        disposition = "accept"
    return {"disposition": disposition, "rejected_packages": rejected, "held_packages": held,
            "short_skus": short, "over_skus": over}


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure applied to the world's records."""
    receipt = world["receipts"][world["inputs"]["receipt_id"]]
    po = world["purchase_orders"][receipt["po_number"]]
    result = inspect_receipt(receipt, po, world["suppliers"][po["supplier_id"]], lambda p: world["inspections"][p])
    return {**result, "inspection_id": record_number(world["record_number"])}


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """Follow the SOP through tool calls only, then record the inspection."""
    receipt = call("get_receipt", {"receipt_id": inputs["receipt_id"]})
    po = call("get_purchase_order", {"po_number": receipt["po_number"]})
    supplier = call("get_supplier", {"supplier_id": po["supplier_id"]})
    seen: dict[str, Mapping[str, Any]] = {}

    def inspection_of(pid: str) -> Mapping[str, Any]:
        if pid not in seen:
            seen[pid] = call("inspect_package", {"package_id": pid})
        return seen[pid]

    result = inspect_receipt(receipt, po, supplier, inspection_of)
    made = call("record_inspection", {"receipt_id": receipt["receipt_id"], "disposition": result["disposition"],
                                      "rejected_packages": result["rejected_packages"]})
    return {**result, "inspection_id": made["inspection_id"]}
