"""mtrl/SOP-ReferralAbuse-v0: the shared harness checks plus hand-checked worlds of SOP RP-7."""

from __future__ import annotations

import copy

import pytest
from harness import SOPHarness, direct_call

from mtrl_gym.envs.sandbox import ToolError
from mtrl_gym.envs.sop.referral_abuse import ReferralAbuse
from mtrl_gym.envs.sop.referral_abuse.procedure import expected_answer, normalize_address, oracle, parse_time
from mtrl_gym.envs.sop.referral_abuse.tools import TOOLS
from mtrl_gym.envs.sop.referral_abuse.world import ACTION_MATRIX, ACTIONS, SEVERITIES, severity_of

H = SOPHarness("mtrl/SOP-ReferralAbuse-v0")
DOMAIN = ReferralAbuse()


# ----------------------------------------------------------------------------- harness


def test_oracle_step_count():
    stats = H.check_oracle(500)
    assert stats["max_steps"] <= 2 * 6 + 4  # referrer, referrals, 2 per reviewed referral, case, submit
    assert 0.6 < stats["stateful_rate"] < 0.8  # a case unless the severity is none


def test_no_label_leak_and_balanced_labels():
    report = H.check_no_label_leak(500)
    labels = H.label_report(500)
    assert labels["fields"]["severity"] <= 0.32 and labels["fields"]["action"] <= 0.32
    assert labels["fields"]["referrals_reviewed"] <= 0.3 and labels["fields"]["total_indicators"] <= 0.2
    assert labels["fields"]["flagged_referrals"] <= 0.4 and labels["fields"]["case_id"] <= 0.32
    assert labels["fields"]["clawback_amount"] <= 0.72  # 0 whenever the action claws nothing back
    assert labels["answer"] <= 0.05 and report.exact_rate <= 0.05  # "nothing wrong" answers repeat


# ----------------------------------------------------------------------------- the procedure


def test_the_procedure_recovers_the_generators_plan():
    """The generator picks the severity, flags and indicator sets first; the procedure reads them back."""
    for task in H.tasks(300) + H.tasks(100, difficulty={"noise": 2, "referrals": 10}):
        world = DOMAIN.world(task["seed"], task["difficulty"])
        plan, answer = world["plan"], task["answer"]
        assert answer["severity"] == plan["severity"]
        assert answer["referrals_reviewed"] == plan["reviewed"] == len(plan["indicators"])
        assert answer["total_indicators"] == sum(len(v) for v in plan["indicators"].values())
        flagged = {r for r, ind in plan["indicators"].items() if len(ind) >= 2 or "shared_payment" in ind}
        assert set(answer["flagged_referrals"]) == flagged and len(flagged) == plan["flagged"]
        assert answer["action"] == ACTION_MATRIX[(plan["severity"], plan["prior_warning"])]
        assert (answer["case_id"] is None) == (plan["severity"] == "none")


@pytest.mark.parametrize("flagged,payment,velocity,severity", [
    (0, False, False, "none"), (1, False, False, "low"), (2, False, False, "medium"), (5, False, False, "high"),
    (1, True, False, "medium"),           # shared payment: at least medium
    (0, False, True, "low"), (1, True, True, "high"), (3, False, True, "high"),  # velocity: one level up
])
def test_severity_table(flagged, payment, velocity, severity):
    assert severity_of(flagged, payment, velocity) == severity


def test_action_matrix_and_normalisation_rules():
    assert sorted(set(ACTION_MATRIX.values())) == sorted(ACTIONS) and {s for s, _ in ACTION_MATRIX} == set(SEVERITIES)
    assert normalize_address("  14 LINDEN street ,Apt. 3 - 1012 amsterdam ") == "14 linden street apt 3 1012 amsterdam"
    assert normalize_address("14 Linden Street, Apt 4, 1012 Amsterdam") != normalize_address("14 Linden Street, Apt 3")
    assert parse_time("2024-03-31T23:30:00-02:00").isoformat() == "2024-04-01T01:30:00+00:00"


def _account(acc, *, devices, cards, address="1 Mill Lane, Apt 1, 1050 Brussels", opened="2024-01-01T00:00:00Z",
             warnings=0):
    return {"account_id": acc, "name": "Test Person", "opened_at": opened, "status": "active", "segment": "retail",
            "address": address, "device_ids": devices,
            "payment_methods": [{"type": "card", "fingerprint": fp} for fp in cards], "prior_warnings": warnings}


