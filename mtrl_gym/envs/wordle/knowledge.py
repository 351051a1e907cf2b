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

__all__ = ["Knowledge", "describe_feedback", "feedback_text"]


_TILE = tuple(" " + name for name in COLOR_NAMES)  # indexed by colour code
_POSITION = tuple(str(p + 1) for p in range(WORD_LENGTH))  # 0-based position -> 1-based text
# "%s gray, %s yellow, ..." for each of the 3**5 pattern codes (position 0 = lowest digit)
_FEEDBACK_FORMATS = tuple(
    ", ".join("%s" + _TILE[(code // 3 ** i) % 3] for i in range(WORD_LENGTH)) for code in range(3 ** WORD_LENGTH))


def _yellow_entry(ch: str, m: int, exact: bool, where: tuple[int, ...]) -> str:
    """One letter's entry on the yellow line: ``R (not at 2)``, ``E (exactly 2; not at 1, 4)``."""
    desc = f"exactly {m}" if exact else f"at least {m}" if m > 1 else ""
    if where:
        desc = (desc + "; not at " if desc else "not at ") + ", ".join([_POSITION[p] for p in where])
    return f"{ch.upper()} ({desc})" if desc else ch.upper()


def describe_feedback(guess: str, fb) -> str:
    """``"C gray, R yellow, A green, N gray, E gray"``."""
    tile = _TILE
    return ", ".join([ch + tile[c] for ch, c in zip(guess.upper(), fb)])


def feedback_text(upper_guess: str, code: int) -> str:
    """:func:`describe_feedback` of a 5-letter upper-case guess and its pattern code (a table lookup)."""
    return _FEEDBACK_FORMATS[code] % tuple(upper_guess)


class Knowledge:
    """Clues revealed by the guesses played so far (mutable, one per episode).

    :meth:`update` records the clues; :meth:`summary` writes them out, once per new guess
    (the text is cached until the next :meth:`update`).
    """

    __slots__ = ("greens", "min_count", "max_count", "not_at", "guesses", "tried", "_summary")

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
        self._summary: str | None = None

    def update(self, guess: str, fb) -> None:
        """Add the clues of ``guess`` scored ``fb``."""
        marked: dict[str, int] = {}  # copies of each letter shown green or yellow by this guess
        grayed = ""
        for i, (ch, c) in enumerate(zip(guess, fb)):
            if c == GREEN:
                self.greens[i] = ch
            else:
                self.not_at.setdefault(ch, set()).add(i)
            if c == GRAY:
                grayed += ch
            else:
                marked[ch] = marked.get(ch, 0) + 1
        for ch, m in marked.items():
            if m > self.min_count.get(ch, 0):
                self.min_count[ch] = m
        for ch in grayed:  # a gray copy: the secret has exactly the copies this guess marked
            self.max_count[ch] = marked.get(ch, 0)
        self.guesses.append(guess)
        self.tried.update(guess)
        self._summary = None

    def violations(self, guess: str) -> int:
        """How many revealed clues ``guess`` ignores (0 iff it could be the answer).

        Per letter, the larger of its green positions not kept and its missing required
        copies (a green E left out entirely is one ignored clue, not two); plus one per copy
        beyond a known maximum (so each use of a gray letter) and one per known letter
        placed where it is known not to be.
        """
        min_count = self.min_count
        if not min_count and not self.max_count:  # no guess played yet
            return 0
        green_miss: dict[str, int] = {}
        for i, ch in enumerate(self.greens):
            if ch is not None and guess[i] != ch:
                green_miss[ch] = green_miss.get(ch, 0) + 1
        v = 0
        # A green letter always has a minimum count, so min_count covers green_miss's letters.
        for ch, m in min_count.items():
            missing = m - guess.count(ch)
            g = green_miss.get(ch, 0)
            v += g if g > missing else missing if missing > 0 else 0
        max_count = self.max_count
        for ch in set(guess):  # at most 5 letters; max_count grows with every gray tile
            m = max_count.get(ch)
            if m is not None:
                n = guess.count(ch)
                if n > m:
                    v += n - m
        not_at = self.not_at
        for i, ch in enumerate(guess):
            positions = not_at.get(ch)
            if positions is not None and i in positions and ch in min_count:
                v += 1
        return v

    def new_letters(self, guess: str) -> int:
        """Number of distinct letters of ``guess`` not in any earlier guess."""
        return len(set(guess) - self.tried)

    def summary(self) -> str:
        """Deterministic text of everything known (letters sorted, positions 1-based)."""
        if self._summary is not None:
            return self._summary
        greens = self.greens
        yellow, no_more, gray = [], [], []
        for ch in sorted(set(self.min_count) | set(self.max_count)):
            m, placed, mx = self.min_count.get(ch, 0), greens.count(ch), self.max_count.get(ch)
            if m > placed:  # copies known but not placed: a yellow entry
                where = tuple(p for p in sorted(self.not_at.get(ch, ())) if greens[p] != ch)
                yellow.append(_yellow_entry(ch, m, mx == m, where))
            if mx == 0:
                gray.append(ch.upper())
            elif mx is not None and mx == placed:
                no_more.append(ch.upper())
        text = "Known so far:\n- Green (right letter, right place): " + " ".join([c or "_" for c in greens]).upper()
        if yellow:
            text += "\n- Yellow (in the word, other place): " + ", ".join(yellow)
        if no_more:
            text += "\n- No other copies of: " + ", ".join(no_more)
        if gray:
            text += "\n- Gray (not in the word): " + ", ".join(gray)
        self._summary = text + "\n- Guessed: " + ", ".join([g.upper() for g in self.guesses])
        return self._summary
