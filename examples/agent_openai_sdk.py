"""A Wordle agent written with the official ``openai`` package, trained by mtrl-gym as is.

The agent owns its loop: it calls the policy through an OpenAI-compatible base URL, offers
one tool, ``guess_word``, which it executes itself on an ``mtrl/Wordle-v0`` environment,
and returns the game's reward. Nothing in it knows about training. mtrl-gym starts a
policy server, gives every episode its own session URL, records the exact tokens the
policy sampled, and trains on them::

    pip install "mtrl-gym[train,serve]"
    mtrl-gym train --set source.name=agent --set source.target=examples/agent_openai_sdk.py:run --max-steps 2 --group-size 4 --global-batch-size 2 --serving.max-new-tokens 64 --validation.every 0

The trainer hands every episode its session's URL and key. Run one episode yourself
against ``mtrl-gym serve`` with the ``base_url`` and ``api_key`` that ``POST /sessions``
returns (or the server's key, from ``$MTRL_GYM_API_KEY``)::

    python examples/agent_openai_sdk.py http://127.0.0.1:8000/sessions/<id>/v1 <api_key>

The task row has the managed service's shape, ``{"prompt": "{\\"answer\\": ..., \\"id\\": ...}"}``;
the answer stays on this side: the model sees only the messages below.
"""

from __future__ import annotations

import json
import os
import sys

import gymnasium
from openai import OpenAI

import mtrl_gym  # noqa: F401 - registers mtrl/Wordle-v0
from mtrl_gym.serve import task_payload

MAX_TURNS = 6
"""Model turns per episode; a game still running after them scores the env's minimum reward."""


def guess_word(env: gymnasium.Env, guess: str) -> tuple[str, float, bool]:
    """The tool: play ``guess`` on the board. Returns the feedback text, the step's reward
    and whether the game is over."""
    call = json.dumps({"name": "guess_word", "arguments": {"guess": guess}})
    obs, reward, terminated, truncated, _ = env.step(f"<tool_call>{call}</tool_call>")
    return obs, float(reward), terminated or truncated


def run(task_row: dict, base_url: str, api_key: str | None = None) -> float:
    """Play one Wordle game through the policy at ``base_url`` (``api_key``: the session's
    key, default ``$MTRL_GYM_API_KEY``); returns the reward."""
    env = gymnasium.make("mtrl/Wordle-v0")
    obs, info = env.reset(options={"task": task_payload(task_row)})
    key = api_key or os.environ.get("MTRL_GYM_API_KEY", "none")
    client = OpenAI(base_url=base_url, api_key=key, max_retries=0)
    model = client.models.list().data[0].id
    messages = [{"role": "system", "content": info["system_prompt"]}, {"role": "user", "content": obs}]
    reward, over = 0.0, False
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model=model, messages=messages, tools=info["tools"])
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            messages.append({"role": "user", "content": "Call the guess_word tool with a 5-letter word."})
            continue
        for i, call in enumerate(message.tool_calls):
            if i > 0 or call.function.name != "guess_word":
                text = "One guess per turn, with the guess_word tool."
            else:
                guess = json.loads(call.function.arguments).get("guess", "")
                text, step_reward, over = guess_word(env, str(guess))
                reward += step_reward
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        if over:
            break
    low = env.unwrapped.reward_range[0]
    env.close()
    return reward if over else float(low)


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/v1"
    row = {"prompt": json.dumps({"answer": "paste", "id": "demo"})}
    print("reward:", run(row, url, sys.argv[2] if len(sys.argv) > 2 else None))
