"""Dump generated SOP worlds, task rows, labels and oracle transcripts to one JSON file.

Used to prove that a refactor of the SOP domain kit changes no generated world or label:
dump before the change, dump after, compare the two files (``--compare``).

    python scripts/dump_sop_worlds.py --out /tmp/before.json
    python scripts/dump_sop_worlds.py --out /tmp/after.json --compare /tmp/before.json

Each registered ``mtrl/SOP-*`` domain gets ``--n`` train seeds at its default difficulty
plus ``--n // 4`` seeds at each extreme (``noise`` 0 and 2, distractors off at 2), and the
exact text of its system prompt and tool schemas (key order included: chat templates render
it). The first ``--probe`` tasks also record every tool's reply to made-up arguments (the
error replies an oracle never sees). The file needs no data beyond the package itself.
"""

from __future__ import annotations

import argparse
import json
import sys

import gymnasium
import numpy as np

import mtrl_gym  # noqa: F401 - registers the ids
from mtrl_gym.envs.sop import canonical, generate_tasks, parse_task_inputs, play_oracle
from mtrl_gym.registry import list_envs


def _probe(env, row: dict) -> list:
    """Every tool called once with made-up arguments in a fresh episode of ``row``: the replies."""
    replies = []
    for schema in env.tool_schemas:
        obs, _ = env.reset(options={"task": row})
        inputs = parse_task_inputs(obs)
        fn = schema["function"]
        made_up = {k: _made_up(v) for k, v in fn["parameters"].get("properties", {}).items()}
        # the same call with the task's own ids where a parameter is named like an input, as given
        # and as a model may type them (lower case, spaces around)
        own = {k: inputs.get(k, v) for k, v in made_up.items()}
        typed = {k: f" {v.lower()} " if k in inputs and isinstance(v, str) else v for k, v in own.items()}
        for args in (made_up, own, typed):
            env.reset(options={"task": row})
            text = "<tool_call>" + json.dumps({"name": fn["name"], "arguments": args}) + "</tool_call>"
            obs, _, _, _, info = env.step(text)
            replies.append([text, obs, info["tool_outcomes"]])
    return replies


def _repeat(env, row: dict, transcript: list) -> list:
    """The oracle's tool calls replayed twice in a fresh episode of ``row``: the second pass meets the
    refusals of actions already taken."""
    calls = [action for action, _ in transcript[1:-1]]
    env.reset(options={"task": row})
    replies = []
    for text in calls + calls:
        obs, _, terminated, truncated, _ = env.step(text)
        replies.append([text, obs])
        if terminated or truncated:
            break
    return replies


def _made_up(spec: dict):
    kind = spec.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if "enum" in spec:
        return spec["enum"][-1]
    return {"string": "zz-000000", "integer": 7, "number": 2.5, "boolean": True, "array": [],
            "object": {}}.get(kind, "zz-000000")


def _dump_domain(env_id: str, n: int, probes: int) -> dict:
    env = gymnasium.make(env_id).unwrapped
    domain = env.domain
    out = {"system_prompt": env.system_prompt, "tools": env.tool_schemas, "default_difficulty":
           dict(domain.default_difficulty), "tools_text": json.dumps(env.tool_schemas),
           "system_prompt_text": env.system_prompt, "tasks": []}
    variants = [(None, n), ({"noise": 0}, n // 4), ({"noise": 2, "distractors": False}, n // 4)]
    for difficulty, count in variants:
        for row in generate_tasks(domain, count, seed=0, split="train", difficulty=difficulty):
            world = domain.generate(np.random.default_rng(row["seed"]), row["difficulty"])
            transcript: list = []
            reward, _, _ = play_oracle(env, options={"task": row}, transcript=transcript)
            task = {"row": row, "world": world, "label": domain.expected(world),
                    "inputs": domain.task_inputs(world), "transcript": transcript,
                    "reward": reward, "final_state": env.state}
            if len(out["tasks"]) < probes:
                task["probes"] = _probe(env, row) + _repeat(env, row, transcript)
            out["tasks"].append(task)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--n", type=int, default=200, help="seeds per domain at the default difficulty")
    parser.add_argument("--probe", type=int, default=20, help="tasks per domain whose tools are probed with "
                                                                   "made-up arguments")
    parser.add_argument("--only", nargs="*", default=None, help="env ids to dump (default: every SOP id)")
    parser.add_argument("--compare", default=None, help="an earlier dump: report every domain that differs")
    args = parser.parse_args(argv)
    ids = args.only or [e for e in list_envs() if e.startswith("mtrl/SOP-")]
    before = None
    if args.compare:
        with open(args.compare, encoding="utf-8") as f:
            before = json.load(f)
        ids = [e for e in ids if e in before]
    dump = {env_id: _dump_domain(env_id, args.n, args.probe) for env_id in ids}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(dump, f, sort_keys=True)
    for env_id, d in dump.items():
        print(f"{env_id}: {len(d['tasks'])} tasks, oracle reward {sum(t['reward'] for t in d['tasks'])}")
    if before is None:
        return 0
    bad = 0
    for env_id in ids:
        old, new = before[env_id], json.loads(json.dumps(dump[env_id]))
        for key in ("system_prompt", "tools", "default_difficulty", "tools_text", "system_prompt_text"):
            if canonical(old.get(key)) != canonical(new[key]):
                bad += 1
                print(f"DIFFERS {env_id}: {key}")
        for i, (a, b) in enumerate(zip(old["tasks"], new["tasks"])):
            for key in a:
                if canonical(a[key]) != canonical(b.get(key)):
                    bad += 1
                    print(f"DIFFERS {env_id} task {i} ({a['row']['id']}, seed {a['row']['seed']}): {key}")
        if len(old["tasks"]) != len(new["tasks"]):
            bad += 1
            print(f"DIFFERS {env_id}: {len(old['tasks'])} tasks before, {len(new['tasks'])} now")
    print("IDENTICAL" if not bad else f"{bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
