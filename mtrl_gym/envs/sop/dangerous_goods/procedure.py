"""SOP DG-04 as code: the reference procedure over records, and the scripted oracle over tool calls.

:func:`classify_shipment` applies the SOP to the records the tools return (the manifest,
each product's SDS and lab report); :func:`expected_answer` feeds it the world's records
and :func:`oracle` feeds it what it fetched through ``call``, then files the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop.dangerous_goods.world import GAP_DEFAULTS, LB_KG, SEVERITY, hazard_class

__all__ = ["classify_shipment", "product_scores", "expected_answer", "oracle", "normalize_code", "to_kg",
           "flash_point_c", "ld50_mg_per_kg"]


def normalize_code(code: str) -> str:
    """Rule 1.2: product codes compare without case and surrounding spaces."""
    return code.strip().upper()


def to_kg(quantity: Mapping[str, Any]) -> float:
    unit = quantity["unit"].strip().lower()
    factor = {"kg": 1.0, "g": 0.001, "lb": LB_KG}[unit]
    return float(quantity["value"]) * factor


def flash_point_c(record: Mapping[str, Any]) -> float:
    value = float(record["value"])
    return (value - 32) * 5 / 9 if record["unit"].strip().upper() == "F" else value


def ld50_mg_per_kg(record: Mapping[str, Any]) -> float:
    value = float(record["value"])
    return value * 1000 if record["unit"].strip().lower() == "g/kg" else value


def _band(value: float, bounds: tuple[tuple[float, int], ...], last: int) -> int:
    for bound, score in bounds:
        if value < bound:
            return score
    return last


def _latest(sds: Mapping[str, Any]) -> Mapping[str, Any]:
    """Rule 1.4: the revision with the most recent date (ISO dates sort as text)."""
    return max(sds["revisions"], key=lambda rev: rev["revision_date"])


def product_scores(sds: Mapping[str, Any], lab: Mapping[str, Any] | None, quantities: list[Mapping[str, Any]]
                   ) -> tuple[tuple[int, int, int, int], list[str]]:
    """Section 3: ``((flammability, toxicity, reactivity, quantity), data gaps)`` of one product."""
    latest, lab = _latest(sds), lab or {}
    gaps = []
    flash = lab.get("measured_flash_point") or latest.get("flash_point")
    if flash is None:
        f = GAP_DEFAULTS["flash_point"]
        gaps.append("flash_point")
    else:
        c = flash_point_c(flash)
        f = 3 if c < 23 else 2 if c < 60 else 1 if c <= 93 else 0
    ld50 = latest.get("ld50_oral")
    if ld50 is None:
        t = GAP_DEFAULTS["ld50"]
        gaps.append("ld50")
    else:
        mg = ld50_mg_per_kg(ld50)
        t = 3 if mg <= 50 else 2 if mg <= 300 else 1 if mg <= 2000 else 0
    code = lab.get("reactivity_code") or latest.get("reactivity_code")
    if code is None:
        r = GAP_DEFAULTS["reactivity"]
        gaps.append("reactivity")
    else:
        r = int(code.strip().upper().removeprefix("R"))
    kg = sum(to_kg(q) for q in quantities)
    q = _band(kg, ((10, 0), (100, 1), (1000, 2)), 3)
    return (f, t, r, q), gaps


def classify_shipment(shipment: Mapping[str, Any], sds_of: Callable[[str], Mapping[str, Any]],
                      lab_of: Callable[[str], Mapping[str, Any] | None]) -> dict[str, Any]:
    """Sections 2-5: the governing product's result (everything but the classification id)."""
    first_line: dict[str, int] = {}
    quantities: dict[str, list] = {}
    for line in sorted(shipment["lines"], key=lambda ln: ln["line"]):
        if not line["un_number"]:
            continue  # rule 1.1: not a dangerous-goods line
        code = normalize_code(line["product_code"])
        first_line.setdefault(code, line["line"])
        quantities.setdefault(code, []).append(line["quantity"])
    results = []
    for code in first_line:
        sds = sds_of(code)
        scores, gaps = product_scores(sds, lab_of(code), quantities[code])
        cls = hazard_class(scores)
        results.append({"governing_product": sds["product_code"], "flammability_score": scores[0],
                        "toxicity_score": scores[1], "reactivity_score": scores[2], "quantity_score": scores[3],
                        "total_score": sum(scores), "hazard_class": cls, "data_gaps": gaps,
                        "_key": (-SEVERITY[cls], -sum(scores), first_line[code])})
    best = min(results, key=lambda r: r["_key"])
    return {k: v for k, v in best.items() if k != "_key"}


def expected_answer(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure applied to the world's records."""
    result = classify_shipment(world["shipment"], lambda c: world["sds"][c], lambda c: world["lab_reports"].get(c))
    return {**result, "classification_id": world["classification_id"]}


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """Follow the SOP through tool calls only: fetch, classify, file once, answer."""
    shipment = call("get_shipment", {"shipment_id": inputs["shipment_id"]})

    def lab_of(code: str) -> Mapping[str, Any] | None:
        try:
            return call("get_lab_report", {"product_code": code})
        except ToolError:
            return None  # no lab report on file

    result = classify_shipment(shipment, lambda code: call("get_safety_data_sheet", {"product_code": code}), lab_of)
    filing = call("file_classification", {"shipment_id": shipment["shipment_id"],
                                          "product_code": result["governing_product"],
                                          "hazard_class": result["hazard_class"], "total_score": result["total_score"]})
    return {**result, "classification_id": filing["classification_id"]}
