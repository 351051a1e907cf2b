"""Files written whole or not at all, and compared by content.

:func:`write_text_atomic` writes a new version of a small file (a config, a record) into a
hidden file beside it and renames it into place, so a process stopped mid-write leaves the
old version or none, never a half. The digests serve the checks that compare what a result
was made from by content rather than by path (checkpoint manifests, the evaluation store's
adapter check, the CPU recipe's stage records).

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
from collections.abc import Iterable
from pathlib import Path

__all__ = ["write_text_atomic", "file_sha256", "folder_sha256"]


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` whole: through ``.<name>.part`` beside it, renamed
    into place; the part file is removed if writing fails. Returns the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.part")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


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