def _referral(rid, acc, created, status="completed", amount=50, bonus="paid"):
    return {"referral_id": rid, "referred_account_id": acc, "created_at": created, "status": status,
            "bonus": {"amount": amount, "currency": "EUR", "status": bonus}}


def _world():
    """The SOP's worked example: six referrals, four reviewed, two flagged, a prior warning."""
    accounts = {
        "AC-100000": _account("AC-100000", devices=["dev_1", "dev_2"], cards=["fp_A", "fp_B"],
                              address="14 Linden Street, Apt 3, 1012 Amsterdam", warnings=1),
        # A: a card of the referrer (shared payment alone flags it).
        "AC-A": _account("AC-A", devices=["dev_A"], cards=["fp_x", "fp_A"], opened="2024-06-11T09:00:00Z"),
        # B: the referrer's address written differently, and 1 transaction in 30 days.
        "AC-B": _account("AC-B", devices=["dev_B"], cards=["fp_y"], address="14 LINDEN street ,Apt 3 ,1012 amsterdam",
                         opened="2024-05-22T10:00:00Z"),
        # C: opened 6 minutes after the referral (its created_at is written with -03:00).
        "AC-C": _account("AC-C", devices=["dev_C"], cards=["fp_z"], opened="2024-06-29T03:01:00Z"),
        "AC-D": _account("AC-D", devices=["dev_D"], cards=["fp_w"], opened="2024-04-16T08:00:00Z"),
        # E (cancelled) shares C's device and F (too old) the referrer's: neither counts.
        "AC-E": _account("AC-E", devices=["dev_C"], cards=["fp_v"], address="14 Linden Street, Apt 3, 1012 Amsterdam"),
        "AC-F": _account("AC-F", devices=["dev_1"], cards=["fp_A"]),
    }
    referrals = [
        _referral("RF-A", "AC-A", "2024-06-10T10:00:00Z", amount=50),
        _referral("RF-B", "AC-B", "2024-05-20T12:00:00+02:00", amount=40, bonus="withheld"),
        _referral("RF-C", "AC-C", "2024-06-28T23:55:00-03:00", status="Pending", amount=25, bonus="pending"),
        _referral("RF-D", "AC-D", "2024-04-15T08:00:00Z", amount=75),
        _referral("RF-E", "AC-E", "2024-06-01T08:00:00Z", status=" Cancelled", bonus="withheld"),
        _referral("RF-F", "AC-F", "2024-01-02T08:00:00Z"),
    ]
    activity = {"AC-A": 12, "AC-B": 1, "AC-C": 5, "AC-D": 10, "AC-E": 0, "AC-F": 0}
    return {"review_date": "2024-06-30", "referrer_id": "AC-100000", "accounts": accounts,
            "activity": {a: {"account_id": a, "transactions_first_30_days": n, "balance_band": "low"}
                         for a, n in activity.items()},
            "referrals": {"AC-100000": referrals}, "case_id": "RAC-777777", "cases": [], "plan": {}}


def test_pinned_worked_example():
    assert expected_answer(_world()) == {
        "referrals_reviewed": 4, "total_indicators": 4, "flagged_referrals": ["RF-A", "RF-B"], "severity": "medium",
        "action": "claw_back", "clawback_amount": 50, "case_id": "RAC-777777"}


