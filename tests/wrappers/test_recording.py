"""RecordEpisodes -> replay_episode round trips, seeds, unfinished episodes, tampering, file errors."""

import json
import random
import re

import gymnasium
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wrapper_helpers import ACTIONS, G, play

from mtrl_gym.envs.wordle.env import WordleEnv
from mtrl_gym.error import ConfigError, DatasetError, ReplayMismatch
from mtrl_gym.wrappers import (
    ChatHistory,
    FormatPenalty,
    PriorGuesses,
    RecordEpisodes,
    WordleShaping,
    iter_episodes,
    load_episodes,
    replay_episode,
)


def full_stack(path, **kw):
    env = gymnasium.make("mtrl/Wordle-v0")
    env = PriorGuesses(env, num_priors=(0, 2), policy="solver")
    env = FormatPenalty(WordleShaping(env, per_turn=True))
    return RecordEpisodes(ChatHistory(env, max_history=3), path, **kw)


def run_episodes(env, episodes, seed=11):
    """Play ``episodes`` episodes of cycling actions; only the first reset gets a seed."""
    actions = ["no call", G("crane"), "My guess: SLATE", G("pious"), G("zzzzz"), G("dumpy"), G("bight")]
    for e in range(episodes):
        env.reset(seed=seed if e == 0 else None)
        for t in range(20):
            *_, terminated, truncated, _ = env.step(actions[(t + e) % len(actions)])
            if terminated or truncated:
                break


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), actions=st.lists(ACTIONS, min_size=1, max_size=14))
def test_round_trip_on_arbitrary_play(tmp_path_factory, seed, actions):
    path = tmp_path_factory.mktemp("rec") / "episodes.jsonl"
    env = full_stack(path)
    _, steps = play(env, actions, seed=seed)
    env.close()
    [record] = load_episodes(path)
    assert [(s["reward"], s["terminated"], s["truncated"]) for s in record["steps"]] == [s[1:4] for s in steps]
    assert record["steps"][-1]["observation"][-1]["content"] == steps[-1][0][-1]["content"]
    assert record["seed"] == seed and record["env_id"] == "mtrl/Wordle-v0"
    assert record["finished"] == (record["steps"][-1]["terminated"] or record["steps"][-1]["truncated"])
    assert [s["action"] for s in record["steps"]] == actions[:len(record["steps"])]
    assert replay_episode(record) == record


def test_every_episode_gets_a_seed_and_a_run_is_reproducible(tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        env = full_stack(tmp_path / name)
        run_episodes(env, 4)
        env.close()
    a, b = load_episodes(tmp_path / "a.jsonl"), load_episodes(tmp_path / "b.jsonl")
    assert a == b and len(a) == 4
    assert a[0]["seed"] == 11 and all(isinstance(r["seed"], int) for r in a)
    assert len({r["seed"] for r in a}) == 4 and all(r["finished"] for r in a)
    for record in a:  # each one replays on its own, from its seed
        replay_episode(record)
    assert a[0]["reset"]["observation"][0]["role"] == "system"
    assert all(isinstance(r["return"], float) and r["length"] == len(r["steps"]) for r in a)


def test_unfinished_episodes_are_written_on_reset_and_close(tmp_path):
    path = tmp_path / "e.jsonl"
    env = RecordEpisodes(gymnasium.make("mtrl/Wordle-v0"), path)
    env.reset(seed=1)
    env.step(G("crane"))
    env.reset(seed=2)  # abandons episode 1
    env.reset(seed=3)  # episode 2 had no step: nothing to write
    env.step(G("slate"))
    env.step(G("pious"))
    env.close()
    records = load_episodes(path)
    assert [(r["seed"], r["length"], r["finished"]) for r in records] == [(1, 1, False), (3, 2, False)]
    assert env.episodes_written == 2
    for r in records:
        replay_episode(r)


@pytest.mark.parametrize("field, where", [
    ("observation", "step 2: observation differs"),
    ("reward", "step 2: reward differs"),
    ("info", "step 2: info['guess'] differs"),
])
def test_tampered_records_are_caught(tmp_path, field, where):
    path = tmp_path / "e.jsonl"
    env = RecordEpisodes(WordleShaping(gymnasium.make("mtrl/Wordle-v0")), path)
    play(env, [G("crane"), G("slate"), G("pious")], seed=5)
    env.close()
    [record] = load_episodes(path)
    step = record["steps"][1]
    step[field] = {"observation": "tampered", "reward": 123.0, "info": {**step["info"], "guess": "xxxxx"}}[field]
    with pytest.raises(ReplayMismatch, match=re.escape(where) + r": recorded .*, replayed .*not deterministic"):
        replay_episode(record)
    if field == "info":
        replay_episode(record, check_info=False)  # observations, rewards and flags still match


class Flaky(gymnasium.Env):
    """Not deterministic: draws from the global ``random`` module instead of ``self.np_random``."""

    observation_space = spaces.Discrete(1000)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return random.randrange(1000), 0.0, False, False, {}


def test_a_nondeterministic_env_fails_replay_and_no_spec_needs_an_env(tmp_path):
    path = tmp_path / "f.jsonl"
    env = RecordEpisodes(Flaky(), path)
    env.reset(seed=0)
    for _ in range(5):
        env.step(1)
    env.close()
    [record] = load_episodes(path)
    assert record["env_spec"] is None
    with pytest.raises(ConfigError, match=r"no env spec .* pass the env to replay on: replay_episode\(record, env="):
        replay_episode(record)
    with pytest.raises(ReplayMismatch, match="step 1: observation differs"):
        replay_episode(record, env=Flaky())


def test_replay_on_a_given_env(tmp_path):
    path = tmp_path / "w.jsonl"
    env = RecordEpisodes(WordleEnv(), path)
    play(env, [G("crane"), G("slate")], seed=9)
    env.close()
    [record] = load_episodes(path)
    replayed = replay_episode(record, env=WordleEnv())
    assert replayed["steps"] == record["steps"]


def test_reading_broken_files(tmp_path):
    path = tmp_path / "e.jsonl"
    env = RecordEpisodes(gymnasium.make("mtrl/Wordle-v0"), path)
    play(env, ["x"] * 12, seed=0)
    play(env, ["x"] * 12, seed=1)
    env.close()
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1][:50])  # a killed writer leaves half a line at the end
    assert [r["seed"] for r in iter_episodes(path)] == [0]
    path.write_text(lines[0][:50] + "\n" + lines[1])
    with pytest.raises(DatasetError, match=r"e.jsonl, line 1: invalid JSON"):
        load_episodes(path)
    path.write_text(json.dumps({"a": 1}) + "\n")
    with pytest.raises(DatasetError, match=r"line 1: not an episode record \(expected format 'mtrl_gym.episode/v1'\)"):
        load_episodes(path)
    with pytest.raises(ConfigError, match=r"`record` must be a record of load_episodes\(\)"):
        replay_episode({"a": 1})


def test_bad_paths(tmp_path):
    with pytest.raises(ConfigError, match=r"`path` must be a file, got the folder .* add a file name"):
        RecordEpisodes(gymnasium.make("mtrl/Wordle-v0"), tmp_path)
    with pytest.raises(ConfigError, match=r"`path` must be a file path \(str or PathLike\), got 3"):
        RecordEpisodes(gymnasium.make("mtrl/Wordle-v0"), 3)
    RecordEpisodes(gymnasium.make("mtrl/Wordle-v0"), tmp_path / "new" / "dir" / "e.jsonl")
    assert (tmp_path / "new" / "dir").is_dir()
