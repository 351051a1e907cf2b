"""``mtrl/SOP-ContentFlagging-v0``: review a reported post under the moderation SOP CM-12.

Active strikes in a 90-day window, scanner hits counted against per-category thresholds,
quoted evidence one level lower, link reputation for spam, adult content only in public
posts, the governing category by severity and precedence, an action matrix over severity
and strikes with an age-restriction exception, suspension length and escalation; the
decision is recorded (the stateful action) and escalated when the SOP says so. See
``sop.md`` in this package for the procedure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.base import RecordCheck, SOPDomain, SOPEnv
from mtrl_gym.envs.sop.content_flagging import procedure, tools, world
from mtrl_gym.envs.sop.content_flagging.world import ACTIONS, CATEGORIES, ESCALATIONS, SEVERITIES
from mtrl_gym.envs.sop.grading import Field

__all__ = ["ContentFlagging", "ContentFlaggingEnv", "OUTPUT_SCHEMA"]

#: The final answer (SOP section 11).
OUTPUT_SCHEMA: dict[str, Field] = {
    "violation_category": Field("enum", values=CATEGORIES, description="The governing category (section 6)."),
    "severity": Field("enum", values=SEVERITIES, description="The governing severity (section 6)."),
    "action": Field("enum", values=ACTIONS, description="Section 7."),
    "active_strikes": Field("int", description="The author's active strikes before this decision (section 3)."),
    "suspension_days": Field("int", description="Section 8; 0 without a suspension."),
    "escalation": Field("enum", values=ESCALATIONS, description="Section 9."),
    "decision_id": Field("str", description="The id apply_moderation returned."),
}


class ContentFlagging(SOPDomain, world=world, procedure=procedure, tools=tools):
    """Trust and Safety review of a reported post (SOP CM-12): evidence, severity, action, escalation."""

    output_schema = OUTPUT_SCHEMA
    record_check = RecordCheck("decision_id", "decisions", fields=("action", "violation_category", "severity"),
                               what="decision")

    def state_errors(self, state: Any, expected: Mapping[str, Any]) -> dict[str, str]:
        """The recorded decision (:attr:`record_check`) and the escalation must agree with the answer."""
        errors = super().state_errors(state, expected)
        team = state["escalations"][0]["team"] if state["escalations"] else "none"
        if team != expected["escalation"]:
            errors["escalation"] = f"the decision was escalated to {team!r}" if team != "none" else \
                "the decision was not escalated"
        return errors


class ContentFlaggingEnv(SOPEnv):
    """Review a reported post under SOP CM-12, with tools.

    ## Description
    The agent reads SOP CM-12 (in the system prompt), reads the report, the post and its
    author, counts the author's active strikes (not overturned, issued in the 90 days
    ending on the review date), dismisses reports on posts the author already deleted,
    scans the post's text and links, counts each scanner hit whose score reaches its
    category's threshold (quoted evidence one severity level lower, adult content only in
    public posts, links by reputation for spam), takes the most severe category (ties by
    a precedence list), reads the action from a matrix over severity and active strikes
    (adult content is age-restricted instead of removed), sets the suspension length and
    the escalation team, records the decision (``apply_moderation``), escalates it
    (``escalate``) when required, and submits the seven fields. ``translate_text`` and
    ``get_trending_topics`` are distractors. The governing category and severity are
    drawn first, so no outcome dominates.

    ## Observation Space
    ``Text``. At reset: the request and ``{"report_id": ..., "review_date": ...}``. After
    a step: the tool results (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown reports, posts and users, scanning a
    deleted post, a second decision, escalating an unknown decision or escalating twice
    are ``tool_error`` results.

    ## Starting State
    A world drawn from the seed: a report, the post, its author with a strike history, up
    to ``hits`` scanner hits and the post's links.

    ## Rewards
    1.0 when all seven fields are exactly right, the recorded decision carries the
    answer's action, category and severity, and the escalation matches; 0.0 otherwise.
    ``FieldReward`` gives the share of fields right.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-ContentFlagging-v0", difficulty={"noise": 1, "distractors": True,
    "hits": 4}, split="train")``. ``noise``: 0 only counted evidence; 1 sub-threshold hits of
    graver categories, hits exactly at a threshold, overturned and expired strikes, text in
    other case, adult content in groups, quoted spam; 2 more of each. ``hits``: the most
    scanner hits per post (1 to 8; the oracle needs at most 7 calls). Other arguments as
    :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = ContentFlagging()
