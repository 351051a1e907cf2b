"""``mtrl/SOP-PackageInspection-v0``: inspect an inbound receipt at the dock under SOP WI-05.

Per package: tampering, rejecting damage, holding damage and a weight variance with a
stricter limit for suppliers on probation; then the counted items against the purchase
order (shortages, overages) and one disposition for the receipt by ranked rules, recorded
with the rejected packages (the stateful action). See ``sop.md`` in this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.base import RecordCheck, SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.envs.sop.package_inspection import procedure, tools, world
from mtrl_gym.envs.sop.package_inspection.world import DISPOSITIONS

__all__ = ["PackageInspection", "PackageInspectionEnv", "OUTPUT_SCHEMA"]

#: The final answer (SOP section 8).
OUTPUT_SCHEMA: dict[str, Field] = {
    "disposition": Field("enum", values=DISPOSITIONS, description="Section 6."),
    "rejected_packages": Field("list", item_type="str", description="Rejected and tampered packages (4.1-4.2), any "
                                                                   "order; [] if none."),
    "held_packages": Field("list", item_type="str", description="Held packages (4.3), any order; [] if none."),
    "short_skus": Field("list", item_type="str", description="Section 5, any order; [] if none."),
    "over_skus": Field("list", item_type="str", description="Section 5, any order; [] if none."),
    "inspection_id": Field("str", description="The id record_inspection returned."),
}


class PackageInspection(SOPDomain, world=world, procedure=procedure, tools=tools):
    """Inbound receiving inspection (SOP WI-05): package findings, counts against the order, disposition."""

    output_schema = OUTPUT_SCHEMA
    record_check = RecordCheck("inspection_id", "records", fields=("disposition",), what="inspection")

    def state_errors(self, state: Any, expected: Mapping[str, Any]) -> dict[str, str]:
        """The record (:attr:`record_check`) must also list exactly the rejected packages."""
        errors = super().state_errors(state, expected)
        records = state["records"]
        if not errors and sorted(records[0]["rejected_packages"]) != sorted(expected["rejected_packages"]):
            errors["inspection_id"] = f"the inspection was recorded rejecting {records[0]['rejected_packages']}"
        return errors


class PackageInspectionEnv(SOPEnv):
    """Inspect an inbound receipt at the dock under SOP WI-05, with tools.

    ## Description
    The agent reads SOP WI-05 (in the system prompt), reads the receipt, its purchase order
    and the supplier, inspects every package (tampering: a broken tape or seal; rejecting
    damage: punctured, or crushed and wet; holding damage: crushed or wet; a weight
    variance above 10 %, 5 % for suppliers on probation, with weights in kg, g or lb),
    counts the items of accepted and held packages against the order (shortages and
    overages), takes the receipt's disposition from ranked rules, records the inspection
    (``record_inspection``) with the rejected packages and submits the six fields.
    ``get_dock_schedule`` and ``get_forklift_status`` are distractors. The five
    dispositions are drawn first, with equal weight.

    ## Observation Space
    ``Text``. At reset: the request and ``{"receipt_id": ...}``. After a step: the tool
    results (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown receipts, orders, suppliers and
    packages, rejecting a package not on the receipt and a second record are
    ``tool_error`` results.

    ## Starting State
    A world drawn from the seed: one receipt of 1 to ``packages`` packages, its purchase
    order, the supplier and one inspection per package.

    ## Rewards
    1.0 when all six fields are exactly right and the record carries the disposition and
    the rejected packages; 0.0 otherwise. ``FieldReward`` gives the share of fields right.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-PackageInspection-v0", difficulty={"noise": 1, "distractors": True,
    "packages": 3}, split="train")``. ``noise``: 0 weights in kg, clean SKUs; 1 weights in lb
    or g, SKUs in other case and spacing, missing seal fields, variances between the two
    limits; 2 more of each. ``packages``: the most packages per receipt (1 to 6; the oracle
    needs ``packages + 4`` calls). Other arguments as :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = PackageInspection()
