"""Wordle-v0 speed and memory, printed against the targets of the foundation issue.

    python benchmarks/wordle_env.py [--episodes 2000] [--rounds 5] [--instances 500] [--solver-games 100]

Measures, on full episodes of random valid guesses written as Hermes tool calls (the
knowledge summary and candidate counts are always on):

* steps/s and resets/s of one env (target >= 20,000 steps/s; the median of several rounds,
  since a shared 2-core VM's speed drifts by +-15 % between runs; the spread is printed too),
* time to create an env after the first (target < 1 ms), via the class and ``gymnasium.make``,
* memory per extra instance, each reset once (target < 100 KB),
* the solver's seconds per decision without memoisation (target < 20 ms).

Each line prints the measured value, the target and their ratio (> 1 means the target is met).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import gymnasium
import numpy as np

import mtrl_gym  # noqa: F401
from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.env import WordleEnv
from mtrl_gym.envs.wordle.solver import WordleSolver, format_guess


def report(name: str, value: float, unit: str, target: float, higher_is_better: bool,
           spread: tuple[float, float] | None = None) -> None:
    ratio = value / target if higher_is_better else target / value
    verdict = "ok" if ratio >= 1 else "MISSED"
    sign = ">=" if higher_is_better else "<"
    extra = f"   [{spread[0]:,.0f}, {spread[1]:,.0f}]" if spread else ""
    print(f"{name:<34} {value:>12,.3f} {unit:<10} target {sign} {target:>9,.3f}   ratio {ratio:6.2f}  {verdict}{extra}")


def bench_steps(episodes: int, rounds: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = game.allowed_guesses()
    actions = [format_guess(words[i]) for i in rng.integers(len(words), size=episodes * 6)]
    env = gymnasium.make("mtrl/Wordle-v0")
    env.reset(seed=0)
    env.step(actions[0])  # warm the shared tables
    step_rates, reset_rates = [], []
    steps = 0
    for r in range(rounds):  # fresh seeds every round: no reset repeats a secret's draw
        k = 0
        reset_time = step_time = 0.0
        for ep in range(episodes):
            t0 = time.perf_counter()
            env.reset(seed=seed + r * episodes + ep)
            t1 = time.perf_counter()
            reset_time += t1 - t0
            done = False
            while not done:
                _, _, done, _, _ = env.step(actions[k])
                k += 1
            step_time += time.perf_counter() - t1
        steps += k
        step_rates.append(k / step_time)
        reset_rates.append(episodes / reset_time)
    print(f"# {rounds} rounds x {episodes} episodes, {steps} steps (random valid guesses, Hermes tool-call "
          "text, via gymnasium.make); median round, [min, max] over rounds")
    report("steps/s (one env)", float(np.median(step_rates)), "steps/s", 20_000, True,
           spread=(min(step_rates), max(step_rates)))
    report("resets/s (one env, seeded)", float(np.median(reset_rates)), "resets/s", 20_000, True,
           spread=(min(reset_rates), max(reset_rates)))


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
    bench_steps(args.episodes, args.rounds, args.seed)
    bench_creation(1000)
    bench_memory(args.instances)
    bench_solver(args.solver_games, args.seed)


if __name__ == "__main__":
    main()
