"""What one Wordle turn did, in two yes/no facts read from the step's ``info``.

:func:`wordle_turn_facts` is the Wordle piece of the per-episode play statistics that
:class:`mtrl_gym.wrappers.EpisodeStats` reports (training's held-out check, the run
summary); it reads only the public per-step facts of :class:`~mtrl_gym.envs.wordle.WordleEnv`:

* ``valid_guess``: the turn played a guess (``info["valid"]``; a repeated word counts, as
  it uses a guess);
* ``new_word``: the guess was a real word not guessed before in the game (``valid``,
  ``in_dictionary`` and not ``repeated``).

A turn without a guess (a format error, a non-word) is neither.

>>> wordle_turn_facts({"valid": True, "in_dictionary": True, "repeated": False, "guess": "crane"})
{'valid_guess': True, 'new_word': True}
>>> wordle_turn_facts({"valid": True, "in_dictionary": True, "repeated": True, "guess": "crane"})
{'valid_guess': True, 'new_word': False}
>>> wordle_turn_facts({"format_error": True, "valid": False})
{'valid_guess': False, 'new_word': False}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["wordle_turn_facts", "TURN_FACTS"]

#: The facts :func:`wordle_turn_facts` returns, in order.
TURN_FACTS = ("valid_guess", "new_word")


def wordle_turn_facts(info: Mapping[str, Any]) -> dict[str, bool]:
    """``{"valid_guess": ..., "new_word": ...}`` of one step's ``info`` (see the module docstring)."""
    valid = info.get("valid") is True
    new = valid and info.get("in_dictionary") is not False and info.get("repeated") is not True
    return {"valid_guess": valid, "new_word": bool(new)}
