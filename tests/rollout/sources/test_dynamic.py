"""Dynamic sampling (``source: {name: dynamic}``) on a tiny random model, through the real GRPO trainer.

Half the task rows score nothing whatever the model writes (``letters: ""``), so their
groups never disagree; the other half score the share of vowels, so four samples of a
random model almost always differ. ``max_draws: 1`` must be the plain run bit for bit;
with more draws a step's batch must hold only disputed groups while its budget lasts, keep
the batch's size, advance the task stream past every row it played, and resume exactly.
"""

from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from tiny_runs import train_and_read  # noqa: E402
from toy_envs import VowelEnv  # noqa: E402

from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.rollout.sources.base import RolloutSource, TaskFeed  # noqa: E402
from mtrl_gym.rollout.sources.dynamic import DynamicSampling, disputed  # noqa: E402
from mtrl_gym.rollout.trajectory import Trajectory  # noqa: E402
from mtrl_gym.trainers.grpo.config import GRPOConfig  # noqa: E402

# even rows: nothing scores (uniform groups); odd rows: vowels score (groups disagree)
TASKS = [{"id": f"t{i}", "turns": 1, "letters": "" if i % 2 == 0 else "aeiou"} for i in range(12)]
DYNAMIC_KEYS = ("dynamic/draws", "dynamic/disputed_drawn_frac", "dynamic/uniform_in_batch", "dynamic/discarded_groups")


def run(tmp_path, name, tokenizer, steps=3, resume=None, **overrides):
    values = dict(output_dir=str(tmp_path / name), global_batch_size=2, group_size=4, max_steps=steps,
                  serving={"max_new_tokens": 6}, episode={"max_tokens": 256}, lora={"rank": 4, "alpha": 8.0},
                  learning_rate=5e-2, tracking={"tracker": "none", "log_trajectories": 64}, progress=False,
                  validation={"every": 0}, checkpoints={"save_every": 0}, seed=0)
    values.update(overrides)
    config = GRPOConfig.load(values) if resume is None else \
        GRPOConfig.load(str(tmp_path / name / "config.yaml"), overrides=[f"max_steps={steps}"])
    params, trajs, records = train_and_read(config, tokenizer, env=VowelEnv, train_tasks=TASKS,
                                            val_tasks=TASKS[:2], steps=steps, resume=resume)
    return params, trajs, [r for r in records if r["kind"] == "train"]


def groups_of(trajectories, size=4):
    return [trajectories[i:i + size] for i in range(0, len(trajectories), size)]


def logged_groups(trajectories):
    """A step's logged trajectories (the trainer logs each group's first one first) as groups, in batch order."""
    by_id: dict[int, list] = {}
    for t in trajectories:
        by_id.setdefault(t.group_id, []).append(t)
    return [by_id[g] for g in sorted(by_id)]


def test_one_draw_is_the_plain_run_bit_for_bit(tmp_path, chatml_tokenizer):
    plain_params, plain, _ = run(tmp_path, "plain", chatml_tokenizer)
    params, dynamic, records = run(tmp_path, "dynamic", chatml_tokenizer, source={"name": "dynamic", "max_draws": 1})
    for step in plain:
        assert [t.token_ids for t in plain[step]] == [t.token_ids for t in dynamic[step]]
        assert [t.reward for t in plain[step]] == [t.reward for t in dynamic[step]]
    assert all(torch.equal(plain_params[n], params[n]) for n in plain_params)
    assert all(r["dynamic/draws"] == 1 for r in records)


def test_the_batch_holds_disputed_groups_while_the_budget_lasts(tmp_path, chatml_tokenizer):
    _, plain, plain_records = run(tmp_path, "plain", chatml_tokenizer, steps=4)
    _, trajs, records = run(tmp_path, "dynamic", chatml_tokenizer, steps=4,
                            source={"name": "dynamic", "max_draws": 3, "source": {"name": "local"}})
    uniform_plain = sum(not disputed(g) for s in plain for g in logged_groups(plain[s]))
    assert uniform_plain >= 2  # the plain run trains on the "" rows' uniform groups (3 of its 8 with this seed)
    for record in records:
        for key in DYNAMIC_KEYS:
            assert key in record, key
        batch = trajs[record["step"]]
        assert len(batch) == 8  # the batch keeps its size: 2 groups of 4
        groups = logged_groups(batch)
        assert [len(g) for g in groups] == [4, 4]
        flags = [disputed(g) for g in groups]
        assert flags == sorted(flags, reverse=True)  # disputed groups first
        assert sum(not f for f in flags) == record["dynamic/uniform_in_batch"]
        if record["dynamic/draws"] < 3:
            assert all(flags)  # the budget was not used up, so no uniform group was needed
        assert all(t.task_id in {task["id"] for task in TASKS[1::2]} for g, f in zip(groups, flags) if f for t in g)
        assert record["train/sequences"] == 4 * sum(flags)  # uniform groups are dropped from the update
    assert any(r["dynamic/draws"] > 1 for r in records)
    # every row played moves the task stream on: more of an epoch than the plain run's 4 x 2 rows
    assert records[-1]["data/epoch"] > plain_records[-1]["data/epoch"]
    played = sum(r["dynamic/draws"] for r in records) * 2
    assert records[-1]["data/epoch"] == pytest.approx(played / len(TASKS))


