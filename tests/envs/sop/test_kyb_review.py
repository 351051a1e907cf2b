"""mtrl/SOP-KYBReview-v0: the SOP's rules, pinned worlds, tools, and the shared harness checks."""

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
from mtrl_gym.envs.sop.kyb_review.catalog import business_key, match_score
from mtrl_gym.envs.sop.kyb_review.people import Cast, person_variant
from mtrl_gym.envs.sop.kyb_review.procedure import (bank_check, beneficial_owners, classify_hit, decide, expected,
                                                    oracle, ownership_check, registration_check, total_stakes)
from mtrl_gym.envs.sop.kyb_review.tools import TOOLS
from mtrl_gym.envs.sop.kyb_review.world import draw_outcomes

ENV_ID = "mtrl/SOP-KYBReview-v0"
H = SOPHarness(ENV_ID)
DOMAIN = H.domain


# ------------------------------------------------------------------------------------------ the rules


@pytest.mark.parametrize("a, b, same", [
    ("Birch & Finch, L.L.C.", "BIRCH AND FINCH LLC", True),
    ("Oak Anchor Limited Liability Company", "oak  anchor llc", True),
    ("Redstone Foods Incorporated", "Redstone Foods Inc.", True),
    ("Kestrel Co.", "KESTREL COMPANY", True),
    ("Birch & Finch LLC", "Birch & Finch Inc", False),          # another legal form
    ("Birch Finch LLC", "Birch & Finch LLC", False),            # a missing word is a different name
    ("Redstone Foods Group LLC", "Redstone Foods LLC", False),
])
def test_business_name_normalisation(a, b, same):
    assert (business_key(a) == business_key(b)) is same


def test_registration_check_rows_in_order():
    rec = {"found": True, "status": "Good Standing", "legal_name": "Kestrel Foods, Inc."}
    assert registration_check(rec, "KESTREL FOODS INCORPORATED") == "verified"
    assert registration_check(rec, "Kestrel Foods LLC") == "name_mismatch"
    assert registration_check({**rec, "status": "SUSPENDED"}, "Kestrel Foods LLC") == "inactive"
    assert registration_check({"found": False}, "x") == registration_check(None, "x") == "not_found"


def test_stakes_add_direct_and_indirect_holdings_exactly():
    owners = [{"owner_type": "individual", "person_id": "P-1", "percent": 10},
              {"owner_type": "Entity", "registration_number": "7", "jurisdiction": "nv", "percent": 50},
              {"owner_type": "individual", "person_id": "P-2", "percent": 40}]
    subs = {"NV:7": [{"owner_type": "individual", "person_id": "P-1", "percent": 30},
                     {"owner_type": "individual", "person_id": "P-3", "percent": 49},
                     {"owner_type": "individual", "person_id": "P-4", "percent": 21}]}
    stakes = total_stakes(owners, subs)
    assert stakes == {"P-1": 2500, "P-2": 4000, "P-3": 2450, "P-4": 1050}     # 10% + 50% x 30% is exactly 25%
    assert beneficial_owners(stakes, "P-9") == ["P-1", "P-2", "P-9"]
    assert beneficial_owners(stakes, "P-2") == ["P-1", "P-2"]
    assert ownership_check(stakes, ["P-2", "P-3"]) == "undisclosed_owner"
    assert ownership_check(stakes, ["P-1", "P-2"]) == "consistent"


@pytest.mark.parametrize("hit, result", [
    ({"name": "ANNA NOVAK", "date_of_birth": "1970-01-02", "match_score": 100}, "confirmed"),
    ({"name": "Anna Novak", "match_score": 100}, "potential"),                               # no birth date
    ({"name": "Anna Novak", "date_of_birth": None, "match_score": 100}, "potential"),
    ({"name": "Anna Nowak", "date_of_birth": "1970-01-02", "match_score": 90}, "potential"),  # spelt differently
    ({"name": "Anna Novak", "date_of_birth": "1981-05-05", "match_score": 100}, "ignore"),    # someone else
    ({"name": "Anna Novakova", "date_of_birth": "1970-01-02", "match_score": 84}, "ignore"),  # below 85
])
def test_hit_classification_table(hit, result):
    assert classify_hit(hit, {"name": "Anna  Novak", "date_of_birth": "1970-01-02"}) == result


