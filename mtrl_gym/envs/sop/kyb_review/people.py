"""People and businesses of one KYBReview world: unique names and ids, and look-alike spellings.

:class:`Cast` hands out distinct people (id, name, date of birth) and business names from
one ``rng``; :func:`person_variant` makes a differently spelt name whose watch-list
:func:`~.catalog.match_score` against the original falls in a wanted band (a near miss
that must be classified as a potential match, or a weak hit the SOP ignores).
"""

from __future__ import annotations

import datetime as dt

import numpy as np

from mtrl_gym.envs.sop.kyb_review.catalog import (FIRST_NAMES, LAST_NAMES, LEGAL_FORMS, NAME_STEMS, NAME_TRADES,
                                                  match_score, person_key)

__all__ = ["Cast", "person_variant"]

_VOWELS = "aeiou"


class Cast:
    """Distinct people and businesses for one world, every draw from ``rng``."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self._names: set[str] = set()
        self._ids: set[str] = set()
        self._businesses: set[str] = set()

    def _pick(self, items):
        return items[int(self.rng.integers(len(items)))]

    def name(self) -> str:
        """A person name not handed out before in this world."""
        while True:
            name = f"{self._pick(FIRST_NAMES)} {self._pick(LAST_NAMES)}"
            if name not in self._names:
                self._names.add(name)
                return name

    def dob(self) -> str:
        """A date of birth between 1950 and 1999."""
        return (dt.date(1950, 1, 1) + dt.timedelta(days=int(self.rng.integers(0, 18_250)))).isoformat()

    def person(self) -> dict[str, str]:
        """``{"person_id", "name", "date_of_birth"}`` of a new person."""
        while True:
            pid = f"P-{int(self.rng.integers(100_000, 1_000_000))}"
            if pid not in self._ids:
                self._ids.add(pid)
                return {"person_id": pid, "name": self.name(), "date_of_birth": self.dob()}

    def business(self) -> str:
        """A canonical business name not handed out before (for entity owners)."""
        while True:
            name = f"{self._pick(NAME_STEMS)} {self._pick(NAME_TRADES)} {self._pick(tuple(LEGAL_FORMS))}"
            if name not in self._businesses:
                self._businesses.add(name)
                return name


def _edit(rng: np.random.Generator, word: str) -> str:
    """One spelling slip in ``word``: a swapped, dropped, doubled or changed letter."""
    if len(word) < 3:
        return word + word[-1]
    i = int(rng.integers(1, len(word) - 1))
    kind = int(rng.integers(4))
    if kind == 0:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == 1:
        return word[:i] + word[i + 1:]
    if kind == 2:
        return word[:i] + word[i] + word[i:]
    repl = _VOWELS[int(rng.integers(5))] if word[i] in _VOWELS else "kszt"[int(rng.integers(4))]
    return word[:i] + repl + word[i + 1:]


def person_variant(rng: np.random.Generator, name: str, band: tuple[int, int]) -> str | None:
    """A name spelt differently from ``name`` whose match score lies in ``band`` (inclusive), or None.

    Near misses (a band like 85-99) come from one or two slips; weak hits (70-84) from
    another first name or surname, or several slips.
    """
    first, _, last = name.partition(" ")
    for attempt in range(60):
        r = rng.random()
        if band[0] >= 85 or r < 0.4:
            words = [first, last]
            for _ in range(1 + int(rng.integers(1 + attempt // 20 + (band[0] < 85) * 2))):
                k = int(rng.integers(2))
                words[k] = _edit(rng, words[k])
            candidate = " ".join(words)
        elif r < 0.7:
            candidate = f"{FIRST_NAMES[int(rng.integers(len(FIRST_NAMES)))]} {last}"
        else:
            candidate = f"{first} {LAST_NAMES[int(rng.integers(len(LAST_NAMES)))]}"
        if person_key(candidate) != person_key(name) and band[0] <= match_score(name, candidate) <= band[1]:
            return candidate
    return None
