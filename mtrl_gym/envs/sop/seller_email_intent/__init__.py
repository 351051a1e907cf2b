"""``mtrl/SOP-SellerEmailIntent-v0``: triage an inbound seller email under SOP SE-08.

Quoted lines ignored, cited order numbers extracted, the intent from ranked phrase lists
(an order issue needs a cited order), the sender checked against the seller registry, the
cited orders checked against the sender for order issues, a queue and a priority (raised
for premium sellers), then one ticket whose id the answer carries. See ``sop.md`` in this
package for the procedure.
"""

from __future__ import annotations

from mtrl_gym.envs.sop.base import RecordCheck, SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.envs.sop.seller_email_intent import procedure, tools, world
from mtrl_gym.envs.sop.seller_email_intent.world import INTENTS, PRIORITIES, QUEUES

__all__ = ["SellerEmailIntent", "SellerEmailIntentEnv", "OUTPUT_SCHEMA"]

#: The final answer (SOP section 8).
OUTPUT_SCHEMA: dict[str, Field] = {
    "intent": Field("enum", values=INTENTS, description="Section 3."),
    "queue": Field("enum", values=QUEUES, description="Section 5."),
    "priority": Field("enum", values=PRIORITIES, description="Section 6."),
    "order_ids": Field("list", item_type="str", description="Order numbers cited outside quotes (2.3), any order; "
                                                            "[] if none."),
    "seller_id": Field("str", nullable=True, description="The sender's seller id; null for an unknown sender."),
    "ticket_id": Field("str", description="The id create_ticket returned."),
}


class SellerEmailIntent(SOPDomain, world=world, procedure=procedure, tools=tools):
    """Seller Support email triage (SOP SE-08): intent, sender and order checks, queue, priority."""

    output_schema = OUTPUT_SCHEMA
    record_check = RecordCheck("ticket_id", "tickets", fields=("intent", "queue", "priority"), what="ticket")


class SellerEmailIntentEnv(SOPEnv):
    """Triage an inbound seller email under SOP SE-08, with tools.

    ## Description
    The agent reads SOP SE-08 (in the system prompt), reads the email, drops quoted lines,
    extracts the cited order numbers, finds the intent from ranked phrase lists (an order
    issue needs a cited order), looks the sender's address up in the seller registry,
    checks every cited order of an order issue belongs to the sender, picks the queue
    (unknown senders to verification, foreign orders to trust and safety) and the priority
    (raised one level for premium sellers), opens the ticket (``create_ticket``) and submits
    the six fields. ``get_fx_rate`` and ``print_shipping_label`` are distractors. The intent
    and the routing are drawn first, so no class dominates.

    ## Observation Space
    ``Text``. At reset: the request and ``{"email_id": ...}``. After a step: the tool
    results (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown emails and a second ticket are
    ``tool_error`` results; unknown sellers and orders are answered ``found: false``.

    ## Starting State
    A world drawn from the seed: one email citing up to ``orders`` order numbers, the
    seller registry entry and the cited orders.

    ## Rewards
    1.0 when all six fields are exactly right and the ticket carries the answer's intent,
    queue and priority; 0.0 otherwise. ``FieldReward`` gives the share of fields right.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-SellerEmailIntent-v0", difficulty={"noise": 1, "distractors": True,
    "orders": 2}, split="train")``. ``noise``: 0 one intent's phrases, no quotes; 1 quoted
    replies with graver intents' phrases, addresses and phrases in other case; 2 more of
    each. ``orders``: the most order numbers an email cites (1 to 4; the oracle needs at
    most ``orders + 3`` calls). Other arguments as :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = SellerEmailIntent()
