"""docs/sop.md against the code: the domain table, the grading table, the doctests of the framework."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium

import mtrl_gym  # noqa: F401 - registers the ids
from mtrl_gym.envs.sop import FIELD_TYPES, SPLITS
from mtrl_gym.registry import list_envs

DOC = (Path(__file__).resolve().parents[3] / "docs" / "sop.md").read_text(encoding="utf-8")
SOP_IDS = [e for e in list_envs() if e.startswith("mtrl/SOP-")]


def table(name):
    """The rows of the markdown table after ``<!-- table: name -->`` as lists of cells."""
    block = DOC.split(f"<!-- table: {name} -->", 1)[1].strip().splitlines()
    rows = []
    for line in block:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows[2:]



def test_the_domain_table_matches_the_registered_domains():
    rows = {r[0].strip("`"): r for r in table("domains")}
    assert sorted(rows) == sorted(SOP_IDS) and len(SOP_IDS) == 13
    for env_id, (_, _, fields, tools, knobs) in rows.items():
        domain = gymnasium.make(env_id).unwrapped.domain
        assert re.findall(r"`(\w+)`", fields) == list(domain.output_schema), env_id
        assert tools == f"{len(domain.tools)} ({len(domain.distractor_tools)})", env_id
        own = [k for k in domain.default_difficulty if k not in ("noise", "distractors")]
        assert re.findall(r"`(\w+)`", knobs) == own, env_id


def test_the_grading_table_covers_every_field_type_and_the_splits_are_documented():
    kinds = [r[0].strip("`") for r in table("normalisation")]
    assert kinds == [*FIELD_TYPES, "nullable"]
    assert "`[0, 2**30)`" in DOC and "`[2**30, 2**31)`" in DOC
    assert SPLITS == {"train": (0, 2**30), "val": (2**30, 2**31)}
