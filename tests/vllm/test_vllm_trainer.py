"""GRPO training with the vLLM sampler: the engine follows the policy after every step.

The trainer recomputes the old log-probs of each sampled token and logs how far the
sampler's differ (``train/logprob_mismatch_mean``). With an fp32 engine that receives the
updated policy after every step, they agree to float rounding at every step; an engine that
is not synced drifts away from the policy as soon as the first update lands.
"""

from __future__ import annotations

import math

import pytest
from toy_envs import VowelEnv

pytest.importorskip("vllm.sampling_params", reason="vllm is not installed (see scripts/install_vllm_cpu.sh)")
pytest.importorskip("peft")

from mtrl_gym.trainers.grpo.config import GRPOConfig  # noqa: E402
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer  # noqa: E402

pytestmark = pytest.mark.vllm

TASKS = [{"id": f"t{i}"} for i in range(4)]


def _trainer(tmp_path, tiny_dir, sampler) -> GRPOTrainer:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = GRPOConfig(output_dir=str(tmp_path / "run"), global_batch_size=2, group_size=4, max_steps=3,
                        serving={"max_new_tokens": 8}, episode={"max_tokens": 256}, lora={"rank": 4, "alpha": 8.0},
                        learning_rate=0.2, tracking={"tracker": "none", "log_trajectories": 0}, progress=False,
                        validation={"every": 0}, checkpoints={"save_every": 0}, seed=0, sampler="vllm")
    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    return GRPOTrainer(config, model=model, tokenizer=AutoTokenizer.from_pretrained(tiny_dir), sampler=sampler,
                       env=VowelEnv, train_tasks=TASKS, val_tasks=TASKS[:1])


@pytest.mark.parametrize("sync", ["weights", "lora"])
def test_synced_engine_samples_from_the_updated_policy(make_sampler, tiny_dir, tmp_path, sync):
    sampler = make_sampler(sync=sync)
    trainer = _trainer(tmp_path, tiny_dir, sampler)
    steps = [trainer.train_step() for _ in range(3)]
    assert sampler.policy_version == 3
    for m in steps:
        assert math.isfinite(m["train/loss"]) and m["rollout/tokens_sampled"] > 0
        # fp32 engine, policy pushed after every step: sampler and trainer agree at every step
        assert m["train/logprob_mismatch_mean"] < 1e-3, m["train/logprob_mismatch_mean"]
    assert any(m["train/grad_norm"] > 0 for m in steps)


def test_an_unsynced_engine_is_seen_as_a_mismatch(make_sampler, tiny_dir, tmp_path):
    sampler = make_sampler(sync="weights")
    sampler.update_policy = lambda *args, **kwargs: None  # the engine keeps the initial weights
    trainer = _trainer(tmp_path, tiny_dir, sampler)
    first, *later = [trainer.train_step() for _ in range(3)]
    assert first["train/logprob_mismatch_mean"] < 1e-3  # nothing updated yet
    # learning_rate 0.2 moves the policy far from the engine's weights; the trainer notices
    assert max(m["train/logprob_mismatch_mean"] for m in later) > 1e-2
