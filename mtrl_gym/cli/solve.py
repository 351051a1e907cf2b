"""``mtrl-gym solve``: an env's reference solver plays a task split through the env.

A reference run that needs no model: the env's ``solver`` policy (from its profile:
Wordle's entropy solver, an SOP domain's reference procedure) drives the real environment
with text actions, and the command prints the success rate, mean turns and mean reward
(the numbers a trained model is compared to).
"""

from __future__ import annotations

import time


def register(sub) -> None:
    p = sub.add_parser("solve", help="let an env's built-in solver play its tasks",
                       description="Play an env's tasks with its reference solver (Wordle's entropy solver, "
                                   "an SOP domain's procedure).")
    p.add_argument("env_id", nargs="?", default="mtrl/Wordle-v0", metavar="ENV_ID",
                   help="a registered env with a solver (default: mtrl/Wordle-v0)")
    p.add_argument("--split", default="val",
                   help="a named split of the env (Wordle: train, val or all; default: val)")
    p.add_argument("--tasks", default=None, help="task file (JSONL/JSON/CSV/Parquet) instead of --split")
    p.add_argument("--limit", type=int, default=None, help="play only the first N tasks")
    p.set_defaults(func=run)


def run(args) -> int:
    import numpy as np

    from mtrl_gym.envs.profile import profile_of
    from mtrl_gym.evaluation.tasks import resolve_tasks
    from mtrl_gym.registry import make

    tasks = resolve_tasks(args.env_id, tasks=args.tasks, split=None if args.tasks else args.split, limit=args.limit)
    env = make(args.env_id)
    policy = profile_of(env).policy("solver", env)
    start = time.perf_counter()
    successes, turns, rewards = 0, [], []
    for i, task in enumerate(tasks):
        obs, info = env.reset(seed=i, options={"task": task} if task is not None else None)
        policy.reset(info, np.random.default_rng(i), seed=i, task=task)
        terminated = truncated = False
        total, steps = 0.0, 0
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(policy(obs, info))
            total, steps = total + float(reward), steps + 1
        rewards.append(total)
        turns.append(steps)
        successes += bool(info.get("success", info.get("solved", False)))
    n = len(tasks)
    print(f"tasks:        {n}")
    print(f"success rate: {successes / n:.1%} ({successes}/{n})")
    print(f"mean turns:   {sum(turns) / n:.3f}")
    print(f"mean reward:  {sum(rewards) / n:+.4f}")
    print(f"time:         {time.perf_counter() - start:.1f} s")
    return 0
