"""``mtrl/Sandbox-Orders-v0``: stateful tools over an isolated, per-episode order store.

The worked example of the *stateful* pattern. Each task names a world seed; on every
``reset`` the environment rebuilds that world's :class:`OrderStore` (customers, orders,
statuses) from the seed, so refunds and cancellations made in one episode are invisible to
every other episode and to other copies of the environment. The grade checks both the
submitted JSON answer and the final state: the right order changed, and nothing else.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Literal

import numpy as np

from mtrl_gym.envs.sandbox.env import ToolSandboxEnv
from mtrl_gym.envs.sandbox.final import FinalAnswer
from mtrl_gym.envs.sandbox.grading import Grade
from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool

__all__ = ["OrdersEnv", "OrderStore", "build_store", "sample_orders_task", "expected_action", "POLICY",
           "RETURN_WINDOW_DAYS", "TODAY"]

#: The store's "today": order dates are relative to it.
TODAY = date(2024, 6, 15)
RETURN_WINDOW_DAYS = 30
POLICY = (
    "Store policy:\n"
    f"- A delivered order may be refunded (in full) within {RETURN_WINDOW_DAYS} days of its delivery date.\n"
    "- An order that is still processing is cancelled instead of refunded.\n"
    "- A shipped order cannot be refunded or cancelled until it is delivered: deny the request.\n"
    f"- A delivered order older than {RETURN_WINDOW_DAYS} days, or one already refunded or cancelled, "
    "cannot be refunded: deny the request.\n"
    "Only ever change the order the customer asks about."
)
_FIRST = ("Ana", "Ben", "Chloé", "Dev", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kai", "Lena")
_LAST = ("Novak", "Okafor", "Petrov", "Quinn", "Rossi", "Silva", "Tanaka", "Ulrich", "Varga", "Weber")
_ITEMS = (("Desk lamp", 34.90), ("Wireless mouse", 24.50), ("Mechanical keyboard", 89.00),
          ("USB-C hub", 39.99), ("Monitor stand", 45.00), ("Noise-cancelling headphones", 199.00),
          ("Webcam", 59.90), ("Laptop sleeve", 19.95), ("Office chair cushion", 29.00), ("Travel mug", 14.50),
          ("Phone charger", 22.00), ("Bluetooth speaker", 74.00))
_STATUSES = ("processing", "shipped", "delivered", "delivered", "delivered", "cancelled", "refunded")


@dataclass
class OrderStore:
    """The world of one episode: customers and their orders (plain dicts, JSON-ready)."""

    customers: dict[str, dict[str, Any]] = field(default_factory=dict)
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)
    """Every successful write: ``{"action": "refund" | "cancel", "order_id": ...}``."""


def build_store(seed: int) -> OrderStore:
    """The order store of world ``seed`` (pure: the same seed gives the same store everywhere)."""
    rng = np.random.default_rng(seed)
    store = OrderStore()
    n_customers = int(rng.integers(4, 7))
    names = rng.choice(len(_FIRST) * len(_LAST), size=n_customers, replace=False)
    next_order = 1000 + int(rng.integers(9000))
    for k, code in enumerate(names):
        first, last = _FIRST[int(code) // len(_LAST)], _LAST[int(code) % len(_LAST)]
        cid = f"C{100 + k * 7 + int(rng.integers(7))}"
        email = f"{first.lower().replace('é', 'e')}.{last.lower()}@example.com"
        store.customers[cid] = {"customer_id": cid, "name": f"{first} {last}", "email": email,
                                "tier": ("standard", "gold")[int(rng.random() < 0.25)]}
        for _ in range(int(rng.integers(2, 5))):
            next_order += 1 + int(rng.integers(40))
            oid = f"ORD-{next_order}"
            picks = rng.choice(len(_ITEMS), size=int(rng.integers(1, 4)), replace=False)
            items = [{"name": _ITEMS[int(i)][0], "qty": int(rng.integers(1, 3)), "unit_price": _ITEMS[int(i)][1]}
                     for i in picks]
            status = _STATUSES[int(rng.integers(len(_STATUSES)))]
            placed = TODAY - timedelta(days=int(rng.integers(2, 75)))
            delivered = None
            if status in ("delivered", "refunded"):
                delivered = min(TODAY, placed + timedelta(days=int(rng.integers(2, 8))))
            store.orders[oid] = {
                "order_id": oid, "customer_id": cid, "status": status, "placed": placed.isoformat(),
                "delivered": delivered.isoformat() if delivered else None, "items": items,
                "total": round(sum(i["qty"] * i["unit_price"] for i in items), 2)}
    return store


@functools.lru_cache(maxsize=512)
def _snapshot(seed: int) -> OrderStore:
    """The pristine store of world ``seed``, shared: never mutate it (the env deep-copies it)."""
    return build_store(seed)


def expected_action(order: Mapping[str, Any]) -> str:
    """What the policy says to do with a refund request for ``order``: refunded, cancelled or denied."""
    if order["status"] == "processing":
        return "cancelled"
    if order["status"] == "delivered" and order["delivered"] is not None:
        age = (TODAY - date.fromisoformat(order["delivered"])).days
        return "refunded" if age <= RETURN_WINDOW_DAYS else "denied"
    return "denied"


_COMPLAINTS = ("My {item} arrived damaged. I want my money back.", "I no longer need the {item} I ordered. "
               "Please refund it.", "The {item} is not what I expected, please give me a refund.")


def sample_orders_task(rng) -> dict[str, Any]:
    """A refund request in a freshly drawn world, with the policy's expected outcome.

    The outcome (refunded, cancelled, denied) is drawn uniformly first, then a world and an
    order with that outcome, and an item that appears in no other order of the customer,
    so the request is unambiguous and no single answer wins by default.
    """
    action = ("refunded", "cancelled", "denied")[int(rng.integers(3))]
    while True:
        seed = int(rng.integers(2 ** 31))
        store = build_store(seed)
        options = []
        for oid in sorted(store.orders):
            order = store.orders[oid]
            if expected_action(order) != action:
                continue
            others = {i["name"] for o in store.orders.values()
                      if o["customer_id"] == order["customer_id"] and o["order_id"] != oid for i in o["items"]}
            options += [(oid, i["name"]) for i in order["items"] if i["name"] not in others]
        if options:
            break
    oid, item = options[int(rng.integers(len(options)))]
    email = store.customers[store.orders[oid]["customer_id"]]["email"]
    complaint = _COMPLAINTS[int(rng.integers(len(_COMPLAINTS)))].format(item=item.lower())
    prompt = (f"A customer writes from {email}: \"{complaint}\"\nFind the order, handle the request following "
              'the store policy, then submit {"order_id": "...", "action": "refunded" | "cancelled" | "denied"}.')
    tag = int(rng.integers(2**40))  # a draw of its own: the id reveals neither the store seed nor the order
    return {"id": f"orders-{tag:010x}", "prompt": prompt, "state_seed": seed,
            "answer": {"order_id": oid, "action": action}, "item": item}


# ------------------------------------------------------------------------------- tools


@tool
def find_customer(ctx: ToolContext, email: str) -> dict[str, Any]:
    """Find a customer by e-mail address.

    Args:
        email: The customer's e-mail address.
    """
    for c in ctx.state.customers.values():
        if c["email"] == email.strip().lower():
            return {k: c[k] for k in ("customer_id", "name", "tier")}
    raise ToolError("no customer with that e-mail address")


@tool
def list_orders(ctx: ToolContext, customer_id: str) -> list[dict[str, Any]]:
    """List a customer's orders, newest first (id, status, dates, total, item names).

    Args:
        customer_id: The customer id, e.g. "C107".
    """
    if customer_id not in ctx.state.customers:
        raise ToolError(f"no customer {customer_id!r}")
    mine = [o for o in ctx.state.orders.values() if o["customer_id"] == customer_id]
    mine.sort(key=lambda o: (o["placed"], o["order_id"]), reverse=True)
    return [{"order_id": o["order_id"], "status": o["status"], "placed": o["placed"], "total": o["total"],
             "items": [i["name"] for i in o["items"]]} for o in mine]


@tool
def get_order(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Full details of one order, including delivery date and line items.

    Args:
        order_id: The order id, e.g. "ORD-1042".
    """
    order = ctx.state.orders.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"no order {order_id!r}")
    return order


