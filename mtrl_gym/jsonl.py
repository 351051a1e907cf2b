"""Reading JSON Lines files that a run may still be writing: one tolerant reader for every log.

Trajectory logs, episode recordings, evaluation records and ``metrics.jsonl`` are appended
one line at a time, so a process killed mid-write leaves a last line without its newline.
:func:`iter_jsonl` skips exactly that line when it does not parse, and reports any other
broken line as a :class:`~mtrl_gym.error.DatasetError` naming the file and line. It reads
one line at a time (memory is bounded by the longest line, not the file).

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "log.jsonl"
>>> _ = path.write_text('{"step": 1}\\n\\n{"step": 2}\\n{"st', encoding="utf-8")
>>> list(iter_jsonl(path))
[(1, {'step': 1}), (3, {'step': 2})]
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from mtrl_gym.error import DatasetError

__all__ = ["iter_jsonl"]


def iter_jsonl(path: str | os.PathLike, *, tolerate_cut_tail: bool = True) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for every non-blank line of ``path``.

    With ``tolerate_cut_tail`` (the default) a last line that has no newline and does not
    parse is taken as an interrupted write and skipped; every other line that does not
    parse raises :class:`~mtrl_gym.error.DatasetError`.
    """
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as e:
                if tolerate_cut_tail and not line.endswith("\n"):
                    return  # the last line of a write that was cut off
                raise DatasetError(f"invalid JSON ({e.msg})", path=str(path), line=number) from None
