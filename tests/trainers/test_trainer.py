"""GRPO trainer on a tiny random model: updates, failures, accounting, interrupts, tracking.

The environment here scores the fraction of vowels in the model's text, so a random model's
groups almost never tie and every step has a learning signal. Helpers at the top are shared
with test_checkpoint.py.
"""

from __future__ import annotations

import json
import math
import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from tiny_models import build_tiny_llama  # noqa: E402
from toy_envs import VowelEnv  # noqa: E402

from mtrl_gym.trainers.grpo.batching import build_sequence, make_micro_batches, token_logprobs  # noqa: E402
from mtrl_gym.trainers.grpo.config import GRPOConfig  # noqa: E402
from mtrl_gym.trainers.grpo.policy import LRSchedule, prepare_policy  # noqa: E402
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer  # noqa: E402
from mtrl_gym.trainers.grpo.update import UpdateSettings, policy_update  # noqa: E402
from mtrl_gym.rollout.samplers.base import SampleResult, Sampler  # noqa: E402
from mtrl_gym.rollout.samplers.hf import HFSampler  # noqa: E402

TASKS = [{"id": f"t{i}", "turns": 1, "letters": "aeiou"[: 1 + i % 5]} for i in range(8)]


def tiny_config(tmp_path, **overrides) -> GRPOConfig:
    """The tiny run's config; ``overrides`` as fields (a group's mapping changes only the fields it names)."""
    values = dict(output_dir=str(tmp_path / "run"), global_batch_size=2, group_size=4, max_steps=2,
                  serving={"max_new_tokens": 6}, episode={"max_tokens": 256}, lora={"rank": 4, "alpha": 8.0},
                  learning_rate=5e-2, tracking={"tracker": "none", "log_trajectories": 2}, progress=False,
                  validation={"every": 0}, checkpoints={"save_every": 0}, seed=0)
    return GRPOConfig.load(values, overrides)


def make_trainer(tmp_path, tokenizer, *, sampler=None, model=None, resume=None, **overrides) -> GRPOTrainer:
    config = tiny_config(tmp_path, **overrides)
    model = model if model is not None else build_tiny_llama(len(tokenizer), seed=0)
    return GRPOTrainer(config, model=model, tokenizer=tokenizer, sampler=sampler, env=VowelEnv,
                       train_tasks=TASKS, val_tasks=TASKS[:2], resume=resume)


def params(model, *, lora: bool) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if ("lora_" in n) == lora}


# ---------------------------------------------------------------------------- one step


def test_one_step_changes_lora_weights_and_leaves_base_weights_untouched(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer)
    base, lora = params(trainer.policy, lora=False), params(trainer.policy, lora=True)
    metrics = trainer.train_step()
    after_base, after_lora = params(trainer.policy, lora=False), params(trainer.policy, lora=True)
    assert all(torch.equal(base[n], after_base[n]) for n in base)
    changed = [n for n in lora if not torch.equal(lora[n], after_lora[n])]
    # B starts at 0, so the first step moves B only (A's gradient is B^T times something)
    assert changed and all("lora_B" in n for n in changed)
    assert math.isfinite(metrics["train/loss"]) and metrics["train/optimizer_steps"] == 1
    assert metrics["train/grad_norm"] > 0
    assert trainer.step == 1


def test_step_metrics_cover_rewards_tokens_and_phases(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer)
    m = trainer.train_step()
    for key in ("rollout/reward_mean", "rollout/reward_std", "rollout/success_rate", "rollout/pass_at_1",
                "rollout/pass_at_4", "rollout/turns_mean", "rollout/format_error_rate", "rollout/failure_rate",
                "rollout/tokens_prefill", "rollout/tokens_sampled", "train/trained_tokens", "train/loss",
                "train/approx_kl_old", "train/clip_frac_high", "train/grad_norm", "train/entropy",
                "train/zero_variance_groups", "train/logprob_mismatch_mean", "time/rollout_s", "time/update_s"):
        assert key in m, key
    assert m["rollout/episodes"] == 8 and m["rollout/tokens_sampled"] <= 8 * 6  # max_new_tokens=6
    assert 0 < m["train/trained_tokens"] <= m["rollout/tokens_sampled"]
    assert m["train/sequences"] == 8 - 4 * m["train/zero_variance_groups"]
    # with one update per step the old policy is the current one: ratio exactly 1, nothing clipped
    assert m["train/ratio_mean"] == 1.0 and m["train/clip_frac_low"] == 0 == m["train/clip_frac_high"]
    # the HF sampler shares the weights, so its log-probs match the trainer's up to float rounding
    assert m["train/logprob_mismatch_max"] < 1e-4
    assert (tmp_path / "run" / "metrics.jsonl").is_file()
    # the phases of the step: the env's calls inside the rollout, the optimiser inside the update,
    # and logging after the metrics (its seconds in the run totals and last_step_seconds)
    assert 0 < m["time/env_s"] < m["time/rollout_s"] and 0 < m["time/optimizer_s"] < m["time/update_s"]
    assert set(trainer.last_step_seconds) >= {"rollout", "advantages", "update", "sync", "step", "logging"}
    assert trainer.totals.seconds["logging"] == trainer.last_step_seconds["logging"] > 0
    saved = (tmp_path / "run" / "trajectories" / "step_000001.jsonl").read_text().splitlines()
    assert len(saved) == 2 and {json.loads(line)["group_id"] for line in saved} == {0, 1}


