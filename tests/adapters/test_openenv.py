"""OpenEnv adapter: mtrl_gym envs served over OpenEnv's WebSocket protocol, and back as Gymnasium envs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("openenv", reason='needs openenv: pip install "mtrl-gym[openenv]"')

from conftest import BAD_TEXT, WORDLE_GUESSES, WORDLE_SEED, WORDLE_TASK

import mtrl_gym
from mtrl_gym.adapters.episode import tool_call_text
from mtrl_gym.adapters.openenv import MtrlEnvironment, OpenEnvTextEnv


def _client(url):
    from openenv.core.generic_client import GenericEnvClient

    return GenericEnvClient(base_url=url).sync()


def test_seed_holds_across_the_websocket_session(openenv_server):
    server = openenv_server("mtrl/Wordle-v0")
    with _client(server.url) as client:
        first = client.reset(seed=123)
        client.step({"text": tool_call_text("guess_word", {"guess": "crane"})})
        again = client.reset(seed=123)
        assert again.observation["info"]["task_id"] == first.observation["info"]["task_id"]
        fb1 = client.step({"text": tool_call_text("guess_word", {"guess": "crane"})}).observation["info"]["feedback"]
        other = client.reset(seed=124)
        assert other.observation["info"]["task_id"] != first.observation["info"]["task_id"]
    with _client(server.url) as client:  # a new session, the same seed: the same task
        assert client.reset(seed=123).observation["info"]["task_id"] == first.observation["info"]["task_id"]
        fb2 = client.step({"tool": "guess_word", "arguments": {"guess": "crane"}}).observation["info"]["feedback"]
    local = mtrl_gym.make("mtrl/Wordle-v0")
    _, info = local.reset(seed=123)
    assert info["task_id"] == first.observation["info"]["task_id"]
    assert fb1 == fb2 == local.step("crane")[4]["feedback"]


def test_gymnasium_client_matches_the_local_env(openenv_server):
    server = openenv_server("mtrl/Wordle-v0")
    remote, local = OpenEnvTextEnv(server.url), mtrl_gym.make("mtrl/Wordle-v0")
    try:
        obs_r, info_r = remote.reset(seed=WORDLE_SEED, options={"task": WORDLE_TASK})
        obs_l, info_l = local.reset(seed=WORDLE_SEED, options={"task": WORDLE_TASK})
        assert obs_r == obs_l and info_r["task_id"] == info_l["task_id"] == "cross-0"
        assert info_r["tools"] == info_l["tools"] and info_r["system_prompt"] == info_l["system_prompt"]
        assert tuple(remote.reward_range) == tuple(local.unwrapped.reward_range)
        for text in [BAD_TEXT] + [tool_call_text("guess_word", {"guess": g}) for g in WORDLE_GUESSES]:
            r, loc = remote.step(text), local.step(text)
            assert r[:4] == loc[:4]
            assert r[4]["format_error"] == loc[4]["format_error"] and r[4]["tool_results"] == loc[4]["tool_results"]
        assert r[1] == pytest.approx(1.45) and r[2] is True and r[4]["answer"] == "paste"
    finally:
        remote.close()


def test_bad_text_is_an_observation_not_an_error(openenv_server):
    server = openenv_server("mtrl/SOP-KYBReview-v0")
    remote, local = OpenEnvTextEnv(server.url), mtrl_gym.make("mtrl/SOP-KYBReview-v0")
    try:
        assert remote.reset(seed=1)[0] == local.reset(seed=1)[0]
        for text in [BAD_TEXT, "", "{" * 5000, "<tool_call>{\"name\": \"nope\", \"arguments\": 3}</tool_call>"]:
            obs, reward, terminated, truncated, info = remote.step(text)
            expected = local.step(text)
            assert (obs, reward, terminated, truncated) == expected[:4] and obs
            assert info["format_error"] == expected[4]["format_error"]
        assert info["format_error"] is False and "Unknown tool 'nope'" in obs  # the env's own answer
        assert remote.step(BAD_TEXT)[4]["format_error"] is True
    finally:
        remote.close()


def test_rollout_engine_plays_an_openenv_env(openenv_server, chatml_tokenizer):
    from conftest import ScriptedTextSampler

    from mtrl_gym.rollout.engine import collect

    server = openenv_server("mtrl/Wordle-v0")
    script = [tool_call_text("guess_word", {"guess": g}) for g in WORDLE_GUESSES]
    remote = collect(lambda: OpenEnvTextEnv(server.url), [WORDLE_TASK], ScriptedTextSampler(chatml_tokenizer, script),
                     chatml_tokenizer, seed=WORDLE_SEED)
    local = collect("mtrl/Wordle-v0", [WORDLE_TASK], ScriptedTextSampler(chatml_tokenizer, script),
                    chatml_tokenizer, seed=WORDLE_SEED)
    assert remote[0].reward == local[0].reward == pytest.approx(1.45)
    assert remote[0].token_ids == local[0].token_ids and not remote[0].failed


def test_environment_state_and_steps_after_the_end():
    env = MtrlEnvironment("mtrl/Wordle-v0")
    obs = env.reset(seed=WORDLE_SEED, task=json.dumps(WORDLE_TASK))
    assert obs.info["seed"] == WORDLE_SEED and obs.info["reward_range"] == [-1.5, 1.55]
    out = env.step({"tool": "guess_word", "arguments": {"guess": "paste"}})
    assert out.done and out.reward == pytest.approx(1.55)
    late = env.step({"text": "crane"})
    assert late.done and late.reward == 0.0 and late.text.startswith("The episode is over")
    assert env.state.total_reward == pytest.approx(1.55) and env.state.step_count == 1


def test_cli_rejects_an_unknown_env_with_suggestions():
    proc = subprocess.run([sys.executable, "-m", "mtrl_gym.cli", "openenv-serve", "mtrl/Wordle-v9"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert "unknown environment id 'mtrl/Wordle-v9'" in proc.stderr and "mtrl/Wordle-v0" in proc.stderr
