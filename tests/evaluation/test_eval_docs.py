"""docs/evaluation.md restates code: check it against the code."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from mtrl_gym.cli import build_parser
from mtrl_gym.evaluation.training import REWARD_KEYS, SUCCESS_KEYS

DOC = (Path(__file__).parents[2] / "docs" / "evaluation.md").read_text(encoding="utf-8")


def _eval_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["eval"]


def test_every_cli_option_is_in_the_options_table():
    table = DOC.split("## All options of `mtrl-gym eval`")[1]
    documented = set(re.findall(r"`(-{1,2}[a-z-]+)`", table))
    options = {s for a in _eval_parser()._actions for s in a.option_strings} - {"-h", "--help"}
    assert options == documented


def test_metric_key_lists_match_the_code():
    assert ", ".join(f"`{k}`" for k in REWARD_KEYS) in DOC
    assert ", ".join(f"`{k}`" for k in SUCCESS_KEYS) in DOC
