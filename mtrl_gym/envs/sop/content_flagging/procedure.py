"""SOP CM-12 as code: the reference procedure over records, and the scripted oracle over tool calls.

:func:`review` applies the SOP to the records the tools return (the report, the post, the
author, the scanner hits, the links); :func:`expected` feeds it the world's records and
:func:`oracle` what it fetched through ``call``, then records the decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import date, timedelta
from typing import Any

from mtrl_gym.envs.sop.content_flagging.world import (ACTION_MATRIX, BASE_SEVERITY, PRECEDENCE, SEVERITIES,
                                                      STRIKE_WINDOW_DAYS, THRESHOLDS)

__all__ = ["review", "expected", "oracle", "norm", "active_strikes", "category_severity", "decide", "decision_number"]


def norm(text: Any) -> str:
    """Rule 1.2: trimmed, inner spaces collapsed, case ignored."""
    return " ".join(str(text).split()).lower() if text is not None else ""


def _lower(severity: str) -> str:
    return SEVERITIES[max(0, SEVERITIES.index(severity) - 1)]


def active_strikes(strikes: list[Mapping[str, Any]], review_date: str) -> int:
    """Section 3: strikes not overturned, issued within the 90 days ending on the review date."""
    day = date.fromisoformat(review_date)
    first = day - timedelta(days=STRIKE_WINDOW_DAYS)
    return sum(norm(s["status"]) != "overturned" and first <= date.fromisoformat(s["issued_on"]) <= day
               for s in strikes)


def category_severity(hits: list[Mapping[str, Any]], links: list[Mapping[str, Any]], public: bool
                      ) -> dict[str, str]:
    """Sections 4-5: the severity of every category with counted evidence (quoted evidence one level lower)."""
    out: dict[str, str] = {}

    def raise_to(category: str, severity: str) -> None:
        if severity != "none" and SEVERITIES.index(severity) > SEVERITIES.index(out.get(category, "none")):
            out[category] = severity

    for hit in hits:
        category = norm(hit["category"])
        if category not in THRESHOLDS or hit["score"] < THRESHOLDS[category]:
            continue
        if category == "adult" and not public:
            continue
        base = BASE_SEVERITY[category]
        raise_to(category, _lower(base) if norm(hit["context"]) == "quoted" else base)
    for link in links:
        reputation = norm(link["reputation"])
        raise_to("spam", "high" if reputation == "malicious" else "low" if reputation == "suspicious" else "none")
    return out


def decide(severities: Mapping[str, str], strikes: int) -> dict[str, Any]:
    """Sections 6-9: governing category, severity, action, suspension and escalation."""
    if not severities:
        category, severity = "none", "none"
    else:
        category = max(PRECEDENCE, key=lambda c: (SEVERITIES.index(severities.get(c, "none")), -PRECEDENCE.index(c)))
        severity = severities[category]
    action = ACTION_MATRIX[severity][min(strikes, 2)]
    if category == "adult" and action == "remove":
        action = "age_restrict"
    suspension = 0
    if action == "remove_and_suspend":
        suspension = 30 if severity == "critical" or strikes >= 2 else 7
    escalation = "legal" if severity == "critical" else \
        "privacy" if category == "personal_data" and severity == "high" else "none"
    return {"violation_category": category, "severity": severity, "action": action, "active_strikes": strikes,
            "suspension_days": suspension, "escalation": escalation}


def decision_number(world_number: int) -> str:
    """The decision id ``apply_moderation`` returns."""
    return f"MOD-{world_number}"


def review(post: Mapping[str, Any], author: Mapping[str, Any], review_date: str,
           hits_of: Callable[[str], list[Mapping[str, Any]]], links_of: Callable[[str], list[Mapping[str, Any]]]
           ) -> dict[str, Any]:
    """Sections 2-9: every answer field but the decision id."""
    strikes = active_strikes(author["strikes"], review_date)
    if norm(post["status"]) == "deleted_by_author":
        return decide({}, 0) | {"active_strikes": strikes, "action": "dismiss"}
    severities = category_severity(hits_of(post["post_id"]), links_of(post["post_id"]),
                                   norm(post["audience"]) == "public")
    return decide(severities, strikes)


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure applied to the world's records."""
    report = world["reports"][world["inputs"]["report_id"]]
    post = world["posts"][report["post_id"]]
    result = review(post, world["users"][post["author_id"]], world["inputs"]["review_date"],
                    lambda p: world["scans"][p], lambda p: world["links"][p])
    return {**result, "decision_id": decision_number(world["decision_number"])}


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """Follow the SOP through tool calls only, then record the decision (and escalate if needed)."""
    report = call("get_report", {"report_id": inputs["report_id"]})
    post = call("get_post", {"post_id": report["post_id"]})
    author = call("get_author", {"user_id": post["author_id"]})
    result = review(post, author, inputs["review_date"], lambda p: call("scan_text", {"post_id": p})["hits"],
                    lambda p: call("check_links", {"post_id": p})["links"])
    made = call("apply_moderation", {"post_id": post["post_id"], "action": result["action"],
                                     "category": result["violation_category"], "severity": result["severity"]})
    if result["escalation"] != "none":
        call("escalate", {"decision_id": made["decision_id"], "team": result["escalation"]})
    return {**result, "decision_id": made["decision_id"]}
