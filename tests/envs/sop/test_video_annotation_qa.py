"""mtrl/SOP-VideoAnnotationQA-v0: SOP VA-2 on hand-checked worlds, its rules, the tools, label balance.

The shared checks (oracle, leak, determinism, robustness) run in ``test_domains.py``.
"""

from __future__ import annotations

import pytest
from harness import SOPHarness, check_pinned, direct_call, set_at

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop.video_annotation_qa.procedure import segment_error
from mtrl_gym.envs.sop.video_annotation_qa.tools import TOOLS
from mtrl_gym.envs.sop.video_annotation_qa.world import VERDICTS

H = SOPHarness("mtrl/SOP-VideoAnnotationQA-v0")
DOMAIN = H.domain


def example_world() -> dict:
    """The SOP's worked example (section 9)."""
    def seg(sid, start, end, label):
        return {"segment_id": sid, "start_s": start, "end_s": end, "label": label}
    return {
        "inputs": {"job_id": "JOB-100200"},
        "jobs": {"JOB-100200": {"job_id": "JOB-100200", "video_id": "VID-1", "annotator_id": "ANN-1",
                                "submitted_at": "2025-06-02T10:00:00Z", "segments": [
                                    seg("SEG-00001", 0.0, 30.0, "Person"), seg("SEG-00002", 30.0, 55.0, " vehicle"),
                                    seg("SEG-00003", 50.0, 70.0, "sign"), seg("SEG-00004", 80.0, 80.0, "animal")]}},
        "videos": {"VID-1": {"video_id": "VID-1", "duration_s": 100.0, "fps": 25,
                             "label_set": ["person", "vehicle", "animal", "sign"]}},
        "annotators": {"ANN-1": {"annotator_id": "ANN-1", "level": "certified", "joined": "2024-01-01"}},
        "gold": {"JOB-100200": {"found": True, "segments": [{"segment_id": "SEG-00002", "label": "animal"},
                                                            {"segment_id": "SEG-00001", "label": "PERSON"}]}},
        "qa_results": [], "qa_number": 424242, "plan": {},
    }


BASE = {"verdict": "reject", "error_count": 3, "error_segments": ["SEG-00002", "SEG-00003", "SEG-00004"],
        "low_coverage": False, "qa_id": "QA-424242"}
SEGS = ["jobs", "JOB-100200", "segments"]
CASES = {
    "the worked example": ([], BASE),
    "without the empty segment two errors are rework": (
        [lambda w: w["jobs"]["JOB-100200"]["segments"].pop()],
        {**BASE, "verdict": "rework", "error_count": 2, "error_segments": ["SEG-00002", "SEG-00003"]}),
    "a trainee is rejected at two": (
        [lambda w: w["jobs"]["JOB-100200"]["segments"].pop(), set_at(["annotators", "ANN-1", "level"], "trainee")],
        {**BASE, "error_count": 2, "error_segments": ["SEG-00002", "SEG-00003"]}),
    "no gold review: no mismatch": (
        [lambda w: w["jobs"]["JOB-100200"]["segments"].pop(), set_at(["gold", "JOB-100200"], {"found": False})],
        {**BASE, "verdict": "rework", "error_count": 1, "error_segments": ["SEG-00003"]}),
    "a label outside the set comes before the overlap": (
        [set_at([*SEGS, 2, "label"], "truck")], BASE),
    "an end past the video is a time error": (
        [set_at([*SEGS, 3, "end_s"], 100.1)], BASE),
    "low coverage adds one error": (
        [lambda w: w["jobs"]["JOB-100200"]["segments"].pop(), set_at(["videos", "VID-1", "duration_s"], 151.0)],
        {**BASE, "error_count": 3, "error_segments": ["SEG-00002", "SEG-00003"], "low_coverage": True}),
    "one clean segment of 30 s in 100 s: only low coverage": (
        [lambda w: w["jobs"]["JOB-100200"].update(segments=w["jobs"]["JOB-100200"]["segments"][:1])],
        {"verdict": "rework", "error_count": 1, "error_segments": [], "low_coverage": True, "qa_id": "QA-424242"}),
    "clean: accept": (
        [lambda w: w["jobs"]["JOB-100200"].update(segments=w["jobs"]["JOB-100200"]["segments"][:1]),
         set_at(["videos", "VID-1", "duration_s"], 60.0)],
        {"verdict": "accept", "error_count": 0, "error_segments": [], "low_coverage": False, "qa_id": "QA-424242"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, want = CASES[case]
    check_pinned(DOMAIN, example_world(), want, edits)


def test_rules_in_isolation():
    seg = {"segment_id": "S", "start_s": 10.0, "end_s": 20.0, "label": "Sign"}
    assert segment_error(seg, {"end_s": 10.0}, 20.0, {"sign"}, {}) is None
    assert segment_error(seg, {"end_s": 10.1}, 20.0, {"sign"}, {}) == "overlap"
    assert segment_error({**seg, "start_s": -0.1}, None, 20.0, {"sign"}, {}) == "invalid_time"
    assert segment_error(seg, None, 20.0, {"sign"}, {"S": "person"}) == "label_mismatch"


def test_tools_answer_like_the_qa_console():
    call, ctx = direct_call(TOOLS, example_world())
    with pytest.raises(ToolError, match="no annotation job 'JOB-1'; job ids look like 'JOB-123456'"):
        call("get_annotation", {"job_id": "JOB-1"})
    with pytest.raises(ToolError, match="error_count must be >= 0, got -1"):
        call("submit_qa", {"job_id": "JOB-100200", "verdict": "accept", "error_count": -1})
    call("submit_qa", {"job_id": "job-100200", "verdict": "rework", "error_count": 3})
    with pytest.raises(ToolError, match="already has QA result QA-424242"):
        call("submit_qa", {"job_id": "JOB-100200", "verdict": "reject", "error_count": 3})
    assert DOMAIN.state_errors(ctx.state, BASE) == {
        "qa_id": "the QA result was recorded with verdict='rework' (expected 'reject')"}


def test_the_tool_schema_uses_the_output_enum():
    assert tuple(TOOLS["submit_qa"].parameters["properties"]["verdict"]["enum"]) == VERDICTS


def test_generated_verdicts_are_the_planned_ones():
    H.check_planned(lambda seed, world: {"verdict": world["plan"]["verdict"]}, n=200, difficulty={"segments": 8})


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    assert report["fields"]["verdict"] <= 0.4 and report["fields"]["error_count"] <= 0.4
    assert report["fields"]["low_coverage"] <= 0.9 and report["answer"] <= 0.01


def test_noise_adds_the_traps_the_sop_handles():
    def segs(w):
        return next(iter(w["jobs"].values()))["segments"]

    H.check_noise_traps({
        "odd label": lambda w: any(s["label"] != s["label"].strip().lower() for s in segs(w)),
        "no gold": lambda w: not next(iter(w["gold"].values()))["found"],
        "touching": lambda w: any(a["end_s"] == b["start_s"] for a, b in zip(segs(w), segs(w)[1:]))},
        clean=("odd label", "no gold"))


def test_oracle_steps():
    stats = H.check_oracle(100)
    assert stats["max_steps"] == 6 and stats["stateful_rate"] == 1.0
