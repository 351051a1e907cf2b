"""The evaluation-only SOP-Bench loader, on a small synthetic domain folder the test writes (no real data).

The folder has the official layout (a ``...Manager`` class in ``tools.py``); its tools run in
a separate process. The official quirks have their own folders in ``test_sop_bench_quirks.py``. One tool
(``get_secret_verdict``) hands over the expected output, so the leak check must flag it.
"""

from __future__ import annotations

import csv
import json
import os

import gymnasium
import pytest

from mtrl_gym.envs.sop.sop_bench import (ENV_ID, LICENCE_TERMS, SOPBenchEnv, benchmark_tasks, check_trainable,
                                         leak_report, list_domains, load_benchmark)
from mtrl_gym.error import ConfigError

TOOLS_PY = '''
import os

PARCELS = {"P-1": {"weight_kg": 25, "fragile": False}, "P-2": {"weight_kg": 3, "fragile": True},
           "P-3": {"weight_kg": 4, "fragile": False}}
VERDICTS = {"P-1": "keep_for_review", "P-2": "keep_for_review", "P-3": "release"}


class ParcelManager:
    def get_parcel(self, parcel_id):
        print("noise on stdout must not break the protocol")
        if parcel_id not in PARCELS:
            raise KeyError(f"no parcel {parcel_id}")
        return {"parcel_id": parcel_id, "pid": os.getpid(), **PARCELS[parcel_id]}

    def get_secret_verdict(self, parcel_id):
        return {"verdict": VERDICTS[parcel_id]}
'''


