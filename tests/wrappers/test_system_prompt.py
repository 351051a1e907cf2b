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
    with pytest.raises(ConfigError, match="exactly one of `text` or `file`"):
        SystemPrompt(env, "a", file="b.txt")
    with pytest.raises(ConfigError, match="cannot read the system prompt file"):
        SystemPrompt(env, file=str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match="`text` must be a str, got int"):
        SystemPrompt(env, 5)
    with pytest.raises(ConfigError, match="`tools` must be true or false, got 'no'"):
        SystemPrompt(env, "Rules.", tools="no")


def test_without_tools_the_system_message_is_exactly_the_prompt(chatml_tokenizer):
    from mtrl_gym.rollout.engine import ChatRenderer

    env = SystemPrompt(gymnasium.make("mtrl/Wordle-v0"), "Rules.", tools=False)
    obs, info = env.reset(seed=3)
    assert info["tools"] == [] and gymnasium.make("mtrl/Wordle-v0").reset(seed=3)[1]["tools"]
    renderer = ChatRenderer(chatml_tokenizer)
    text = chatml_tokenizer.decode(renderer.prompt_ids(renderer.first_messages(info["system_prompt"], [], obs), []))
    assert text.startswith("<|im_start|>system\nRules.<|im_end|>") and "<tools>" not in text
    # the env still plays tool calls
    assert env.step('<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>')[4]["valid"]


def test_usable_by_name_in_a_training_config():
    from mtrl_gym.rollout.sources.local import resolve_wrapper

    assert resolve_wrapper("SystemPrompt") is SystemPrompt


def test_tools_false_alone_keeps_the_env_prompt():
    bare_info = gymnasium.make("mtrl/Wordle-v0").reset(seed=1)[1]
    info = SystemPrompt(gymnasium.make("mtrl/Wordle-v0"), tools=False).reset(seed=1)[1]
    assert info["system_prompt"] == bare_info["system_prompt"] and info["tools"] == []
    with pytest.raises(ConfigError, match="or tools=False alone"):
        SystemPrompt(gymnasium.make("mtrl/Wordle-v0"))


def test_eval_runs_without_tool_schemas_when_asked():
    from mtrl_gym.evaluation import EvalConfig, RunSpec
    from mtrl_gym.evaluation.runner import _wrappers
    from mtrl_gym.rollout.envs import make_env

    def first_info(spec):
        return make_env(lambda: gymnasium.make("mtrl/Wordle-v0"), wrappers=_wrappers(EvalConfig(), spec)).reset(seed=0)[1]

    assert first_info(RunSpec("base", model="smollm2-135m"))["tools"]
    assert first_info(RunSpec("base", model="smollm2-135m", serving={"tools": False}))["tools"] == []
    assert RunSpec("base", model="smollm2-135m", serving={"tools": False}).describe()["tools"] is False
