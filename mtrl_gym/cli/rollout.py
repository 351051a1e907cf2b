"""``mtrl-gym rollout ENV``: sample episodes with a model, print them and save them as JSONL.

Examples::

    # 8 Wordle episodes of the embedded SmolLM2 (8 tasks drawn from seeds 0..7)
    mtrl-gym rollout mtrl/Wordle-v0 --model smollm2-135m --n 8

    # 2 tasks from a file x 4 samples each, greedy, into a chosen file
    mtrl-gym rollout mtrl/Wordle-v0 --tasks wordle_val.jsonl --n 8 --group-size 4 --temperature 0 \\
        --out runs/rollouts/val.jsonl

    # a served model (vllm serve ...) with its tokenizer
    mtrl-gym rollout --endpoint http://127.0.0.1:8000 --model Qwen/Qwen2.5-0.5B-Instruct --n 16

Trajectories are written with :func:`mtrl_gym.rollout.trajectory.save_jsonl` (token ids,
loss mask, log-probs, rewards, messages, metrics) and read back with ``load_jsonl``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("rollout", help="sample episodes with a model, print them and save them as JSONL",
                       description="Play episodes of an environment with a model (token-in/token-out), print "
                                   "the conversations and a summary, and write the trajectories to JSONL.")
    p.add_argument("env_id", nargs="?", default="mtrl/Wordle-v0", help="environment id (default: %(default)s)")
    p.add_argument("--model", default="smollm2-135m", help="embedded name, Hugging Face id or folder; with "
                   "--endpoint, the tokenizer to use (default: %(default)s)")
    p.add_argument("--endpoint", default=None, metavar="URL", help="sample from an OpenAI-compatible server")
    p.add_argument("--endpoint-model", default=None, help="model name to request (default: the server's first)")
    p.add_argument("-n", "--n", type=int, default=8, help="number of episodes (default: %(default)s)")
    p.add_argument("--group-size", type=int, default=1, help="episodes per task; --n must be a multiple")
    p.add_argument("--tasks", default=None, help="task file (JSONL/JSON/CSV/Parquet); default: tasks drawn "
                   "from the seeds")
    p.add_argument("--temperature", type=float, default=1.0, help="(default: %(default)s)")
    p.add_argument("--top-p", type=float, default=1.0, help="(default: %(default)s)")
    p.add_argument("--top-k", type=int, default=0, help="0 = off (default: %(default)s)")
    p.add_argument("--max-tokens", type=int, default=256, help="max tokens per turn (default: %(default)s)")
    p.add_argument("--max-turns", type=int, default=None, help="most turns per episode (default: the env's)")
    p.add_argument("--assistant-prefix", default="", metavar="TEXT",
                   help="text every assistant turn starts with (a format prefill), masked out of training")
    p.add_argument("--max-episode-tokens", type=int, default=4096, help="token budget per episode")
    p.add_argument("--time-budget", type=float, default=None, help="seconds per episode before it fails")
    p.add_argument("--seed", type=int, default=0, help="group g resets with seed + g (default: %(default)s)")
    p.add_argument("--out", default=None, help="JSONL file (default: runs/rollouts/<env>-<time>.jsonl)")
    p.add_argument("--show-system", action="store_true", help="print the system prompt of each episode")
    p.add_argument("--max-chars", type=int, default=2000, help="cut printed messages after this many characters")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no conversations, only the summary")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--dtype", default=None, help="model dtype, e.g. bfloat16 (default: the checkpoint's)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.set_defaults(func=run)


def _tasks(args) -> list:
    from mtrl_gym.error import ConfigError

    if args.n < 1 or args.group_size < 1 or args.n % args.group_size:
        raise ConfigError(f"--n ({args.n}) must be a positive multiple of --group-size ({args.group_size})")
    n_tasks = args.n // args.group_size
    if args.tasks is None:
        return [None] * n_tasks
    from mtrl_gym.datasets import read_tasks

    rows = read_tasks(args.tasks)
    if len(rows) < n_tasks:
        raise ConfigError(f"--tasks {args.tasks} has {len(rows)} tasks; --n {args.n} / --group-size "
                          f"{args.group_size} needs {n_tasks}")
    return rows[:n_tasks]


def _sampler(args):
    from mtrl_gym import models
    from mtrl_gym.rollout.samplers import make_sampler

    if args.endpoint:
        return make_sampler("openai", base_url=args.endpoint, model=args.endpoint_model), \
            models.load_tokenizer(args.model)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    model, tokenizer = models.load(args.model, dtype=args.dtype, device=args.device)
    return make_sampler("hf", policy=model, tokenizer=tokenizer, seed=args.seed), tokenizer


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"


def print_trajectory(traj, index: int, total: int, *, show_system: bool = False, max_chars: int = 2000,
                     file=None) -> None:
    """Print one trajectory as a readable conversation (to ``file``, default ``sys.stdout``)."""
    file = sys.stdout if file is None else file
    status = f"FAILED ({traj.failure_reason})" if traj.failed else traj.stop_reason
    print(f"\n=== episode {index + 1}/{total} | task {traj.task_id} | group {traj.group_id} sample "
          f"{traj.sample_index} | reward {traj.reward:+.3f} | {traj.num_turns} turns | {status} ===", file=file)
    for m in traj.messages:
        if m["role"] == "system" and not show_system:
            continue
        label = m["role"] if m["role"] != "tool" else f"tool {m.get('name', '')}".strip()
        print(f"[{label}] {_cut(str(m['content']), max_chars)}", file=file)


def _summary(trajs, seconds: float) -> str:
    from mtrl_gym.rollout.engine import aggregate_metrics

    agg = aggregate_metrics(trajs)
    sampled = agg["sampled_tokens_total"]
    lines = [f"episodes {len(trajs)} | reward mean {agg['reward_mean']:+.3f} (std {agg['reward_std']:.3f}) | "
             f"failures {int(agg['failures'])}"]
    if "success_mean" in agg:
        lines[0] += f" | success {agg['success_mean']:.1%}"
    lines.append(f"turns/episode {agg.get('turns_mean', 0):.2f} | format errors/turn "
                 f"{agg.get('format_error_rate_mean', 0):.2f} | tool calls/episode {agg.get('tool_calls_mean', 0):.2f}")
    lines.append(f"sampled {int(sampled)} tokens in {seconds:.1f} s ({sampled / max(seconds, 1e-9):.1f} tok/s) | "
                 f"KV reuse {agg['kv_reuse_rate']:.1%} of prompt tokens")
    stops = ", ".join(f"{k.removeprefix('stop/')} {v:.0%}" for k, v in agg.items() if k.startswith("stop/"))
    lines.append(f"stop reasons: {stops}")
    return "\n".join(lines)


def run(args) -> int:
    from mtrl_gym.rollout.engine import RolloutConfig, RolloutEngine
    from mtrl_gym.rollout.serving import ServingSettings
    from mtrl_gym.rollout.trajectory import save_jsonl

    import mtrl_gym  # noqa: F401 - registers the environments

    tasks = _tasks(args)
    serving = ServingSettings(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
                              max_new_tokens=args.max_tokens, assistant_prefix=args.assistant_prefix)
    config = RolloutConfig(group_size=args.group_size, sampling=serving.sampling(), max_turns=args.max_turns,
                           max_episode_tokens=args.max_episode_tokens, time_budget_s=args.time_budget,
                           seed=args.seed, progress=not args.quiet, assistant_prefix=serving.assistant_prefix)
    sampler, tokenizer = _sampler(args)
    with sampler, RolloutEngine(args.env_id, sampler, tokenizer, config) as engine:
        start = time.monotonic()
        trajs = engine.collect(tasks, seed=args.seed)
        seconds = time.monotonic() - start
    if not args.quiet:
        for i, t in enumerate(trajs):
            print_trajectory(t, i, len(trajs), show_system=args.show_system, max_chars=args.max_chars)
    out = Path(args.out) if args.out else Path("runs") / "rollouts" / \
        f"{args.env_id.replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    save_jsonl(trajs, out)
    print("\n" + _summary(trajs, seconds))
    print(f"wrote {len(trajs)} trajectories to {out}")
    return 0
