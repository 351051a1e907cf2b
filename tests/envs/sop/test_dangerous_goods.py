"""mtrl/SOP-DangerousGoods-v0: the shared harness checks plus hand-checked worlds of SOP DG-04."""

from __future__ import annotations

import copy

import pytest
from harness import SOPHarness, direct_call

from mtrl_gym.envs.sandbox import ToolError
from mtrl_gym.envs.sop.dangerous_goods import DangerousGoods
from mtrl_gym.envs.sop.dangerous_goods.procedure import expected_answer, oracle
from mtrl_gym.envs.sop.dangerous_goods.tools import TOOLS
from mtrl_gym.envs.sop.dangerous_goods.world import CLASSES, hazard_class

H = SOPHarness("mtrl/SOP-DangerousGoods-v0")
DOMAIN = DangerousGoods()


# ----------------------------------------------------------------------------- harness


def test_oracle_step_count():
    stats = H.check_oracle(100)
    assert stats["max_steps"] == 2 * 2 + 3 and stats["stateful_rate"] == 1.0  # shipment, SDS + lab each, file, submit


def test_no_label_leak_and_balanced_labels():
    report = H.check_no_label_leak(500)
    labels = H.label_report(500)
    assert labels["fields"]["hazard_class"] <= 0.32
    assert max(labels["fields"][f"{c}_score"] for c in ("flammability", "toxicity", "reactivity", "quantity")) <= 0.42
    assert labels["fields"]["total_score"] <= 0.2 and labels["fields"]["data_gaps"] <= 0.6
    assert labels["answer"] <= 0.01 and report.exact_rate == 0.0


# ----------------------------------------------------------------------------- the procedure


def test_the_procedure_recovers_the_generators_plan():
    """The generator picks scores and gaps first; the procedure reads them back from raw records."""
    for task in H.tasks(300) + H.tasks(100, difficulty={"noise": 2, "products": 4}):
        world = DOMAIN.world(task["seed"], task["difficulty"])
        answer = task["answer"]
        plan = {p["code"]: p for p in world["plan"]["products"]}[answer["governing_product"]]
        assert answer["hazard_class"] == world["plan"]["class"]
        scores = [answer[f"{c}_score"] for c in ("flammability", "toxicity", "reactivity", "quantity")]
        assert scores == plan["scores"] and sorted(answer["data_gaps"]) == plan["gaps"]
        assert answer["total_score"] == sum(scores) and hazard_class(tuple(scores)) == answer["hazard_class"]


@pytest.mark.parametrize("scores,cls", [
    ((0, 0, 0, 0), "Class D"), ((1, 1, 0, 0), "Class D"), ((1, 1, 1, 0), "Class C"), ((2, 2, 1, 0), "Class C"),
    ((3, 0, 0, 0), "Class B"),            # escalation 1: a single 3 lifts C/D to B
    ((2, 2, 2, 0), "Class B"), ((2, 2, 2, 2), "Class B"), ((3, 2, 2, 2), "Class A"),
    ((1, 3, 0, 0), "Class B"),            # toxicity 3 but flammability below 2: only escalation 1
    ((2, 3, 0, 0), "Class A"),            # escalation 2: toxicity 3 and flammability >= 2
])
def test_hazard_class_table(scores, cls):
    assert hazard_class(scores) == cls


def _world_b():
    """Two products: one with every value resolved through revisions, lab overrides and unit
    conversions (Class C), one with only data gaps (Class B, governing)."""
    return {
        "shipment": {"shipment_id": "SHP-100001", "shipper": "Orion Labs", "origin": "Oslo", "destination": "Porto",
                     "mode": "road", "ship_date": "2024-05-02", "lines": [
                         {"line": 1, "product_code": "PRD-11111", "description": "Paint thinner", "un_number": "UN1263",
                          "quantity": {"value": 8, "unit": "lb"}, "packaging": "drum"},
                         {"line": 2, "product_code": "PKG-500", "description": "Pallet spacers", "un_number": None,
                          "quantity": {"value": 5000, "unit": "kg"}, "packaging": "carton"},
                         {"line": 3, "product_code": " prd-22222 ", "description": "Etching acid",
                          "un_number": "UN1789", "quantity": {"value": 150, "unit": "kg"}, "packaging": "IBC"},
                         {"line": 4, "product_code": "PRD-11111", "description": "Paint thinner", "un_number": "UN1263",
                          "quantity": {"value": 2500, "unit": "g"}, "packaging": "drum"}]},
        "sds": {
            "PRD-11111": {"product_code": "PRD-11111", "product_name": "Paint thinner", "un_number": "UN1263",
                          "revisions": [
                              {"revision": 2, "revision_date": "2023-03-01", "appearance": "clear liquid",
                               "flash_point": {"value": 140, "unit": "F"}, "ld50_oral": {"value": 0.2, "unit": "g/kg"},
                               "reactivity_code": "R1"},
                              {"revision": 1, "revision_date": "2020-01-15", "appearance": "clear liquid",
                               "flash_point": {"value": 10, "unit": "C"}, "ld50_oral": {"value": 20, "unit": "mg/kg"},
                               "reactivity_code": "R3"}]},
            "PRD-22222": {"product_code": "PRD-22222", "product_name": "Etching acid", "un_number": "UN1789",
                          "revisions": [{"revision": 1, "revision_date": "2022-07-07", "appearance": "clear liquid",
                                         "flash_point": None, "ld50_oral": None, "reactivity_code": None}]}},
        "lab_reports": {"PRD-11111": {"report_id": "LR-1", "product_code": "PRD-11111", "tested_on": "2024-01-01",
                                      "measured_flash_point": None, "reactivity_code": " r2"}},
        "classification_id": "HZC-424242", "filings": [], "plan": {},
    }


