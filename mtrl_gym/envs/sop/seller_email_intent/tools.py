"""Tools of the SellerEmailIntent domain: the email, seller and order look-ups, the ticket system
(the stateful action) and two distractors (an exchange rate, a shipping-label printer).

Every tool reads the episode's world through ``ctx.state``; unknown ids raise
:class:`ToolError` (a seller or order that is not found is an answer, not an error).
"""

from __future__ import annotations

from typing import Any, Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolSet, tool
from mtrl_gym.envs.sop.kit import Records, lookup_tool, record_once, stable_number
from mtrl_gym.envs.sop.seller_email_intent.procedure import ticket_number

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_email", "find_seller", "get_order", "create_ticket", "get_fx_rate",
           "print_shipping_label"]

Intent = Literal["account_reinstatement", "payment_issue", "order_issue", "listing_change", "general_inquiry"]
Queue = Literal["account_health", "payments", "order_support", "catalog", "seller_support", "sender_verification",
                "trust_and_safety"]
Priority = Literal["low", "normal", "high", "urgent"]


_email = Records("emails", "no email {!r}; email ids look like 'EM-12345678'")


get_email = lookup_tool("get_email", _email, "email_id",
                        "Read an inbound email: sender address, subject, body, received time.",
                        'The email id, e.g. "EM-48291305".')


@tool
def find_seller(ctx: ToolContext, email: str) -> dict[str, Any]:
    """Find the registered seller whose account email is this address.

    Args:
        email: An email address.
    """
    seller = ctx.state["sellers"].get(email.strip().lower())
    if seller is None:
        return {"found": False, "email": email, "message": "No seller account is registered with this address."}
    return {"found": True, "seller": seller}


@tool
def get_order(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Look an order up by its number: the seller who sold it and its status.

    Args:
        order_id: The order number, e.g. "123-1234567-1234567".
    """
    order = ctx.state["orders"].get(order_id.strip())
    if order is None:
        return {"found": False, "order_id": order_id, "message": "No order has this number."}
    return {"found": True, "order": order}


@tool
def create_ticket(ctx: ToolContext, email_id: str, intent: Intent, queue: Queue, priority: Priority
                  ) -> dict[str, Any]:
    """Open the support ticket for an email (one ticket per email).

    Args:
        email_id: The email id.
        intent: The email's intent.
        queue: The queue the ticket goes to.
        priority: The ticket's priority.
    """
    email = _email(ctx, email_id)
    record = {"ticket_id": ticket_number(ctx.state["ticket_number"]), "email_id": email["email_id"],
              "intent": intent, "queue": queue, "priority": priority, "status": "open"}
    return record_once(ctx, "tickets", record,
                       lambda first: f"email {email['email_id']} already has ticket {first['ticket_id']}")


@tool
def get_fx_rate(base: str, quote: str) -> dict[str, Any]:
    """Today's exchange rate between two currencies.

    Args:
        base: The base currency, e.g. "EUR".
        quote: The quote currency, e.g. "GBP".
    """
    return {"base": base, "quote": quote, "rate": round(0.5 + stable_number("fx", base, quote) % 150 / 100, 4)}


@tool
def print_shipping_label(order_id: str) -> dict[str, Any]:
    """Print a prepaid return shipping label for an order.

    Args:
        order_id: The order number.
    """
    return {"order_id": order_id, "label_id": f"LBL-{stable_number('label', order_id) % 10**6:06d}",
            "status": "queued"}


DISTRACTOR_TOOLS = ("get_fx_rate", "print_shipping_label")
TOOLS = ToolSet([get_email, find_seller, get_order, create_ticket, get_fx_rate, print_shipping_label])
