"""Do a domain's tools or inputs give the expected outputs away? Two checks without an agent.

:func:`leak_report`: for every row, each tool whose required parameters are all input
columns (names compared case-insensitively) is called with the row's inputs, and its reply
is searched for the row's expected output values
(:func:`~mtrl_gym.envs.sop.sop_bench.env.leaks_in`); calls that fail are counted apart, with
their most common error.

:func:`input_leakage`: for each input column and output column, how often the output is the
most common output among the *other* rows with the same input value (leave-one-out, so an
id column unique per row scores the baseline), against the majority baseline (the share of
the most common output).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from mtrl_gym.envs.sop.sop_bench.data import Benchmark, benchmark_tasks
from mtrl_gym.envs.sop.sop_bench.env import leaks_in
from mtrl_gym.envs.sop.sop_bench.worker import ToolProcess

__all__ = ["leak_report", "input_leakage"]


def leak_report(bench: Benchmark, *, limit: int | None = None) -> dict[str, Any]:
    """``{"domain", "rows", "calls", "errors", "first_error", "leaks": {column: rows}, "tools": {tool: rows},
    "leaky": bool}``; ``errors`` counts the calls that failed, ``first_error`` is the most common failure."""
    rows = benchmark_tasks(bench)[:limit] if limit else benchmark_tasks(bench)
    process = ToolProcess(bench.folder, [s["name"] for s in bench.toolspecs])
    columns, tools, failures, calls = Counter(), Counter(), Counter(), 0
    try:
        for row in rows:
            by_name = {k.lower(): v for k, v in row["inputs"].items()}
            hit_columns, hit_tools = set(), set()
            for spec in bench.toolspecs:
                params = spec["parameters"]
                args = {p: by_name[p.lower()] for p in params.get("properties", {}) if p.lower() in by_name}
                reply = process.call(spec["name"], args)
                calls += 1
                if not reply.get("ok"):
                    failures[f"{spec['name']}: {str(reply.get('error'))[:160]}"] += 1
                    continue
                found = leaks_in(json.dumps(reply["result"], ensure_ascii=False, default=str), row)
                hit_columns |= set(found)
                if found:
                    hit_tools.add(spec["name"])
            columns.update(hit_columns)
            tools.update(hit_tools)
    finally:
        process.close()
    return {"domain": bench.domain, "rows": len(rows), "calls": calls, "errors": sum(failures.values()),
            "first_error": failures.most_common(1)[0][0] if failures else None, "leaks": dict(columns),
            "tools": dict(tools), "leaky": bool(columns)}


def _loo(pairs: list[tuple[str, str]], majority: str) -> float:
    """Leave-one-out accuracy of predicting the second item by the most common one among the other rows with
    the same first item (ties and rows alone with their value: ``majority``, the most common output)."""
    by_key: dict[str, Counter] = defaultdict(Counter)
    for key, out in pairs:
        by_key[key][out] += 1
    hits = 0
    for key, out in pairs:
        group = by_key[key].copy()
        group[out] -= 1
        top = max(group.values())
        guesses = [v for v, n in group.items() if n == top and n > 0]
        guess = majority if not guesses or (len(guesses) > 1 and majority in guesses) else min(guesses)
        hits += guess == out
    return hits / len(pairs) if pairs else 0.0


def input_leakage(bench: Benchmark) -> list[dict[str, Any]]:
    """``[{"input", "output", "accuracy", "baseline", "lift"}]`` for every input/output column pair, the largest
    lift (accuracy minus baseline) first."""
    def text(value: Any) -> str:
        return "" if value is None else str(value).strip().lower()

    out = []
    for output in bench.output_columns:
        labels = [text(r[output]) for r in bench.rows]
        counts = Counter(labels)
        majority = min(v for v, n in counts.items() if n == max(counts.values()))
        baseline = counts[majority] / len(labels) if labels else 0.0
        for column in bench.input_columns:
            accuracy = _loo([(text(r[column]), y) for r, y in zip(bench.rows, labels)], majority)
            out.append({"input": column, "output": output, "accuracy": round(accuracy, 4),
                        "baseline": round(baseline, 4), "lift": round(accuracy - baseline, 4)})
    return sorted(out, key=lambda r: (-r["lift"], r["input"], r["output"]))
