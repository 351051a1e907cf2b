"""docs/sandbox.md restates code constants: its tables and examples are checked against the code."""

from __future__ import annotations

import re
from pathlib import Path


from mtrl_gym.envs.sandbox import (CASSETTE_MODES, CHECKERS, DEFAULT_PATTERNS, DEFAULT_SECRET_KEYS, ERROR_STATUSES,
                                   ON_MISSING, STATUSES, ToolSandboxEnv, tool)
from mtrl_gym.envs.sandbox import cassette as cassette_module
from mtrl_gym.envs.sandbox import grading

DOC = (Path(__file__).parents[3] / "docs" / "sandbox.md").read_text(encoding="utf-8")


def table(name: str) -> list[list[str]]:
    """Rows (cells) of the markdown table after ``<!-- table: name -->``."""
    block = DOC.split(f"<!-- table: {name} -->", 1)[1].strip().splitlines()
    rows = []
    for line in block[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))])
    return rows


def names(name: str) -> list[str]:
    return [re.fullmatch(r"`([^`]+)`", row[0]).group(1) for row in table(name)]


def test_statuses_table():
    assert names("statuses") == list(STATUSES)
    assert {r[0].strip("`") for r in table("statuses") if r[2] == "yes"} == set(ERROR_STATUSES)


def test_checkers_table():
    assert names("checkers") == list(CHECKERS)
    for row in table("checkers"):
        documented = set(re.findall(r"`(\w+)`", row[3]))
        assert documented == set(grading._OPTIONS[row[0].strip("`")]), row


def test_mode_and_policy_tables():
    assert names("modes") == list(CASSETTE_MODES)
    assert names("on-missing") == list(ON_MISSING)


def test_file_format_tables():
    assert names("header-fields") == list(cassette_module._HEADER_FIELDS)
    assert names("entry-fields") == list(cassette_module._ENTRY_FIELDS)


def test_redaction_tables():
    assert names("patterns") == list(DEFAULT_PATTERNS)
    listed = DOC.split("under any key ending in", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed.split(":", 1)[1])) == set(DEFAULT_SECRET_KEYS)


def test_step_info_table_matches_a_real_step():
    @tool
    def ping() -> str:
        """Pong."""
        return "pong"

    env = ToolSandboxEnv(tools=[ping], tasks=[{"prompt": "p", "answer": 1}])
    env.reset(seed=0)
    info = env.step("ping()")[4]
    assert set(names("step-info")) == set(info)


def test_quick_start_runs_as_documented():
    code = DOC.split("```python", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(code, "docs/sandbox.md", "exec"), scope)  # noqa: S102 - our own documentation
    assert scope["obs"] == "Final answer received.\nYour answer is correct. The episode is over."
    assert scope["reward"] == 1.0 and scope["info"]["grade"]["passed"] is True

