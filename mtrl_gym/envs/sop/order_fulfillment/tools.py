"""Tools of the OrderFulfillment domain: order, customer, inventory and zone look-ups, the two
stateful actions (create a shipment, set the order's status) and two distractors (product
reviews, a delivery-date estimate).

Every tool reads the episode's world through ``ctx.state``; unknown ids raise
:class:`ToolError`. Results are JSON records shaped like a warehouse system's API.
"""

from __future__ import annotations

from typing import Any, Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.kit import Records, find, lookup_tool, stable_number
from mtrl_gym.envs.sop.order_fulfillment.procedure import norm_sku, region_of, shipment_number

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_order", "get_customer", "check_inventory", "lookup_zone",
           "create_shipment", "update_order_status", "get_product_reviews", "estimate_delivery"]

#: The warehouses an order can ship from (the same tuple as ``world.WAREHOUSES``; a test pins it).
Warehouse = Literal["LHG-EAST", "LHG-MID", "LHG-WEST"]
Service = Literal["ground", "two_day", "overnight", "freight", "international_economy", "international_priority"]
#: The statuses ``update_order_status`` accepts: the outcomes without a shipment.
Status = Literal["backorder", "hold_payment", "hold_compliance", "cancel_unavailable"]


_order = Records("orders", "no order {!r}; order ids look like 'SO-123456'")


def _closed(ctx: ToolContext) -> str | None:
    """The action already taken on the order (one per order), if any."""
    if ctx.state["shipments"]:
        return f"shipment {ctx.state['shipments'][0]['shipment_id']}"
    if ctx.state["status_updates"]:
        return f"status {ctx.state['status_updates'][0]['status']!r}"
    return None


get_order = lookup_tool("get_order", _order, "order_id", "Read a customer order: lines (SKU, quantity), ship-to "
                        "address, shipping method, payment, flags.", 'The order id, e.g. "SO-482913".')


get_customer = lookup_tool("get_customer", Records("customers", "no customer {!r}"), "customer_id",
                           "Read a customer's account: name, customer since, loyalty tier.",
                           'The customer id from the order, e.g. "CU-48213".')


check_inventory = lookup_tool("check_inventory", Records("inventory", "no SKU {!r} in the catalogue", norm_sku), "sku",
                              "The inventory record of a SKU: status, hazmat flag, unit "
                              "weight, stock on hand and reserved per warehouse.", 'The SKU, e.g. "LHG-40213".')


@tool
def lookup_zone(country: str, postal_code: str) -> dict[str, Any]:
    """The delivery region of a ship-to address (a domestic region, or international).

    Args:
        country: The two-letter country code of the address, e.g. "GB".
        postal_code: The postcode of the address.
    """
    region = region_of(country, postal_code)
    if region is None:
        raise ToolError(f"postcode {postal_code!r} is not in a delivery area; check the address")
    return {"country": norm_sku(country), "postal_code": postal_code, "region": region}


@tool
def create_shipment(ctx: ToolContext, order_id: str, warehouse: Warehouse, service: Service,
                    lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Create the shipment of an order: from one warehouse, with one carrier service (one action per order).

    Args:
        order_id: The order id.
        warehouse: The warehouse that ships.
        service: The carrier service.
        lines: The units shipped, as [{"sku": ..., "quantity": ...}, ...].
    """
    order = _order(ctx, order_id)
    done = _closed(ctx)
    if done:
        raise ToolError(f"order {order['order_id']} already has {done}; an order gets one action")
    ordered = {norm_sku(line["sku"]) for line in order["lines"]}
    shipped: dict[str, int] = {}
    for line in lines:
        if not isinstance(line, dict) or not isinstance(line.get("sku"), str) or \
                isinstance(line.get("quantity"), bool) or not isinstance(line.get("quantity"), int):
            raise ToolError('each line must be {"sku": "<SKU>", "quantity": <integer>}, got ' + repr(line)[:80])
        sku = norm_sku(line["sku"])
        if sku not in ordered:
            raise ToolError(f"SKU {line['sku']!r} is not on order {order['order_id']}")
        if line["quantity"] < 1:
            raise ToolError(f"quantity must be at least 1, got {line['quantity']} for {sku}")
        shipped[sku] = shipped.get(sku, 0) + line["quantity"]
    if not shipped:
        raise ToolError("a shipment needs at least one line")
    record = {"shipment_id": shipment_number(ctx.state["shipment_number"]), "order_id": order["order_id"],
              "warehouse": warehouse, "service": service, "lines": dict(sorted(shipped.items())),
              "status": "created"}
    ctx.state["shipments"].append(record)
    return record


@tool
def update_order_status(ctx: ToolContext, order_id: str, status: Status) -> dict[str, Any]:
    """Set the status of an order that does not ship now (one action per order).

    Args:
        order_id: The order id.
        status: The new status.
    """
    order = _order(ctx, order_id)
    done = _closed(ctx)
    if done:
        raise ToolError(f"order {order['order_id']} already has {done}; an order gets one action")
    record = {"order_id": order["order_id"], "status": status}
    ctx.state["status_updates"].append(record)
    return record


@tool
def get_product_reviews(ctx: ToolContext, sku: str) -> dict[str, Any]:
    """Customer reviews of a product: average rating and review count.

    Args:
        sku: The SKU.
    """
    item = find(ctx.state["inventory"], norm_sku(sku), f"no SKU {sku!r} in the catalogue")
    n = stable_number("reviews", item["sku"])
    return {"sku": item["sku"], "average_rating": round(3.0 + (n % 21) / 10, 1), "reviews": n % 400}


@tool
def estimate_delivery(service: str, region: str) -> dict[str, Any]:
    """The carrier's usual transit time for a service to a region.

    Args:
        service: A carrier service name.
        region: A delivery region.
    """
    return {"service": service, "region": region, "transit_days": 1 + stable_number(service, region) % 6}


DISTRACTOR_TOOLS = ("get_product_reviews", "estimate_delivery")
TOOLS = ToolSet([get_order, get_customer, check_inventory, lookup_zone, create_shipment, update_order_status,
                 get_product_reviews, estimate_delivery])
