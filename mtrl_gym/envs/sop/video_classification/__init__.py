"""``mtrl/SOP-VideoClassification-v0``: classify an uploaded video for the catalogue under SOP VC-1.

Topic detections counted against a confidence threshold and summed per category, ties by
precedence, the declared category as a fallback, a music-share override, an audience
rating (mature topics, kids channels) and a monetisation level; the assignment is recorded
(the stateful action). See ``sop.md`` in this package.
"""

from __future__ import annotations

from mtrl_gym.envs.sop.base import RecordCheck, SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.envs.sop.video_classification import procedure, tools, world
from mtrl_gym.envs.sop.video_classification.world import AUDIENCES, CATEGORIES, MONETIZATION

__all__ = ["VideoClassification", "VideoClassificationEnv", "OUTPUT_SCHEMA"]

#: The final answer (SOP section 8).
OUTPUT_SCHEMA: dict[str, Field] = {
    "category": Field("enum", values=CATEGORIES, description="Section 4."),
    "audience": Field("enum", values=AUDIENCES, description="Section 5."),
    "monetization": Field("enum", values=MONETIZATION, description="Section 6."),
    "qualifying_topics": Field("list", item_type="str", description="Rule 3.2, lower case, any order; [] if none."),
    "assignment_id": Field("str", description="The id assign_category returned."),
}


class VideoClassification(SOPDomain, world=world, procedure=procedure, tools=tools):
    """Catalogue classification of an upload (SOP VC-1): category, audience, monetisation."""

    output_schema = OUTPUT_SCHEMA
    record_check = RecordCheck("assignment_id", "assignments", fields=("category", "audience", "monetization"),
                               what="assignment")


class VideoClassificationEnv(SOPEnv):
    """Classify an uploaded video for the catalogue under SOP VC-1, with tools.

    ## Description
    The agent reads SOP VC-1 (in the system prompt), reads the upload, its content signals
    and the uploader, counts the catalogue topics detected with confidence 0.40 or more,
    sums them per category (ties by a precedence list; no qualifying topic: the declared
    category if valid, else uncategorized), applies the music-share override, rates the
    audience (mature topics at 0.60 or more; kids channels), sets the monetisation (none
    for mature content and videos under 60 s; limited for kids, news and uncategorized),
    records it (``assign_category``) and submits the five fields. ``get_view_stats`` and
    ``get_transcode_status`` are distractors. Category and audience are drawn first.

    ## Observation Space
    ``Text``. At reset: the request and ``{"video_id": ...}``. After a step: the tool
    results (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown videos and uploaders and a second
    assignment are ``tool_error`` results.

    ## Starting State
    A world drawn from the seed: one upload, its topic detections (about ``topics``, plus a
    mature topic when the audience is mature) and the uploader.

    ## Rewards
    1.0 when all five fields are exactly right and the assignment carries the category,
    audience and monetisation; 0.0 otherwise. ``FieldReward`` gives the share of fields right.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-VideoClassification-v0", difficulty={"noise": 1, "distractors": True,
    "topics": 5}, split="train")``. ``noise``: 0 clear confidences, clean names; 1 topics at
    the threshold, sub-threshold detections, names in other case, a music share just under
    the override, sub-threshold mature topics; 2 more of each. ``topics``: the most topic
    detections per video (1 to 10; the oracle needs 5 calls). Other arguments as
    :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = VideoClassification()
