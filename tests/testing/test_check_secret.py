"""The kit names its secret and says what it skipped: ``--secret`` / the profile hook, SKIP lines,
the secret compared across processes, corpus cases at the declared action length, and
``PYTHONHASHSEED=random``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import harden_toy_envs  # noqa: F401 - registers the harden_toys/* envs in this process
import pytest

from mtrl_gym.cli import main
from mtrl_gym.testing import check_text_env

HERE = str(Path(__file__).resolve().parent)
ROOT = str(Path(HERE).parents[1])
TOY = ["--import", "harden_toy_envs", "--corpus-size", "2000", "--shrink-examples", "0"]


@pytest.fixture(autouse=True)
def toy_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])))


def _result(report, name):
    return next(c for c in report.checks if c.name == name)


def test_pythonhashseed_random_is_a_valid_setting_of_the_check():
    from mtrl_gym.testing.kit import other_hashseed

    assert other_hashseed("random") == other_hashseed(None) == "12345" and other_hashseed("7") == "12352"
    env = {**os.environ, "PYTHONHASHSEED": "random", "PYTHONPATH": os.pathsep.join([HERE, ROOT])}
    proc = subprocess.run([sys.executable, "-m", "mtrl_gym.cli", "check", "harden_toys/Toy-v0", *TOY],
                          capture_output=True, text=True, env=env, timeout=300, cwd=HERE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "PASS  determinism  seed 0, scripted episode: " in proc.stdout
    assert "in a fresh interpreter (PYTHONHASHSEED=12345)" in proc.stdout


def test_the_cli_says_the_leak_check_was_skipped_and_runs_it_with_secret(capsys):
    assert main(["check", "harden_toys/DebugHint-v0", *TOY]) == 0
    out = capsys.readouterr().out
    assert "  SKIP  leak         no secret named: pass secret= (mtrl-gym check --secret" in out
    assert main(["check", "harden_toys/DebugHint-v0", *TOY, "--secret", "harden_toy_envs:secret"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  leak" in out and "appears in info of step 1" in out and "SKIP" not in out
    assert main(["check", "harden_toys/DebugHint-v0", *TOY, "--secret", "harden_toy_envs.secret"]) == 1


def test_a_secret_registered_as_a_profile_hook_is_used_without_the_flag(capsys):
    assert main(["check", "harden_toys/ProfiledLeaky-v0", *TOY]) == 1
    out = capsys.readouterr().out
    assert "FAIL  leak" in out and "appears in info of step 1" in out
    assert main(["check", "harden_toys/ProfiledLeaky-v0", *TOY, "--secret", "profile"]) == 1
    assert main(["check", "harden_toys/DebugHint-v0", *TOY, "--secret", "profile"]) == 2
    assert "DebugHint-v0's profile has no `secret` hook" in capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ("harden_toy_envs:no_such", r"secret 'harden_toy_envs:no_such': 'harden_toy_envs' has no 'no_such'"),
    ("no_such_module_xyz:f", r"cannot import 'no_such_module_xyz'"),
    ("harden_toy_envs:CHARSET", r"is a str, not a function of the env"),
    ("secret", r"give a dotted path to a function"),
])
def test_a_bad_secret_path_is_one_clear_error(capsys, spec, message):
    import re

    assert main(["check", "harden_toys/Toy-v0", *TOY, "--secret", spec]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_the_determinism_check_compares_the_secret_drawn_in_hash_order():
    seeds = list(range(6))
    report = check_text_env("harden_toys/HashSecret-v0", imports=["harden_toy_envs"], corpus_size=2_000,
                            secret="harden_toy_envs:secret", seed=seeds, shrink_examples=0)
    result = _result(report, "determinism")
    assert not result.ok and "the secret after reset differs in a fresh interpreter" in result.detail, str(report)
    # a correct env with the same extractor passes, and says the secret was compared
    good = _result(check_text_env("harden_toys/Toy-v0", imports=["harden_toy_envs"], corpus_size=2_000,
                                  secret=harden_toy_envs.secret, seed=seeds), "determinism")
    assert good.ok and "scripted episode and the secret: " in good.detail, good.detail
    # a lambda cannot be read in the other interpreter: the report says so rather than pretending
    lam = _result(check_text_env("harden_toys/HashSecret-v0", imports=["harden_toy_envs"], corpus_size=2_000,
                                 secret=lambda env: env.unwrapped.secret, seed=seeds), "determinism")
    assert lam.ok and "the secret was not compared (a lambda" in lam.detail


def test_the_corpus_reaches_the_declared_action_length():
    report = check_text_env("harden_toys/LongRaise-v0", corpus_size=4_000, processes=False, shrink_examples=0)
    result = _result(report, "corpus")
    assert not result.ok and "@50000" in result.detail and "raised ValueError: action too long" in result.detail
    assert 40_000 < len(result.example) <= 50_000
    ok = _result(check_text_env("harden_toys/Toy-v0", corpus_size=4_000, processes=False), "corpus")
    assert ok.ok and " at the action space's max_length 100000" in ok.detail


def test_an_env_instance_reports_the_checks_it_skipped():
    report = check_text_env(harden_toy_envs.Toy(), corpus_size=2_000)
    assert report.ok and [c.name for c in report.checks] == ["gymnasium", "corpus"]
    assert list(report.skipped) == ["determinism", "leak"]
    assert "  SKIP  determinism  an env instance" in str(report)


def test_the_pytest_form_reports_a_skipped_leak_check_as_skipped(tmp_path):
    from importlib.metadata import entry_points

    (tmp_path / "test_user_env.py").write_text(
        "from mtrl_gym.testing import env_contract_tests\n"
        "test_shop = env_contract_tests('mtrl/Sandbox-Shop-v0', corpus_size=1_000, processes=False)\n")
    installed = any(e.value == "mtrl_gym.testing.pytest_plugin" for e in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "mtrl_gym.testing.pytest_plugin"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", *plugin, "-p", "no:cacheprovider",
                           str(tmp_path / "test_user_env.py")], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0 and "3 passed, 1 skipped" in proc.stdout, proc.stdout[-2000:]
    assert "mtrl/Sandbox-Shop-v0: leak: no secret named" in proc.stdout


def test_a_broken_extractor_is_a_failed_line_not_a_traceback(capsys):
    assert main(["check", "harden_toys/Toy-v0", *TOY, "--secret", "os:getcwd"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  leak         could not be checked: the secret extractor raised TypeError: " in out
    from mtrl_gym.testing import check_multiagent_env

    report = check_multiagent_env("mtrl/WordleDuel-v0", secret=lambda env: "abcdefgh", corpus_size=300,
                                  processes=False)
    assert _result(report, "leak").detail == ("could not be checked: a multi-agent secret extractor returns "
                                              "{seat: value or list of values}, got str")
