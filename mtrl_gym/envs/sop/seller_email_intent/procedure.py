"""SOP SE-08 as code: the reference procedure over records, and the scripted oracle over tool calls.

:func:`triage` applies the SOP to the email and the records the tools return (the seller
found by the sender's address, the cited orders); :func:`expected` feeds it the world's
records and :func:`oracle` what it fetched through ``call``, then opens the ticket.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from mtrl_gym.envs.sop.seller_email_intent.world import (BASE_PRIORITY, INTENT_QUEUE, INTENTS, KEYWORDS,
                                                         PRIORITIES)

__all__ = ["triage", "expected", "oracle", "own_text", "has_phrase", "cited_orders", "intent_of", "ticket_number"]

_ORDER = re.compile(r"(?<![0-9-])\d{3}-\d{7}-\d{7}(?![0-9-])")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def own_text(email: Mapping[str, Any]) -> str:
    """Rule 2.2: the subject and the body lines that are not quoted (first visible character ``>``)."""
    lines = [line for line in str(email["body"]).splitlines() if not line.lstrip().startswith(">")]
    return "\n".join([str(email["subject"]), *lines])


def has_phrase(text: str, phrase: str) -> bool:
    """Rule 1.2: a whole-word phrase match, case and punctuation ignored."""
    return f" {phrase} " in " " + " ".join(_NON_ALNUM.sub(" ", text.lower()).split()) + " "


def cited_orders(text: str) -> list[str]:
    """Rule 2.3: order numbers ``123-1234567-1234567`` in the text, once each, in order of appearance."""
    return list(dict.fromkeys(_ORDER.findall(text)))


def intent_of(text: str, orders: list[str]) -> str:
    """Section 3: the first intent in rank order whose phrases appear (order issues need a cited order)."""
    for intent in INTENTS[:-1]:
        if any(has_phrase(text, k) for k in KEYWORDS[intent]) and (intent != "order_issue" or orders):
            return intent
    return INTENTS[-1]


def ticket_number(world_number: int) -> str:
    """The ticket id ``create_ticket`` returns."""
    return f"SST-{world_number}"


def triage(email: Mapping[str, Any], seller_of: Callable[[str], Mapping[str, Any] | None],
           order_of: Callable[[str], Mapping[str, Any] | None]) -> dict[str, Any]:
    """Sections 2-6: every answer field but the ticket id."""
    text = own_text(email)
    orders = cited_orders(text)
    intent = intent_of(text, orders)
    seller = seller_of(str(email["from"]).strip().lower())
    out = {"intent": intent, "order_ids": orders, "seller_id": None if seller is None else seller["seller_id"]}
    if seller is None:
        return {**out, "queue": "sender_verification", "priority": "normal"}
    if intent == "order_issue":
        for number in orders:
            order = order_of(number)
            if order is None or order["seller_id"] != seller["seller_id"]:
                return {**out, "queue": "trust_and_safety", "priority": "urgent"}
    priority = BASE_PRIORITY[intent]
    if seller["tier"].strip().lower() == "premium":
        priority = PRIORITIES[PRIORITIES.index(priority) + 1]
    return {**out, "queue": INTENT_QUEUE[intent], "priority": priority}


def _answer(result: Mapping[str, Any], ticket_id: str) -> dict[str, Any]:
    keys = ("intent", "queue", "priority", "order_ids", "seller_id")
    return {**{k: result[k] for k in keys}, "ticket_id": ticket_id}


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure applied to the world's records."""
    email = world["emails"][world["inputs"]["email_id"]]
    result = triage(email, world["sellers"].get, world["orders"].get)
    return _answer(result, ticket_number(world["ticket_number"]))


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """Follow the SOP through tool calls only, then open the ticket."""
    email = call("get_email", {"email_id": inputs["email_id"]})

    def seller_of(address: str) -> Mapping[str, Any] | None:
        found = call("find_seller", {"email": address})
        return found["seller"] if found["found"] else None

    def order_of(number: str) -> Mapping[str, Any] | None:
        found = call("get_order", {"order_id": number})
        return found["order"] if found["found"] else None

    result = triage(email, seller_of, order_of)
    made = call("create_ticket", {"email_id": email["email_id"], "intent": result["intent"],
                                  "queue": result["queue"], "priority": result["priority"]})
    return _answer(result, made["ticket_id"])
