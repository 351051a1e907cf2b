"""Issue item 4: ``mtrl-gym train`` reports config, path, env and model problems before any model
loads, one line each, exit code 2."""

from __future__ import annotations

import re

import pytest

from mtrl_gym.cli import main


def _errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line]


@pytest.mark.parametrize("flags, message", [
    (["--output-dir", "{file}"], r"output_dir '.*afile' is a file, not a folder"),
    (["--env", "mtrl/NoSuch-v0"], r"unknown environment id 'mtrl/NoSuch-v0'"),
    (["--env-kwargs", '{"nope": 1}'], r"env_kwargs \{'nope': 1\} do not fit mtrl/Wordle-v0"),
    (["--env-kwargs", "{bad"], r"`env_kwargs`: cannot parse '\{bad' as JSON or YAML"),
    (["--model", "/nonexistent"], r"model '/nonexistent': no such model folder"),
    (["--train-tasks", "{bad_tasks}"], r"bad\.jsonl, line 1: not UTF-8 text"),
    (["--train-tasks", "{wordle_tasks}"], r"w\.jsonl, line 1, field 'prompt': a Wordle answer must be"),
    (["--train-tasks", "{tmp}"], r"is a directory, not a task file"),
    (["--env-wrappers", '["NoSuchWrapper"]'], r"unknown env wrapper 'NoSuchWrapper'"),
])
def test_train_fails_early_in_one_line(tmp_path, capsys, no_model_load, flags, message):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "bad.jsonl").write_bytes(b'{"prompt": "\xff"}\n')
    (tmp_path / "w.jsonl").write_text('{"prompt": "{\\"answer\\": \\"xx\\", \\"id\\": \\"a\\"}"}\n')
    names = {"file": tmp_path / "afile", "bad_tasks": tmp_path / "bad.jsonl", "wordle_tasks": tmp_path / "w.jsonl",
             "tmp": tmp_path}
    argv = ["train", "--output-dir", str(tmp_path / "run"), "--no-progress",
            *[f.format(**names) if f.startswith("{") and f[1:-1] in names else f for f in flags]]
    assert main(argv) == 2
    errors = _errors(capsys)
    assert errors and all(e.startswith("mtrl-gym train: error: ") for e in errors), errors
    assert any(re.search(message, e) for e in errors), errors


def test_all_problems_are_reported_in_one_pass(tmp_path, capsys, no_model_load):
    (tmp_path / "afile").write_text("x")
    assert main(["train", "--env", "mtrl/NoSuch-v0", "--model", "/nonexistent", "--output-dir",
                 str(tmp_path / "afile"), "--no-progress"]) == 2
    errors = _errors(capsys)
    assert len(errors) == 3 and "output_dir" in errors[0] and "NoSuch" in errors[1] and "/nonexistent" in errors[2]


def test_output_dir_below_a_file(tmp_path, capsys, no_model_load):
    (tmp_path / "afile").write_text("x")
    assert main(["train", "--output-dir", str(tmp_path / "afile" / "sub"), "--no-progress"]) == 2
    assert re.search(r"output_dir '.*afile/sub': cannot create it", _errors(capsys)[0])
