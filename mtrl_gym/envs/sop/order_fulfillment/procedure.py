"""SOP OF-31 as code: the reference procedure over records, and the scripted oracle over tool calls.

:func:`fulfil` applies the SOP to the records the tools return (the order, the customer,
one inventory record per SKU, the destination zone); :func:`expected` feeds it the world's
records and :func:`oracle` what it fetched through ``call``, then takes the SOP's action.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mtrl_gym.envs.sop.order_fulfillment.world import (AREAS, FREIGHT_ABOVE_KG, HOME_COUNTRY, LB_KG,
                                                       OVERNIGHT_UP_TO_KG, RANKING, UPGRADE_FROM_VALUE)

__all__ = ["fulfil", "expected", "oracle", "norm", "norm_sku", "region_of", "unit_kg", "available", "choose_service",
           "shipment_number"]


def norm(text: Any) -> str:
    """Rule 1.2: statuses and codes compare trimmed, inner spaces collapsed, case ignored."""
    return " ".join(str(text).split()).lower() if text is not None else ""


def norm_sku(text: str) -> str:
    """A SKU as the inventory spells it: trimmed, upper case."""
    return "".join(str(text).split()).upper()


def region_of(country: str, postal_code: str) -> str | None:
    """Section 5 / ``lookup_zone``: the destination region, or None for an unknown postcode area."""
    if norm_sku(country) != HOME_COUNTRY:
        return "international"
    area = ""
    for ch in norm_sku(postal_code):
        if not ch.isalpha():
            break
        area += ch
    return next((region for region, areas in AREAS.items() if area in areas), None)


def unit_kg(weight: Mapping[str, Any]) -> float:
    """Rule 1.3: a unit weight in kilograms."""
    factor = {"kg": 1.0, "g": 0.001, "lb": LB_KG}[norm(weight["unit"])]
    return float(weight["value"]) * factor


def available(stock: Mapping[str, Any]) -> int:
    """Rule 6.1: units a warehouse can ship, never below 0."""
    return max(0, int(stock["on_hand"]) - int(stock["reserved"]))


def choose_service(domestic: bool, method: str, tier: str, value: float, kg: float, hazmat: bool) -> str:
    """Section 7: the carrier service for the shipped weight."""
    if kg > FREIGHT_ABOVE_KG:
        return "freight"
    if not domestic:
        return "international_priority" if norm(method) == "express" else "international_economy"
    if norm(method) == "express":
        service = "overnight" if kg <= OVERNIGHT_UP_TO_KG else "two_day"
    else:
        service = "two_day" if norm(tier) == "gold" and value >= UPGRADE_FROM_VALUE else "ground"
    return "ground" if hazmat else service


def shipment_number(world_number: int) -> str:
    """The shipment id ``create_shipment`` returns."""
    return f"SHP-{world_number}"


def fulfil(order: Mapping[str, Any], customer_of: Callable[[str], Mapping[str, Any]],
           inventory_of: Callable[[str], Mapping[str, Any]], region: Callable[[str, str], str | None]
           ) -> dict[str, Any]:
    """Sections 2-7: the decision (every answer field but the shipment id) and the lines to ship."""
    out: dict[str, Any] = {"outcome": None, "warehouse": None, "service": None, "shipped_units": 0,
                           "backordered_skus": [], "cancelled_skus": [], "ship_lines": {}}
    if norm(order.get("payment", {}).get("status")) not in ("captured", "authorized"):
        return {**out, "outcome": "hold_payment"}
    wanted: dict[str, int] = {}
    for line in order["lines"]:
        sku = norm_sku(line["sku"])
        wanted[sku] = wanted.get(sku, 0) + int(line["quantity"])
    records = {sku: inventory_of(sku) for sku in wanted}
    cancelled = sorted(sku for sku, r in records.items() if norm(r["status"]) == "discontinued")
    live = [sku for sku in wanted if sku not in cancelled]
    out["cancelled_skus"] = cancelled
    if not live:
        return {**out, "outcome": "cancel_unavailable"}
    zone = region(order["ship_to"]["country"], order["ship_to"]["postal_code"])
    domestic = zone != "international"
    if not domestic and any(records[s]["hazmat"] for s in live):
        return {**out, "outcome": "hold_compliance"}
    ranking = RANKING[zone]
    can = {wh: {s: 0 for s in live} for wh in ranking}
    for s in live:
        for stock in records[s]["stock"]:
            if stock["warehouse"] in can and norm(stock["status"]) == "open":
                can[stock["warehouse"]][s] = available(stock)
    full = [wh for wh in ranking if all(can[wh][s] >= wanted[s] for s in live)]
    if full:
        warehouse, outcome = full[0], "ship_full"
    elif order.get("allow_partial") is True and max(sum(min(can[wh][s], wanted[s]) for s in live)
                                                    for wh in ranking) > 0:
        best = max(sum(min(can[wh][s], wanted[s]) for s in live) for wh in ranking)
        warehouse = next(wh for wh in ranking if sum(min(can[wh][s], wanted[s]) for s in live) == best)
        outcome = "ship_partial"
    else:
        return {**out, "outcome": "backorder", "backordered_skus": sorted(live)}
    ship = {s: min(can[warehouse][s], wanted[s]) for s in live}
    ship = {s: q for s, q in ship.items() if q > 0}
    kg = sum(q * unit_kg(records[s]["unit_weight"]) for s, q in ship.items())
    hazmat = any(records[s]["hazmat"] for s in ship)
    tier = "standard"
    if domestic and kg <= FREIGHT_ABOVE_KG:  # rule 7.4: the tier matters only here
        tier = customer_of(order["customer_id"]).get("tier") or "standard"
    service = choose_service(domestic, order["shipping_method"], tier, float(order["order_value"]), kg, hazmat)
    return {**out, "outcome": outcome, "warehouse": warehouse, "service": service,
            "shipped_units": sum(ship.values()),
            "backordered_skus": sorted(s for s in live if ship.get(s, 0) < wanted[s]), "ship_lines": ship}


def _answer(result: Mapping[str, Any], shipment_id: str | None) -> dict[str, Any]:
    return {**{k: v for k, v in result.items() if k != "ship_lines"}, "shipment_id": shipment_id}


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure applied to the world's records."""
    order = world["orders"][world["inputs"]["order_id"]]
    result = fulfil(order, lambda c: world["customers"][c], lambda s: world["inventory"][s], region_of)
    shipped = result["outcome"] in ("ship_full", "ship_partial")
    return _answer(result, shipment_number(world["shipment_number"]) if shipped else None)


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """Follow the SOP through tool calls only, then create the shipment or set the order's status."""
    order = call("get_order", {"order_id": inputs["order_id"]})

    def zone(country: str, postal_code: str) -> str | None:
        return call("lookup_zone", {"country": country, "postal_code": postal_code})["region"]

    result = fulfil(order, lambda c: call("get_customer", {"customer_id": c}),
                    lambda s: call("check_inventory", {"sku": s}), zone)
    if result["outcome"] in ("ship_full", "ship_partial"):
        made = call("create_shipment", {"order_id": order["order_id"], "warehouse": result["warehouse"],
                                        "service": result["service"],
                                        "lines": [{"sku": s, "quantity": q} for s, q in result["ship_lines"].items()]})
        return _answer(result, made["shipment_id"])
    call("update_order_status", {"order_id": order["order_id"], "status": result["outcome"]})
    return _answer(result, None)
