"""The official SOP-Bench quirks, each in a small synthetic domain folder written here (no real data).

Each folder reproduces one way the official data departs from a tidy layout: no
``input_columns``, tool specs whose names the tool manager does not dispatch, empty labels,
spec patterns the data violates, tool replies nested under a key, typed CSV values, and the
official rule for which class is the tool manager. The official parser's matching rules
are pinned one example each.
"""

from __future__ import annotations

import csv
import json

import pytest

from mtrl_gym.envs.sop.sop_bench import (SOPBenchEnv, benchmark_tasks, input_leakage, leak_report, load_benchmark,
                                         official_match, official_success)
from mtrl_gym.envs.sop.sop_bench.cli import input_leakage_text

MANAGER = '''
import pandas as pd, os

CSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_set_with_outputs.csv")


class AaaHelper:  # not a manager: its name does not end with "Manager"
    pass


class BoxManager:
    def lookup_box(self, box_id, weight_kg=None):
        df = pd.read_csv(CSV)
        rows = df[df["box_id"] == box_id]
        if rows.empty:
            raise ValueError(f"no box {box_id!r}")
        return rows.iloc[0]["seal"]

    def process_tool_call(self, tool_name, tool_input):
        if tool_name == "lookup_box":
            return {"seal_check": self.lookup_box(**tool_input)}
        raise ValueError(f"Invalid tool_name: {tool_name}")


class ZzzManager:  # later in dir() order: the official loader never picks it
    def process_tool_call(self, tool_name, tool_input):
        return {"wrong": "manager"}
'''


