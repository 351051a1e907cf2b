"""Async rollouts with bounded staleness on a tiny random model, through the real GRPO trainer.

``max_staleness: 0`` must be the synchronous run bit for bit (token ids, log-probs,
rewards and the trained parameters); ``max_staleness: 2`` must never train on a batch more
than 2 versions old (read back from the trajectories' own tags); the per-step ``async/*``
metrics land in metrics.jsonl.
"""

from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from tiny_models import build_tiny_llama  # noqa: E402
from tiny_runs import train_and_read  # noqa: E402
from toy_envs import VowelEnv  # noqa: E402

from mtrl_gym.error import ConfigError, RolloutError  # noqa: E402
from mtrl_gym.rollout.trajectory import Trajectory, load_jsonl  # noqa: E402
from mtrl_gym.rollout.sources.asynchronous import PolicyShadow, RolloutProducer, fresh_groups  # noqa: E402
from mtrl_gym.trainers.grpo.config import GRPOConfig  # noqa: E402
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer  # noqa: E402

TASKS = [{"id": f"t{i}", "turns": 1 + i % 2, "letters": "aeiou"[: 1 + i % 5]} for i in range(8)]
ASYNC_KEYS = ("async/policy_version", "async/staleness_mean", "async/staleness_max", "async/dropped",
              "async/queue_depth", "async/trainer_wait_s", "async/sampler_idle_s", "async/sample_s")


def run(tmp_path, name, tokenizer, steps=3, **overrides):
    values = dict(output_dir=str(tmp_path / name), global_batch_size=2, group_size=4, max_steps=steps,
                  serving={"max_new_tokens": 6}, episode={"max_tokens": 256}, lora={"rank": 4, "alpha": 8.0},
                  learning_rate=5e-2, tracking={"tracker": "none", "log_trajectories": 8}, progress=False,
                  validation={"every": 2, "max_tasks": 2}, checkpoints={"save_every": 0}, seed=0)
    return train_and_read(GRPOConfig.load(values, overrides), tokenizer, env=VowelEnv, train_tasks=TASKS,
                          val_tasks=TASKS[:2], steps=steps)


def test_max_staleness_0_is_the_synchronous_run_bit_for_bit(tmp_path, chatml_tokenizer):
    sync_params, sync_trajs, sync_records = run(tmp_path, "sync", chatml_tokenizer)
    async_params, async_trajs, async_records = run(tmp_path, "async", chatml_tokenizer,
                                                   source={"name": "async", "max_staleness": 0})
    for step in sync_trajs:
        a, b = sync_trajs[step], async_trajs[step]
        assert [t.token_ids for t in a] == [t.token_ids for t in b]
        assert [t.logprobs for t in a] == [t.logprobs for t in b]
        assert [t.reward for t in a] == [t.reward for t in b]
        assert all(t.policy_version == step - 1 for t in b)  # sampled by the weights of the step before
    assert any("lora_B" in n and float(p.abs().sum()) > 0 for n, p in sync_params.items())  # B starts at 0
    assert all(torch.equal(sync_params[n], async_params[n]) for n in sync_params)
    sync_val = [r["val/reward_mean"] for r in sync_records if r["kind"] == "val"]
    async_val = [r["val/reward_mean"] for r in async_records if r["kind"] == "val"]
    assert sync_val == async_val and len(sync_val) == 3  # steps 0, 2 and 3
    train = [r for r in async_records if r["kind"] == "train"]
    assert all(r["async/staleness_max"] == 0 and r["async/dropped"] == 0 for r in train)


def test_max_staleness_2_never_trains_on_older_batches_and_logs_async_metrics(tmp_path, chatml_tokenizer):
    _, trajs, records = run(tmp_path, "k2", chatml_tokenizer, steps=5, source={"name": "async", "max_staleness": 2},
                            validation={"every": 0})
    train = [r for r in records if r["kind"] == "train"]
    assert len(train) == 5
    for r in train:
        for key in ASYNC_KEYS:
            assert key in r, key
        step = r["step"] - 1  # the step that trained on the batch (records carry the step count after it)
        tags = {t.policy_version for t in trajs[r["step"]]}
        assert len(tags) == 1  # one version per batch: weights change only between batches
        (version,) = tags
        assert 0 <= step - version <= 2
        assert r["async/policy_version"] == version and r["async/staleness_max"] == step - version
        assert r["async/dropped"] == 0 and 0 <= r["async/queue_depth"] <= 2
        assert r["async/trainer_wait_s"] >= 0 and r["async/sampler_idle_s"] >= 0 and r["async/sample_s"] > 0


