"""``mtrl/SOP-VideoAnnotationQA-v0``: quality-check a submitted video annotation under SOP VA-2.

Per segment the first error of four (a time outside the video, a label outside the
project's label set, an overlap with the segment listed before, a label the gold reviewer
changed), a coverage check, an error count and a verdict with a lower rejection limit for
trainees; the QA result is submitted (the stateful action). See ``sop.md`` in this package.
"""

from __future__ import annotations

from mtrl_gym.envs.sop.base import RecordCheck, SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.envs.sop.video_annotation_qa import procedure, tools, world
from mtrl_gym.envs.sop.video_annotation_qa.world import VERDICTS

__all__ = ["VideoAnnotationQA", "VideoAnnotationQAEnv", "OUTPUT_SCHEMA"]

#: The final answer (SOP section 8).
OUTPUT_SCHEMA: dict[str, Field] = {
    "verdict": Field("enum", values=VERDICTS, description="Section 6."),
    "error_count": Field("int", description="Section 5."),
    "error_segments": Field("list", item_type="str", description="Segments with an error (section 4), any order; "
                                                                 "[] if none."),
    "low_coverage": Field("bool", description="Rule 5.1."),
    "qa_id": Field("str", description="The id submit_qa returned."),
}


class VideoAnnotationQA(SOPDomain, world=world, procedure=procedure, tools=tools):
    """Annotation quality assurance (SOP VA-2): segment errors, coverage, error count, verdict."""

    output_schema = OUTPUT_SCHEMA
    record_check = RecordCheck("qa_id", "qa_results", fields=("verdict", "error_count"), what="QA result")


class VideoAnnotationQAEnv(SOPEnv):
    """Quality-check a submitted video annotation under SOP VA-2, with tools.

    ## Description
    The agent reads SOP VA-2 (in the system prompt), reads the job, the video, the
    annotator and the gold review, finds each segment's first error (time outside the
    video or an empty segment, a label outside the label set, an overlap with the segment
    listed before, a label the gold reviewer changed), checks that the valid segments cover
    half the video, counts the errors, sets the verdict (a time error or 3 errors reject, 2
    for trainees), submits the QA result (``submit_qa``) and submits the five fields.
    ``get_thumbnail`` and ``get_pay_rate`` are distractors. Verdicts are drawn first.

    ## Observation Space
    ``Text``. At reset: the request and ``{"job_id": ...}``. After a step: the tool results
    (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown jobs, videos and annotators, a negative
    error count and a second QA result are ``tool_error`` results.

    ## Starting State
    A world drawn from the seed: one job of 3 to ``segments`` segments, its video, the
    annotator and (unless noise removed it) a gold review of some segments.

    ## Rewards
    1.0 when all five fields are exactly right and the QA result carries the verdict and
    the error count; 0.0 otherwise. ``FieldReward`` gives the share of fields right.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-VideoAnnotationQA-v0", difficulty={"noise": 1, "distractors": True,
    "segments": 5}, split="train")``. ``noise``: 0 labels as spelt in the label set, a gold
    review for every job; 1 labels in other case and spacing, jobs without a gold review,
    touching segments; 2 more of each. ``segments``: the most segments per job (3 to 10;
    the oracle needs 6 calls). Other arguments as :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = VideoAnnotationQA()
