"""GRPOConfig: validation messages, files, presets, overrides, field docs, the train CLI's flags."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.config_base import parse_override, read_config_file  # noqa: E402
from mtrl_gym.trainers.grpo.config import GRPOConfig  # noqa: E402

field_docs, preset_names, preset_path = GRPOConfig.field_docs, GRPOConfig.preset_names, GRPOConfig.preset_path

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("changes, message", [
    ({"group_size": 0}, r"`group_size` must be an integer >= 1, got 0"),
    ({"global_batch_size": "many"}, r"`global_batch_size` must be an integer, got 'many'"),
    ({"learning_rate": -1.0}, r"`learning_rate` must be a finite number > 0, got -1.0"),
    ({"max_steps": None, "max_epochs": None}, r"set `max_steps` or `max_epochs` \(both are None"),
    ({"objective": {"loss": "ppo2"}}, r"unknown loss 'ppo2'\. Did you mean 'ppo', 'gspo'\? Valid: cispo, gspo, importance_sampling, ppo"),
    ({"objective": {"aggregation": "seq_mean"}}, r"unknown aggregation 'seq_mean'\. Did you mean 'seq_mean_token_mean'"),
    ({"objective": {"advantage": "grpo"}}, r"unknown advantage estimator 'grpo'"),
    ({"objective": {"loss": "cispo", "loss_kwargs": {"dual_clip": 3.0}}}, r"loss 'cispo' got unknown option\(s\) 'dual_clip'"),
    ({"objective": {"advantage": "grpo_passk"}}, r"advantage estimator 'grpo_passk' needs option\(s\) 'k'"),
    ({"objective": {"loss_kwargs": {"kl_coef": 0.1}}}, r"`objective.loss_kwargs` may not set \['kl_coef'\]: use the config fields"),
    ({"sampler": "vlm"}, r"`sampler` must be one of 'hf', 'vllm', 'openai', got 'vlm'\. Did you mean 'vllm'\?"),
    ({"packing": "packed"}, r"`packing` must be one of 'auto', 'shared_prefix', 'padding_free', 'sorted', got 'packed'"),
    ({"packing": "shared_prefix", "gradient_checkpointing": True},
     r"`packing` 'shared_prefix' cannot be combined with `gradient_checkpointing`"),
    ({"autocast_dtype": "bf16"}, r"`autocast_dtype` must be one of 'auto', 'bfloat16', 'float16', got 'bf16'"),
    ({"objective": {"tis_cap": 0.5}}, r"`objective.tis_cap` must be >= 1 or None \(off\), got 0.5"),
    ({"lora": {"dropout": 1.0}}, r"`lora.dropout` must be in \[0, 1\), got 1.0"),
    ({"lora": {"target_modules": []}}, r"`lora.target_modules` must be 'all-linear' or a non-empty list"),
    ({"optimizer": {"adam_betas": [0.9]}},
     r"`optimizer.adam_betas` must be two numbers in \[0, 1\), e.g. \[0.9, 0.999\], got \[0.9\]"),
    ({"updates_per_step": 9, "global_batch_size": 2, "group_size": 4},
     r"`updates_per_step` \(9\) must be <= the rollouts per step \(global_batch_size \* group_size = 8\)"),
    ({"env_wrappers": [{"name": "WordleShaping", "args": {}}]},
     r"`env_wrappers\[0\]` has unknown key\(s\) \['args'\]; a wrapper entry has only 'name' and 'kwargs'"),
    ({"episode": {"max_turns": 0}}, r"`episode.max_turns` must be an integer >= 1 or None, got 0"),
    ({"serving": {"temperature": float("nan")}}, r"`serving.temperature` must be a finite number >= 0"),
    ({"tracking": {"tracker": "wandb"}}, r"`tracking.tracker` must be one of 'mlflow', 'none', got 'wandb'"),
    ({"lora": {"full_finetune": "maybe"}}, r"`lora.full_finetune` must be true or false, got 'maybe'"),
    ({"optimizer": {"max_grad_norm": "0"}}, r"`optimizer.max_grad_norm` must be a number > 0 or None, got 0.0"),
    ({"episode": {"unfinished_reward": "max"}},
     r'`episode.unfinished_reward` must be "min", "sum" or a finite number, got \'max\''),
    ({"serving": {"stop": ["", "x"]}}, r"`serving.stop` must be a list of non-empty strings, got \['', 'x'\]"),
    ({"validation": {"group_size": 4}}, r"`validation.group_size` is 4 but `validation.temperature` is 0: greedy "
                                        r"rollouts of a task are identical, so pass@k would equal pass@1"),
])
def test_bad_values_are_rejected_with_the_field_value_and_fix(changes, message):
    with pytest.raises(ConfigError, match=message):
        GRPOConfig(**changes)


def test_rollout_fields_reach_the_rollout_engine_config():
    from mtrl_gym.rollout.sources.local import rollout_config

    cfg = GRPOConfig(episode={"unfinished_reward": "-0.5"},
                     serving={"stop": ['"'], "assistant_prefix": "<tool_call>", "max_new_tokens": 6})
    train = rollout_config(cfg)
    assert (train.unfinished_reward, train.sampling.stop, train.assistant_prefix) == (-0.5, ('"',), "<tool_call>")
    assert train.sampling.max_new_tokens == 6
    val = rollout_config(cfg, validation=True)  # validation serves with the same prefill and stops
    assert (val.assistant_prefix, val.sampling.stop) == ("<tool_call>", ('"',))
    assert rollout_config(GRPOConfig()).unfinished_reward == "min"


def test_unknown_keys_suggest_the_field():
    with pytest.raises(ConfigError, match=r"unknown config key\(s\): 'learning-rat' \(did you mean 'learning_rate'\?\)"):
        GRPOConfig.from_dict({"learning-rat": 1e-4})
    with pytest.raises(ConfigError, match=r"`lora` has no field 'rnak' \(did you mean 'rank'\?\)"):
        GRPOConfig.from_dict({"lora": {"rnak": 8}})


#: Settings that were top-level fields before the setting groups, and their place now.
MOVED = {"lora_rank": "lora.rank", "lora_alpha": "lora.alpha", "lora_dropout": "lora.dropout",
         "lora_target_modules": "lora.target_modules", "lora_layers": "lora.layers",
         "full_finetune": "lora.full_finetune", "lr_schedule": "optimizer.lr_schedule",
         "warmup_steps": "optimizer.warmup_steps", "min_lr_ratio": "optimizer.min_lr_ratio",
         "weight_decay": "optimizer.weight_decay", "adam_betas": "optimizer.adam_betas",
         "adam_eps": "optimizer.adam_eps", "max_grad_norm": "optimizer.max_grad_norm",
         "max_turns": "episode.max_turns", "max_episode_tokens": "episode.max_tokens",
         "reply_mode": "episode.reply_mode", "env_workers": "episode.env_workers",
         "episode_time_budget_s": "episode.time_budget_s", "unfinished_reward": "episode.unfinished_reward",
         "loss": "objective.loss", "loss_kwargs": "objective.loss_kwargs", "aggregation": "objective.aggregation",
         "advantage": "objective.advantage", "advantage_kwargs": "objective.advantage_kwargs",
         "kl_coef": "objective.kl_coef", "old_logprobs": "objective.old_logprobs", "tis_cap": "objective.tis_cap",
         "drop_zero_variance_groups": "objective.drop_zero_variance_groups",
         "train_on_failed": "objective.train_on_failed", "repeat_penalty": "collapse.repeat_penalty",
         "dominance_penalty": "collapse.dominance_penalty", "dominance_threshold": "collapse.dominance_threshold",
         "collapse_warning_share": "collapse.warning_share", "val_every": "validation.every",
         "val_max_tasks": "validation.max_tasks", "val_group_size": "validation.group_size",
         "val_temperature": "validation.temperature", "val_env_wrappers": "validation.env_wrappers",
         "tracker": "tracking.tracker", "tracking_uri": "tracking.uri", "experiment": "tracking.experiment",
         "log_trajectories": "tracking.log_trajectories", "traces": "tracking.traces",
         "save_every": "checkpoints.save_every", "keep_checkpoints": "checkpoints.keep"}


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_flat_key_names_its_place_in_a_group(old, new):
    assert new in GRPOConfig.field_names()
    with pytest.raises(ConfigError, match=rf"unknown config key\(s\): '{old}' \(did you mean '{new}'\?\)"):
        GRPOConfig.load({old: 1})
    with pytest.raises(ConfigError, match=rf"'{old}' \(did you mean '{new}'\?\)"):
        GRPOConfig.load(overrides=[f"{old}=1"])


def test_an_old_flag_names_its_new_spelling(capsys):
    from mtrl_gym.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--lora-rank", "8", "--print-config"])
    assert "mtrl-gym train: error: unrecognized arguments: --lora-rank 8 (--lora-rank: did you mean --lora.rank?)" \
        in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--val-every", "0", "--no-full-finetune", "--print-config"])
    err = capsys.readouterr().err
    assert "--val-every: did you mean --validation.every?" in err
    assert "--no-full-finetune: did you mean --no-lora.full-finetune?" in err


def test_at_most_40_top_level_fields_the_rest_in_documented_groups():
    top = [f.name for f in dataclasses.fields(GRPOConfig)]
    assert len(top) <= 40, top
    assert {"env", "model", "learning_rate", "max_steps", "global_batch_size", "group_size"} <= set(top)
    assert set(GRPOConfig.groups()) == {"episode", "lora", "optimizer", "serving", "objective", "collapse",
                                        "validation", "tracking", "checkpoints"}
    docs = field_docs()
    nested = [name for name in GRPOConfig.field_names() if "." in name]
    assert len(nested) > len(top) and all(len(docs[name]) > 15 for name in nested)
    for group in GRPOConfig.groups().values():  # each group class says what it holds
        assert group.__doc__ and len(group.__doc__) > 30


def test_sft_shares_the_setting_groups_with_its_own_defaults():
    from mtrl_gym.trainers.sft.config import SFTConfig

    for name in ("lora", "optimizer", "checkpoints"):
        assert SFTConfig.groups()[name] is GRPOConfig.groups()[name]
    assert issubclass(GRPOConfig.groups()["tracking"], SFTConfig.groups()["tracking"])
    sft = SFTConfig(lora={"rank": 8})
    assert (sft.lora.rank, sft.lora.alpha, sft.optimizer.lr_schedule) == (8, 32.0, "cosine")
    assert SFTConfig.load({"optimizer": {"warmup_steps": 1}}).optimizer.min_lr_ratio == 0.1
    assert GRPOConfig(lora={"rank": 8}).lora.alpha == 64.0
    cfg = GRPOConfig.load("cpu").replace(lora={"rank": 4})
    assert (cfg.lora.rank, cfg.lora.alpha) == (4, 32.0)  # replace changes only the field it names


def test_strings_are_converted_to_field_types():
    cfg = GRPOConfig.from_dict({"learning_rate": "1e-4", "group_size": "4",
                                "lora": {"full_finetune": "yes", "target_modules": "[q_proj, v_proj]"},
                                "episode": {"max_turns": "none"},
                                "objective": {"tis_cap": "None", "loss_kwargs": '{"ratio_high": 1.28}'},
                                "optimizer": {"adam_betas": "[0.9, 0.95]"},
                                "max_epochs": "2", "train_tasks": "tasks.jsonl"})
    assert cfg.learning_rate == 1e-4 and cfg.group_size == 4 and cfg.lora.full_finetune is True
    assert cfg.episode.max_turns is None and cfg.objective.tis_cap is None and cfg.max_epochs == 2.0
    assert cfg.lora.target_modules == ["q_proj", "v_proj"] and cfg.objective.loss_kwargs == {"ratio_high": 1.28}
    assert cfg.optimizer.adam_betas == [0.9, 0.95] and cfg.train_tasks == "tasks.jsonl"
    assert GRPOConfig(lora={"target_modules": "all-linear"}).lora.target_modules == "all-linear"


def test_wrapper_names_are_normalised():
    cfg = GRPOConfig(env_wrappers=["FormatPenalty", {"name": "WordleShaping", "kwargs": {"per_turn": True}}])
    assert cfg.env_wrappers == [{"name": "FormatPenalty", "kwargs": {}},
                                {"name": "WordleShaping", "kwargs": {"per_turn": True}}]


def test_yaml_toml_and_overrides_merge_in_order(tmp_path):
    (tmp_path / "a.yaml").write_text("group_size: 4\nlearning_rate: 1.0e-4\nobjective:\n  loss: cispo\n")
    (tmp_path / "b.toml").write_text("[grpo]\ngroup_size = 6\nenv_wrappers = [{name = 'FormatPenalty'}]\n")
    cfg = GRPOConfig.load(tmp_path / "a.yaml", tmp_path / "b.toml", {"seed": 3},
                          overrides=["--max-steps=7", "objective.loss_kwargs={\"ratio_high\": 3.0}"])
    assert (cfg.group_size, cfg.learning_rate, cfg.objective.loss, cfg.seed, cfg.max_steps) == (6, 1e-4, "cispo", 3, 7)
    assert cfg.objective.loss_kwargs == {"ratio_high": 3.0} and cfg.env_wrappers[0]["name"] == "FormatPenalty"


def test_saved_config_loads_back_identical(tmp_path):
    cfg = GRPOConfig(group_size=3, objective={"loss_kwargs": {"ratio_high": 1.28}},
                     env_wrappers=[{"name": "FormatPenalty"}], episode={"max_turns": None},
                     lora={"target_modules": ["q_proj"], "rank": 4}, tracking={"traces": {"per_step": 1}},
                     validation={"env_wrappers": ["FormatPenalty"]})
    for name in ("c.yaml", "c.json"):
        cfg.save(tmp_path / name)
        assert GRPOConfig.load(tmp_path / name) == cfg
    assert cfg.replace(seed=5).seed == 5 and cfg.seed == 0
    from mtrl_gym.trainers.sft.config import SFTConfig

    sft = SFTConfig(demos=["d.jsonl"], lora={"layers": 12}, checkpoints={"keep": 0})
    sft.save(tmp_path / "sft.yaml")
    assert SFTConfig.load(tmp_path / "sft.yaml") == sft


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
    assert (cfg.global_batch_size, cfg.group_size, cfg.lora.rank, cfg.lora.alpha, cfg.learning_rate) == \
        (128, 8, 32, 64.0, 4e-5)
    assert cfg.rollouts_per_step == 1024 and cfg.resolved_run_name == "grpo"


def test_every_field_is_documented_once():
    docs = field_docs()
    names = [f.name for f in dataclasses.fields(GRPOConfig)]
    names += [f"{group}.{f.name}" for group, cls in GRPOConfig.groups().items() for f in dataclasses.fields(cls)]
    names += [f"tracking.traces.{f.name}" for f in dataclasses.fields(GRPOConfig.groups()["tracking"].groups()["traces"])]
    assert sorted(docs) == sorted(names) == sorted(GRPOConfig.field_names())
    assert all(len(docs[n]) > 15 for n in names)


def test_train_cli_has_a_flag_per_field_and_prints_the_resolved_config(capsys, monkeypatch):
    from mtrl_gym.cli import build_parser, main

    monkeypatch.setenv("COLUMNS", "80")  # an ordinary terminal: --help fits in one screen of 60 lines
    parser = build_parser()
    short = parser._subparsers._group_actions[0].choices["train"].format_help()
    assert len(short.splitlines()) <= 60
    for flag in ("--learning-rate", "--max-steps", "--global-batch-size", "--group-size", "--lora.rank", "--set"):
        assert flag + " " in short, flag
    groups = short.split("setting groups", 1)[1]
    for name in GRPOConfig.groups():  # one line per group, its fields after its name
        assert f"\n  {name} " in groups, name
    with pytest.raises(SystemExit):
        main(["train", "--help-all"])
    help_text = capsys.readouterr().out
    for name in field_docs():
        assert "--" + name.replace("_", "-") + " " in help_text, name
    assert main(["train", "--config", "cpu", "--group-size", "3", "--no-progress", "--set", "seed=9",
                 "--print-config"]) == 0
    out = capsys.readouterr().out
    assert "group_size: 3" in out and "seed: 9" in out and "progress: false" in out and "  max_turns: 1" in out
    assert main(["train", "--config", "cpu", "--lora.rank", "4", "--no-lora.full-finetune", "--tracking.traces.per-step",
                 "0", "--set", "validation.every=3", "--print-config"]) == 0
    cfg = GRPOConfig.from_dict(__import__("yaml").safe_load(capsys.readouterr().out))
    assert (cfg.lora.rank, cfg.lora.alpha, cfg.lora.full_finetune) == (4, 32.0, False)
    assert (cfg.tracking.traces.per_step, cfg.validation.every, cfg.validation.max_tasks) == (0, 3, 32)


def test_train_cli_reports_bad_values_cleanly(capsys):
    from mtrl_gym.cli import main

    assert main(["train", "--group-size", "zero", "--print-config"]) == 2
    assert "mtrl-gym train: error: `group_size` must be an integer, got 'zero'" in capsys.readouterr().err


def test_a_source_is_named_once_with_its_own_options():
    assert GRPOConfig(source="ray").source == {"name": "ray", "address": None, "workers": 2, "worker_retries": 0}
    cfg = GRPOConfig.load("cpu", overrides=["source.name=async", "source.max_staleness=2",
                                            'source.source={"name": "ray", "workers": 4}'])
    assert cfg.source == {"name": "async", "max_staleness": 2, "source": {"name": "ray", "workers": 4}}
    with pytest.raises(ConfigError, match=r"cannot set `source.workers`: `source` is 'ray', not a mapping"):
        GRPOConfig.load({"source": "ray"}, overrides=["source.workers=3"])
    with pytest.raises(ConfigError, match=r"`source` 'agent' has no option\(s\) \['workers'\]; its options: target, "
                                          r"segments"):
        GRPOConfig(source={"name": "agent", "target": "a.py:run", "workers": 2})
    with pytest.raises(ConfigError, match=r"not another 'async'"):
        GRPOConfig(source={"name": "async", "source": {"name": "async"}})


def test_a_later_file_merges_into_a_presets_serving_group(tmp_path):
    (tmp_path / "hot.yaml").write_text("serving:\n  temperature: 0.5\n")
    cfg = GRPOConfig.load("cpu", tmp_path / "hot.yaml", overrides=["serving.top_p=0.9"])
    preset = GRPOConfig.load("cpu")
    assert (cfg.serving.temperature, cfg.serving.top_p) == (0.5, 0.9)
    assert (cfg.serving.assistant_prefix, cfg.serving.stop, cfg.serving.max_new_tokens) == (
        preset.serving.assistant_prefix, ['"'], 6)


def test_config_json_is_plain(tmp_path):
    data = json.loads(json.dumps(GRPOConfig().to_dict()))
    assert data["optimizer"]["adam_betas"] == [0.9, 0.999] and data["env_wrappers"] == []


def _doc_commands(prefix: str) -> list[tuple[str, list[str]]]:
    """``(page, argv)`` of every ``prefix ...`` command of the README and docs: fenced bash lines
    (continuations joined, comments cut) and inline code spans."""
    import re
    import shlex

    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        lines = [line.split("  #")[0].strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)
                 for line in block.replace("\\\n", " ").splitlines()]
        lines += re.findall(r"(?<!`)`(" + re.escape(prefix) + r" [^`]+)`(?!`)", text)
        found += [(page.name, shlex.split(line)[1:]) for line in lines if line.startswith(prefix + " ")]
    return found


def test_every_train_and_sft_command_of_the_docs_resolves(capsys):
    """The commands a reader copies from the README and docs use the fields' current names."""
    import argparse

    from mtrl_gym.cli import build_parser, main
    from mtrl_gym.cli.sft import resolve_config

    skip = {"--resume", "--help", "--help-all"}  # a run to continue; help exits
    trains = [(page, argv) for page, argv in _doc_commands("mtrl-gym train") if not skip & set(argv)]
    assert len(trains) >= 15
    for page, argv in trains:
        assert main([*argv, "--print-config"]) == 0, (page, argv, capsys.readouterr().err)
    sfts = [(page, argv) for page, argv in _doc_commands("mtrl-gym sft") if not skip & set(argv)]
    assert sfts
    for page, argv in sfts:
        args = build_parser().parse_args(argv)
        assert isinstance(args, argparse.Namespace) and resolve_config(args).max_steps > 0, (page, argv)
    capsys.readouterr()


