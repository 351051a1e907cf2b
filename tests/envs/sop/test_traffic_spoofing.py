"""mtrl/SOP-TrafficSpoofing-v0: SOP TS-3 on hand-checked worlds, its indicators, the tools, label balance.

The shared checks (oracle, leak, determinism, robustness) run in ``test_domains.py``.
"""

from __future__ import annotations

import pytest
from harness import SOPHarness, check_pinned, direct_call, set_at

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop.traffic_spoofing.procedure import indicators, norm_domain
from mtrl_gym.envs.sop.traffic_spoofing.tools import TOOLS
from mtrl_gym.envs.sop.traffic_spoofing.world import ACTIONS

H = SOPHarness("mtrl/SOP-TrafficSpoofing-v0")
DOMAIN = H.domain


def example_world() -> dict:
    """The SOP's worked example (section 9)."""
    def sig(sid, referrer, dc, ua, imps, clicks):
        return {"segment_id": sid, "referrer_domain": referrer, "datacenter_ip_share": dc, "ua_mismatch_share": ua,
                "impressions": imps, "clicks": clicks}
    return {
        "inputs": {"publisher_id": "PUB-100200", "review_date": "2025-06-30"},
        "publishers": {"PUB-100200": {"publisher_id": "PUB-100200", "seller_id": "pub-1234567", "tier": "premium",
                                      "domains": [], "payout_status": "active"}},
        "segments": {"PUB-100200": [{"segment_id": "SEG-000001", "declared_domain": "dailyharbor.example"},
                                    {"segment_id": "SEG-000002", "declared_domain": "trailmaps.example"},
                                    {"segment_id": "SEG-000003", "declared_domain": "stargazer.example"}]},
        "signals": {"SEG-000001": sig("SEG-000001", "www.DailyHarbor.example", 0.31, 0.05, 20000, 300),
                    "SEG-000002": sig("SEG-000002", "trailmaps.example", 0.0, 0.0, 4000, 40),
                    "SEG-000003": sig("SEG-000003", "stargazer.example", 0.1, 0.25, 900, 90)},
        "ads_txt": {"dailyharbor.example": {"domain": "dailyharbor.example", "found": True,
                                            "sellers": ["pub-1234567"]},
                    "trailmaps.example": {"domain": "trailmaps.example", "found": True, "sellers": ["pub-7654321"]}},
        "cases": [], "case_number": 424242, "plan": {},
    }


BASE = {"verdict": "suspicious", "action": "monitor", "flagged_segments": ["SEG-000002"], "flagged_share": 16,
        "case_id": "TQ-424242"}