def test_bank_check_and_decision_matrix():
    acct = {"found": True, "status": "OPEN", "account_type": "Business_Checking", "account_holder": "Kestrel Co."}
    assert bank_check(acct, "KESTREL COMPANY") == "verified"
    assert bank_check({**acct, "account_type": "personal_savings"}, "Kestrel Co") == "holder_mismatch"
    assert bank_check({**acct, "account_holder": "Kestrel Corp"}, "Kestrel Co") == "holder_mismatch"
    assert bank_check({**acct, "status": "frozen"}, "Kestrel Co") == bank_check({"found": False}, "x") == "invalid"
    assert decide("verified", "consistent", "clear", "verified") == "approve"
    assert decide("not_found", "no_filing", "clear", "verified") == "escalate"
    assert decide("inactive", "consistent", "potential_match", "verified") == "escalate"
    assert decide("verified", "no_filing", "clear", "verified") == "request_information"
    assert decide("verified", "consistent", "clear", "invalid") == "request_information"


def test_spelling_variants_land_in_the_wanted_score_band():
    rng = np.random.default_rng(0)
    cast = Cast(rng)
    for _ in range(100):
        name = cast.name()
        near = person_variant(rng, name, (85, 99))
        assert near is not None and 85 <= match_score(name, near) <= 99 and near.lower() != name.lower()
        weak = person_variant(rng, name, (70, 84))
        assert weak is None or 70 <= match_score(name, weak) <= 84


# ---------------------------------------------------------------------------------- pinned worlds


def _person(pid, name, dob, **extra):
    return {"person_id": pid, "name": name, "date_of_birth": dob, **extra}


def _world(app, *, registry=None, filings=None, watchlist=(), banks=None, next_case=50505):
    return {"application_id": app["application_id"], "applications": {app["application_id"]: app},
            "registry": registry or {}, "filings": filings or {}, "watchlist": list(watchlist), "banks": banks or {},
            "credit": {}, "media": [], "cases": [], "next_case": next_case}


def _entry(eid, name, dob="absent"):
    entry = {"entry_id": eid, "name": name, "list": "Consolidated Sanctions List", "program": "asset freeze"}
    return entry if dob == "absent" else {**entry, "date_of_birth": dob}


ANNA, BRUNO = _person("P-100001", "Anna Novak", "1970-01-02"), _person("P-100002", "Bruno Szabo", "1982-03-04")
CELIA, DARIUS = _person("P-100003", "Celia Marchetti", "1975-05-06"), _person("P-100004", "Darius Lindgren",
                                                                              "1966-07-08")
ELENA = _person("P-100005", "Elena Fontaine", "1979-09-10", title="Chief Executive Officer")

PINNED_ESCALATE = _world(
    {"application_id": "APP-424242", "submitted_on": "2025-05-20",
     "business": {"legal_name": "Maple & Finch Trading, L.L.C.", "registration_number": "4829103",
                  "jurisdiction": "DE", "entity_type": "limited liability company", "industry": "trading",
                  "website": "https://www.maplefinch.example"},
     # Celia holds exactly 25% through Kestrel and is not declared
     "owners": [{**ANNA, "ownership_percent": 40}, {**BRUNO, "ownership_percent": 25}],
     "control_person": ELENA, "bank_account": {"routing_number": "021000089", "account_number": "1234567890"}},
    registry={"DE:4829103": {"registration_number": "4829103", "jurisdiction": "DE", "status": "Good Standing",
                             "legal_name": "MAPLE AND FINCH TRADING LLC", "entity_type": "limited liability company",
                             "formation_date": "2011-02-03", "registered_agent": "Novak Registered Agents"},
              "NY:4829103": {"registration_number": "4829103", "jurisdiction": "NY", "status": "dissolved",
                             "legal_name": "Maple & Finch Textiles Inc", "entity_type": "corporation",
                             "formation_date": "1999-01-01", "registered_agent": "X Registered Agents"}},
    filings={"DE:4829103": {"entity_name": "Maple & Finch Trading LLC", "filed_on": "2024-01-01",
                            "owners": [{"owner_type": "individual", **ANNA, "name": "ANNA NOVAK", "percent": 40},
                                       {"owner_type": "entity", "name": "Kestrel Holdings LLC",
                                        "registration_number": "7000001", "jurisdiction": "NV", "percent": 50},
                                       {"owner_type": "individual", **BRUNO, "percent": 10}],
                            "control_person": ELENA},
             "NV:7000001": {"entity_name": "Kestrel Holdings LLC", "filed_on": "2023-06-01",
                            "owners": [{"owner_type": "individual", **CELIA, "percent": 50},
                                       {"owner_type": "individual", **BRUNO, "percent": 30},     # Bruno: 10 + 15
                                       {"owner_type": "individual", **DARIUS, "percent": 20}],
                            "control_person": CELIA}},
    watchlist=[_entry("WL-1", "Celia Marchetti"),                            # no birth date: potential
               _entry("WL-2", "ELENA FONTAINE", "1960-01-01"),               # namesake: ignored
               _entry("WL-3", "Darius Lindgren", "1966-07-08"),              # exact, but Darius is no beneficial owner
               _entry("WL-4", "Zora Castillo", "1970-01-02")],
    banks={"021000089": {"1234567890": {"account_number": "1234567890", "routing_number": "021000089",
                                        "bank_name": "First Meridian Bank", "status": "OPEN",
                                        "account_holder": "Maple & Finch Trading Limited Liability Company",
                                        "account_type": "business_checking", "opened_on": "2012-01-01"}}})
