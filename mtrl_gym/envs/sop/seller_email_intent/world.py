"""World generator of the SellerEmailIntent domain: one inbound seller email and the records behind it.

Outcome first: the email's intent and routing override are drawn (a registered seller, an
unknown sender, an order that belongs to another seller), then the text is composed from
phrases of that intent, phrases of lower-ranked intents (which never win), and, at noise,
quoted earlier messages holding phrases of higher-ranked intents (which SOP SE-08 says to
ignore). The reference procedure computes the label from the records; ``world["plan"]``
keeps the intent for tests.

Noise levels: 0 — one intent's phrases, no quotes, clean addresses. 1 — quoted replies with
other intents' phrases and order ids, addresses in other case, phrases in other case and
punctuation, a premium seller. 2 — more of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import ids, pick, weighted

__all__ = ["DIFFICULTY_LIMITS", "generate_world", "DEFAULT_DIFFICULTY", "MAX_ORDERS", "INTENTS", "KEYWORDS", "QUEUES",
           "INTENT_QUEUE", "PRIORITIES", "BASE_PRIORITY", "ORDER_KEYWORDS"]

DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "orders": 2}
#: Largest value of the ``orders`` knob (order ids an email may cite).
MAX_ORDERS = 4
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"orders": (1, MAX_ORDERS)}
#: Intents in rank order: the first whose phrases appear wins (SOP section 3).
INTENTS = ("account_reinstatement", "payment_issue", "order_issue", "listing_change", "general_inquiry")
KEYWORDS: dict[str, tuple[str, ...]] = {
    "account_reinstatement": ("suspended", "deactivated", "reinstate", "appeal"),
    "payment_issue": ("disbursement", "payout", "not been paid", "payment hold"),
    "order_issue": ("refund", "return", "damaged", "never arrived"),
    "listing_change": ("listing", "price change", "product page", "update my product"),
}
#: ``order_issue`` needs one of its phrases and a cited order id.
ORDER_KEYWORDS = KEYWORDS["order_issue"]
QUEUES = ("account_health", "payments", "order_support", "catalog", "seller_support", "sender_verification",
          "trust_and_safety")
INTENT_QUEUE = dict(zip(INTENTS, QUEUES[:5]))
PRIORITIES = ("low", "normal", "high", "urgent")
BASE_PRIORITY = {"account_reinstatement": "high", "payment_issue": "high", "order_issue": "normal",
                 "listing_change": "low", "general_inquiry": "low"}
_WEIGHTS = ((("account_reinstatement", "ok"), 0.14), (("payment_issue", "ok"), 0.14), (("order_issue", "ok"), 0.14),
            (("order_issue", "foreign_order"), 0.1), (("listing_change", "ok"), 0.14),
            (("general_inquiry", "ok"), 0.14), (("any", "unknown_sender"), 0.2))
_SENTENCES = {
    "account_reinstatement": ("My seller account was {k} yesterday without warning.",
                              "I would like to {k} my account, please tell me what you need.",
                              "We submitted an {k} last week and have heard nothing."),
    "payment_issue": ("The {k} for last month is missing from my bank statement.",
                      "I have {k} for three weeks now.", "Why is there a {k} on my account?"),
    "order_issue": ("The buyer asks for a {k} on order {o}.", "Order {o}: the customer says the parcel {k}.",
                    "I need help with a {k} for {o}."),
    "listing_change": ("Could you help with a {k} for my ceramic mugs?", "I want a {k} on the garden set.",
                       "Please {k} details, the photos are outdated."),
}
_FILLER = ("Thanks in advance.", "Kind regards,", "Hope you are well.", "I have been selling here since 2019.",
           "Let me know if you need anything else.", "Our warehouse is closed on Fridays.")
_NAMES = ("Maple & Co", "Brightline Goods", "Oak Hollow Crafts", "Nordic Nest", "Tidewater Supply", "Kiln House")


def _sentence(rng: np.random.Generator, intent: str, noise: int, order: str | None = None) -> str:
    keyword = pick(rng, KEYWORDS[intent])
    if noise and rng.random() < 0.3 * noise:
        keyword = pick(rng, (keyword.upper(), keyword.title()))
    text = pick(rng, _SENTENCES[intent]).format(k=keyword, o=order or "")
    return text.replace("  ", " ").replace(" .", ".").replace(" :", ":")


def _order_number(rng: np.random.Generator) -> str:
    return f"{int(rng.integers(100, 1000))}-{int(rng.integers(10**6, 10**7))}-{int(rng.integers(10**6, 10**7))}"


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One inbound email and every record behind it; every draw comes from ``rng``."""
    noise = difficulty["noise"]
    intent, route = weighted(rng, _WEIGHTS)
    if intent == "any":
        intent = pick(rng, INTENTS)
    rank = INTENTS.index(intent)
    seller_id, other_id = ids(rng, "SEL-", 2, width=6)
    address = f"{pick(rng, ('ops', 'hello', 'sales', 'anna', 'tom'))}@{seller_id[4:]}.example.com"
    sender = address if route != "unknown_sender" else f"{pick(rng, ('info', 'mail'))}@lookalike{seller_id[4:]}.example.net"
    n_orders = int(rng.integers(1, difficulty["orders"] + 1))
    cited = [_order_number(rng) for _ in range(n_orders)]
    lines: list[str] = [pick(rng, ("Hello Seller Support,", "Hi team,", "Dear support,"))]
    if intent in KEYWORDS:
        lines.append(_sentence(rng, intent, noise, cited[0]))
    if intent == "order_issue":
        lines += [f"Also affected: {o}." for o in cited[1:]]
    elif intent == "general_inquiry" or rng.random() < 0.4:
        # An order id without an order phrase never makes an order issue; list it all the same.
        lines.append(f"For reference, my last order was {cited[0]}.")
    else:
        cited = []
    for lower in INTENTS[rank + 1:-1]:  # phrases of lower-ranked intents: never win
        if lower != "order_issue" and rng.random() < 0.35:
            lines.append(_sentence(rng, lower, noise))
    lines += [pick(rng, _FILLER), pick(rng, _NAMES)]
    if noise and rng.random() < 0.4 * noise and rank > 0:  # a quoted earlier message: ignored
        quoted = pick(rng, INTENTS[:rank])
        lines += ["", "On Monday, Seller Support wrote:",
                  f"> {_sentence(rng, quoted, noise, _order_number(rng))}", f"> {pick(rng, _FILLER)}"]
    orders = {}
    for k, number in enumerate(cited):
        owner = other_id if route == "foreign_order" and k == len(cited) - 1 else seller_id
        orders[number] = {"order_id": number, "seller_id": owner, "status": pick(rng, ("shipped", "delivered"))}
    premium = bool(rng.random() < 0.3)
    sellers = {address.lower(): {"seller_id": seller_id, "legal_name": pick(rng, _NAMES),
                                 "tier": "premium" if premium else "standard", "registered_email": address}}
    from_text = sender.upper() if noise and rng.random() < 0.2 * noise else sender
    email_id = f"EM-{int(rng.integers(10**7, 10**8))}"
    subject = pick(rng, ("Question", "Help needed", "Re: your message", "Account", "Support request"))
    return {"inputs": {"email_id": email_id},
            "emails": {email_id: {"email_id": email_id, "from": from_text, "subject": subject,
                                  "body": "\n".join(lines), "received_at": "2025-06-02T09:30:00Z"}},
            "sellers": sellers, "orders": orders, "tickets": [],
            "ticket_number": int(rng.integers(100000, 1000000)),
            "plan": {"intent": intent, "route": route}}