@tool
def refund_order(ctx: ToolContext, order_id: str, reason: Literal["damaged", "not_needed", "not_as_described"]) -> dict:
    """Refund a delivered order in full. Only allowed within the return window.

    Args:
        order_id: The order to refund.
        reason: Why the customer returns it.
    """
    order = ctx.state.orders.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"no order {order_id!r}")
    if expected_action(order) != "refunded":
        raise ToolError(f"order {order['order_id']} cannot be refunded (status {order['status']}"
                        + (f", delivered {order['delivered']}" if order["delivered"] else "") + ")")
    order["status"] = "refunded"
    ctx.state.log.append({"action": "refund", "order_id": order["order_id"], "reason": reason})
    return {"order_id": order["order_id"], "status": "refunded", "refunded_amount": order["total"]}


@tool
def cancel_order(ctx: ToolContext, order_id: str) -> dict:
    """Cancel an order that is still processing.

    Args:
        order_id: The order to cancel.
    """
    order = ctx.state.orders.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"no order {order_id!r}")
    if order["status"] != "processing":
        raise ToolError(f"order {order['order_id']} cannot be cancelled (status {order['status']})")
    order["status"] = "cancelled"
    ctx.state.log.append({"action": "cancel", "order_id": order["order_id"]})
    return {"order_id": order["order_id"], "status": "cancelled"}


