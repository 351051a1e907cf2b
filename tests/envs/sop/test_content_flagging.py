"""mtrl/SOP-ContentFlagging-v0: SOP CM-12 on hand-checked worlds, its rule tables, the tools, label balance.

The shared checks (oracle, leak, determinism, robustness) run in ``test_domains.py``.
"""

from __future__ import annotations

import pytest
from harness import SOPHarness, check_pinned, direct_call, set_at

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop.content_flagging.procedure import active_strikes, category_severity, decide
from mtrl_gym.envs.sop.content_flagging.tools import TOOLS
from mtrl_gym.envs.sop.content_flagging.world import ACTIONS, CATEGORIES, SEVERITIES, THRESHOLDS

H = SOPHarness("mtrl/SOP-ContentFlagging-v0")
DOMAIN = H.domain


def hit(category, score, context="direct"):
    return {"category": category, "score": score, "context": context, "span": [0, 50]}


def example_world() -> dict:
    """The SOP's worked example (section 12)."""
    return {
        "inputs": {"report_id": "RPT-1000001", "review_date": "2025-05-20"},
        "reports": {"RPT-1000001": {"report_id": "RPT-1000001", "post_id": "PST-10000001", "reporter_id": "USR-2",
                                    "reason": "spam", "received_on": "2025-05-20"}},
        "posts": {"PST-10000001": {"post_id": "PST-10000001", "author_id": "USR-100001", "audience": "Public ",
                                   "status": "visible", "created_on": "2025-05-19", "language": "en",
                                   "text": "...", "link_count": 1}},
        "users": {"USR-100001": {"user_id": "USR-100001", "joined_on": "2020-01-01", "verified": False, "strikes": [
            {"strike_id": "STK-1", "issued_on": "2025-03-01", "status": "active"},
            {"strike_id": "STK-2", "issued_on": "2025-04-02", "status": "Overturned"},
            {"strike_id": "STK-3", "issued_on": "2024-12-01", "status": "active"}]}},
        "scans": {"PST-10000001": [hit("hate_speech", 0.72, "quoted"), hit("threat", 0.79),
                                   hit(" Personal_Data", 0.60)]},
        "links": {"PST-10000001": [{"url": "https://free-prizes.example.biz/p1", "reputation": "Suspicious"}]},
        "decisions": [], "escalations": [], "decision_number": 424242, "plan": {},
    }


BASE = {"violation_category": "personal_data", "severity": "high", "action": "remove_and_suspend",
        "active_strikes": 1, "suspension_days": 7, "escalation": "privacy", "decision_id": "MOD-424242"}
