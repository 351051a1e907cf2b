"""Evaluate a model on an mtrl_gym env with verifiers' own runner, ``vf-eval``
(needs ``pip install "mtrl-gym[verifiers]"``; verifiers builds its chat harness with ``uv``,
which downloads the harness's packages from PyPI the first time).

    python examples/adapters_verifiers_eval.py                                  # show the tasks and the command
    python examples/adapters_verifiers_eval.py --base-url http://127.0.0.1:8000/v1 --model my-model

``--base-url`` is any OpenAI-compatible chat endpoint (vLLM, ``mtrl-gym serve``, a hosted
API). Each trace in the run folder records one reward, ``outcome`` (the bare env's
outcome), and the metrics ``turns``, ``format_errors``, ``tool_calls``, ``success``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="mtrl/Wordle-v0", help="any registered env id")
    parser.add_argument("--split", default="val", help="a named split (train, val, seeds:N)")
    parser.add_argument("--limit", type=int, default=4, help="tasks to play")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint; without it, print only")
    parser.add_argument("--model", default="my-model")
    parser.add_argument("--out", default="outputs/vf-eval")
    args = parser.parse_args()

    from mtrl_gym.adapters.verifiers import TASKSET_ID, MtrlTaskset, MtrlTasksetConfig

    config = MtrlTasksetConfig(id=TASKSET_ID, env_id=args.env, split=args.split, limit=args.limit,
                               max_turns=args.max_turns)
    for task in MtrlTaskset(config):
        print(f"{task.data.name}  id={task.data.id}  prompt: {task.data.prompt.splitlines()[0][:70]}")
    vf_eval = shutil.which("vf-eval", path=str(Path(sys.executable).parent)) or "vf-eval"
    command = [vf_eval, TASKSET_ID, "--env.taskset.env-id", args.env, "--env.taskset.split", args.split,
               "--env.taskset.limit", str(args.limit), "--env.taskset.max-turns", str(args.max_turns),
               "--model", args.model, "--client.base-url", args.base_url or "http://127.0.0.1:8000/v1",
               "-n", str(args.limit), "-r", "1", "--output-dir", args.out, "--no-push"]
    print("\n" + " ".join(command))
    if args.base_url is None:
        return
    subprocess.run(command, check=True)
    for path in Path(args.out).glob("*/traces.jsonl"):
        for line in path.read_text().splitlines():
            for trace in json.loads(line)["traces"]:
                print(trace["task"]["data"]["name"], trace["rewards"]["outcome"]["score"], trace["metrics"])


if __name__ == "__main__":
    main()
