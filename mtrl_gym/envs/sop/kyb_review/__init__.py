"""``mtrl/SOP-KYBReview-v0``: review a business onboarding application by a bank's KYB procedure.

The agent checks the business in the registry (status, name under a documented
normalisation), works out the beneficial owners from ownership filings (25% or more,
direct plus indirect through entity owners, plus the control person), screens each
against the watch list (scores, dates of birth, potential vs confirmed matches), verifies
the funding bank account, decides approve / escalate / request_information from a
decision matrix, files one case (a stateful action whose id the answer must carry) and
submits seven fields. The SOP is ``sop.md`` next to this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.base import RecordCheck, SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.envs.sop.kyb_review import procedure, tools, world

__all__ = ["KYBReview", "KYBReviewEnv", "OUTPUT_SCHEMA"]

#: The final answer's fields (SOP Step 8).
OUTPUT_SCHEMA: dict[str, Field] = {
    "case_id": Field("str", description="The id open_case returned"),
    "decision": Field("enum", values=("approve", "escalate", "request_information")),
    "registration_check": Field("enum", values=("verified", "name_mismatch", "inactive", "not_found")),
    "ownership_check": Field("enum", values=("consistent", "undisclosed_owner", "no_filing")),
    "beneficial_owners": Field("list", item_type="str", description="Person ids (e.g. \"P-123456\"), any order"),
    "sanctions_result": Field("enum", values=("clear", "potential_match", "confirmed_match")),
    "bank_check": Field("enum", values=("verified", "holder_mismatch", "invalid")),
}


class KYBReview(SOPDomain, world=world, procedure=procedure, tools=tools):
    """The KYBReview domain: SOP FC-210 of a (synthetic) bank's financial-crimes team."""

    output_schema = OUTPUT_SCHEMA
    record_check = RecordCheck("case_id", "cases", fields=("decision",), what="case")

    def task_inputs(self, world: Mapping[str, Any]) -> dict[str, Any]:
        return {"application_id": world["application_id"]}


class KYBReviewEnv(SOPEnv):
    """Review a business onboarding application by following a bank's KYB SOP with eight tools.

    ## Description
    The system prompt holds SOP FC-210 (``sop.md``): check the business in the registry
    (active statuses, business names compared after a documented normalisation, a
    same-number business in another jurisdiction is someone else), derive the beneficial
    owners from the ownership filing (25% or more counting stakes held through entity
    owners, whose filings must be fetched too, plus the control person; the declared
    owners when there is no filing), screen each against the watch list (score threshold,
    dates of birth, confirmed vs potential matches), verify the funding account (status,
    business account type, holder name), apply the decision matrix and file one case. The
    first observation holds only the application id.

    ## Observation Space, Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Tools: ``get_application``,
    ``lookup_registry``, ``get_ownership_filing``, ``screen_sanctions``,
    ``verify_bank_account``, ``open_case`` (stateful; refuses a second case for the same
    application) and two distractors, ``get_credit_report`` and ``search_adverse_media``
    (hidden with ``difficulty={"distractors": False}``).

    ## Starting State
    A world drawn from a seed (:func:`~.world.generate_world`): one application, registry
    records, ownership filings, a watch list with decoys, bank records. The decision is
    approve for about 30% of tasks, escalate 40%, request_information 30%.

    ## Rewards
    1.0 when all seven fields are right, no extra keys are present and the case was filed
    with the expected decision; else 0.0. ``FieldReward`` gives the per-field mean.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-KYBReview-v0", difficulty={"noise": 2, "max_owners": 6})``.
    Knobs: ``noise`` (0, 1, 2; default 1), ``distractors`` (default true), ``max_owners``
    (1-8; default 4). Other arguments as :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = KYBReview()