PINNED_ESCALATE_ANSWER = {"case_id": "KYB-E-50505", "decision": "escalate", "registration_check": "verified",
                          "ownership_check": "undisclosed_owner",
                          "beneficial_owners": ["P-100001", "P-100002", "P-100003", "P-100005"],
                          "sanctions_result": "potential_match", "bank_check": "verified"}

WEN, YUSUF = _person("P-200001", "Wen Takahashi", "1988-02-02"), _person("P-200002", "Yusuf Quintero", "1971-12-12")
ZORA = _person("P-200003", "Zora Vasquez", "1969-06-06", title="President")
PINNED_NO_FILING = _world(
    {"application_id": "APP-777777", "submitted_on": "2025-05-28",
     "business": {"legal_name": "Northgate Freight Inc", "registration_number": "7000002", "jurisdiction": "TX",
                  "entity_type": "corporation", "industry": "freight", "website": "https://www.northgate.example"},
     "owners": [{**WEN, "ownership_percent": 30}, {**YUSUF, "ownership_percent": 24}],
     "control_person": ZORA, "bank_account": {"routing_number": "026009593", "account_number": "5550001111"}},
    registry={"TX:7000002": {"registration_number": "7000002", "jurisdiction": "TX", "status": "active",
                             "legal_name": "Northgate Freight Incorporated", "entity_type": "corporation",
                             "formation_date": "2015-05-05", "registered_agent": "Szabo Registered Agents"}},
    watchlist=[_entry("WL-9", "Yusuf Quintero", "1971-12-12"),   # a 24% owner is not screened
               _entry("WL-8", "wen takahashi", "1990-01-01")],
    banks={"026009593": {"5550001111": {"account_number": "5550001111", "routing_number": "026009593",
                                        "bank_name": "Coastal Trust", "status": "open",
                                        "account_holder": "Northgate Freight Corp", "account_type": "business_savings",
                                        "opened_on": "2016-01-01"}}},
    next_case=777)
PINNED_NO_FILING_ANSWER = {"case_id": "KYB-R-777", "decision": "request_information", "registration_check": "verified",
                           "ownership_check": "no_filing", "beneficial_owners": ["P-200001", "P-200003"],
                           "sanctions_result": "clear", "bank_check": "holder_mismatch"}


@pytest.mark.parametrize("world, answer", [(PINNED_ESCALATE, PINNED_ESCALATE_ANSWER),
                                           (PINNED_NO_FILING, PINNED_NO_FILING_ANSWER)])
def test_pinned_worlds_reference_procedure_and_oracle(world, answer):
    assert expected(world) == answer
    call, ctx = direct_call(TOOLS, world)
    got = oracle({"application_id": world["application_id"]}, call)
    assert {**got, "beneficial_owners": sorted(got["beneficial_owners"])} == answer
    assert ctx.state["cases"] == [{"case_id": answer["case_id"], "application_id": world["application_id"],
                                   "decision": answer["decision"], "note": ""}]


def test_pinned_traps_change_the_label():
    confirmed = copy.deepcopy(PINNED_ESCALATE)
    confirmed["watchlist"][0]["date_of_birth"] = "1975-05-06"
    assert expected(confirmed)["sanctions_result"] == "confirmed_match"
    cleared = copy.deepcopy(PINNED_ESCALATE)
    cleared["watchlist"][0]["date_of_birth"] = "1975-05-07"
    cleared["applications"]["APP-424242"]["owners"].append({**CELIA, "ownership_percent": 25})
    assert expected(cleared) == {**PINNED_ESCALATE_ANSWER, "case_id": "KYB-A-50505", "decision": "approve",
                                 "ownership_check": "consistent", "sanctions_result": "clear"}
    moved = copy.deepcopy(PINNED_ESCALATE)
    moved["filings"]["NV:7000001"]["owners"][1]["percent"] = 29                # Bruno: 10 + 14.5 < 25
    assert "P-100002" not in expected(moved)["beneficial_owners"]
    renamed = copy.deepcopy(PINNED_NO_FILING)
    renamed["registry"]["TX:7000002"]["legal_name"] = "Northgate Freight Corp"
    assert expected(renamed)["registration_check"] == "name_mismatch"
    assert expected(renamed)["bank_check"] == "verified"                       # the registry name is the reference


