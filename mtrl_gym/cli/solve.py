"""``mtrl-gym solve``: the built-in Wordle solver plays a task split through the env.

A reference run that needs no model: it drives the real environment with tool-call text
and prints the solve rate and mean guesses (the number a trained model is compared to).
"""

from __future__ import annotations

import time


def register(sub) -> None:
    p = sub.add_parser("solve", help="let the built-in solver play Wordle tasks",
                       description="Play Wordle tasks with the built-in entropy solver.")
    p.add_argument("--split", choices=["train", "val", "all"], default="val",
                   help="tasks from wordle_split(): 640 train, 128 val, or all 1,923 answers (default: val)")
    p.add_argument("--tasks", default=None, help="task file (JSONL/JSON/CSV/Parquet) instead of --split")
    p.add_argument("--hard", action="store_true", help="play mtrl/Wordle-Hard-v0")
    p.set_defaults(func=run)


def run(args) -> int:
    from mtrl_gym.datasets import read_tasks, wordle_split
    from mtrl_gym.envs.wordle.game import answers
    from mtrl_gym.envs.wordle.solver import SolverPolicy, WordleSolver
    from mtrl_gym.registry import make

    if args.tasks:
        tasks = read_tasks(args.tasks)
    elif args.split == "all":
        tasks = [{"answer": a, "id": f"wordle_all_{i:04d}"} for i, a in enumerate(answers())]
    else:
        train, val = wordle_split()
        tasks = train if args.split == "train" else val
    env = make("mtrl/Wordle-Hard-v0" if args.hard else "mtrl/Wordle-v0")
    policy = SolverPolicy(WordleSolver(hard_mode=args.hard))
    start = time.perf_counter()
    solved, guesses, rewards = 0, [], []
    for task in tasks:
        obs, info = env.reset(options={"task": task})
        terminated = truncated = False
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(policy(obs, info))
        rewards.append(reward)
        if info["solved"]:
            solved += 1
            guesses.append(info["guesses_used"])
    n = len(tasks)
    print(f"tasks:        {n}")
    print(f"solve rate:   {solved / n:.1%} ({solved}/{n})")
    if guesses:
        print(f"mean guesses: {sum(guesses) / len(guesses):.3f} (solved games)")
    print(f"mean reward:  {sum(rewards) / n:+.4f}")
    print(f"time:         {time.perf_counter() - start:.1f} s")
    return 0
