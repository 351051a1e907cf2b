"""Worst step time of every registered env on hostile text, against a fixed bound.

Every case of the adversarial corpus (``mtrl_gym.testing.adversarial_texts``: very long
text, NUL bytes, surrogates, deep nesting, huge numbers, many calls, unknown tools, wrong
argument types, prompt injection, unclosed openings) is sent as one action at ``--chars``
characters (100k by default, the action space's limit) right after a reset; the fastest of
``--repeat`` steps counts (the reset is not timed). Printed per env: the worst case, its
time and the verdict against ``--bound-ms`` (50 ms), then the slowest cases overall. Exit
status 1 when any env is over the bound or any step raised.

    python benchmarks/bad_text.py                       # every env
    python benchmarks/bad_text.py --env mtrl/Wordle-v0  # one env
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import gymnasium

import mtrl_gym  # noqa: F401 - registers the envs
from mtrl_gym.registry import list_envs
from mtrl_gym.testing import adversarial_texts, step_seconds


def measure(env_id: str, chars: int, repeat: int, exclude: list[str] = ()) -> list[tuple[float, str, str | None]]:
    """``(seconds, case name, error)`` for every corpus case on ``env_id``."""
    env = gymnasium.make(env_id)
    _, info = env.reset(seed=0)
    rows = []
    for case in adversarial_texts(info.get("tools") or [], size=chars):
        if any(case.name.startswith(prefix) for prefix in exclude):
            continue
        try:
            rows.append((step_seconds(None, case.text, repeat=repeat, env=env), case.name, None))
        except Exception as e:  # noqa: BLE001 - any exception is a failure to report
            rows.append((float("inf"), case.name, f"{type(e).__name__}: {e}"[:200]))
            traceback.print_exc(limit=3)
    env.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", action="append", default=None, help="env id (repeatable; default: every registered id)")
    ap.add_argument("--chars", type=int, default=100_000, help="length of each case")
    ap.add_argument("--bound-ms", type=float, default=50.0, help="the bound on one step")
    ap.add_argument("--repeat", type=int, default=3, help="timed steps per case; the fastest counts")
    ap.add_argument("--exclude", action="append", default=[], metavar="PREFIX",
                    help="skip cases whose name starts with this, e.g. unclosed/ (repeatable)")
    args = ap.parse_args()
    envs = args.env or list_envs()
    load = os.getloadavg()[0]
    print(f"# {args.chars} characters per case, fastest of {args.repeat}, bound {args.bound_ms:g} ms; "
          f"load average {load:.1f} on {len(os.sched_getaffinity(0))} cores at the start")
    print(f"{'env':<32} {'cases':>5} {'worst ms':>9}  {'worst case':<34} verdict")
    failed, slowest = [], []
    t0 = time.perf_counter()
    for env_id in envs:
        rows = measure(env_id, args.chars, args.repeat, args.exclude)
        worst = max(rows)
        errors = [r for r in rows if r[2]]
        over = worst[0] * 1e3 > args.bound_ms
        verdict = f"RAISED ({errors[0][1]}: {errors[0][2]})" if errors else ("OVER" if over else "ok")
        if errors or over:
            failed.append(env_id)
        print(f"{env_id:<32} {len(rows):>5} {worst[0] * 1e3:>9.1f}  {worst[1]:<34} {verdict}", flush=True)
        slowest += [(s, env_id, name) for s, name, _ in rows]
    print("\n# slowest cases overall")
    for s, env_id, name in sorted(slowest, reverse=True)[:10]:
        print(f"{s * 1e3:>9.1f} ms  {env_id:<32} {name}")
    print(f"\n# {time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f} at the end")
    if failed:
        print(f"FAILED: {', '.join(failed)} (over {args.bound_ms:g} ms or raised)")
        return 1
    print(f"all {len(envs)} env(s) under {args.bound_ms:g} ms per step at {args.chars} characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
