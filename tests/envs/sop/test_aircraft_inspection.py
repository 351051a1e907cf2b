"""mtrl/SOP-AircraftInspection-v0: the harness checks, the SOP rules on hand-checked worlds, the tools."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from harness import SOPHarness, check_pinned, direct_call, set_at

from mtrl_gym.envs.sandbox.tools import ToolError
from mtrl_gym.envs.sop import generate_tasks, parse_task_inputs, play_oracle
from mtrl_gym.envs.sop.aircraft_inspection import AircraftInspection, AircraftInspectionEnv, procedure
from mtrl_gym.envs.sop.aircraft_inspection.tools import TOOLS
from mtrl_gym.envs.sop.aircraft_inspection.world import TYPES

H = SOPHarness("mtrl/SOP-AircraftInspection-v0")
DOMAIN = AircraftInspection()


def engine(serial, **changes):
    record = {"engine_serial": serial, "position": 1, "egt_margin_c": 15.0, "oil_consumption_qt_hr": 0.30,
              "vibration_ips": 1.00, "last_borescope": {"date": "2024-01-20", "aircraft_fh": 17500.3,
                                                        "finding": " No  Findings"}}
    record.update(changes)
    return record


def ad(number, msn=(2001, 2150), status="Effective", fh=600, cycles=400):
    return {"ad_number": number, "subject": "x", "status": status,
            "applicability": {"types": ["HA-340"], "msn_from": msn[0], "msn_to": msn[1]},
            "interval_fh": fh, "interval_cycles": cycles}


def hand_world() -> dict:
    """A hand-checked inspection: nearly every reading sits exactly on a threshold."""
    return {
        "inputs": {"tail_number": "N417HA", "inspection_date": "2024-03-05", "inspector_id": "LIC-4821"},
        "aircraft": {"tail_number": "N417HA", "type": " ha-340", "msn": 2150, "flight_hours": 18000.3,
                     "cycles": 11000,
                     "engines": [{"position": 1, "serial": "EN-1"}, {"position": 2, "serial": "EN-2"}]},
        # EN-1: EGT 15.0, oil 0.30, vibration 1.00, borescope exactly 500.0 FH ago: pass. EN-2: EGT 14.9: monitor.
        "engines": {"EN-1": engine("EN-1"), "EN-2": engine("EN-2", position=2, egt_margin_c=14.9)},
        # NLG: 171 psi x 100 = 17100 = 180 x 95, tread 3.0: pass. MLG: tread 1.6: monitor. Brake 2.5: pass.
        "landing_gear": {"tail_number": "N417HA",
                         "tyres": [{"position": "NLG L", "tread_depth_mm": 3.0, "pressure_psi": 171,
                                    "rated_pressure_psi": 180},
                                   {"position": "MLG L1", "tread_depth_mm": 1.6, "pressure_psi": 205,
                                    "rated_pressure_psi": 205}],
                         "brakes": [{"position": "MLG L1", "wear_pin_mm": 2.5}]},
        # Category B reported 3 days ago: still deferred. The NO-GO fault is cleared: history.
        "faults": [{"fault_code": "34-11-03", "system": "ADC 2", "status": "Active ", "first_reported": "2024-03-02"},
                   {"fault_code": "34-41-01", "system": "WXR", "status": "cleared", "first_reported": "2024-02-01"}],
        "mel": {"34-11-03": {"fault_code": "34-11-03", "mel_item": "34-11-03-01", "category": " b", "remarks": ""},
                "34-41-01": {"fault_code": "34-41-01", "mel_item": "34-41-01-01", "category": "no-go", "remarks": ""}},
        # AD-1: due at 18050.3 FH (50.0 away: due soon) and 11100 cycles. AD-2 superseded, AD-3 another MSN
        # range (both would be overdue), AD-4 one-time and done.
        "ads": [ad("AD-1"), ad("AD-2", status="superseded"), ad("AD-3", msn=(2151, 2600)),
                ad("AD-4", msn=(2001, 2600), fh=None, cycles=None)],
        "ad_records": {"AD-1": {"ad_number": "AD-1", "last_done": {"date": "2023-12-01", "aircraft_fh": 17450.3,
                                                                    "aircraft_cycles": 10700}},
                       "AD-2": {"ad_number": "AD-2", "last_done": None}, "AD-3": {"ad_number": "AD-3"},
                       "AD-4": {"ad_number": "AD-4", "last_done": {"date": "2019-05-01", "aircraft_fh": 9000.0,
                                                                    "aircraft_cycles": 5600}}},
        "schedule": [], "parts": {}, "inspection_number": 412, "state": {"inspection": None, "amendments": 0},
        "meta": {},
    }


BASE = {"engine_check": "monitor", "landing_gear_check": "monitor", "avionics_check": "deferred",
        "ad_compliance": "due_soon", "overdue_ads": [], "disposition": "airworthy_with_deferrals",
        "inspection_id": "RI-2024-00412"}
EN2_PASS = set_at(["engines", "EN-2", "egt_margin_c"], 15.0)
MLG_OK = set_at(["landing_gear", "tyres", 1, "tread_depth_mm"], 3.0)
CASES = {
    "base": ([], {}),
    "all engines on the limit pass": ([EN2_PASS], {"engine_check": "pass"}),
    "borescope 500.1 FH ago": ([EN2_PASS, set_at(["engines", "EN-1", "last_borescope", "aircraft_fh"], 17500.2)],
                               {"engine_check": "monitor"}),
    "EGT missing": ([EN2_PASS, lambda w: w["engines"]["EN-1"].pop("egt_margin_c")], {"engine_check": "monitor"}),
    "EGT 4.9": ([set_at(["engines", "EN-1", "egt_margin_c"], 4.9)], {"engine_check": "fail", "disposition": "grounded"}),
    "oil 0.51": ([set_at(["engines", "EN-2", "oil_consumption_qt_hr"], 0.51)],
                 {"engine_check": "fail", "disposition": "grounded"}),
    "crack": ([set_at(["engines", "EN-1", "last_borescope", "finding"], "CRACK ")],
              {"engine_check": "fail", "disposition": "grounded"}),
    "170 psi is below 95 %": ([MLG_OK, set_at(["landing_gear", "tyres", 0, "pressure_psi"], 170)],
                              {"landing_gear_check": "monitor"}),
    "tyres and brakes pass": ([MLG_OK], {"landing_gear_check": "pass"}),
    "pressure missing": ([MLG_OK, lambda w: w["landing_gear"]["tyres"][0].pop("pressure_psi")],
                         {"landing_gear_check": "monitor"}),
    "162 psi is 90 %": ([set_at(["landing_gear", "tyres", 0, "pressure_psi"], 162)], {"landing_gear_check": "monitor"}),
    "161 psi is below 90 %": ([set_at(["landing_gear", "tyres", 0, "pressure_psi"], 161)],
                              {"landing_gear_check": "fail", "disposition": "grounded"}),
    "brake 0.9": ([set_at(["landing_gear", "brakes", 0, "wear_pin_mm"], 0.9)],
                  {"landing_gear_check": "fail", "disposition": "grounded"}),
    "category B expired after 4 days": ([set_at(["faults", 0, "first_reported"], "2024-03-01")],
                                        {"avionics_check": "fail", "disposition": "grounded"}),
    "no active fault": ([set_at(["faults", 0, "status"], "CLEARED")],
                        {"avionics_check": "pass", "disposition": "airworthy"}),
    "an active NO-GO fault": ([set_at(["faults", 1, "status"], "active")],
                              {"avionics_check": "fail", "disposition": "grounded"}),
    "FH due point reached": ([set_at(["ad_records", "AD-1", "last_done", "aircraft_fh"], 17400.3)],
                             {"ad_compliance": "overdue", "overdue_ads": ["AD-1"], "disposition": "grounded"}),
    "cycles due point reached": ([set_at(["aircraft", "cycles"], 11100), set_at(["ads", 0, "interval_fh"], None)],
                                 {"ad_compliance": "overdue", "overdue_ads": ["AD-1"], "disposition": "grounded"}),
    "25 cycles away": ([set_at(["aircraft", "cycles"], 11075), set_at(["ads", 0, "interval_fh"], None)], {}),
    "26 cycles away": ([set_at(["aircraft", "cycles"], 11074), set_at(["ads", 0, "interval_fh"], None)],
                       {"ad_compliance": "compliant"}),
    "one-time AD never done": ([lambda w: w["ad_records"]["AD-4"].pop("last_done")],
                               {"ad_compliance": "overdue", "overdue_ads": ["AD-4"], "disposition": "grounded"}),
    "two overdue": ([lambda w: w["ad_records"]["AD-4"].pop("last_done"),
                     set_at(["ad_records", "AD-1", "last_done"], None)],
                    {"ad_compliance": "overdue", "overdue_ads": ["AD-1", "AD-4"], "disposition": "grounded"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_checked_worlds(case):
    edits, changes = CASES[case]
    check_pinned(DOMAIN, hand_world(), {**BASE, **changes}, edits)


def test_rules_in_isolation():
    assert procedure.worst(["pass", "fail", "monitor"]) == "fail" and procedure.worst([]) == "pass"
    assert procedure.fault_expired("2024-02-20", "2024-03-01", "C") is False  # 10 days: the last allowed day
    assert procedure.fault_expired("2024-02-19", "2024-03-01", " c ") is True
    assert procedure.ad_applies(ad("X", msn=(2001, 2150)), 2001) and not procedure.ad_applies(ad("X"), 2000)
    assert procedure.ad_summary({"A": "due_soon", "B": "compliant"}) == ("due_soon", [])
    assert procedure.disposition("monitor", "monitor", "pass", "due_soon") == "airworthy"
    assert procedure.inspection_id("2024-03-05", 7) == "RI-2024-00007"


def test_tools_answer_like_the_maintenance_system():
    call, ctx = direct_call(TOOLS, hand_world())
    with pytest.raises(ToolError, match="no aircraft 'N999HA'"):
        call("get_aircraft", {"tail_number": "N999HA"})
    with pytest.raises(ToolError, match="this station holds type HA-340"):
        call("list_ads", {"aircraft_type": "HA-220"})
    assert call("lookup_mel", {"aircraft_type": "HA-340 ", "fault_code": "34-11-03"})["category"] == " b"
    with pytest.raises(ToolError, match="no MEL entry"):
        call("lookup_mel", {"aircraft_type": "ha-340", "fault_code": "99-99-99"})
    with pytest.raises(ToolError, match="not an inspector licence id"):
        call("record_inspection", {"tail_number": "N417HA", "inspector_id": "4821", "engine_check": "pass",
                                   "landing_gear_check": "pass", "avionics_check": "pass",
                                   "ad_compliance": "compliant", "disposition": "airworthy"})
    args = {"tail_number": "n417ha", "inspector_id": "lic-4821", "engine_check": "pass", "landing_gear_check": "pass",
            "avionics_check": "pass", "ad_compliance": "compliant", "disposition": "airworthy"}
    first = call("record_inspection", args)
    second = call("record_inspection", {**args, "disposition": "grounded"})
    assert (first["status"], second["status"]) == ("recorded", "amended")
    assert first["inspection_id"] == second["inspection_id"] == "RI-2024-00412"
    assert ctx.state["state"]["inspection"]["disposition"] == "grounded"
    assert DOMAIN.state_errors(ctx.state, BASE) == {
        "engine_check": "recorded as 'pass'", "landing_gear_check": "recorded as 'pass'",
        "avionics_check": "recorded as 'pass'", "ad_compliance": "recorded as 'compliant'",
        "disposition": "recorded as 'grounded'"}


def test_the_recorded_inspection_must_match_the_answer():
    task = generate_tasks(DOMAIN, 1, seed=5)[0]
    env = AircraftInspectionEnv()
    env.reset(options={"task": task})
    answer = task["answer"]
    other = "fail" if answer["engine_check"] != "fail" else "pass"
    env.step('<tool_call>{"name": "record_inspection", "arguments": ' + json.dumps({
        "tail_number": parse_task_inputs(task["prompt"])["tail_number"],
        "inspector_id": "LIC-0001", "engine_check": other, "landing_gear_check": answer["landing_gear_check"],
        "avionics_check": answer["avionics_check"], "ad_compliance": answer["ad_compliance"],
        "disposition": answer["disposition"]}) + "}</tool_call>")
    _, reward, terminated, _, info = env.step(f"<final_answer>{json.dumps(answer)}</final_answer>")
    assert terminated and reward == 0.0
    assert set(info["grade_result"]["errors"]) == {"engine_check", "inspection_id"}
    reward, info, _ = play_oracle(env, options={"task": task})
    assert reward == 1.0


def test_oracle_step_count():
    stats = H.check_oracle(100)
    assert stats["max_steps"] <= 25


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    fields = report["fields"]
    for name in ("engine_check", "landing_gear_check", "avionics_check", "ad_compliance"):
        assert fields[name] <= 0.6 and len(report["classes"][name]) == 3, name
    assert fields["disposition"] <= 0.4 and fields["overdue_ads"] <= 0.9 and report["answer"] <= 0.02
    assert all(count >= 50 for count in report["classes"]["disposition"].values())


def test_every_target_is_realised_at_every_noise_level():
    names = {"engine": "engine_check", "gear": "landing_gear_check", "avionics": "avionics_check",
             "ad": "ad_compliance", "disposition": "disposition"}
    kinds = Counter()
    for noise in (0, 1, 2):
        for seed in range(150):
            world = DOMAIN.world(seed, {"noise": noise, "ads": 1 + seed % 8})
            label = procedure.expected(world)
            assert {k: label[v] for k, v in names.items()} == \
                {k: world["meta"]["targets"][k] for k in names}, (noise, seed)
            kinds[world["aircraft"]["type"].strip().upper()] += 1
    assert set(kinds) == set(TYPES)


def test_noise_knob_irregular_text_and_missing_readings():
    def stats(noise):
        out = Counter()
        for seed in range(200):
            w = DOMAIN.world(seed, {"noise": noise})
            out["irregular"] += any(f["status"] not in ("active", "cleared") for f in w["faults"])
            out["no_egt"] += any("egt_margin_c" not in e or e["egt_margin_c"] is None for e in w["engines"].values())
            out["no_pressure"] += any(t.get("pressure_psi") is None for t in w["landing_gear"]["tyres"])
        return out
    clean, noisy = stats(0), stats(2)
    assert clean["irregular"] == clean["no_egt"] == clean["no_pressure"] == 0
    assert noisy["irregular"] > 20 and noisy["no_egt"] > 5 and noisy["no_pressure"] > 5


