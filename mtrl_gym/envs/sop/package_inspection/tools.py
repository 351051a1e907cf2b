"""Tools of the PackageInspection domain: receipt, purchase-order, supplier and package-inspection
look-ups, the inspection record (the stateful action) and two distractors (the dock schedule,
forklift status).

Every tool reads the episode's world through ``ctx.state``; unknown ids raise
:class:`ToolError`. Results are JSON records shaped like a warehouse receiving system.
"""

from __future__ import annotations

from typing import Any, Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.kit import Records, lookup_tool, record_once, stable_number
from mtrl_gym.envs.sop.package_inspection.procedure import record_number

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_receipt", "get_purchase_order", "get_supplier", "inspect_package",
           "record_inspection", "get_dock_schedule", "get_forklift_status"]

Disposition = Literal["accept", "hold_for_review", "partial_receipt", "reject_all", "security_hold"]


_receipt = Records("receipts", "no receipt {!r}; receipt ids look like 'RCV-123456'")


get_receipt = lookup_tool("get_receipt", _receipt, "receipt_id",
                          "Read an inbound receipt: purchase order, carrier, dock, packages with declared weights.",
                          'The receipt id, e.g. "RCV-482913".')


get_purchase_order = lookup_tool("get_purchase_order", Records("purchase_orders", "no purchase order {!r}"),
                                 "po_number",
                                 "Read a purchase order: the supplier and the ordered SKUs with quantities.",
                                 'The purchase-order number, e.g. "PO-482913".')


get_supplier = lookup_tool("get_supplier", Records("suppliers", "no supplier {!r}"), "supplier_id",
                           "Read a supplier's record: name and status (preferred, standard, probation).",
                           'The supplier id, e.g. "SUP-4821".')


inspect_package = lookup_tool("inspect_package", Records("inspections", "no package {!r} at the dock"), "package_id",
                              "The dock inspection of one package: measured weight, damage flags, seal, scanned items.",
                              'The package id from the receipt, e.g. "PKG-482913".')


@tool
def record_inspection(ctx: ToolContext, receipt_id: str, disposition: Disposition,
                      rejected_packages: list[str]) -> dict[str, Any]:
    """Record the receipt's inspection result (once per receipt).

    Args:
        receipt_id: The receipt id.
        disposition: The receipt's disposition.
        rejected_packages: The ids of the rejected packages ([] if none).
    """
    receipt = _receipt(ctx, receipt_id)
    known = {p["package_id"] for p in receipt["packages"]}
    unknown = sorted(set(rejected_packages) - known)
    if unknown:
        raise ToolError(f"package(s) {unknown} are not on receipt {receipt['receipt_id']}")
    record = {"inspection_id": record_number(ctx.state["record_number"]), "receipt_id": receipt["receipt_id"],
              "disposition": disposition, "rejected_packages": sorted(rejected_packages)}
    return record_once(ctx, "records", record,
                       lambda first: f"receipt {receipt['receipt_id']} is already recorded ({first['inspection_id']})")


@tool
def get_dock_schedule(dock: str) -> dict[str, Any]:
    """Today's arrivals booked at a dock door.

    Args:
        dock: The dock door, e.g. "D3".
    """
    n = stable_number("dock", dock)
    return {"dock": dock, "arrivals": [f"{8 + (n + k) % 9:02d}:{15 * ((n >> k) % 4):02d}" for k in range(3)]}


@tool
def get_forklift_status(dock: str) -> dict[str, Any]:
    """Which forklifts serve a dock door and their battery levels.

    Args:
        dock: The dock door.
    """
    n = stable_number("forklift", dock)
    return {"dock": dock, "forklifts": [{"unit": f"FL-{n % 90 + 10}", "battery_pct": n % 100}]}


DISTRACTOR_TOOLS = ("get_dock_schedule", "get_forklift_status")
TOOLS = ToolSet([get_receipt, get_purchase_order, get_supplier, inspect_package, record_inspection,
                 get_dock_schedule, get_forklift_status])
