"""Ray rollout workers, for real: a local Ray cluster (2 CPUs, no dashboard, nothing written to
the home folder), actors with their own copy of a tiny random model, the local engine as the
reference, and a worker killed in the middle of a step.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
ray = pytest.importorskip("ray")

from tiny_models import build_tiny_llama  # noqa: E402
from toy_envs import HoldEnv, VowelEnv  # noqa: E402

from mtrl_gym.rollout.samplers.hf import HFSampler  # noqa: E402
from mtrl_gym.trainers.grpo.checkpoint import list_checkpoints  # noqa: E402
from mtrl_gym.trainers.grpo.config import GRPOConfig  # noqa: E402
from mtrl_gym.rollout.sources.local import make_rollout_engine  # noqa: E402
from mtrl_gym.trainers.grpo.policy import prepare_policy  # noqa: E402
from mtrl_gym.trainers.grpo.trainer import GRPOTrainer  # noqa: E402
from mtrl_gym.rollout.sources.factory import parse_source  # noqa: E402
from mtrl_gym.rollout.sources.ray_workers import RayRolloutEngine, start_local_ray  # noqa: E402

TASKS = [{"id": f"t{i}", "turns": 1 + i % 2, "letters": "aeiou"[: 1 + i % 5]} for i in range(8)]
HOME_RAY = Path.home() / ".ray"


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A local 2-CPU Ray cluster for this module; its files live under a pytest temp folder."""
    if ray.is_initialized():
        pytest.skip("another Ray session is running in this process")
    had_home_ray = HOME_RAY.exists()
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_USAGE_STATS_ENABLED")}
    temp = tmp_path_factory.mktemp("ray")
    # The workers import this project, and the test helpers (the env factory) by name.
    paths = [str(Path(__file__).resolve().parents[3]), str(Path(__file__).resolve().parents[2])]
    pythonpath = os.pathsep.join(paths + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    start_local_ray(2, temp_dir=str(temp), runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
    yield
    ray.shutdown()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    assert had_home_ray or not HOME_RAY.exists(), "Ray wrote into ~/.ray"


def config(tmp_path, **overrides) -> GRPOConfig:
    values = dict(output_dir=str(tmp_path / "run"), global_batch_size=3, group_size=2, max_steps=2,
                  serving={"max_new_tokens": 6}, episode={"max_tokens": 256}, lora={"rank": 4, "alpha": 8.0},
                  learning_rate=5e-2, tracking={"tracker": "none", "log_trajectories": 6}, progress=False,
                  validation={"every": 0}, checkpoints={"save_every": 0}, seed=0, source={"name": "ray", "workers": 2})
    return GRPOConfig.load(values, overrides)


def tiny_policy(tokenizer, cfg):
    torch.set_num_threads(1)
    return prepare_policy(build_tiny_llama(len(tokenizer), seed=0), full_finetune=False, lora_rank=cfg.lora.rank,
                          lora_alpha=cfg.lora.alpha, lora_dropout=0.0, lora_target_modules="all-linear",
                          gradient_checkpointing=False, seed=0, lora_layers=None)


def comparable(t):
    """A trajectory's record without what depends on the sampler's batch rather than the episode:
    wall times, the KV-cache accounting (which episodes shared a batch) and log-probs (compared
    apart, to float rounding: a batch of another shape rounds differently)."""
    d = t.to_dict()
    for key in ("metrics", "prefill_tokens", "cached_tokens", "logprobs"):
        d.pop(key)
    return d


def assert_same_episodes(got, expected):
    assert [comparable(t) for t in got] == [comparable(t) for t in expected]
    for a, b in zip(got, expected):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_ray_workers_give_the_local_engines_trajectories_for_the_same_seeds(ray_cluster, tmp_path, chatml_tokenizer):
    cfg = config(tmp_path)
    policy = tiny_policy(chatml_tokenizer, cfg)
    with torch.no_grad():  # a non-trivial adapter, pushed to the workers like after an update
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.add_(0.05 * torch.randn_like(p))
    tasks = TASKS[:5]
    local = make_rollout_engine(cfg, HFSampler(policy, chatml_tokenizer), chatml_tokenizer, env=VowelEnv)
    expected = local.collect(tasks, seed=1234)
    local.close()
    with RayRolloutEngine(cfg, tiny_policy(chatml_tokenizer, cfg), chatml_tokenizer, env=VowelEnv,
                          options=parse_source(cfg.source).options) as engine:
        engine.update_policy(policy, version=3)
        got = engine.collect(tasks, seed=1234)
        assert len({ray.get(w.describe.remote())["pid"] for w in engine.workers}) == 2  # two processes
    assert len(got) == len(expected) == 10
    assert_same_episodes(got, expected)
    assert engine.last_metrics == {"ray/workers": 2.0, "ray/lost_episodes": 0.0, "ray/retried_shards": 0.0,
                                   "ray/restarted_workers": 0.0}


@pytest.mark.parametrize("retries", [0, 1])
def test_a_worker_killed_mid_step_fails_or_retries_its_episodes_and_the_step_completes(
        ray_cluster, tmp_path, chatml_tokenizer, retries):
    cfg = config(tmp_path, source={"name": "ray", "workers": 2, "worker_retries": retries})
    policy = tiny_policy(chatml_tokenizer, cfg)
    with RayRolloutEngine(cfg, policy, chatml_tokenizer, env=VowelEnv,
                          options=parse_source(cfg.source).options) as engine:
        engine.update_policy(policy, version=0)
        reference = engine.collect(TASKS[:3], seed=7)
        pending = engine.submit(TASKS[:3], seed=7)  # shards: groups [0, 2) on worker 0, [2, 3) on worker 1
        ray.kill(engine.workers[0])
        got = engine.gather(pending)
        assert len(got) == 6 and [t.group_id for t in got] == [0, 0, 1, 1, 2, 2]
        lost = [t for t in got if t.failed]
        if retries:
            assert not lost
            assert_same_episodes(got, reference)
            assert engine.last_metrics["ray/retried_shards"] == 1 and engine.last_metrics["ray/lost_episodes"] == 0
        else:
            assert [t.group_id for t in lost] == [0, 0, 1, 1]
            assert all(t.reward == -1.0 and t.metrics["worker_lost"] == 1.0 and t.stop_reason == "failed"
                       and "ray worker 0 died" in t.failure_reason for t in lost)
            assert_same_episodes(got[4:], reference[4:])
            assert engine.last_metrics["ray/lost_episodes"] == 4
        assert engine.last_metrics["ray/restarted_workers"] == retries
        # the next step runs on a full pool again, with the current weights
        again = engine.collect(TASKS[:3], seed=7)
        assert_same_episodes(again, reference)
        assert engine.last_metrics["ray/restarted_workers"] == 1


def kill_first_holder(hold: Path, timeout: float = 120.0) -> int:
    """SIGKILL the first worker process that is mid-episode in a :class:`HoldEnv` (its ``pid-*`` file in
    ``hold``), wait until the process is gone, then release the other episodes; returns its pid."""
    deadline = time.monotonic() + timeout
    while not list(hold.glob("pid-*")):
        assert time.monotonic() < deadline, "no worker reached the held step"
        time.sleep(0.02)
    pid = int(sorted(hold.glob("pid-*"))[0].read_text())
    assert pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, f"worker {pid} survived SIGKILL"
        time.sleep(0.02)
    (hold / "release").write_text("go")
    return pid


@pytest.mark.parametrize("retries", [0, 1])
def test_a_worker_process_killed_with_sigkill_mid_rollout_then_update_policy_and_the_next_step(
        ray_cluster, tmp_path, chatml_tokenizer, retries):
    """The issue's probe: ``kill -9`` of a real worker process while it plays an episode, then the
    trainer's next calls (update_policy, the next batch). It used to raise AttributeError on the
    dead slot in update_policy."""
    cfg = config(tmp_path, source={"name": "ray", "workers": 2, "worker_retries": retries})
    policy = tiny_policy(chatml_tokenizer, cfg)
    hold = tmp_path / "hold"
    hold.mkdir()
    tasks = [dict(TASKS[0], hold=str(hold))] + TASKS[1:3]  # only worker 0's shard ([0, 2)) waits
    with RayRolloutEngine(cfg, policy, chatml_tokenizer, env=HoldEnv,
                          options=parse_source(cfg.source).options) as engine:
        engine.update_policy(policy, version=0)
        pids = [ray.get(w.describe.remote())["pid"] for w in engine.workers]
        pending = engine.submit(tasks, seed=7)
        killed = kill_first_holder(hold)
        assert killed == pids[0]
        got = engine.gather(pending)
        assert [t.group_id for t in got] == [0, 0, 1, 1, 2, 2]
        lost = [t for t in got if t.failed]
        assert len(lost) == (0 if retries else 4)
        assert all("ray worker 0 died" in t.failure_reason and t.metrics["worker_lost"] == 1.0 for t in lost)
        assert engine.last_metrics["ray/lost_episodes"] == len(lost)
        with torch.no_grad():
            for name, p in policy.named_parameters():
                if "lora_B" in name:
                    p.add_(0.05)
        engine.update_policy(policy, version=1)  # the dead slot is skipped, not called
        again = engine.collect(tasks, seed=8)
        assert len(again) == 6 and not any(t.failed for t in again)
        new_pids = [ray.get(w.describe.remote())["pid"] for w in engine.workers]
        assert killed not in new_pids and new_pids[1] == pids[1]
        assert ray.get(engine.workers[0].load_weights.remote(None, 1)) == 1
        assert engine.last_metrics["ray/restarted_workers"] == 1 and engine.last_metrics["ray/workers"] == 2


def train_with_a_worker_killed(tmp_path, tokenizer, tasks, **overrides) -> list[dict]:
    """Two GRPO steps (a checkpoint after each) on :class:`HoldEnv` rows, the first worker to
    reach a held step SIGKILLed; the run must finish both steps and save both checkpoints.
    Returns the metrics lines of the two steps."""
    hold = tmp_path / "hold"
    hold.mkdir()
    cfg = config(tmp_path, global_batch_size=2, max_steps=2, checkpoints={"save_every": 1}, **overrides)
    trainer = GRPOTrainer(cfg, model=build_tiny_llama(len(tokenizer), seed=0), tokenizer=tokenizer,
                          env=HoldEnv, train_tasks=[dict(t, hold=str(hold)) for t in tasks], val_tasks=TASKS[:2])
    killer = threading.Thread(target=kill_first_holder, args=(hold,), daemon=True)
    killer.start()
    try:
        summary = trainer.train()
    finally:
        trainer.close()
        (hold / "release").write_text("go")
    killer.join(timeout=5)
    assert summary["status"] == "FINISHED" and summary["steps"] == 2
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["step_000001", "step_000002"]
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2]
    return train


def test_grpo_step_completes_and_checkpoints_after_a_worker_is_killed_with_sigkill(ray_cluster, tmp_path,
                                                                                  chatml_tokenizer):
    """End to end: a training run whose worker is SIGKILLed mid-rollout in step 1 finishes both steps,
    logs the lost episodes and saves its checkpoints (``source.worker_retries`` 0, the default)."""
    assert config(tmp_path).source["worker_retries"] == 0
    first, second = train_with_a_worker_killed(tmp_path, chatml_tokenizer, TASKS[:4])
    assert first["ray/lost_episodes"] == 2 and second["ray/lost_episodes"] == 0
    assert second["ray/restarted_workers"] == 1


def test_dynamic_sampling_over_ray_redraws_past_a_worker_killed_with_sigkill_and_counts_its_losses(
        ray_cluster, tmp_path, chatml_tokenizer):
    """``dynamic`` over ``ray``: the SIGKILLed worker's group comes back failed (a uniform group), so
    the step draws again on the restarted pool, and the step's ``ray/lost_episodes`` counts the
    episodes lost in every draw, not only in its last one (where nothing was lost)."""
    first, second = train_with_a_worker_killed(
        tmp_path, chatml_tokenizer, TASKS,
        source={"name": "dynamic", "max_draws": 3, "source": {"name": "ray", "workers": 2}})
    assert first["dynamic/draws"] >= 2  # the lost group agreed (both failed), so a second draw was played
    assert first["ray/lost_episodes"] == 2 and second["ray/lost_episodes"] == 0
    assert first["ray/restarted_workers"] == 1 and first["ray/workers"] == 2


def test_grpo_trains_with_ray_workers_and_async_rollouts(ray_cluster, tmp_path, chatml_tokenizer):
    cfg = config(tmp_path, source={"name": "async", "max_staleness": 1, "source": {"name": "ray", "workers": 2}},
                 max_steps=3, validation={"every": 3, "max_tasks": 2})
    trainer = GRPOTrainer(cfg, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                          env=VowelEnv, train_tasks=TASKS, val_tasks=TASKS[:2])
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    assert summary["status"] == "FINISHED" and summary["steps"] == 3
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert all(r["ray/workers"] == 2 and r["ray/lost_episodes"] == 0 and r["async/staleness_max"] <= 1
               for r in train)
    assert all(r["rollout/failure_rate"] == 0 for r in train)
    assert [r["step"] for r in records if r["kind"] == "val"] == [0, 3]  # validation runs in the driver


def test_ray_backend_refuses_multiagent_envs(ray_cluster, tmp_path, chatml_tokenizer):
    from mtrl_gym.error import ConfigError

    with pytest.raises(ConfigError, match=r"'mtrl/WordleDuel-v0' is a multi-agent env: use source 'selfplay'"):
        RayRolloutEngine(config(tmp_path, env="mtrl/WordleDuel-v0"), None, chatml_tokenizer)


def test_ray_backend_without_ray_names_the_extra(monkeypatch, tmp_path, chatml_tokenizer):
    monkeypatch.setitem(sys.modules, "ray", None)
    from mtrl_gym.error import DependencyNotInstalled

    with pytest.raises(DependencyNotInstalled, match=r"mtrl-gym\[ray\]"):
        RayRolloutEngine(config(tmp_path), None, chatml_tokenizer)
