"""Output folders that cannot silently mix two runs: refuse a used folder, or resume / replace it.

Every command that writes a run folder (``mtrl-gym train``, ``eval``, an ``sft`` command)
calls :func:`claim_output_dir` before writing anything. A folder already holding a run
(one of the ``markers`` exists in it) is refused with a message naming the three ways on:
``--resume`` to continue it, ``--overwrite`` to replace it, or a fresh folder.
``overwrite=True`` deletes only the run's own files and folders (``markers`` and
``artefacts``), never anything else the folder holds.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "metrics.jsonl").write_text("{}")
>>> claim_output_dir(d, markers=TRAIN_MARKERS, flag="--output-dir")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
mtrl_gym.error.ConfigError: ... already holds a run (metrics.jsonl): continue it with --resume, ...
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from mtrl_gym.error import ConfigError

__all__ = ["claim_output_dir", "run_files", "TRAIN_MARKERS", "TRAIN_ARTEFACTS", "EVAL_MARKERS", "EVAL_ARTEFACTS"]

#: Files and folders whose presence means a training run (GRPO or SFT) lives in the folder.
TRAIN_MARKERS = ("metrics.jsonl", "checkpoints", "summary.json")
#: What else a training run writes (removed with ``overwrite=True``).
TRAIN_ARTEFACTS = ("config.yaml", "trajectories")
#: Files and folders whose presence means an evaluation lives in the folder.
EVAL_MARKERS = ("eval_config.json", "summary.json")
#: What else an evaluation writes (removed with ``overwrite=True``).
EVAL_ARTEFACTS = ("trajectories", "report", "prompts")


def run_files(folder: str | os.PathLike, markers: Sequence[str]) -> list[str]:
    """The ``markers`` present in ``folder`` (empty when it holds no run or does not exist)."""
    root = Path(folder)
    return [m for m in markers if (root / m).exists()]


def claim_output_dir(folder: str | os.PathLike, *, markers: Sequence[str], artefacts: Sequence[str] = (),
                     resume: bool = False, overwrite: bool = False, flag: str = "--out") -> Path:
    """Check (and with ``overwrite``, clear) ``folder`` before a run writes into it.

    Args:
        folder: the output folder (it need not exist).
        markers: files or folders that mean "a run lives here".
        artefacts: other files or folders the run writes, removed with the markers on overwrite.
        resume: the caller continues the run in ``folder``: a used folder is fine.
        overwrite: delete the previous run's ``markers`` and ``artefacts`` first.
        flag: the option that names the folder, for the message (``--output-dir``, ``--out``).

    Returns the folder as a :class:`~pathlib.Path`. Raises :class:`~mtrl_gym.error.ConfigError`
    for a used folder without ``resume``/``overwrite``, and for both flags at once.
    """
    root = Path(folder)
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other: --resume continues the run in "
                          f"{str(root)!r}, --overwrite deletes it; give one")
    found = run_files(root, markers)
    if not found or resume:
        return root
    if not overwrite:
        raise ConfigError(f"{str(root)!r} already holds a run ({', '.join(found)}): continue it with --resume, "
                          f"replace it with --overwrite, or give a fresh {flag}")
    for name in (*markers, *artefacts):
        path = root / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    return root
