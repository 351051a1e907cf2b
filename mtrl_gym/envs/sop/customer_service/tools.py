"""The support-console tools of the CustomerService domain, answering from the episode's world.

Each tool reads ``ctx.state`` (the world of :mod:`~mtrl_gym.envs.sop.customer_service.world`,
deep-copied by the sandbox on every reset) and answers like a JSON API. The chain is
stateful: ``authenticate`` issues the session token ``open_ticket`` requires; the ticket id
it returns is what ``run_diagnostics``, ``remote_action`` and ``escalate_ticket`` need; a
remote action changes what the next ``run_diagnostics`` reports. Unknown ids, a missing or
wrong token, and actions the console forbids raise :class:`ToolError` (the model reads the
message). ``get_billing_history`` and ``schedule_callback`` are distractors: plausible,
never needed by the SOP.

Tools return the world's own records (not copies): the sandbox renders a result to
text at once, and the world is the episode's private copy.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.kit import OneRecord, lookup_tool
from mtrl_gym.envs.sop.customer_service.procedure import apply_remote_action, norm

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "lookup_account", "authenticate", "check_outages", "open_ticket",
           "run_diagnostics", "get_firmware_policy", "remote_action", "escalate_ticket", "get_billing_history",
           "schedule_callback"]

_MAX_FAILED_ATTEMPTS = 3


_account = OneRecord("account", "account_id", "no account {!r}; account numbers look like 'KB-123456'")


def _device(ctx: ToolContext, serial: str) -> dict[str, Any]:
    for device in ctx.state["account"]["devices"]:
        if norm(device["serial"]) == norm(serial):
            return device
    serials = ", ".join(d["serial"] for d in ctx.state["account"]["devices"])
    raise ToolError(f"device {serial!r} is not on this account (its devices: {serials})")


def _ticket(ctx: ToolContext, ticket_id: str) -> dict[str, Any]:
    ticket = ctx.state["state"]["ticket"]
    if ticket is None:
        raise ToolError(f"no ticket {ticket_id!r}: no ticket has been opened on this call; use open_ticket first")
    if ticket_id.strip().upper() != ticket["ticket_id"]:
        raise ToolError(f"no ticket {ticket_id!r} on this call (the open ticket is {ticket['ticket_id']})")
    return ticket


lookup_account = lookup_tool("lookup_account", _account, "account_id",
                             "Look up a customer account: holder, authorised users, "
                             "status, plan, postcode, devices, past tickets.", 'The account number, e.g. "KB-482913".')


@tool
def authenticate(ctx: ToolContext, account_id: str, passcode: str) -> dict[str, Any]:
    """Check the caller's telephone passcode; on success returns a session token for the ticket tools.

    Args:
        account_id: The account number.
        passcode: The passcode exactly as the caller gave it.
    """
    _account(ctx, account_id)
    state = ctx.state["state"]
    if state["failed_attempts"] >= _MAX_FAILED_ATTEMPTS:
        raise ToolError("telephone authentication is locked for this account after 3 failed attempts")
    if passcode.strip() == ctx.state["auth"]["passcode"]:
        state["authenticated"] = True
        return {"authenticated": True, "session_token": ctx.state["auth"]["session_token"], "expires_in_s": 900}
    state["failed_attempts"] += 1
    return {"authenticated": False, "reason": "passcode does not match",
            "attempts_remaining": _MAX_FAILED_ATTEMPTS - state["failed_attempts"]}


@tool
def check_outages(ctx: ToolContext, postcode: str) -> dict[str, Any]:
    """List the network incidents recorded for the region of a postcode (any status).

    Args:
        postcode: A service postcode, e.g. "KS4 7QT".
    """
    words = postcode.split()
    region = words[0].upper().rstrip("0123456789") if words else ""
    if not region.isalpha() or not region.isascii():
        raise ToolError(f"{postcode!r} is not a postcode; postcodes look like 'KS4 7QT'")
    incidents = [i for i in ctx.state["incidents"]
                 if str(i["areas"][0]).upper().rstrip("0123456789") == region]
    return {"postcode": postcode, "region": region, "incidents": incidents}


@tool
def open_ticket(ctx: ToolContext, session_token: str, device_serial: str,
                category: Literal["no_service", "slow_speed", "intermittent"], priority: Literal["P1", "P2", "P3"],
                incident_id: str | None = None) -> dict[str, Any]:
    """Open the fault ticket for this call (one per call), optionally linked to an outage incident.

    Args:
        session_token: The token from a successful authenticate call.
        device_serial: Full serial number of the faulty device.
        category: The reported fault.
        priority: The ticket priority from the SOP.
        incident_id: The covering outage incident, or null.
    """
    state = ctx.state["state"]
    if not state["authenticated"] or session_token.strip() != ctx.state["auth"]["session_token"]:
        raise ToolError("invalid or expired session token; authenticate the caller first")
    device = _device(ctx, device_serial)
    known = {i["incident_id"] for i in ctx.state["incidents"]}
    if incident_id is not None and incident_id.strip().upper() not in known:
        raise ToolError(f"no incident {incident_id!r}")
    if state["ticket"] is not None:
        return {**state["ticket"], "note": "a ticket is already open for this call; not opened again"}
    state["ticket"] = {"ticket_id": f"TKT-{ctx.state['ticket_number']}",
                       "account_id": ctx.state["account"]["account_id"],
                       "device_serial": device["serial"], "category": category, "priority": priority,
                       "incident_id": incident_id.strip().upper() if incident_id else None,
                       "status": "linked" if incident_id else "open"}
    return state["ticket"]


@tool
def run_diagnostics(ctx: ToolContext, ticket_id: str, device_serial: str) -> dict[str, Any]:
    """Run a remote line and device test on a device, logged against the call's ticket.

    Args:
        ticket_id: The ticket id from open_ticket.
        device_serial: Full serial number of the device to test.
    """
    _ticket(ctx, ticket_id)
    device = _device(ctx, device_serial)
    return {"ticket_id": ctx.state["state"]["ticket"]["ticket_id"],
            **ctx.state["diagnostics"][device["serial"]]}


@tool
def get_firmware_policy(ctx: ToolContext, model: str) -> dict[str, Any]:
    """The firmware policy of a device model: the minimum supported and the recommended version.

    Args:
        model: The device model, e.g. "KB-Hub 4".
    """
    for name, policy in ctx.state["firmware_policy"].items():
        if norm(name) == norm(model):
            return dict(policy)
    raise ToolError(f"no firmware policy for model {model!r}; known models: "
                    + ", ".join(sorted(ctx.state["firmware_policy"])))


@tool
def remote_action(ctx: ToolContext, ticket_id: str, device_serial: str,
                  action: Literal["reboot", "firmware_update", "reprovision"]) -> dict[str, Any]:
    """Run a remote action on a device; run diagnostics afterwards to see whether it helped.

    Args:
        ticket_id: The ticket id from open_ticket.
        device_serial: Full serial number of the device.
        action: What to do.
    """
    ticket = _ticket(ctx, ticket_id)
    device = _device(ctx, device_serial)
    if ticket["incident_id"] is not None:
        raise ToolError(f"ticket {ticket['ticket_id']} is linked to outage {ticket['incident_id']}; "
                        "remote actions are blocked during an outage")
    apply_remote_action(ctx.state, device["serial"], action)
    ctx.state["state"]["actions"].append({"device_serial": device["serial"], "action": action})
    return {"ticket_id": ticket["ticket_id"], "device_serial": device["serial"], "action": action,
            "accepted": True, "message": "Action executed. Run diagnostics to confirm the result."}


@tool
def escalate_ticket(ctx: ToolContext, ticket_id: str,
                    team: Literal["field_technician", "tier2_network", "device_replacement"],
                    note: str = "") -> dict[str, Any]:
    """Escalate the call's ticket to a specialist team.

    Args:
        ticket_id: The ticket id from open_ticket.
        team: The team to hand the ticket to.
        note: Optional hand-over note.
    """
    ticket = _ticket(ctx, ticket_id)
    state = ctx.state["state"]
    if state["escalation"] is not None:
        return {**state["escalation"], "note": "already escalated; not escalated again"}
    ticket["status"] = "escalated"
    state["escalation"] = {"ticket_id": ticket["ticket_id"], "status": "escalated", "team": team,
                           "queue_position": ctx.state["queue_position"]}
    return dict(state["escalation"])


@tool
def get_billing_history(ctx: ToolContext, account_id: str) -> dict[str, Any]:
    """The last three invoices of an account (amount, period, paid).

    Args:
        account_id: The account number.
    """
    account = _account(ctx, account_id)
    return {"account_id": account["account_id"], "invoices": ctx.state["billing"]}


@tool
def schedule_callback(ctx: ToolContext, ticket_id: str, day: str,
                      slot: Literal["morning", "afternoon", "evening"]) -> dict[str, Any]:
    """Book a callback to the customer about a ticket.

    Args:
        ticket_id: The ticket id.
        day: The callback date, YYYY-MM-DD.
        slot: Time of day.
    """
    ticket = _ticket(ctx, ticket_id)
    try:
        when = date.fromisoformat(day.strip())
    except ValueError:
        raise ToolError(f"{day!r} is not a date; use YYYY-MM-DD") from None
    if when.isoformat() < ctx.state["inputs"]["call_date"]:
        raise ToolError(f"{when.isoformat()} is in the past")
    booking = {"ticket_id": ticket["ticket_id"], "day": when.isoformat(), "slot": slot, "booked": True}
    ctx.state["state"]["callbacks"].append(booking)
    return booking


#: Every tool of the domain, in the order the system prompt lists them.
TOOLS = ToolSet([lookup_account, authenticate, check_outages, open_ticket, run_diagnostics, get_firmware_policy,
                 remote_action, escalate_ticket, get_billing_history, schedule_callback])
#: Tools the SOP never needs (hidden when the difficulty turns distractors off).
DISTRACTOR_TOOLS = ("get_billing_history", "schedule_callback")
