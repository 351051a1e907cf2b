"""The SOP framework on a small test domain: env behaviour, stale tasks, FieldReward, make-dataset, harness."""

from __future__ import annotations

import copy
import json

import gymnasium
import pytest
from harness import SOPHarness
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toy_domain import Toy, ToyEnv

from mtrl_gym.cli import main
from mtrl_gym.datasets import read_tasks
from mtrl_gym.envs.wordle.profile import wordle_split
from mtrl_gym.envs.sop import SPLITS, SOPEnv, generate_tasks, parse_difficulty, play_oracle, split_seeds
from mtrl_gym.envs.sop.oracle import OracleError
from mtrl_gym.error import ConfigError, InvalidTask
from mtrl_gym.wrappers import BoundedShaping, FieldReward, FormatPenalty

H = SOPHarness("test/SOP-Toy-v0", module="toy_domain")


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def final(answer):
    return f"<final_answer>{json.dumps(answer)}</final_answer>"


# ----------------------------------------------------------------------------- the env


def test_prompts_show_the_sop_answer_format_and_inputs_but_not_the_label():
    env = ToyEnv()
    obs, info = env.reset(seed=5)
    assert obs.startswith("Handle the case below by following the SOP") and '"parcel_id": "P-1"' in obs
    system = info["system_prompt"]
    assert system.startswith("You are an operations agent.") and "# Parcel disposition SOP" in system
    assert '- "weight_class": one of "light", "heavy", "unknown"' in system
    assert '- "weight_kg": integer, or null' in system and "at most 30 tool calls" in system
    assert '"name": "get_parcel"' in system  # the call example names a tool the SOP uses, not a distractor
    assert [t["function"]["name"] for t in info["tools"]] == ["get_parcel", "file_disposition", "get_weather", "submit"]
    assert env.expected_answer["filing_id"] not in obs + system + json.dumps(info)


def test_the_oracle_scores_one_and_the_final_info_carries_the_grade():
    env = ToyEnv()
    reward, info, steps = play_oracle(env, seed=3)
    assert env.initial_world == Toy().world(env.task["seed"], env.task["difficulty"]) != env.state
    assert env.state["filings"] and not env.initial_world["filings"]
    assert (reward, steps) == (1.0, 3) and info["success"] and info["answer_error"] is None
    assert info["grade"] == {"score": 1.0, "passed": True, "reason": "exact match", "details": {"field_score": 1.0}}
    assert info["grade_result"]["exact"] and info["answer"] == info["submitted_answer"]


def test_one_wrong_field_scores_zero_strictly_and_is_explained():
    env = ToyEnv()
    env.reset(seed=3)
    answer = copy.deepcopy(env.expected_answer)
    env.step(call("file_disposition", parcel_id="P-1", disposition="keep" if answer["keep"] else "release"))
    answer["weight_class"] = "medium"
    _, reward, terminated, _, info = env.step(final(answer))
    assert terminated and reward == 0.0 and not info["success"] and info["answer_error"] is None
    assert info["grade_result"]["errors"] == {"weight_class": "not an allowed value: got 'medium'"}
    assert info["grade_result"]["score"] == pytest.approx(0.8) == info["grade"]["details"]["field_score"]
    assert info["grade"]["reason"] == "1 problem(s): 'weight_class' (not an allowed value: got 'medium')"


def test_state_errors_fail_a_field_the_world_contradicts():
    env = ToyEnv()
    env.reset(seed=3)
    answer = copy.deepcopy(env.expected_answer)
    wrong = "release" if answer["keep"] else "keep"  # filed with the wrong disposition, answered right
    assert env.step(call("file_disposition", parcel_id="P-1", disposition=wrong))[4]["tool_outcomes"][0]["status"] == "ok"
    _, reward, _, _, info = env.step(final(answer))
    assert reward == 0.0 and info["grade_result"]["fields"]["filing_id"] == 0.0
    assert info["grade_result"]["errors"] == {"filing_id": f"no filing {answer['filing_id']} with disposition "
                                                           f"{'keep' if answer['keep'] else 'release'!r}"}


@pytest.mark.parametrize("action,error", [
    ("<final_answer>heavy</final_answer>", "not_an_object"),
    (call("submit", answer=["heavy", True]), "not_an_object"),
    (call("submit", answer="{not json"), "not_an_object"),
])
def test_an_answer_that_is_not_an_object_ends_the_episode_with_zero_and_a_flag(action, error):
    env = ToyEnv()
    env.reset(seed=1)
    _, reward, terminated, _, info = env.step(action)
    assert terminated and reward == 0.0 and info["answer_error"] == error
    assert info["grade_result"]["score"] == 0.0 and not info["grade_result"]["exact"]


