"""Issue item 6: checkpoints that cannot lie (manifest, fsync, fallback, stale temp folders, SIGTERM)."""

from __future__ import annotations

import json
import os
import signal

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from test_trainer import InterruptingSampler, make_trainer  # noqa: E402 - after the skips above

from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.trainers.grpo import checkpoint as ckpt  # noqa: E402


@pytest.fixture
def two_checkpoints(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer, max_steps=2, checkpoints={"save_every": 1})
    trainer.train()
    return tmp_path / "run"


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_every_checkpoint_has_a_manifest_of_sizes_and_hashes(two_checkpoints):
    path = ckpt.latest_checkpoint(two_checkpoints)
    manifest = json.loads((path / ckpt.MANIFEST_FILE).read_text())
    assert manifest["step"] == 2 and ckpt.STATE_FILE in manifest["files"]
    assert "adapter/adapter_model.safetensors" in manifest["files"]
    entry = manifest["files"][ckpt.STATE_FILE]
    assert entry["size"] == (path / ckpt.STATE_FILE).stat().st_size and len(entry["sha256"]) == 64
    assert ckpt.verify_checkpoint(path) is None


@pytest.mark.parametrize("damaged", [ckpt.STATE_FILE, "adapter/adapter_model.safetensors", ckpt.MANIFEST_FILE])
def test_resume_falls_back_to_the_last_good_checkpoint(two_checkpoints, tmp_path, chatml_tokenizer, damaged):
    newest = two_checkpoints / "checkpoints" / "step_000002"
    if damaged == ckpt.MANIFEST_FILE:
        (newest / damaged).unlink()  # a save interrupted before its manifest
    else:
        _truncate(newest / damaged)
    with pytest.warns(RuntimeWarning, match=r"step_000002 is damaged .*; falling back"):
        assert ckpt.latest_checkpoint(two_checkpoints).name == "step_000001"
    with pytest.warns(RuntimeWarning, match="falling back"):
        resumed = make_trainer(tmp_path, chatml_tokenizer, max_steps=2, resume=two_checkpoints)
    assert resumed.step == 1


def test_a_damaged_checkpoint_given_by_name_is_a_clear_error(two_checkpoints, tmp_path, chatml_tokenizer):
    newest = two_checkpoints / "checkpoints" / "step_000002"
    _truncate(newest / ckpt.STATE_FILE)
    with pytest.raises(ConfigError, match=r"step_000002 is damaged \(trainer_state\.pt has \d+ bytes, the manifest "
                                          r"says \d+\); the newest good checkpoint is .*step_000001"):
        make_trainer(tmp_path, chatml_tokenizer, resume=newest)


def test_same_size_corruption_is_caught_by_the_hash(two_checkpoints):
    path = two_checkpoints / "checkpoints" / "step_000002" / ckpt.STATE_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert "SHA-256" in ckpt.verify_checkpoint(path.parent)


def test_stale_temp_folders_of_dead_processes_are_removed(tmp_path, chatml_tokenizer):
    root = tmp_path / "run" / "checkpoints"
    root.mkdir(parents=True)
    dead = _dead_pid()
    (root / f".step_000003.tmp-{dead}").mkdir()
    (root / f".step_000003.tmp-{os.getppid()}").mkdir()  # a live process: maybe still saving
    make_trainer(tmp_path, chatml_tokenizer, max_steps=1).train()
    names = sorted(p.name for p in root.iterdir())
    assert names == [f".step_000003.tmp-{os.getppid()}", "step_000001"]


def test_files_are_fsynced_before_the_rename(tmp_path, chatml_tokenizer, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    make_trainer(tmp_path, chatml_tokenizer, max_steps=1).train()
    names = {os.path.basename(p) for p in synced}
    assert {ckpt.STATE_FILE, "adapter_model.safetensors", ckpt.MANIFEST_FILE, "checkpoints"} <= names


class TerminatingSampler(InterruptingSampler):
    """Sends itself SIGTERM (what `docker stop` sends) on its ``at``-th sample call."""

    def sample(self, requests):
        self.calls += 1
        if self.calls == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        return super(InterruptingSampler, self).sample(requests)


def test_sigterm_checkpoints_and_writes_a_summary_like_ctrl_c(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer, max_steps=3)
    trainer.sampler = TerminatingSampler(trainer.policy, chatml_tokenizer, at=2, seed=0)
    trainer.source.sampler = trainer.sampler
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert signal.getsignal(signal.SIGTERM) is before
    run = tmp_path / "run"
    assert ckpt.latest_checkpoint(run).name == "step_000001"
    assert json.loads((run / "summary.json").read_text())["status"] == "KILLED"


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_a_fallback_resume_trims_mlflow_with_metrics_jsonl(tmp_path, chatml_tokenizer):
    """Resumed from step 1 of a run that had logged step 2, the redone step 2 is recorded once: in
    metrics.jsonl and in the MLflow run the resumed run logs to (the issue found two MLflow records)."""
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = make_trainer(tmp_path, chatml_tokenizer, max_steps=2, checkpoints={"save_every": 1},
                         tracking={"tracker": "mlflow", "uri": uri, "experiment": "trim"})
    old_id = first.train()["tracker_run_id"]
    _truncate(tmp_path / "run" / "checkpoints" / "step_000002" / ckpt.STATE_FILE)
    with pytest.warns(RuntimeWarning, match="falling back"):
        resumed = make_trainer(tmp_path, chatml_tokenizer, max_steps=2, checkpoints={"save_every": 1},
                               tracking={"tracker": "mlflow", "uri": uri, "experiment": "trim"}, resume=tmp_path / "run")
    assert resumed.step == 1
    summary = resumed.train()
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2]
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.get_run(summary["tracker_run_id"])
    assert [m.step for m in client.get_metric_history(run.info.run_id, "train/loss")] == [1, 2]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "rollout/reward_mean")] == [1, 2]
    assert run.info.status == "FINISHED" and run.data.params["lora.rank"] == "4"
    assert run.data.tags["mtrl_gym.resumed_from"] == old_id and run.info.run_name == client.get_run(old_id).info.run_name
    assert {"config.yaml", "summary.json", "trajectories"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    old = client.get_run(old_id)
    assert old.info.lifecycle_stage == "deleted" and old.data.tags["mtrl_gym.superseded_by"] == run.info.run_id
    experiment = client.get_experiment_by_name("trim").experiment_id
    assert [r.info.run_id for r in client.search_runs([experiment])] == [run.info.run_id]


def test_a_resume_with_nothing_beyond_the_checkpoint_keeps_the_mlflow_run(tmp_path, chatml_tokenizer):
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = make_trainer(tmp_path, chatml_tokenizer, max_steps=1, checkpoints={"save_every": 1},
                         tracking={"tracker": "mlflow", "uri": uri})
    run_id = first.train()["tracker_run_id"]
    again = make_trainer(tmp_path, chatml_tokenizer, max_steps=2, checkpoints={"save_every": 1},
                         tracking={"tracker": "mlflow", "uri": uri},
                         resume=tmp_path / "run")
    assert again.train()["tracker_run_id"] == run_id
    client = mlflow.MlflowClient(tracking_uri=uri)
    assert [m.step for m in client.get_metric_history(run_id, "train/loss")] == [1, 2]
