"""task_rows: task rows of an env's named splits, each pinning the episode it names."""

from __future__ import annotations

import gymnasium
import pytest
from hypothesis import given, settings

import mtrl_gym  # noqa: F401 - registers the ids
from mtrl_gym.error import ConfigError
from mtrl_gym.testing import task_rows

ENV = gymnasium.make("mtrl/SOP-DangerousGoods-v0")


@settings(max_examples=10, deadline=None, database=None)
@given(row=task_rows("mtrl/SOP-DangerousGoods-v0", n=4))
def test_every_drawn_row_pins_its_task(row):
    obs, info = ENV.reset(options={"task": row})
    again, _ = ENV.reset(seed=123, options={"task": row})
    assert info["task_id"] == str(row["id"]) and obs == again


@settings(max_examples=10, deadline=None, database=None)
@given(row=task_rows("mtrl/Wordle-v0", splits=["val"], n=8))
def test_rows_come_from_the_named_split(row):
    assert row["id"].startswith("wordle_val_") and len(row["answer"]) == 5


def test_envs_without_splits_and_unknown_splits_are_refused():
    with pytest.raises(ConfigError, match=r"'mtrl/Sandbox-Shop-v0' has no named task splits .* play it with seeds"):
        task_rows("mtrl/Sandbox-Shop-v0")
    with pytest.raises(ConfigError, match=r"unknown split\(s\) \['test'\] for 'mtrl/Wordle-v0'; its splits: "
                                          r"\['train', 'val', 'all'\]"):
        task_rows("mtrl/Wordle-v0", splits=["test"])
