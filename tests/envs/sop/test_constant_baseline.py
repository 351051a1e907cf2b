"""No generated SOP domain can be scored by a constant: the most common training answer, submitted at once.

For every registered domain, :func:`~mtrl_gym.envs.sop.constant.most_common_answer` (the
answer expected most often on 500 ``train`` tasks) is graded against 300 ``val`` tasks: at
most 2 % may match. Through the env, the ``constant`` reference policy submits exactly that
answer with no tool call, and ``mtrl-gym eval --policy constant`` reports it beside
``solver`` and ``random``.
"""

from __future__ import annotations

import importlib
import json

import gymnasium
import numpy as np
import pytest

import mtrl_gym  # noqa: F401 - registers the ids
from mtrl_gym.envs.profile import profile_of
from mtrl_gym.envs.sop import generate_tasks, grade
from mtrl_gym.envs.sop.constant import most_common_answer
from mtrl_gym.registry import ENV_SPECS

DOMAINS = {env_id: entry for env_id, (entry, _) in ENV_SPECS.items() if env_id.startswith("mtrl/SOP-")}
VAL_TASKS = 300
LIMIT = 0.02


def _domain(env_id):
    module, cls = DOMAINS[env_id].split(":")
    return getattr(importlib.import_module(module), cls).domain


@pytest.mark.parametrize("env_id", sorted(DOMAINS))
def test_the_most_common_training_answer_scores_at_most_2_percent_on_val(env_id):
    domain = _domain(env_id)
    answer = most_common_answer(domain)
    rows = generate_tasks(domain, VAL_TASKS, split="val")
    hits = sum(grade(answer, r["answer"], domain.output_schema).exact for r in rows)
    assert hits / VAL_TASKS <= LIMIT, f"{env_id}: the constant {answer} scores {hits}/{VAL_TASKS} on val"


def test_the_constant_policy_submits_that_answer_without_a_tool_call():
    env_id = "mtrl/SOP-OrderFulfillment-v0"
    env = gymnasium.make(env_id)
    try:
        policy = profile_of(env).policy("constant", env)
        assert policy.answer == most_common_answer(_domain(env_id))
        obs, info = env.reset(seed=3)
        policy.reset(info, np.random.default_rng(0))
        action = policy(obs, info)
        _, reward, terminated, _, info = env.step(action)
        assert terminated and info["num_tool_calls"] == 0 and "<tool_call>" not in action
        assert json.loads(action.removeprefix("<final_answer>").removesuffix("</final_answer>")) == policy.answer
    finally:
        env.close()


def test_eval_reports_the_constant_policy_beside_solver_and_random(tmp_path, capsys):
    from mtrl_gym.cli import main

    assert main(["eval", "mtrl/SOP-TrafficSpoofing-v0", "--policy", "constant", "--policy", "solver", "--policy",
                 "random", "-n", "1", "--limit", "20", "--out", str(tmp_path / "e"), "--quiet", "--no-mlflow"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()
            if line.split() and line.split()[0] in ("constant", "solver", "random")}
    assert rows == {"constant": "0.0%", "solver": "100.0%", "random": "0.0%"}
