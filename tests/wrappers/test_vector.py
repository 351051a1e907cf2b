"""Vector envs: make_vec sync/async with seeds and the wrappers; reproducible per env index."""

import copy
import functools

import gymnasium
import numpy as np
import pytest
from wrapper_helpers import G

from mtrl_gym.envs.spaces import TextSpace
from mtrl_gym.wrappers import (
    ChatHistory,
    FormatPenalty,
    PriorGuesses,
    RecordEpisodes,
    WordleShaping,
    load_episodes,
    replay_episode,
)

ACTIONS = ["no call", G("crane"), "My guess: SLATE", G("pious"), G("zzzzz"), G("dumpy"), G("bight"), G("crane")]
WRAPPERS = [functools.partial(PriorGuesses, num_priors=(0, 3), policy="solver"),
            functools.partial(WordleShaping, per_turn=True), FormatPenalty]


def actions_at(t, n):
    """A different action per env index, so the sub-envs' episodes end at different steps."""
    return tuple(ACTIONS[(t * (i + 1) + i) % len(ACTIONS)] for i in range(n))


def rollout(vec, steps=20, seed=3):
    obs, info = vec.reset(seed=seed)
    out = [(tuple(obs),)]
    for t in range(steps):
        obs, reward, terminated, truncated, info = vec.step(actions_at(t, vec.num_envs))
        out.append((tuple(obs), reward.tolist(), terminated.tolist(), truncated.tolist(),
                    info.get("reward_components", {}).get("shaping", np.zeros(0)).tolist()))
    vec.close()
    return out


def test_sync_index_i_is_the_single_env_seeded_with_seed_plus_i():
    vec = gymnasium.make_vec("mtrl/Wordle-v0", num_envs=8, vectorization_mode="sync", wrappers=WRAPPERS)
    out = rollout(vec, steps=6)
    for i in range(8):
        env = gymnasium.make("mtrl/Wordle-v0")
        for w in WRAPPERS:
            env = w(env)
        obs, _ = env.reset(seed=3 + i)
        assert out[0][0][i] == obs
        for t in range(6):
            obs, reward, terminated, truncated, _ = env.step(actions_at(t, 8)[i])
            assert (out[t + 1][0][i], out[t + 1][1][i], out[t + 1][2][i]) == (obs, reward, terminated)
            if terminated:
                break


def test_sync_and_async_agree_step_for_step_through_autoresets():
    sync = rollout(gymnasium.make_vec("mtrl/Wordle-v0", num_envs=3, vectorization_mode="sync", wrappers=WRAPPERS))
    again = rollout(gymnasium.make_vec("mtrl/Wordle-v0", num_envs=3, vectorization_mode="sync", wrappers=WRAPPERS))
    asyn = rollout(gymnasium.make_vec("mtrl/Wordle-v0", num_envs=3, vectorization_mode="async", wrappers=WRAPPERS))
    assert sync == again == asyn
    assert sum(any(step[2]) for step in sync[1:]) >= 2, "episodes ended and autoreset during the rollout"
    assert len({o for step in sync for o in step[0]}) > 10  # observations changed (not a stale buffer)


def test_async_plain_env_with_default_shared_memory_returns_current_observations():
    vec = gymnasium.make_vec("mtrl/Wordle-v0", num_envs=2, vectorization_mode="async")
    obs, _ = vec.reset(seed=0)
    assert all(o.startswith("Let's play Wordle.") for o in obs) and type(obs) is tuple
    obs, *_ = vec.step((G("crane"), G("slate")))
    assert obs[0].startswith("Guess 1/6: CRANE") and obs[1].startswith("Guess 1/6: SLATE")
    vec.close()


def test_async_chat_history_needs_shared_memory_off():
    vec = gymnasium.make_vec("mtrl/Wordle-v0", num_envs=2, vectorization_mode="async", wrappers=[ChatHistory],
                             vector_kwargs={"shared_memory": False})
    obs, _ = vec.reset(seed=0)
    obs, *_ = vec.step((G("crane"), "no call"))
    assert [m["role"] for m in obs[0]] == ["system", "user", "assistant", "tool"]
    assert [m["role"] for m in obs[1]] == ["system", "user", "assistant", "user"]
    vec.close()
    with pytest.raises(TypeError, match="disable `shared_memory`"):
        gymnasium.make_vec("mtrl/Wordle-v0", num_envs=2, vectorization_mode="async", wrappers=[ChatHistory])


def test_async_workers_record_to_one_file(tmp_path):
    path = tmp_path / "episodes.jsonl"
    wrappers = [*WRAPPERS, functools.partial(RecordEpisodes, path=str(path))]
    vec = gymnasium.make_vec("mtrl/Wordle-v0", num_envs=4, vectorization_mode="async", wrappers=wrappers)
    vec.reset(seed=21)
    ended = 0
    for t in range(30):
        _, _, terminated, truncated, _ = vec.step(actions_at(t, 4))
        ended += int(np.sum(terminated | truncated))
    vec.close()  # also writes each worker's unfinished episode
    records = load_episodes(path)
    finished = [r for r in records if r["finished"]]
    assert len(finished) == ended >= 4
    assert len(records) - len(finished) <= 4
    assert {r["seed"] for r in records} >= {21, 22, 23, 24}
    for r in records:
        replay_episode(r)


def test_live_text_view_of_shared_memory():
    from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

    space = TextSpace(12)
    memory = create_shared_memory(space, n=3)
    view = read_from_shared_memory(space, memory, n=3)  # read once, like AsyncVectorEnv does
    for i, text in enumerate(["", "crane", "hello"]):
        write_to_shared_memory(space, i, text, memory)
    assert view[1] == "crane" and len(view) == 3 and view[-2] == "crane" and view[1:] == ("crane", "hello")
    snapshot = copy.deepcopy(view)
    write_to_shared_memory(space, 1, "slate", memory)
    assert snapshot == ("", "crane", "hello") and type(snapshot) is tuple
    assert view == ("", "slate", "hello") and view[1] == "slate"
    with pytest.raises(IndexError):
        view[3]
