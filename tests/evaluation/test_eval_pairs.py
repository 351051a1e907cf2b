"""The report's base-vs-trained section: same task and seed, turn by turn."""

from __future__ import annotations

from mtrl_gym.evaluation.pairs import pick_pairs, render_pair, run_pairs
from mtrl_gym.evaluation.report import write_report


def record(run, task_index, sample_index, success, replies, *, failed=False):
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "start"}]
    for i, reply in enumerate(replies):
        messages += [{"role": "assistant", "content": reply},
                     {"role": "tool", "content": f"feedback {i + 1} | of {run}", "tool_call_id": "c", "name": "g"}]
    return {"run": run, "task_id": f"t{task_index}", "task_index": task_index, "sample_index": sample_index,
            "seed": 100 + task_index, "success": success, "outcome_reward": 1.0 if success else -0.5,
            "failed": failed, "failure_reason": "boom" if failed else None, "messages": messages,
            "metrics": {"turns": len(replies)}, "stop_reason": "terminated"}


def spec(kind, temperature=1.0):
    return {"kind": kind, "temperature": temperature, "top_p": 1.0, "max_new_tokens": 8}


def test_runs_pair_an_adapter_with_the_base_at_its_temperature():
    runs = {"base:1.0": {"spec": spec("model")}, "base:0.0": {"spec": spec("model", 0.0)},
            "trained:0.0": {"spec": spec("adapter", 0.0)}, "trained:0.5": {"spec": spec("adapter", 0.5)},
            "solver": {"spec": {"kind": "policy"}}}
    assert run_pairs({"runs": runs}) == [("base:0.0", "trained:0.0"), ("base:1.0", "trained:0.5")]
    assert run_pairs({"runs": {"solver": {"spec": {"kind": "policy"}}, "t": {"spec": spec("adapter")}}}) == []


def test_pick_pairs_puts_the_trained_runs_wins_first_and_matches_task_and_sample():
    base = [record("base", i, k, success=(i == 2), replies=["a"]) for i in range(4) for k in range(2)]
    trained = [record("trained", i, k, success=(i in (1, 3) and k == 1), replies=["b"]) for i in range(4)
               for k in range(2)]
    chosen = pick_pairs(base, trained, 4)
    keys = [(t["task_index"], t["sample_index"]) for _, t in chosen]
    assert keys == [(1, 1), (3, 1), (2, 0), (2, 1)]  # wins, then losses, then the rest
    assert all((b["task_index"], b["sample_index"]) == (t["task_index"], t["sample_index"]) for b, t in chosen)
    assert pick_pairs(base, trained, 0) == []


def test_render_pair_is_one_table_with_both_runs_turn_by_turn():
    b = record("base", 0, 0, False, ["guess | one", "two"], failed=True)
    t = record("trained", 0, 0, True, ["<tool_call>x</tool_call>"])
    text = render_pair("base", b, "trained", t)
    lines = text.splitlines()
    assert lines[0] == "#### task t0 (#0), seed 100, sample 0"
    assert "`base`: failed, reward -0.500, 2 turns; `trained`: success, reward +1.000, 1 turns" in text
    rows = [line for line in lines if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert rows[0] == ("| 1 | guess \\| one | feedback 1 \\| of base | &lt;tool_call>x&lt;/tool_call> | "
                       "feedback 1 \\| of trained |")
    assert rows[1] == "| 2 | two | feedback 2 \\| of base |   |   |"
    assert "`base` failed: boom" in text
    long = record("trained", 0, 0, True, ["x" * 5000])
    assert "[... 4600 more characters]" in render_pair("base", b, "trained", long)


def test_report_has_the_section_only_with_a_base_and_a_trained_run(tmp_path):
    ci = {"value": 0.5, "low": 0.0, "high": 1.0, "confidence": 0.95}
    traj = {k: 0.0 for k in ("turns", "tool_calls", "format_error_rate", "invalid_action_rate", "total_tokens",
                             "unfinished_rate", "failure_rate")}

    def run(kind):
        return {"spec": spec(kind), "success_rate": ci, "reward": ci, "pass_at_k": {"1": ci}, "trajectory": traj}

    records = {"base": [record("base", 0, 0, False, ["a"])], "trained": [record("trained", 0, 0, True, ["b"])]}
    summary = {"env_id": "mtrl/Wordle-v0", "tasks": 1, "samples_per_task": 1, "seed": 0,
               "runs": {"base": run("model"), "trained": run("adapter")}}
    report = (tmp_path / "a")
    text = open(write_report(summary, records, report, examples=1)["report"]).read()
    assert "## Base vs trained, same task" in text and "| 1 | a | feedback 1 \\| of base | b |" in text
    summary["runs"]["trained"] = run("model")
    text = open(write_report(summary, records, tmp_path / "b", examples=1)["report"]).read()
    assert "Base vs trained" not in text
