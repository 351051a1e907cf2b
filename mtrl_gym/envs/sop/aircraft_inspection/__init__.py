"""``mtrl/SOP-AircraftInspection-v0``: a release inspection with one output field per check.

The agent grades the engines, the landing gear, the avionics faults (against the MEL) and
airworthiness-directive compliance, decides the release disposition, and records the
inspection (``record_inspection`` returns the inspection id the answer must carry). The SOP
is ``sop.md`` in this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.aircraft_inspection import procedure, tools, world
from mtrl_gym.envs.sop.base import SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field

__all__ = ["AircraftInspection", "AircraftInspectionEnv", "OUTPUT_SCHEMA"]

_CHECK = ("pass", "monitor", "fail")
#: The final record (SOP section 9).
OUTPUT_SCHEMA: dict[str, Field] = {
    "engine_check": Field("enum", values=_CHECK, description="The worst engine result (step 2)."),
    "landing_gear_check": Field("enum", values=_CHECK, description="The worst tyre or brake result (step 3)."),
    "avionics_check": Field("enum", values=("pass", "deferred", "fail"), description="Step 4."),
    "ad_compliance": Field("enum", values=("compliant", "due_soon", "overdue"), description="Step 5."),
    "overdue_ads": Field("list", item_type="str", description="Numbers of the overdue applicable ADs, any order."),
    "disposition": Field("enum", values=("airworthy", "airworthy_with_deferrals", "grounded"),
                         description="The release disposition (step 6)."),
    "inspection_id": Field("str", description="The id record_inspection returned."),
}
_RECORDED = ("engine_check", "landing_gear_check", "avionics_check", "ad_compliance", "disposition")


class AircraftInspection(SOPDomain, world=world, procedure=procedure, tools=tools):
    """Halden Air line-maintenance release inspection (SOP HA-LM-22): several checks, one field each."""

    output_schema = OUTPUT_SCHEMA

    def state_errors(self, state: Any, expected: Mapping[str, Any]) -> dict[str, str]:
        """The recorded inspection must exist, under the task's inspector, with the label's results."""
        record = state["state"]["inspection"]
        if record is None:
            return {"inspection_id": "no inspection was recorded"}
        errors = {key: f"recorded as {record[key]!r}" for key in _RECORDED if record[key] != expected[key]}
        if record["inspector_id"] != state["inputs"]["inspector_id"]:
            errors["inspection_id"] = f"recorded under inspector {record['inspector_id']!r}, not the task's"
        return errors


class AircraftInspectionEnv(SOPEnv):
    """Carry out an aircraft release inspection by an SOP: each check is one field of the answer.

    ## Description
    An aircraft (one of three fictional types with 2 or 4 engines and 4 to 8 tyres) is due
    for release. The agent reads the SOP (system prompt), grades every engine from trend and
    borescope data, every tyre and brake, the active avionics faults against the type's
    minimum equipment list (categories and rectification intervals), and each applicable
    airworthiness directive (effectivity by serial number, superseded ADs, intervals in
    flight hours and cycles, whichever comes first); derives the release disposition; and
    records the inspection with ``record_inspection``, whose id the answer carries. Worlds
    draw the disposition uniformly first, so no answer dominates; readings sit exactly on
    thresholds now and then.

    ## Observation Space
    ``Text``. At reset: the request and the task inputs (``tail_number``,
    ``inspection_date``, ``inspector_id``) as a JSON block. After a step: the tool results
    (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Unknown tail numbers, engines, fault codes, AD
    numbers, aircraft types and malformed inspector ids are tool errors the model reads.

    ## Starting State
    A world seed drawn from the ``split``'s range, or ``options={"task": row}``.

    ## Rewards
    1.0 when all seven fields match the SOP and the recorded inspection (the last
    ``record_inspection`` call, under the task's inspector) carries the same check results
    and disposition, else 0.0.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-AircraftInspection-v0", difficulty={"noise": 2, "ads": 8})``.
    Difficulty knobs: ``noise`` (0 clean records; 1 irregular case and spacing in findings,
    statuses, MEL categories and the type; 2 also missing readings the SOP has rules for:
    EGT margin, tyre pressure, AD compliance records), ``distractors`` (show
    ``get_flight_schedule`` and ``get_parts_stock``) and ``ads`` (ADs listed for the type, 1-8).
    """

    domain = AircraftInspection()