def write_domain(root, name="parcels", tools_py=None):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "sop.txt").write_text("1. Look the parcel up.\n2. Keep it for review when it weighs 20 kg or more "
                                    "or is fragile; else release it.\n", encoding="utf-8")
    (folder / "toolspecs.json").write_text(json.dumps([
        {"toolSpec": {"name": "get_parcel", "description": "Look a parcel up.", "inputSchema": {"json": {
            "type": "object", "properties": {"parcel_id": {"type": "string"}}, "required": ["parcel_id"]}}}},
        {"toolSpec": {"name": "get_secret_verdict", "description": "A tool that leaks.", "inputSchema": {"json": {
            "type": "object", "properties": {"parcel_id": {"type": "string"}}, "required": ["parcel_id"]}}}}]))
    (folder / "tools.py").write_text(tools_py or TOOLS_PY, encoding="utf-8")
    (folder / "metadata.json").write_text(json.dumps({"input_columns": ["parcel_id"],
                                                      "output_columns": ["decision", "weight_kg"]}))
    with open(folder / "test_set_with_outputs.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["parcel_id", "decision", "weight_kg"])
        w.writerows([["P-1", "keep_for_review", "25"], ["P-2", "keep_for_review", "3"], ["P-3", "release", "4"]])
    return folder


@pytest.fixture
def bench_dir(tmp_path):
    write_domain(tmp_path)
    return tmp_path


def _call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_loading_prints_the_licence_and_reads_the_layout(bench_dir, capsys):
    bench = load_benchmark(bench_dir, "parcels")
    assert LICENCE_TERMS in capsys.readouterr().err and "CC BY-NC 4.0" in LICENCE_TERMS
    assert list_domains(bench_dir) == ["parcels"] and bench.output_columns == ["decision", "weight_kg"]
    assert [t["name"] for t in bench.toolspecs] == ["get_parcel", "get_secret_verdict"]
    schema = bench.output_schema()
    assert schema["decision"].values == ("keep_for_review", "release")
    assert schema["weight_kg"].type == "int"  # read as pandas reads it: a number column
    rows = benchmark_tasks(bench)
    assert rows[0] == {"id": "sop-bench-parcels-00000", "index": 0, "evaluation_only": True,
                       "inputs": {"parcel_id": "P-1"}, "answer": {"decision": "keep_for_review", "weight_kg": 25},
                       "flags": {}}


def test_missing_files_and_unknown_domains_are_named(bench_dir):
    with pytest.raises(ConfigError, match=r"no SOP-Bench domain 'boxes'.*the domains there are \['parcels'\]"):
        load_benchmark(bench_dir, "boxes")
    (bench_dir / "parcels" / "tools.py").unlink()
    with pytest.raises(ConfigError, match=r"lacks \['tools.py'\]"):
        load_benchmark(bench_dir, "parcels", quiet=True)


def test_an_episode_runs_the_tools_in_another_process_and_grades_both_ways(bench_dir):
    env = gymnasium.make(ENV_ID, path=str(bench_dir), domain="parcels", quiet=True).unwrapped
    try:
        rows = benchmark_tasks(env.benchmark)
        obs, info = env.reset(options={"task": rows[0]})
        assert '"parcel_id": "P-1"' in obs and "keep_for_review" not in obs.split("Task inputs:")[1]
        assert "Keep it for review" in info["system_prompt"]
        obs, _, _, _, info = env.step(_call("get_parcel", parcel_id="P-1"))
        reply = json.loads(info["tool_results"][0]["content"])
        assert reply["weight_kg"] == 25 and reply["pid"] != os.getpid() and info["leaked_outputs"] == []
        obs, _, _, _, info = env.step(_call("get_parcel", parcel_id="P-9"))
        assert info["tool_outcomes"][0]["status"] == "tool_error" and "no parcel P-9" in obs
        # Strict: "Keep_For_Review " passes (enum normalisation), the number as text does not: reward 0.
        # Official (containment): both pass.
        answer = {"decision": "Keep_For_Review ", "weight_kg": "25 kg"}
        _, reward, terminated, _, info = env.step(f"<final_answer>{json.dumps(answer)}</final_answer>")
        assert terminated and reward == 0.0 and info["official_success"] is True
        assert info["grade_result"]["fields"] == {"decision": 1.0, "weight_kg": 0.0}
        env.reset(options={"task": rows[2]})
        _, reward, _, _, info = env.step('<final_answer>{"decision": "release", "weight_kg": 4}</final_answer>')
        assert reward == 1.0 and info["official_success"] is True
    finally:
        env.close()


def test_a_leaking_tool_is_flagged_in_the_episode_and_in_the_report(bench_dir):
    env = SOPBenchEnv(bench_dir, "parcels", quiet=True)
    try:
        env.reset(options={"task": benchmark_tasks(env.benchmark)[2]})
        _, _, _, _, info = env.step(_call("get_secret_verdict", parcel_id="P-3"))
        assert info["leaked_outputs"] == ["decision"]
    finally:
        env.close()
    report = leak_report(load_benchmark(bench_dir, "parcels", quiet=True))
    assert report == {"domain": "parcels", "rows": 3, "calls": 6, "errors": 0, "first_error": None,
                      "leaks": {"decision": 3}, "tools": {"get_secret_verdict": 3}, "leaky": True}


def test_these_tasks_are_refused_for_training(bench_dir):
    with pytest.raises(ConfigError, match="SOP-Bench tasks are evaluation-only, got purpose='train'"):
        SOPBenchEnv(bench_dir, "parcels", purpose="train", quiet=True)
    rows = benchmark_tasks(load_benchmark(bench_dir, "parcels", quiet=True))
    with pytest.raises(ConfigError, match="may be used for evaluation only.*CC BY-NC 4.0"):
        check_trainable(rows)
    check_trainable([{"id": "sop-x", "seed": 1}])  # our own rows pass


def test_the_eval_command_runs_a_domain_and_reports_both_measures(bench_dir, tmp_path, capsys):
    from mtrl_gym.cli import main

    out = tmp_path / "eval"
    assert main(["eval", "--sop-bench", str(bench_dir), "--domain", "parcels", "--policy", "random", "-n", "1",
                 "--out", str(out), "--quiet", "--no-mlflow"]) == 0
    captured = capsys.readouterr()
    assert "CC BY-NC 4.0" in captured.err and "hand expected outputs to the agent" in captured.err
    assert "input leakage in SOP-Bench parcels (3 rows" in captured.err
    assert "random: strict success 0.000, SOP-Bench measure" in captured.out
    assert main(["eval", "--sop-bench", str(bench_dir), "--policy", "random", "--out", str(tmp_path / "x")]) != 0
    assert "--sop-bench needs --domain NAME" in capsys.readouterr().err
