"""SystemPrompt: replaces the system prompt at reset, nothing else."""

import gymnasium
import pytest

import mtrl_gym  # noqa: F401
from mtrl_gym.error import ConfigError
from mtrl_gym.wrappers import SystemPrompt


def test_replaces_only_the_system_prompt(tmp_path):
    bare = gymnasium.make("mtrl/Wordle-v0")
    env = SystemPrompt(gymnasium.make("mtrl/Wordle-v0"), "Short rules.")
    (o1, i1), (o2, i2) = bare.reset(seed=3), env.reset(seed=3)
    assert i2["system_prompt"] == "Short rules." and o1 == o2
    assert {k: v for k, v in i1.items() if k != "system_prompt"} == {k: v for k, v in i2.items() if k != "system_prompt"}
    assert env.step("guess_word('crane')")[:4] == bare.step("guess_word('crane')")[:4]
    (tmp_path / "p.txt").write_text("From a file.\n")
    assert SystemPrompt(bare, file=str(tmp_path / "p.txt")).reset(seed=0)[1]["system_prompt"] == "From a file.\n"
    assert SystemPrompt(bare, "").reset(seed=0)[1]["system_prompt"] == ""


def test_arguments_are_validated(tmp_path):
    env = gymnasium.make("mtrl/Wordle-v0")
    with pytest.raises(ConfigError, match="exactly one of `text` or `file`, got text=None and file=None"):
        SystemPrompt(env)
    with pytest.raises(ConfigError, match="cannot read the system prompt file"):
        SystemPrompt(env, file=str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match="`text` must be a str, got int"):
        SystemPrompt(env, 5)


def test_usable_by_name_in_a_training_config():
    from mtrl_gym.trainers.grpo.factory import resolve_wrapper

    assert resolve_wrapper("SystemPrompt") is SystemPrompt
