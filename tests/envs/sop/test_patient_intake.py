"""mtrl/SOP-PatientIntake-v0: the SOP's rules, pinned worlds, tools, and the shared harness checks."""

from __future__ import annotations

import copy
import json
from collections import Counter

import gymnasium
import numpy as np
import pytest
from harness import SOPHarness, direct_call

from mtrl_gym.envs.sandbox import ToolError
from mtrl_gym.envs.sop import canonical, generate_tasks, parse_task_inputs
from mtrl_gym.envs.sop.patient_intake.procedure import (allergy_risk, care_pathway, coverage_status, expected,
                                                        medication_risk, normalize_member_id, oracle,
                                                        reaction_is_severe)
from mtrl_gym.envs.sop.patient_intake.tools import TOOLS
from mtrl_gym.envs.sop.patient_intake.world import draw_outcomes

ENV_ID = "mtrl/SOP-PatientIntake-v0"
H = SOPHarness(ENV_ID)
DOMAIN = H.domain


# ------------------------------------------------------------------------------------------ the rules


@pytest.mark.parametrize("start, end, day, status", [
    ("2024-01-01", None, "2025-03-10", "verified"),
    ("2024-01-01", "2025-03-10", "2025-03-10", "verified"),   # both ends inclusive
    ("2025-03-10", "2025-12-31", "2025-03-10", "verified"),
    ("2024-01-01", "2025-03-09", "2025-03-10", "inactive"),   # ended the day before
    ("2025-03-11", None, "2025-03-10", "inactive"),           # starts the day after
])
def test_coverage_dates_decide_and_both_ends_are_inclusive(start, end, day, status):
    assert coverage_status(start, end, day) == status


def test_member_ids_are_normalised_before_verification():
    assert normalize_member_id("nsm-4821 0937") == normalize_member_id("NSM 48210937") == "NSM48210937"


@pytest.mark.parametrize("generics, high_alert, severities, risk", [
    ([], [], [], "low"),
    (["metformin", "hydrochlorothiazide"], [], ["minor"], "low"),                   # minor never raises the risk
    (["a", "b", "c", "d"], [], [], "low"),
    (["a", "b", "c", "d", "e"], [], [], "moderate"),                                # polypharmacy
    (["lisinopril", "spironolactone"], [], ["Moderate"], "moderate"),               # case ignored
    (["simvastatin", "clarithromycin"], [], ["CONTRAINDICATED"], "high"),
    (["warfarin"], ["warfarin"], [], "high"),                                       # high-alert alone
])
def test_medication_risk_table(generics, high_alert, severities, risk):
    assert medication_risk(generics, high_alert, severities) == risk


@pytest.mark.parametrize("reaction, severe", [
    ("rash", False), ("  HIVES ", False), ("watery  eyes", False), ("anaphylaxis", True), ("dizziness", True),
    ("", True), ("   ", True), (None, True),
])
def test_only_listed_reactions_are_mild_and_blank_counts_as_severe(reaction, severe):
    assert reaction_is_severe(reaction) is severe


def test_allergy_risk_and_pathway_rules():
    assert allergy_risk([], [], ["nsaid"]) == "none"
    assert allergy_risk(["nausea"], ["nsaid"], ["statin"]) == "low"
    assert allergy_risk(["nausea"], ["NSAID"], ["nsaid"]) == "high"          # class conflict, case ignored
    assert allergy_risk(["nausea", "rash"], [None, None], []) == "low"       # foods never conflict
    assert care_pathway("low", "high") == care_pathway("high", "none") == "clinical_review"
    assert care_pathway("moderate", "low") == "pharmacist_review"
    assert care_pathway("low", "low") == care_pathway("low", "none") == "standard"


# ---------------------------------------------------------------------------------- pinned worlds

def _world(form, *, members=None, pharmacies=(), networks=None, next_registration=31337):
    return {"intake_id": form["intake_id"], "forms": {form["intake_id"]: form}, "members": members or {},
            "pharmacies": list(pharmacies), "networks": networks or {}, "next_registration": next_registration,
            "style": {"severity_case": "title", "status_case": "upper"}, "slots": [], "registrations": [],
            "messages": []}


def _pharmacy(pid, name, zip_code, status="open"):
    return {"pharmacy_id": pid, "name": name, "zip_code": zip_code, "status": status, "address": "1 Elm St",
            "phone": "503-555-0100"}


