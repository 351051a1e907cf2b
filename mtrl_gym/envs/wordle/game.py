"""Wordle game logic as pure functions, plus the read-only word tables they share.

Feedback is a tuple of five ints, ``GRAY=0``, ``YELLOW=1``, ``GREEN=2``, with the standard
handling of repeated letters: greens first, then yellows left to right while the answer
still has unused copies of the letter.

>>> feedback("speed", "abide")
(0, 0, 1, 0, 1)
>>> feedback("eerie", "three")
(1, 0, 2, 0, 2)
>>> feedback("llama", "hello")
(1, 1, 0, 0, 0)

The tables (word lists, their letters as a numpy array, and the ``allowed x answers``
feedback-pattern table used for candidate counts and by the solver) are built once per
process and shared read-only by every env instance. The 21 MB pattern table is cached on
disk (``$MTRL_GYM_CACHE`` or ``~/.cache/mtrl_gym``) and memory-mapped, so processes
share it too.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = [
    "GRAY", "YELLOW", "GREEN", "COLOR_NAMES", "WORD_LENGTH", "MAX_GUESSES",
    "answers", "allowed_guesses", "allowed_index", "feedback", "pattern_code", "decode_pattern", "SOLVED_CODE",
    "feedback_codes", "pattern_table", "letters_of", "cache_dir", "spell", "unspell",
]

GRAY, YELLOW, GREEN = 0, 1, 2
COLOR_NAMES = ("gray", "yellow", "green")
WORD_LENGTH = 5
MAX_GUESSES = 6
_POW3 = np.array([3 ** i for i in range(WORD_LENGTH)], dtype=np.int64)


def _read_words(name: str) -> tuple[str, ...]:
    text = resources.files("mtrl_gym.envs.wordle").joinpath("data", name).read_text(encoding="ascii")
    return tuple(w.strip().lower() for w in text.split() if w.strip())


@functools.cache
def answers() -> tuple[str, ...]:
    """The 1,923 possible secret words, sorted, lower-case."""
    return _read_words("answers.txt")


@functools.cache
def allowed_guesses() -> tuple[str, ...]:
    """The 11,072 accepted guesses (every answer included), sorted, lower-case."""
    return _read_words("allowed_guesses.txt")


_SPELLED_RE = re.compile(r"[A-Za-z](?:[ -][A-Za-z]){4}")
_TAGGED_RE = re.compile(r"[A-Za-z]1 [A-Za-z]2 [A-Za-z]3(?: [A-Za-z][4-9])*")


def spell(word: str, *, tagged: bool = False) -> str:
    """``word`` spelled out as capital letters with spaces between them: ``"R E S I N"``;
    ``tagged``: each letter followed by its position, ``"R1 E2 S3 I4 N5"``.

    A guess may be written either way (the env accepts both): a small model's tokenizer sees
    one letter per token, the same tokens as the board's letters, instead of word pieces.
    The position tags make the length visible: after the letter tagged 5 the word ends.

    >>> spell("resin"), spell("resin", tagged=True)
    ('R E S I N', 'R1 E2 S3 I4 N5')
    """
    if tagged:
        return " ".join(f"{c}{i}" for i, c in enumerate(word.upper(), start=1))
    return " ".join(word.upper())


def unspell(text: str) -> str | None:
    """The word of a spelled-out guess, lower-case; None for any other text.

    Two spellings are read: five letters, each pair separated by one space or hyphen
    (``"R E S I N"``, ``"r-e-s-i-n"``), and letters tagged with their positions 1, 2, 3, ...
    in order (``"R1 E2 S3 I4 N5"``). A tagged spelling of another length (3 to 9 letters) gives a
    word of that length (``"T1 A2 L3 O4 R5 Y6"`` is ``"talory"``), so the env can say how many
    letters it has.

    >>> unspell("R E S I N"), unspell("R1 E2 S3 I4 N5"), unspell("T1 A2 L3 O4"), unspell("resin")
    ('resin', 'resin', 'talo', None)
    """
    if len(text) == 2 * WORD_LENGTH - 1 and _SPELLED_RE.fullmatch(text):
        return text[::2].lower()
    if len(text) <= 3 * 9 and _TAGGED_RE.fullmatch(text):
        pairs = text.split(" ")
        if all(p[1] == str(i) for i, p in enumerate(pairs, start=1)):
            return "".join(p[0] for p in pairs).lower()
    return None


@functools.cache
def allowed_index() -> dict[str, int]:
    """Word -> row of :func:`pattern_table`."""
    return {w: i for i, w in enumerate(allowed_guesses())}


@functools.cache
def answer_index() -> dict[str, int]:
    """Word -> column of :func:`pattern_table`."""
    return {w: i for i, w in enumerate(answers())}


def letters_of(words: Iterable[str]) -> np.ndarray:
    """``(n, 5)`` uint8 array of letter indices (a=0 ... z=25)."""
    words = list(words)
    if not words:
        return np.zeros((0, WORD_LENGTH), dtype=np.uint8)
    return (np.frombuffer("".join(words).encode("ascii"), dtype=np.uint8) - ord("a")).reshape(-1, WORD_LENGTH)


@functools.cache
def answer_letters() -> np.ndarray:
    a = letters_of(answers())
    a.flags.writeable = False
    return a


def feedback(guess: str, answer: str) -> tuple[int, ...]:
    """Per-letter feedback of ``guess`` against ``answer`` (both lower-case, 5 letters)."""
    result = [GRAY] * WORD_LENGTH
    unused: dict[str, int] = {}
    for i, (g, a) in enumerate(zip(guess, answer)):
        if g == a:
            result[i] = GREEN
        else:
            unused[a] = unused.get(a, 0) + 1
    for i, g in enumerate(guess):
        if result[i] != GREEN and unused.get(g, 0) > 0:
            result[i] = YELLOW
            unused[g] -= 1
    return tuple(result)


def pattern_code(fb: Sequence[int]) -> int:
    """Feedback as one base-3 integer in ``[0, 243)`` (position 0 is the lowest digit)."""
    a, b, c, d, e = fb
    return int(a + 3 * b + 9 * c + 27 * d + 81 * e)


_DECODED = tuple(tuple((code // 3 ** i) % 3 for i in range(WORD_LENGTH)) for code in range(3 ** WORD_LENGTH))
#: :func:`pattern_code` of an all-green feedback (the word is found).
SOLVED_CODE = pattern_code([GREEN] * WORD_LENGTH)


def decode_pattern(code: int) -> tuple[int, ...]:
    """Inverse of :func:`pattern_code` (a table lookup)."""
    return _DECODED[code]


def feedback_codes(guesses: np.ndarray, answers_: np.ndarray) -> np.ndarray:
    """Vectorised :func:`pattern_code` of every guess against every answer.

    Args:
        guesses: ``(G, 5)`` letter indices; answers_: ``(A, 5)`` letter indices.
    Returns:
        ``(G, A)`` uint8 pattern codes.

    A non-green guess letter at position i is yellow iff the number of non-green copies
    of that letter in the guess up to and including i does not exceed the number of
    non-green copies of it in the answer (greedy left-to-right assignment).
    """
    g = guesses[:, None, :]
    a = answers_[None, :, :]
    green = g == a  # (G, A, 5)
    out = np.zeros(green.shape[:2], dtype=np.int64)
    not_green = ~green
    for i in range(WORD_LENGTH):
        letter = g[..., i]  # (G, 1)
        # copies of this letter among the answer's non-green positions
        avail = ((a == letter[..., None]) & not_green).sum(axis=-1)
        # non-green copies of this letter in the guess at positions <= i
        rank = ((g[..., : i + 1] == letter[..., None]) & not_green[..., : i + 1]).sum(axis=-1)
        yellow = not_green[..., i] & (rank <= avail)
        out += (green[..., i] * 2 + yellow) * _POW3[i]
    return out.astype(np.uint8)


def cache_dir() -> Path:
    """Where mtrl_gym caches derived data (``$MTRL_GYM_CACHE`` or ``~/.cache/mtrl_gym``)."""
    root = os.environ.get("MTRL_GYM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "mtrl_gym")
    return Path(root)


def _build_pattern_table() -> np.ndarray:
    guesses = letters_of(allowed_guesses())
    table = np.empty((len(guesses), len(answers())), dtype=np.uint8)
    step = 512
    for start in range(0, len(guesses), step):
        table[start:start + step] = feedback_codes(guesses[start:start + step], answer_letters())
    return table


@functools.cache
def pattern_table() -> np.ndarray:
    """``(11072, 1923)`` uint8 table: pattern code of each allowed guess vs each answer.

    Built once per process (about a second) and cached on disk, then memory-mapped
    read-only, so every env instance and every process shares one copy.
    """
    digest = hashlib.sha256(("\n".join(allowed_guesses()) + "|" + "\n".join(answers())).encode()).hexdigest()[:16]
    path = cache_dir() / "wordle" / f"patterns-{digest}.npy"
    try:
        # np.asarray drops the memmap subclass (its per-slice bookkeeping is slow) but
        # keeps the read-only, file-backed buffer.
        table = np.asarray(np.load(path, mmap_mode="r"))
        if table.shape == (len(allowed_guesses()), len(answers())) and table.dtype == np.uint8:
            return table
    except (OSError, ValueError):
        pass
    table = _build_pattern_table()
    try:  # atomic write: a concurrent reader never sees half a file
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npy.tmp")
        with os.fdopen(fd, "wb") as f:
            np.save(f, table)
        os.replace(tmp, path)
        return np.asarray(np.load(path, mmap_mode="r"))
    except OSError:  # read-only home: keep the in-memory table
        table.flags.writeable = False
        return table
