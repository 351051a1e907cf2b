"""World generator of the OrderFulfillment domain: one customer order and the stock behind it.

Outcome first: the order's outcome is drawn (ship in full, ship in part, back-order, payment
hold, compliance hold, cancel as unavailable), then the destination, the lines and the
stock per warehouse that produce it under SOP OF-31; the reference procedure computes the
label from the records, and ``world["plan"]`` keeps the intended outcome (never shown by a
tool) so tests can check the two agree.

Noise levels: 0 — clean codes and statuses, one line per SKU, weights in kg, every
warehouse open. 1 — SKUs typed in other case with spaces, a SKU split over two order lines,
statuses in other case, weights in g or lb, reserved stock above the stock on hand, a
closed warehouse holding stock, a missing ``allow_partial`` flag or customer tier. 2 — more
of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import ids, pick, vary_case, weighted

__all__ = ["DIFFICULTY_LIMITS", "generate_world", "DEFAULT_DIFFICULTY", "MAX_LINES", "OUTCOMES", "SERVICES",
           "WAREHOUSES", "RANKING", "REGIONS", "AREAS", "LB_KG", "FREIGHT_ABOVE_KG", "OVERNIGHT_UP_TO_KG",
           "UPGRADE_FROM_VALUE", "HOME_COUNTRY"]

DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "lines": 3}
#: Largest value of the ``lines`` knob (distinct SKUs on an order).
MAX_LINES = 6
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"lines": (1, MAX_LINES)}
OUTCOMES = ("ship_full", "ship_partial", "backorder", "hold_payment", "hold_compliance", "cancel_unavailable")
SERVICES = ("ground", "two_day", "overnight", "freight", "international_economy", "international_priority")
WAREHOUSES = ("LHG-EAST", "LHG-MID", "LHG-WEST")
#: Destination region -> warehouses in order of preference (SOP section 6).
RANKING: dict[str, tuple[str, ...]] = {
    "north": ("LHG-MID", "LHG-EAST", "LHG-WEST"), "south": ("LHG-WEST", "LHG-MID", "LHG-EAST"),
    "east": ("LHG-EAST", "LHG-MID", "LHG-WEST"), "west": ("LHG-WEST", "LHG-MID", "LHG-EAST"),
    "international": ("LHG-EAST", "LHG-WEST", "LHG-MID")}
REGIONS = tuple(RANKING)
HOME_COUNTRY = "GB"
LB_KG = 0.45359237
FREIGHT_ABOVE_KG = 30.0
OVERNIGHT_UP_TO_KG = 5.0
UPGRADE_FROM_VALUE = 150.0
#: Outcome -> weight. The two holds answer the same on every task (every field but the outcome empty), so
#: they stay rare enough that submitting that one answer without a tool call scores at most 2 %
#: (``tests/sop/test_constant_baseline.py``).
_WEIGHTS = (("ship_full", 0.33), ("ship_partial", 0.27), ("backorder", 0.2), ("hold_payment", 0.012),
            ("hold_compliance", 0.012), ("cancel_unavailable", 0.176))
#: Postcode areas of each domestic region (what lookup_zone answers).
AREAS = {"north": ("NE", "DH", "YO", "LS"), "south": ("BN", "PO", "SO", "EX"), "east": ("NR", "IP", "CB", "CO"),
          "west": ("BS", "GL", "TA", "CF")}
_ABROAD = (("FR", "75011"), ("DE", "80331"), ("NL", "1012 AB"), ("IE", "D02 X285"), ("ES", "08001"))
_PRODUCTS = ("Oak side table", "Linen duvet cover", "Ceramic planter", "Cast-iron skillet", "Wool throw",
             "Bamboo shelf", "Glass carafe", "Desk lamp", "Garden hose", "Lantern oil", "Paint stripper",
             "Camping gas canister", "Bath towel set", "Wall clock", "Storage basket", "Kettle")
_HAZMAT = frozenset({"Lantern oil", "Paint stripper", "Camping gas canister"})
_BAD_PAYMENT = ("pending", "failed", "declined")


def _weight_record(rng: np.random.Generator, kg: float, noise: int) -> dict[str, Any]:
    unit = "kg" if noise == 0 or rng.random() < 0.5 else pick(rng, ("g", "lb"))
    if unit == "g":
        return {"value": round(kg * 1000), "unit": "g"}
    if unit == "lb":
        return {"value": round(kg / LB_KG, 2), "unit": "lb"}
    return {"value": kg, "unit": "kg"}


def _sku_text(rng: np.random.Generator, sku: str, noise: int) -> str:
    if noise == 0 or rng.random() > 0.3 * noise:
        return sku
    return pick(rng, (sku.lower(), f" {sku} ", f"{sku.lower()}  "))


def _destination(rng: np.random.Generator, outcome: str) -> dict[str, Any]:
    abroad = outcome == "hold_compliance" or rng.random() < 0.25
    if abroad:
        country, postcode = pick(rng, _ABROAD)
        return {"country": country, "postal_code": postcode, "region": "international"}
    region = pick(rng, REGIONS[:4])
    area = pick(rng, AREAS[region])
    return {"country": HOME_COUNTRY, "postal_code": f"{area}{int(rng.integers(1, 20))} {int(rng.integers(1, 9))}"
                                                    f"{pick(rng, 'ABDEFHJLNPRSTUWXYZ')}{pick(rng, 'ABDEFHJLNPRSTUWXYZ')}",
            "region": region}


def _stock_plan(rng: np.random.Generator, outcome: str, qty: list[int], ranking: tuple[str, ...]
                ) -> dict[str, list[int]]:
    """Available units per open warehouse and SKU that give ``outcome`` (ship_full / ship_partial / backorder)."""
    n = len(qty)
    if outcome == "ship_full":
        winner = int(rng.integers(3))
        avail = {}
        for k, wh in enumerate(ranking):
            if k == winner:
                avail[wh] = [q + int(rng.integers(0, 6)) for q in qty]
            elif k < winner or rng.random() < 0.5:  # ranked higher: must fall short on some SKU
                short = [int(rng.integers(0, q)) if i == int(rng.integers(n)) or rng.random() < 0.3 else
                         q + int(rng.integers(0, 4)) for i, q in enumerate(qty)]
                if all(a >= q for a, q in zip(short, qty)):
                    short[int(rng.integers(n))] = int(rng.integers(0, qty[0])) if n == 1 else 0
                avail[wh] = short
            else:
                avail[wh] = [q + int(rng.integers(0, 4)) for q in qty]
        return avail
    avail = {}
    for wh in ranking:
        row = [int(rng.integers(0, q + 1)) if rng.random() < 0.6 else q for q in qty]
        if all(a >= q for a, q in zip(row, qty)):
            i = int(rng.integers(n))
            row[i] = int(rng.integers(0, qty[i]))
        avail[wh] = row
    if outcome == "backorder" and rng.random() < 0.4:
        avail = {wh: [0] * n for wh in ranking}
    if outcome == "ship_partial" and all(sum(row) == 0 for row in avail.values()):
        avail[ranking[0]][0] = 1
    return avail


def _inventory(rng: np.random.Generator, sku: str, name: str, kg: float, hazmat: bool, discontinued: bool,
               avail: Mapping[str, int], noise: int) -> dict[str, Any]:
    stock = []
    for wh in WAREHOUSES:
        a = avail.get(wh, 0)
        reserved = int(rng.integers(0, 4))
        on_hand = a + reserved
        if a == 0 and noise and rng.random() < 0.3 * noise:  # over-reserved: available is 0, never negative
            reserved = on_hand + int(rng.integers(1, 4))
        stock.append({"warehouse": wh, "status": vary_case(rng, "open", noise), "on_hand": on_hand,
                      "reserved": reserved})
    if noise and rng.random() < 0.25 * noise:  # a closed site with stock: never allocate from it
        stock.append({"warehouse": "LHG-NORTH", "status": vary_case(rng, "closed", noise),
                      "on_hand": int(rng.integers(20, 60)), "reserved": 0})
    return {"sku": sku, "name": name, "status": vary_case(rng, "discontinued" if discontinued else "active", noise),
            "hazmat": hazmat, "unit_weight": _weight_record(rng, kg, noise), "stock": stock}


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One order at the fulfilment desk and every record behind it; every draw comes from ``rng``."""
    noise = difficulty["noise"]
    outcome = weighted(rng, _WEIGHTS)
    dest = _destination(rng, outcome)
    n = int(rng.integers(1, difficulty["lines"] + 1))
    names = [str(x) for x in rng.choice(_PRODUCTS, size=n, replace=False)]
    if outcome == "hold_compliance" and not _HAZMAT & set(names):
        names[int(rng.integers(n))] = pick(rng, sorted(_HAZMAT - set(names)))
    elif outcome != "hold_compliance" and dest["region"] == "international":
        safe = [p for p in _PRODUCTS if p not in _HAZMAT and p not in names]
        names = [pick(rng, safe) if p in _HAZMAT else p for p in names]
        names = list(dict.fromkeys(names)) or [safe[0]]
        n = len(names)
    skus = ids(rng, "LHG-", n, width=5)
    qty = [int(rng.integers(1, 6)) for _ in range(n)]
    # Discontinued lines: all of them to cancel, else some at noise (never every line).
    if outcome == "cancel_unavailable":
        gone = [True] * n
    else:
        gone = [bool(n > 1 and noise and rng.random() < 0.15 * noise) for _ in range(n)]
        if all(gone):
            gone[0] = False
        if outcome == "hold_compliance":
            for i, p in enumerate(names):
                gone[i] = gone[i] and p not in _HAZMAT
    live = [i for i in range(n) if not gone[i]]
    if outcome == "ship_partial" and sum(qty[i] for i in live) < 2:
        qty[live[0]] = 2  # one unit wanted in all ships in full or not at all
    ranking = RANKING[dest["region"]]
    plan = _stock_plan(rng, outcome if outcome in ("ship_full", "ship_partial", "backorder") else
                       pick(rng, ("ship_full", "backorder")), [qty[i] for i in live] or [1], ranking)
    inventory = {}
    for i in range(n):
        avail = {wh: row[live.index(i)] for wh, row in plan.items()} if i in live else \
            {wh: int(rng.integers(0, 8)) for wh in WAREHOUSES}
        kg = round(float(rng.uniform(0.2, 4.0)), 2) if rng.random() < 0.9 else round(float(rng.uniform(8, 20)), 2)
        inventory[skus[i]] = _inventory(rng, skus[i], names[i], kg, names[i] in _HAZMAT, gone[i], avail, noise)
    lines = []
    for sku, q in zip(skus, qty):
        if noise and q >= 2 and rng.random() < 0.2 * noise:  # one SKU over two lines: add them up
            first = int(rng.integers(1, q))
            lines += [{"sku": _sku_text(rng, sku, noise), "quantity": first},
                      {"sku": _sku_text(rng, sku, noise), "quantity": q - first}]
        else:
            lines.append({"sku": _sku_text(rng, sku, noise), "quantity": q})
    if len(lines) > 1:
        lines = [lines[int(i)] for i in rng.permutation(len(lines))]
    order_id, customer_id = f"SO-{int(rng.integers(100000, 1000000))}", f"CU-{int(rng.integers(10000, 100000))}"
    payment = pick(rng, _BAD_PAYMENT) if outcome == "hold_payment" else pick(rng, ("captured", "authorized"))
    order: dict[str, Any] = {
        "order_id": order_id, "customer_id": customer_id, "placed_at": f"2025-0{int(rng.integers(1, 10))}-"
                                                                      f"{int(rng.integers(10, 29))}T{int(rng.integers(10, 23))}:15:00Z",
        "lines": lines, "shipping_method": pick(rng, ("standard", "express")),
        "allow_partial": outcome == "ship_partial" or (outcome != "backorder" and bool(rng.random() < 0.5)),
        "order_value": round(float(rng.uniform(20, 400)), 2),
        "ship_to": {"name": "Customer", "country": dest["country"], "postal_code": dest["postal_code"]},
        "payment": {"method": pick(rng, ("card", "paypal", "gift_card")), "status": vary_case(rng, payment, noise)}}
    if outcome == "backorder" and any(sum(row) for row in plan.values()):
        order["allow_partial"] = False
    if outcome == "hold_payment" and noise and rng.random() < 0.3:
        del order["payment"]["status"]  # no status: not captured
    if noise and not order["allow_partial"] and rng.random() < 0.3 * noise:
        del order["allow_partial"]  # missing: false
    customer: dict[str, Any] = {"customer_id": customer_id, "name": "Customer", "since": "2021-03-04",
                                "tier": vary_case(rng, pick(rng, ("standard", "gold")), noise)}
    if noise and rng.random() < 0.15 * noise:
        del customer["tier"]  # missing: standard
    return {"inputs": {"order_id": order_id}, "orders": {order_id: order}, "customers": {customer_id: customer},
            "inventory": inventory, "shipments": [], "status_updates": [],
            "shipment_number": int(rng.integers(100000, 1000000)), "plan": {"outcome": outcome}}