def test_pinned_variations():
    world = _world()
    world["accounts"]["AC-100000"]["prior_warnings"] = 0  # medium without a prior warning: warn, nothing clawed
    assert expected_answer(world) | {} == {**expected_answer(_world()), "action": "warn", "clawback_amount": 0}

    world = _world()
    # A referral created exactly 90 days before the review date (in UTC) is reviewed; C's account
    # opening exactly 10 minutes after its referral is not rapid.
    world["referrals"]["AC-100000"][3]["created_at"] = "2024-03-31T23:30:00-02:00"  # 2024-04-01 in UTC
    world["accounts"]["AC-C"]["opened_at"] = "2024-06-29T03:05:00Z"
    answer = expected_answer(world)
    assert answer["referrals_reviewed"] == 4 and answer["total_indicators"] == 3
    world["referrals"]["AC-100000"][3]["created_at"] = "2024-03-31T23:30:00+02:00"  # 2024-03-31 in UTC: too old
    assert expected_answer(world)["referrals_reviewed"] == 3

    world = _world()
    # A missing activity record counts as low activity: D now has one indicator, C and D share a device.
    del world["activity"]["AC-D"]
    world["accounts"]["AC-D"]["device_ids"] = ["dev_C"]
    answer = expected_answer(world)
    assert answer["total_indicators"] == 7 and sorted(answer["flagged_referrals"]) == ["RF-A", "RF-B", "RF-C", "RF-D"]
    assert (answer["severity"], answer["action"], answer["clawback_amount"]) == ("high", "suspend", 50 + 75)

    world = _world()
    # Velocity: five reviewed referrals in the 7 days ending on the review date lift medium to high.
    for k in range(3):
        world["accounts"][f"AC-V{k}"] = _account(f"AC-V{k}", devices=[f"dev_V{k}"], cards=[f"fp_V{k}"],
                                                  opened="2024-06-30T20:00:00Z")
        world["activity"][f"AC-V{k}"] = {"account_id": f"AC-V{k}", "transactions_first_30_days": 9}
        world["referrals"]["AC-100000"].append(_referral(f"RF-V{k}", f"AC-V{k}", f"2024-06-2{4 + k}T10:00:00Z"))
    world["referrals"]["AC-100000"][0]["created_at"] = "2024-06-24T00:30:00Z"
    answer = expected_answer(world)
    assert (answer["referrals_reviewed"], answer["severity"], answer["action"]) == (7, "high", "suspend")

    world = _world()
    world["accounts"]["AC-A"]["payment_methods"] = [{"type": "card", "fingerprint": "fp_x"}]
    world["activity"]["AC-B"]["transactions_first_30_days"] = 3
    assert expected_answer(world) == {"referrals_reviewed": 4, "total_indicators": 2, "flagged_referrals": [],
                                      "severity": "none", "action": "no_action", "clawback_amount": 0,
                                      "case_id": None}


def test_the_oracle_solves_the_pinned_world_through_the_tools():
    world = copy.deepcopy(_world())
    call, _ = direct_call(TOOLS, world, copy_world=False)
    answer = oracle({"account_id": "AC-100000", "review_date": "2024-06-30"}, call)
    assert answer == expected_answer(_world())
    assert world["cases"] == [{"case_id": "RAC-777777", "account_id": "AC-100000", "severity": "medium",
                               "action": "claw_back", "flagged_referral_ids": ["RF-A", "RF-B"], "clawback_amount": 50,
                               "status": "open"}]
    assert DOMAIN.state_errors(world, answer) == {}
    assert DOMAIN.state_errors(_world(), answer) == {"case_id": "no case was opened"}


def test_tool_errors_and_case_checks():
    world = _world()
    del world["activity"]["AC-D"]
    call, _ = direct_call(TOOLS, world, copy_world=False)
    with pytest.raises(ToolError, match="no activity record exists for account AC-D"):
        call("get_activity", {"account_id": "ac-d"})
    with pytest.raises(ToolError, match="no account 'AC-404'"):
        call("get_account", {"account_id": "AC-404"})
    with pytest.raises(ToolError, match=r"referral\(s\) \['RF-Z'\] are not referrals of account AC-100000"):
        call("open_abuse_case", {"account_id": "AC-100000", "severity": "low", "action": "monitor",
                                 "flagged_referral_ids": ["RF-Z"], "clawback_amount": 0})
    assert TOOLS["open_abuse_case"].validate({"account_id": "AC-100000", "severity": "none", "action": "no_action",
                                              "flagged_referral_ids": [], "clawback_amount": 0})[1]
    call("open_abuse_case", {"account_id": "AC-100000", "severity": "low", "action": "monitor",
                             "flagged_referral_ids": ["RF-A"], "clawback_amount": 0})
    with pytest.raises(ToolError, match="already has an open case \\(RAC-777777\\)"):
        call("open_abuse_case", {"account_id": "AC-100000", "severity": "medium", "action": "claw_back",
                                 "flagged_referral_ids": ["RF-A", "RF-B"], "clawback_amount": 50})
    assert DOMAIN.state_errors(world, expected_answer(_world())) == {"case_id": (
        "the case records low/monitor, flagged ['RF-A'], claw-back 0: not the SOP's decision")}
    none = {**expected_answer(_world()), "case_id": None}
    assert DOMAIN.state_errors(world, none) == {"case_id": "a case was opened although the severity is none"}
    assert call("list_referrals", {"account_id": "AC-A"}) == {"account_id": "AC-A", "referrals": []}


def test_the_tool_schemas_use_the_output_enums():
    props = TOOLS["open_abuse_case"].parameters["properties"]
    assert props["severity"]["enum"] == list(SEVERITIES[1:]) and props["action"]["enum"] == list(ACTIONS)
    assert DOMAIN.output_schema["severity"].values == SEVERITIES and DOMAIN.output_schema["action"].values == ACTIONS
