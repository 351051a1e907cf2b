"""The code blocks of docs/robustness.md and docs/testing.md run (the package's own doctests run
under ``--doctest-modules``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", ["robustness.md", "testing.md"])
def test_doc_code_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / page).read_text(encoding="utf-8"), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, f"docs/{page}", "exec"), {"__name__": "docs_example"})


def test_importing_the_kit_imports_neither_torch_nor_hypothesis():
    import subprocess
    import sys

    code = "import sys, mtrl_gym.testing; print('torch' in sys.modules, 'hypothesis' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False).stdout.split() == ["False",
                                                                                                          "False"]
