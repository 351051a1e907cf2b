"""``mtrl/SOP-ReferralAbuse-v0``: review a referrer account for referral-programme abuse under SOP RP-7.

Five indicators per reviewed referral (shared device, payment, address, rapid signup, low
activity), counts, flagged referrals, a severity with two escalation rules, an action
matrix over severity and prior warnings, a claw-back amount, and a case opened with the
decision (the stateful action) unless the severity is none. See ``sop.md`` in this package.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.base import SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.envs.sop.referral_abuse import procedure, tools, world
from mtrl_gym.envs.sop.referral_abuse.world import ACTIONS, MAX_REFERRALS, MIN_REFERRALS, SEVERITIES

__all__ = ["ReferralAbuse", "ReferralAbuseEnv", "MIN_REFERRALS", "MAX_REFERRALS"]


class ReferralAbuse(SOPDomain, world=world, procedure=procedure, tools=tools):
    """SOP RP-7: review of a referrer account for referral-programme abuse."""

    output_schema = {
        "referrals_reviewed": Field("int", description="The number of reviewed referrals (section 2)."),
        "total_indicators": Field("int", description="Indicators present, added over reviewed referrals (3.1)."),
        "flagged_referrals": Field("list", item_type="str", description="The referral_ids of flagged referrals, "
                                                                         "any order; [] if none."),
        "severity": Field("enum", values=SEVERITIES, description="Section 4."),
        "action": Field("enum", values=ACTIONS, description="Section 5."),
        "clawback_amount": Field("int", description="Section 6; 0 unless the action is claw_back or suspend."),
        "case_id": Field("str", nullable=True, description="The id returned by open_abuse_case; null when the "
                                                           "severity is none."),
    }
    max_tool_calls = 40
    expected = staticmethod(procedure.expected_answer)

    def task_inputs(self, world: Mapping[str, Any]) -> dict[str, Any]:
        return {"account_id": world["referrer_id"], "review_date": world["review_date"]}

    def state_errors(self, state: Any, expected: Mapping[str, Any]) -> dict[str, str]:
        cases = state["cases"]
        if expected["case_id"] is None:
            return {"case_id": "a case was opened although the severity is none"} if cases else {}
        if not cases:
            return {"case_id": "no case was opened"}
        case = cases[0]
        filed = (case["severity"], case["action"], Counter(case["flagged_referral_ids"]), case["clawback_amount"])
        wanted = (expected["severity"], expected["action"], Counter(expected["flagged_referrals"]),
                  expected["clawback_amount"])
        if filed != wanted:
            return {"case_id": f"the case records {case['severity']}/{case['action']}, flagged "
                               f"{sorted(case['flagged_referral_ids'])}, claw-back {case['clawback_amount']}: "
                               "not the SOP's decision"}
        return {}


class ReferralAbuseEnv(SOPEnv):
    """Review a referrer account for referral-programme abuse under SOP RP-7, with tools.

    ## Description
    The agent reads SOP RP-7 (in the system prompt), looks up the referrer and its
    referrals, keeps the reviewed ones (not cancelled, created within 90 days of the review
    date, timestamps compared in UTC), checks five indicators for each reviewed referral's
    account (a device shared with the referrer or another reviewed referral, a shared card
    fingerprint, the same normalised address, a signup within 10 minutes, fewer than 3
    transactions in the first 30 days or no activity record), counts them, flags referrals
    (2+ indicators, or a shared payment method), sets a severity (flag count, then a
    shared-payment floor and a velocity escalation), reads the action from a matrix over
    severity and prior warnings, computes the claw-back of paid bonuses, opens a case
    (``open_abuse_case``) unless the severity is none, and submits the seven fields.
    ``get_marketing_preferences`` and ``get_credit_score`` are distractors. Severity is
    drawn uniformly and prior warnings half the time, so no action dominates.

    ## Observation Space
    ``Text``. At reset: the request and ``{"account_id": ..., "review_date": ...}``. After a
    step: the tool results (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown accounts, missing activity records, a
    case with referrals that are not the account's, a negative claw-back and a second case
    are ``tool_error`` results; a case with severity ``none`` is rejected by the tool's
    schema (``bad_arguments``).

    ## Starting State
    A world drawn from the seed: a referrer, 2 to ``referrals`` reviewed referrals with
    their accounts and activity records, and, with noise, ignored (cancelled or old)
    referrals.

    ## Rewards
    1.0 when all seven fields are exactly right and the case system matches the decision
    (one case with the SOP's severity, action, flagged referrals and claw-back, or no case
    when the severity is none); 0.0 otherwise. ``FieldReward`` gives the share of fields right.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-ReferralAbuse-v0", difficulty={"noise": 1, "distractors": True,
    "referrals": 6}, split="train")``. ``noise``: 0 clean records; 1 ignored referrals whose
    accounts share devices with reviewed ones, address variants, missing activity data,
    withheld bonuses, status variants; 2 more of each, UTC offsets in timestamps and
    near-miss addresses. ``referrals``: the most reviewed referrals per task (3 to 10; the
    oracle needs ``2 * reviewed + 3`` calls). Other arguments as :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = ReferralAbuse()
