"""mtrl/SOP-CustomerService-v0: the harness checks, the SOP rules on hand-checked worlds, the tool chain."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from harness import SOPHarness
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError
from mtrl_gym.envs.sop import canonical, generate_tasks, parse_task_inputs
from mtrl_gym.envs.sop.customer_service import CustomerService, CustomerServiceEnv, procedure
from mtrl_gym.envs.sop.customer_service.tools import TOOLS
from mtrl_gym.envs.sop.customer_service.world import SCENARIOS, generate_world
from mtrl_gym.error import ConfigError

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


def direct_call(world):
    """``call`` for the oracle that validates and runs the tools on a private copy of ``world``."""
    ctx = ToolContext(state=copy.deepcopy(world))

    def call(name, arguments):
        args, problems = TOOLS[name].validate(arguments)
        assert not problems, problems
        return json.loads(json.dumps(TOOLS[name].invoke(args, ctx)))

    return call, ctx


def answer(outcome, ticket=True, priority="P1", incident=None, diagnosis=None, action=None, team=None):
    return {"outcome": outcome, "ticket_id": "TKT-61234" if ticket else None, "priority": priority if ticket else None,
            "incident_id": incident, "diagnosis": diagnosis, "remote_action": action, "escalation_team": team}


def _set(path, value):
    def edit(w):
        *head, last = path
        node = w
        for key in head:
            node = node[key]
        node[last] = value
    return edit


def _remedy(works):
    return _set(["remedy"], {"device_serial": SERIAL, "action": "reboot", "works": works,
                             "patch": {"crc_errors_24h": 40}})


CASES = {
    # P1 = business plan (2) + one repeat contact (1); crc 5001 is a device fault, 3 reboots: replace.
    "base": ([], answer("escalated", diagnosis="device_fault", action="none", team="device_replacement")),
    "reboot fixes it": ([_set(["diagnostics", SERIAL, "reboots_7d"], 2), _remedy(True)],
                        answer("resolved", diagnosis="device_fault", action="reboot")),
    "reboot does not fix it": ([_set(["diagnostics", SERIAL, "reboots_7d"], 2), _remedy(False)],
                               answer("escalated", diagnosis="device_fault", action="reboot", team="tier2_network")),
    "5000 crc is no fault": ([_set(["diagnostics", SERIAL, "crc_errors_24h"], 5000)],
                             answer("resolved", diagnosis="no_fault_found", action="none")),
    "missing optical reading": ([_set(["diagnostics", SERIAL, "optical_rx_dbm"], None)],
                                answer("escalated", diagnosis="line_fault", action="none", team="field_technician")),
    "-27.1 dBm": ([_set(["diagnostics", SERIAL, "optical_rx_dbm"], -27.1)],
                  answer("escalated", diagnosis="line_fault", action="none", team="field_technician")),
    # No firmware in the diagnostics: the account's 4.9.2 is older than 4.9.12 (as numbers, not text).
    "firmware from the account": ([lambda w: w["diagnostics"][SERIAL].pop("firmware"),
                                   _set(["account", "devices", 0, "firmware"], "4.9.2")],
                                  answer("escalated", diagnosis="outdated_firmware", action="firmware_update",
                                         team="tier2_network")),
    "provisioning": ([_set(["diagnostics", SERIAL, "provisioning_state"], "Profile_Mismatch")],
                     answer("escalated", diagnosis="provisioning_error", action="reprovision", team="tier2_network")),
    "an incident covers": ([_set(["incidents", 0, "status"], " ACTIVE")],
                           answer("linked_to_outage", incident="INC-1", diagnosis="area_outage")),
    "two cover, earliest wins": ([_set(["incidents", 0, "status"], "active"), _set(["incidents", 1, "areas"], ["KS4"]),
                                  _set(["incidents", 0, "started"], "2024-06-15T03:00")],
                                 answer("linked_to_outage", incident="INC-2", diagnosis="area_outage")),
    "priority care, no business": ([_set(["account", "plan"], "Fibre 500"),
                                    _set(["account", "priority_care"], True)],
                                   answer("escalated", priority="P1", diagnosis="device_fault", action="none",
                                          team="device_replacement")),
    "residential, one repeat": ([_set(["account", "plan"], "Fibre 500")],
                                answer("escalated", priority="P3", diagnosis="device_fault", action="none",
                                       team="device_replacement")),
    "residential, two repeats": ([_set(["account", "plan"], "Fibre 500"),
                                  _set(["account", "tickets", 1, "opened"], "2024-06-14")],
                                 answer("escalated", priority="P2", diagnosis="device_fault", action="none",
                                        team="device_replacement")),
    "suspended": ([_set(["account", "status"], " Suspended")], answer("account_ineligible", ticket=False)),
    "wrong passcode wins over a suspended account": ([_set(["account", "status"], "suspended"),
                                                      _set(["inputs", "passcode"], "4812")],
                                                     answer("identity_not_verified", ticket=False)),
    "unknown caller": ([_set(["inputs", "caller_name"], "Tom Quinn")], answer("identity_not_verified", ticket=False)),
    "authorised user": ([_set(["inputs", "caller_name"], "Tom Quinn"),
                         _set(["account", "authorised_users"], ["tom  QUINN "])],
                        answer("escalated", diagnosis="device_fault", action="none", team="device_replacement")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, want = CASES[case]
    world = hand_world()
    for edit in edits:
        edit(world)
    assert procedure.expected(world) == want
    call, ctx = direct_call(world)
    assert procedure.oracle(world["inputs"], call) == want
    assert DOMAIN.state_errors(ctx.state, want) == {}


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
    call, ctx = direct_call(world)
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
    call, _ = direct_call(hand_world())
    results = [call("authenticate", {"account_id": "KB-100200", "passcode": "0000"}) for _ in range(3)]
    assert [r["attempts_remaining"] for r in results] == [2, 1, 0]
    with pytest.raises(ToolError, match="locked"):
        call("authenticate", {"account_id": "KB-100200", "passcode": "4821"})


def test_a_remote_action_changes_the_next_diagnostics():
    world = hand_world()
    _remedy(True)(world)
    world["diagnostics"][SERIAL]["reboots_7d"] = 1
    call, _ = direct_call(world)
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
    early = next(t for t in tasks if t["answer"]["outcome"] == "account_ineligible")
    assert play(early, lambda n, a: a)[0] == 1.0


def test_harness_contract_and_check_env():
    H.check_contract()
    H.check_env()


def test_oracle_scores_one_on_500_tasks():
    stats = H.check_oracle(500)
    assert stats["max_steps"] <= 12


@pytest.mark.parametrize("difficulty", [{"noise": 0, "devices": 1, "history": 0},
                                        {"noise": 2, "distractors": False, "devices": 4, "history": 12}])
def test_oracle_at_the_difficulty_extremes(difficulty):
    H.check_oracle(100, difficulty=difficulty, seed=7)


def test_no_label_leak():
    report = H.check_no_label_leak(500)
    assert report.exact_rate <= 0.2


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    fields = report["fields"]
    assert fields["outcome"] <= 0.45 and fields["priority"] <= 0.4 and fields["diagnosis"] <= 0.3
    assert fields["remote_action"] <= 0.45 and fields["escalation_team"] <= 0.7 and report["answer"] <= 0.2
    assert all(count >= 20 for count in report["classes"]["outcome"].values())
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
        for seed in range(150):
            world = generate_world(np.random.default_rng(seed), {"noise": noise})
            key, value = intended[world["meta"]["scenario"]]
            assert procedure.expected(world)[key] == value, (noise, seed)
            seen[world["meta"]["scenario"]] += 1
    assert set(seen) == set(SCENARIOS)


def test_noise_knob_irregular_text_and_missing_fields():
    def stats(noise):
        out = Counter()
        for seed in range(200):
            w = generate_world(np.random.default_rng(seed), {"noise": noise})
            acc = w["account"]
            out["irregular"] += acc["status"] != acc["status"].strip().lower() or acc["plan"].strip() != acc["plan"]
            out["no_care"] += "priority_care" not in acc
            out["no_firmware"] += any("firmware" not in d for d in w["diagnostics"].values())
        return out
    clean, noisy = stats(0), stats(2)
    assert clean["irregular"] == clean["no_care"] == clean["no_firmware"] == 0
    assert noisy["irregular"] > 20 and noisy["no_care"] > 20 and noisy["no_firmware"] > 5


@pytest.mark.parametrize("difficulty, match", [({"devices": 5}, r"'devices' must be an integer in \[1, 4\]"),
                                               ({"history": -1}, r"'history' must be an integer in \[0, 12\]"),
                                               ({"noise": 3}, "noise"), ({"device": 2}, "Did you mean 'devices'")])
def test_difficulty_is_validated(difficulty, match):
    with pytest.raises(ConfigError, match=match):
        DOMAIN.resolve_difficulty(difficulty)


_DIGEST = """
import hashlib, sys
from mtrl_gym.envs.sop import canonical
from mtrl_gym.envs.sop.customer_service import {cls}
domain = {cls}()
h = hashlib.sha256()
for noise in (0, 1, 2):
    for seed in range(200):
        world = domain.world(seed, {{"noise": noise}})
        h.update(canonical([world, domain.expected(world)]).encode())
print(h.hexdigest())
"""


def test_many_worlds_are_identical_under_another_hash_seed():
    """600 worlds and labels digested here and in a process with another hash seed (catches set order)."""
    code = _DIGEST.format(cls=type(DOMAIN).__name__)
    hash_seed = "1" if os.environ.get("PYTHONHASHSEED") == "4242" else "4242"  # never this process's
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": hash_seed}).stdout
    digest = hashlib.sha256()
    for noise in (0, 1, 2):
        for seed in range(200):
            world = DOMAIN.world(seed, {"noise": noise})
            digest.update(canonical([world, DOMAIN.expected(world)]).encode())
    assert other == digest.hexdigest() + "\n"


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), noise=st.sampled_from([0, 1, 2]), devices=st.integers(1, 4))
def test_same_seed_same_world(seed, noise, devices):
    H.check_same_seed(seed, {"noise": noise, "devices": devices})


@pytest.fixture(scope="module")
def worker():
    with H.worker() as w:
        yield w


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), noise=st.sampled_from([0, 2]))
def test_same_seed_same_world_across_processes(worker, seed, noise):
    H.check_across_processes(worker, seed, {"noise": noise})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_any_text_and_any_arguments_never_raise(data, seed):
    H.check_any_actions(data, seed)
