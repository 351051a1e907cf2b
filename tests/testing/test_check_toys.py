"""The check kit (mtrl_gym.testing.check_text_env, ``mtrl-gym check``) catches each broken toy env."""

from __future__ import annotations

import os
from pathlib import Path

import harden_toy_envs  # noqa: F401 - registers the harden_toys/* envs in this process
import pytest
from kit_secrets import SECRETS, SOP_IDS

from mtrl_gym.cli import main
from mtrl_gym.registry import list_envs
from mtrl_gym.testing import check_text_env

HERE = str(Path(__file__).resolve().parent)


@pytest.fixture(autouse=True)
def toy_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])))


def _check(name, **kw):
    return check_text_env(f"harden_toys/{name}-v0", imports=["harden_toy_envs"], corpus_size=4_000,
                          secret=lambda env: env.unwrapped.secret, **kw)


def _result(report, check):
    return next(c for c in report.checks if c.name == check)


def test_a_correct_env_passes_every_check():
    report = _check("Toy")
    assert report.ok, str(report)
    assert [c.name for c in report.checks] == ["gymnasium", "corpus", "determinism", "leak"]


@pytest.mark.parametrize("name, check, message, example", [
    ("Leaky", "leak", r"the secret '.*-word' appears in info of step 1; shrunk by hypothesis to 1 action\(s\): "
                      r"\[''\]$", [""]),
    ("HashOrder", "determinism", r"seed 0: step 1 differs in a fresh interpreter", None),
    ("SurrogateCrash", "corpus", r"surrogate/raw \(\d+ chars\) raised UnicodeEncodeError: .*; shrunk by hypothesis "
                                 r"to 1 chars: '\\ud800'$", "\ud800"),
    ("NonJSONInfo", "corpus", r"info is not JSON \(TypeError: Object of type object.*; shrunk by hypothesis to "
                              r"0 chars: ''$", ""),
])
def test_each_broken_env_is_caught_with_a_readable_line_and_a_shrunk_example(name, check, message, example):
    import re

    report = _check(name)
    result = _result(report, check)
    assert not result.ok and not report.ok
    assert re.search(message, result.detail), result.detail
    assert result.example == example
    with pytest.raises(AssertionError, match=check):
        report.raise_on_failure()


def test_a_quadratic_env_is_caught_by_the_step_bound_with_the_shortest_slow_text():
    # 20k characters cost the quadratic toy >= 40 ms even on a quiet machine; a linear env takes < 1 ms.
    # The shortest slow text is near where the cost crosses the bound (~8k characters here): a
    # thousand characters cost it well under 1 ms, so shrinking cannot end below that.
    result = _result(check_text_env("harden_toys/Quadratic-v0", corpus_size=20_000, step_bound_s=0.01,
                                    processes=False), "corpus")
    assert not result.ok and "over the 10 ms bound; shrunk by hypothesis to" in result.detail
    small = result.example
    assert 1_000 < len(small) < 20_000 and result.detail.endswith(f"{len(small)} chars: {small[:1]!r} * {len(small)}")


def test_the_shrinking_budget_is_settable():
    report = _check("SurrogateCrash", shrink_examples=0)
    result = _result(report, "corpus")
    assert "shrunk" not in result.detail and len(result.example) > 1_000
    tight = _result(_check("SurrogateCrash", shrink_deadline_s=0.0), "corpus")
    assert len(tight.example) > 1_000  # no time for a search: the failing case itself


def test_bad_arguments_name_the_value_and_the_fix():
    from mtrl_gym.error import ConfigError

    with pytest.raises(ConfigError, match=r"`seed` must be an int >= 0 or a non-empty list of them, got \[\]"):
        check_text_env("harden_toys/Toy-v0", seed=[])
    with pytest.raises(ConfigError, match=r"`policies` names \['oracle'\], which mtrl/Wordle-v0's profile does not "
                                          r"have; it has: 'solver', 'random', 'teacher'"):
        check_text_env("mtrl/Wordle-v0", policies=["oracle"])


