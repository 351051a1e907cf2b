"""``mtrl-gym play ENV``: play an environment yourself in the terminal.

You see exactly the text the model sees (system prompt with ``--show-system``, then each
observation); what you type is passed to ``env.step`` as the model's raw message, so a
bare word, ``guess_word("crane")`` or a full ``<tool_call>`` all work.
"""

from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("play", help="play an environment in the terminal",
                       description="Play an environment in the terminal, seeing what the model sees.")
    p.add_argument("env_id", nargs="?", default="mtrl/Wordle-v0", help="environment id (default: %(default)s)")
    p.add_argument("--seed", type=int, default=None, help="reset seed (same seed, same task)")
    p.add_argument("--task", default=None, help='task row as JSON, e.g. \'{"answer": "paste"}\'')
    p.add_argument("--show-system", action="store_true", help="print the system prompt and tool schemas first")
    p.add_argument("--show-info", action="store_true", help="print the step info dict after each step")
    p.set_defaults(func=run)


def run(args) -> int:
    from mtrl_gym.registry import make
    from mtrl_gym.serialization import json_safe

    env = make(args.env_id)
    options = {"task": json.loads(args.task)} if args.task else None
    obs, info = env.reset(seed=args.seed, options=options)
    if args.show_system:
        print("=== system ===")
        print(info.get("system_prompt", ""))
        print("=== tools ===")
        print(json.dumps(info.get("tools", []), indent=2))
    print("=== user ===")
    print(obs)
    total = 0.0
    while True:
        try:
            action = input("\n> ")
        except EOFError:
            print("\n(input closed)")
            return 0
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        print(obs)
        if args.show_info:
            print(json.dumps(json_safe(info), indent=1), file=sys.stderr)
        if terminated or truncated:
            print(f"\nEpisode over: reward {total:+.3f}")
            return 0
