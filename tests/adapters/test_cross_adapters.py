"""One Wordle task, one scripted game, five ways in: the same reward everywhere.

The script is a bad message, a miss (CRANE) and the solve (PASTE on guess 2: reward 1.45).
It runs through mtrl_gym's rollout engine, TRL's environment_factory (the tool methods TRL
calls), TRL's rollout_func (with a scripted generation in place of the model), an OpenEnv
server started here (``mtrl-gym openenv-serve``) and verifiers' own ``vf-eval`` against a
scripted OpenAI-compatible endpoint. verifiers and OpenEnv cannot share one venv (they pin
incompatible ``mcp`` versions), so verifiers runs from ``$MTRL_GYM_VERIFIERS_VENV`` when set.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl", reason='needs trl: pip install "mtrl-gym[trl]"')
pytest.importorskip("openenv", reason='needs openenv: pip install "mtrl-gym[openenv]"')

from conftest import (
    BAD_TEXT_UTF8,
    WORDLE_GUESSES,
    WORDLE_SEED,
    WORDLE_TASK,
    ScriptedGeneration,
    ScriptedTextSampler,
    run_vf_eval,
    wordle_script,
)

from mtrl_gym.adapters.openenv import OpenEnvTextEnv
from mtrl_gym.adapters.trl import (
    SEED_COLUMN,
    TASK_COLUMN,
    RolloutFunc,
    environment_factory,
    rollout_dataset,
)
from mtrl_gym.datasets import write_tasks
from mtrl_gym.rollout.engine import collect


def test_same_task_same_actions_same_reward_under_every_adapter(tmp_path, chatml_tokenizer, openenv_server):
    script = wordle_script()
    rewards = {}

    # 1. mtrl_gym's own rollout engine
    ours = collect("mtrl/Wordle-v0", [WORDLE_TASK], ScriptedTextSampler(chatml_tokenizer, script), chatml_tokenizer,
                   seed=WORDLE_SEED)[0]
    rewards["engine"] = ours.reward

    # 2. TRL environment_factory: what TRL does with parsed tool calls (the bad message has
    # no call TRL could parse, so TRL would not call a tool for it)
    env = environment_factory("mtrl/Wordle-v0")()
    env.reset(prompt=[], **{SEED_COLUMN: WORDLE_SEED, TASK_COLUMN: json.dumps(WORDLE_TASK)})
    for guess in WORDLE_GUESSES:
        env.guess_word(guess=guess)
    rewards["trl_environment_factory"] = env.get_reward()

    # 3. TRL rollout_func: full episodes, the scripted texts as the generation
    prompt = rollout_dataset("mtrl/Wordle-v0", tasks=[WORDLE_TASK], seed=WORDLE_SEED)[0]["prompt"]
    out = RolloutFunc("mtrl/Wordle-v0")([prompt], ScriptedGeneration(chatml_tokenizer, script))
    rewards["trl_rollout_func"] = out["env_reward"][0]

    # 4. OpenEnv: the served env, played through the Gymnasium client
    server = openenv_server("mtrl/Wordle-v0")
    remote = OpenEnvTextEnv(server.url)
    try:
        remote.reset(seed=WORDLE_SEED, options={"task": WORDLE_TASK})
        total = sum(remote.step(text)[1] for text in script)
    finally:
        remote.close()
    rewards["openenv"] = total

    # 5. verifiers: vf-eval with the scripted endpoint
    write_tasks([WORDLE_TASK], tmp_path / "tasks.jsonl")
    traces = run_vf_eval(tmp_path, script, "--env.taskset.env-id", "mtrl/Wordle-v0",
                         "--env.taskset.tasks-file", str(tmp_path / "tasks.jsonl"),
                         "--env.taskset.seed", str(WORDLE_SEED))
    rewards["verifiers"] = traces[0]["rewards"]["outcome"]["score"]

    assert script[0] == BAD_TEXT_UTF8 and ours.num_turns == 3
    assert rewards == {name: pytest.approx(1.45) for name in rewards}, rewards