class FlakySampler(Sampler):
    """Fails every request of sample 1 of each group; the rest go to a real sampler."""

    name = "flaky"

    def __init__(self, inner: HFSampler):
        self.inner = inner
        self.eos_token_ids = inner.eos_token_ids

    def sample(self, requests):
        results = self.inner.sample(requests)
        return [SampleResult([], [], "error", error="backend hiccup") if r.session_id.endswith("-1") else res
                for r, res in zip(requests, results)]

    def update_policy(self, model=None, *, adapter_path=None, version=None):
        self.inner.update_policy(model, version=version)


def test_a_failing_rollout_does_not_stop_the_step(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer)
    trainer.sampler = FlakySampler(HFSampler(trainer.policy, chatml_tokenizer))
    trainer.source.sampler = trainer.sampler
    lora = params(trainer.policy, lora=True)
    m = trainer.train_step()
    assert m["rollout/failure_rate"] == 0.25 and m["rollout/reward_min"] == -1.0  # the env's minimum reward
    assert math.isfinite(m["train/loss"]) and m["train/optimizer_steps"] == 1
    assert any(not torch.equal(v, params(trainer.policy, lora=True)[n]) for n, v in lora.items())


def test_zero_variance_groups_are_counted_and_skipped(tmp_path, chatml_tokenizer):
    class ConstantEnv(VowelEnv):
        def step(self, action):
            obs, _, done, trunc, info = super().step(action)
            return obs, 0.5, done, trunc, info

    config = tiny_config(tmp_path)
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer)), tokenizer=chatml_tokenizer,
                          env=ConstantEnv, train_tasks=TASKS, val_tasks=None)
    lora = params(trainer.policy, lora=True)
    m = trainer.train_step()
    assert m["train/zero_variance_groups"] == 2 and m["train/zero_variance_frac"] == 1.0
    assert m["train/sequences"] == 0 and m["train/optimizer_steps"] == 0
    assert all(torch.equal(v, params(trainer.policy, lora=True)[n]) for n, v in lora.items())


@pytest.mark.parametrize("overrides", [
    {"objective": {"loss": "cispo", "aggregation": "seq_mean_token_mean"}},
    {"objective": {"loss": "gspo", "advantage": "rloo", "kl_coef": 0.1}},
    {"objective": {"advantage": "group_based_per_turn", "old_logprobs": "recompute"}, "updates_per_step": 2,
     "autocast_dtype": "bfloat16"},
    {"objective": {"loss": "importance_sampling", "aggregation": "token_sum_norm", "old_logprobs": "sampler"},
     "packing": "padding_free", "updates_per_step": 2},
])
def test_losses_estimators_and_layouts_train(tmp_path, chatml_tokenizer, overrides):
    tasks = [{"id": f"t{i}", "turns": 2} for i in range(4)]
    config = tiny_config(tmp_path, episode={"max_turns": 2}, **overrides)
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer)), tokenizer=chatml_tokenizer,
                          env=VowelEnv, train_tasks=tasks, val_tasks=None)
    lora = params(trainer.policy, lora=True)
    m = trainer.train_step()
    assert math.isfinite(m["train/loss"]) and m["train/optimizer_steps"] == overrides.get("updates_per_step", 1)
    assert any(not torch.equal(v, params(trainer.policy, lora=True)[n]) for n, v in lora.items())
    if overrides["objective"].get("kl_coef"):
        assert m["train/kl_ref"] == pytest.approx(0.0, abs=1e-6)  # B = 0 before the first update: no KL yet


def test_full_finetune_changes_base_weights(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer, lora={"full_finetune": True}, learning_rate=1e-3)
    before = params(trainer.policy, lora=False)
    trainer.train_step()
    after = params(trainer.policy, lora=False)
    assert any(not torch.equal(before[n], after[n]) for n in before)


# ---------------------------------------------------------------------------- update maths