# -------------------------------------------------------------------------------------------- tools


def test_tool_errors_and_not_found_replies():
    call, _ = direct_call(TOOLS, PINNED_ESCALATE)
    with pytest.raises(ToolError, match="no application 'APP-1'; application ids look like 'APP-123456'"):
        call("get_application", {"application_id": "APP-1"})
    with pytest.raises(ToolError, match="give a person's name of 1 to 200 characters"):
        call("screen_sanctions", {"name": "   "})
    assert call("lookup_registry", {"registration_number": "4829103", "jurisdiction": "ca"})["found"] is False
    assert call("lookup_registry", {"registration_number": " 4829103", "jurisdiction": "ny"})["status"] == "dissolved"
    assert call("verify_bank_account", {"routing_number": "999", "account_number": "1"}) == {
        "found": False, "routing_number": "999", "account_number": "1", "message": "unknown routing number"}
    hits = call("screen_sanctions", {"name": "elena  fontaine"})["hits"]
    assert [(h["entry_id"], h["match_score"]) for h in hits] == [("WL-2", 100)]
    assert call("open_case", {"application_id": "app-424242", "decision": "approve"})["case_id"] == "KYB-A-50505"
    with pytest.raises(ToolError, match="APP-424242 already has case KYB-A-50505"):
        call("open_case", {"application_id": "APP-424242", "decision": "escalate"})


def test_case_with_the_wrong_decision_fails_the_case_field():
    env = gymnasium.make(ENV_ID).unwrapped
    task = generate_tasks(env.domain, 1, seed=5)[0]
    env.reset(options={"task": task})
    want = task["answer"]
    other = "approve" if want["decision"] != "approve" else "escalate"
    app_id = parse_task_inputs(task["prompt"])["application_id"]
    _, _, _, _, info = env.step("<tool_call>" + json.dumps({"name": "open_case", "arguments": {
        "application_id": app_id, "decision": other}}) + "</tool_call>")
    case_id = json.loads(info["tool_results"][0]["content"])["case_id"]
    _, reward, terminated, _, info = env.step(f"<final_answer>{json.dumps({**want, 'case_id': case_id})}"
                                              "</final_answer>")
    assert terminated and reward == 0.0
    assert info["grade_result"]["errors"]["case_id"].startswith("wrong value")


# --------------------------------------------------------------------------------- the generator


def test_generated_outcomes_are_what_the_reference_procedure_finds():
    H.check_planned(lambda seed, world: draw_outcomes(np.random.default_rng(seed)), difficulty={"max_owners": 6})


def test_noise_levels_differ():
    def traps(noise):
        c = Counter()
        for seed in range(150):
            world = DOMAIN.world(seed, {"noise": noise})
            app = world["applications"][world["application_id"]]
            biz = app["business"]
            c["respelt name"] += any(r["legal_name"] != biz["legal_name"] and business_key(r["legal_name"]) ==
                                     business_key(biz["legal_name"]) for r in world["registry"].values())
            c["hit without birth date"] += any(not e.get("date_of_birth") for e in world["watchlist"])
            c["other jurisdiction"] += sum(r["registration_number"] == biz["registration_number"]
                                           for r in world["registry"].values()) > 1
        return c
    clean, heavy = traps(0), traps(2)
    assert clean["respelt name"] == clean["hit without birth date"] == clean["other jurisdiction"] == 0, clean
    assert min(heavy.values()) > 5, heavy


def test_label_distribution_is_balanced():
    report = H.label_report(500)
    assert report["fields"]["decision"] < 0.45
    for name in ("registration_check", "ownership_check", "bank_check"):
        assert report["fields"][name] < 0.60, (name, report["classes"][name])
    assert report["fields"]["sanctions_result"] < 0.70
    assert report["answer"] <= 2 / 500
    without_ids = Counter(canonical({k: v for k, v in t["answer"].items() if k not in ("case_id", "beneficial_owners")})
                          for t in H.tasks(500))
    assert without_ids.most_common(1)[0][1] / 500 < 0.35                   # the all-clear approval


# --------------------------------------------------------------------------------- harness checks


