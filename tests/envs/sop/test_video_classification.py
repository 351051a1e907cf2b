"""mtrl/SOP-VideoClassification-v0: SOP VC-1 on hand-checked worlds, its rules, the tools, label balance.

The shared checks (oracle, leak, determinism, robustness) run in ``test_domains.py``.
"""

from __future__ import annotations

import pytest
from harness import SOPHarness, check_pinned, direct_call, set_at

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop.video_classification.procedure import category_of
from mtrl_gym.envs.sop.video_classification.tools import TOOLS
from mtrl_gym.envs.sop.video_classification.world import CATEGORIES

H = SOPHarness("mtrl/SOP-VideoClassification-v0")
DOMAIN = H.domain


def example_world() -> dict:
    """The SOP's worked example (section 9)."""
    topics = [("Football", 0.40), ("comedy", 0.35), ("trailer", 0.45), ("cycling", 0.30), ("gambling", 0.55)]
    return {
        "inputs": {"video_id": "VID-1002000"},
        "uploads": {"VID-1002000": {"video_id": "VID-1002000", "uploader_id": "UPL-10020", "duration_s": 300,
                                    "declared_category": "Sports", "title": "x"}},
        "signals": {"VID-1002000": {"video_id": "VID-1002000", "music_share": 0.65,
                                    "topics": [{"topic": t, "confidence": c} for t, c in topics]}},
        "uploaders": {"UPL-10020": {"uploader_id": "UPL-10020", "channel_type": "creator", "region": "EU"}},
        "assignments": [], "assignment_number": 424242, "plan": {},
    }


BASE = {"category": "entertainment", "audience": "general", "monetization": "full",
        "qualifying_topics": ["football", "trailer"], "assignment_id": "CAT-424242"}
TOPICS = ["signals", "VID-1002000", "topics"]
CASES = {
    "the worked example": ([], BASE),
    "a tie goes to the earlier category": ([set_at([*TOPICS, 2, "confidence"], 0.40)],
                                           {**BASE, "category": "sports"}),
    "the music override": ([set_at(["signals", "VID-1002000", "music_share"], 0.70)], {**BASE, "category": "music"}),
    "news keeps its category under music": (
        [set_at(["signals", "VID-1002000", "music_share"], 0.9), set_at([*TOPICS, 1], {"topic": "Interview ",
                                                                                       "confidence": 0.9})],
        {**BASE, "category": "news", "monetization": "limited",
         "qualifying_topics": ["football", "interview", "trailer"]}),
    "no qualifying topic: the declared category": (
        [set_at([*TOPICS, 0, "confidence"], 0.39), set_at([*TOPICS, 2, "confidence"], 0.1)],
        {**BASE, "category": "sports", "qualifying_topics": []}),
    "no qualifying topic and no valid declared category": (
        [set_at([*TOPICS, 0, "confidence"], 0.39), set_at([*TOPICS, 2, "confidence"], 0.1),
         set_at(["uploads", "VID-1002000", "declared_category"], "vlog")],
        {**BASE, "category": "uncategorized", "monetization": "limited", "qualifying_topics": []}),
    "gambling at 0.60 is mature": ([set_at([*TOPICS, 4, "confidence"], 0.60)],
                                   {**BASE, "audience": "mature", "monetization": "none"}),
    "a kids channel": ([set_at(["uploaders", "UPL-10020", "channel_type"], " Kids_Channel")],
                       {**BASE, "audience": "kids", "monetization": "limited"}),
    "a short is not monetised": ([set_at(["uploads", "VID-1002000", "duration_s"], 59)],
                                 {**BASE, "monetization": "none"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, want = CASES[case]
    check_pinned(DOMAIN, example_world(), want, edits)


def test_rules_in_isolation():
    assert category_of([{"topic": "recipe", "confidence": 0.5}, {"topic": "baking", "confidence": 0.5},
                        {"topic": "guitar", "confidence": 0.9}], 0.0, "x") == ("food", ["baking", "guitar", "recipe"])
    assert category_of([], 0.7, "news") == ("news", [])
    assert category_of([], 0.7, "food") == ("music", [])


def test_tools_answer_like_the_catalogue():
    call, ctx = direct_call(TOOLS, example_world())
    with pytest.raises(ToolError, match="no upload 'VID-1'; video ids look like 'VID-1234567'"):
        call("get_upload", {"video_id": "VID-1"})
    call("assign_category", {"video_id": "vid-1002000", "category": "sports", "audience": "general",
                             "monetization": "full"})
    with pytest.raises(ToolError, match="is already classified \\(CAT-424242\\)"):
        call("assign_category", {"video_id": "VID-1002000", "category": "entertainment", "audience": "general",
                                 "monetization": "full"})
    assert DOMAIN.state_errors(ctx.state, BASE) == {
        "assignment_id": "the assignment was recorded with category='sports' (expected 'entertainment')"}


def test_the_tool_schema_uses_the_output_enum():
    assert tuple(TOOLS["assign_category"].parameters["properties"]["category"]["enum"]) == CATEGORIES


def test_generated_outcomes_are_the_planned_ones():
    H.check_planned(lambda seed, world: {"category": world["plan"]["category"], "audience": world["plan"]["audience"]},
                    n=200, difficulty={"topics": 3})


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    assert report["fields"]["category"] <= 0.2 and report["fields"]["audience"] <= 0.4
    assert report["fields"]["monetization"] <= 0.55 and report["answer"] <= 0.01


def test_noise_adds_the_traps_the_sop_handles():
    def topics(w):
        return next(iter(w["signals"].values()))["topics"]

    H.check_noise_traps({"at threshold": lambda w: any(t["confidence"] == 0.40 for t in topics(w)),
                         "odd name": lambda w: any(t["topic"] != t["topic"].strip().lower() for t in topics(w))})


def test_oracle_steps():
    stats = H.check_oracle(100)
    assert stats["max_steps"] == 5 and stats["stateful_rate"] == 1.0