def _sequences(tokenizer, n=6, seed=0):
    """Sequences 0-3 share their 4-token prompt (a GRPO group), the others do not."""
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(3, len(tokenizer), (4,), generator=g).tolist()
    out = []
    for i in range(n):
        length = 8 + 3 * i
        ids = torch.randint(3, len(tokenizer), (length,), generator=g).tolist()
        if i < 4:
            ids[:4] = prompt
        mask = [0] * 4 + [1] * (length - 6) + [0, 1]
        logprobs = (-torch.rand(length, generator=g)).tolist()
        out.append(build_sequence(ids, mask, logprobs, float(i % 3) - 1.0, index=i))
    return out


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "token_sum_norm"])
@pytest.mark.parametrize("packing", ["padding_free", "sorted", "shared_prefix"])
def test_micro_batching_gives_the_full_batch_gradient(chatml_tokenizer, aggregation, packing):
    def run(micro_tokens):
        policy = prepare_policy(build_tiny_llama(len(chatml_tokenizer)), lora_rank=4, lora_alpha=8, seed=0)
        with torch.no_grad():  # non-zero B so that every adapter weight gets a gradient
            for n, p in policy.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.1, generator=torch.Generator().manual_seed(len(n)))
        # plain SGD: the step is the gradient itself (Adam's first step, g / (|g| + eps), would blow a
        # float32 rounding difference in a near-zero gradient up to a whole step)
        opt = torch.optim.SGD([p for p in policy.parameters() if p.requires_grad], lr=1e-2)
        settings = UpdateSettings(aggregation=aggregation, micro_batch_tokens=micro_tokens, packing=packing,
                                  max_episode_tokens=32, max_grad_norm=None)
        m = policy_update(policy, opt, LRSchedule(1e-2), _sequences(chatml_tokenizer), settings, step=0)
        return params(policy, lora=True), m

    whole, m1 = run(10_000)
    pieces, m2 = run(24)
    assert m2["micro_batches"] > m1["micro_batches"]
    assert m1["loss"] == pytest.approx(m2["loss"], rel=1e-5)
    assert m1["grad_norm"] == pytest.approx(m2["grad_norm"], rel=1e-4)
    for n in whole:
        torch.testing.assert_close(whole[n], pieces[n], rtol=1e-4, atol=1e-6)


def test_packed_and_padded_log_probs_match_one_sequence_at_a_time(chatml_tokenizer):
    model = build_tiny_llama(len(chatml_tokenizer))
    seqs = _sequences(chatml_tokenizer)
    alone = {s.index: token_logprobs(model, make_micro_batches([s], 10_000, "sorted")[0], temperature=0.7)[0]
             for s in seqs}
    for packing in ("padding_free", "sorted", "shared_prefix"):
        micro_batches = make_micro_batches(seqs, 40, packing)
        if packing == "shared_prefix":  # the group's prompt minus its last token is run once per micro-batch
            assert sorted(mb.prefix_length for mb in micro_batches if mb.prefix_ids is not None) == [3, 3]
        for micro in micro_batches:
            logp, _ = token_logprobs(model, micro, temperature=0.7)
            for seq, part in zip(micro.sequences, torch.split(logp, micro.counts)):
                torch.testing.assert_close(part, alone[seq.index], rtol=0, atol=1e-5)


def test_trainer_log_probs_equal_the_samplers(chatml_tokenizer):
    """Same weights, same temperature: recomputed log-probs are the sampling log-probs."""
    model = build_tiny_llama(len(chatml_tokenizer))
    trainer_tok = chatml_tokenizer
    from mtrl_gym.rollout.samplers.base import SampleRequest, SamplingParams

    prompt = trainer_tok.apply_chat_template([{"role": "user", "content": "hello"}], add_generation_prompt=True,
                                             tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    [res] = HFSampler(model, trainer_tok).sample([SampleRequest(prompt, SamplingParams(temperature=0.7,
                                                                                       max_new_tokens=8, seed=3))])
    ids = prompt + res.token_ids
    seq = build_sequence(ids, [0] * len(prompt) + [1] * len(res.token_ids), [0.0] * len(prompt) + res.logprobs, 1.0)
    logp, _ = token_logprobs(model, make_micro_batches([seq], 10_000, "sorted")[0], temperature=0.7)
    torch.testing.assert_close(logp, torch.tensor(res.logprobs), rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------- the loop


def test_train_runs_validates_checkpoints_and_summarises(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer, max_steps=2, validation={"every": 1},
                           checkpoints={"save_every": 1, "keep": 1})
    summary = trainer.train()
    run = tmp_path / "run"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["kind"]) for r in records] == [(0, "val"), (1, "train"), (1, "val"), (2, "train"),
                                                         (2, "val")]
    assert "val/success_rate" in records[0] and "val/pass_at_1" in records[0]
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["step_000002"]
    assert (run / "config.yaml").is_file() and (run / "summary.json").is_file()
    assert summary["steps"] == 2 and summary["episodes"] == 16 and summary["optimizer_steps"] == 2
    assert summary["tokens"]["trained"] > 0 and summary["tokens"]["sampled"] >= summary["tokens"]["trained"]
    assert set(summary["seconds"]) >= {"rollout", "update", "validation"}


