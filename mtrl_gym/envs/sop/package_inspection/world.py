"""World generator of the PackageInspection domain: one inbound receipt, its packages and the purchase order.

Outcome first: the receipt's disposition is drawn (accept, hold for review, partial
receipt, reject all, security hold), then per-package findings that produce it under SOP
WI-05 (tampering, rejecting damage, holding damage, weight variance), then the package
contents against the purchase order (shortages follow from rejected packages; shortages or
overages are added where the disposition allows them). The reference procedure computes
the label; ``world["plan"]`` keeps the intended disposition for tests.

Noise levels: 0 — weights in kg, clean SKUs, every field present. 1 — weights in lb or g,
SKUs in other case and spacing, a missing seal field, a variance between the probation
and the standard limit, single damage flags. 2 — more of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import ids, pick, weighted

__all__ = ["DIFFICULTY_LIMITS", "generate_world", "DEFAULT_DIFFICULTY", "MAX_PACKAGES", "DISPOSITIONS", "LB_KG",
           "VARIANCE_LIMIT", "PROBATION_VARIANCE_LIMIT"]

DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "packages": 3}
#: Largest value of the ``packages`` knob.
MAX_PACKAGES = 6
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"packages": (1, MAX_PACKAGES)}
DISPOSITIONS = ("accept", "hold_for_review", "partial_receipt", "reject_all", "security_hold")
LB_KG = 0.45359237
VARIANCE_LIMIT = 0.10
PROBATION_VARIANCE_LIMIT = 0.05
_WEIGHTS = tuple((d, 0.2) for d in DISPOSITIONS)
_CLEAN = {"crushed": False, "wet": False, "punctured": False, "tape_broken": False}


def _weight(rng: np.random.Generator, kg: float, noise: int) -> dict[str, Any]:
    unit = "kg" if noise == 0 or rng.random() < 0.5 else pick(rng, ("lb", "g"))
    if unit == "lb":
        return {"value": round(kg / LB_KG, 2), "unit": "lb"}
    if unit == "g":
        return {"value": int(round(kg * 1000)), "unit": "g"}
    return {"value": round(kg, 2), "unit": "kg"}


def _sku(rng: np.random.Generator, sku: str, noise: int) -> str:
    return pick(rng, (sku.lower(), f" {sku} ")) if noise and rng.random() < 0.25 * noise else sku


def _finding(rng: np.random.Generator, kind: str) -> tuple[dict[str, bool], bool | None]:
    """(damage flags, seal_intact) of a package finding: tamper, reject, hold_damage or clean."""
    damage = dict(_CLEAN)
    seal: bool | None = True
    if kind == "tamper":
        if rng.random() < 0.5:
            damage["tape_broken"] = True
        else:
            seal = False
    elif kind == "reject":
        if rng.random() < 0.5:
            damage["punctured"] = True
        else:
            damage["crushed"] = damage["wet"] = True
    elif kind == "hold_damage":
        damage[pick(rng, ("crushed", "wet"))] = True
    return damage, seal


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One receipt at the dock and every record behind it; every draw comes from ``rng``."""
    noise = difficulty["noise"]
    target = weighted(rng, _WEIGHTS)
    n = int(rng.integers(1, difficulty["packages"] + 1))
    probation = bool(rng.random() < 0.3)
    limit = PROBATION_VARIANCE_LIMIT if probation else VARIANCE_LIMIT
    kinds = ["clean"] * n
    if target == "security_hold":
        kinds[int(rng.integers(n))] = "tamper"
    elif target == "reject_all":
        for i in rng.choice(n, size=(n + 1) // 2 + int(rng.integers(0, n - (n + 1) // 2 + 1)), replace=False):
            kinds[int(i)] = "reject"
    elif target == "partial_receipt" and n >= 3 and rng.random() < 0.6:
        kinds[int(rng.integers(n))] = "reject"
    if target in ("hold_for_review", "partial_receipt", "security_hold") or (target == "reject_all" and noise):
        for i in range(n):
            if kinds[i] == "clean" and rng.random() < 0.5:
                kinds[i] = pick(rng, ("hold_damage", "hold_weight"))
    if target == "hold_for_review" and "hold_damage" not in kinds and "hold_weight" not in kinds \
            and rng.random() < 0.6:
        kinds[int(rng.integers(n))] = pick(rng, ("hold_damage", "hold_weight"))
    skus = ids(rng, "SKU-", int(rng.integers(1, 4)) + (n > 2), width=5)
    contents: list[dict[str, int]] = [{} for _ in range(n)]
    expected: dict[str, int] = {}
    for sku in skus:
        qty = int(rng.integers(1, 5)) * n
        expected[sku] = qty
        for _ in range(qty):
            box = contents[int(rng.integers(n))]
            box[sku] = box.get(sku, 0) + 1
    good = [i for i in range(n) if kinds[i] not in ("reject", "tamper")]
    if target == "partial_receipt" and "reject" not in kinds:  # a shortage on a counted package
        i = pick(rng, good)
        if not contents[i]:
            contents[i][skus[0]] = 1
            expected[skus[0]] += 1
        sku = pick(rng, sorted(contents[i]))
        contents[i][sku] -= 1
    elif target == "partial_receipt" and all(not contents[i] for i in range(n) if kinds[i] == "reject"):
        contents[kinds.index("reject")][skus[0]] = 1
        expected[skus[0]] += 1
    if target == "hold_for_review" and all(k == "clean" for k in kinds):  # an overage or an unexpected SKU
        i = int(rng.integers(n))
        extra = pick(rng, [*skus, "SKU-00000"])
        contents[i][extra] = contents[i].get(extra, 0) + 1
    packages, inspections = [], {}
    for i, pid in enumerate(ids(rng, "PKG-", n, width=6)):
        declared = round(float(rng.uniform(2.0, 30.0)), 2)
        if kinds[i] == "hold_weight":
            variance = float(rng.uniform(limit + 0.02, 0.3)) * pick(rng, (1, -1))
        elif noise and not probation and rng.random() < 0.3 * noise:
            variance = float(rng.uniform(0.06, 0.08)) * pick(rng, (1, -1))  # only the probation limit would hold it
        else:
            variance = float(rng.uniform(0.0, limit - 0.015)) * pick(rng, (1, -1))
        measured = declared * (1 + variance)
        damage, seal = _finding(rng, "hold_damage" if kinds[i] == "hold_damage" else kinds[i])
        record: dict[str, Any] = {"package_id": pid, "measured_weight": _weight(rng, measured, noise),
                                  "damage": damage, "seal_intact": seal,
                                  "scanned_items": [{"sku": _sku(rng, s, noise), "quantity": q}
                                                    for s, q in sorted(contents[i].items()) if q > 0]}
        if noise and seal and not damage["tape_broken"] and rng.random() < 0.2 * noise:
            del record["seal_intact"]  # missing: intact unless the tape is broken
        inspections[pid] = record
        packages.append({"package_id": pid, "declared_weight": _weight(rng, declared, noise),
                         "label": pick(rng, ("FRAGILE", "THIS WAY UP", "", "HEAVY"))})
    receipt_id, po, supplier = f"RCV-{int(rng.integers(10**5, 10**6))}", f"PO-{int(rng.integers(10**5, 10**6))}", \
        f"SUP-{int(rng.integers(1000, 10000))}"
    return {"inputs": {"receipt_id": receipt_id},
            "receipts": {receipt_id: {"receipt_id": receipt_id, "po_number": po, "carrier": pick(rng, (
                "Northline Freight", "Parcelway", "Kestrel Logistics")), "dock": f"D{int(rng.integers(1, 9))}",
                "packages": packages}},
            "purchase_orders": {po: {"po_number": po, "supplier_id": supplier,
                                     "lines": [{"sku": s, "quantity": q} for s, q in expected.items()]}},
            "suppliers": {supplier: {"supplier_id": supplier, "name": pick(rng, ("Alder Tools", "Brook Paper",
                                                                                   "Cobalt Parts", "Dune Textiles")),
                                     "status": "probation" if probation else pick(rng, ("preferred", "standard"))}},
            "inspections": inspections, "records": [], "record_number": int(rng.integers(10**5, 10**6)),
            "plan": {"disposition": target}}
