"""Training curves (run folder, metrics JSONL, MLflow), the reward-hacking flags, and MLflow logging."""

from __future__ import annotations

import json

import pytest
from eval_helpers import assert_valid_png

from mtrl_gym.error import ConfigError, DatasetError
from mtrl_gym.evaluation import EvalConfig, RunSpec, evaluate, load_training_curves, reward_hacking_flags
from mtrl_gym.evaluation.training import training_reward_rose, training_run_of


def write_run(folder, rewards, val_success, *, val_every=2):
    """A run folder like the GRPO trainer's: metrics.jsonl with train and val records."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for step, r in enumerate(rewards, start=1):
        lines.append({"step": step, "kind": "train", "rollout/reward_mean": r, "rollout/success_rate": 0.5})
        if step % val_every == 0:
            lines.append({"step": step, "kind": "val", "val/success_rate": val_success[step // val_every - 1]})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "config.yaml").write_text("model: tiny\nserving:\n  temperature: 1.0\nvalidation:\n  temperature: 0.0\n")
    return folder


HACKED = dict(rewards=[0.1, 0.2, 0.3, 0.5, 0.6, 0.8, 0.9, 1.0], val_success=[0.6, 0.5, 0.3, 0.2])
HEALTHY = dict(rewards=[0.1, 0.2, 0.3, 0.5, 0.6, 0.8, 0.9, 1.0], val_success=[0.2, 0.3, 0.5, 0.6])


def test_curves_from_a_trainer_run_folder(tmp_path):
    write_run(tmp_path / "run", **HACKED)
    curves = load_training_curves(tmp_path)  # found one level down
    assert (curves.reward_key, curves.success_key) == ("rollout/reward_mean", "val/success_rate")
    assert curves.get(curves.success_key) == [(2, 0.6), (4, 0.5), (6, 0.3), (8, 0.2)]
    assert training_reward_rose(curves)
    assert curves.settings == {"temperature": 1.0, "val_temperature": 0.0}  # from the run's config.yaml
    [flag] = reward_hacking_flags(curves)
    # Means of the last and the first quarter of the steps.
    assert flag["kind"] == "training_curve" and flag["reward_delta"] == pytest.approx(0.95 - 0.15)
    assert flag["success_delta"] == pytest.approx(0.2 - 0.6) and "reward-hacking" in flag["message"]


def test_no_flag_when_success_rises_with_reward_or_too_few_points(tmp_path):
    assert reward_hacking_flags(load_training_curves(write_run(tmp_path / "ok", **HEALTHY))) == []
    short = load_training_curves(write_run(tmp_path / "short", rewards=[0.1], val_success=[], val_every=5))
    assert short.success_key == "rollout/success_rate" and reward_hacking_flags(short) == []
    explicit = load_training_curves(tmp_path / "ok", success_key="rollout/success_rate")
    assert reward_hacking_flags(explicit) == []  # flat 0.5: nothing fell


def test_metrics_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="holds no metrics.jsonl"):
        load_training_curves(tmp_path)
    with pytest.raises(ConfigError, match="neither a file, a folder nor an MLflow run id"):
        load_training_curves(tmp_path / "nope")
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "r": 1}\n{"step": 2, "r"')  # a run still writing its last line
    assert load_training_curves(path).series == {"r": [(1, 1.0)]}
    path.write_text('{"step": 1, "r": 1}\nnot json\n{"step": 2, "r": 2}\n')
    with pytest.raises(DatasetError, match="line 2"):
        load_training_curves(path)
    path.write_text('{"r": 1}\n')
    with pytest.raises(DatasetError, match="numeric 'step'"):
        load_training_curves(path)
    path.write_text('{"step": 1, "r": 1}\n')
    with pytest.raises(ConfigError, match="has no metric 'loss'"):
        load_training_curves(path, reward_key="loss")


def test_training_run_of_an_adapter_checkpoint(tmp_path):
    run = write_run(tmp_path / "run", **HEALTHY)
    adapter = run / "checkpoints" / "step_000008" / "adapter"
    adapter.mkdir(parents=True)
    assert training_run_of(adapter) == run.resolve()
    assert training_run_of(tmp_path / "elsewhere") is None


def test_eval_with_a_hacked_training_run_flags_it_and_plots_the_curves(tmp_path, tiny_model, chatml_tokenizer):
    from mtrl_gym.rollout.samplers.hf import HFSampler

    run = write_run(tmp_path / "run", **HACKED)
    runs = [RunSpec("trained", sampler=HFSampler(tiny_model, chatml_tokenizer), tokenizer=chatml_tokenizer, serving={"max_new_tokens": 4}), RunSpec("solver", policy="solver")]
    result = evaluate("mtrl/Wordle-v0", runs, split="val", limit=2, training_run=run, out_dir=tmp_path / "out",
                      config=EvalConfig(n=1, max_episode_tokens=900, reference_run="solver"))
    kinds = {(f["run"], f["kind"]) for f in result.summary["flags"]}
    assert kinds == {("trained", "training_curve"), ("trained", "below_reference")}
    assert result.summary["training_run"]["reward_key"] == "rollout/reward_mean"
    assert_valid_png(result.files["plots/training_curves"])
    report = (tmp_path / "out" / "report" / "report.md").read_text()
    assert "**Warning** (trained, training_curve)" in report and "![training curves](training_curves.png)" in report
    assert "training settings: temperature 1, val_temperature 0" in report


def test_mlflow_training_run_and_eval_logging_share_one_store(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)  # MLflow puts artifacts under ./mlruns of the working directory
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("mtrl-gym")
    train = client.create_run(exp).info.run_id
    client.log_param(train, "validation.temperature", "0.0")
    client.log_batch(train, metrics=[Metric("rollout/reward_mean", r, 0, s) for s, r in enumerate(HACKED["rewards"])]
                     + [Metric("val/success_rate", v, 0, 2 * s) for s, v in enumerate(HACKED["val_success"])])
    curves = load_training_curves(f"mlflow:{train}", tracking_uri=uri)
    assert curves.get("val/success_rate") == [(0, 0.6), (2, 0.5), (4, 0.3), (6, 0.2)]
    assert curves.settings == {"val_temperature": 0.0}
    assert reward_hacking_flags(curves)
    with pytest.raises(ConfigError, match="not found"):
        load_training_curves("mlflow:" + "0" * 32, tracking_uri=uri)

    result = evaluate("mtrl/Wordle-v0", [RunSpec("solver", policy="solver"), RunSpec("random", policy="random")],
                      split="val", limit=2, config=EvalConfig(n=2), out_dir=tmp_path / "out", training_run=train,
                      mlflow=True, tracking_uri=uri)
    logged = result.summary["mlflow"]
    solver = client.get_run(logged["runs"]["solver"])
    assert solver.data.metrics["success_rate"] == 1.0 and solver.data.metrics["pass_at_2"] == 1.0
    assert solver.data.params["kind"] == "policy"
    assert solver.data.tags["mlflow.parentRunId"] == logged["parent_run_id"]
    parent = client.get_run(logged["parent_run_id"])
    assert parent.data.tags["mtrl_gym.training_run"] == train
    artifacts = {a.path for a in client.list_artifacts(logged["parent_run_id"])}
    assert {"summary.json", "eval_config.json", "report"} <= artifacts
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["mlflow"] == logged
    assert (tmp_path / "mlruns").is_dir()
