"""What ``mtrl-gym train`` shows at the end: the held-out check before -> after in the bare
env's terms, where the run is, and a ready eval command; and that it never mixes two runs."""

from __future__ import annotations

import json
import shlex

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("yaml")

from tiny_models import build_tiny_llama  # noqa: E402

from mtrl_gym.trainers.grpo.config import GRPOConfig  # noqa: E402
from mtrl_gym.trainers.grpo.tracking import format_summary  # noqa: E402
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer  # noqa: E402

WORDS = [{"id": f"w{i}", "answer": a} for i, a in enumerate(["paste", "crane", "slate", "trace"])]


def test_the_summary_shows_the_held_out_check_before_and_after_in_the_bare_env_s_terms(
        tmp_path, chatml_tokenizer, capsys):
    config = GRPOConfig.load("cpu", {"output_dir": str(tmp_path / "run"), "tracking": {"tracker": "none"},
                                     "max_steps": 1, "global_batch_size": 2, "group_size": 2,
                                     "validation": {"max_tasks": 2, "every": 1}, "progress": True,
                                     "checkpoints": {"save_every": 0}, "lora": {"rank": 4, "alpha": 8.0},
                                     "autocast_dtype": None})
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                          train_tasks=WORDS, val_tasks=WORDS[:2])
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    out = capsys.readouterr().out
    vals = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
            if json.loads(line)["kind"] == "val"]
    before, after = vals[0], vals[-1]
    assert summary["first_val"]["step"] == 0 and summary["validation"]["last_step"] == 1
    assert "held-out check: 2 tasks x 2 episodes, temperature 1.0, at most 1 turn(s) per episode" in out
    for label, key, fmt in (("outcome reward", "val/info/episode/outcome_reward", "{:+.3f}"),
                            ("success rate", "val/success_rate", "{:.1%}"),
                            ("valid-guess rate", "val/info/episode/valid_guess_rate", "{:.1%}"),
                            ("new-word rate", "val/info/episode/new_word_rate", "{:.1%}"),
                            ("format-error rate", "val/format_error_rate", "{:.1%}"),
                            ("shaped reward", "val/reward_mean", "{:+.3f}")):
        line = next(x for x in out.splitlines() if x.strip().startswith(label))
        assert f"{fmt.format(before[key])} -> " in line and f"-> {fmt.format(after[key]):>8}" in line, line
    assert "the reward GRPO optimises, not a score" in out
    assert "100% of the held-out episodes stop at the turn or token limit" in out
    assert f"run folder: {tmp_path / 'run'}" in out


def test_the_mlflow_line_names_the_store(tmp_path):
    text = format_summary({"run_dir": "runs/x", "tracking_uri": "sqlite:////tmp/mlflow.db", "tracker_run_id": "abc"})
    assert "MLflow: mlflow ui --backend-store-uri sqlite:////tmp/mlflow.db" in text


class _FakeTrainer:
    """Stands in for GRPOTrainer in the command-line tests: writes what a 1-step run writes."""

    def __init__(self, config, resume=None):
        self.config, self.resume = config, resume

    def train(self):
        from pathlib import Path

        run = Path(self.config.output_dir)
        (run / "checkpoints" / "step_000001" / "adapter").mkdir(parents=True, exist_ok=True)
        with open(run / "metrics.jsonl", "a") as f:
            f.write('{"step": 1, "kind": "train"}\n')
        return {"run_dir": str(run), "steps": 1}

    def close(self):
        pass


def test_train_refuses_a_used_folder_and_prints_ready_eval_and_serve_commands(tmp_path, monkeypatch, capsys):
    from mtrl_gym.cli import main
    from mtrl_gym.trainers.grpo import trainer

    monkeypatch.setattr(trainer, "GRPOTrainer", _FakeTrainer)
    argv = ["train", "--config", "cpu", "--output-dir", str(tmp_path / "run"), "--tracking.tracker", "none",
            "--no-progress"]
    assert main(argv) == 0
    printed = [x.strip() for x in capsys.readouterr().out.splitlines()]
    command = next(x for x in printed if x.startswith("mtrl-gym eval"))
    adapter = str(tmp_path / "run" / "checkpoints" / "step_000001" / "adapter")
    assert shlex.split(command) == ["mtrl-gym", "eval", "mtrl/Wordle-v0", "--model", "smollm2-135m", "--adapter",
                                    adapter, "--limit", "8", "-n", "1", "--out", str(tmp_path / "run" / "eval")]
    serve = next(x for x in printed if x.startswith("mtrl-gym serve"))
    assert shlex.split(serve) == ["mtrl-gym", "serve", "--model", "smollm2-135m", "--adapter", adapter]
    assert main(argv) == 2
    assert "already holds a run (metrics.jsonl, checkpoints): continue it with --resume, replace it with " \
           "--overwrite, or give a fresh --output-dir" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count("\n") == 1  # the old run is gone, not mixed


def test_adding_lora_adapters_prints_no_transformers_future_warning(chatml_tokenizer):
    import warnings

    from mtrl_gym.trainers.grpo.policy import prepare_policy

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        prepare_policy(build_tiny_llama(len(chatml_tokenizer), seed=0), lora_rank=4, lora_alpha=8.0, seed=0)
