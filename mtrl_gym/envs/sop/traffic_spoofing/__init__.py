"""``mtrl/SOP-TrafficSpoofing-v0``: review a publisher's ad traffic for spoofing under SOP TS-3.

Per traffic segment: a spoofed referrer domain, a seller missing from the declared
domain's ads.txt, and three behavioural indicators (data-centre share, user-agent
mismatch share, click rate on enough impressions); segments flagged by rule, the flagged
share of impressions, a verdict with an escalation for a spoofed and unauthorised segment,
an action by verdict and tier, and a case filed unless the traffic is clean. See
``sop.md`` in this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.base import RecordCheck, SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.envs.sop.traffic_spoofing import procedure, tools, world
from mtrl_gym.envs.sop.traffic_spoofing.world import ACTIONS, VERDICTS

__all__ = ["TrafficSpoofing", "TrafficSpoofingEnv", "OUTPUT_SCHEMA"]

#: The final answer (SOP section 8).
OUTPUT_SCHEMA: dict[str, Field] = {
    "verdict": Field("enum", values=VERDICTS, description="Section 6."),
    "action": Field("enum", values=ACTIONS, description="Section 7."),
    "flagged_segments": Field("list", item_type="str", description="Section 5, any order; [] if none."),
    "flagged_share": Field("int", description="Rule 6.1: the flagged share of impressions, a whole percent."),
    "case_id": Field("str", description="The id file_traffic_case returned (every review files a case)."),
}


class TrafficSpoofing(SOPDomain, world=world, procedure=procedure, tools=tools):
    """Ad traffic-quality review of a publisher (SOP TS-3): indicators, flags, verdict, action, case."""

    output_schema = OUTPUT_SCHEMA
    record_check = RecordCheck("case_id", "cases", fields=("verdict", "action"), what="case")

    def state_errors(self, state: Any, expected: Mapping[str, Any]) -> dict[str, str]:
        """The case (:attr:`record_check`) must also list exactly the flagged segments."""
        errors = super().state_errors(state, expected)
        cases = state["cases"]
        if not errors and cases and sorted(cases[0]["flagged_segments"]) != sorted(expected["flagged_segments"]):
            errors["case_id"] = f"the case lists the segments {cases[0]['flagged_segments']}"
        return errors


class TrafficSpoofingEnv(SOPEnv):
    """Review a publisher's ad traffic for spoofing under SOP TS-3, with tools.

    ## Description
    The agent reads SOP TS-3 (in the system prompt), reads the publisher and its traffic
    segments, fetches each segment's signals and each declared domain's ads.txt, checks
    five indicators per segment (a referrer that is not the declared domain after
    normalisation, the publisher's seller id missing from an ads.txt file that exists, a
    data-centre share of 30 % or more, a user-agent mismatch share of 20 % or more, a click
    rate above 5 % on at least 1,000 impressions), flags segments (a domain indicator, or
    two behavioural ones), computes the flagged share of impressions, sets the verdict (20 %
    or more, or a spoofed and unauthorised segment: spoofing) and the action (by verdict and
    tier), files a case (``file_traffic_case``; every review files one, a clean review too, so
    no one answer fits many publishers) and submits the
    five fields. ``get_campaign_budget`` and ``convert_currency`` are distractors.

    ## Observation Space
    ``Text``. At reset: the request and ``{"publisher_id": ..., "review_date": ...}``. After a
    step: the tool results (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown publishers and segments, a case with
    another publisher's segments and a second case are ``tool_error`` results; a domain
    without ads.txt answers ``found: false``.

    ## Starting State
    A world drawn from the seed: a publisher with 2 to ``segments`` traffic segments, their
    signals and the domains' ads.txt files.

    ## Rewards
    1.0 when all five fields are exactly right and the case system matches (one case with
    the verdict, action and flagged segments, or none when clean); 0.0 otherwise.
    ``FieldReward`` gives the share of fields right.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-TrafficSpoofing-v0", difficulty={"noise": 1, "distractors": True,
    "segments": 4}, split="train")``. ``noise``: 0 clean records; 1 referrers with ``www.``
    and other case, missing ads.txt files, lone indicators, high click rates on few
    impressions, shares at a threshold; 2 more of each. ``segments``: the most segments per
    publisher (2 to 8; the oracle needs at most ``2 * segments + 3`` calls). Other
    arguments as :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = TrafficSpoofing()