PINNED_HIGH = _world(
    {"intake_id": "INT-10001", "appointment_date": "2025-04-30", "department": "Cardiology",
     "patient": {"first_name": "Rosa", "last_name": "Haddad", "date_of_birth": "1961-02-03"},
     "insurance": {"payer_id": "northstar", "member_id": "nsm-1234 5678"},
     "preferred_pharmacy": {"name": "  oakridge   PHARMACY", "zip_code": "97201"},
     "medications": [{"name": "Coumadin", "dose": "5 mg", "frequency": "once daily"},
                     {"name": " IBUPROFEN", "dose": "200 mg", "frequency": "as needed"}],
     "allergies": [{"substance": "Sulfa", "reaction": ""}, {"substance": "pollen", "reaction": "sneezing"}]},
    # coverage ends on the appointment day (inclusive) and the stale status text says otherwise
    members={"NORTHSTAR": {"NSM12345678": {"member_id": "NSM12345678", "plan_id": "NSM-PPO-2",
                                           "plan_name": "Northstar PPO Plus", "subscriber": "self",
                                           "coverage_start": "2023-01-01", "coverage_end": "2025-04-30",
                                           "status": "terminated"}}},
    pharmacies=[_pharmacy("PH-11111", "Oakridge Pharmacy", "97202"),                 # other ZIP
                _pharmacy("PH-22222", "Oakridge Pharmacy Express", "97201"),         # longer name
                _pharmacy("PH-33333", "Oakridge Pharmacy", "97201")],
    networks={"NSM-PPO-2": {"PH-33333": "standard"}, "RBC-DISCOUNT": {}})
PINNED_HIGH_ANSWER = {"registration_id": "CR-31337", "insurance_status": "verified", "pharmacy_status": "in_network",
                      "medication_risk": "high", "allergy_risk": "high", "flagged_medications": ["warfarin"],
                      "care_pathway": "clinical_review"}

PINNED_STANDARD = _world(
    {"intake_id": "INT-20002", "appointment_date": "2025-02-14", "department": "Family Medicine",
     "patient": {"first_name": "Sven", "last_name": "Okonkwo", "date_of_birth": "1990-07-21"},
     "insurance": {"payer_id": "BLUEFIELD", "member_id": "   "},                     # blank: self-pay
     "preferred_pharmacy": {"name": "Greenleaf Pharmacy", "zip_code": "97110"},
     # five entries but four distinct drugs (Zocor is simvastatin): not polypharmacy
     "medications": [{"name": "simvastatin", "dose": "20 mg", "frequency": "at bedtime"},
                     {"name": "Zocor", "dose": "", "frequency": "as needed"},
                     {"name": "metformin", "dose": "500 mg", "frequency": "twice daily"},
                     {"name": "hydrochlorothiazide", "dose": "25 mg", "frequency": "once daily"},
                     {"name": "Synthroid", "dose": "50 mg", "frequency": "once daily"}],
     "allergies": [{"substance": "Peanuts", "reaction": "Hives"}]},
    pharmacies=[_pharmacy("PH-44444", "Greenleaf Pharmacy", "97110")],
    networks={"RBC-DISCOUNT": {"PH-44444": "preferred"}, "BFH-EPO": {}})
PINNED_STANDARD_ANSWER = {"registration_id": "ST-31337", "insurance_status": "self_pay",
                          "pharmacy_status": "in_network", "medication_risk": "low", "allergy_risk": "low",
                          "flagged_medications": [], "care_pathway": "standard"}


@pytest.mark.parametrize("world, answer", [(PINNED_HIGH, PINNED_HIGH_ANSWER),
                                           (PINNED_STANDARD, PINNED_STANDARD_ANSWER)])
def test_pinned_worlds_reference_procedure_and_oracle(world, answer):
    assert expected(world) == answer
    call, ctx = direct_call(TOOLS, world)
    assert oracle({"intake_id": world["intake_id"]}, call) == answer
    assert ctx.state["registrations"][0]["registration_id"] == answer["registration_id"]


def test_pinned_traps_change_the_label():
    closed = copy.deepcopy(PINNED_HIGH)
    closed["pharmacies"][2]["status"] = "closed"
    assert expected(closed)["pharmacy_status"] == "invalid"
    ended = copy.deepcopy(PINNED_HIGH)
    ended["members"]["NORTHSTAR"]["NSM12345678"]["coverage_end"] = "2025-04-29"
    assert expected(ended)["insurance_status"] == "inactive"
    assert expected(ended)["pharmacy_status"] == "out_of_network"   # the discount programme's network now
    five = copy.deepcopy(PINNED_STANDARD)
    five["forms"]["INT-20002"]["medications"].append({"name": "Norvasc", "dose": "5 mg", "frequency": "daily"})
    # amlodipine + simvastatin is a moderate interaction, and there are five distinct drugs now
    assert expected(five)["medication_risk"] == "moderate" and expected(five)["care_pathway"] == "pharmacist_review"


# -------------------------------------------------------------------------------------------- tools