def test_the_yaml_examples_of_the_training_docs_load():
    import re

    import yaml

    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "training.md").read_text(encoding="utf-8"), re.S)
    assert blocks
    for block in blocks:
        values = yaml.safe_load(block)
        cfg = GRPOConfig.load("cpu", values)
        if "lora" in values:  # the my_run.yaml example
            assert cfg.lora.rank == 8 and cfg.lora.alpha == 16 and cfg.validation.temperature == 1.0  # the preset's
        if "source" in values:  # the dynamic-sampling example
            assert cfg.source["name"] == values["source"]["name"] and cfg.lora.rank == GRPOConfig.load("cpu").lora.rank


def reference_table() -> str:
    """The config table of docs/training.md (regenerate: ``python tests/trainers/test_config.py``)."""
    docs = field_docs()
    rows = ["| field | default | meaning |", "| --- | --- | --- |"]

    def add(cls, prefix):
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            text = docs[prefix + f.name].replace("|", "\\|")
            if f.name in cls.groups():
                rows.append(f"| `{prefix}{f.name}` | (group) | {text} |")
                add(cls.groups()[f.name], f"{prefix}{f.name}.")
            else:
                rows.append(f"| `{prefix}{f.name}` | `{json.dumps(default)}` | {text} |")

    add(GRPOConfig, "")
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
