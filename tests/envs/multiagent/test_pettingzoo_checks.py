"""PettingZoo's own checkers on both multi-agent envs, and the AEC and Parallel APIs agreeing on one game."""

from __future__ import annotations

import importlib
import json

import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import api_test, max_cycles_test, parallel_api_test, parallel_seed_test, seed_test  # noqa: E402

from mtrl_gym.envs.multiagent import policies  # noqa: E402
from mtrl_gym.registry import make_multiagent  # noqa: E402

MODULES = ["mtrl_gym.envs.multiagent.wordle_duel", "mtrl_gym.envs.multiagent.customer_call"]
IDS = ["mtrl/WordleDuel-v0", "mtrl/SOP-CustomerCall-v0"]


@pytest.fixture(params=MODULES, ids=["duel", "call"])
def module(request):
    return importlib.import_module(request.param)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_api_test(module):
    api_test(module.env(), num_cycles=40)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_parallel_api_test(module):
    parallel_api_test(module.parallel_env(), num_cycles=40)


def test_seed_tests(module):
    seed_test(module.env, num_cycles=30)
    parallel_seed_test(module.parallel_env, num_cycles=30)


def test_max_cycles_test(module):
    max_cycles_test(module)


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("parallel", [False, True])
def test_spaces_are_the_same_cached_objects(env_id, parallel):
    env = make_multiagent(env_id, parallel=parallel)
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)
        assert list(env.observation_space(agent).spaces) == ["text"]


def _players(env, names):
    return {seat: policies.reference_policy(env, seat, name) for seat, name in names.items()}


def _play_parallel(env_id, names, seed, options=None):
    env = make_multiagent(env_id, parallel=True)
    players = _players(env, names)
    obs, infos = env.reset(seed=seed, options=options)
    for i, seat in enumerate(env.possible_agents):
        players[seat].reset(infos[seat], __import__("numpy").random.default_rng([seed, i]))
    log = [json.dumps([obs, infos], sort_keys=True, default=str)]
    while env.agents:
        actions = {s: players[s](obs[s]["text"], infos[s]) for s in env.agents if not infos[s]["waiting"]}
        obs, rewards, terms, truncs, infos = env.step(actions)
        log.append(json.dumps([actions, obs, rewards, terms, truncs, infos], sort_keys=True, default=str))
    return log


def _play_aec(env_id, names, seed, options=None):
    import numpy as np

    env = make_multiagent(env_id)
    players = _players(env, names)
    env.reset(seed=seed, options=options)
    for i, seat in enumerate(env.possible_agents):
        players[seat].reset(env.infos[seat], np.random.default_rng([seed, i]))
    log = [json.dumps([{s: env.observe(s) for s in env.agents}, env.infos], sort_keys=True, default=str)]
    actions, turn = {}, 0
    for agent in env.agent_iter():
        obs, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        action = None if info["waiting"] else players[agent](obs["text"], info)
        if action is not None:
            actions[agent] = action
        env.step(action)
        turn += 1
        if turn % len(env.possible_agents) == 0:  # a cycle resolved: every seat's view changed
            log.append(json.dumps([actions, {s: env.observe(s) for s in env.possible_agents},
                                   {s: env.rewards[s] for s in env.possible_agents}, env.terminations,
                                   env.truncations, env.infos], sort_keys=True, default=str))
            actions = {}
    return log


@pytest.mark.parametrize("env_id,names", [
    ("mtrl/WordleDuel-v0", {"player_0": "solver", "player_1": "random"}),
    ("mtrl/WordleDuel-v0", {"player_0": "random", "player_1": "random"}),
    ("mtrl/SOP-CustomerCall-v0", {"agent": "solver", "customer": "scripted"}),
    ("mtrl/SOP-CustomerCall-v0", {"agent": "random", "customer": "random"}),
])
@pytest.mark.parametrize("seed", [0, 7])
def test_aec_and_parallel_play_the_same_seeded_game(env_id, names, seed):
    assert _play_aec(env_id, names, seed) == _play_parallel(env_id, names, seed)
