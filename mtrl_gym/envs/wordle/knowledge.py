"""What the feedback so far reveals about the secret word, and how a guess uses it.

:class:`Knowledge` accumulates the clues of played guesses: green letters by position,
the minimum (and, once a gray tile shows it, exact) count of each letter, and positions
each letter is known not to occupy. A word has zero :meth:`Knowledge.violations` exactly
when it is consistent with every feedback so far (it could still be the answer).

>>> k = Knowledge()
>>> k.update("crane", (0, 1, 2, 0, 0))
>>> k.violations("brain"), k.violations("arise")
(2, 3)
>>> print(k.summary())
Known so far:
- Green (right letter, right place): _ _ A _ _
- Yellow (in the word, other place): R (not at 2)
- Gray (not in the word): C, E, N
- Guessed: CRANE
"""

from __future__ import annotations

from mtrl_gym.envs.wordle.game import COLOR_NAMES, GRAY, GREEN, WORD_LENGTH

__all__ = ["Knowledge", "describe_feedback"]


def describe_feedback(guess: str, fb) -> str:
    """``"C gray, R yellow, A green, N gray, E gray"``."""
    return ", ".join(f"{ch.upper()} {COLOR_NAMES[c]}" for ch, c in zip(guess, fb))


class Knowledge:
    """Clues revealed by the guesses played so far (mutable, one per episode)."""

    __slots__ = ("greens", "min_count", "max_count", "not_at", "guesses", "tried")

    def __init__(self) -> None:
        self.greens: list[str | None] = [None] * WORD_LENGTH
        self.min_count: dict[str, int] = {}
        """Letter -> the secret has at least this many copies."""
        self.max_count: dict[str, int] = {}
        """Letter -> the secret has at most this many copies (known once a copy was gray)."""
        self.not_at: dict[str, set[int]] = {}
        """Letter -> 0-based positions it is known not to occupy."""
        self.guesses: list[str] = []
        self.tried: set[str] = set()

    def update(self, guess: str, fb) -> None:
        """Add the clues of ``guess`` scored ``fb``."""
        marked: dict[str, int] = {}
        grayed = set()
        for i, (ch, c) in enumerate(zip(guess, fb)):
            if c == GREEN:
                self.greens[i] = ch
            else:
                self.not_at.setdefault(ch, set()).add(i)
            if c == GRAY:
                grayed.add(ch)
            else:
                marked[ch] = marked.get(ch, 0) + 1
        for ch in set(guess):
            m = marked.get(ch, 0)
            if m > self.min_count.get(ch, 0):
                self.min_count[ch] = m
            if ch in grayed:
                self.max_count[ch] = m
        self.guesses.append(guess)
        self.tried.update(guess)

    def violations(self, guess: str) -> int:
        """How many revealed clues ``guess`` ignores (0 iff it could be the answer).

        Per letter, the larger of its green positions not kept and its missing required
        copies (a green E left out entirely is one ignored clue, not two); plus one per copy
        beyond a known maximum (so each use of a gray letter) and one per known letter
        placed where it is known not to be.
        """
        counts: dict[str, int] = {}
        for ch in guess:
            counts[ch] = counts.get(ch, 0) + 1
        green_miss: dict[str, int] = {}
        for i, ch in enumerate(self.greens):
            if ch is not None and guess[i] != ch:
                green_miss[ch] = green_miss.get(ch, 0) + 1
        v = 0
        for ch in green_miss.keys() | self.min_count.keys():
            v += max(green_miss.get(ch, 0), self.min_count.get(ch, 0) - counts.get(ch, 0))
        for ch, m in self.max_count.items():
            if counts.get(ch, 0) > m:
                v += counts[ch] - m
        not_at, min_count = self.not_at, self.min_count
        for i, ch in enumerate(guess):
            if min_count.get(ch, 0) > 0 and i in not_at.get(ch, ()):
                v += 1
        return v

    def new_letters(self, guess: str) -> int:
        """Number of distinct letters of ``guess`` not in any earlier guess."""
        return len(set(guess) - self.tried)

    def summary(self) -> str:
        """Deterministic text of everything known (letters sorted, positions 1-based)."""
        greens = self.greens
        placed: dict[str, int] = {}
        for g in greens:
            if g is not None:
                placed[g] = placed.get(g, 0) + 1
        lines = ["Known so far:",
                 "- Green (right letter, right place): " + " ".join([(c or "_").upper() for c in greens])]
        yellow = []
        for ch in sorted(self.min_count):
            m = self.min_count[ch]
            if m <= placed.get(ch, 0):
                continue
            where = sorted([p + 1 for p in self.not_at.get(ch, ()) if greens[p] != ch])
            parts = []
            if self.max_count.get(ch) == m:
                parts.append(f"exactly {m}")
            elif m > 1:
                parts.append(f"at least {m}")
            if where:
                parts.append("not at " + ", ".join([str(p) for p in where]))
            yellow.append(f"{ch.upper()} ({'; '.join(parts)})" if parts else ch.upper())
        if yellow:
            lines.append("- Yellow (in the word, other place): " + ", ".join(yellow))
        no_more = sorted([ch for ch, m in self.max_count.items() if m > 0 and m == placed.get(ch, 0)])
        if no_more:
            lines.append("- No other copies of: " + ", ".join(no_more).upper())
        gray = sorted([ch for ch, m in self.max_count.items() if m == 0])
        if gray:
            lines.append("- Gray (not in the word): " + ", ".join(gray).upper())
        lines.append("- Guessed: " + ", ".join(self.guesses).upper())
        return "\n".join(lines)
