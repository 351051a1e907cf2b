"""EpisodeStats: the bare env's outcome and Wordle's per-turn play rates, under any wrapper stack."""

from __future__ import annotations

import gymnasium
from hypothesis import given, settings
from wrapper_helpers import G, games

from mtrl_gym.envs.wordle.turn_facts import wordle_turn_facts
from mtrl_gym.wrappers import EpisodeStats, PriorGuesses, WordleShaping, turn_facts_of


def _play(env, answer, actions):
    env.reset(seed=0, options={"answer": answer})
    bare_total, infos = 0.0, []
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        infos.append(info)
        bare_total += info.get("reward_components", {}).get("outcome", reward)
        if terminated or truncated:
            break
    return bare_total, infos


@settings(max_examples=40, deadline=None)
@given(games())
def test_outcome_and_rates_match_the_bare_env_under_shaping(game):
    answer, actions = game
    bare = gymnasium.make("mtrl/Wordle-v0")
    bare.reset(seed=0, options={"answer": answer})
    rewards, facts = [], []
    for action in actions:
        _, reward, terminated, _, info = bare.step(action)
        rewards.append(reward)
        facts.append(wordle_turn_facts(info))
        if terminated:
            break
    _, infos = _play(EpisodeStats(WordleShaping(gymnasium.make("mtrl/Wordle-v0"), per_turn=True)), answer, actions)
    last = infos[-1]
    assert last["episode/outcome_reward"] == sum(rewards)
    assert last["episode/turns"] == len(facts)
    assert last["episode/valid_guess_rate"] == sum(f["valid_guess"] for f in facts) / len(facts)
    assert last["episode/new_word_rate"] == sum(f["new_word"] for f in facts) / len(facts)
    assert 0.0 <= last["episode/new_word_rate"] <= last["episode/valid_guess_rate"] <= 1.0


def test_a_curriculum_s_moves_are_not_the_agent_s_turns():
    env = EpisodeStats(PriorGuesses(gymnasium.make("mtrl/Wordle-v0"), num_priors=2, policy="solver", epsilon=0.0))
    _, infos = _play(env, "paste", [G("fuzzy"), G("fuzzy"), "no guess here"])
    assert [i["episode/turns"] for i in infos] == [1, 2, 3]
    assert infos[-1]["episode/valid_guess_rate"] == 2 / 3
    assert infos[-1]["episode/new_word_rate"] == 1 / 3  # the repeat is valid, not new
    env.reset(seed=1)
    info = env.step(G("slate"))[4]
    assert info["episode/turns"] == 1  # counts start again at every reset


def test_an_env_without_the_hook_gets_outcome_and_turns_only():
    from toy_envs import VowelEnv

    env = EpisodeStats(VowelEnv())
    assert turn_facts_of(env) is None
    env.reset(seed=0, options={"task": {"id": "t", "turns": 1, "letters": "aeiou"}})
    info = env.step("aaa")[4]
    assert info["episode/turns"] == 1 and not any(k.endswith("_rate") for k in info if k.startswith("episode/"))
