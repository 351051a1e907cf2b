"""The CustomerService SOP as code: its decision rules, the reference procedure and the oracle.

* The **rules** (:func:`priority`, :func:`covering_incident`, :func:`diagnose`, ...) are
  small pure functions, one per SOP section, over records shaped like the tool results.
* :func:`expected` is the reference procedure: it applies the rules to the generated world
  directly (no tools) and returns the label, the final record of SOP section 11.
* :func:`oracle` is a scripted agent: it follows the SOP step by step using only the task
  inputs and what ``call(tool_name, arguments)`` returns, exactly as a model must.

The two share the rules but not the data path, so the oracle scoring 100% shows that the
tools expose everything the label needs and that the stateful chain (session token ->
ticket -> diagnostics -> remote action -> re-test) works.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

from mtrl_gym.envs.sop.customer_service.world import REMEDY_ACTIONS

__all__ = ["expected", "oracle", "norm", "version_key", "repeat_contacts", "priority", "outward_code",
           "covering_incident", "caller_allowed", "find_device", "diagnose", "apply_remote_action",
           "ESCALATION_TEAMS", "OUTPUT_KEYS"]

#: The keys of the final record, in SOP order.
OUTPUT_KEYS = ("outcome", "ticket_id", "priority", "incident_id", "diagnosis", "remote_action", "escalation_team")
_INELIGIBLE = ("closed", "suspended")


def norm(text: Any) -> str:
    """SOP section 2 text comparison: trimmed, inner spaces collapsed, case-folded."""
    return " ".join(str(text).split()).casefold()


def version_key(version: str) -> tuple[int, ...]:
    """``"3.10.0"`` -> ``(3, 10, 0)``: versions compare part by part as whole numbers."""
    return tuple(int(p) for p in str(version).strip().split("."))


def repeat_contacts(tickets: Sequence[Mapping[str, Any]] | None, call_date: str) -> int:
    """Tickets opened on or after 30 days before the call and before the call date."""
    call = date.fromisoformat(call_date)
    first = call - timedelta(days=30)
    return sum(1 for t in tickets or () if first <= date.fromisoformat(t["opened"]) < call)


def priority(account: Mapping[str, Any], call_date: str) -> str:
    """SOP step 3: points for a business plan, priority care and repeat contacts -> P1/P2/P3."""
    points = 2 if norm(account["plan"]).split(" ")[0] == "business" else 0
    points += 2 if account.get("priority_care") is True else 0
    points += min(2, repeat_contacts(account.get("tickets"), call_date))
    return "P1" if points >= 3 else "P2" if points == 2 else "P3"


def outward_code(postcode: str) -> str:
    """The part of a postcode before the first space, in capitals."""
    return postcode.strip().split()[0].upper() if postcode.strip() else ""


def covering_incident(incidents: Sequence[Mapping[str, Any]], postcode: str) -> str | None:
    """SOP step 4: the id of the earliest-started active incident listing the outward code, or None."""
    code = outward_code(postcode)
    covering = [i for i in incidents
                if norm(i["status"]) == "active" and code in {str(a).strip().upper() for a in i["areas"]}]
    if not covering:
        return None
    return min(covering, key=lambda i: (i["started"], i["incident_id"]))["incident_id"]


def caller_allowed(account: Mapping[str, Any], caller_name: str) -> bool:
    """SOP step 2.2: the caller is the holder or an authorised user (missing list: none)."""
    names = [account["holder_name"], *(account.get("authorised_users") or ())]
    return norm(caller_name) in {norm(n) for n in names}


def find_device(account: Mapping[str, Any], label: str) -> Mapping[str, Any]:
    """SOP step 2.3: the account's device whose serial ends with the label the caller read."""
    matches = [d for d in account["devices"] if norm(d["serial"]).endswith(norm(label))]
    if len(matches) != 1:
        raise ValueError(f"{len(matches)} devices match the label {label!r}; the generator guarantees one")
    return matches[0]


def diagnose(diagnostics: Mapping[str, Any], minimum_version: str, account_firmware: str) -> str:
    """SOP step 6: the first matching rule of the diagnosis table."""
    rx = diagnostics.get("optical_rx_dbm")
    if diagnostics.get("los_alarm") is True or rx is None or rx < -27.0 or rx > -8.0:
        return "line_fault"
    firmware = diagnostics.get("firmware") or account_firmware
    if version_key(firmware) < version_key(minimum_version):
        return "outdated_firmware"
    if norm(diagnostics.get("provisioning_state", "")) != "in_service":
        return "provisioning_error"
    if diagnostics.get("packet_loss_pct", 0) > 2.0 or diagnostics.get("crc_errors_24h", 0) > 5000:
        return "device_fault"
    return "no_fault_found"