def test_no_final_answer_is_zero_and_flagged_missing():
    env = ToyEnv(max_tool_calls=2)
    env.reset(seed=1)
    for _ in range(2):
        _, reward, terminated, truncated, info = env.step(call("get_parcel", parcel_id="P-1"))
    _, reward, terminated, truncated, info = env.step(call("get_parcel", parcel_id="P-1"))
    assert terminated and reward == 0.0 and info["end_reason"] == "tool_limit"
    assert info["answer_error"] == "missing" and set(info["grade_result"]["errors"].values()) == {"no final answer"}
    env = ToyEnv(max_turns=1)
    env.reset(seed=1)
    _, reward, terminated, truncated, info = env.step("thinking...")
    assert truncated and info["answer_error"] == "missing" and info["end_reason"] == "turn_limit"


def test_distractors_are_counted_and_hidden_when_the_knob_is_off():
    env = ToyEnv()
    env.reset(seed=1)
    info = env.step(call("get_weather", city="Oslo") + call("get_parcel", parcel_id="P-1"))[4]
    assert info["num_distractor_calls"] == 1
    env = ToyEnv(difficulty={"distractors": False})
    _, info = env.reset(seed=1)
    assert "get_weather" not in {t["function"]["name"] for t in info["tools"]}
    info = env.step(call("get_weather", city="Oslo"))[4]
    assert info["tool_outcomes"][0]["status"] == "unknown_tool" and info["num_distractor_calls"] == 0
    # A task row's difficulty wins over the env's, episode by episode.
    _, info = env.reset(options={"task": {"seed": 4, "difficulty": {"distractors": True}}})
    assert "get_weather" in {t["function"]["name"] for t in info["tools"]}


def test_budgets_default_to_the_domains_and_leave_a_turn_per_call():
    assert (ToyEnv().max_tool_calls, ToyEnv().max_turns) == (30, 40)
    assert (ToyEnv(max_tool_calls=5).max_turns, ToyEnv(max_tool_calls=5, max_turns=7).max_turns) == (15, 7)
    with pytest.raises(ConfigError, match="`max_tool_calls` must be an int >= 1, got 0"):
        ToyEnv(max_tool_calls=0)


def test_sampled_tasks_come_from_the_split_seed_range():
    for split in ("train", "val"):
        env = ToyEnv(split=split)
        low, high = SPLITS[split]
        for seed in range(20):
            env.reset(seed=seed)
            assert low <= env.task["seed"] < high and env.task["id"].startswith(f"sop-toy-{split}-")
            assert str(env.task["seed"]) not in env.task["id"]
    a, b = ToyEnv(), ToyEnv()
    assert a.reset(seed=9) == b.reset(seed=9) and a.task == b.task


def test_stale_or_broken_task_rows_raise_naming_the_task():
    row = generate_tasks(Toy(), 1)[0]
    env = ToyEnv()
    env.reset(options={"task": row})
    assert env.task["answer"] == row["answer"]
    stale = {**row, "answer": {**row["answer"], "filing_id": "F-0"}}
    with pytest.raises(InvalidTask, match=r"task 'sop-toy-train-00000': its answer differ\(s\) from what seed .* "
                                          r"regenerate it with `mtrl-gym make-dataset`"):
        env.reset(options={"task": stale})
    with pytest.raises(InvalidTask, match="its prompt differ"):
        env.reset(options={"task": {**row, "prompt": row["prompt"] + " "}})
    with pytest.raises(InvalidTask, match=r"'seed' must be an int in \[0, 2\*\*63\), got -1"):
        env.reset(options={"task": {**row, "seed": -1}})
    with pytest.raises(InvalidTask, match="unknown difficulty knob 'nois' for Toy. Did you mean 'noise'"):
        env.reset(options={"task": {**row, "difficulty": {"nois": 1}}})
    with pytest.raises(InvalidTask, match=r"task is missing field\(s\) \['seed'\]"):
        env.reset(options={"task": {"prompt": "x"}})


@pytest.mark.parametrize("difficulty,match", [
    ({"noise": 3}, r"'noise' must be one of \(0, 1, 2\), got 3"),
    ({"noise": True}, "knob 'noise' of Toy must be of type int"),
    ({"distractors": "no"}, "knob 'distractors' of Toy must be of type bool"),
    ({"flags": 9}, "'flags' must be in 0..3, got 9"),
    ({"steps": 1}, r"unknown difficulty knob 'steps' for Toy. Its knobs are \['distractors', 'flags', 'noise'\]"),
])
def test_difficulty_overrides_are_validated(difficulty, match):
    with pytest.raises(ConfigError, match=match):
        ToyEnv(difficulty=difficulty)


