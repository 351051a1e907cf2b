"""SOP VA-2 as code: the reference procedure over records, and the scripted oracle over tool calls.

:func:`review` applies the SOP to the records the tools return (the job, the video, the
annotator, the gold review); :func:`expected` feeds it the world's records and
:func:`oracle` what it fetched through ``call``, then submits the QA result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mtrl_gym.envs.sop.video_annotation_qa.world import COVERAGE_MIN, REJECT_AT

__all__ = ["review", "segment_error", "norm", "expected", "oracle", "qa_number"]


def norm(text: Any) -> str:
    """Rule 1.2: trimmed, inner spaces collapsed, case ignored."""
    return " ".join(str(text).split()).lower()


def segment_error(seg: Mapping[str, Any], previous: Mapping[str, Any] | None, duration: float, labels: set[str],
                  gold: Mapping[str, str]) -> str | None:
    """Section 4: the first error of one segment, or None."""
    if seg["start_s"] < 0 or seg["end_s"] > duration or seg["end_s"] <= seg["start_s"]:
        return "invalid_time"
    if norm(seg["label"]) not in labels:
        return "invalid_label"
    if previous is not None and seg["start_s"] < previous["end_s"]:
        return "overlap"
    if seg["segment_id"] in gold and gold[seg["segment_id"]] != norm(seg["label"]):
        return "label_mismatch"
    return None


def qa_number(world_number: int) -> str:
    return f"QA-{world_number}"


def review(job: Mapping[str, Any], video: Mapping[str, Any], annotator: Mapping[str, Any],
           gold: Mapping[str, Any]) -> dict[str, Any]:
    """Sections 3-6: every answer field but the QA id."""
    labels = {norm(x) for x in video["label_set"]}
    reviewed = {g["segment_id"]: norm(g["label"]) for g in gold.get("segments", [])} if gold.get("found") else {}
    errors, covered, time_error, previous = [], 0.0, False, None
    for seg in job["segments"]:
        kind = segment_error(seg, previous, video["duration_s"], labels, reviewed)
        if kind == "invalid_time":
            time_error = True
        else:
            covered += seg["end_s"] - seg["start_s"]
        if kind is not None:
            errors.append(seg["segment_id"])
        previous = seg
    low = covered < COVERAGE_MIN * video["duration_s"]
    count = len(errors) + low
    if time_error or count >= REJECT_AT[norm(annotator["level"])]:
        verdict = "reject"
    else:
        verdict = "rework" if count else "accept"
    return {"verdict": verdict, "error_count": count, "error_segments": errors, "low_coverage": low}


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure applied to the world's records."""
    job = world["jobs"][world["inputs"]["job_id"]]
    result = review(job, world["videos"][job["video_id"]], world["annotators"][job["annotator_id"]],
                    world["gold"][job["job_id"]])
    return {**result, "qa_id": qa_number(world["qa_number"])}


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """Follow the SOP through tool calls only, then submit the QA result."""
    job = call("get_annotation", {"job_id": inputs["job_id"]})
    video = call("get_video", {"video_id": job["video_id"]})
    annotator = call("get_annotator", {"annotator_id": job["annotator_id"]})
    gold = call("get_gold_review", {"job_id": job["job_id"]})
    result = review(job, video, annotator, gold)
    made = call("submit_qa", {"job_id": job["job_id"], "verdict": result["verdict"],
                              "error_count": result["error_count"]})
    return {**result, "qa_id": made["qa_id"]}
