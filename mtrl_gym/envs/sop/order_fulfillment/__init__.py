"""``mtrl/SOP-OrderFulfillment-v0``: fulfil a customer order under SOP OF-31.

A payment check, discontinued lines cancelled, a dangerous-goods rule for shipments abroad,
allocation to one warehouse by a regional preference table (in full, in part when the
customer allows it, or back-ordered), and a carrier service from the shipped weight, the
destination, the requested method and the customer's tier; then one action (a shipment,
or a status for an order that does not ship) whose result the answer carries. See
``sop.md`` in this package for the procedure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.base import SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.envs.sop.order_fulfillment import procedure, tools, world
from mtrl_gym.envs.sop.order_fulfillment.world import OUTCOMES, SERVICES, WAREHOUSES

__all__ = ["OrderFulfillment", "OrderFulfillmentEnv", "OUTPUT_SCHEMA"]

#: The final answer (SOP section 9).
OUTPUT_SCHEMA: dict[str, Field] = {
    "outcome": Field("enum", values=OUTCOMES, description="Section 8."),
    "warehouse": Field("enum", values=WAREHOUSES, nullable=True, description="The shipping warehouse; null when "
                                                                             "nothing ships."),
    "service": Field("enum", values=SERVICES, nullable=True, description="Section 7; null when nothing ships."),
    "shipped_units": Field("int", description="Units in the shipment; 0 when nothing ships."),
    "backordered_skus": Field("list", item_type="str", description="SKUs with units left to ship later (6.5), "
                                                                   "any order; [] if none."),
    "cancelled_skus": Field("list", item_type="str", description="Discontinued SKUs (step 3), any order; [] if none."),
    "shipment_id": Field("str", nullable=True, description="The id create_shipment returned; null when nothing "
                                                           "ships."),
}


class OrderFulfillment(SOPDomain, world=world, procedure=procedure, tools=tools):
    """Larkspur Home Goods order fulfilment (SOP OF-31): payment, stock, allocation, carrier service."""

    output_schema = OUTPUT_SCHEMA

    def state_errors(self, state: Any, expected: Mapping[str, Any]) -> dict[str, str]:
        """One action, agreeing with the decision: the shipment's warehouse, service and lines, or the status."""
        shipments, updates = state["shipments"], state["status_updates"]
        if expected["shipment_id"] is None:
            if shipments:
                return {"outcome": f"a shipment was created ({shipments[0]['shipment_id']}) but the order does not "
                                   "ship"}
            if not updates or updates[0]["status"] != expected["outcome"]:
                got = repr(updates[0]["status"]) if updates else "never set"
                return {"outcome": f"the order's status was {got}, not {expected['outcome']!r}"}
            return {}
        if not shipments:
            return {"shipment_id": "no shipment was created"}
        made = shipments[0]
        order = state["orders"][state["inputs"]["order_id"]]
        want = procedure.fulfil(order, lambda c: state["customers"][c], lambda s: state["inventory"][s],
                                procedure.region_of)["ship_lines"]
        if (made["warehouse"], made["service"], made["lines"]) != (expected["warehouse"], expected["service"],
                                                                   dict(sorted(want.items()))):
            return {"shipment_id": f"the shipment ships {made['lines']} from {made['warehouse']} by "
                                   f"{made['service']}: not the SOP's allocation"}
        return {}


class OrderFulfillmentEnv(SOPEnv):
    """Fulfil a customer order under SOP OF-31, with tools.

    ## Description
    The agent reads SOP OF-31 (in the system prompt), reads the order, holds it when the
    payment is not captured or authorised, adds up the lines per SKU, checks each SKU's
    inventory record (discontinued SKUs are cancelled; an order whose SKUs are all
    discontinued is cancelled), looks the destination's delivery region up, holds a
    shipment abroad that contains a hazmat SKU, allocates the order to one open warehouse
    by the region's preference table (in full; else in part when the customer allows
    partial shipments; else back-ordered), works out the shipped weight (unit weights in
    kg, g or lb) and the carrier service (freight above 30 kg, international services,
    overnight up to 5 kg for express, a gold-tier upgrade, hazmat by ground), then creates
    the shipment (``create_shipment``) or sets the order's status
    (``update_order_status``) and submits the seven fields. ``get_product_reviews`` and
    ``estimate_delivery`` are distractors. Outcomes are drawn first (ship in full 28 %,
    ship in part 20 %, the four others 13 % each).

    ## Observation Space
    ``Text``. At reset: the request and ``{"order_id": ...}``. After a step: the tool
    results (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown orders, customers and SKUs, postcodes
    outside the delivery areas, shipment lines for SKUs not on the order and a second
    action on the order are ``tool_error`` results.

    ## Starting State
    A world drawn from the seed: one order with 1 to ``lines`` SKUs, the customer, one
    inventory record per SKU with stock in three warehouses (and, with noise, a closed one).

    ## Rewards
    1.0 when all seven fields are exactly right and the one action taken agrees with them
    (the shipment's warehouse, service and lines, or the order's status); 0.0 otherwise.
    ``FieldReward`` gives the share of fields right.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-OrderFulfillment-v0", difficulty={"noise": 1, "distractors": True,
    "lines": 3}, split="train")``. ``noise``: 0 clean records; 1 SKUs in other case and
    spacing, a SKU over two lines, weights in g or lb, over-reserved stock, a closed
    warehouse with stock, missing flags; 2 more of each. ``lines``: the most SKUs per order
    (1 to 6; the oracle needs at most ``lines + 5`` calls). Other arguments as
    :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = OrderFulfillment()
