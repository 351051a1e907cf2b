"""GRPOConfig: validation messages, files, presets, overrides, field docs, the train CLI's flags."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.trainers.grpo.config import (GRPOConfig, field_docs, parse_override, preset_names,  # noqa: E402
                                           preset_path, read_config_file)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("changes, message", [
    ({"group_size": 0}, r"`group_size` must be an integer >= 1, got 0"),
    ({"global_batch_size": "many"}, r"`global_batch_size` must be an integer, got 'many'"),
    ({"learning_rate": -1.0}, r"`learning_rate` must be a finite number > 0, got -1.0"),
    ({"max_steps": None, "max_epochs": None}, r"set `max_steps` or `max_epochs` \(both are None"),
    ({"loss": "ppo2"}, r"unknown loss 'ppo2'\. Did you mean 'ppo', 'gspo'\? Valid: cispo, gspo, importance_sampling, ppo"),
    ({"aggregation": "seq_mean"}, r"unknown aggregation 'seq_mean'\. Did you mean 'seq_mean_token_mean'"),
    ({"advantage": "grpo"}, r"unknown advantage estimator 'grpo'"),
    ({"loss": "cispo", "loss_kwargs": {"dual_clip": 3.0}}, r"loss 'cispo' got unknown option\(s\) 'dual_clip'"),
    ({"advantage": "grpo_passk"}, r"advantage estimator 'grpo_passk' needs option\(s\) 'k'"),
    ({"loss_kwargs": {"kl_coef": 0.1}}, r"`loss_kwargs` may not set \['kl_coef'\]: use the config fields"),
    ({"sampler": "vlm"}, r"`sampler` must be one of 'hf', 'vllm', 'openai', got 'vlm'\. Did you mean 'vllm'\?"),
    ({"packing": "packed"}, r"`packing` must be one of 'auto', 'shared_prefix', 'padding_free', 'sorted', got 'packed'"),
    ({"packing": "shared_prefix", "gradient_checkpointing": True},
     r"`packing` 'shared_prefix' cannot be combined with `gradient_checkpointing`"),
    ({"autocast_dtype": "bf16"}, r"`autocast_dtype` must be one of 'auto', 'bfloat16', 'float16', got 'bf16'"),
    ({"tis_cap": 0.5}, r"`tis_cap` must be >= 1 or None \(off\), got 0.5"),
    ({"lora_dropout": 1.0}, r"`lora_dropout` must be in \[0, 1\), got 1.0"),
    ({"lora_target_modules": []}, r"`lora_target_modules` must be 'all-linear' or a non-empty list"),
    ({"adam_betas": [0.9]}, r"`adam_betas` must be two numbers in \[0, 1\), e.g. \[0.9, 0.999\], got \[0.9\]"),
    ({"updates_per_step": 9, "global_batch_size": 2, "group_size": 4},
     r"`updates_per_step` \(9\) must be <= the rollouts per step \(global_batch_size \* group_size = 8\)"),
    ({"env_wrappers": [{"name": "WordleShaping", "args": {}}]},
     r"`env_wrappers\[0\]` has unknown key\(s\) \['args'\]; a wrapper entry has only 'name' and 'kwargs'"),
    ({"max_turns": 0}, r"`max_turns` must be an integer >= 1 or None, got 0"),
    ({"temperature": float("nan")}, r"`temperature` must be a finite number >= 0"),
    ({"tracker": "wandb"}, r"`tracker` must be one of 'mlflow', 'none', got 'wandb'"),
    ({"full_finetune": "maybe"}, r"`full_finetune` must be true or false, got 'maybe'"),
    ({"max_grad_norm": "0"}, r"`max_grad_norm` must be a number > 0 or None, got 0.0"),
    ({"unfinished_reward": "max"}, r'`unfinished_reward` must be "min", "sum" or a finite number, got \'max\''),
    ({"stop": ["", "x"]}, r"`stop` must be a list of non-empty strings, got \['', 'x'\]"),
    ({"val_group_size": 4}, r"`val_group_size` is 4 but `val_temperature` is 0: greedy rollouts of a task are "
                            r"identical, so pass@k would equal pass@1"),
])
def test_bad_values_are_rejected_with_the_field_value_and_fix(changes, message):
    with pytest.raises(ConfigError, match=message):
        GRPOConfig(**changes)


def test_rollout_fields_reach_the_rollout_engine_config():
    from mtrl_gym.trainers.grpo.factory import rollout_config

    cfg = GRPOConfig(unfinished_reward="-0.5", stop=['"'], assistant_prefix="<tool_call>", max_new_tokens=6)
    train = rollout_config(cfg)
    assert (train.unfinished_reward, train.sampling.stop, train.assistant_prefix) == (-0.5, ('"',), "<tool_call>")
    assert train.sampling.max_new_tokens == 6
    val = rollout_config(cfg, validation=True)  # validation serves with the same prefill and stops
    assert (val.assistant_prefix, val.sampling.stop) == ("<tool_call>", ('"',))
    assert rollout_config(GRPOConfig()).unfinished_reward == "min"


def test_unknown_keys_suggest_the_field():
    with pytest.raises(ConfigError, match=r"unknown config key\(s\): 'learning-rat' \(did you mean 'learning_rate'\?\)"):
        GRPOConfig.from_dict({"learning-rat": 1e-4})


def test_strings_are_converted_to_field_types():
    cfg = GRPOConfig.from_dict({"learning_rate": "1e-4", "group_size": "4", "full_finetune": "yes",
                                "max_turns": "none", "tis_cap": "None", "lora_target_modules": "[q_proj, v_proj]",
                                "loss_kwargs": '{"ratio_high": 1.28}', "adam_betas": "[0.9, 0.95]",
                                "max_epochs": "2", "train_tasks": "tasks.jsonl"})
    assert cfg.learning_rate == 1e-4 and cfg.group_size == 4 and cfg.full_finetune is True
    assert cfg.max_turns is None and cfg.tis_cap is None and cfg.max_epochs == 2.0
    assert cfg.lora_target_modules == ["q_proj", "v_proj"] and cfg.loss_kwargs == {"ratio_high": 1.28}
    assert cfg.adam_betas == [0.9, 0.95] and cfg.train_tasks == "tasks.jsonl"
    assert GRPOConfig(lora_target_modules="all-linear").lora_target_modules == "all-linear"


def test_wrapper_names_are_normalised():
    cfg = GRPOConfig(env_wrappers=["FormatPenalty", {"name": "WordleShaping", "kwargs": {"per_turn": True}}])
    assert cfg.env_wrappers == [{"name": "FormatPenalty", "kwargs": {}},
                                {"name": "WordleShaping", "kwargs": {"per_turn": True}}]


def test_yaml_toml_and_overrides_merge_in_order(tmp_path):
    (tmp_path / "a.yaml").write_text("group_size: 4\nlearning_rate: 1.0e-4\nloss: cispo\n")
    (tmp_path / "b.toml").write_text("[grpo]\ngroup_size = 6\nenv_wrappers = [{name = 'FormatPenalty'}]\n")
    cfg = GRPOConfig.load(tmp_path / "a.yaml", tmp_path / "b.toml", {"seed": 3},
                          overrides=["--max-steps=7", "loss_kwargs={\"ratio_high\": 3.0}"])
    assert (cfg.group_size, cfg.learning_rate, cfg.loss, cfg.seed, cfg.max_steps) == (6, 1e-4, "cispo", 3, 7)
    assert cfg.loss_kwargs == {"ratio_high": 3.0} and cfg.env_wrappers[0]["name"] == "FormatPenalty"


def test_saved_config_loads_back_identical(tmp_path):
    cfg = GRPOConfig(group_size=3, loss_kwargs={"ratio_high": 1.28}, env_wrappers=[{"name": "FormatPenalty"}],
                     max_turns=None, lora_target_modules=["q_proj"])
    for name in ("c.yaml", "c.json"):
        cfg.save(tmp_path / name)
        assert GRPOConfig.load(tmp_path / name) == cfg
    assert cfg.replace(seed=5).seed == 5 and cfg.seed == 0


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read config .*nope\.yaml.*preset name \(cpu"):
        GRPOConfig.load(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: a config file must hold a mapping"):
        read_config_file(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"an override must look like key=value, got 'seed'"):
        parse_override("seed")
    with pytest.raises(ConfigError, match=r"unknown preset 'cpus'\. Did you mean 'cpu'\?"):
        preset_path("cpus")


@pytest.mark.parametrize("name", ["cpu", "gpu"])
def test_presets_are_valid_configs(name):
    assert name in preset_names()
    cfg = GRPOConfig.load(name)
    assert cfg.model == "smollm2-135m"


def test_defaults_follow_the_service():
    cfg = GRPOConfig()
    assert (cfg.global_batch_size, cfg.group_size, cfg.lora_rank, cfg.lora_alpha, cfg.learning_rate) == \
        (128, 8, 32, 64.0, 4e-5)
    assert cfg.rollouts_per_step == 1024 and cfg.resolved_run_name == "grpo"


def test_every_field_is_documented_once():
    docs = field_docs()
    names = [f.name for f in dataclasses.fields(GRPOConfig)]
    assert sorted(docs) == sorted(names)
    assert all(len(docs[n]) > 15 for n in names)


def test_train_cli_has_a_flag_per_field_and_prints_the_resolved_config(capsys):
    from mtrl_gym.cli import build_parser, main

    parser = build_parser()
    help_text = parser._subparsers._group_actions[0].choices["train"].format_help()
    for f in dataclasses.fields(GRPOConfig):
        assert "--" + f.name.replace("_", "-") in help_text
    assert main(["train", "--config", "cpu", "--group-size", "3", "--no-progress", "--set", "seed=9",
                 "--print-config"]) == 0
    out = capsys.readouterr().out
    assert "group_size: 3" in out and "seed: 9" in out and "progress: false" in out and "max_turns: 1" in out


def test_train_cli_reports_bad_values_cleanly(capsys):
    from mtrl_gym.cli import main

    assert main(["train", "--group-size", "zero", "--print-config"]) == 2
    assert "mtrl-gym train: error: `group_size` must be an integer, got 'zero'" in capsys.readouterr().err


def test_config_json_is_plain(tmp_path):
    data = json.loads(json.dumps(GRPOConfig().to_dict()))
    assert data["adam_betas"] == [0.9, 0.999] and data["env_wrappers"] == []


def reference_table() -> str:
    """The config table of docs/training.md (regenerate: ``python tests/trainers/test_config.py``)."""
    docs = field_docs()
    rows = ["| field | default | meaning |", "| --- | --- | --- |"]
    for f in dataclasses.fields(GRPOConfig):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        default = dataclasses.asdict(default) if dataclasses.is_dataclass(default) else default  # nested settings
        text = docs[f.name].replace("|", "\\|")
        rows.append(f"| `{f.name}` | `{json.dumps(default)}` | {text} |")
    return "\n".join(rows)


def test_docs_config_table_matches_the_code():
    text = (ROOT / "docs" / "training.md").read_text()
    start, end = "<!-- config-table: start -->\n", "\n<!-- config-table: end -->"
    assert start in text and end in text
    table = text[text.index(start) + len(start):text.index(end)]
    assert table == reference_table(), "docs/training.md is stale: run python tests/trainers/test_config.py"


if __name__ == "__main__":  # rewrite the table in docs/training.md
    path = ROOT / "docs" / "training.md"
    text = path.read_text()
    start, end = "<!-- config-table: start -->\n", "\n<!-- config-table: end -->"
    head, rest = text.split(start, 1)
    tail = rest.split(end.lstrip("\n"), 1)[1]
    path.write_text(head + start + reference_table() + end + tail)
