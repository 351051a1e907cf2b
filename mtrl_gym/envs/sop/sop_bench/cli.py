"""What ``mtrl-gym eval --sop-bench PATH --domain NAME`` needs: the tasks, the env and the extra report.

:func:`setup` loads the domain (printing the licence), runs the leak check on its tools and
returns what the evaluation runs on; :func:`official_report` reads the finished episodes
and puts the benchmark's own success measure beside our strict one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.sop_bench.data import benchmark_tasks, load_benchmark
from mtrl_gym.envs.sop.sop_bench.leaks import input_leakage, leak_report

__all__ = ["setup", "official_report", "input_leakage_text", "LEAK_CHECK_ROWS", "LEAKAGE_LINES"]

#: Rows the leak check calls the tools on before an evaluation.
LEAK_CHECK_ROWS = 50
#: Input/output pairs the input-leakage report prints (the largest lifts).
LEAKAGE_LINES = 5


def input_leakage_text(bench, lines: int = LEAKAGE_LINES) -> str:
    """The input-leakage report as text: the input columns that alone predict an output best."""
    report = input_leakage(bench)
    head = f"input leakage in SOP-Bench {bench.domain} ({len(bench.rows)} rows; how well one input column alone " \
           "predicts an output, leave-one-out, against the majority baseline):"
    body = [f"  {r['input']} -> {r['output']}: {r['accuracy']:.1%} (baseline {r['baseline']:.1%}, "
            f"lift {r['lift']:+.1%})" for r in report[:lines]]
    return "\n".join([head, *body])


def setup(path: str, domain: str) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """``(env_id, task rows, env kwargs)`` for the evaluation; prints the licence and the leak check."""
    from mtrl_gym.envs.sop.sop_bench import ENV_ID

    bench = load_benchmark(path, domain)
    if bench.inputs_derived:
        print(f"SOP-Bench {bench.domain}: metadata.json lists no input_columns; the inputs are every column but "
              f"the outputs {bench.output_columns}", file=sys.stderr)
    report = leak_report(bench, limit=LEAK_CHECK_ROWS)
    if report["calls"] and report["errors"] == report["calls"]:
        print(f"WARNING: every one of the {report['calls']} tool calls on {report['rows']} rows of SOP-Bench "
              f"{bench.domain} failed in the domain's own tool manager, as in the official harness (most common: "
              f"{report['first_error']}): the agent gets no tool data on this domain.", file=sys.stderr)
    elif report["leaky"]:
        print(f"WARNING: the official tools of SOP-Bench {bench.domain} hand expected outputs to the agent "
              f"(rows per column {report['leaks']}, by tools {report['tools']}, of {report['rows']} rows checked): "
              "scores on this domain overstate what the agent works out itself.", file=sys.stderr)
    else:
        print(f"leak check: no tool reply of {report['calls'] - report['errors']} answered calls "
              f"({report['errors']} failed) on {report['rows']} rows of {bench.domain} holds an expected output",
              file=sys.stderr)
    print(input_leakage_text(bench), file=sys.stderr)
    return ENV_ID, benchmark_tasks(bench), {"path": str(path), "domain": domain, "quiet": True}


def official_report(files: Mapping[str, str]) -> str:
    """One line per run: strict success (ours), the benchmark's own measure, episodes with a leak."""
    lines = []
    for key, file in sorted(files.items()):
        if not key.startswith("trajectories/"):
            continue
        strict = official = leaked = n = 0
        with open(file, encoding="utf-8") as f:
            for line in f:
                metrics = json.loads(line).get("metrics") or {}
                n += 1
                strict += metrics.get("success", 0.0) >= 1.0
                official += metrics.get("info/official_success", 0.0) >= 1.0
                leaked += metrics.get("info/leak_seen", 0.0) >= 1.0
        if n:
            lines.append(f"{key.removeprefix('trajectories/')}: strict success {strict / n:.3f}, SOP-Bench measure "
                         f"{official / n:.3f}, episodes with a leaking tool reply {leaked}/{n}")
    return "\n".join(lines)
