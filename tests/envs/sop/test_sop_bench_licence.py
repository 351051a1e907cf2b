"""The licence guard: every entry that can train refuses SOP-Bench, with its licence, before any model loads.

The trajectories are real ones: ``mtrl-gym eval --sop-bench`` on a synthetic domain folder
(``tests/sop/test_sop_bench.py``'s fixture) writes them; ``--model`` names a folder that
does not exist, so a refusal that came after model loading would be a different error.
"""

from __future__ import annotations

import glob

import pytest

from mtrl_gym.cli import main
from mtrl_gym.envs.external import refuse_training
from mtrl_gym.error import ConfigError
from test_sop_bench import write_domain

LICENCE = "CC BY-NC 4.0"
NO_MODEL = "/nonexistent/model-folder"


@pytest.fixture(scope="module")
def sop_bench_trajectories(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    write_domain(root)
    out = root / "eval"
    assert main(["eval", "--sop-bench", str(root), "--domain", "parcels", "--policy", "random", "-n", "2",
                 "--out", str(out), "--quiet", "--no-mlflow"]) == 0
    files = glob.glob(str(out / "**" / "trajectories" / "*.jsonl"), recursive=True) or \
        glob.glob(str(out / "**" / "*.jsonl"), recursive=True)
    files = [f for f in files if "trajector" in f]
    assert files, f"eval wrote no trajectories under {out}"
    return files[0]


def test_sft_on_trajectories_of_an_sop_bench_eval_is_refused_before_the_model_loads(sop_bench_trajectories,
                                                                                    tmp_path, capsys):
    from mtrl_gym.trainers.sft.config import SFTConfig
    from mtrl_gym.trainers.sft.data import load_demonstrations
    from mtrl_gym.trainers.sft.trainer import SFTTrainer

    with pytest.raises(ConfigError, match=LICENCE):
        load_demonstrations([sop_bench_trajectories])
    with pytest.raises(ConfigError, match=f"evaluation-only benchmark.*{LICENCE}"):
        SFTTrainer(SFTConfig(demos=[sop_bench_trajectories], model=NO_MODEL, output_dir=str(tmp_path / "api"),
                             max_steps=1))
    assert main(["sft", "--demos", sop_bench_trajectories, "--out", str(tmp_path / "cli"), "--max-steps", "1",
                 "--set", f"model={NO_MODEL}"]) != 0
    err = capsys.readouterr().err
    assert LICENCE in err and "mtrl/SOP-Bench-v0" in err and "no such model folder" not in err
    assert not list((tmp_path / "cli").glob("**/adapter*"))


def test_train_and_demos_on_the_sop_bench_env_are_refused_with_the_licence(tmp_path, capsys):
    from mtrl_gym.trainers.demos import DemoConfig
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    with pytest.raises(ConfigError, match=LICENCE):
        GRPOConfig(env="mtrl/SOP-Bench-v0", model=NO_MODEL)
    with pytest.raises(ConfigError, match=LICENCE):
        DemoConfig(env="mtrl/SOP-Bench-v0", model=NO_MODEL)
    assert main(["train", "--env", "mtrl/SOP-Bench-v0", "--output-dir", str(tmp_path / "t")]) != 0
    err = capsys.readouterr().err
    assert LICENCE in err and "unknown environment id" not in err
    assert main(["demos", "--env", "mtrl/SOP-Bench-v0", "--out", str(tmp_path / "d.jsonl")]) != 0
    err = capsys.readouterr().err
    assert LICENCE in err and "unknown environment id" not in err and not (tmp_path / "d.jsonl").exists()


def test_trainable_envs_and_rows_pass_the_guard():
    refuse_training("mtrl/SOP-DangerousGoods-v0", trajectories=[{"id": "sop-dangerous-goods-train-00000"}])
    with pytest.raises(ConfigError, match=LICENCE):
        refuse_training(trajectories=[{"id": "sop-bench-parcels-00000", "evaluation_only": True}])
