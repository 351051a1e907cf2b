"""TRL adapter: environment_factory tools and rollout_func episodes, with real GRPOTrainer steps."""

from __future__ import annotations

import inspect
import json
import math

import pytest

pytest.importorskip("trl", reason='needs trl: pip install "mtrl-gym[trl]"')

from conftest import BAD_TEXT, WORDLE_GUESSES, WORDLE_SEED, WORDLE_TASK

from mtrl_gym.adapters.trl import (
    SEED_COLUMN,
    TASK_COLUMN,
    RolloutFunc,
    env_reward,
    environment_dataset,
    environment_factory,
    rollout_dataset,
)
from mtrl_gym.error import ConfigError


def _row():
    return {"prompt": [], SEED_COLUMN: WORDLE_SEED, TASK_COLUMN: json.dumps(WORDLE_TASK)}


def test_wordle_tool_method_and_schema():
    from transformers.utils import get_json_schema

    cls = environment_factory("mtrl/Wordle-v0")
    public = [n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_")]
    assert public == ["get_reward", "guess_word", "reset"]
    env = cls()
    schema = get_json_schema(env.guess_word)["function"]
    assert schema["name"] == "guess_word"
    assert schema["parameters"]["properties"]["guess"]["type"] == "string"
    assert schema["parameters"]["required"] == ["guess"]
    assert "Args:" in cls.guess_word.__doc__


def test_every_registered_env_gets_tool_methods():
    from transformers.utils import get_json_schema

    from mtrl_gym.registry import list_envs

    for env_id in list_envs():
        env = environment_factory(env_id)()
        tools = [n for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
                 if not n.startswith("_") and n not in ("reset", "get_reward")]
        assert tools, env_id
        for name in tools:
            schema = get_json_schema(getattr(env, name))  # raises on a bad docstring or hint
            assert schema["function"]["name"] == name


def _rendered(schema: dict) -> dict:
    """A property schema as transformers renders it (``nullable`` for a ``null`` type, no description)."""
    out = {k: v for k, v in schema.items() if k not in ("description", "title", "default")}
    kinds = out.get("type")
    if isinstance(kinds, list) and "null" in kinds and len(kinds) == 2:
        out["type"], out["nullable"] = next(k for k in kinds if k != "null"), True
    if isinstance(out.get("items"), dict):
        out["items"] = _rendered(out["items"])
    if out.get("type") == "object":  # nested properties ride in the description (JSON), see below
        out = {"type": "object"}
    return out


def test_tool_signatures_keep_every_schema():
    """Typed lists, enums, nullable types, defaults and nested objects of every env's tools reach
    TRL's schema: as type hints where transformers can render them, else as JSON in the description."""
    from transformers.utils import get_json_schema

    from mtrl_gym.adapters.episode import EnvEpisode
    from mtrl_gym.registry import list_envs

    checked = 0
    for env_id in list_envs():
        episode = EnvEpisode(env_id)
        episode.reset()
        env = environment_factory(env_id)()
        for tool in episode.tools:
            fn = tool.get("function", tool)
            params = fn.get("parameters") or {}
            got = get_json_schema(getattr(env, fn["name"]))["function"]["parameters"]
            assert got.get("required", []) == [p for p in params.get("required", [])], (env_id, fn["name"])
            for arg, want in (params.get("properties") or {}).items():
                rendered = got["properties"][arg]
                assert {k: v for k, v in rendered.items() if k != "description"} == _rendered(want), (env_id, arg)
                if "default" in want or "properties" in want:  # what a type hint cannot say: JSON
                    extra = {k: v for k, v in want.items() if k not in ("description", "title")}
                    assert json.dumps(extra, separators=(", ", ": ")) in rendered["description"], (env_id, arg)
                    checked += 1
        episode.close()
    assert checked >= 8  # defaults ("" and null) and the nested objects
    orders = environment_factory("mtrl/Sandbox-Orders-v0")()
    answer = get_json_schema(orders.submit)["function"]["parameters"]["properties"]["answer"]
    assert answer["type"] == "object" and '"enum": ["refunded", "cancelled", "denied"]' in answer["description"]
    packages = environment_factory("mtrl/SOP-PackageInspection-v0")()
    schema = get_json_schema(packages.record_inspection)["function"]["parameters"]["properties"]
    assert schema["rejected_packages"]["items"] == {"type": "string"} and "enum" in schema["disposition"]
    note = inspect.signature(environment_factory("mtrl/SOP-KYBReview-v0").open_case).parameters["note"]
    assert note.default == "" and note.annotation is str


def test_extra_positional_arguments_are_an_observation():
    env = environment_factory("mtrl/Wordle-v0")()
    env.reset(**_row())
    out = env.guess_word("crane", "x")
    assert out.startswith("Invalid call to guess_word: too many positional arguments (the tool takes 1).")
    assert env.episode.infos[-1]["format_error"] is True and env.episode.infos[-1]["guesses_used"] == 0
    out = env.guess_word("crane", guess="slate")
    assert "given twice" in out and env.episode.infos[-1]["guesses_used"] == 0
    assert env.guess_word("crane").startswith("Guess 1/6: CRANE")  # one positional argument is the guess


def test_sop_tool_arguments_reach_the_env():
    env = environment_factory("mtrl/SOP-DangerousGoods-v0")()
    obs = env.reset(**{SEED_COLUMN: 3, TASK_COLUMN: ""})
    shipment = json.loads(obs.split("```json")[1].split("```")[0])["shipment_id"]
    reply = env.get_shipment(shipment_id=shipment)
    assert shipment in reply and not env.episode.infos[-1]["format_error"]
    assert env.get_reward() == env.episode.min_reward  # not finished: the env's minimum


def test_reset_returns_first_observation_and_reward_is_outcome():
    env = environment_factory("mtrl/Wordle-v0")()
    first = env.reset(**_row())
    assert first.startswith("Let's play Wordle")
    assert "paste" not in first.lower()
    assert env.get_reward() == -1.5
    for g in WORDLE_GUESSES:
        env.guess_word(guess=g)
    assert env.get_reward() == pytest.approx(1.45)
    assert env.guess_word(guess="slate") == "The episode is over; no further actions are played."


def test_bad_arguments_are_env_observations():
    env = environment_factory("mtrl/Wordle-v0")()
    env.reset(**_row())
    out = env.guess_word(guess=BAD_TEXT)
    assert "Invalid guess" in out and env.episode.infos[-1]["error"] == "not_letters"
    out = env.guess_word(word="crane", extra=[1, {"a": None}])  # wrong argument names
    assert env.episode.infos[-1]["format_error"] is True
    out = env.guess_word()
    assert "guess_word needs" in out and env.episode.infos[-1]["format_error"] is True
    assert env.episode.infos[-1]["guesses_used"] == 0


def test_tool_name_that_is_not_an_identifier_is_rejected():
    from mtrl_gym.adapters.trl import tool_methods

    with pytest.raises(ConfigError, match="'get-order' is not a Python identifier"):
        tool_methods([{"type": "function", "function": {"name": "get-order", "parameters": {}}}])
    with pytest.raises(ConfigError, match="'reset' clashes"):
        tool_methods([{"type": "function", "function": {"name": "reset", "parameters": {}}}])


def test_env_reward_needs_rollout_func_column():
    with pytest.raises(ConfigError, match="needs the `env_reward` column"):
        env_reward(["x"])
    assert env_reward(["a", "b"], env_reward=[1, -0.5]) == [1.0, -0.5]


def test_rollout_func_generates_once_per_turn_for_the_whole_batch(tool_tokenizer):
    """Two tasks x two copies: one generation call per turn for all four episodes (not one
    per turn per group), each copy reset with its prompt's seed and task."""
    from conftest import ScriptedGeneration

    data = rollout_dataset("mtrl/Wordle-v0", tasks=[WORDLE_TASK, {"answer": "crane", "id": "c"}], seed=3)
    prompts = [data[0]["prompt"]] * 2 + [data[1]["prompt"]] * 2
    generation = ScriptedGeneration(tool_tokenizer, ['guess_word("slate")'], max_completion_length=12)
    rollout = RolloutFunc("mtrl/Wordle-v0", max_turns=3)
    out = rollout(prompts, generation)
    assert generation.calls == 3 == rollout.generate_calls  # 3 turns, all episodes at once
    trajs = rollout.last_trajectories
    assert [t.task_id for t in trajs] == ["cross-0", "cross-0", "c", "c"] and [t.seed for t in trajs] == [3, 3, 4, 4]
    assert all(t.num_turns == 3 for t in trajs) and out["logprobs"][0][0] == -0.5


def test_rollout_func_keeps_processes_in_step(tmp_path):
    """Two real processes (gloo) whose generation is a collective, as in vLLM server mode: rank 1
    finishes after one turn, rank 0 plays three; rank 1 keeps joining rank 0's calls (padded to
    equal prompt counts) instead of leaving it blocked in the gather."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from conftest import free_port

    script = Path(__file__).with_name("trl_two_processes.py")
    env = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, str(script)], env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    except subprocess.TimeoutExpired:
        raise AssertionError("the two processes deadlocked in generation") from None
    finally:
        for p in procs:
            p.kill()
    results = {}
    for p, (stdout, stderr) in zip(procs, outs):
        assert p.returncode == 0, stderr[-3000:]
        line = json.loads(stdout.strip().splitlines()[-1])
        results[line["rank"]] = line
    assert results[0] == {"rank": 0, "calls": 3, "rows": 2, "turns": [3, 3]}
    assert results[1] == {"rank": 1, "calls": 3, "rows": 1, "turns": [1]}


def _grpo_config(tmp_path, **extra):
    from trl import GRPOConfig

    return GRPOConfig(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=12, max_steps=2, learning_rate=1e-2, logging_steps=1,
                      report_to="none", save_strategy="no", seed=0, temperature=1.0, dataloader_num_workers=0,
                      **extra)


def _logged(trainer, key):
    return [h[key] for h in trainer.state.log_history if key in h]


def test_grpo_two_steps_with_environment_factory(tmp_path, tool_tokenizer, tool_model):
    from trl import GRPOTrainer

    factory = environment_factory("mtrl/Wordle-v0")
    data = environment_dataset("mtrl/Wordle-v0", split="seeds:4", seed=11)
    assert data[0][SEED_COLUMN] == 11 and data[0]["prompt"][-1] == {"role": "user", "content": ""}
    played = []

    class Recording(factory):  # records each episode's outcome when TRL scores it
        def get_reward(self):
            reward = super().get_reward()
            played.append((self.episode.info.get("task_id"), reward, len(self.episode.infos)))
            return reward

    Recording.__name__ = factory.__name__
    trainer = GRPOTrainer(model=tool_model, args=_grpo_config(tmp_path, max_tool_calling_iterations=2),
                          processing_class=tool_tokenizer, train_dataset=data, environment_factory=Recording)
    trainer.train()
    assert trainer.state.global_step == 2
    assert len(played) == 8  # 2 steps x 4 rollouts
    rewards = _logged(trainer, f"rewards/{factory.__name__}/mean")
    assert len(rewards) == 2
    outcomes = [r for _, r, _ in played]
    assert rewards[0] == pytest.approx(sum(outcomes[:4]) / 4) and rewards[1] == pytest.approx(sum(outcomes[4:]) / 4)


def test_grpo_two_steps_with_rollout_func(tmp_path, tool_tokenizer, tool_model):
    from trl import GRPOTrainer

    rollout = RolloutFunc("mtrl/Wordle-v0", max_turns=3)
    seen = []

    def recording(prompts, trainer):
        out = rollout(prompts, trainer)
        seen.append((len(prompts), out, list(rollout.last_trajectories)))
        return out

    data = rollout_dataset("mtrl/Wordle-v0", tasks=[WORDLE_TASK, {"answer": "crane", "id": "c"}], seed=3)
    trainer = GRPOTrainer(model=tool_model, reward_funcs=env_reward, args=_grpo_config(tmp_path),
                          processing_class=tool_tokenizer, train_dataset=data, rollout_func=recording)
    trainer.train()
    assert trainer.state.global_step == 2 and len(seen) == 2
    for n, out, trajs in seen:
        assert len(out["prompt_ids"]) == len(out["completion_ids"]) == len(out["env_mask"]) == n == len(trajs)
        assert out["logprobs"] is None  # transformers generation gives no sampling log-probs, as in TRL
        for t, ids, mask, reward in zip(trajs, out["completion_ids"], out["env_mask"], out["env_reward"]):
            assert reward == t.reward  # the env outcome (-1.5: a random model never guesses)
            assert t.num_turns == 3 or t.terminated
            start = t.prompt_length
            assert out["prompt_ids"][trajs.index(t)] == t.token_ids[:start]
            assert ids == t.token_ids[start:start + len(ids)]
            assert mask == t.loss_mask[start:start + len(ids)]  # 0 exactly on env tokens
            assert mask[-1] == 1 and 0 in mask  # env replies sit between the turns
        # the copies of one prompt play one task
        assert len({t.task_id for t in trajs[:2]}) == 1
    rewards = _logged(trainer, "rewards/env_reward/mean")
    assert rewards == [pytest.approx(sum(o["env_reward"]) / len(o["env_reward"])) for _, o, _ in seen]


def test_rollout_func_masks_env_tokens_from_the_loss(tmp_path, tool_tokenizer, tool_model):
    """The env_mask reaches the trainer's loss mask: env tokens get no loss."""
    import torch
    from trl import GRPOConfig, GRPOTrainer

    rollout = RolloutFunc("mtrl/Wordle-v0", max_turns=2)
    data = rollout_dataset("mtrl/Wordle-v0", tasks=[WORDLE_TASK], seed=0)
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=8, max_steps=1, report_to="none", save_strategy="no")
    trainer = GRPOTrainer(model=tool_model, reward_funcs=env_reward, args=args, processing_class=tool_tokenizer,
                          train_dataset=data, rollout_func=rollout)
    batch = [{"prompt": data[0]["prompt"]}] * 2
    trainer.model.train()
    inputs = trainer._generate_and_score_completions(batch)
    mask = (inputs["completion_mask"] * inputs["tool_mask"]).tolist()
    for row, t in zip(mask, rollout.last_trajectories):
        start = t.prompt_length
        expected = [int(m) for m in t.loss_mask[start:start + len(row)]]
        assert row[:len(expected)] == expected and not any(row[len(expected):])
        assert sum(row) == t.sampled_tokens
    assert torch.is_tensor(inputs["advantages"])
    assert not any(math.isnan(r) for r in rollout([b["prompt"] for b in batch], trainer)["env_reward"])
