"""The mtrl-gym command line: foundation commands."""

import subprocess
import sys

from mtrl_gym.cli import main


def test_solve_prints_success_rate_and_mean_turns(capsys):
    assert main(["solve", "--split", "val"]) == 0
    out = capsys.readouterr().out
    assert "tasks:        128" in out and "success rate: 100.0% (128/128)" in out and "mean turns:" in out


def test_solve_plays_any_env_with_a_solver_and_refuses_others(capsys):
    assert main(["solve", "mtrl/SOP-DangerousGoods-v0", "--limit", "2"]) == 0
    assert "success rate: 100.0% (2/2)" in capsys.readouterr().out
    assert main(["solve", "mtrl/Sandbox-Weather-v0", "--split", "seeds:1"]) == 2
    assert "no reference policy 'solver'" in capsys.readouterr().err


def test_solve_on_a_task_file(tmp_path, capsys):
    from mtrl_gym.datasets import write_tasks

    write_tasks([{"prompt": "p", "answer": "paste", "id": "a"}], tmp_path / "t.csv")
    assert main(["solve", "mtrl/Wordle-Hard-v0", "--tasks", str(tmp_path / "t.csv")]) == 0
    assert "success rate: 100.0% (1/1)" in capsys.readouterr().out


def test_bad_task_file_is_a_clean_error(tmp_path, capsys):
    (tmp_path / "t.jsonl").write_text("{oops\n")
    assert main(["solve", "--tasks", str(tmp_path / "t.jsonl")]) == 2
    assert "mtrl-gym solve: error:" in capsys.readouterr().err


def test_play_reads_moves_from_stdin():
    moves = 'crane\n<tool_call>{"name": "guess_word", "arguments": {"guess": "paste"}}</tool_call>\n'
    res = subprocess.run([sys.executable, "-m", "mtrl_gym.cli", "play", "mtrl/Wordle-v0", "--task",
                          '{"answer": "paste"}', "--show-system"], input=moves, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "=== system ===" in res.stdout and "Guess 1/6: CRANE" in res.stdout
    assert "Solved in 2 guesses." in res.stdout and "Episode over: reward +1.450" in res.stdout


def test_play_unknown_env_is_a_clean_error():
    res = subprocess.run([sys.executable, "-m", "mtrl_gym.cli", "play", "mtrl/Wordl-v0"], capture_output=True, text=True)
    assert res.returncode == 2 and "Did you mean 'mtrl/Wordle-v0'" in res.stderr


def test_envs_lists_ids(capsys):
    assert main(["envs"]) == 0
    assert "mtrl/Wordle-v0" in capsys.readouterr().out.split()