HITS = ["scans", "PST-10000001"]
STRIKES = ["users", "USR-100001", "strikes"]
CASES = {
    "the worked example": ([], BASE),
    "a threat at its threshold is critical and goes to legal": (
        [set_at([*HITS, 1, "score"], 0.80)],
        {**BASE, "violation_category": "threat", "severity": "critical", "suspension_days": 30,
         "escalation": "legal"}),
    "a quoted threat is high: ties go to threat over personal data": (
        [set_at([*HITS, 1], hit("threat", 0.95, "quoted"))],
        {**BASE, "violation_category": "threat", "severity": "high", "escalation": "none"}),
    "no strikes: high is removed, not suspended": (
        [set_at(STRIKES, [])],
        {**BASE, "action": "remove", "active_strikes": 0, "suspension_days": 0}),
    "the window starts 90 days back, inclusive": (
        [set_at([*STRIKES, 2, "issued_on"], "2025-02-19")],
        {**BASE, "active_strikes": 2, "suspension_days": 30}),
    "an upheld appeal still counts": (
        [set_at([*STRIKES, 1, "status"], "appeal_upheld")],
        {**BASE, "active_strikes": 2, "suspension_days": 30}),
    "personal data below threshold: quoted hate speech governs at medium": (
        [set_at([*HITS, 2, "score"], 0.59)],
        {**BASE, "violation_category": "hate_speech", "severity": "medium", "action": "remove",
         "suspension_days": 0, "escalation": "none"}),
    "only the suspicious link: low spam is labelled": (
        [set_at(HITS, [hit("threat", 0.2)])],
        {**BASE, "violation_category": "spam", "severity": "low", "action": "label", "suspension_days": 0,
         "escalation": "none"}),
    "a malicious link is high spam": (
        [set_at(HITS, []), set_at(["links", "PST-10000001", 0, "reputation"], "MALICIOUS")],
        {**BASE, "violation_category": "spam", "severity": "high", "escalation": "none"}),
    "nothing counts: dismiss": (
        [set_at(HITS, [hit("spam", 0.9, "quoted")]), set_at(["links", "PST-10000001"], [])],
        {**BASE, "violation_category": "none", "severity": "none", "action": "dismiss", "suspension_days": 0,
         "escalation": "none"}),
    "adult content in public is age-restricted": (
        [set_at(HITS, [hit("adult", 0.8)]), set_at(["links", "PST-10000001"], [])],
        {**BASE, "violation_category": "adult", "severity": "medium", "action": "age_restrict",
         "suspension_days": 0, "escalation": "none"}),
    "adult content in a group is no violation": (
        [set_at(HITS, [hit("adult", 0.8)]), set_at(["links", "PST-10000001"], []),
         set_at(["posts", "PST-10000001", "audience"], "members_only_group")],
        {**BASE, "violation_category": "none", "severity": "none", "action": "dismiss", "suspension_days": 0,
         "escalation": "none"}),
    "adult content with two strikes is suspended, not restricted": (
        [set_at(HITS, [hit("adult", 0.8)]), set_at(["links", "PST-10000001"], []),
         set_at([*STRIKES, 1, "status"], "active")],
        {**BASE, "violation_category": "adult", "severity": "medium", "action": "remove_and_suspend",
         "active_strikes": 2, "suspension_days": 30, "escalation": "none"}),
    "a deleted post is dismissed unscanned, strikes still counted": (
        [set_at(["posts", "PST-10000001", "status"], " Deleted_by_author")],
        {**BASE, "violation_category": "none", "severity": "none", "action": "dismiss", "suspension_days": 0,
         "escalation": "none"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, want = CASES[case]
    check_pinned(DOMAIN, example_world(), want, edits)


def test_rules_in_isolation():
    strikes = [{"issued_on": "2025-05-20", "status": "active"}, {"issued_on": "2025-05-21", "status": "active"}]
    assert active_strikes(strikes, "2025-05-20") == 1  # after the review date: not yet
    assert category_severity([hit("unknown", 1.0), hit("spam", 0.5)], [], True) == {"spam": "low"}
    assert category_severity([hit("spam", 0.9, " Quoted ")], [{"reputation": "clean"}], True) == {}
    assert decide({"adult": "low"}, 2)["action"] == "age_restrict"  # rule 7.2 replaces any "remove"
    assert decide({"adult": "low"}, 0)["action"] == "label"
    assert decide({"spam": "high", "hate_speech": "high"}, 0)["violation_category"] == "hate_speech"


def test_tools_answer_like_the_moderation_console():
    call, ctx = direct_call(TOOLS, example_world())
    with pytest.raises(ToolError, match="no report 'RPT-1'; report ids look like 'RPT-1234567'"):
        call("get_report", {"report_id": "RPT-1"})
    with pytest.raises(ToolError, match="record the decision with apply_moderation first"):
        call("escalate", {"decision_id": "MOD-424242", "team": "privacy"})
    made = call("apply_moderation", {"post_id": "pst-10000001", "action": "remove", "category": "personal_data",
                                     "severity": "high"})
    assert made["decision_id"] == "MOD-424242"
    with pytest.raises(ToolError, match="already has decision MOD-424242"):
        call("apply_moderation", {"post_id": "PST-10000001", "action": "dismiss", "category": "none",
                                  "severity": "none"})
    # Recorded with another action, and not escalated: both fields fail.
    assert DOMAIN.state_errors(ctx.state, BASE) == {
        "decision_id": "the decision was recorded with action='remove' (expected 'remove_and_suspend')",
        "escalation": "the decision was not escalated"}
    call("escalate", {"decision_id": " mod-424242", "team": "legal"})
    with pytest.raises(ToolError, match="is already escalated"):
        call("escalate", {"decision_id": "MOD-424242", "team": "privacy"})
    assert DOMAIN.state_errors(ctx.state, BASE)["escalation"] == "the decision was escalated to 'legal'"
    deleted = example_world()
    deleted["posts"]["PST-10000001"]["status"] = "deleted_by_author"
    call, _ = direct_call(TOOLS, deleted)
    with pytest.raises(ToolError, match="was deleted by its author; its text is no longer available"):
        call("scan_text", {"post_id": "PST-10000001"})


def test_the_tool_schemas_use_the_output_enums():
    props = TOOLS["apply_moderation"].parameters["properties"]
    assert tuple(props["action"]["enum"]) == ACTIONS and tuple(props["category"]["enum"]) == CATEGORIES
    assert tuple(props["severity"]["enum"]) == SEVERITIES


def test_generated_outcomes_are_the_planned_ones():
    H.check_planned(lambda seed, world: {"violation_category": world["plan"]["category"],
                                         "severity": world["plan"]["severity"],
                                         "active_strikes": world["plan"]["active_strikes"]}, n=200)


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    fields = report["fields"]
    assert fields["violation_category"] <= 0.3 and fields["severity"] <= 0.35 and fields["action"] <= 0.4
    assert len(report["classes"]["action"]) == len(ACTIONS) and len(report["classes"]["severity"]) == 5
    assert report["answer"] <= 0.01


def test_noise_adds_the_traps_the_sop_handles():
    def hits(w):
        return [(h, THRESHOLDS[h["category"].strip().lower()]) for hs in w["scans"].values() for h in hs]

    H.check_noise_traps({
        "below threshold": lambda w: any(h["score"] < t for h, t in hits(w)),
        "at threshold": lambda w: any(h["score"] == t for h, t in hits(w)),
        "uncounted strike": lambda w: len(next(iter(w["users"].values()))["strikes"]) != w["plan"]["active_strikes"]})


def test_oracle_steps():
    stats = H.check_oracle(100)
    assert stats["max_steps"] <= 8 and stats["stateful_rate"] == 1.0
