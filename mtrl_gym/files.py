"""Files written whole or not at all, and compared by content.

:func:`atomic_path` and :func:`write_text_atomic` write a new version of a file (a config, a
record, a JSONL of trajectories) into a hidden file beside it and rename it into place, so a
process stopped mid-write leaves the old version or none, never a half. The digests serve the
checks that compare what a result was made from by content rather than by path (checkpoint
manifests, the evaluation store's adapter check, the CPU recipe's stage records).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "a.txt").write_text("one")
>>> folder_sha256(d) == folder_sha256(d, ["a.txt", "missing.txt"]) != folder_sha256(d, ["missing.txt"])
True
>>> folder_sha256(d, ["missing.txt"]) is None
True
>>> write_text_atomic(d / "a.txt", "two").read_text(), sorted(p.name for p in d.iterdir())
('two', ['a.txt'])
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "write_text_atomic", "file_sha256", "folder_sha256"]


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A hidden file beside ``path`` (``.<name>.part``) to write ``path``'s new version into:
    renamed onto ``path`` when the block ends, removed if it raises."""
    path = Path(path)
    part = path.with_name(f".{path.name}.part")
    try:
        yield part
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` whole (:func:`atomic_path`); returns the path."""
    with atomic_path(path) as part:
        part.write_text(text, encoding="utf-8")
    return Path(path)


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def folder_sha256(folder: str | os.PathLike, names: Iterable[str] | None = None) -> str | None:
    """sha256 (hex) of a folder's files, by relative path and content: every file under it, or
    only those of ``names`` that exist. The same files give the same digest wherever the folder
    is; None when there is no file to hash."""
    root = Path(folder)
    files = sorted(p for p in root.rglob("*") if p.is_file()) if names is None else \
        [root / n for n in names if (root / n).is_file()]
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.relative_to(root).as_posix()} {file_sha256(f)}\n".encode())
    return h.hexdigest()
