"""Task files: the managed-service row format in every file format, splits, errors."""

import hashlib
import json

import pytest

from mtrl_gym.datasets import decode_task, encode_task, read_tasks, write_tasks
from mtrl_gym.envs.wordle.profile import wordle_split
from mtrl_gym.error import DatasetError, InvalidTask

# SHA-256 of the Amazon SageMaker AI multi-turn RL Wordle sample's training-data.jsonl and validation-data.jsonl.
TRAIN_SHA = "9e66ef0f76847e82b14cb715d71224b895f565abf47369b5e52f036455dd0d18"
VAL_SHA = "2503ae551e3c75448645296a319dc35b70f502c3b0e3a9d86a13f21e792bcea0"


def _jsonl(tasks):
    return "".join(json.dumps(encode_task(t)) + "\n" for t in tasks).encode()


def test_wordle_split_reproduces_the_service_files_byte_for_byte(tmp_path):
    train, val = wordle_split()
    assert hashlib.sha256(_jsonl(train)).hexdigest() == TRAIN_SHA
    assert hashlib.sha256(_jsonl(val)).hexdigest() == VAL_SHA
    assert not {t["answer"] for t in train} & {t["answer"] for t in val}
    write_tasks(train, tmp_path / "train.jsonl")
    assert hashlib.sha256((tmp_path / "train.jsonl").read_bytes()).hexdigest() == TRAIN_SHA


def test_wordle_split_other_sizes_and_seeds():
    a, b = wordle_split(train=10, val=5, seed=1)
    assert len(a) == 10 and len(b) == 5 and a != wordle_split(train=10, val=5)[0]
    with pytest.raises(ValueError, match=r"`train` \+ `val` must be between 0 and 1923 answers, got 2000 \+ 5"):
        wordle_split(train=2000, val=5)


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_round_trip_every_format(tmp_path, suffix):
    tasks = [{"prompt": "Guess the 5-letter word", "answer": "riser", "id": "t0"},
             {"prompt": 'quotes " and, commas\nnewline', "answer": "swoon", "id": "t1", "extra": [1, 2]}]
    path = write_tasks(tasks, tmp_path / f"tasks{suffix}")
    assert read_tasks(path) == tasks


def test_decode_accepts_encoded_rows_dicts_and_strings():
    task = {"prompt": "p", "answer": "paste", "id": "x"}
    assert decode_task(encode_task(task)) == task
    assert decode_task(task) == task
    assert decode_task(json.dumps(task)) == task
    with pytest.raises(InvalidTask, match=r"task is missing field\(s\) \['id'\]"):
        decode_task({"prompt": "p", "answer": "a"}, required=("prompt", "answer", "id"))
    with pytest.raises(InvalidTask, match="prompt is not valid JSON"):
        decode_task({"prompt": "{broken"})


def test_broken_jsonl_row_names_file_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    rows = [encode_task({"prompt": "p", "answer": "riser", "id": "a"}), {"prompt": '{"answer": "x"}'}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl, line 2, field 'prompt': task is missing field\(s\) \['prompt', 'id'\]; it has \['answer'\]"):
        read_tasks(path)
    path.write_text(json.dumps(rows[0]) + "\n\n{oops\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl, line 3: invalid JSON"):
        read_tasks(path)
    path.write_text('{"question": "x"}\n')
    with pytest.raises(DatasetError, match=r"line 1, field 'prompt': row has no 'prompt' field"):
        read_tasks(path)


def test_other_broken_files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="the file holds no task rows"):
        read_tasks(tmp_path / "empty.jsonl")
    (tmp_path / "t.csv").write_text("question\nx\n")
    with pytest.raises(DatasetError, match=r"the CSV header must have a 'prompt' column, got \['question'\]"):
        read_tasks(tmp_path / "t.csv")
    (tmp_path / "t.json").write_text('{"prompt": "x"}')
    with pytest.raises(DatasetError, match="a JSON task file must hold an array of rows, got dict"):
        read_tasks(tmp_path / "t.json")
    (tmp_path / "t.parquet").write_bytes(b"not parquet")
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        read_tasks(tmp_path / "t.parquet")
    with pytest.raises(DatasetError, match=r"cannot tell the format from the suffix '\.txt'"):
        write_tasks([], tmp_path / "t.txt")
    with pytest.raises(DatasetError, match="no such file"):
        read_tasks(tmp_path / "missing.jsonl")


def test_csv_error_line_numbers(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('prompt\n"{""prompt"": ""p"", ""answer"": ""a"", ""id"": ""1""}"\n"{""answer"": 1}"\n')
    with pytest.raises(DatasetError, match=r"t\.csv, line 3, field 'prompt'"):
        read_tasks(path)
