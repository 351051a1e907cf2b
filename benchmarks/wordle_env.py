"""Wordle-v0 speed and memory against their targets, A/B against the pre-rewrite env in the same run.

    python benchmarks/wordle_env.py [--episodes 2000] [--rounds 5] [--instances 500] [--solver-games 100]

Measures, on full episodes of random valid guesses written as Hermes tool calls (the
knowledge summary and candidate counts are always on):

* steps/s and seeded resets/s of one env via ``gymnasium.make`` (a floor of 20,000 steps/s;
  the env's speed target is now its share of a rollout's wall time, at most 1 %, printed by
  ``benchmarks/rollout_cpu.py``): the median of ``--rounds`` rounds. When the frozen pre-rewrite copy in
  ``tests/envs/wordle/wordle_frozen`` is present, its rounds alternate with the package's on the same
  actions and seeds (A/B), so machine noise hits both, and the new/old ratio is printed;
* env-steps/s of ``gymnasium.make_vec(..., num_envs=8, vectorization_mode="sync")``;
* the slowest step on 100,000 characters of hostile model text (repeated unclosed tags,
  openers, long whitespace runs, many calls, NUL bytes, surrogates...; target < 50 ms);
* time to create an env after the first (target < 1 ms), via the class and ``gymnasium.make``,
* memory per extra instance, each reset once (target < 100 KB),
* the solver's seconds per decision without memoisation (target < 20 ms).

Each line prints the measured value, the target and their ratio (> 1 means the target is
met), and the header the machine load (``os.getloadavg``). The script exits 1 when a
measured side fails with an error or when steps/s fall below the 20,000 floor (another missed
target is printed as MISSED, not an error).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import gymnasium
import numpy as np

import mtrl_gym  # noqa: F401
from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.env import WordleEnv
from mtrl_gym.envs.wordle.solver import WordleSolver, format_guess


STEPS_FLOOR = 20_000
#: Floors whose miss fails the run (names of the report lines).
_FLOOR_MISSES: list[str] = []


def report(name: str, value: float, unit: str, target: float, higher_is_better: bool,
           spread: tuple[float, float] | None = None) -> None:
    ratio = value / target if higher_is_better else target / value
    verdict = "ok" if ratio >= 1 else "MISSED"
    sign = ">=" if higher_is_better else "<"
    extra = f"   [{spread[0]:,.0f}, {spread[1]:,.0f}]" if spread else ""
    print(f"{name:<34} {value:>12,.3f} {unit:<10} target {sign} {target:>9,.3f}   ratio {ratio:6.2f}  {verdict}{extra}")


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min) {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def _reference_env():
    """gymnasium.make of the frozen pre-rewrite Wordle env, or None outside a source checkout."""
    tests = Path(__file__).resolve().parent.parent / "tests" / "envs" / "wordle"
    if not (tests / "wordle_frozen" / "env.py").exists():
        return None
    sys.path.insert(0, str(tests))
    from wordle_frozen.env import WordleEnv as FrozenWordleEnv

    gymnasium.register("bench/WordleFrozen-v0", entry_point=FrozenWordleEnv)
    return gymnasium.make("bench/WordleFrozen-v0")


def _round(env, actions: list[str], episodes: int, seed: int) -> tuple[float, float]:
    """(steps/s, resets/s) of one round of full episodes."""
    k = 0
    reset_time = step_time = 0.0
    for ep in range(episodes):
        t0 = time.perf_counter()
        env.reset(seed=seed + ep)
        t1 = time.perf_counter()
        reset_time += t1 - t0
        done = False
        while not done:
            _, _, done, _, _ = env.step(actions[k])
            k += 1
        step_time += time.perf_counter() - t1
    return k / step_time, episodes / reset_time


def bench_steps(episodes: int, rounds: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = game.allowed_guesses()
    actions = [format_guess(words[i]) for i in rng.integers(len(words), size=episodes * 6)]
    sides = {"new": gymnasium.make("mtrl/Wordle-v0")}
    reference = _reference_env()
    if reference is not None:
        sides["old"] = reference
    for env in sides.values():
        env.reset(seed=0)
        env.step(actions[0])  # warm the shared tables
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for r in range(rounds):  # fresh seeds every round; both sides get the same ones
        for name, env in sides.items():
            rates[name].append(_round(env, actions, episodes, seed + r * episodes))
    print(f"# {rounds} rounds x {episodes} episodes (random valid guesses, Hermes tool-call text, via "
          f"gymnasium.make); median round, [min, max] over rounds; {_load()}")
    for name in sides:
        label = "" if name == "new" else " (pre-rewrite)"
        steps = [x[0] for x in rates[name]]
        resets = [x[1] for x in rates[name]]
        report(f"steps/s (one env){label}", statistics.median(steps), "steps/s", STEPS_FLOOR, True,
               spread=(min(steps), max(steps)))
        if name == "new" and statistics.median(steps) < STEPS_FLOOR:
            _FLOOR_MISSES.append(f"steps/s {statistics.median(steps):,.0f} < floor {STEPS_FLOOR:,}")
        report(f"resets/s (one env, seeded){label}", statistics.median(resets), "resets/s", 20_000, True,
               spread=(min(resets), max(resets)))
    if reference is not None:
        ratio = [n[0] / o[0] for n, o in zip(rates["new"], rates["old"])]
        print(f"{'A/B steps/s new / pre-rewrite':<34} {statistics.median(ratio):>12.3f} x   "
              f"(per round: {', '.join(f'{x:.2f}' for x in ratio)})")


def bench_vector(num_envs: int, vector_steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = game.allowed_guesses()
    actions = [format_guess(words[i]) for i in rng.integers(len(words), size=vector_steps * num_envs)]
    vec = gymnasium.make_vec("mtrl/Wordle-v0", num_envs=num_envs, vectorization_mode="sync")
    vec.reset(seed=seed)
    t0 = time.perf_counter()
    for t in range(vector_steps):
        vec.step(tuple(actions[t * num_envs:(t + 1) * num_envs]))
    per = (time.perf_counter() - t0) / (vector_steps * num_envs)
    vec.close()
    print(f"{f'env-steps/s (make_vec sync, {num_envs} envs)':<34} {1 / per:>12,.3f} steps/s    "
          "(no target; counts the autoreset steps of NEXT_STEP mode)")


_HOSTILE_UNITS = ["<guess>", "<tool_call>", "guess_word(", "guess_word('", "f(", "{", "[", "<think>", "word ",
                  "word" + " " * 999, "<guess></guess>", '{"name": "a", "arguments": ', "<final_answer>",
                  '<tool_call>{"name": "x" {"a": [1, f(', ("guess_word(" + "a+" * 1990 + ")"),
                  "<tool_call>{'name': 'a', 'arguments': {'x': [" + "1, " * 1300 + "]}}</tool_call>",
                  format_guess("crane"), "\x00", "\ud800"]


def bench_hostile(chars: int, repeats: int = 3) -> None:
    """The slowest step on ``chars`` characters of each hostile pattern (target < 50 ms)."""
    worst, worst_unit = 0.0, ""
    env = gymnasium.make("mtrl/Wordle-v0")
    for unit in _HOSTILE_UNITS:
        text = (unit * (chars // len(unit) + 1))[:chars]
        best = float("inf")
        for _ in range(repeats):
            env.reset(seed=0)
            t0 = time.perf_counter()
            env.step(text)
            best = min(best, time.perf_counter() - t0)
        if best > worst:
            worst, worst_unit = best, unit
    report(f"worst step, {chars:,} hostile chars", worst * 1e3, "ms", 50.0, False)
    print(f"{'':<34} (slowest pattern: {worst_unit[:40]!r} repeated; {len(_HOSTILE_UNITS)} patterns, best of "
          f"{repeats} each)")


def bench_creation(n: int) -> None:
    WordleEnv().reset(seed=0)  # first instance builds the shared tables
    t0 = time.perf_counter()
    for _ in range(n):
        WordleEnv()
    per_class = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        gymnasium.make("mtrl/Wordle-v0")
    per_make = (time.perf_counter() - t0) / n
    report("create env (WordleEnv())", per_class * 1e3, "ms", 1.0, False)
    report("create env (gymnasium.make)", per_make * 1e3, "ms", 1.0, False)


def bench_memory(n: int) -> None:
    first = gymnasium.make("mtrl/Wordle-v0")
    first.reset(seed=0)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    envs = []
    for i in range(n):
        env = gymnasium.make("mtrl/Wordle-v0")
        env.reset(seed=i)
        env.step(format_guess("crane"))
        envs.append(env)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    report(f"memory per extra env ({n} envs)", grown / n / 1024, "KB", 100.0, False)


def bench_solver(games: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    answers = [game.answers()[i] for i in rng.choice(len(game.answers()), size=games, replace=False)]
    WordleSolver().next_guess([])  # the opener's entropies are computed once per process
    decisions = 0
    t0 = time.perf_counter()
    for answer in answers:
        decisions += len(WordleSolver().play(answer))  # fresh solver: no memoised decisions
    per = (time.perf_counter() - t0) / decisions
    report(f"solver s/decision ({games} games)", per * 1e3, "ms", 20.0, False)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=2000, help="episodes per round")
    p.add_argument("--rounds", type=int, default=5, help="rounds of --episodes; the median round is reported")
    p.add_argument("--instances", type=int, default=500)
    p.add_argument("--solver-games", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    t0 = time.perf_counter()
    game.pattern_table()
    print(f"# pattern table ready in {time.perf_counter() - t0:.2f} s (built once per machine, then memory-mapped)")
    failed = []
    for name, run in [("steps", lambda: bench_steps(args.episodes, args.rounds, args.seed)),
                      ("vector", lambda: bench_vector(8, args.episodes, args.seed)),
                      ("hostile", lambda: bench_hostile(100_000)),
                      ("creation", lambda: bench_creation(1000)),
                      ("memory", lambda: bench_memory(args.instances)),
                      ("solver", lambda: bench_solver(args.solver_games, args.seed))]:
        try:
            run()
        except Exception as e:  # report every side, then fail the run
            failed.append(name)
            print(f"{name}: FAILED ({type(e).__name__}: {e})")
    print(f"# {_load()}")
    for miss in _FLOOR_MISSES:
        print(f"FAILED: {miss}")
    if failed or _FLOOR_MISSES:
        sys.exit(1)


if __name__ == "__main__":
    main()
