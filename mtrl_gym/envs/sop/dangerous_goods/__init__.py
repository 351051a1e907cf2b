"""``mtrl/SOP-DangerousGoods-v0``: classify an outbound dangerous-goods shipment under SOP DG-04.

Four scored checks per product (flammability, toxicity, reactivity, quantity), a sum,
class thresholds with escalation rules, defaults for missing data, and a governing product
across the shipment; the result is filed in a register (the stateful action) whose id the
answer carries. See ``sop.md`` in this package for the procedure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.base import SOPDomain, SOPEnv
from mtrl_gym.envs.sop.dangerous_goods import procedure, tools, world
from mtrl_gym.envs.sop.dangerous_goods.world import CLASSES, GAP_DEFAULTS, MAX_PRODUCTS
from mtrl_gym.envs.sop.grading import Field, normalize_enum

__all__ = ["DangerousGoods", "DangerousGoodsEnv", "MAX_PRODUCTS"]

_SCORE = "An integer from 0 to 3 (SOP section 3)."


class DangerousGoods(SOPDomain, world=world, procedure=procedure, tools=tools):
    """SOP DG-04: hazard classification of outbound dangerous-goods shipments."""

    output_schema = {
        "governing_product": Field("str", description="The governing product's code as printed on its SDS."),
        "flammability_score": Field("int", description=_SCORE),
        "toxicity_score": Field("int", description=_SCORE),
        "reactivity_score": Field("int", description=_SCORE),
        "quantity_score": Field("int", description=_SCORE),
        "total_score": Field("int", description="The sum of the four scores."),
        "hazard_class": Field("enum", values=CLASSES, description="The shipment's hazard class (section 4)."),
        "data_gaps": Field("list", item_type="enum", values=tuple(GAP_DEFAULTS),
                           description="The governing product's data gaps (section 3), any order; [] if none."),
        "classification_id": Field("str", description="The id returned by file_classification."),
    }
    expected = staticmethod(procedure.expected_answer)

    def task_inputs(self, world: Mapping[str, Any]) -> dict[str, Any]:
        return {"shipment_id": world["shipment"]["shipment_id"]}

    def state_errors(self, state: Any, expected: Mapping[str, Any]) -> dict[str, str]:
        filings = state["filings"]
        if not filings:
            return {"classification_id": "the classification was never filed"}
        filed = filings[0]
        if (filed["product_code"], normalize_enum(filed["hazard_class"]), filed["total_score"]) != \
                (expected["governing_product"], normalize_enum(expected["hazard_class"]), expected["total_score"]):
            return {"classification_id": f"the filed classification ({filed['product_code']}, "
                                         f"{filed['hazard_class']}, total {filed['total_score']}) is not the SOP's"}
        return {}


class DangerousGoodsEnv(SOPEnv):
    """Classify an outbound dangerous-goods shipment under SOP DG-04, with tools.

    ## Description
    The agent reads SOP DG-04 (in the system prompt), fetches the shipment's manifest,
    each dangerous-goods product's safety data sheet (several revisions; only the latest
    counts) and lab report (its values override the SDS), scores four checks per product
    (flammability from the flash point, toxicity from the oral LD50, reactivity from a
    code, quantity from the summed manifest lines, with unit conversions), turns the sum
    into a hazard class with two escalation rules, picks the governing product, files the
    classification (``file_classification``, once) and submits the governing product's
    scores, class, data gaps and the classification id. Missing values have SOP defaults
    and are reported as data gaps. ``get_freight_rates`` and ``lookup_tariff_code`` are
    distractors. Worlds are generated outcome-first, so the four classes are equally likely.

    ## Observation Space
    ``Text``. At reset: the request and ``{"shipment_id": ...}``. After a step: the tool
    results (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown shipment or product ids, a product
    without a lab report, a filing for a product not on the manifest, a second filing and
    impossible unit conversions are ``tool_error`` results.

    ## Starting State
    A world drawn from the seed: one shipment with ``products`` dangerous-goods products
    (1 to 4), their SDSs and lab reports, and, with noise, non-dangerous manifest lines.

    ## Rewards
    1.0 when all nine fields are exactly right and the register holds the governing
    product's classification; 0.0 otherwise. ``FieldReward`` gives the share of fields right.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-DangerousGoods-v0", difficulty={"noise": 1, "distractors": True,
    "products": 2}, split="train")``. ``noise``: 0 clean records, 1 unit variants, missing
    and overriding values, data gaps, superseded SDS revisions, messy codes and extra lines,
    2 more of each. ``products``: dangerous-goods products per shipment (1 to 4; the oracle
    needs ``2 * products + 2`` calls). Other arguments as :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = DangerousGoods()
