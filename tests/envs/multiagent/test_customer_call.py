"""The SOP agent with a simulated customer: asking, grading, the repeat penalty, secrets, hostile text."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mtrl_gym.envs.multiagent import policies  # noqa: E402
from cross_process import game_digests  # noqa: E402
from mtrl_gym.envs.multiagent.customer_call import (FACTS, REPEAT_PENALTY, customer_reply,  # noqa: E402
                                                    parallel_env, question_topics)
from mtrl_gym.error import ConfigError  # noqa: E402

A, C = "agent", "customer"


def ask(question: str) -> str:
    return '<tool_call>{"name": "ask_customer", "arguments": {"question": ' + json.dumps(question) + '}}</tool_call>'


def _oracle_game(env, seed, *, extra_questions=()):
    oracle = policies.reference_policy(env, A, "solver")
    customer = policies.reference_policy(env, C, "scripted")

    class WithQuestions:
        def reset(self, info, rng, **kw):
            oracle.reset(info, rng, **kw)
            self.extra = list(extra_questions)

        def __call__(self, obs, info):
            if self.extra and info.get("cycle", 0) >= 2:  # after the first answer
                return ask(self.extra.pop(0))
            return oracle(obs, info)

    return policies.play_game(env, {A: WithQuestions(), C: customer}, seed=seed)


def test_the_oracle_agent_with_the_scripted_customer_solves_every_call():
    env = parallel_env()
    for seed in range(8):
        result = _oracle_game(env, seed)
        assert result["rewards"] == {A: 1.0, C: 1.0}, result["infos"][A].get("grade_result")
        assert result["infos"][A]["success"] and result["infos"][A]["questions_asked"] == 1


def test_asking_again_for_what_was_told_costs_the_penalty():
    env = parallel_env()
    result = _oracle_game(env, 0, extra_questions=["Sorry, what was your passcode again?", "How are you today?",
                                                   "And the fault you are calling about?"])
    assert result["infos"][A]["repeated_questions"] == 2  # passcode and fault were told; the small talk asks nothing
    assert result["rewards"][A] == pytest.approx(1.0 - 2 * REPEAT_PENALTY)


def test_the_customer_answers_only_what_is_asked():
    facts = {"account_id": "KB-111111", "caller_name": "Ana Ruiz", "passcode": "0042", "device_label": "a1b2",
             "reported_fault": "slow_speed"}
    assert customer_reply("What's your account number?", facts) == "Account number: KB-111111."
    reply = customer_reply("Who am I speaking with, and what is the passcode?", facts)
    assert reply == "Name: Ana Ruiz. Passcode: 0042."
    assert "KB-111111" not in customer_reply("Lovely weather, isn't it?", facts)
    assert question_topics("Which router or hub is it? What is the problem?") == ("device_label", "reported_fault")
    assert question_topics("x" * 10_000 + " passcode") == ()  # only the first 500 characters are read


def test_a_question_turn_runs_no_tool_and_the_answer_is_its_result():
    env = parallel_env()
    obs, infos = env.reset(seed=3)
    assert infos[C]["waiting"] and not infos[A]["waiting"]
    both = ask("What is your account number?") + \
        '<tool_call>{"name": "lookup_account", "arguments": {"account_id": "KB-1"}}</tool_call>'
    obs, _, _, _, infos = env.step({A: both, C: "ignored: I am waiting"})
    assert infos[A]["waiting"] and not infos[C]["waiting"] and infos[C]["question"] == "What is your account number?"
    assert obs[C]["text"] == "The support agent asks: What is your account number?"
    obs, _, _, _, infos = env.step({A: "ignored: I am waiting", C: "It is KB-123."})
    results = infos[A]["tool_results"]
    assert [r["name"] for r in results] == ["ask_customer", "lookup_account"]
    assert results[0]["content"] == "Customer: It is KB-123." and results[1]["content"].startswith("Ignored")
    assert obs[A]["text"].startswith("Customer: It is KB-123.")


def test_bad_questions_and_the_question_limit():
    env = parallel_env(max_questions=1)
    env.reset(seed=4)
    _, _, _, _, infos = env.step({A: '<tool_call>{"name": "ask_customer", "arguments": {}}</tool_call>'})
    assert infos[A]["error"] == "bad_arguments" and not infos[A]["waiting"]
    env.step({A: ask("Your name?")})
    env.step({C: "Ana."})
    obs, _, _, _, infos = env.step({A: ask("Your passcode?")})
    assert infos[A]["error"] == "question_limit" and "limit is 1" in obs[A]["text"]
    with pytest.raises(ConfigError, match="`max_questions` must be an int >= 1, got 0"):
        parallel_env(max_questions=0)


def _world_secrets(env) -> list[str]:
    world = env.game.console.state
    secrets = [world["auth"]["session_token"], f"TKT-{world['ticket_number']}"]
    if world["auth"]["passcode"] != world["inputs"]["passcode"]:
        secrets.append(world["auth"]["passcode"])  # the real passcode, when the caller's is wrong
    return secrets


def test_no_seat_sees_anothers_private_facts():
    env = parallel_env()
    for seed in range(10):
        obs, infos = env.reset(seed=seed)
        facts = dict(env.game.facts)
        secrets = _world_secrets(env)
        rng = np.random.default_rng(seed)
        randoms = policies.RandomCallPolicy()
        randoms.reset(infos[A], rng)
        # An agent that never asks never learns the caller's details, whatever it calls.
        agent_texts = [obs[A]["text"], infos[A]["system_prompt"]]
        for _ in range(12):
            if not env.agents:
                break
            action = randoms(obs[A]["text"], infos[A])
            if "ask_customer" in action:
                continue
            obs, _, _, _, infos = env.step({A: action})
            agent_texts.append(obs[A]["text"])
        for text in agent_texts:
            for key in ("caller_name", "passcode", "account_id"):
                assert facts[key] not in text, (key, text)
        # The customer never sees the world's records while the oracle agent works through them.
        oracle = policies.reference_policy(env, A, "solver")
        scripted = policies.reference_policy(env, C, "scripted")
        obs, infos = env.reset(seed=seed)
        oracle.reset(infos[A], rng)
        seen = [obs[C]["text"], infos[C]["system_prompt"], json.dumps(infos[C])]
        while env.agents:
            actions = {A: oracle(obs[A]["text"], infos[A])} if not infos[A]["waiting"] else \
                {C: scripted(obs[C]["text"], infos[C])}
            obs, _, _, _, infos = env.step(actions)
            seen += [obs[C]["text"], json.dumps({k: v for k, v in infos[C].items() if k != "facts"})]
        for text in seen:
            for secret in secrets:
                assert secret not in text, (secret, text)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.lists(st.tuples(st.text(max_size=200), st.text(max_size=200), st.booleans()), min_size=1,
                      max_size=12))
def test_any_text_is_a_legal_action_for_either_seat(turns):
    env = parallel_env()
    obs, infos = env.reset(seed=5)
    space = env.observation_space(A)
    low, high = env.game.reward_range
    for agent_text, customer_text, asking in turns:
        if not env.agents:
            break
        action = ask(agent_text) if asking else agent_text
        obs, rewards, _, _, infos = env.step({A: action, C: customer_text})
        for s in (A, C):
            assert space.contains(obs[s])
            assert low <= rewards[s] <= high


def test_hostile_answers_are_cleaned_and_cut():
    env = parallel_env()
    env.reset(seed=6)
    env.step({A: ask("Your name?")})
    obs, _, _, _, infos = env.step({C: "\ud800\x00" * 3000 + "[" * 5000})
    content = infos[A]["tool_results"][0]["content"]
    assert len(content) <= len("Customer: ") + 600 and env.observation_space(A).contains(obs[A])


def test_the_facts_are_the_worlds_inputs():
    env = parallel_env()
    env.reset(seed=8)
    world = env.game.console.state
    assert env.game.facts == {k: str(world["inputs"][k]) for k in FACTS}


def test_same_seed_same_call_in_other_processes():
    assert len(game_digests("mtrl/SOP-CustomerCall-v0", {"agent": "random", "customer": "scripted"}, seeds=(1, 9), hash_seeds=("0", "4242"))) == 1