def test_domain_configuration_is_validated():
    class Bad(Toy):
        name = "bad name"

    with pytest.raises(ConfigError, match="must be a CamelCase name like 'DangerousGoods', got 'bad name'"):
        SOPEnv(Bad())

    class Ghost(Toy):
        distractor_tools = ("get_wether",)

    with pytest.raises(ConfigError, match=r"distractor_tools names tools that are not in `tools`: \['get_wether'\]"):
        SOPEnv(Ghost())
    with pytest.raises(ConfigError, match="needs an SOPDomain"):
        SOPEnv()
    with pytest.raises(ConfigError, match="`split` must be one of"):
        ToyEnv(split="test")


def test_play_oracle_refuses_other_envs_and_reports_rejected_calls():
    with pytest.raises(ConfigError, match="play_oracle needs an SOP env, got WordleEnv"):
        play_oracle(gymnasium.make("mtrl/Wordle-v0"))

    class Clumsy(Toy):
        def oracle(self, inputs, call):
            return call("get_parcel", {"id": "P-1"})

    with pytest.raises(OracleError, match="failed \\(bad_arguments\\)"):
        play_oracle(SOPEnv(Clumsy()), seed=0)


# ----------------------------------------------------------------------------- FieldReward


def test_field_reward_pays_the_mean_field_score_and_reports_components():
    env = FieldReward(ToyEnv(), as_list=True)
    env.reset(seed=3)
    answer = copy.deepcopy(env.unwrapped.expected_answer)
    obs, reward, terminated, truncated, info = env.step(call("get_parcel", parcel_id="P-1"))
    assert reward == 0.0 and info["reward_components"] == {"outcome": 0.0, "field_score": None, "reward": 0.0}
    assert "field_rewards" not in info
    answer["weight_class"], answer["notes"] = "medium", "x"
    _, reward, terminated, _, info = env.step(final(answer))
    # filing_id fails too (nothing was filed): 3 right of 5 fields + 1 extra key.
    assert terminated and reward == pytest.approx(3 / 6)
    assert info["field_rewards"] == [0.0, 1.0, 1.0, 1.0, 0.0] and env.field_names == tuple(Toy.output_schema)
    assert info["metrics"] == {"exact": 0.0, "field_score": pytest.approx(0.5), "fields/weight_class": 0.0,
                               "fields/keep": 1.0, "fields/flags": 1.0, "fields/weight_kg": 1.0,
                               "fields/filing_id": 0.0, "extra_keys": 1.0, "no_answer": 0.0, "not_an_object": 0.0}
    assert info["reward_components"] == {"outcome": 0.0, "field_score": pytest.approx(0.5), "reward": reward}


def test_field_reward_is_one_exactly_when_the_strict_outcome_is_one():
    env = FieldReward(ToyEnv())
    reward, info, _ = play_oracle(env, seed=8)
    assert reward == 1.0 and info["reward_components"]["outcome"] == 1.0 and "metrics" not in info
    env.reset(seed=8)
    _, reward, *_ = env.step("<final_answer>nothing</final_answer>")
    assert reward == 0.0


def test_field_reward_validates_its_arguments_and_its_place_in_the_stack():
    with pytest.raises(ConfigError, match="FieldReward needs an SOP env .*got WordleEnv"):
        FieldReward(gymnasium.make("mtrl/Wordle-v0"))
    with pytest.raises(ConfigError, match="`as_list` must be True or False, got 1"):
        FieldReward(ToyEnv(), as_list=1)
    with pytest.raises(ConfigError, match=r"found FormatPenalty inside it: use FormatPenalty\(FieldReward\(env\), ...\)"):
        FieldReward(FormatPenalty(ToyEnv(), success_weight=0.1, failure_weight=0.1))
    shaped = BoundedShaping(FieldReward(ToyEnv()), terms=lambda info: {"calls": 0.0}, success_weight=0.1,
                            failure_weight=0.1)
    reward, info, _ = play_oracle(shaped, seed=8)
    assert reward == 1.0 and info["reward_components"]["outcome"] == 1.0


# ----------------------------------------------------------------------------- task rows and make-dataset


def test_split_seeds_are_reproducible_distinct_and_disjoint():
    train, val = split_seeds(500, seed=0, split="train"), split_seeds(500, seed=0, split="val")
    assert train == split_seeds(500, seed=0, split="train") and len(set(train)) == 500
    assert not set(train) & set(val) and max(train) < 2**30 <= min(val) and max(val) < 2**31
    assert split_seeds(5, seed=1, split="train") != train[:5]
    with pytest.raises(ConfigError, match="`n` must be an int >= 1, got 0"):
        split_seeds(0)
    with pytest.raises(ConfigError, match="`split` must be one of"):
        split_seeds(3, split="test")


