"""Every SOP domain (and the test domain) through the kit, with the suite's secret extractor.

These are the checks the SOP harness used to make itself: Gymnasium's checker with warnings
as failures (was ``check_env``), hostile text answered in under 5 s a step (was
``check_hostile_text``, 120k characters at most; the kit's corpus here is 100k a case), the
same seed giving the same episode, the oracle's included, in another process (was
``check_same_seed`` and the ``_Worker`` fingerprints, at the difficulty corners too), JSON
``info``, and the expected answer never shown before the end (was ``label not in obs``).
"""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium
import pytest
from harness import SOPHarness
from kit_secrets import SOP_IDS, sop_secret
from toy_domain import ToyEnv

from mtrl_gym.testing import check_text_env

HERE = str(Path(__file__).resolve().parent)
CHECKS = ["gymnasium", "corpus", "determinism", "leak"]


@pytest.fixture(autouse=True)
def here_on_path(monkeypatch):  # the fresh interpreter imports toy_domain
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])))


@pytest.mark.parametrize("env_id", SOP_IDS)
def test_every_sop_domain_passes_the_kit(env_id):
    report = check_text_env(env_id, corpus_size=100_000, step_bound_s=5.0, secret=sop_secret, seed=[0, 1, 2],
                            policies=["solver"])
    report.raise_on_failure()
    assert [c.name for c in report.checks] == CHECKS


@pytest.mark.parametrize("env_id", SOP_IDS)
def test_every_sop_domain_passes_the_kit_at_its_difficulty_corners(env_id):
    for corner in SOPHarness(env_id).extremes():
        report = check_text_env(env_id, corpus_size=2_000, env_kwargs={"difficulty": corner}, secret=sop_secret,
                                seed=[3, 4], policies=["solver"])
        assert report.ok, f"{corner}\n{report}"


@pytest.mark.parametrize("noise", [0, 1, 2])
def test_the_test_domain_passes_the_kit(noise):
    report = check_text_env("test/SOP-Toy-v0", imports=["toy_domain"], corpus_size=20_000, step_bound_s=5.0,
                            secret=sop_secret, seed=[0, 5, 9], env_kwargs={"difficulty": {"noise": noise}})
    report.raise_on_failure()
    assert "policy 'solver'" in report.checks[2].detail


class ShowsTheAnswer(ToyEnv):
    """A broken SOP env: its step info carries the expected answer (a debugging leftover)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "debug": {"expected": dict(self.expected_answer)}}


def test_the_sop_extractor_catches_an_answer_in_info():
    gymnasium.register("test/SOP-ShowsTheAnswer-v0", entry_point=ShowsTheAnswer)
    try:
        report = check_text_env("test/SOP-ShowsTheAnswer-v0", corpus_size=1_000, processes=False, secret=sop_secret)
    finally:
        del gymnasium.registry["test/SOP-ShowsTheAnswer-v0"]
    leak = report.checks[-1]
    assert not leak.ok and "appears in info of step 1; shrunk by hypothesis to 1 action(s): ['']" in leak.detail
