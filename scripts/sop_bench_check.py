"""Check mtrl_gym's SOP-Bench loader against a local checkout of the official data (evaluation only).

    python scripts/sop_bench_check.py PATH/TO/SOP-Bench/src/amazon_sop_bench/benchmarks/data [--domains a,b]

For every domain folder under PATH: load it, play every case through ``SOPBenchEnv`` with
an oracle that calls every tool with those of its parameters that are input columns (the
row's inputs, as typed in the CSV) and then submits the CSV's expected outputs, and print
one table row: cases, cases flagged (empty labels), tool calls, calls refused by the env
(must be 0: the official runtime refuses none), calls answered with an error by the
domain's own tool manager, calls with schema warnings, the oracle's official and strict
scores, and the input-leakage report's worst input. ``--random N`` also plays N episodes
of the random tool caller per domain. Nothing of the data is written anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys

from mtrl_gym.envs.sop.sop_bench import SOPBenchEnv, benchmark_tasks, input_leakage, list_domains


def _call(name: str, arguments: dict) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def replay(path: str, domain: str) -> dict:
    """Oracle replay of one domain: every case, every input-only tool, then the expected answer."""
    env = SOPBenchEnv(path, domain, quiet=True, max_tool_calls=200)
    stats = {"domain": domain, "cases": 0, "flagged": 0, "calls": 0, "refused": 0, "errors": 0, "warned": 0,
             "official": 0, "strict": 0, "crashed": 0}
    try:
        for row in benchmark_tasks(env.benchmark):
            stats["cases"] += 1
            stats["flagged"] += bool(row["flags"])
            try:
                env.reset(options={"task": row})
                by_name = {k.lower(): v for k, v in row["inputs"].items()}
                for spec in env.benchmark.toolspecs:
                    params = spec["parameters"]
                    args = {p: by_name[p.lower()] for p in params.get("properties", {}) if p.lower() in by_name}
                    _, _, _, _, info = env.step(_call(spec["name"], args))
                    status = info["tool_outcomes"][0]["status"]
                    stats["calls"] += 1
                    stats["refused"] += status in ("bad_arguments", "unknown_tool", "refused")
                    stats["errors"] += status in ("tool_error", "exception")
                    stats["warned"] += bool(info["schema_warnings"])
                answer = json.dumps(row["answer"])
                _, reward, _, _, info = env.step(f"<final_answer>{answer}</final_answer>")
                stats["strict"] += reward == 1.0
                stats["official"] += bool(info["official_success"])
            except Exception as e:  # a crash is what this script looks for: count it and say which case
                stats["crashed"] += 1
                print(f"{domain} {row['id']}: {type(e).__name__}: {e}", file=sys.stderr)
    finally:
        env.close()
    worst = input_leakage(env.benchmark)[0]
    stats["worst_input"] = (f"{worst['input']} -> {worst['output']} {worst['accuracy']:.0%} "
                            f"(baseline {worst['baseline']:.0%})")
    return stats


def random_score(path: str, domain: str, n: int) -> tuple[float, float]:
    """Strict and official success of the random tool caller on the first ``n`` cases."""
    import numpy as np

    from mtrl_gym.envs.random_policy import RandomToolPolicy

    env = SOPBenchEnv(path, domain, quiet=True)
    strict = official = 0
    try:
        for i, row in enumerate(benchmark_tasks(env.benchmark)[:n]):
            policy = RandomToolPolicy()
            obs, info = env.reset(options={"task": row})
            policy.reset(info, np.random.default_rng(i))
            done = False
            while not done:
                obs, reward, terminated, truncated, info = env.step(policy(obs, info))
                done = terminated or truncated
            strict += reward == 1.0
            official += bool(info.get("official_success"))
    finally:
        env.close()
    return strict / n, official / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", help="the folder holding the SOP-Bench domain folders")
    parser.add_argument("--domains", default="", help="comma-separated domain folders (default: all)")
    parser.add_argument("--random", type=int, default=0, help="also play N random-policy episodes per domain")
    args = parser.parse_args(argv)
    domains = [d for d in args.domains.split(",") if d] or list_domains(args.path)
    print("| domain | cases | flagged | tool calls | refused | tool errors | schema warnings | oracle official "
          "| oracle strict | crashed |" + (" random strict / official |" if args.random else "") + " worst input |")
    print("|---" * (11 + bool(args.random)) + "|")
    for domain in domains:
        s = replay(args.path, domain)
        extra = ""
        if args.random:
            rs, ro = random_score(args.path, domain, args.random)
            extra = f" {rs:.0%} / {ro:.0%} (n={args.random}) |"
        print(f"| {domain} | {s['cases']} | {s['flagged']} | {s['calls']} | {s['refused']} | {s['errors']} | "
              f"{s['warned']} | {s['official'] / s['cases']:.1%} | {s['strict'] / s['cases']:.1%} | {s['crashed']} |"
              f"{extra} {s['worst_input']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