def test_async_run_resumes_from_its_checkpoint_at_the_batch_it_trained_last(tmp_path, chatml_tokenizer):
    _, full, _ = run(tmp_path, "full", chatml_tokenizer, steps=3, source={"name": "async", "max_staleness": 0},
                     validation={"every": 0})
    run(tmp_path, "part", chatml_tokenizer, steps=2, source={"name": "async", "max_staleness": 0},
        validation={"every": 0})
    config = GRPOConfig.load(str(tmp_path / "part" / "config.yaml"), overrides=["max_steps=3"])
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                          env=VowelEnv, train_tasks=TASKS, val_tasks=TASKS[:2], resume=tmp_path / "part")
    try:
        trainer.train()
    finally:
        trainer.close()
    resumed = load_jsonl(tmp_path / "part" / "trajectories" / "step_000003.jsonl")
    assert [t.token_ids for t in resumed] == [t.token_ids for t in full[3]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=6), st.integers(1, 3), st.integers(0, 3), st.integers(0, 6))
def test_fresh_groups_keeps_whole_groups_no_older_than_the_bound(versions, group_size, bound, step):
    batch = [Trajectory(f"t{g}", group_id=g, policy_version=v) for g, v in enumerate(versions)
             for _ in range(group_size)]
    kept, dropped, ages = fresh_groups(batch, step=step, group_size=group_size, max_staleness=bound)
    assert len(kept) + dropped == len(batch) and len(ages) == len(kept)
    assert all(a <= bound for a in ages)
    assert {t.group_id for t in kept} == {g for g, v in enumerate(versions) if step - v <= bound}
    assert dropped % group_size == 0


def test_async_config_values_are_checked():
    with pytest.raises(ConfigError, match=r"`source.max_staleness` must be an integer >= 0, got -1"):
        GRPOConfig(source={"name": "async", "max_staleness": -1})
    with pytest.raises(ConfigError, match=r"unknown rollout source 'rey'.*'ray'"):
        GRPOConfig(source={"name": "rey"})
    with pytest.raises(ConfigError, match=r"`source.worker_retries` must be 0 .* or 1 .*got 2"):
        GRPOConfig(source={"name": "ray", "worker_retries": 2})
    with pytest.raises(ConfigError, match=r"`source.workers` must be an integer >= 1, got 0"):
        GRPOConfig(source={"name": "ray", "workers": 0})
    with pytest.raises(ConfigError, match=r"'ray' cannot be combined with sampler 'vllm'.*sampler=openai"):
        GRPOConfig(source={"name": "ray"}, sampler="vllm")
    with pytest.raises(ConfigError, match=r"'ray' cannot be combined with sampler 'vllm'.*sampler=openai"):
        GRPOConfig(source={"name": "async", "source": {"name": "ray"}}, sampler="vllm")
    with pytest.raises(ConfigError, match=r"`source` 'local' has no option\(s\) \['max_staleness'\]"):
        GRPOConfig(source={"name": "local", "max_staleness": 1})


def test_a_failing_producer_raises_rollout_error_in_the_trainer_thread(chatml_tokenizer):
    model = build_tiny_llama(len(chatml_tokenizer), seed=0)

    def collect(tasks, step):
        raise OSError("disk full")

    producer = RolloutProducer(collect, lambda: ([None], {}), shadow=PolicyShadow(model), push=lambda m, v: None,
                               max_staleness=1, start_step=0, last_step=3)
    producer.publish(model, 0)
    with pytest.raises(RolloutError, match="not running: start"):
        producer.take(0)
    producer.start()
    with pytest.raises(RolloutError, match="the rollout producer failed: OSError: disk full"):
        producer.take(0)
    producer.close()


@pytest.mark.parametrize("staleness, expected", [(0, "sampler"), (1, "recompute")])
def test_stale_batches_recompute_the_old_logprobs(tmp_path, chatml_tokenizer, staleness, expected):
    """The trainer asks the source, not the config, whether the sampling log-probs are the policy's."""
    config = GRPOConfig(output_dir=str(tmp_path / "run"), global_batch_size=2, group_size=2, max_steps=1,
                        serving={"max_new_tokens": 4}, lora={"rank": 4, "alpha": 8.0}, tracking={"tracker": "none"},
                        progress=False, validation={"every": 0}, source={"name": "async", "max_staleness": staleness})
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                          env=VowelEnv, train_tasks=TASKS, val_tasks=[])
    try:
        assert trainer.source.samples_off_policy is (staleness > 0)
        assert trainer.settings.old_logprobs == expected
    finally:
        trainer.close()
