"""The pieces of episode tracing: text caps, turn views, scores, settings, hostile text."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.traces import TraceConfig, cap_messages, episode_scores, turn_views
from mtrl_gym.rollout.trajectory import Trajectory, load_jsonl, save_jsonl, turn_record


def episode(**kw) -> Trajectory:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"},
                {"role": "assistant", "content": "call 1"},
                {"role": "tool", "content": "result 1", "tool_call_id": "c1", "name": "guess_word"},
                {"role": "user", "content": "note"},
                {"role": "assistant", "content": "bad"}, {"role": "user", "content": "format hint"}]
    info = [{"tool_calls": [{"id": "c1", "name": "guess_word", "arguments": {"guess": "crane"}}],
             "format_error": False, "reward_components": {"terms": {"opener": 0.1, "clue": 0.05}, "outcome": 0.0}},
            {"tool_calls": [], "format_error": True, "error": "no_guess",
             "reward_components": {"terms": {"opener": 0.0, "clue": -0.05}, "outcome": -0.5}}]
    values = dict(task_id="t", messages=messages, turn_info=info, turn_rewards=[0.1, -0.55], reward=-0.45,
                  metrics={"success": 0.0})
    values.update(kw)
    return Trajectory(**values)


def test_turn_views_split_the_conversation_at_each_assistant_turn():
    views = turn_views(episode())
    assert [v["index"] for v in views] == [2, 5]
    assert [v["reply"] for v in views] == ["call 1", "bad"]
    assert [[m["content"] for m in v["env"]] for v in views] == [["result 1", "note"], ["format hint"]]
    assert views[1]["info"]["error"] == "no_guess" and views[1]["reward"] == -0.55
    short = turn_views(episode(turn_info=[], turn_rewards=[]))  # written before turn_info existed
    assert [v["info"] for v in short] == [{}, {}] and short[0]["reward"] is None


def test_scores_take_the_bare_outcome_and_sum_the_shaping_terms():
    from mtrl_gym.rollout.traces import _shaping_terms  # noqa: PLC2701 - the module's own helper, tested here

    t = episode()
    assert episode_scores(t) == {"reward": -0.45, "outcome_reward": -0.5, "success": False}
    assert _shaping_terms(t.turn_info) == pytest.approx({"opener": 0.1, "clue": 0.0})
    stats = episode(final_info={"episode/outcome_reward": 1.0})
    assert episode_scores(stats)["outcome_reward"] == 1.0  # EpisodeStats' figure wins
    plain = episode(turn_info=[{}, {}], metrics={})
    assert episode_scores(plain) == {"reward": -0.45, "outcome_reward": pytest.approx(-0.45)}
    assert "outcome_reward" not in episode_scores(episode(failed=True))


def test_cap_messages_keeps_the_first_and_the_latest_within_the_budget():
    msgs = [{"role": "system", "content": "S" * 50}] + [{"role": "user", "content": f"{i:04d}" + "x" * 96}
                                                         for i in range(100)]
    capped = cap_messages(msgs, 1000)
    assert capped[0] == msgs[0] and capped[1]["content"].startswith("[91 earlier messages left out")
    assert [m["content"][:4] for m in capped[2:]] == [f"{i:04d}" for i in range(91, 100)]
    assert sum(len(m["content"]) for m in capped) <= 1000 + 60
    huge = cap_messages([{"role": "user", "content": "a" * 10_000}, {"role": "user", "content": "b" * 10_000}], 1000)
    assert all(len(m["content"]) <= 1000 for m in huge) and "characters cut" in huge[1]["content"]
    assert cap_messages([], 1000) == []


def test_cap_messages_is_linear_in_the_conversation():
    msgs = [{"role": "user", "content": "x" * 50}] * 200_000
    start = time.perf_counter()
    cap_messages(msgs, 20_000)
    small = time.perf_counter() - start
    start = time.perf_counter()
    cap_messages(msgs * 4, 20_000)
    assert time.perf_counter() - start < 8 * small + 0.5  # 4x the messages: about 4x the time, not 16x


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=30), st.integers(min_value=200, max_value=5000))
def test_cap_messages_never_raises_and_respects_its_budget(texts, budget):
    msgs = [{"role": "user", "content": t} for t in texts]
    capped = cap_messages(msgs, budget)
    assert len(capped) <= len(msgs) + 1
    assert sum(len(m["content"]) for m in capped) <= budget + 300


def test_trace_config_validates_and_names_the_field():
    assert TraceConfig().per_step == 4
    with pytest.raises(ConfigError, match=r"`traces.per_step` must be an integer >= 0, got -1"):
        TraceConfig(per_step=-1)
    with pytest.raises(ConfigError, match=r"`traces.max_chars` must be an integer >= 200, got 10"):
        TraceConfig(max_chars=10)


def test_grpo_config_takes_traces_as_a_mapping_from_files_flags_and_overrides(capsys):
    from mtrl_gym.cli import main
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    c = GRPOConfig.load({"tracking": {"traces": {"per_step": 0}}},
                        overrides=['tracking.traces={"per_step": 2, "max_chars": 500}'])
    assert c.tracking.traces == TraceConfig(per_step=2, max_chars=500)
    assert c.to_dict()["tracking"]["traces"]["max_chars"] == 500
    assert GRPOConfig.from_dict(c.to_dict()).tracking.traces == c.tracking.traces
    with pytest.raises(ConfigError, match=r"`tracking.traces` has no field 'per_stp' \(did you mean 'per_step'\?\)"):
        GRPOConfig.load(overrides=['tracking.traces={"per_stp": 2}'])
    with pytest.raises(ConfigError, match=r"`tracking.traces.per_step` must be an integer >= 0, got -1"):
        GRPOConfig.load(overrides=["tracking.traces.per_step=-1"])
    assert main(["train", "--print-config", "--tracking.traces", '{"per_step": 8}']) == 0
    assert "  traces:\n    per_step: 8\n    max_chars: 20000\n" in capsys.readouterr().out


def test_turn_info_round_trips_and_old_files_load(tmp_path):
    t = episode()
    assert load_jsonl(save_jsonl([t], tmp_path / "a.jsonl"))[0].turn_info == t.turn_info
    (tmp_path / "old.jsonl").write_text('{"task_id": "x", "messages": []}\n')
    assert load_jsonl(tmp_path / "old.jsonl")[0].turn_info == []
    hostile = turn_record({"tool_calls": [{"arguments": {"g": "\ud800"}}], "error": "e", "other": 1})
    assert hostile == {"tool_calls": [{"arguments": {"g": "\ufffd"}}], "error": "e"}


def test_a_hostile_episode_is_traced_and_a_broken_one_only_warns(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    import mlflow

    from mtrl_gym.rollout.traces import EpisodeTracer

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("units")
    deep: dict = {}
    node = deep
    for _ in range(500):
        node["a"] = {}
        node = node["a"]
    bad = episode(messages=[{"role": "user", "content": "\ud800 lone"}, {"role": "assistant", "content": "\udfff"}],
                  turn_info=[{"tool_calls": [{"id": "1", "name": "\ud800" * 500, "arguments": deep}]}])
    tracer = EpisodeTracer(uri, experiment)
    broken = episode()
    broken.turn_rewards = None  # not a list: this episode cannot be traced
    with pytest.warns(UserWarning, match=r"episode 't' \(group 0, sample 0\) was not traced"):
        ids = tracer.log([bad, broken], {"run": "r"})
    tracer.flush()
    assert len(ids) == 1
    [trace] = mlflow.search_traces(locations=[experiment], return_type="list")
    names = [s.name for s in trace.data.spans]
    assert names[:2] == ["episode", "turn 1"] and len(names) == 3


def test_two_stores_in_one_process_each_get_their_own_traces(tmp_path, monkeypatch):
    """MLflow's tracer is process-wide: a tracer for a second store sends its traces there,
    from the first one on, and not to the store of an earlier tracer."""
    pytest.importorskip("mlflow")
    import mlflow

    from mtrl_gym.rollout.traces import EpisodeTracer

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for name in ("a", "b"):
        uri = f"sqlite:///{tmp_path / f'{name}.db'}"
        experiment = mlflow.MlflowClient(uri).create_experiment("e")
        tracer = EpisodeTracer(uri, experiment)
        [trace_id] = tracer.log([episode(task_id=name)], {"run": name})
        tracer.flush()
        found = mlflow.MlflowClient(uri).search_traces(locations=[experiment])
        assert [t.info.tags["mtrl_gym.task_id"] for t in found] == [name]
        assert found[0].info.trace_id == trace_id
    assert "MLFLOW_TRACKING_URI" not in __import__("os").environ  # the tracer leaves the environment as it was


def test_trace_ids_do_not_follow_a_seeded_random_module(tmp_path, monkeypatch):
    """The trainer seeds Python's ``random``: two runs with one seed must not repeat trace ids."""
    pytest.importorskip("mlflow")
    import random

    import mlflow

    from mtrl_gym.rollout.traces import EpisodeTracer

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    experiment = mlflow.MlflowClient(uri).create_experiment("seeded")
    tracer = EpisodeTracer(uri, experiment)
    ids = []
    for _ in range(2):
        random.seed(0)
        ids += tracer.log([episode()], {"run": "r"})
        after = random.random()
    random.seed(0)
    assert after == random.random()  # tracing drew nothing from the run's random stream
    tracer.flush()
    assert len(set(ids)) == 2 and len(mlflow.MlflowClient(uri).search_traces(locations=[experiment])) == 2
