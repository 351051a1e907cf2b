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


# Entries by (letter, count, exact, 0-based positions excluded): at most 26 * 5 * 2 * 32 of
# them exist, so steps look their letters' entries up instead of formatting them.
_ENTRIES: dict[tuple, str] = {}


def describe_feedback(guess: str, fb) -> str:
    """``"C gray, R yellow, A green, N gray, E gray"``."""
    tile = _TILE
    return ", ".join([ch + tile[c] for ch, c in zip(guess.upper(), fb)])


def feedback_text(upper_guess: str, code: int) -> str:
    """:func:`describe_feedback` of a 5-letter upper-case guess and its pattern code (a table lookup)."""
    return _FEEDBACK_FORMATS[code] % tuple(upper_guess)


class Knowledge:
    """Clues revealed by the guesses played so far (mutable, one per episode).

    Written for speed (the env calls :meth:`violations`, :meth:`update` and
    :meth:`summary` on every step). The summary is kept incrementally: a guess can only
    change what is said about its own letters (and about a letter whose green it
    replaced), so :meth:`update` rewrites those letters' entries and only the lines they
    appear in; :meth:`summary` joins the cached lines.
    """

    __slots__ = ("greens", "min_count", "max_count", "not_at", "guesses", "tried",
                 "_green_line", "_guessed_line", "_yellow", "_yellow_line", "_gray", "_no_more", "_tail_line",
                 "_summary", "_seen")

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
        self._green_line = "_ _ _ _ _"
        self._guessed_line = ""
        self._yellow: dict[str, str] = {}  # letter -> its entry on the yellow line
        self._yellow_line = ""
        self._gray: set[str] = set()
        self._no_more: set[str] = set()
        self._tail_line = ""  # the "No other copies" and "Gray" lines
        self._summary: str | None = None
        self._seen: dict[str, tuple] = {}  # letter -> the counts its summary entries were made from

    def update(self, guess: str, fb) -> None:
        """Add the clues of ``guess`` scored ``fb``."""
        greens, not_at, min_count, max_count = self.greens, self.not_at, self.min_count, self.max_count
        marked: dict[str, int] = {}
        grayed = ""
        replaced = ""  # letters whose green this guess overwrote (only with contradictory feedback)
        new_green = False
        i = 0
        for c in fb:
            ch = guess[i]
            if c == GREEN:
                old = greens[i]
                if old != ch:
                    new_green = True
                    if old is not None:
                        replaced += old
                    greens[i] = ch
                marked[ch] = marked.get(ch, 0) + 1
            else:
                positions = not_at.get(ch)
                if positions is None:
                    not_at[ch] = {i}
                else:
                    positions.add(i)
                if c == GRAY:
                    grayed += ch
                else:
                    marked[ch] = marked.get(ch, 0) + 1
            i += 1
        for ch, m in marked.items():
            if m > min_count.get(ch, 0):
                min_count[ch] = m
        for ch in grayed:
            max_count[ch] = marked.get(ch, 0)
        self.guesses.append(guess)
        self.tried.update(guess)

        # Refresh the cached summary lines. Only this guess's letters (and a replaced green)
        # can read differently now; a letter never marked green or yellow is at most gray.
        if new_green:
            self._green_line = " ".join([c or "_" for c in greens]).upper()
        word = guess.upper()
        self._guessed_line = self._guessed_line + ", " + word if self._guessed_line else word
        gray, no_more, yellow = self._gray, self._no_more, self._yellow
        tail_changed = yellow_changed = False
        for ch in grayed:
            if ch not in min_count:
                if ch not in gray:
                    gray.add(ch)
                    tail_changed = True
            elif ch not in marked:  # contradictory feedback: a letter known present, now gray
                marked[ch] = 0
        seen = self._seen
        for ch in replaced:
            marked.setdefault(ch, 0)
            seen.pop(ch, None)  # its green positions moved: recompute whatever the counts say
        for ch in marked:
            m = min_count.get(ch, 0)
            placed = greens.count(ch)
            mx = max_count.get(ch)
            positions = not_at.get(ch)
            # What the letter's entries depend on; unchanged since its last refresh -> nothing to do
            # (positions only grow, and its greens move only when replaced).
            state = (m, placed, mx, len(positions) if positions else 0)
            if seen.get(ch) == state:
                continue
            seen[ch] = state
            if m > placed:
                where = (tuple([p for p in sorted(positions) if greens[p] != ch]) if positions else ())
                key = (ch, m, mx == m, where)
                entry = _ENTRIES.get(key)
                if entry is None:
                    entry = _ENTRIES[key] = _yellow_entry(ch, m, mx == m, where)
            else:
                entry = None
            if yellow.get(ch) != entry:
                yellow_changed = True
                if entry is None:
                    del yellow[ch]
                else:
                    yellow[ch] = entry
            if mx is not None:
                if mx == 0:
                    if ch not in gray:
                        gray.add(ch)
                        tail_changed = True
                    if ch in no_more:
                        no_more.discard(ch)
                        tail_changed = True
                else:
                    if ch in gray:
                        gray.discard(ch)
                        tail_changed = True
                    if (ch in no_more) != (mx == placed):
                        (no_more.add if mx == placed else no_more.discard)(ch)
                        tail_changed = True
        if yellow_changed:
            self._yellow_line = ("\n- Yellow (in the word, other place): "
                                 + ", ".join([yellow[c] for c in sorted(yellow)]) if yellow else "")
        if tail_changed:
            tail = ""
            if no_more:
                tail += "\n- No other copies of: " + ", ".join(sorted(no_more)).upper()
            if gray:
                tail += "\n- Gray (not in the word): " + ", ".join(sorted(gray)).upper()
            self._tail_line = tail
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
        text = self._summary
        if text is None:
            text = self._summary = (
                "Known so far:\n- Green (right letter, right place): " + self._green_line + self._yellow_line
                + self._tail_line + "\n- Guessed: " + self._guessed_line)
        return text
