"""Does a domain's official tool set hand the expected outputs to the agent? A check without an agent.

For every row, each tool whose required parameters are all input columns (names compared
case-insensitively) is called with the row's inputs, and its reply is searched for the
row's expected output values (:func:`~mtrl_gym.envs.sop.sop_bench.env.leaks_in`).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from mtrl_gym.envs.sop.sop_bench.data import Benchmark, benchmark_tasks
from mtrl_gym.envs.sop.sop_bench.env import leaks_in
from mtrl_gym.envs.sop.sop_bench.worker import ToolProcess

__all__ = ["leak_report"]


def leak_report(bench: Benchmark, *, limit: int | None = None) -> dict[str, Any]:
    """``{"domain", "rows", "calls", "leaks": {column: rows}, "tools": {tool: rows}, "leaky": bool}``."""
    rows = benchmark_tasks(bench)[:limit] if limit else benchmark_tasks(bench)
    process = ToolProcess(bench.folder, [s["name"] for s in bench.toolspecs])
    columns, tools, calls = Counter(), Counter(), 0
    try:
        for row in rows:
            by_name = {k.lower(): v for k, v in row["inputs"].items()}
            hit_columns, hit_tools = set(), set()
            for spec in bench.toolspecs:
                params = spec["parameters"]
                needed = params.get("required", list(params.get("properties", {})))
                if not all(p.lower() in by_name for p in needed):
                    continue
                args = {p: by_name[p.lower()] for p in params.get("properties", {}) if p.lower() in by_name}
                reply = process.call(spec["name"], args)
                calls += 1
                if reply.get("ok"):
                    found = leaks_in(json.dumps(reply["result"], ensure_ascii=False, default=str), row)
                    hit_columns |= set(found)
                    if found:
                        hit_tools.add(spec["name"])
            columns.update(hit_columns)
            tools.update(hit_tools)
    finally:
        process.close()
    return {"domain": bench.domain, "rows": len(rows), "calls": calls, "leaks": dict(columns), "tools": dict(tools),
            "leaky": bool(columns)}