def apply_remote_action(world: dict[str, Any], serial: str, action: str) -> None:
    """The effect of a remote action on ``world["diagnostics"]`` (the tool and :func:`expected` share it).

    A reboot always restarts the device (``reboots_7d`` + 1, ``uptime_hours`` 0). The action
    fixes the fault only when it is the world's remedy for that device and the remedy works.
    """
    diag = world["diagnostics"][serial]
    if action == "reboot":
        diag["reboots_7d"] = int(diag.get("reboots_7d", 0)) + 1
        diag["uptime_hours"] = 0
    remedy = world.get("remedy")
    if remedy and remedy["works"] and remedy["device_serial"] == serial and remedy["action"] == action:
        diag.update(remedy["patch"])


#: Diagnosis -> escalation team when the fault cannot be fixed remotely (before a remote action).
ESCALATION_TEAMS = {"line_fault": "field_technician", "device_fault": "device_replacement"}


def _final(outcome: str, **fields: Any) -> dict[str, Any]:
    out = dict.fromkeys(OUTPUT_KEYS)
    out.update(outcome=outcome, **fields)
    return out


def _after_diagnosis(first: str, diag: Mapping[str, Any], retest: Callable[[str], str]) -> tuple[str, str, str | None]:
    """SOP steps 7-8 given the first diagnosis: ``(outcome, remote_action, escalation_team)``.

    ``retest(action)`` performs the remote action and returns the new diagnosis.
    """
    if first == "no_fault_found":
        return "resolved", "none", None
    if first == "line_fault" or (first == "device_fault" and int(diag.get("reboots_7d", 0)) >= 3):
        return "escalated", "none", ESCALATION_TEAMS[first]
    action = REMEDY_ACTIONS[first]
    if retest(action) == "no_fault_found":
        return "resolved", action, None
    return "escalated", action, "tier2_network"


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure: the SOP applied to the world's records; returns the final record."""
    inputs, account = world["inputs"], world["account"]
    if inputs["passcode"].strip() != world["auth"]["passcode"]:
        return _final("identity_not_verified")
    if norm(account["status"]) in _INELIGIBLE:
        return _final("account_ineligible")
    if not caller_allowed(account, inputs["caller_name"]):
        return _final("identity_not_verified")
    device = find_device(account, inputs["device_label"])
    prio = priority(account, inputs["call_date"])
    incident = covering_incident(world["incidents"], account["service_postcode"])  # all in the customer's region
    ticket_id = f"TKT-{world['ticket_number']}"
    if incident is not None:
        return _final("linked_to_outage", ticket_id=ticket_id, priority=prio, incident_id=incident,
                      diagnosis="area_outage")
    serial, model = device["serial"], device["model"]
    minimum = world["firmware_policy"][model]["minimum_version"]
    diag = world["diagnostics"][serial]
    first = diagnose(diag, minimum, device["firmware"])

    def retest(action: str) -> str:
        scratch = {"diagnostics": copy.deepcopy(world["diagnostics"]), "remedy": world["remedy"]}
        apply_remote_action(scratch, serial, action)
        return diagnose(scratch["diagnostics"][serial], minimum, device["firmware"])

    outcome, action, team = _after_diagnosis(first, diag, retest)
    return _final(outcome, ticket_id=ticket_id, priority=prio, diagnosis=first, remote_action=action,
                  escalation_team=team)


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """A scripted agent that follows the SOP through real tool calls and returns its final record."""
    auth = call("authenticate", {"account_id": inputs["account_id"], "passcode": inputs["passcode"]})
    if not auth["authenticated"]:
        return _final("identity_not_verified")
    account = call("lookup_account", {"account_id": inputs["account_id"]})
    if norm(account["status"]) in _INELIGIBLE:
        return _final("account_ineligible")
    if not caller_allowed(account, inputs["caller_name"]):
        return _final("identity_not_verified")
    device = find_device(account, inputs["device_label"])
    prio = priority(account, inputs["call_date"])
    outages = call("check_outages", {"postcode": account["service_postcode"]})
    incident = covering_incident(outages["incidents"], account["service_postcode"])
    ticket = call("open_ticket", {"session_token": auth["session_token"], "device_serial": device["serial"],
                                  "category": inputs["reported_fault"], "priority": prio, "incident_id": incident})
    ticket_id = ticket["ticket_id"]
    if incident is not None:
        return _final("linked_to_outage", ticket_id=ticket_id, priority=prio, incident_id=incident,
                      diagnosis="area_outage")
    minimum = call("get_firmware_policy", {"model": device["model"]})["minimum_version"]
    where = {"ticket_id": ticket_id, "device_serial": device["serial"]}
    diag = call("run_diagnostics", where)
    first = diagnose(diag, minimum, device["firmware"])

    def retest(action: str) -> str:
        call("remote_action", {**where, "action": action})
        return diagnose(call("run_diagnostics", where), minimum, device["firmware"])

    outcome, action, team = _after_diagnosis(first, diag, retest)
    if team is not None:
        call("escalate_ticket", {"ticket_id": ticket_id, "team": team})
    return _final(outcome, ticket_id=ticket_id, priority=prio, diagnosis=first, remote_action=action,
                  escalation_team=team)
