"""Tools of the VideoAnnotationQA domain: annotation, video, annotator and gold-review look-ups, the QA
result (the stateful action) and two distractors (a thumbnail, a pay rate).

Every tool reads the episode's world through ``ctx.state``; unknown ids raise
:class:`ToolError` (a job without a gold review answers ``found: false``).
"""

from __future__ import annotations

from typing import Any, Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.kit import Records, find, lookup_tool, record_once, stable_number
from mtrl_gym.envs.sop.video_annotation_qa.procedure import qa_number

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_annotation", "get_video", "get_annotator", "get_gold_review",
           "submit_qa", "get_thumbnail", "get_pay_rate"]

Verdict = Literal["accept", "rework", "reject"]


_job = Records("jobs", "no annotation job {!r}; job ids look like 'JOB-123456'")


get_annotation = lookup_tool("get_annotation", _job, "job_id",
                             "Read a submitted annotation job: the video, the annotator "
                             "and the labelled segments in time order.", 'The job id, e.g. "JOB-482913".')


get_video = lookup_tool("get_video", Records("videos", "no video {!r}"), "video_id",
                        "Read a video's metadata: duration in seconds, frame rate, the project's label set.",
                        "The video id from the job.")


get_annotator = lookup_tool("get_annotator", Records("annotators", "no annotator {!r}"), "annotator_id",
                            "Read an annotator's profile: level (trainee or certified).",
                            "The annotator id from the job.")


@tool
def get_gold_review(ctx: ToolContext, job_id: str) -> dict[str, Any]:
    """The gold reviewer's labels for a sample of the job's segments, if the job was sampled.

    Args:
        job_id: The job id.
    """
    job = _job(ctx, job_id)
    return {"job_id": job["job_id"], **ctx.state["gold"][job["job_id"]]}


@tool
def submit_qa(ctx: ToolContext, job_id: str, verdict: Verdict, error_count: int) -> dict[str, Any]:
    """Submit the QA result of a job (once per job).

    Args:
        job_id: The job id.
        verdict: The QA verdict.
        error_count: The number of errors found.
    """
    job = _job(ctx, job_id)
    if error_count < 0:
        raise ToolError(f"error_count must be >= 0, got {error_count}")
    record = {"qa_id": qa_number(ctx.state["qa_number"]), "job_id": job["job_id"], "verdict": verdict,
              "error_count": error_count}
    return record_once(ctx, "qa_results", record,
                       lambda first: f"job {job['job_id']} already has QA result {first['qa_id']}")


@tool
def get_thumbnail(ctx: ToolContext, video_id: str, at_s: float) -> dict[str, Any]:
    """A thumbnail URL of a video frame.

    Args:
        video_id: The video id.
        at_s: The time of the frame in seconds.
    """
    video = find(ctx.state["videos"], video_id, f"no video {video_id!r}")
    return {"video_id": video["video_id"], "url": f"https://thumbs.example/{video['video_id']}/{at_s:.1f}.jpg"}


@tool
def get_pay_rate(annotator_id: str) -> dict[str, Any]:
    """An annotator's pay rate per annotated minute.

    Args:
        annotator_id: The annotator id.
    """
    return {"annotator_id": annotator_id, "rate_per_minute": round(0.2 + stable_number("pay", annotator_id) % 50 / 100,
                                                                   2)}


DISTRACTOR_TOOLS = ("get_thumbnail", "get_pay_rate")
TOOLS = ToolSet([get_annotation, get_video, get_annotator, get_gold_review, submit_qa, get_thumbnail, get_pay_rate])