def test_tool_errors_name_the_problem():
    call, ctx = direct_call(TOOLS, PINNED_HIGH)
    with pytest.raises(ToolError, match="no intake form 'INT-99999'; intake ids look like 'INT-12345'"):
        call("get_intake_form", {"intake_id": "INT-99999"})
    with pytest.raises(ToolError, match=r"no medication named 'lipitorr'\. Did you mean 'lipitor'\?"):
        call("lookup_medication", {"name": "lipitorr"})
    with pytest.raises(ToolError, match="unknown payer_id 'ACME'; known payers: BLUEFIELD, CASCADE"):
        call("verify_eligibility", {"payer_id": "ACME", "member_id": "X"})
    assert call("verify_eligibility", {"payer_id": "NORTHSTAR", "member_id": "nsm-1234 5678"})["member_found"] is False
    first = call("register_patient", {"intake_id": "int-10001", **{k: v for k, v in PINNED_HIGH_ANSWER.items()
                                                                    if k not in ("registration_id",
                                                                                 "flagged_medications")}})
    assert first["registration_id"] == "CR-31337"
    with pytest.raises(ToolError, match="INT-10001 is already registered as CR-31337"):
        call("register_patient", {"intake_id": "INT-10001", "insurance_status": "verified",
                                  "pharmacy_status": "in_network", "medication_risk": "low", "allergy_risk": "none",
                                  "care_pathway": "standard"})


def test_tool_results_carry_the_noise_the_sop_handles():
    call, _ = direct_call(TOOLS, PINNED_HIGH)
    found = call("search_pharmacies", {"name": "OAKRIDGE pharmacy", "zip_code": ""})
    assert [p["pharmacy_id"] for p in found["results"]] == ["PH-11111", "PH-22222", "PH-33333"]
    assert {p["status"] for p in found["results"]} == {"OPEN"}
    checked = call("check_interactions", {"medications": ["Jantoven", "advil", "warfarin"]})
    assert checked == {"medications": ["ibuprofen", "warfarin"], "pairs_checked": 1,
                       "interactions": [{"drugs": ["ibuprofen", "warfarin"], "severity": "Major"}]}


def test_registration_with_wrong_values_fails_the_registration_field():
    env = gymnasium.make(ENV_ID).unwrapped
    task = generate_tasks(env.domain, 1, seed=3)[0]
    env.reset(options={"task": task})
    want = task["answer"]
    wrong_risk = "low" if want["allergy_risk"] != "low" else "high"
    args = {k: want[k] for k in ("insurance_status", "pharmacy_status", "medication_risk", "care_pathway")}
    intake_id = parse_task_inputs(task["prompt"])["intake_id"]
    env.step("<tool_call>" + json.dumps({"name": "register_patient", "arguments": {
        "intake_id": intake_id, "allergy_risk": wrong_risk, **args}}) + "</tool_call>")
    _, reward, terminated, _, info = env.step(f"<final_answer>{json.dumps(want)}</final_answer>")
    assert terminated and reward == 0.0
    assert info["grade_result"]["fields"]["registration_id"] == 0.0
    assert f"allergy_risk='{wrong_risk}'" in info["grade_result"]["errors"]["registration_id"]


# --------------------------------------------------------------------------------- the generator


def test_generated_outcomes_are_what_the_reference_procedure_finds():
    H.check_planned(lambda seed, world: draw_outcomes(np.random.default_rng(seed)), n=300)


def test_noise_levels_differ():
    def traps(noise):
        c = Counter()
        for seed in range(150):
            world = DOMAIN.world(seed, {"noise": noise})
            form = world["forms"][world["intake_id"]]
            c["blank reaction"] += any(not str(a.get("reaction", "")).strip() for a in form["allergies"])
            c["missing section"] += "insurance" not in form or "preferred_pharmacy" not in form
            c["odd spelling"] += any(m["name"] != m["name"].strip() or m["name"].isupper() for m in form["medications"])
            c["open-ended coverage without the key"] += any("coverage_end" not in r for m in world["members"].values()
                                                            for r in m.values())
        return c
    clean, heavy = traps(0), traps(2)
    assert sum(clean.values()) == 0, clean
    assert min(heavy.values()) > 5, heavy


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    assert report["fields"]["care_pathway"] < 0.40
    for name in ("insurance_status", "pharmacy_status", "medication_risk", "allergy_risk"):
        assert report["fields"][name] < 0.50, (name, report["classes"][name])
    assert report["answer"] <= 2 / 500                                    # the registration id is per task
    decisions = Counter(canonical({k: v for k, v in t["answer"].items() if k != "registration_id"})
                        for t in H.tasks(500))
    assert decisions.most_common(1)[0][1] / 500 < 0.06


# --------------------------------------------------------------------------------- harness checks


