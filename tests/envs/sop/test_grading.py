"""The strict SOP grader: pinned near-misses fail, documented normalisation passes, properties hold."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.envs.sop.grading import Field, GradeResult, check_expected, grade, normalize_enum
from mtrl_gym.error import ConfigError, InvalidTask

SCHEMA = {
    "hazard_class": Field("enum", values=("Class A", "Class B", "Class D")),
    "total_score": Field("int"),
    "ratio": Field("float", tolerance=0.01),
    "urgent": Field("bool"),
    "case_id": Field("str"),
    "indicators": Field("list", item_type="enum", values=("late", "duplicate", "mismatch")),
    "reviewer": Field("str", nullable=True),
}
EXPECTED = {"hazard_class": "Class D", "total_score": 7, "ratio": 0.25, "urgent": False, "case_id": "DG-1042",
            "indicators": ["late", "mismatch"], "reviewer": None}


def with_(**changes):
    return {**EXPECTED, **changes}


def test_the_expected_answer_is_exact():
    r = grade(dict(EXPECTED), EXPECTED, SCHEMA)
    assert r.exact and r.score == 1.0 and r.errors == {} and r.extra_keys == ()
    assert r.fields == {k: 1.0 for k in SCHEMA}


@pytest.mark.parametrize("field,value", [
    ("hazard_class", "  class   d "),          # case and whitespace of enums
    ("hazard_class", "CLASS D"),
    ("total_score", 7.0),                      # numbers by value
    ("ratio", 0.259),                          # within the declared tolerance
    ("ratio", 0.241),
    ("case_id", "  DG-1042\n"),                # strings trimmed
    ("indicators", ["mismatch", "late"]),      # lists as multisets
    ("indicators", ["LATE", " mismatch"]),     # enum items normalised like enums
])
def test_documented_normalisation_passes(field, value):
    r = grade(with_(**{field: value}), EXPECTED, SCHEMA)
    assert r.exact, r.errors


@pytest.mark.parametrize("field,value,error", [
    ("hazard_class", "d", "not an allowed value: got 'd'"),                       # substring of the label
    ("hazard_class", "Class", "not an allowed value: got 'Class'"),
    ("hazard_class", "Hazard Class D", "not an allowed value: got 'Hazard Class D'"),  # superstring
    ("hazard_class", "Class A", "wrong value: got 'Class A'"),
    ("hazard_class", "ClassD", "not an allowed value: got 'ClassD'"),
    ("total_score", "7", "wrong type: got string, expected integer"),             # numeric string
    ("total_score", 7.5, "wrong value: got 7.5"),
    ("total_score", True, "wrong type: got boolean, expected integer"),           # bools are not numbers
    ("total_score", None, "wrong type: got null, expected integer"),
    ("total_score", float("nan"), "not a finite number: got nan"),
    ("ratio", 0.27, "wrong value: got 0.27"),                                     # outside the tolerance
    ("urgent", "false", "wrong type: got string, expected boolean"),
    ("urgent", 0, "wrong type: got integer, expected boolean"),
    ("case_id", "dg-1042", "wrong value: got 'dg-1042'"),                         # strings are case-sensitive
    ("case_id", "DG-104", "wrong value: got 'DG-104'"),
    ("case_id", "Case DG-1042", "wrong value: got 'Case DG-1042'"),
    ("indicators", "late, mismatch", "wrong type: got string, expected array"),   # the list pasted as a string
    ("indicators", '["late", "mismatch"]', "wrong type: got string, expected array"),
    ("indicators", ["late"], "1 item(s) missing, 0 unexpected"),
    ("indicators", ["late", "mismatch", "late"], "0 item(s) missing, 1 unexpected"),
    ("indicators", ["late", "mismatched"], "item 1: not an allowed value: got 'mismatched'"),
    ("indicators", None, "wrong type: got null, expected array"),
    ("reviewer", "null", "expected null, got 'null'"),                            # null-equivalents
    ("reviewer", "", "expected null, got ''"),
    ("reviewer", "none", "expected null, got 'none'"),
    ("reviewer", "N/A", "expected null, got 'N/A'"),
])
def test_near_misses_fail_strict_grading(field, value, error):
    r = grade(with_(**{field: value}), EXPECTED, SCHEMA)
    assert not r.exact and r.score < 1.0
    assert r.errors == {field: error}
    assert r.fields[field] < 1.0 and all(v == 1.0 for k, v in r.fields.items() if k != field)


def test_list_fields_score_their_jaccard_overlap():
    r = grade(with_(indicators=["late", "duplicate"]), EXPECTED, SCHEMA)
    assert r.fields["indicators"] == pytest.approx(1 / 3)  # {late} of {late, duplicate, mismatch}
    ordered = {"steps": Field("list", item_type="int", ordered=True)}
    r = grade({"steps": [1, 3, 2]}, {"steps": [1, 2, 3]}, ordered)
    assert not r.exact and r.fields["steps"] == pytest.approx(1 / 3) and r.errors == {"steps": "wrong items or order"}
    assert grade({"steps": [1.0, 2, 3]}, {"steps": [1, 2, 3]}, ordered).exact


def test_null_expected_needs_null_and_null_prediction_fails_a_value():
    assert grade(with_(reviewer="ops"), EXPECTED, SCHEMA).errors == {"reviewer": "expected null, got 'ops'"}
    expected = with_(reviewer="ops")
    assert grade(with_(reviewer=None), expected, SCHEMA).errors == {"reviewer": "wrong value: got null"}
    assert grade(with_(reviewer=" ops "), expected, SCHEMA).exact


def test_extra_keys_make_the_answer_inexact_and_count_as_zero_fields():
    r = grade(with_(notes="checked", Hazard_Class="Class D"), EXPECTED, SCHEMA)
    assert not r.exact and r.extra_keys == ("Hazard_Class", "notes")
    assert r.errors == {"Hazard_Class": "extra key", "notes": "extra key"}
    assert r.fields == {k: 1.0 for k in SCHEMA}
    assert r.score == pytest.approx(7 / 9)


def test_missing_keys_score_zero():
    answer = dict(EXPECTED)
    del answer["case_id"]
    r = grade(answer, EXPECTED, SCHEMA)
    assert not r.exact and r.errors == {"case_id": "missing"} and r.score == pytest.approx(6 / 7)


@pytest.mark.parametrize("prediction,got", [("Class D", "string"), (None, "null"), ([EXPECTED], "array"),
                                            (7, "integer"), (json.dumps(EXPECTED), "string")])
def test_a_prediction_that_is_not_an_object_scores_zero(prediction, got):
    r = grade(prediction, EXPECTED, SCHEMA)
    assert not r.exact and r.score == 0.0 and set(r.fields.values()) == {0.0}
    assert r.errors["hazard_class"] == f"the answer is not a JSON object (got {got})"


def test_the_expected_answer_must_fit_the_schema():
    assert check_expected(EXPECTED, SCHEMA) == []
    bad = {**EXPECTED, "total_score": 7.5, "hazard_class": "Class Z", "extra": 1}
    del bad["urgent"]
    assert check_expected(bad, SCHEMA) == [
        "missing field 'urgent'", "field 'extra' is not in the schema",
        "field 'hazard_class': not an allowed value: got 'Class Z'", "field 'total_score': not an integer: got 7.5"]
    with pytest.raises(InvalidTask, match="does not fit the output schema: missing field 'urgent'"):
        grade(EXPECTED, bad, SCHEMA)


@pytest.mark.parametrize("kwargs,match", [
    ({"type": "number"}, r"Field type must be one of .*got 'number'"),
    ({"type": "enum"}, "needs `values`"),
    ({"type": "int", "values": ("a",)}, "only for enum fields"),
    ({"type": "enum", "values": ("Class A", "class  a")}, "must differ after normalisation"),
    ({"type": "list"}, "needs `item_type`"),
    ({"type": "list", "item_type": "list"}, "needs `item_type`"),
    ({"type": "str", "ordered": True}, "only for list fields"),
    ({"type": "int", "tolerance": 0.5}, "only for float fields"),
    ({"type": "float", "tolerance": -1}, "finite number >= 0"),
])
def test_field_validation_names_the_problem(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Field(**kwargs)


def test_field_descriptions_and_json_schemas():
    assert SCHEMA["hazard_class"].describe() == 'one of "Class A", "Class B", "Class D"'
    assert SCHEMA["indicators"].describe() == 'list of (one of "late", "duplicate", "mismatch")'
    assert SCHEMA["reviewer"].describe() == "string, or null"
    assert SCHEMA["ratio"].describe() == "number (within 0.01)"
    assert SCHEMA["reviewer"].json_schema() == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert SCHEMA["indicators"].json_schema() == {"type": "array", "items": {
        "type": "string", "enum": ["late", "duplicate", "mismatch"]}}


def test_grade_result_round_trips_and_summarises():
    r = grade(with_(total_score="7"), EXPECTED, SCHEMA)
    assert GradeResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert r.summary() == "1 problem(s): 'total_score' (wrong type: got string, expected integer)"
    assert grade(EXPECTED, EXPECTED, SCHEMA).summary() == "exact match"
    assert normalize_enum("\tClass\u00a0 D ") == "class d"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8)
near = st.dictionaries(st.sampled_from(list(SCHEMA) + ["extra", "Case_Id"]), json_values | st.sampled_from(
    list(EXPECTED.values()) + ["class d", "7", "Class D", 7.0]), max_size=9)


@settings(max_examples=200, deadline=None)
@given(prediction=json_values | near | near.map(lambda d: {**EXPECTED, **d}))
def test_any_prediction_grades_without_raising_and_score_one_iff_exact(prediction):
    r = grade(prediction, EXPECTED, SCHEMA)
    assert 0.0 <= r.score <= 1.0 and set(r.fields) == set(SCHEMA)
    assert r.exact == (r.score == 1.0) == (not r.errors)
    assert all(0.0 <= v <= 1.0 for v in r.fields.values())
    json.dumps(r.to_dict(), allow_nan=True)
