"""Gymnasium spaces shared by the text environments.

:class:`TextSpace` is :class:`gymnasium.spaces.Text` plus one fix for vector envs.
gymnasium's ``AsyncVectorEnv`` with ``shared_memory=True`` (the default of
``gymnasium.make_vec(..., vectorization_mode="async")``) reads a ``Text`` observation out
of shared memory once, when the vector env is built, and returns that stale value after
every ``reset`` and ``step`` (gymnasium 1.4; the same class of bug as Gymnasium issue
#1164 for ``Dict`` spaces). For a ``TextSpace`` the shared-memory reader returns a live
view that decodes the current strings, and the copy the vector env hands out is a plain
tuple of ``str``, exactly what ``SyncVectorEnv`` returns.

>>> space = TextSpace(16)
>>> space.contains("crane"), isinstance(space, Text)
(True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Text
from gymnasium.vector.utils import read_from_shared_memory

__all__ = ["TextSpace"]


class TextSpace(Text):
    """``gymnasium.spaces.Text`` whose batches stay current in ``AsyncVectorEnv`` shared memory."""


class _LiveTexts(Sequence):
    """The strings of ``n`` environments in a shared-memory buffer, decoded on access.

    ``copy.deepcopy`` (what ``AsyncVectorEnv`` applies before returning observations)
    gives a tuple of ``str`` with the buffer's current content.
    """

    __slots__ = ("_space", "_memory", "_n", "_chars")

    def __init__(self, space: Text, memory: Any, n: int):
        self._space = space
        self._memory = memory
        self._n = n
        self._chars = np.array(space.character_list + ("",))

    def _decode(self, i: int) -> str:
        rows = np.frombuffer(self._memory.get_obj(), dtype=np.int32).reshape(self._n, self._space.max_length)
        codes = rows[i]
        return "".join(self._chars[codes[codes < len(self._space.character_list)]].tolist())

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self._decode(i) for i in range(self._n)[index])
        if not -self._n <= index < self._n:
            raise IndexError(f"index {index} out of range for {self._n} environments")
        return self._decode(index % self._n)

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    __hash__ = None  # mutable view

    def __repr__(self) -> str:
        return f"_LiveTexts({tuple(self)!r})"


@read_from_shared_memory.register(TextSpace)
def _read_text_space(space: TextSpace, shared_memory: Any, n: int = 1) -> _LiveTexts:
    return _LiveTexts(space, shared_memory, n)
