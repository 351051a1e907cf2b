"""The Wordle agent of ``agent_openai_sdk.py``, written with Strands Agents instead.

It mirrors the managed service's sample: a Strands ``Agent`` with one ``guess_word``
tool, pointed at the policy through Strands' OpenAI model provider. The tool plays the
guess on an ``mtrl/Wordle-v0`` environment; the game's reward is the episode's reward.
Strands streams every request (``stream: true``); the server records the same tokens::

    pip install "mtrl-gym[train,serve]" strands-agents
    mtrl-gym train --set source.name=agent --set source.target=examples/agent_strands.py:run --max-steps 2 --group-size 4 --global-batch-size 2 --serving.max-new-tokens 64 --validation.every 0

or one episode against a session's URL and key (``POST /sessions`` returns both)::

    python examples/agent_strands.py http://127.0.0.1:8000/sessions/<id>/v1 <api_key>
"""

from __future__ import annotations

import json
import os
import sys

import gymnasium
from openai import OpenAI
from strands import Agent, tool
from strands.models.openai import OpenAIModel
from strands.types.exceptions import MaxTokensReachedException

import mtrl_gym  # noqa: F401 - registers mtrl/Wordle-v0
from mtrl_gym.serve import task_payload

MAX_TOOL_CALLS = 6
"""Tool calls per episode (invalid words do not use a guess, so the game alone need not end)."""


def run(task_row: dict, base_url: str, api_key: str | None = None) -> float:
    """Play one Wordle game with a Strands agent through the policy at ``base_url``
    (``api_key``: the session's key, default ``$MTRL_GYM_API_KEY``)."""
    env = gymnasium.make("mtrl/Wordle-v0")
    obs, info = env.reset(options={"task": task_payload(task_row)})
    key = api_key or os.environ.get("MTRL_GYM_API_KEY", "none")
    model_id = OpenAI(base_url=base_url, api_key=key).models.list().data[0].id
    game = {"reward": 0.0, "over": False, "calls": 0}

    @tool
    def guess_word(guess: str) -> str:
        """Play one guess: a 5-letter English word. Returns per-letter feedback.

        Args:
            guess: A 5-letter English word, letters a-z.
        """
        if game["over"]:
            return "The game is over."
        call = json.dumps({"name": "guess_word", "arguments": {"guess": guess}})
        text, reward, terminated, truncated, _ = env.step(f"<tool_call>{call}</tool_call>")
        game["reward"] += float(reward)
        game["over"] = terminated or truncated
        game["calls"] += 1
        if game["over"] or game["calls"] >= MAX_TOOL_CALLS:
            agent.cancel(after_current_tools=True)
        return text

    model = OpenAIModel(client_args={"base_url": base_url, "api_key": key, "max_retries": 0},
                        model_id=model_id)
    agent = Agent(model=model, tools=[guess_word], system_prompt=info["system_prompt"], callback_handler=None)
    try:
        agent(obs)
    except MaxTokensReachedException:
        pass  # a turn hit max_tokens (Strands raises on finish_reason "length"): the game simply goes unfinished
    low = env.unwrapped.reward_range[0]
    env.close()
    return game["reward"] if game["over"] else float(low)


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/v1"
    print("reward:", run({"prompt": json.dumps({"answer": "paste", "id": "demo"})}, url,
                         sys.argv[2] if len(sys.argv) > 2 else None))
