"""The multi-agent rollout engine: seats, groups, seeds, token contracts, reference and frozen seats."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pettingzoo")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from scripted_sampler import ScriptedSampler, guess, random_guesses  # noqa: E402
from tiny_models import build_tiny_llama  # noqa: E402

from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.rollout.sources.multiagent import MultiAgentRolloutEngine  # noqa: E402
from mtrl_gym.rollout.samplers.base import SampleResult, SamplingParams  # noqa: E402
from mtrl_gym.rollout.samplers.hf import HFSampler  # noqa: E402

DUEL = "mtrl/WordleDuel-v0"
CALL = "mtrl/SOP-CustomerCall-v0"
TASKS = [{"id": "t0", "answer": "paste"}, {"id": "t1", "answer": "crane"}]


def test_self_play_returns_one_trajectory_per_seat_grouped_by_task_and_seat(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer, random_guesses)
    engine = MultiAgentRolloutEngine(DUEL, sampler, chatml_tokenizer, group_size=3,
                                     sampling=SamplingParams(max_new_tokens=64))
    trajs = engine.collect(TASKS, seed=5)
    assert len(trajs) == len(TASKS) * 2 * 3
    assert [(t.group_id, t.final_info["seat"], t.task_id) for t in trajs[::3]] == [
        (0, "player_0", "t0"), (1, "player_1", "t0"), (2, "player_0", "t1"), (3, "player_1", "t1")]
    assert [t.sample_index for t in trajs] == [0, 1, 2] * 4
    for t in trajs:
        assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs)
        assert t.stop_reason == "terminated" and not t.failed
        assert t.messages[0]["role"] == "system" and "duel" in t.messages[0]["content"]
        for start, end in t.turn_spans:
            assert all(t.loss_mask[start:end]) and all(lp == -1.0 for lp in t.logprobs[start:end])
        assert sum(t.loss_mask) == sum(e - s for s, e in t.turn_spans)
    # Zero-sum per game: seat 0's sample k and seat 1's sample k played each other.
    for g in range(len(TASKS)):
        p0, p1 = trajs[6 * g:6 * g + 3], trajs[6 * g + 3:6 * g + 6]
        assert [a.reward + b.reward for a, b in zip(p0, p1)] == [0.0, 0.0, 0.0]
    assert {t.reward for t in trajs} == {-1.0, 0.0, 1.0}  # the scripted picks give every outcome
    for t in trajs:
        seat = t.final_info["seat"]
        assert t.metrics[f"seat/{seat}/reward"] == t.reward
        assert t.metrics[f"seat/{seat}/win"] == float(t.reward == 1.0)
        assert t.metrics[f"seat/{seat}/loss"] == float(t.reward == -1.0)
    # Two seats never share a sampling seed, even on the same turn of the same game.
    seeds = [(r.session_id, r.params.seed) for r in sampler.requests]
    assert len({s for _, s in seeds}) == len(seeds)


def test_the_reply_to_a_seat_is_what_it_sees_next_time_it_acts(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer, lambda r: guess("slate"))
    engine = MultiAgentRolloutEngine(DUEL, sampler, chatml_tokenizer, sampling=SamplingParams(max_new_tokens=64),
                                     seats={"player_1": "solver"})
    [traj] = engine.collect([{"id": "t", "answer": "paste"}], seed=0)
    assert traj.final_info["seat"] == "player_0"
    tool, user = traj.messages[3], traj.messages[4]
    assert tool["role"] == "tool" and tool["content"].startswith("Guess 1/6: SLATE")
    assert user["role"] == "user" and "Opponent's guess 1/6: SLATE" in user["content"]  # the solver opens with slate
    assert traj.final_info["outcome"] == "loss" and traj.reward == -1.0


def test_a_seat_that_starts_waiting_gets_its_first_prompt_when_it_first_acts(chatml_tokenizer):
    def agent_or_customer(request):
        text = chatml_tokenizer.decode(request.prompt_ids)
        if "You are a customer of Kestrel Broadband" in text:
            return "My account number is KB-000000."
        return '<tool_call>{"name": "ask_customer", "arguments": {"question": "What is your account number?"}}' \
               '</tool_call>'

    sampler = ScriptedSampler(chatml_tokenizer, agent_or_customer)
    engine = MultiAgentRolloutEngine(CALL, sampler, chatml_tokenizer, max_turns=2, max_episode_tokens=60_000,
                                     sampling=SamplingParams(max_new_tokens=64), unfinished_reward="sum")
    agent, customer = engine.collect([None], seed=1)
    assert agent.final_info["seat"] == "agent" and customer.final_info["seat"] == "customer"
    assert customer.messages[1] == {"role": "user", "content": "The support agent asks: What is your account number?"}
    assert customer.messages[2]["content"] == "My account number is KB-000000."
    answer = agent.messages[3]
    assert answer["role"] == "tool" and answer["content"] == "Customer: My account number is KB-000000."
    assert agent.stop_reason == "max_turns" and agent.num_turns == 2
    assert agent.final_info["repeated_questions"] == 1  # the second question asked again for the account


def test_a_frozen_checkpoint_plays_a_seat_and_returns_no_trajectory(chatml_tokenizer):
    frozen = HFSampler(build_tiny_llama(len(chatml_tokenizer), seed=7), chatml_tokenizer, seed=0)
    trained = ScriptedSampler(chatml_tokenizer, lambda r: guess("crane"))
    engine = MultiAgentRolloutEngine(DUEL, trained, chatml_tokenizer, group_size=2, max_turns=3,
                                     sampling=SamplingParams(max_new_tokens=8), seats={"player_1": frozen})
    trajs = engine.collect(TASKS[:1], seed=2)
    assert [t.final_info["seat"] for t in trajs] == ["player_0", "player_0"]
    assert all(t.num_turns == 3 for t in trajs)
    assert all(r.session_id.endswith("player_0") for r in trained.requests)


def test_a_failing_seat_never_stops_the_game(chatml_tokenizer):
    class FailsForSeat1(ScriptedSampler):
        def sample(self, requests):
            out = super().sample(requests)
            return [SampleResult([], [], "error", error="boom") if r.session_id.endswith("player_1") else res
                    for r, res in zip(requests, out)]

    engine = MultiAgentRolloutEngine(DUEL, FailsForSeat1(chatml_tokenizer, lambda r: guess("crane")), chatml_tokenizer,
                                     sampling=SamplingParams(max_new_tokens=64))
    p0, p1 = engine.collect([{"id": "t", "answer": "paste"}], seed=0)
    assert p1.failed and p1.reward == -1.0 and "boom" in p1.failure_reason
    assert not p0.failed and p0.num_turns == 6  # player_0 played on alone until out of guesses


def test_seat_configuration_errors(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer, random_guesses)
    with pytest.raises(ConfigError, match=r"unknown seat\(s\) \['player_2'\]"):
        MultiAgentRolloutEngine(DUEL, sampler, chatml_tokenizer, seats={"player_2": "solver"})
    with pytest.raises(ConfigError, match="no seat of mtrl/WordleDuel-v0 is played by the trained sampler"):
        MultiAgentRolloutEngine(DUEL, sampler, chatml_tokenizer, seats={"player_0": "solver", "player_1": "random"})
    with pytest.raises(ConfigError, match="unknown policy 'oracle'"):
        MultiAgentRolloutEngine(DUEL, sampler, chatml_tokenizer, seats={"player_1": "oracle"})
    with pytest.raises(ConfigError, match="gymnasium wrappers and do not apply"):
        MultiAgentRolloutEngine(DUEL, sampler, chatml_tokenizer, wrappers=[lambda e: e])


def test_same_seed_same_trajectories(chatml_tokenizer, tiny_model):
    def run():
        engine = MultiAgentRolloutEngine(DUEL, HFSampler(tiny_model, chatml_tokenizer, seed=0), chatml_tokenizer,
                                         group_size=2, max_turns=2, sampling=SamplingParams(max_new_tokens=6))
        return [json.dumps([t.token_ids, t.reward, t.messages]) for t in engine.collect(TASKS[:1], seed=9)]

    first = run()
    assert first == run() and len(set(first)) == 4