def test_a_structured_secret_is_found_as_a_value_and_as_json_text():
    from mtrl_gym.testing.leak import secret_checks

    checks, problem = secret_checks([{"order": "A-1", "n": 2}, "alpha-word", None])
    assert not problem and [t for t, _ in checks] == ['{"n": 2, "order": "A-1"}', "alpha-word"]
    found = checks[0][1]
    assert found({"debug": [{"order": "A-1", "n": 2}]})          # the object itself inside info
    assert found('expected {"n":2,"order":"A-1"}')              # its JSON text, compact
    assert not found({"order": "A-1"}) and not found("n 2 order A-1")
    assert secret_checks("a")[1] == "the secret 'a' is too short to search for"


def test_the_cli_prints_one_line_per_check_and_exits_1_on_a_failure(capsys):
    assert main(["check", "harden_toys/Leaky-v0", "--import", "harden_toy_envs", "--corpus-size", "2000"]) == 0
    out = capsys.readouterr().out
    assert "PASS  gymnasium" in out and "PASS  determinism" in out
    assert main(["check", "harden_toys/SurrogateCrash-v0", "--import", "harden_toy_envs",
                 "--corpus-size", "2000"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  corpus" in out and "shrunk by hypothesis to 1 chars: '\\ud800'" in out
    assert main(["check", "harden_toys/SurrogateCrash-v0", "--import", "harden_toy_envs",
                 "--corpus-size", "2000", "--shrink-examples", "0"]) == 1
    assert "shrunk" not in capsys.readouterr().out
    assert main(["check", "mtrl/NoSuch-v0"]) == 2


@pytest.mark.parametrize("env_id", [e for e in list_envs() if e not in SOP_IDS])  # SOP: tests/envs/sop/test_sop_kit.py
def test_every_registered_env_passes_the_kit(env_id):
    report = check_text_env(env_id, corpus_size=5_000, secret=SECRETS.get(env_id))
    report.raise_on_failure()
    assert len(report.checks) == 3 + (env_id in SECRETS)


# The three-line form a user writes (here on a correct toy env and on the trainer tests' toy env).
test_toy_contract = __import__("mtrl_gym.testing", fromlist=["x"]).env_contract_tests(
    "harden_toys/Toy-v0", secret=lambda env: env.unwrapped.secret, imports=["harden_toy_envs"], corpus_size=3_000)


def test_a_users_three_line_test_file_runs_under_the_plugin(tmp_path):
    import subprocess
    import sys

    (tmp_path / "test_user_env.py").write_text(
        "from mtrl_gym.testing import env_contract_tests\n"
        "test_shop = env_contract_tests('mtrl/Sandbox-Shop-v0', corpus_size=2_000)\n"
        "def test_fixture(check_text_env):\n"
        "    assert check_text_env('mtrl/Sandbox-Shop-v0', corpus_size=1_000, processes=False).ok\n")
    from importlib.metadata import entry_points

    # Installed (pip install -e .), the plugin loads through its pytest11 entry point; else name it.
    installed = any(e.value == "mtrl_gym.testing.pytest_plugin" for e in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "mtrl_gym.testing.pytest_plugin"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", *plugin,
                           "-p", "no:cacheprovider", str(tmp_path / "test_user_env.py")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0 and "4 passed" in proc.stdout, proc.stdout[-2000:]


def test_the_suites_toy_env_passes_the_kit(monkeypatch):
    import gymnasium

    tests_dir = str(Path(HERE).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([tests_dir, os.environ["PYTHONPATH"]]))
    if "harden_toys/Vowel-v0" not in gymnasium.registry:
        gymnasium.register("harden_toys/Vowel-v0", entry_point="toy_envs:VowelEnv", disable_env_checker=True)
    code = ("import gymnasium; gymnasium.register('harden_toys/Vowel-v0', entry_point='toy_envs:VowelEnv', "
            "disable_env_checker=True)")
    module = Path(HERE) / "harden_vowel_registration.py"
    assert module.read_text() == code + "\n"
    check_text_env("harden_toys/Vowel-v0", corpus_size=5_000, imports=["harden_vowel_registration"]).raise_on_failure()


def test_the_stateful_machine_catches_a_broken_env():
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from mtrl_gym.testing import episode_machine

    with pytest.raises((UnicodeEncodeError, TypeError)):
        run_state_machine_as_test(episode_machine("harden_toys/SurrogateCrash-v0"), settings=settings(
            max_examples=200, stateful_step_count=8, deadline=None, database=None, derandomize=True,
            suppress_health_check=list(HealthCheck)))
