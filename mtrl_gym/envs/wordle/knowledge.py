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

from collections import Counter

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
        marked = Counter(ch for ch, c in zip(guess, fb) if c != GRAY)
        grayed = {ch for ch, c in zip(guess, fb) if c == GRAY}
        for i, (ch, c) in enumerate(zip(guess, fb)):
            if c == GREEN:
                self.greens[i] = ch
            else:
                self.not_at.setdefault(ch, set()).add(i)
        for ch in set(guess):
            if marked[ch] > self.min_count.get(ch, 0):
                self.min_count[ch] = marked[ch]
            if ch in grayed:
                self.max_count[ch] = marked[ch]
        self.guesses.append(guess)
        self.tried.update(guess)

    def violations(self, guess: str) -> int:
        """How many revealed clues ``guess`` ignores (0 iff it could be the answer).

        Per letter, the larger of its green positions not kept and its missing required
        copies (a green E left out entirely is one ignored clue, not two); plus one per copy
        beyond a known maximum (so each use of a gray letter) and one per known letter
        placed where it is known not to be.
        """
        counts = Counter(guess)
        green_miss: Counter = Counter(ch for i, ch in enumerate(self.greens) if ch is not None and guess[i] != ch)
        letters = set(green_miss) | set(self.min_count)
        v = sum(max(green_miss[ch], self.min_count.get(ch, 0) - counts[ch]) for ch in letters)
        v += sum(max(0, counts[ch] - m) for ch, m in self.max_count.items())
        v += sum(1 for i, ch in enumerate(guess)
                 if self.min_count.get(ch, 0) > 0 and i in self.not_at.get(ch, ()))
        return v

    def new_letters(self, guess: str) -> int:
        """Number of distinct letters of ``guess`` not in any earlier guess."""
        return len(set(guess) - self.tried)

    def summary(self) -> str:
        """Deterministic text of everything known (letters sorted, positions 1-based)."""
        lines = ["Known so far:"]
        lines.append("- Green (right letter, right place): " + " ".join((c or "_").upper() for c in self.greens))
        yellow = []
        for ch in sorted(self.min_count):
            m = self.min_count[ch]
            placed = sum(1 for g in self.greens if g == ch)
            exact = self.max_count.get(ch) == m
            if m == 0 or (m <= placed):
                continue
            where = sorted(p + 1 for p in self.not_at.get(ch, ()) if self.greens[p] != ch)
            count = f"exactly {m}" if exact else (f"at least {m}" if m > 1 else "")
            detail = "; ".join(x for x in (count, f"not at {', '.join(map(str, where))}" if where else "") if x)
            yellow.append(f"{ch.upper()} ({detail})" if detail else ch.upper())
        if yellow:
            lines.append("- Yellow (in the word, other place): " + ", ".join(yellow))
        no_more = sorted(ch for ch, m in self.max_count.items()
                         if m > 0 and m == sum(1 for g in self.greens if g == ch))
        if no_more:
            lines.append("- No other copies of: " + ", ".join(ch.upper() for ch in no_more))
        gray = sorted(ch for ch, m in self.max_count.items() if m == 0)
        if gray:
            lines.append("- Gray (not in the word): " + ", ".join(ch.upper() for ch in gray))
        lines.append("- Guessed: " + ", ".join(g.upper() for g in self.guesses))
        return "\n".join(lines)
