"""docs/multiagent.md states the envs' constants as the code has them."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")

from mtrl_gym.envs.multiagent import customer_call, wordle_duel  # noqa: E402
from mtrl_gym.envs.sop.customer_service import CustomerService  # noqa: E402

DOC = (Path(__file__).resolve().parents[3] / "docs" / "multiagent.md").read_text()


def test_the_constants_in_the_docs_are_the_codes():
    assert f"`max_cycles` cycles ({wordle_duel.DEFAULT_MAX_CYCLES}" in DOC
    assert f"`max_cycles` ({customer_call.DEFAULT_MAX_CYCLES})" in DOC
    assert f"minus {customer_call.REPEAT_PENALTY} for every question" in DOC
    assert f"`max_questions` ({customer_call.DEFAULT_MAX_QUESTIONS})" in DOC
    assert f"tool-call limit ({CustomerService.max_tool_calls})" in DOC
    assert (wordle_duel.WIN_REWARD, wordle_duel.LOSS_REWARD, wordle_duel.DRAW_REWARD) == (1.0, -1.0, 0.0)
    assert "the first seat to solve +1, the other -1; a draw is 0" in DOC
    assert "at most 600" in DOC and customer_call._MAX_ANSWER_CHARS == 600


def test_every_id_of_the_registry_is_documented():
    from mtrl_gym.registry import list_multiagent_envs

    for env_id in list_multiagent_envs():
        assert f"| `{env_id}` |" in DOC
