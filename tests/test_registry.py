"""Registration, lookup errors, check_env for every id, and a torch-free import."""

import subprocess
import sys

import gymnasium
import pytest
from env_checks import strict_check_env

import mtrl_gym
from mtrl_gym.error import UnknownEnv
from mtrl_gym.registry import list_envs


def test_list_envs_has_wordle_ids():
    ids = list_envs()
    assert {"mtrl/Wordle-v0", "mtrl/Wordle-Hard-v0"} <= set(ids) and ids == sorted(ids)
    assert all(i in gymnasium.registry for i in ids)


@pytest.mark.parametrize("env_id", list_envs())
def test_check_env_passes_for_every_registered_id(env_id):
    env = gymnasium.make(env_id)
    strict_check_env(env.unwrapped)
    env.close()


def test_unknown_id_suggests_close_matches():
    with pytest.raises(UnknownEnv, match=r"unknown environment id 'mtrl/Wordel-v0'\. Did you mean 'mtrl/Wordle-v0'"):
        mtrl_gym.make("mtrl/Wordel-v0")
    with pytest.raises(UnknownEnv, match="Did you mean .*'mtrl/Wordle-v0'"):
        mtrl_gym.make("wordle")


def test_make_passes_kwargs():
    env = mtrl_gym.make("mtrl/Wordle-v0", invalid_word="play")
    assert env.unwrapped.invalid_word == "play"


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_module_prefix_imports_the_package_implicitly():
    out = _run("import gymnasium; env = gymnasium.make('mtrl_gym:mtrl/Wordle-v0'); print(env.reset(seed=1)[0][:10])")
    assert out == "Let's play"


def test_import_does_not_import_torch():
    out = _run("import sys, mtrl_gym, gymnasium; gymnasium.make('mtrl/Wordle-v0').reset(seed=0); "
               "import mtrl_gym.datasets, mtrl_gym.parsing; print('torch' in sys.modules)")
    assert out == "False"
