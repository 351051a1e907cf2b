"""Checkpoints: exact resume, peft-loadable adapters, atomic writes, pruning, the CLI."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from tiny_models import build_tiny_llama  # noqa: E402
from test_trainer import TASKS, VowelEnv, make_trainer, params, tiny_config  # noqa: E402

from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.trainers.grpo import checkpoint as ckpt  # noqa: E402
from mtrl_gym.trainers.grpo.config import GRPOConfig  # noqa: E402
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer  # noqa: E402

# dropout and two optimiser steps per batch make the RNG, the optimiser state and the
# mini-batch order all matter for the next step
RESUME_SETTINGS = dict(lora={"dropout": 0.1}, updates_per_step=2, optimizer={"lr_schedule": "cosine", "warmup_steps": 1})


def test_resumed_run_reproduces_the_uninterrupted_next_step_exactly(tmp_path, chatml_tokenizer):
    straight = make_trainer(tmp_path / "a", chatml_tokenizer, max_steps=2, **RESUME_SETTINGS)
    straight.train()

    first = make_trainer(tmp_path / "b", chatml_tokenizer, max_steps=1, **RESUME_SETTINGS)
    first.train()
    resumed = make_trainer(tmp_path / "b", chatml_tokenizer, max_steps=2, resume=tmp_path / "b" / "run",
                           **RESUME_SETTINGS)
    assert resumed.step == 1
    resumed.train()

    a, b = params(straight.policy, lora=True), params(resumed.policy, lora=True)
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    opt_a, opt_b = straight.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    assert all(torch.equal(opt_a[k]["exp_avg"], opt_b[k]["exp_avg"]) for k in opt_a)

    def step2(run):
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        return next(r for r in records if r["step"] == 2 and r["kind"] == "train")

    ra, rb = step2(tmp_path / "a" / "run"), step2(tmp_path / "b" / "run")
    assert ra["rollout/reward_mean"] == rb["rollout/reward_mean"] and ra["train/loss"] == rb["train/loss"]


def test_ctrl_c_then_resume_equals_the_straight_run(tmp_path, chatml_tokenizer):
    from test_trainer import InterruptingSampler

    straight = make_trainer(tmp_path / "a", chatml_tokenizer, max_steps=2)
    straight.train()
    interrupted = make_trainer(tmp_path / "b", chatml_tokenizer, max_steps=2)
    interrupted.sampler = InterruptingSampler(interrupted.policy, chatml_tokenizer, at=2, seed=0)
    interrupted.source.sampler = interrupted.sampler
    with pytest.raises(KeyboardInterrupt):
        interrupted.train()
    resumed = make_trainer(tmp_path / "b", chatml_tokenizer, max_steps=2, resume=tmp_path / "b" / "run")
    resumed.train()
    a, b = params(straight.policy, lora=True), params(resumed.policy, lora=True)
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_adapter_checkpoint_loads_with_peft(tmp_path, chatml_tokenizer):
    from peft import PeftModel

    trainer = make_trainer(tmp_path, chatml_tokenizer, max_steps=1)
    trainer.train()
    path = ckpt.latest_checkpoint(tmp_path / "run")
    assert path.name == "step_000001"
    assert {p.name for p in (path / "adapter").iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}
    assert (path / "config.yaml").is_file()
    loaded = PeftModel.from_pretrained(build_tiny_llama(len(chatml_tokenizer)), str(path / "adapter"))
    mine = params(trainer.policy, lora=True)
    theirs = params(loaded, lora=True)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[n], theirs[n]) for n in mine)


def test_full_finetune_checkpoint_round_trips(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer, max_steps=1, lora={"full_finetune": True}, learning_rate=1e-3)
    trainer.train()
    path = ckpt.latest_checkpoint(tmp_path / "run")
    assert (path / "model" / "config.json").is_file() and (path / "model" / "tokenizer.json").is_file()
    fresh = make_trainer(tmp_path, chatml_tokenizer, max_steps=1, lora={"full_finetune": True}, learning_rate=1e-3,
                         resume=path)
    a, b = params(trainer.policy, lora=False), params(fresh.policy, lora=False)
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_pruning_keeps_the_newest_and_ignores_half_written_folders(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer, max_steps=3, checkpoints={"save_every": 1, "keep": 2})
    trainer.train()
    root = tmp_path / "run" / "checkpoints"
    (root / ".step_000009.tmp-1").mkdir()  # a crash while saving
    (root / "step_000008").mkdir()  # no trainer_state.pt: incomplete
    assert [p.name for p in ckpt.list_checkpoints(tmp_path / "run")] == ["step_000002", "step_000003"]


def test_resume_without_a_checkpoint_is_a_clear_error(tmp_path, chatml_tokenizer):
    with pytest.raises(ConfigError, match="no checkpoint found in"):
        make_trainer(tmp_path, chatml_tokenizer, resume=tmp_path / "nothing")


def test_resume_with_other_lora_settings_is_a_clear_error(tmp_path, chatml_tokenizer):
    make_trainer(tmp_path, chatml_tokenizer, max_steps=1).train()
    with pytest.raises((ConfigError, RuntimeError), match="size mismatch|does not fit"):
        make_trainer(tmp_path, chatml_tokenizer, lora={"rank": 8}, resume=tmp_path / "run")


def test_cli_trains_and_resumes_a_local_model(tmp_path, chatml_tokenizer, capsys):
    from mtrl_gym.cli import main
    from mtrl_gym.datasets import write_tasks

    model_dir = tmp_path / "tiny"
    build_tiny_llama(len(chatml_tokenizer)).save_pretrained(model_dir)
    chatml_tokenizer.save_pretrained(model_dir)
    write_tasks([{"prompt": "p", "answer": w, "id": w} for w in ("paste", "crane", "slate", "riser")],
                tmp_path / "train.jsonl")
    common = ["train", "--model", str(model_dir), "--output-dir", str(tmp_path / "run"), "--train-tasks",
              str(tmp_path / "train.jsonl"), "--val-tasks", str(tmp_path / "train.jsonl"), "--validation.every", "0",
              "--tracking.tracker", "none", "--no-progress", "--global-batch-size", "2", "--group-size", "2",
              "--episode.max-turns", "1", "--serving.max-new-tokens", "4", "--set", "lora.rank=4"]
    assert main(common + ["--max-steps", "1"]) == 0
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "lora:\n  full_finetune: false\n  rank: 4\n" in saved and "max_new_tokens: 4" in saved
    assert GRPOConfig.load(tmp_path / "run" / "config.yaml").lora.rank == 4  # the saved config loads back
    assert "max_new_tokens: 4" in (tmp_path / "run" / "serving.yaml").read_text()  # what eval --adapter reads
    assert main(["train", "--resume", str(tmp_path / "run"), "--max-steps", "2", "--no-progress"]) == 0
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    assert ckpt.latest_checkpoint(tmp_path / "run").name == "step_000002"


def test_trainer_state_holds_everything_resume_needs(tmp_path, chatml_tokenizer):
    trainer = GRPOTrainer(tiny_config(tmp_path, max_steps=1), model=build_tiny_llama(len(chatml_tokenizer)),
                          tokenizer=chatml_tokenizer, env=VowelEnv, train_tasks=TASKS, val_tasks=None)
    trainer.train()
    state = torch.load(ckpt.latest_checkpoint(tmp_path / "run") / ckpt.STATE_FILE, weights_only=False)
    assert {"step", "optimizer", "schedule", "data", "rng", "totals"} <= set(state)
    assert set(state["rng"]) >= {"torch", "numpy", "python"}
    assert state["data"] == {"epoch": 0, "position": 2} and state["schedule"] == {"step_count": 1}
