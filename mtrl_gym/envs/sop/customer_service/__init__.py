"""``mtrl/SOP-CustomerService-v0``: broadband fault calls handled by a support SOP with chained tools.

The agent authenticates the caller (a session token), validates the account, sets the
ticket priority, checks area outages, opens a ticket (its id), diagnoses the named device,
runs the prescribed remote fix, re-tests, and escalates what it cannot fix; later tools need
the values earlier ones return. The SOP is ``sop.md`` in this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.base import SOPDomain, SOPEnv
from mtrl_gym.envs.sop.customer_service import procedure, tools, world
from mtrl_gym.envs.sop.grading import Field

__all__ = ["CustomerService", "CustomerServiceEnv", "OUTPUT_SCHEMA"]

#: The final record (SOP section 11).
OUTPUT_SCHEMA: dict[str, Field] = {
    "outcome": Field("enum", values=("resolved", "escalated", "linked_to_outage", "identity_not_verified",
                                     "account_ineligible"), description="How the call ended."),
    "ticket_id": Field("str", nullable=True, description="The id open_ticket returned; null if no ticket is opened."),
    "priority": Field("enum", values=("P1", "P2", "P3"), nullable=True, description="The ticket priority (step 3)."),
    "incident_id": Field("str", nullable=True, description="The covering outage incident, if any."),
    "diagnosis": Field("enum", values=("area_outage", "line_fault", "outdated_firmware", "provisioning_error",
                                       "device_fault", "no_fault_found"), nullable=True,
                       description="The diagnosis of the first diagnostics run, or area_outage."),
    "remote_action": Field("enum", values=("none", "reboot", "firmware_update", "reprovision"), nullable=True,
                           description="The remote action performed; none if diagnostics ran without one."),
    "escalation_team": Field("enum", values=("field_technician", "tier2_network", "device_replacement"),
                             nullable=True, description="The team the ticket went to, when escalated."),
}


class CustomerService(SOPDomain, world=world, procedure=procedure, tools=tools):
    """Kestrel Broadband fault-call handling (SOP KB-CS-014): a chain of dependent support tools."""

    output_schema = OUTPUT_SCHEMA

    def state_errors(self, state: Any, expected: Mapping[str, Any]) -> dict[str, str]:
        """The ticket, remote actions and escalation the tools recorded must agree with the label."""
        done = state["state"]
        ticket = done["ticket"]
        if expected["ticket_id"] is None:
            return {"ticket_id": "a ticket was opened, but the SOP stops before opening one"} if ticket else {}
        if ticket is None:
            return {"ticket_id": "no ticket was opened"}
        errors = {}
        for key in ("priority", "incident_id"):
            if ticket[key] != expected[key]:
                errors[key] = f"the ticket was opened with {key} {ticket[key]!r}"
        want = [] if expected["remote_action"] in (None, "none") else \
            [{"device_serial": state["meta"]["device_serial"], "action": expected["remote_action"]}]
        if done["actions"] != want:
            performed = ", ".join(f"{a['action']} on {a['device_serial']}" for a in done["actions"]) or "none"
            errors["remote_action"] = f"remote actions performed: {performed}"
        team = done["escalation"]["team"] if done["escalation"] else None
        if team != expected["escalation_team"]:
            errors["escalation_team"] = (f"the ticket was escalated to {team!r}" if team
                                         else "the ticket was not escalated")
        return errors


class CustomerServiceEnv(SOPEnv):
    """Handle a broadband fault call by following a support SOP whose tools depend on each other.

    ## Description
    A customer reports a fault. The agent reads the SOP (system prompt), authenticates the
    caller (``authenticate`` returns the session token ``open_ticket`` needs), validates the
    account (status, caller, device), computes the ticket priority from the plan, priority
    care and repeat contacts, checks area outages, opens the ticket (its id is what
    ``run_diagnostics``, ``remote_action`` and ``escalate_ticket`` need), diagnoses the
    device with an ordered rule table and a firmware policy, performs the prescribed remote
    action, re-tests, and escalates what remains. Worlds are generated from a seed with the
    outcome drawn first, so every path of the SOP is common.

    ## Observation Space
    ``Text``. At reset: the request and the task inputs (``call_date``, ``account_id``,
    ``caller_name``, ``passcode``, ``device_label``, ``reported_fault``) as a JSON block.
    After a step: the tool results (JSON records or ``Error: ...``), then notes.

    ## Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. The tools answer with errors like a real console:
    unknown account, device, ticket or incident ids, a missing or wrong session token, a
    ticket tool used before ``open_ticket``, a remote action on an outage-linked ticket, or
    three failed passcode attempts.

    ## Starting State
    A world seed drawn from the ``split``'s range, or ``options={"task": row}``.

    ## Rewards
    1.0 when the final record matches the SOP on all seven fields and the recorded actions
    agree with it (the ticket's priority and incident, the remote action performed on the
    caller's device, the escalation team; no ticket when the SOP stops early), else 0.0.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-CustomerService-v0", difficulty={"noise": 2, "devices": 4, "history": 8})``.
    Difficulty knobs: ``noise`` (0 clean records; 1 irregular case and spacing in names,
    statuses, plans and device labels; 2 also missing optional fields the SOP has rules for:
    priority care, authorised users, the optical reading, the firmware in the diagnostics),
    ``distractors`` (show ``get_billing_history`` and ``schedule_callback``), ``devices``
    (devices on the account, 1-4) and ``history`` (past tickets at most, 0-12).
    """

    domain = CustomerService()