def test_a_dynamic_run_resumes_exactly(tmp_path, chatml_tokenizer):
    source = {"name": "dynamic", "max_draws": 3}
    _, full, _ = run(tmp_path, "full", chatml_tokenizer, steps=3, source=source)
    run(tmp_path, "part", chatml_tokenizer, steps=2, source=source)
    _, resumed, _ = run(tmp_path, "part", chatml_tokenizer, steps=3, resume=tmp_path / "part")
    assert [t.token_ids for t in resumed[3]] == [t.token_ids for t in full[3]]
    assert [t.task_id for t in resumed[3]] == [t.task_id for t in full[3]]


def test_dynamic_config_values_are_checked():
    with pytest.raises(ConfigError, match=r"`source.max_draws` must be an integer >= 1, got 0"):
        GRPOConfig(source={"name": "dynamic", "max_draws": 0})
    with pytest.raises(ConfigError, match=r"not 'async' \(a producer sampling ahead"):
        GRPOConfig(source={"name": "dynamic", "source": {"name": "async"}})
    with pytest.raises(ConfigError, match=r"not 'dynamic' \(it draws more rows"):
        GRPOConfig(source={"name": "async", "source": {"name": "dynamic"}})
    with pytest.raises(ConfigError, match=r"`source` 'ray' has no option\(s\) \['max_draws'\]"):
        GRPOConfig(source={"name": "dynamic", "source": {"name": "ray", "max_draws": 2}})
    with pytest.raises(ConfigError, match=r"'ray' cannot be combined with sampler 'vllm'"):
        GRPOConfig(source={"name": "dynamic", "source": {"name": "ray"}}, sampler="vllm")
    config = GRPOConfig.load({}, overrides=["source.name=dynamic", "source.max_draws=4"])
    assert config.source["name"] == "dynamic" and config.source["max_draws"] == 4


class Scripted(RolloutSource):
    """Plays each row as its scripted rewards (a row: the group's rewards)."""

    def collect(self, tasks, *, seed=None):
        return [Trajectory(str(row["id"]), group_id=g, reward=r) for g, row in enumerate(tasks) for r in row["rewards"]]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=2), min_size=12, max_size=12),
       st.integers(1, 3), st.integers(1, 4))
def test_dynamic_sampling_keeps_the_first_disputed_groups_and_fills_with_uniform_ones(rewards, rows, max_draws):
    stream = iter([{"id": i, "rewards": r} for i, r in enumerate(rewards)])
    drawn: list[int] = []

    def draw():
        batch = [next(stream) for _ in range(rows)]
        drawn.extend(row["id"] for row in batch)
        return batch, {"drawn": len(drawn)}

    batch = DynamicSampling(Scripted(), group_size=2, max_draws=max_draws).batch(0, TaskFeed(draw, seed=lambda s: 0))
    groups = groups_of(batch.trajectories, 2)
    played = [rewards[i] for i in drawn]
    disputed_ids = [i for i in drawn if rewards[i][0] != rewards[i][1]]
    uniform_ids = [i for i in drawn if rewards[i][0] == rewards[i][1]]
    assert len(groups) == rows
    expected = (disputed_ids[:rows] + uniform_ids)[:rows]
    assert [int(g[0].task_id) for g in groups] == expected
    assert batch.data_state == {"drawn": len(drawn)}
    assert batch.engine_metrics["dynamic/draws"] == len(drawn) // rows
    # it stops at the first draw that completes the batch, and never plays past max_draws
    completes = [k for k in range(1, max_draws + 1) if sum(a != b for a, b in played[:k * rows]) >= rows]
    assert len(drawn) // rows == (completes[0] if completes else max_draws)
    assert len(batch.intervals) == len(drawn) // rows


def test_the_wrapped_sources_counts_add_up_over_the_draws_and_its_other_numbers_are_the_last_draws():
    """A step that draws three times reports the episodes its inner source lost in all three
    (a Ray pool's ``ray/lost_episodes``), and that source's pool size as it is after the last."""

    class Pool(Scripted):
        counted_metrics = ("pool/lost",)

        def __init__(self):
            self.calls = 0

        def collect(self, tasks, *, seed=None):
            self.calls += 1
            self.last_metrics = {"pool/lost": float(self.calls % 2), "pool/workers": float(self.calls)}
            return super().collect(tasks, seed=seed)

    rows = iter([{"id": i, "rewards": [0.0, 0.0]} for i in range(6)])  # every group agrees: all three draws
    batch = DynamicSampling(Pool(), group_size=2, max_draws=3).batch(0, TaskFeed(lambda: ([next(rows)], {}),
                                                                                 seed=lambda s: 0))
    metrics = batch.engine_metrics
    assert metrics["dynamic/draws"] == 3.0
    assert metrics["pool/lost"] == 2.0 and metrics["pool/workers"] == 3.0  # 1 + 0 + 1 lost; the last pool size
