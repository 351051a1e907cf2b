"""``mtrl/Sandbox-Shop-v0``: a verifiable final answer graded by a checker the task row names.

The worked example of the *verifiable outcome* pattern. Tools are pure functions over a
fixed catalogue (no cassette, no state): ``search_products``, ``get_product`` and
``convert_currency``. Each task row carries its expected ``answer`` and a ``checker`` spec
(:mod:`~mtrl_gym.envs.sandbox.grading`): a number within a tolerance, an exact SKU, a set
of SKUs in any order, or a JSON object graded field by field. The model answers in a
``<final_answer>...</final_answer>`` block (or with ``submit``); the grader is the checker
alone, and the reward is its score.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from mtrl_gym.envs.sandbox.canonical import canonical_json
from mtrl_gym.envs.sandbox.env import ToolSandboxEnv
from mtrl_gym.envs.sandbox.final import FinalAnswer
from mtrl_gym.envs.sandbox.tools import ToolError, ToolSet, tool

__all__ = ["ShopEnv", "CATALOG", "RATES", "convert", "sample_shop_task"]

#: sku -> (name, category, price, currency, units in stock).
CATALOG: dict[str, tuple[str, str, float, str, int]] = {
    "KB-101": ("Compact keyboard", "keyboards", 49.00, "EUR", 12),
    "KB-202": ("Mechanical keyboard, brown switches", "keyboards", 119.00, "USD", 0),
    "KB-303": ("Ergonomic split keyboard", "keyboards", 159.00, "GBP", 4),
    "KB-404": ("Wireless keyboard", "keyboards", 39.50, "USD", 30),
    "MS-110": ("Wireless mouse", "mice", 24.50, "EUR", 50),
    "MS-220": ("Vertical ergonomic mouse", "mice", 44.00, "GBP", 0),
    "MS-330": ("Gaming mouse", "mice", 59.99, "USD", 8),
    "MS-440": ("Travel mouse", "mice", 17.90, "EUR", 21),
    "MN-500": ("24-inch monitor", "monitors", 179.00, "EUR", 6),
    "MN-600": ("27-inch 4K monitor", "monitors", 349.00, "USD", 3),
    "MN-700": ("34-inch ultrawide monitor", "monitors", 429.00, "GBP", 0),
    "MN-800": ("Portable 15-inch monitor", "monitors", 139.00, "USD", 9),
    "HS-910": ("USB headset", "headsets", 35.00, "GBP", 14),
    "HS-920": ("Noise-cancelling headset", "headsets", 189.00, "EUR", 2),
    "HS-930": ("Gaming headset", "headsets", 79.00, "USD", 0),
    "HS-940": ("Bluetooth headset", "headsets", 65.00, "EUR", 11),
}
#: Value of one unit of each currency in EUR (fixed, so conversions are reproducible).
RATES = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17}
CATEGORIES = tuple(sorted({v[1] for v in CATALOG.values()}))
Currency = Literal["EUR", "USD", "GBP"]


def convert(amount: float, from_currency: str, to_currency: str) -> float:
    """``amount`` converted at :data:`RATES`, rounded to cents."""
    return round(amount * RATES[from_currency] / RATES[to_currency], 2)


def _product(sku: str) -> dict[str, Any]:
    name, category, price, currency, stock = CATALOG[sku]
    return {"sku": sku, "name": name, "category": category, "price": price, "currency": currency,
            "in_stock": stock > 0, "stock": stock}


@tool
def search_products(query: str = "", category: str | None = None) -> list[dict[str, Any]]:
    """Search the catalogue by words in the product name and/or by category.

    Args:
        query: Words that must all appear in the product name (case-insensitive); "" matches all.
        category: One of keyboards, mice, monitors, headsets; omit for every category.
    """
    if category is not None and category.strip().lower() not in CATEGORIES:
        raise ToolError(f"unknown category {category!r}; categories: {', '.join(CATEGORIES)}")
    words = query.lower().split()
    hits = [sku for sku, v in CATALOG.items()
            if all(w in v[0].lower() for w in words) and (category is None or v[1] == category.strip().lower())]
    return [{"sku": sku, "name": CATALOG[sku][0], "price": CATALOG[sku][2], "currency": CATALOG[sku][3]}
            for sku in hits[:10]]


@tool
def get_product(sku: str) -> dict[str, Any]:
    """Full details of a product: price, currency, category and stock.

    Args:
        sku: The product SKU, e.g. "KB-101".
    """
    key = sku.strip().upper()
    if key not in CATALOG:
        raise ToolError(f"no product with SKU {sku!r}")
    return _product(key)


@tool
def convert_currency(amount: float, from_currency: Currency, to_currency: Currency) -> dict[str, Any]:
    """Convert an amount between EUR, USD and GBP at the shop's fixed rates (rounded to cents).

    Args:
        amount: The amount to convert.
        from_currency: Currency of the amount.
        to_currency: Currency wanted.
    """
    if abs(amount) > 1e12:
        raise ToolError("amount is too large")
    return {"amount": convert(amount, from_currency, to_currency), "currency": to_currency}


TOOLS = ToolSet([search_products, get_product, convert_currency])


def _eur(sku: str) -> float:
    return convert(CATALOG[sku][2], CATALOG[sku][3], "EUR")


def sample_shop_task(rng) -> dict[str, Any]:
    """A catalogue question with its expected answer and the checker that grades it."""
    kind = ("basket_total", "cheapest_in_stock", "in_stock_set", "priciest_summary")[int(rng.integers(4))]
    category = CATEGORIES[int(rng.integers(len(CATEGORIES)))]
    skus = [s for s, v in CATALOG.items() if v[1] == category]
    if kind == "basket_total":
        a, b = (sorted(CATALOG)[int(i)] for i in rng.choice(len(CATALOG), size=2, replace=False))
        qa, qb = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        answer: Any = round(qa * _eur(a) + qb * _eur(b), 2)
        prompt = (f"What do {qa} x {CATALOG[a][0]} and {qb} x {CATALOG[b][0]} cost in total, in EUR? "
                  "Answer with a number.")
        checker: dict[str, Any] = {"type": "number", "abs_tol": 0.05}
        params: dict[str, Any] = {"a": a, "qa": qa, "b": b, "qb": qb}
    elif kind == "cheapest_in_stock":
        answer = min((s for s in skus if CATALOG[s][4] > 0), key=_eur)
        prompt = (f"Which in-stock product in the {category} category is the cheapest (compare prices in EUR)? "
                  "Answer with its SKU.")
        checker, params = {"type": "exact", "ignore_case": True}, {"category": category}
    elif kind == "in_stock_set":
        answer = sorted(s for s in skus if CATALOG[s][4] > 0)
        prompt = f"List the SKUs of all products in the {category} category that are in stock. Answer with a JSON list."
        checker, params = {"type": "set", "ignore_case": True}, {"category": category}
    else:
        top = max(skus, key=_eur)
        answer = {"sku": top, "price_eur": _eur(top), "in_stock": CATALOG[top][4] > 0}
        prompt = (f"Find the most expensive product in the {category} category (compare in EUR). Answer with a JSON "
                  'object {"sku": ..., "price_eur": ..., "in_stock": true/false}.')
        checker, params = {"type": "json_fields", "abs_tol": 0.05}, {"category": category}
    digest = hashlib.blake2b(canonical_json({"kind": kind, **params}).encode(), digest_size=5,
                             key=b"mtrl_gym").hexdigest()
    return {"id": f"shop-{kind}-{digest}", "prompt": prompt, "answer": answer, "checker": checker, "kind": kind}


class ShopEnv(ToolSandboxEnv):
    """Answer catalogue questions; the final answer is graded by the checker the task names.

    ## Description
    The *verifiable outcome* sandbox pattern. Pure tools (``search_products``,
    ``get_product``, ``convert_currency``) over a fixed catalogue of 16 products priced in
    EUR, USD and GBP. Each task row names its ``checker``: ``number`` (basket totals, within
    0.05 EUR), ``exact`` (a SKU), ``set`` (SKUs in any order) or ``json_fields`` (an object,
    partial credit per field). The model answers in ``<final_answer>...</final_answer>``.

    ## Action Space, Action Format, Observation Space, Invalid Actions, Episode End
    As :class:`~mtrl_gym.envs.sandbox.env.ToolSandboxEnv`.

    ## Starting State
    A question drawn with ``self.np_random`` (:func:`sample_shop_task`), or
    ``options={"task": row}`` / ``tasks=`` rows with ``prompt``, ``answer`` and ``checker``.

    ## Rewards
    The checker's score in [0, 1] on the final step: 1 for a correct answer; for
    ``json_fields`` the fraction of fields right; for ``set`` the Jaccard overlap. Success
    needs a score of 1.

    ## Information
    As the base class; rows also carry ``kind``.

    ## Arguments
    ``gymnasium.make("mtrl/Sandbox-Shop-v0", max_tool_calls=20)``; every
    :class:`~mtrl_gym.envs.sandbox.env.ToolSandboxEnv` argument applies.

    ## Version History
    - v0: initial version.
    """

    tools = TOOLS
    domain_prompt = ("You are a shopping assistant for an electronics shop. Look up products and prices with "
                     "the tools and convert currencies with convert_currency; never guess.")
    final_answer = FinalAnswer(description="Submit your final answer. This ends the episode.")
    task_fields = ("prompt", "answer")

    def sample_task(self, rng) -> dict[str, Any]:
        return sample_shop_task(rng)
