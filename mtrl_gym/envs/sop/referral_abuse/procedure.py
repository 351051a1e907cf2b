"""SOP RP-7 as code: the reference procedure over records, and the scripted oracle over tool calls.

:func:`review` applies the SOP to the records the tools return (the referrer, its
referrals, each reviewed referral's account and activity record); :func:`expected_answer`
feeds it the world's records and :func:`oracle` what it fetched through ``call``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta, timezone
from typing import Any

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop.referral_abuse.world import (ACTION_MATRIX, LOW_ACTIVITY_BELOW, RAPID_MINUTES, SEVERITIES,
                                                    VELOCITY_DAYS, VELOCITY_MIN, WINDOW_DAYS, severity_of)

__all__ = ["review", "referral_indicators", "expected_answer", "oracle", "normalize_address", "parse_time"]

_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def normalize_address(text: str) -> str:
    """Rule 1.4: lower case, non-alphanumerics to spaces, spaces collapsed, trimmed."""
    return " ".join(_NON_ALNUM.sub(" ", text.lower()).split())


def parse_time(text: str) -> datetime:
    """Rule 1.2: an ISO timestamp (``Z`` or an offset) as an aware UTC datetime."""
    return datetime.fromisoformat(text.strip().replace("Z", "+00:00")).astimezone(timezone.utc)


def _is(status: str, value: str) -> bool:
    return status.strip().lower() == value


def reviewed_referrals(referrals: list[Mapping[str, Any]], review_day: date) -> list[Mapping[str, Any]]:
    """Section 2: referrals not cancelled, created within the 90 days ending on the review date."""
    first = review_day - timedelta(days=WINDOW_DAYS)
    return [r for r in referrals if not _is(r["status"], "cancelled")
            and first <= parse_time(r["created_at"]).date() <= review_day]


def referral_indicators(referral: Mapping[str, Any], account: Mapping[str, Any], activity: Mapping[str, Any] | None,
                        referrer: Mapping[str, Any], other_devices: set[str]) -> list[str]:
    """Section 3: the indicators present for one reviewed referral (``activity`` None: no record)."""
    present = []
    devices = set(account["device_ids"])
    if devices & (set(referrer["device_ids"]) | other_devices):
        present.append("shared_device")
    prints = {m["fingerprint"] for m in referrer["payment_methods"]}
    if any(m["fingerprint"] in prints for m in account["payment_methods"]):
        present.append("shared_payment")
    if normalize_address(account["address"]) == normalize_address(referrer["address"]):
        present.append("shared_address")
    delay = parse_time(account["opened_at"]) - parse_time(referral["created_at"])
    if delay < timedelta(minutes=RAPID_MINUTES):
        present.append("rapid_signup")
    count = None if activity is None else activity.get("transactions_first_30_days")
    if count is None or count < LOW_ACTIVITY_BELOW:
        present.append("low_activity")
    return present


def review(referrer: Mapping[str, Any], referrals: list[Mapping[str, Any]], review_date: str,
           account_of: Callable[[str], Mapping[str, Any]],
           activity_of: Callable[[str], Mapping[str, Any] | None]) -> dict[str, Any]:
    """Sections 2-6: every field of the answer but the case id."""
    day = date.fromisoformat(review_date)
    reviewed = reviewed_referrals(referrals, day)
    accounts = {r["referral_id"]: account_of(r["referred_account_id"]) for r in reviewed}
    activities = {r["referral_id"]: activity_of(r["referred_account_id"]) for r in reviewed}
    total, flagged, payment = 0, [], False
    for r in reviewed:
        rid = r["referral_id"]
        others = {d for o in reviewed if o["referral_id"] != rid for d in accounts[o["referral_id"]]["device_ids"]}
        present = referral_indicators(r, accounts[rid], activities[rid], referrer, others)
        total += len(present)
        payment = payment or "shared_payment" in present
        if len(present) >= 2 or "shared_payment" in present:
            flagged.append(r)
    recent_from = day - timedelta(days=VELOCITY_DAYS - 1)
    recent = sum(recent_from <= parse_time(r["created_at"]).date() <= day for r in reviewed)
    severity = severity_of(len(flagged), payment, recent >= VELOCITY_MIN)
    action = ACTION_MATRIX[(severity, referrer["prior_warnings"] >= 1)]
    clawback = 0
    if action in ("claw_back", "suspend"):
        clawback = sum(r["bonus"]["amount"] for r in flagged if _is(r["bonus"]["status"], "paid"))
    return {"referrals_reviewed": len(reviewed), "total_indicators": total,
            "flagged_referrals": [r["referral_id"] for r in flagged], "severity": severity, "action": action,
            "clawback_amount": clawback}


def expected_answer(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure applied to the world's records."""
    referrer = world["accounts"][world["referrer_id"]]

    def activity_of(acc: str) -> Mapping[str, Any] | None:
        record = world["activity"].get(acc)
        return None if record is None or record.get("unavailable") else record

    result = review(referrer, world["referrals"][world["referrer_id"]], world["review_date"],
                    lambda acc: world["accounts"][acc], activity_of)
    return {**result, "case_id": None if result["severity"] == SEVERITIES[0] else world["case_id"]}


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """Follow the SOP through tool calls only: look up, count, decide, open the case if needed."""
    account_id = inputs["account_id"]
    referrer = call("get_account", {"account_id": account_id})
    referrals = call("list_referrals", {"account_id": account_id})["referrals"]

    def activity_of(acc: str) -> Mapping[str, Any] | None:
        try:
            return call("get_activity", {"account_id": acc})
        except ToolError:
            return None  # no activity record: the low-activity indicator is present

    result = review(referrer, referrals, inputs["review_date"],
                    lambda acc: call("get_account", {"account_id": acc}), activity_of)
    case_id = None
    if result["severity"] != SEVERITIES[0]:
        case = call("open_abuse_case", {"account_id": referrer["account_id"], "severity": result["severity"],
                                        "action": result["action"], "flagged_referral_ids": result["flagged_referrals"],
                                        "clawback_amount": result["clawback_amount"]})
        case_id = case["case_id"]
    return {**result, "case_id": case_id}
