"""Issue item 5: broken task files are one-line DatasetErrors naming the file and line."""

from __future__ import annotations

import json

import pytest

from mtrl_gym.datasets import encode_task, read_tasks, write_tasks
from mtrl_gym.error import DatasetError, UnknownEnv
from mtrl_gym.evaluation.tasks import resolve_tasks
from mtrl_gym.envs.profile import task_validator
from mtrl_gym.trainers.grpo.data import load_task_splits

ROW = {"prompt": "Guess the 5-letter word", "answer": "crane", "id": "t0"}


def _line(task=ROW) -> str:
    return json.dumps(encode_task(task)) + "\n"


def test_invalid_utf8_names_its_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(_line().encode() + b'{"prompt": "\xff\xfe"}\n')
    with pytest.raises(DatasetError, match=r"t\.jsonl, line 2: not UTF-8 text \(byte 0xff at offset \d+\)"):
        read_tasks(path)


def test_utf8_bom_is_accepted(tmp_path):
    for suffix in ("jsonl", "json", "csv"):
        path = write_tasks([ROW], tmp_path / f"t.{suffix}")
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
        assert read_tasks(path) == [ROW]


def test_csv_field_over_128_kib_is_read(tmp_path):
    big = dict(ROW, prompt="x" * 300_000)
    path = write_tasks([big], tmp_path / "big.csv")
    assert read_tasks(path)[0]["prompt"] == big["prompt"]


def test_deeply_nested_jsonl_line(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text(_line() + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"deep\.jsonl, line 2: JSON nested too deeply"):
        read_tasks(path)
    path.write_text(json.dumps({"prompt": "{" + '"a":' * 50_000 + "1" + "}" * 50_000}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"deep\.jsonl, line 1, field 'prompt'"):
        read_tasks(path, required=())


def test_directory_is_not_reported_as_missing(tmp_path):
    with pytest.raises(DatasetError, match=r"is a directory, not a task file"):
        read_tasks(tmp_path)


def test_wordle_rows_with_a_bad_answer_fail_with_file_and_line(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text(_line() + _line(dict(ROW, answer="toolong", id="t1")), encoding="utf-8")
    validate = task_validator("mtrl/Wordle-v0")
    with pytest.raises(DatasetError, match=r"w\.jsonl, line 2, field 'prompt': a Wordle answer must be a 5-letter "
                                           r"word a-z, got 'toolong'"):
        read_tasks(path, validate=validate)
    with pytest.raises(DatasetError, match=r"w\.jsonl, line 2"):
        load_task_splits("mtrl/Wordle-v0", str(path), None, train_size=4, val_size=4, split_seed=0)
    with pytest.raises(DatasetError, match=r"w\.jsonl, line 2"):
        resolve_tasks("mtrl/Wordle-v0", tasks=str(path))


def test_sop_rows_are_checked_by_their_env(tmp_path):
    path = write_tasks([{"seed": 3}, {"seed": "x"}], tmp_path / "s.jsonl")
    with pytest.raises(DatasetError, match=r"s\.jsonl, line 2, field 'prompt': .*'seed' must be an int"):
        resolve_tasks("mtrl/SOP-DangerousGoods-v0", tasks=str(path))


@pytest.mark.parametrize("bad, message", [
    ({"difficulty": {"nois": 1}}, r"unknown difficulty knob 'nois' for DangerousGoods\. Did you mean 'noise'"),
    ({"difficulty": {"noise": 7}}, r"difficulty knob 'noise' must be one of \(0, 1, 2\), got 7"),
    ({"difficulty": {"noise": "high"}}, r"difficulty knob 'noise' .* must be of type int"),
    ({"difficulty": "hard"}, r"'difficulty' must be an object, got 'hard'"),
    ({"dificulty": {"noise": 1}}, r"unknown field 'dificulty' \(did you mean 'difficulty'\?\); an SOP task row has "
                                  r"the fields id, seed, difficulty, prompt, answer"),
    ({"prompt": ["x"]}, r"'prompt' must be a string"),
    ({"answer": {"x": 1}}, r"'answer' must be an object with the keys \["),
])
def test_sop_rows_are_checked_field_by_field_with_file_and_line(tmp_path, bad, message):
    """The issue's probe: a misspelt option passed read_tasks and failed only at reset."""
    from mtrl_gym.envs.sop.tasks import generate_tasks
    from mtrl_gym.registry import make

    env = make("mtrl/SOP-DangerousGoods-v0")
    good = generate_tasks(env.unwrapped.domain, 2, seed=0)
    env.close()
    path = write_tasks([good[0], {**good[1], **bad}], tmp_path / "s.jsonl")
    validate = task_validator("mtrl/SOP-DangerousGoods-v0")
    with pytest.raises(DatasetError, match=r"s\.jsonl, line 2, field 'prompt': task 'sop-dangerous-goods-train-00001': "
                                           + message):
        read_tasks(path, validate=validate)
    with pytest.raises(DatasetError, match=r"s\.jsonl, line 2"):
        resolve_tasks("mtrl/SOP-DangerousGoods-v0", tasks=str(path))
    assert len(read_tasks(write_tasks(good, tmp_path / "good.jsonl"), validate=validate)) == 2


def test_an_sop_row_id_must_be_text(tmp_path):
    path = write_tasks([{"seed": 3, "id": 7}], tmp_path / "s.jsonl")
    with pytest.raises(DatasetError, match=r"s\.jsonl, line 1, field 'prompt': task 7: 'id' must be a string, got 7"):
        resolve_tasks("mtrl/SOP-DangerousGoods-v0", tasks=str(path))


def test_an_sop_row_with_a_misspelt_field_is_refused_at_reset_too():
    from mtrl_gym.envs.sop.tasks import generate_tasks
    from mtrl_gym.error import InvalidTask
    from mtrl_gym.registry import make

    env = make("mtrl/SOP-DangerousGoods-v0")
    row = generate_tasks(env.unwrapped.domain, 1, seed=0)[0]
    with pytest.raises(InvalidTask, match=r"unknown field 'sead' \(did you mean 'seed'\?\)"):
        env.reset(options={"task": {**row, "sead": 1}})
    env.close()


def test_task_validator_lookup():
    assert task_validator("mtrl/Sandbox-Shop-v0") is not None
    with pytest.raises(UnknownEnv, match="mtrl/Wordle-v0"):
        task_validator("mtrl/Wordl-v0")
    assert task_validator("CartPole-v1") is None