def test_pinned_world_with_revisions_overrides_conversions_and_gaps():
    world = _world_b()
    # PRD-11111: latest revision 2023 -> 140 F = 60.0 C (score 1, 60 is inclusive), 0.2 g/kg = 200 mg/kg
    # (score 2), lab " r2" overrides R1 (score 2), 8 lb + 2500 g = 6.13 kg (score 0): total 5, Class C.
    # PRD-22222: three gaps -> 2 + 2 + 1, 150 kg -> 2: total 7, Class B. Class B outranks Class C.
    assert expected_answer(world) == {
        "governing_product": "PRD-22222", "flammability_score": 2, "toxicity_score": 2, "reactivity_score": 1,
        "quantity_score": 2, "total_score": 7, "hazard_class": "Class B",
        "data_gaps": ["flash_point", "ld50", "reactivity"], "classification_id": "HZC-424242"}
    # The other product alone: drop PRD-22222's line.
    world["shipment"]["lines"] = [ln for ln in world["shipment"]["lines"] if ln["line"] != 3]
    assert expected_answer(world) == {
        "governing_product": "PRD-11111", "flammability_score": 1, "toxicity_score": 2, "reactivity_score": 2,
        "quantity_score": 0, "total_score": 5, "hazard_class": "Class C", "data_gaps": [],
        "classification_id": "HZC-424242"}


def test_pinned_ties_go_to_the_higher_total_then_the_earlier_line():
    world = _world_b()
    a = world["sds"]["PRD-11111"]["revisions"][0]
    a.update(flash_point={"value": 30, "unit": "C"}, ld50_oral={"value": 40, "unit": "mg/kg"}, reactivity_code="R0")
    world["lab_reports"] = {}
    b = world["sds"]["PRD-22222"]["revisions"][0]
    b.update(flash_point={"value": 86, "unit": "F"}, ld50_oral={"value": 10, "unit": "mg/kg"}, reactivity_code="R0")
    world["shipment"]["lines"][2]["quantity"] = {"value": 3, "unit": "kg"}
    # A: 2, 3, 0, 0 -> total 5 -> Class A by escalation 2; B: 86 F = 30 C -> 2, 3, 0, 0 -> Class A, total 5.
    # Same class and total: the product whose first line comes first (PRD-11111, line 1) governs.
    assert expected_answer(world)["governing_product"] == "PRD-11111"
    world["shipment"]["lines"][2]["quantity"] = {"value": 40, "unit": "kg"}  # B: quantity 1, total 6: B governs
    assert expected_answer(world)["governing_product"] == "PRD-22222"


def test_the_oracle_solves_the_pinned_world_through_the_tools():
    world = copy.deepcopy(_world_b())
    call, _ = direct_call(TOOLS, world, copy_world=False)
    answer = oracle({"shipment_id": "SHP-100001"}, call)
    assert answer == expected_answer(_world_b())
    assert world["filings"] == [{"classification_id": "HZC-424242", "shipment_id": "SHP-100001",
                                 "product_code": "PRD-22222", "hazard_class": "Class B", "total_score": 7,
                                 "status": "filed"}]
    assert DOMAIN.state_errors(world, answer) == {}


def test_tool_errors_are_readable():
    world = _world_b()
    call, _ = direct_call(TOOLS, world, copy_world=False)
    with pytest.raises(ToolError, match="no lab report on file for product PRD-22222"):
        call("get_lab_report", {"product_code": " prd-22222"})
    with pytest.raises(ToolError, match="no safety data sheet for product 'PKG-500'.*not dangerous goods"):
        call("get_safety_data_sheet", {"product_code": "PKG-500"})
    with pytest.raises(ToolError, match="no shipment 'SHP-1' in the outbound queue"):
        call("get_shipment", {"shipment_id": "SHP-1"})
    with pytest.raises(ToolError, match="product 'PKG-500' is not a dangerous-goods line of shipment SHP-100001"):
        call("file_classification", {"shipment_id": "SHP-100001", "product_code": "PKG-500",
                                     "hazard_class": "Class D", "total_score": 1})
    call("file_classification", {"shipment_id": "SHP-100001", "product_code": "PRD-11111",
                                 "hazard_class": "Class C", "total_score": 5})
    with pytest.raises(ToolError, match="already classified \\(classification_id HZC-424242\\)"):
        call("file_classification", {"shipment_id": "SHP-100001", "product_code": "PRD-22222",
                                     "hazard_class": "Class B", "total_score": 7})
    # Filed with another product than the SOP's: the classification id does not count.
    assert DOMAIN.state_errors(world, expected_answer(_world_b())) == {
        "classification_id": "the filed classification (PRD-11111, Class C, total 5) is not the SOP's"}
    assert call("convert_units", {"value": 140, "from_unit": "F", "to_unit": "C"}) == {"value": 60.0, "unit": "C"}
    with pytest.raises(ToolError, match="cannot convert kg to C"):
        call("convert_units", {"value": 1, "from_unit": "kg", "to_unit": "C"})


def test_the_tool_schema_lists_the_classes_of_the_output_schema():
    enum = TOOLS["file_classification"].parameters["properties"]["hazard_class"]["enum"]
    assert tuple(enum) == CLASSES == DOMAIN.output_schema["hazard_class"].values


def test_pinned_generated_task():
    row = H.tasks(1)[0]
    assert row["id"] == "sop-dangerous-goods-train-00000" and row["difficulty"] == {
        "noise": 1, "distractors": True, "products": 2}
    assert row["prompt"].endswith(f'"shipment_id": "{DOMAIN.world(row["seed"])["shipment"]["shipment_id"]}"\n}}\n```')
    assert set(row["answer"]) == set(DOMAIN.output_schema)