def folder(tmp_path, *, metadata, header, rows, specs=None, tools_py=MANAGER, name="boxes"):
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "sop.txt").write_text("1. Look the box up.\n2. Report the seal.\n", encoding="utf-8")
    (d / "toolspecs.json").write_text(json.dumps(specs if specs is not None else [
        {"toolSpec": {"name": "lookup_box", "description": "A box's seal.", "inputSchema": {"json": {
            "type": "object", "properties": {"box_id": {"type": "string", "pattern": "^B[0-9]{6}$"},
                                             "weight_kg": {"type": "number"}},
            "required": ["box_id"]}}}}]))
    (d / "tools.py").write_text(tools_py, encoding="utf-8")
    if metadata is not None:
        (d / "metadata.json").write_text(json.dumps(metadata))
    with open(d / "test_set_with_outputs.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return tmp_path


ROWS = [["B12", "70.1", "intact", "ship"], ["B13", "3", "broken", "hold"], ["B14", "4.5", "intact", "ship"]]
HEADER = ["box_id", "weight_kg", "seal", "final_decision"]


def _call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_no_input_columns_the_inputs_are_every_other_column_and_the_legacy_output_column(tmp_path):
    root = folder(tmp_path, metadata={"name": "boxes"}, header=HEADER, rows=ROWS)
    bench = load_benchmark(root, "boxes", quiet=True)
    assert bench.output_columns == ["final_decision"] and bench.inputs_derived
    assert bench.input_columns == ["box_id", "weight_kg", "seal"]
    row = benchmark_tasks(bench)[0]
    assert row["inputs"] == {"box_id": "B12", "weight_kg": 70.1, "seal": "intact"}  # typed as pandas reads them
    assert row["answer"] == {"final_decision": "ship"}
    no_meta = folder(tmp_path / "x", metadata=None, header=HEADER, rows=ROWS)
    assert load_benchmark(no_meta, "boxes", quiet=True).output_columns == ["final_decision"]


def test_the_tool_manager_is_the_first_manager_class_and_replies_keep_its_nested_shape(tmp_path):
    root = folder(tmp_path, metadata={"input_columns": ["box_id", "weight_kg"], "output_columns": ["final_decision"]},
                  header=HEADER, rows=ROWS)
    env = SOPBenchEnv(root, "boxes", quiet=True)
    try:
        obs, _ = env.reset(options={"task": benchmark_tasks(env.benchmark)[0]})
        assert '"weight_kg": 70.1' in obs  # a number in the observation, as the official prompt shows it
        _, _, _, _, info = env.step(_call("lookup_box", box_id="B12", weight_kg=70.1))
        assert info["tool_outcomes"][0]["status"] == "ok"
        assert json.loads(info["tool_results"][0]["content"]) == {"seal_check": "intact"}
        assert len(info["schema_warnings"]) == 1 and info["schema_warnings"][0].startswith("lookup_box: 'box_id'")
        assert "^B[0-9]{6}$" in info["schema_warnings"][0]
    finally:
        env.close()


def test_calls_the_spec_schema_would_refuse_run_with_a_warning(tmp_path):
    root = folder(tmp_path, metadata={"input_columns": ["box_id"], "output_columns": ["final_decision"]},
                  header=HEADER, rows=ROWS)
    env = SOPBenchEnv(root, "boxes", quiet=True)
    try:
        env.reset(options={"task": benchmark_tasks(env.benchmark)[1]})
        # pattern violated, a string where the spec wants a number, an argument the spec does not list
        _, _, _, _, info = env.step(_call("lookup_box", box_id="B13", weight_kg="3", colour="red"))
        out = info["tool_outcomes"][0]
        assert out["status"] == "tool_error" and "unexpected keyword argument 'colour'" in info["tool_results"][0][
            "content"]  # the tool itself refused the extra argument, as it does in the official runtime
        assert len(info["schema_warnings"]) == 3 and info["num_bad_arguments"] == 0
        _, _, _, _, info = env.step(_call("lookup_box", box_id="B13", weight_kg="3"))
        assert json.loads(info["tool_results"][0]["content"]) == {"seal_check": "broken"}
        assert info["num_bad_arguments"] == 0 and len(info["schema_warnings"]) == 2
    finally:
        env.close()


def test_spec_names_the_manager_does_not_dispatch_give_its_error_and_the_report_says_so(tmp_path, capsys):
    specs = [{"toolSpec": {"name": "classifyBox", "description": "Named unlike the manager's dispatch.",
                           "inputSchema": {"json": {"type": "object", "properties": {"box_id": {"type": "string"}},
                                                    "required": ["box_id"]}}}}]
    root = folder(tmp_path, metadata={"input_columns": ["box_id"], "output_columns": ["final_decision"]},
                  header=HEADER, rows=ROWS, specs=specs)
    env = SOPBenchEnv(root, "boxes", quiet=True)
    try:
        obs, _ = env.reset(options={"task": benchmark_tasks(env.benchmark)[0]})
        obs, _, terminated, _, info = env.step(_call("classifyBox", box_id="B12"))
        assert info["tool_outcomes"][0]["status"] == "tool_error" and "Invalid tool_name: classifyBox" in obs
        _, reward, terminated, _, info = env.step('<final_answer>{"final_decision": "ship"}</final_answer>')
        assert terminated and reward == 1.0  # the case still plays to the end
    finally:
        env.close()
    report = leak_report(load_benchmark(root, "boxes", quiet=True))
    assert report["calls"] == 3 and report["errors"] == 3 and "Invalid tool_name" in report["first_error"]
    from mtrl_gym.envs.sop.sop_bench.cli import setup

    setup(str(root), "boxes")
    assert "every one of the 3 tool calls" in capsys.readouterr().err


def test_empty_labels_load_flagged_and_are_scored(tmp_path):
    rows = [["B12", "70.1", "intact", ""], ["B13", "3", "broken", "hold"], ["B14", "4.5", "", "ship"]]
    root = folder(tmp_path, metadata={"input_columns": ["box_id"], "output_columns": ["seal", "final_decision"]},
                  header=HEADER, rows=rows)
    env = SOPBenchEnv(root, "boxes", quiet=True)
    try:
        tasks = benchmark_tasks(env.benchmark)
        assert tasks[0]["answer"] == {"seal": "intact", "final_decision": None}
        assert list(tasks[0]["flags"]) == ["final_decision"] and tasks[1]["flags"] == {}
        assert env.output_schema["final_decision"].nullable
        _, info = env.reset(options={"task": tasks[0]})
        assert "expected value is empty" in info["case_flags"]["final_decision"]
        _, reward, _, _, info = env.step('<final_answer>{"seal": "intact", "final_decision": null}</final_answer>')
        assert reward == 1.0 and info["official_success"] and "final_decision" in info["case_flags"]
        env.reset(options={"task": tasks[0]})
        _, reward, _, _, info = env.step('<final_answer>{"seal": "intact", "final_decision": "N/A"}</final_answer>')
        assert reward == 0.0 and info["official_success"]  # null-like for the official parser only
        env.reset(options={"task": tasks[0]})
        _, reward, _, _, info = env.step('<final_answer>{"seal": "intact", "final_decision": "ship"}</final_answer>')
        assert reward == 0.0 and not info["official_success"]
    finally:
        env.close()


def test_boolean_labels_are_json_booleans(tmp_path):
    rows = [["B12", "1", "True"], ["B13", "2", "False"], ["B14", "3", ""]]
    root = folder(tmp_path, metadata={"input_columns": ["box_id"], "output_columns": ["ready"]},
                  header=["box_id", "weight_kg", "ready"], rows=rows)
    env = SOPBenchEnv(root, "boxes", quiet=True)
    try:
        tasks = benchmark_tasks(env.benchmark)
        assert [t["answer"]["ready"] for t in tasks] == [True, False, None]
        assert env.output_schema["ready"].type == "bool"
        env.reset(options={"task": tasks[0]})
        _, reward, _, _, info = env.step('<final_answer>{"ready": true}</final_answer>')
        assert reward == 1.0 and info["official_success"]
    finally:
        env.close()


def test_the_input_leakage_report_finds_an_input_that_gives_the_answer_away(tmp_path):
    rows = [[f"B{i}", str(i), "broken" if i % 3 else "intact", "hold" if i % 3 else "ship"] for i in range(30)]
    root = folder(tmp_path, metadata={"input_columns": ["box_id", "weight_kg", "seal"],
                                      "output_columns": ["final_decision"]}, header=HEADER, rows=rows)
    bench = load_benchmark(root, "boxes", quiet=True)
    report = input_leakage(bench)
    assert report[0] == {"input": "seal", "output": "final_decision", "accuracy": 1.0, "baseline": 0.6667,
                         "lift": 0.3333}
    by_input = {r["input"]: r for r in report}
    assert by_input["box_id"]["accuracy"] == by_input["box_id"]["baseline"]  # unique ids predict nothing
    assert "seal -> final_decision: 100.0% (baseline 66.7%" in input_leakage_text(bench)


# The official parser's rules (module docstring of mtrl_gym.envs.sop.sop_bench.official), one pin each.
@pytest.mark.parametrize("rule,pred,want,ok", [
    ("1 keys any case, values as text", {"Hazard_Class": "Hazard Class C"}, {"hazard_class": "Hazard Class C"}, True),
    ("1 JSON true reads as 'true'", {"ready": True}, {"ready": True}, True),
    ("2 null-like values are equal", {"x": "N/A"}, {"x": None}, True),
    ("2 null never matches a value", {"x": None}, {"x": "ship"}, False),
    ("3 exact after case and trim", {"x": " SHIP "}, {"x": "ship"}, True),
    ("4 separators fold", {"x": "user-banned"}, {"x": "user_banned"}, True),
    ("5 prediction inside expected", {"x": "Class C"}, {"x": "Hazard Class C"}, True),
    ("5 expected inside prediction", {"x": "not class d"}, {"x": "Class D"}, True),
    ("5 unrelated values fail", {"x": "Class C"}, {"x": "Class D"}, False),
    ("6 a missing key fails with several columns", {"x": "ship"}, {"x": "ship", "y": "ok"}, False),
    ("6 one column: the whole JSON text is compared", {"verdict": "ship"}, {"x": "ship"}, True),
    ("7 text answer of a one-column domain", "Decision: ship", {"x": "ship"}, True),
    ("7 text answer of a several-column domain", "ship ok", {"x": "ship", "y": "ok"}, False),
])
def test_official_success_follows_each_rule_of_the_official_parser(rule, pred, want, ok):
    assert official_success(pred, want) is ok, rule


def test_official_match_numbers_compare_as_text():
    assert official_match(25, 25.0) and official_match("25", "25.0")  # "25" is inside "25.0"
    assert not official_match(3, 4) and official_match(float("nan"), "unknown")
