"""Tools of the DangerousGoods domain: manifest, SDS and lab look-ups, unit conversion, the
classification register (the stateful action), and two distractors (freight rates, tariff codes).

Every tool reads the episode's world through ``ctx.state``; look-ups of unknown ids raise
:class:`ToolError` with a message the model can act on. Results are JSON records shaped
like a warehouse system's API, never containing the label.
"""

from __future__ import annotations

import math
from typing import Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.dangerous_goods.procedure import normalize_code
from mtrl_gym.envs.sop.dangerous_goods.world import LB_KG
from mtrl_gym.envs.sop.kit import OneRecord, Records, lookup_tool, stable_number

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_shipment", "get_safety_data_sheet", "get_lab_report", "convert_units",
           "file_classification", "get_freight_rates", "lookup_tariff_code"]

#: The hazard classes (the same tuple as ``world.CLASSES``; a test pins it).
HazardClass = Literal["Class A", "Class B", "Class C", "Class D"]


_shipment = OneRecord("shipment", "shipment_id", "no shipment {!r} in the outbound queue")
# product codes compare without case and surrounding spaces (rule 1.2), as find() does
_sds = Records("sds", "no safety data sheet for product {!r}; check the code on the manifest (lines without a UN "
                      "number are not dangerous goods and have none)")


get_shipment = lookup_tool("get_shipment", _shipment, "shipment_id",
                           "Look up an outbound shipment and its manifest lines "
                           "(product code, UN number, net quantity).", 'The shipment id, e.g. "SHP-204518".')


get_safety_data_sheet = lookup_tool("get_safety_data_sheet", _sds, "product_code",
                                    "Get a product's safety data sheet with all its revisions "
                                    "(flash point, oral LD50, reactivity code).", 'The product code, e.g. "PRD-10442".')


@tool
def get_lab_report(ctx: ToolContext, product_code: str) -> dict:
    """Get the latest in-house lab report of a product (measured flash point, reactivity code).

    Args:
        product_code: The product code, e.g. "PRD-10442".
    """
    sheet = _sds(ctx, product_code)
    report = ctx.state["lab_reports"].get(sheet["product_code"])
    if report is None:
        raise ToolError(f"no lab report on file for product {sheet['product_code']}")
    return report


_FACTORS = {("F", "C"): None, ("C", "F"): None, ("g/kg", "mg/kg"): 1000.0, ("mg/kg", "g/kg"): 0.001,
            ("g", "kg"): 0.001, ("kg", "g"): 1000.0, ("lb", "kg"): LB_KG, ("kg", "lb"): 1 / LB_KG}


@tool
def convert_units(value: float, from_unit: Literal["C", "F", "mg/kg", "g/kg", "g", "kg", "lb"],
                  to_unit: Literal["C", "F", "mg/kg", "g/kg", "g", "kg", "lb"]) -> dict:
    """Convert a temperature, a dose or a mass between units.

    Args:
        value: The value to convert.
        from_unit: Its unit.
        to_unit: The unit wanted.
    """
    if not math.isfinite(value):
        raise ToolError(f"value must be a finite number, got {value!r}")
    if from_unit == to_unit:
        return {"value": value, "unit": to_unit}
    if (from_unit, to_unit) not in _FACTORS:
        raise ToolError(f"cannot convert {from_unit} to {to_unit}: the units measure different things")
    if from_unit == "F":
        out = (value - 32) * 5 / 9
    elif from_unit == "C":
        out = value * 9 / 5 + 32
    else:
        out = value * _FACTORS[(from_unit, to_unit)]
    if not math.isfinite(out):
        raise ToolError(f"{value} {from_unit} is out of range for {to_unit}")
    return {"value": round(out, 6), "unit": to_unit}


@tool
def file_classification(ctx: ToolContext, shipment_id: str, product_code: str, hazard_class: HazardClass,
                        total_score: int) -> dict:
    """File a shipment's hazard classification in the register (once per shipment).

    Args:
        shipment_id: The shipment id.
        product_code: The governing product's code.
        hazard_class: The shipment's hazard class.
        total_score: The governing product's total score (0 to 12).
    """
    shipment = _shipment(ctx, shipment_id)
    codes = {normalize_code(line["product_code"]) for line in shipment["lines"] if line["un_number"]}
    if normalize_code(product_code) not in codes:
        raise ToolError(f"product {product_code!r} is not a dangerous-goods line of shipment {shipment['shipment_id']}")
    if not 0 <= total_score <= 12:
        raise ToolError(f"total_score must be between 0 and 12, got {total_score}")
    if ctx.state["filings"]:
        raise ToolError(f"shipment {shipment['shipment_id']} is already classified "
                        f"(classification_id {ctx.state['filings'][0]['classification_id']}); a filing cannot be changed")
    filing = {"classification_id": ctx.state["classification_id"], "shipment_id": shipment["shipment_id"],
              "product_code": _sds(ctx, product_code)["product_code"], "hazard_class": hazard_class,
              "total_score": total_score, "status": "filed"}
    ctx.state["filings"].append(filing)
    return filing


@tool
def get_freight_rates(origin: str, destination: str, mode: Literal["road", "rail", "sea", "air"]) -> dict:
    """Quote freight rates between two cities for a transport mode.

    Args:
        origin: Origin city.
        destination: Destination city.
        mode: Transport mode.
    """
    base = 40 + stable_number(origin.strip().lower(), destination.strip().lower(), mode) % 400
    return {"origin": origin, "destination": destination, "mode": mode, "currency": "EUR",
            "rate_per_100kg": base, "dangerous_goods_surcharge_pct": 15 + base % 20, "transit_days": 1 + base % 9}


@tool
def lookup_tariff_code(ctx: ToolContext, product_code: str) -> dict:
    """Look up a product's customs tariff (HS) code and import duty rate.

    Args:
        product_code: The product code.
    """
    sheet = _sds(ctx, product_code)
    n = stable_number(sheet["product_code"])
    return {"product_code": sheet["product_code"], "hs_code": f"{3800 + n % 100}.{n % 90 + 10}",
            "duty_rate_pct": round((n % 65) / 10, 1)}


DISTRACTOR_TOOLS = ("get_freight_rates", "lookup_tariff_code")
TOOLS = ToolSet([get_shipment, get_safety_data_sheet, get_lab_report, convert_units, file_classification,
                 get_freight_rates, lookup_tariff_code])