def test_max_epochs_limits_the_run(tmp_path, chatml_tokenizer):
    trainer = make_trainer(tmp_path, chatml_tokenizer, max_steps=None, max_epochs=0.5)
    assert trainer.total_steps == 2  # 8 tasks, 2 per step: half an epoch is 2 steps


class InterruptingSampler(HFSampler):
    """Raises KeyboardInterrupt (like Ctrl-C) on its ``at``-th sample call."""

    def __init__(self, *args, at: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls, self.at = 0, at

    def sample(self, requests):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return super().sample(requests)


def test_ctrl_c_checkpoints_the_last_completed_step(tmp_path, chatml_tokenizer):
    config = tiny_config(tmp_path, max_steps=3)
    model = build_tiny_llama(len(chatml_tokenizer))
    trainer = GRPOTrainer(config, model=model, tokenizer=chatml_tokenizer, env=VowelEnv, train_tasks=TASKS,
                          val_tasks=None, sampler=None)
    trainer.sampler = InterruptingSampler(trainer.policy, chatml_tokenizer, at=2, seed=0)
    trainer.source.sampler = trainer.sampler
    with pytest.raises(KeyboardInterrupt):
        trainer.train()  # single-turn episodes: one sample call per step, so step 2's rollout is interrupted
    state = torch.load(tmp_path / "run" / "checkpoints" / "step_000001" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 1 and state["data"] == {"epoch": 0, "position": 2}  # step 2's tasks not consumed
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "KILLED"


def test_mlflow_tracker_logs_to_a_local_store_offline(tmp_path, chatml_tokenizer, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    trainer = make_trainer(tmp_path, chatml_tokenizer, max_steps=1,
                           tracking={"tracker": "mlflow", "experiment": "test-exp"})
    summary = trainer.train()
    import mlflow

    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()  # all in the run folder
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'run' / 'mlflow.db'}")
    run = client.get_run(summary["tracker_run_id"])
    assert run.info.status == "FINISHED" and run.data.params["lora.rank"] == "4"
    assert "rollout/reward_mean" in run.data.metrics and "train/loss" in run.data.metrics
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "summary.json", "trajectories"} <= artifacts


@pytest.mark.slow
def test_cpu_preset_trains_the_embedded_model_on_wordle(tmp_path):
    """One small step of the CPU preset on the real SmolLM2-135M-Instruct and Wordle-v0."""
    config = GRPOConfig.load("cpu", overrides=[
        f"output_dir={tmp_path / 'run'}", "global_batch_size=1", "group_size=2", "max_steps=1", "episode.max_turns=1",
        "serving.max_new_tokens=16", "validation.every=0", "tracking.tracker=none", "progress=false", "lora.rank=4",
        # fp32 training pass: with `auto`, a CPU with native bf16 trains in bf16 while the sampler
        # runs fp32, and the log-prob check below measures that precision gap, not shared weights.
        "autocast_dtype=none"])
    trainer = GRPOTrainer(config)
    summary = trainer.train()
    m = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert summary["steps"] == 1 and m["rollout/episodes"] == 2 and m["rollout/tokens_sampled"] > 0
    assert m["rollout/tokens_prefill"] > 100  # the system prompt and the task
    assert (tmp_path / "run" / "checkpoints" / "step_000001" / "adapter" / "adapter_model.safetensors").is_file()
    if m["train/sequences"]:
        assert m["train/logprob_mismatch_max"] < 1e-3  # HF sampler and trainer share the weights


def test_collapse_warning_names_the_action_without_the_format_prefill(tmp_path, chatml_tokenizer, capsys):
    """The warning shows what the model wrote: the serving's prefill, the same in every action,
    is cut off, not the action's own start (it once printed 'ord", "arguments": ...')."""
    prefix = "My Answer Is: "
    trainer = make_trainer(tmp_path, chatml_tokenizer, serving={"max_new_tokens": 6, "assistant_prefix": prefix},
                           collapse={"warning_share": 0.01})
    trainer.train_step()
    shown = re.search(r"of the sampled actions are '(.*)' \(over 1%\)", capsys.readouterr().err)
    assert shown is not None
    # before the fix: the action's last 40 characters, here the whole "my answer is: ..." line
    assert not shown.group(1).startswith(("my answer", "..."))