TOOLS = ToolSet([find_customer, list_orders, get_order, refund_order, cancel_order])
ANSWER_SCHEMA = {"type": "object", "properties": {
    "order_id": {"type": "string"}, "action": {"type": "string", "enum": ["refunded", "cancelled", "denied"]}},
    "required": ["order_id", "action"], "additionalProperties": False}
_FINAL_STATUS = {"refunded": "refunded", "cancelled": "cancelled"}


class OrdersEnv(ToolSandboxEnv):
    """Handle a customer's refund request with stateful tools, following a store policy.

    ## Description
    The *stateful* sandbox pattern. Tools ``find_customer``, ``list_orders``,
    ``get_order``, ``refund_order`` and ``cancel_order`` read and write an in-memory
    :class:`OrderStore` rebuilt from the task's ``state_seed`` on every reset, so writes
    never leak between episodes or environment copies. The agent finds the order the
    customer means, applies :data:`POLICY` (refund, cancel, or deny), and submits
    ``{"order_id": ..., "action": "refunded" | "cancelled" | "denied"}``.

    ## Action Space, Action Format, Observation Space, Invalid Actions, Episode End
    As :class:`~mtrl_gym.envs.sandbox.env.ToolSandboxEnv`. A refund or cancellation the
    policy forbids is refused by the tool (``status="tool_error"``), like a real backend.

    ## Starting State
    A request drawn with ``self.np_random`` (:func:`sample_orders_task`: a fresh world seed,
    one of its orders, one item), or ``options={"task": row}`` with ``prompt``,
    ``state_seed`` and ``answer``.

    ## Rewards
    1.0 when the submitted answer matches the policy's outcome *and* the final store shows
    exactly that change (the order refunded or cancelled, or nothing changed for a denial)
    with no other order touched; otherwise 0. ``info["grade"]["details"]`` says which part failed.

    ## Information
    As the base class, plus every step: ``writes`` (successful refunds/cancellations so far).

    ## Arguments
    ``gymnasium.make("mtrl/Sandbox-Orders-v0", max_tool_calls=20)``; every
    :class:`~mtrl_gym.envs.sandbox.env.ToolSandboxEnv` argument applies.

    ## Version History
    - v0: initial version.
    """

    tools = TOOLS
    domain_prompt = "You are a customer-support agent for an online shop.\n\n" + POLICY
    final_answer = FinalAnswer(schema=ANSWER_SCHEMA, answer_description='{"order_id": ..., "action": ...}')
    task_fields = ("prompt", "state_seed", "answer")

    def sample_task(self, rng) -> dict[str, Any]:
        return sample_orders_task(rng)

    def make_state(self, task: Mapping[str, Any], seed: int) -> OrderStore:
        # A cached snapshot; the base class deep-copies it (copy_state), so writes stay in the episode.
        return _snapshot(seed)

    def step_facts(self) -> dict[str, Any]:
        return {"writes": len(self.state.log) if isinstance(self.state, OrderStore) else 0}

    def grade(self, answer: Any, task: Mapping[str, Any], state: OrderStore) -> Grade:
        expected = task["answer"]
        answer_ok = isinstance(answer, dict) and answer.get("order_id") == expected["order_id"] \
            and answer.get("action") == expected["action"]
        pristine = _snapshot(int(task["state_seed"]))
        changed = sorted(oid for oid, o in state.orders.items() if o != pristine.orders.get(oid))
        target = expected["order_id"]
        want_status = _FINAL_STATUS.get(expected["action"], pristine.orders[target]["status"])
        state_ok = state.orders[target]["status"] == want_status and set(changed) <= {target}
        details = {"answer_correct": answer_ok, "state_correct": state_ok, "changed_orders": changed}
        if answer_ok and state_ok:
            return Grade.correct(**details)
        why = [] if answer_ok else ["the submitted answer is wrong"]
        if not state_ok:
            why.append(f"the store is not in the expected state (changed: {changed or 'nothing'})")
        return Grade.wrong("; ".join(why), **details)
