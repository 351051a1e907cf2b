"""mtrl/SOP-SellerEmailIntent-v0: SOP SE-08 on hand-checked worlds, its phrase rules, the tools, label balance.

The shared checks (oracle, leak, determinism, robustness) run in ``test_domains.py``.
"""

from __future__ import annotations

import pytest
from harness import SOPHarness, check_pinned, direct_call, set_at

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop.seller_email_intent.procedure import cited_orders, has_phrase, intent_of, own_text
from mtrl_gym.envs.sop.seller_email_intent.tools import TOOLS
from mtrl_gym.envs.sop.seller_email_intent.world import INTENTS, PRIORITIES, QUEUES

H = SOPHarness("mtrl/SOP-SellerEmailIntent-v0")
DOMAIN = H.domain
ORDER = "123-1234567-7654321"
BODY = ("Hi team,\nThe buyer asks for a REFUND on order 123-1234567-7654321.\n"
        "Could you help with a listing for my ceramic mugs?\nKind regards,\nOn Monday, Seller Support wrote:\n"
        "> Your account was suspended pending review of 999-1111111-2222222.")


def example_world() -> dict:
    """The SOP's worked example (section 9)."""
    return {
        "inputs": {"email_id": "EM-10000001"},
        "emails": {"EM-10000001": {"email_id": "EM-10000001", "from": "Ops@100200.example.com",
                                   "subject": "Re: your message", "body": BODY, "received_at": "2025-06-02T09:30:00Z"}},
        "sellers": {"ops@100200.example.com": {"seller_id": "SEL-100200", "legal_name": "Kiln House",
                                               "tier": "premium", "registered_email": "ops@100200.example.com"}},
        "orders": {ORDER: {"order_id": ORDER, "seller_id": "SEL-100200", "status": "delivered"}},
        "tickets": [], "ticket_number": 424242, "plan": {},
    }


BASE = {"intent": "order_issue", "queue": "order_support", "priority": "high", "order_ids": [ORDER],
        "seller_id": "SEL-100200", "ticket_id": "SST-424242"}
EMAIL = ["emails", "EM-10000001"]
CASES = {
    "the worked example": ([], BASE),
    "a standard seller keeps the base priority": ([set_at(["sellers", "ops@100200.example.com", "tier"], "standard")],
                                                  {**BASE, "priority": "normal"}),
    "the order belongs to another seller": ([set_at(["orders", ORDER, "seller_id"], "SEL-999999")],
                                            {**BASE, "queue": "trust_and_safety", "priority": "urgent"}),
    "an unknown sender goes to verification": (
        [set_at([*EMAIL, "from"], "ops@1OO200.example.com")],
        {**BASE, "queue": "sender_verification", "priority": "normal", "seller_id": None}),
    "the unquoted suspension outranks the order": (
        [set_at([*EMAIL, "body"], BODY.replace("> Your account", "Your account"))],
        {**BASE, "intent": "account_reinstatement", "queue": "account_health", "priority": "urgent",
         "order_ids": [ORDER, "999-1111111-2222222"]}),
    "no cited order: the listing phrase decides": (
        [set_at([*EMAIL, "body"], BODY.replace(" on order 123-1234567-7654321", ""))],
        {**BASE, "intent": "listing_change", "queue": "catalog", "priority": "normal", "order_ids": []}),
    "returned is not return": (
        [set_at([*EMAIL, "body"], "Hello,\nThe parcel 123-1234567-7654321 was returned to us.\nThanks.")],
        {**BASE, "intent": "general_inquiry", "queue": "seller_support", "priority": "normal"}),
    "the subject counts": (
        [set_at([*EMAIL, "subject"], "Payout missing"), set_at([*EMAIL, "body"], "Hello.")],
        {**BASE, "intent": "payment_issue", "queue": "payments", "priority": "urgent", "order_ids": []}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, want = CASES[case]
    check_pinned(DOMAIN, example_world(), want, edits)


def test_phrase_rules():
    assert has_phrase("A return-ready box", "return") and not has_phrase("returned", "return")
    assert has_phrase("we have NOT  been, paid", "not been paid")
    assert cited_orders("x 111-1111111-1111111, 111-1111111-1111111 and 1111-1111111-1111111") == \
        ["111-1111111-1111111"]
    assert own_text({"subject": "S", "body": "a\n  > quoted\nb"}) == "S\na\nb"
    assert intent_of("refund please", []) == "general_inquiry"


def test_tools_answer_like_the_support_console():
    call, ctx = direct_call(TOOLS, example_world())
    with pytest.raises(ToolError, match="no email 'EM-1'; email ids look like 'EM-12345678'"):
        call("get_email", {"email_id": "EM-1"})
    assert call("find_seller", {"email": " OPS@100200.example.com"})["seller"]["seller_id"] == "SEL-100200"
    assert call("find_seller", {"email": "x@y.z"})["found"] is False
    assert call("get_order", {"order_id": "999-1111111-2222222"})["found"] is False
    call("create_ticket", {"email_id": "em-10000001", "intent": "order_issue", "queue": "catalog", "priority": "high"})
    with pytest.raises(ToolError, match="already has ticket SST-424242"):
        call("create_ticket", {"email_id": "EM-10000001", "intent": "order_issue", "queue": "order_support",
                               "priority": "high"})
    assert DOMAIN.state_errors(ctx.state, BASE) == {
        "ticket_id": "the ticket was recorded with queue='catalog' (expected 'order_support')"}


def test_the_tool_schemas_use_the_output_enums():
    props = TOOLS["create_ticket"].parameters["properties"]
    assert tuple(props["intent"]["enum"]) == INTENTS and tuple(props["queue"]["enum"]) == QUEUES
    assert tuple(props["priority"]["enum"]) == PRIORITIES


def test_generated_intents_are_the_planned_ones():
    H.check_planned(lambda seed, world: {"intent": world["plan"]["intent"]}, n=200, difficulty={"orders": 3})


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    assert report["fields"]["intent"] <= 0.3 and report["fields"]["queue"] <= 0.2
    assert report["fields"]["priority"] <= 0.42 and report["answer"] <= 0.01


def test_noise_quotes_graver_intents():
    def quoted(noise):
        return sum(">" in DOMAIN.world(seed, {"noise": noise})["emails"].popitem()[1]["body"] for seed in range(150))
    assert quoted(0) == 0 and quoted(2) >= 30


def test_oracle_steps():
    stats = H.check_oracle(100, difficulty={"orders": 4})
    assert stats["max_steps"] <= 4 + 4 and stats["stateful_rate"] == 1.0
