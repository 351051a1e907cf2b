"""mtrl/SOP-CustomerService-v0: the harness checks, the SOP rules on hand-checked worlds, the tool chain."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from harness import SOPHarness, check_pinned, direct_call, set_at

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop import generate_tasks, parse_task_inputs
from mtrl_gym.envs.sop.customer_service import CustomerService, CustomerServiceEnv, procedure
from mtrl_gym.envs.sop.customer_service.tools import TOOLS
from mtrl_gym.envs.sop.customer_service.world import SCENARIOS

H = SOPHarness("mtrl/SOP-CustomerService-v0")
DOMAIN = CustomerService()
SERIAL = "KBH4-19C27F3A"


def hand_world() -> dict:
    """A hand-checked call: every reading sits on a threshold; the answer is worked out in the test."""
    healthy = {"device_serial": "KBH3-00AA1234", "model": "KB-Hub 3", "los_alarm": False, "optical_rx_dbm": -15.2,
               "firmware": "3.4.0", "provisioning_state": "in_service", "packet_loss_pct": 0.1,
               "crc_errors_24h": 12, "reboots_7d": 0, "uptime_hours": 400}
    return {
        "inputs": {"call_date": "2024-06-15", "account_id": "KB-100200", "caller_name": "Mara Quinn",
                   "passcode": "4821", "device_label": "7f3a", "reported_fault": "intermittent"},
        "account": {"account_id": "KB-100200", "holder_name": " MARA  quinn", "authorised_users": None,
                    "status": "Active ", "plan": "business FIBRE 500", "service_postcode": "ks4 7qt",
                    "devices": [{"serial": SERIAL, "model": "KB-Hub 4", "location": "office", "firmware": "4.10.0",
                                 "installed": "2022-03-01"},
                                {"serial": "KBH3-00AA1234", "model": "KB-Hub 3", "location": "annex",
                                 "firmware": "3.4.0", "installed": "2021-01-01"}],
                    "tickets": [{"ticket_id": "TKT-30001", "opened": "2024-05-16", "category": "slow_speed",
                                 "status": "closed"},  # 30 days before the call: a repeat contact
                                {"ticket_id": "TKT-30002", "opened": "2024-05-15", "category": "no_service",
                                 "status": "open"}]},  # 31 days: not one
        "billing": [],
        "auth": {"passcode": "4821", "session_token": "ST-0123456789ab"},
        "incidents": [{"incident_id": "INC-1", "status": "monitoring", "areas": ["KS4"], "service": "fibre",
                       "started": "2024-06-15T01:00", "summary": "x"},
                      {"incident_id": "INC-2", "status": "active", "areas": ["KS5", "KS14"], "service": "fibre",
                       "started": "2024-06-15T02:00", "summary": "x"}],
        "diagnostics": {SERIAL: {"device_serial": SERIAL, "model": "KB-Hub 4", "los_alarm": False,
                                 "optical_rx_dbm": -27.0, "firmware": "4.10.0", "provisioning_state": " IN_SERVICE",
                                 "packet_loss_pct": 2.0, "crc_errors_24h": 5001, "reboots_7d": 3, "uptime_hours": 10},
                        "KBH3-00AA1234": healthy},
        "firmware_policy": {"KB-Hub 4": {"model": "KB-Hub 4", "minimum_version": "4.9.12",
                                         "recommended_version": "4.11.0"},
                            "KB-Hub 3": {"model": "KB-Hub 3", "minimum_version": "3.2.1",
                                         "recommended_version": "3.4.0"}},
        "remedy": None, "ticket_number": 61234, "queue_position": 5,
        "state": {"authenticated": False, "failed_attempts": 0, "ticket": None, "actions": [], "escalation": None,
                  "callbacks": []},
        "meta": {"scenario": "device_fault", "device_serial": SERIAL},
    }


def answer(outcome, ticket=True, priority="P1", incident=None, diagnosis=None, action=None, team=None):
    return {"outcome": outcome, "ticket_id": "TKT-61234" if ticket else None, "priority": priority if ticket else None,
            "incident_id": incident, "diagnosis": diagnosis, "remote_action": action, "escalation_team": team}


def _remedy(works):
    return set_at(["remedy"], {"device_serial": SERIAL, "action": "reboot", "works": works,
                             "patch": {"crc_errors_24h": 40}})


CASES = {
    # P1 = business plan (2) + one repeat contact (1); crc 5001 is a device fault, 3 reboots: replace.
    "base": ([], answer("escalated", diagnosis="device_fault", action="none", team="device_replacement")),
    "reboot fixes it": ([set_at(["diagnostics", SERIAL, "reboots_7d"], 2), _remedy(True)],
                        answer("resolved", diagnosis="device_fault", action="reboot")),
    "reboot does not fix it": ([set_at(["diagnostics", SERIAL, "reboots_7d"], 2), _remedy(False)],
                               answer("escalated", diagnosis="device_fault", action="reboot", team="tier2_network")),
    "5000 crc is no fault": ([set_at(["diagnostics", SERIAL, "crc_errors_24h"], 5000)],
                             answer("resolved", diagnosis="no_fault_found", action="none")),
    "missing optical reading": ([set_at(["diagnostics", SERIAL, "optical_rx_dbm"], None)],
                                answer("escalated", diagnosis="line_fault", action="none", team="field_technician")),
    "-27.1 dBm": ([set_at(["diagnostics", SERIAL, "optical_rx_dbm"], -27.1)],
                  answer("escalated", diagnosis="line_fault", action="none", team="field_technician")),
    # No firmware in the diagnostics: the account's 4.9.2 is older than 4.9.12 (as numbers, not text).
    "firmware from the account": ([lambda w: w["diagnostics"][SERIAL].pop("firmware"),
                                   set_at(["account", "devices", 0, "firmware"], "4.9.2")],
                                  answer("escalated", diagnosis="outdated_firmware", action="firmware_update",
                                         team="tier2_network")),
    "provisioning": ([set_at(["diagnostics", SERIAL, "provisioning_state"], "Profile_Mismatch")],
                     answer("escalated", diagnosis="provisioning_error", action="reprovision", team="tier2_network")),
    "an incident covers": ([set_at(["incidents", 0, "status"], " ACTIVE")],
                           answer("linked_to_outage", incident="INC-1", diagnosis="area_outage")),
    "two cover, earliest wins": ([set_at(["incidents", 0, "status"], "active"), set_at(["incidents", 1, "areas"], ["KS4"]),
                                  set_at(["incidents", 0, "started"], "2024-06-15T03:00")],
                                 answer("linked_to_outage", incident="INC-2", diagnosis="area_outage")),
    "priority care, no business": ([set_at(["account", "plan"], "Fibre 500"),
                                    set_at(["account", "priority_care"], True)],
                                   answer("escalated", priority="P1", diagnosis="device_fault", action="none",
                                          team="device_replacement")),
    "residential, one repeat": ([set_at(["account", "plan"], "Fibre 500")],
                                answer("escalated", priority="P3", diagnosis="device_fault", action="none",
                                       team="device_replacement")),
    "residential, two repeats": ([set_at(["account", "plan"], "Fibre 500"),
                                  set_at(["account", "tickets", 1, "opened"], "2024-06-14")],
                                 answer("escalated", priority="P2", diagnosis="device_fault", action="none",
                                        team="device_replacement")),
    "suspended": ([set_at(["account", "status"], " Suspended")], answer("account_ineligible", ticket=False)),
    "wrong passcode wins over a suspended account": ([set_at(["account", "status"], "suspended"),
                                                      set_at(["inputs", "passcode"], "4812")],
                                                     answer("identity_not_verified", ticket=False)),
    "unknown caller": ([set_at(["inputs", "caller_name"], "Tom Quinn")], answer("identity_not_verified", ticket=False)),
    "authorised user": ([set_at(["inputs", "caller_name"], "Tom Quinn"),
                         set_at(["account", "authorised_users"], ["tom  QUINN "])],
                        answer("escalated", diagnosis="device_fault", action="none", team="device_replacement")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, want = CASES[case]
    check_pinned(DOMAIN, hand_world(), want, edits)


# ----------------------------------------------------------------------------- rules


def test_versions_compare_as_numbers():
    assert procedure.version_key("3.10.0") > procedure.version_key("3.9.12")
    assert procedure.version_key(" 4.2.0") == (4, 2, 0)


def test_repeat_contacts_window_is_30_days_inclusive_and_excludes_the_call_date():
    tickets = [{"opened": d} for d in ("2024-05-16", "2024-05-15", "2024-06-14", "2024-06-15")]
    assert procedure.repeat_contacts(tickets, "2024-06-15") == 2
    assert procedure.repeat_contacts(None, "2024-06-15") == 0


def test_outward_code_and_covering_incident():
    assert procedure.outward_code(" ks4  7qt") == "KS4"
    incidents = [{"incident_id": "A", "status": "resolved", "areas": ["KS4"], "started": "2024-01-01T00:00"},
                 {"incident_id": "B", "status": "Active", "areas": ["KS41"], "started": "2024-01-01T00:00"}]
    assert procedure.covering_incident(incidents, "KS4 7QT") is None  # KS41 is another district


def test_find_device_needs_exactly_one_match():
    account = {"devices": [{"serial": "KBH4-AAAA1234"}, {"serial": "KBH4-BBBB1234"}]}
    with pytest.raises(ValueError, match="2 devices match"):
        procedure.find_device(account, "1234")


# ----------------------------------------------------------------------------- tools


def test_tools_enforce_the_chain_like_a_console():
    world = hand_world()
    call, ctx = direct_call(TOOLS, world)
    with pytest.raises(ToolError, match="authenticate the caller first"):
        call("open_ticket", {"session_token": "ST-0123456789ab", "device_serial": SERIAL, "category": "intermittent",
                             "priority": "P1"})
    with pytest.raises(ToolError, match="use open_ticket first"):
        call("run_diagnostics", {"ticket_id": "TKT-61234", "device_serial": SERIAL})
    assert call("authenticate", {"account_id": "kb-100200", "passcode": "4821"})["authenticated"]
    with pytest.raises(ToolError, match="invalid or expired session token"):
        call("open_ticket", {"session_token": "ST-guess", "device_serial": SERIAL, "category": "intermittent",
                             "priority": "P1"})
    with pytest.raises(ToolError, match="is not on this account"):
        call("open_ticket", {"session_token": "ST-0123456789ab", "device_serial": "KBH4-X", "category": "intermittent",
                             "priority": "P1"})
    first = call("open_ticket", {"session_token": "ST-0123456789ab", "device_serial": SERIAL.lower(),
                                 "category": "intermittent", "priority": "P2", "incident_id": "INC-1"})
    again = call("open_ticket", {"session_token": "ST-0123456789ab", "device_serial": SERIAL,
                                 "category": "no_service", "priority": "P1"})
    assert first["ticket_id"] == again["ticket_id"] == "TKT-61234" and "already open" in again["note"]
    with pytest.raises(ToolError, match="linked to outage INC-1"):
        call("remote_action", {"ticket_id": "TKT-61234", "device_serial": SERIAL, "action": "reboot"})
    with pytest.raises(ToolError, match="the open ticket is TKT-61234"):
        call("escalate_ticket", {"ticket_id": "TKT-1", "team": "tier2_network"})
    assert ctx.state["state"]["ticket"]["priority"] == "P2"


def test_three_failed_passcodes_lock_authentication():
    call, _ = direct_call(TOOLS, hand_world())
    results = [call("authenticate", {"account_id": "KB-100200", "passcode": "0000"}) for _ in range(3)]
    assert [r["attempts_remaining"] for r in results] == [2, 1, 0]
    with pytest.raises(ToolError, match="locked"):
        call("authenticate", {"account_id": "KB-100200", "passcode": "4821"})


def test_a_remote_action_changes_the_next_diagnostics():
    world = hand_world()
    _remedy(True)(world)
    world["diagnostics"][SERIAL]["reboots_7d"] = 1
    call, _ = direct_call(TOOLS, world)
    token = call("authenticate", {"account_id": "KB-100200", "passcode": "4821"})["session_token"]
    ticket = call("open_ticket", {"session_token": token, "device_serial": SERIAL, "category": "intermittent",
                                  "priority": "P1"})["ticket_id"]
    where = {"ticket_id": ticket, "device_serial": SERIAL}
    before = call("run_diagnostics", where)
    call("remote_action", {**where, "action": "firmware_update"})  # not the remedy: nothing fixed
    assert call("run_diagnostics", where) == before
    call("remote_action", {**where, "action": "reboot"})
    after = call("run_diagnostics", where)
    assert (after["crc_errors_24h"], after["reboots_7d"], after["uptime_hours"]) == (40, 2, 0)


# ----------------------------------------------------------------------------- through the env


def play(task, tamper):
    """Play the oracle through the env with ``tamper(name, arguments)`` editing its calls; return the final info."""
    env = CustomerServiceEnv()
    obs, _ = env.reset(options={"task": task})

    def call(name, arguments):
        text = "<tool_call>" + json.dumps({"name": name, "arguments": tamper(name, dict(arguments))}) + "</tool_call>"
        _, _, _, _, info = env.step(text)
        content = info["tool_results"][0]["content"]
        if info["tool_outcomes"][0]["status"] == "tool_error":
            raise ToolError(content)
        return json.loads(content)

    answer = procedure.oracle(parse_task_inputs(obs), call)
    _, reward, terminated, _, info = env.step(f"<final_answer>{json.dumps(answer)}</final_answer>")
    assert terminated
    return reward, info


def test_the_recorded_actions_must_agree_with_the_answer():
    tasks = generate_tasks(DOMAIN, 40, seed=3)
    ticketed = next(t for t in tasks if t["answer"]["escalation_team"] == "tier2_network")
    reward, info = play(ticketed, lambda n, a: {**a, "priority": "P3" if a["priority"] != "P3" else "P2"}
                        if n == "open_ticket" else a)
    assert reward == 0.0 and set(info["grade_result"]["errors"]) == {"priority"}
    assert info["grade_result"]["errors"]["priority"].startswith("the ticket was opened with priority")
    reward, info = play(ticketed, lambda n, a: {**a, "team": "field_technician"} if n == "escalate_ticket" else a)
    assert reward == 0.0 and info["grade_result"]["errors"] == {"escalation_team": "the ticket was escalated to "
                                                                                   "'field_technician'"}
    early = next(t for t in generate_tasks(DOMAIN, 400, seed=3) if t["answer"]["outcome"] == "account_ineligible")
    assert play(early, lambda n, a: a)[0] == 1.0


def test_oracle_step_count():
    stats = H.check_oracle(100)
    assert stats["max_steps"] <= 12


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    fields = report["fields"]
    assert fields["outcome"] <= 0.45 and fields["priority"] <= 0.4 and fields["diagnosis"] <= 0.3
    assert fields["remote_action"] <= 0.45 and fields["escalation_team"] <= 0.7 and report["answer"] <= 0.2
    outcomes = report["classes"]["outcome"]
    # The early exits answer alike on every task (no ticket): rare by design, so no constant answer pays.
    early = {json.dumps(o) for o in ("identity_not_verified", "account_ineligible")}  # classes are JSON text
    assert all(1 <= outcomes.get(o, 0) <= 0.02 * 500 for o in early)
    assert all(count >= 20 for o, count in outcomes.items() if o not in early)
    assert len(report["classes"]["diagnosis"]) == 7 and len(report["classes"]["remote_action"]) == 5


def test_every_scenario_gives_its_intended_path_at_every_noise_level():
    intended = {"ineligible": ("outcome", "account_ineligible"), "unknown_caller": ("outcome", "identity_not_verified"),
                "bad_passcode": ("outcome", "identity_not_verified"), "outage": ("diagnosis", "area_outage"),
                "line_fault": ("diagnosis", "line_fault"), "outdated_firmware": ("diagnosis", "outdated_firmware"),
                "provisioning_error": ("diagnosis", "provisioning_error"),
                "device_fault": ("diagnosis", "device_fault"),
                "no_fault": ("diagnosis", "no_fault_found")}
    seen = Counter()
    for noise in (0, 1, 2):
        for seed in range(400):  # the early exits are rare (about 1 % each): enough seeds to meet them all
            world = DOMAIN.world(seed, {"noise": noise})
            key, value = intended[world["meta"]["scenario"]]
            assert procedure.expected(world)[key] == value, (noise, seed)
            seen[world["meta"]["scenario"]] += 1
    assert set(seen) == set(SCENARIOS)


def test_noise_knob_irregular_text_and_missing_fields():
    def stats(noise):
        out = Counter()
        for seed in range(200):
            w = DOMAIN.world(seed, {"noise": noise})
            acc = w["account"]
            out["irregular"] += acc["status"] != acc["status"].strip().lower() or acc["plan"].strip() != acc["plan"]
            out["no_care"] += "priority_care" not in acc
            out["no_firmware"] += any("firmware" not in d for d in w["diagnostics"].values())
        return out
    clean, noisy = stats(0), stats(2)
    assert clean["irregular"] == clean["no_care"] == clean["no_firmware"] == 0
    assert noisy["irregular"] > 20 and noisy["no_care"] > 20 and noisy["no_firmware"] > 5