def test_parse_difficulty():
    assert parse_difficulty("noise=2, distractors=FALSE,flags=1") == {"noise": 2, "distractors": False, "flags": 1}
    assert parse_difficulty("") == {} and parse_difficulty(None) == {}
    with pytest.raises(ConfigError, match="KEY=VALUE pairs .*got 'noise'"):
        parse_difficulty("noise")


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_make_dataset_is_byte_identical_and_loads_into_the_env(tmp_path, suffix, capsys):
    args = ["make-dataset", "test/SOP-Toy-v0", "--n", "40", "--seed", "3", "--split", "val",
            "--difficulty", "noise=2,distractors=false"]
    assert main([*args, "--out", str(tmp_path / f"a{suffix}")]) == 0
    assert main([*args, "--out", str(tmp_path / f"b{suffix}")]) == 0
    assert (tmp_path / f"a{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes()
    assert "wrote 40 val task(s) for test/SOP-Toy-v0" in capsys.readouterr().err
    rows = read_tasks(tmp_path / f"a{suffix}")
    assert [r["id"] for r in rows[:2]] == ["sop-toy-val-00000", "sop-toy-val-00001"]
    assert set(rows[0]) == {"prompt", "answer", "id", "seed", "difficulty"}
    assert rows[0]["difficulty"] == {"noise": 2, "distractors": False, "flags": 2}
    env = ToyEnv(tasks=tmp_path / f"a{suffix}")
    for seed in range(5):
        reward, info, _ = play_oracle(env, seed=seed)
        assert reward == 1.0 and env.task["id"].startswith("sop-toy-val-")


def test_make_dataset_train_and_val_never_share_a_world(tmp_path):
    for split in ("train", "val"):
        assert main(["make-dataset", "test/SOP-Toy-v0", "--n", "200", "--split", split,
                     "--out", str(tmp_path / f"{split}.jsonl")]) == 0
    train, val = read_tasks(tmp_path / "train.jsonl"), read_tasks(tmp_path / "val.jsonl")
    assert not {r["seed"] for r in train} & {r["seed"] for r in val}
    assert train == generate_tasks(Toy(), 200, seed=0, split="train")


def test_make_dataset_for_wordle_reproduces_wordle_split(tmp_path):
    assert main(["make-dataset", "mtrl/Wordle-v0", "--n", "640", "--out", str(tmp_path / "t.jsonl")]) == 0
    assert main(["make-dataset", "mtrl/Wordle-v0", "--n", "128", "--split", "val",
                 "--out", str(tmp_path / "v.jsonl")]) == 0
    train, val = wordle_split()
    assert read_tasks(tmp_path / "t.jsonl") == train and read_tasks(tmp_path / "v.jsonl") == val
    assert main(["make-dataset", "mtrl/Wordle-v0", "--n", "10", "--seed", "0", "--out", str(tmp_path / "s.jsonl")]) == 0
    assert read_tasks(tmp_path / "s.jsonl") == wordle_split(train=10, val=0, seed=0)[0]


@pytest.mark.parametrize("args,message", [
    (["mtrl/Sandbox-Orders-v0"], "declares no named task splits"),
    (["mtrl/Wordle-v0", "--n", "641"], "the Wordle train split has 640 answers"),
    (["mtrl/Wordle-v0", "--difficulty", "noise=1"], "Wordle task splits take no options"),
    (["test/SOP-Toy-v0", "--difficulty", "noise=5"], "'noise' must be one of (0, 1, 2), got 5"),
    (["test/SOP-Toy-v0", "--n", "0"], "the number of tasks must be an int >= 1, got 0"),
    (["mtrl/SOP-Nope-v0"], "unknown environment id 'mtrl/SOP-Nope-v0'"),
])
def test_make_dataset_errors_name_the_problem(tmp_path, capsys, args, message):
    assert main(["make-dataset", *args, "--out", str(tmp_path / "x.jsonl")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


# ----------------------------------------------------------------------------- the harness on the test domain


def test_harness_oracle_and_contract():
    stats = H.check_oracle(100)
    assert stats["mean_steps"] == 3
    H.check_oracle(30, difficulty={"noise": 2, "distractors": False, "flags": 3})


def test_harness_leak_check_passes_a_clean_domain_and_catches_a_leaky_one():
    report = H.check_no_label_leak(300)
    assert report.rules["filing_id"] == "majority" and report.field_accuracy["filing_id"] < 0.05

    class Leaky(Toy):
        def task_inputs(self, world):
            return {"parcel_id": "P-1", "declared_weight": world["parcels"]["P-1"]["weight_kg"]}

    class LeakyEnv(SOPEnv):
        domain = Leaky()

    gymnasium.register("test/SOP-Leaky-v0", entry_point=LeakyEnv)
    try:
        with pytest.raises(AssertionError, match="field 'weight_class' is predictable from the prompt"):
            SOPHarness("test/SOP-Leaky-v0").check_no_label_leak(300)
    finally:
        del gymnasium.registry["test/SOP-Leaky-v0"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_harness_any_text_and_any_arguments_never_raise(data, seed):
    H.check_any_actions(data, seed)