SIG = ["signals"]
CASES = {
    "the worked example": ([], BASE),
    "a standard publisher's payout is held": ([set_at(["publishers", "PUB-100200", "tier"], "standard")],
                                              {**BASE, "action": "hold_payout"}),
    "1,000 impressions make the click rate count": (
        [set_at([*SIG, "SEG-000003", "impressions"], 1000)],
        {**BASE, "flagged_segments": ["SEG-000002", "SEG-000003"], "flagged_share": 20, "verdict": "spoofing",
         "action": "suspend"}),
    "spoofed and unauthorised: spoofing at any share": (
        [set_at([*SIG, "SEG-000002", "referrer_domain"], "luxurywatches.example")],
        {**BASE, "verdict": "spoofing", "action": "suspend"}),
    "a listed seller is authorised: clean": (
        [set_at(["ads_txt", "trailmaps.example", "sellers"], ["pub-7654321", "pub-1234567"])],
        {"verdict": "clean", "action": "none", "flagged_segments": [], "flagged_share": 0, "case_id": "TQ-424242"}),
    "no ads.txt file is no evidence": (
        [lambda w: w["ads_txt"].pop("trailmaps.example")],
        {"verdict": "clean", "action": "none", "flagged_segments": [], "flagged_share": 0, "case_id": "TQ-424242"}),
    "two behavioural indicators flag a segment": (
        [set_at([*SIG, "SEG-000001", "ua_mismatch_share"], 0.2)],
        {**BASE, "flagged_segments": ["SEG-000001", "SEG-000002"], "flagged_share": 96, "verdict": "spoofing",
         "action": "suspend"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, want = CASES[case]
    check_pinned(DOMAIN, example_world(), want, edits)


def test_indicators_in_isolation():
    assert norm_domain(" WWW.Trail.example ") == "trail.example"
    seg = {"declared_domain": "a.example"}
    sig = {"referrer_domain": "a.example", "datacenter_ip_share": 0.3, "ua_mismatch_share": 0.19,
           "impressions": 1000, "clicks": 50}
    assert indicators(seg, sig, {"found": False}, "s") == {"datacenter"}  # 50 clicks is 5 %: not more
    assert indicators(seg, {**sig, "clicks": 51}, {"found": True, "sellers": []}, "s") == \
        {"datacenter", "ctr_anomaly", "unauthorized_seller"}


def test_tools_answer_like_the_exchange():
    call, ctx = direct_call(TOOLS, example_world())
    with pytest.raises(ToolError, match="no publisher 'PUB-1'; publisher ids look like 'PUB-123456'"):
        call("get_publisher", {"publisher_id": "PUB-1"})
    assert call("fetch_ads_txt", {"domain": "WWW.stargazer.example"}) == {"domain": "WWW.stargazer.example",
                                                                          "found": False}
    with pytest.raises(ToolError, match=r"segment\(s\) \['SEG-9'\] are not segments of publisher PUB-100200"):
        call("file_traffic_case", {"publisher_id": "PUB-100200", "verdict": "spoofing", "action": "suspend",
                                   "flagged_segments": ["SEG-9"]})
    call("file_traffic_case", {"publisher_id": "PUB-100200", "verdict": "suspicious", "action": "monitor",
                               "flagged_segments": []})
    with pytest.raises(ToolError, match="already has case TQ-424242"):
        call("file_traffic_case", {"publisher_id": "PUB-100200", "verdict": "suspicious", "action": "monitor",
                                   "flagged_segments": ["SEG-000002"]})
    assert DOMAIN.state_errors(ctx.state, BASE) == {"case_id": "the case lists the segments []"}
    # A clean review files its case too (so no one answer fits many publishers).
    call, ctx = direct_call(TOOLS, example_world())
    clean = {"verdict": "clean", "action": "none", "flagged_segments": [], "flagged_share": 0, "case_id": "TQ-424242"}
    assert call("file_traffic_case", {"publisher_id": "PUB-100200", "verdict": "clean", "action": "none",
                                      "flagged_segments": []})["case_id"] == "TQ-424242"
    assert DOMAIN.state_errors(ctx.state, clean) == {}
    assert DOMAIN.state_errors(ctx.state, {**clean, "case_id": None}) != {}


def test_the_tool_schema_uses_the_output_enum():
    assert set(TOOLS["file_traffic_case"].parameters["properties"]["action"]["enum"]) == set(ACTIONS)


def test_generated_verdicts_are_the_planned_ones():
    H.check_planned(lambda seed, world: {"verdict": world["plan"]["verdict"]}, n=200, difficulty={"segments": 6})


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    assert report["fields"]["verdict"] <= 0.4 and report["fields"]["action"] <= 0.4
    assert report["fields"]["flagged_share"] <= 0.4 and report["answer"] <= 0.02  # every review files its own case


def test_noise_adds_the_traps_the_sop_handles():
    H.check_noise_traps({
        "www referrer": lambda w: any(s["referrer_domain"] != s["referrer_domain"].strip().lower() or
                                      s["referrer_domain"].startswith("www.") for s in w["signals"].values()),
        "no ads.txt": lambda w: any(not a["found"] for a in w["ads_txt"].values()),
        "few impressions": lambda w: any(s["impressions"] < 1000 for s in w["signals"].values())})


def test_oracle_steps():
    stats = H.check_oracle(100, difficulty={"segments": 8})
    assert stats["max_steps"] <= 2 * 8 + 4 and stats["stateful_rate"] == 1.0  # every review files a case
