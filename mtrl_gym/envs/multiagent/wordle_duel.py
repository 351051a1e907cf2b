"""Wordle Duel (``mtrl/WordleDuel-v0``): two seats race to find one seeded secret word.

Each seat plays its own Wordle board (a :class:`~mtrl_gym.envs.wordle.WordleEnv` with the
shared secret pinned, so action formats and invalid-action rules are exactly those of
``mtrl/Wordle-v0``) and sees the feedback of both boards. ``env()`` gives the AEC API,
``parallel_env()`` the Parallel API (the names PettingZoo's checkers look for).

>>> duel = parallel_env()
>>> obs, infos = duel.reset(seed=0)
>>> duel.agents, sorted(obs["player_0"])
(['player_0', 'player_1'], ['text'])
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.multiagent.base import CycleAECEnv, CycleGame, CycleParallelEnv, SeatUpdate
from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.env import WordleEnv
from mtrl_gym.envs.wordle.game import MAX_GUESSES
from mtrl_gym.envs.wordle.knowledge import Knowledge, describe_feedback
from mtrl_gym.envs.wordle.prompts import SYSTEM_PROMPT, TOOLS
from mtrl_gym.error import InvalidTask

__all__ = ["WordleDuelEnv", "WordleDuelParallelEnv", "DuelGame", "env", "parallel_env", "SEATS", "WIN_REWARD",
           "LOSS_REWARD", "DRAW_REWARD", "DEFAULT_MAX_CYCLES", "DUEL_RULES"]

SEATS = ("player_0", "player_1")
WIN_REWARD, LOSS_REWARD, DRAW_REWARD = 1.0, -1.0, 0.0
#: Cycles (turns of each seat) before the game is truncated as a draw.
DEFAULT_MAX_CYCLES = 12
_UNLIMITED_TURNS = 10**9  # the boards never end a game on turns: the duel's cycle limit does

DUEL_RULES = f"""

This is a duel. Another player is looking for the same secret word on a board of its own. \
You both guess once per turn; after each turn you see the feedback of your guess and of \
your opponent's guess, so their clues help you too. The first to find the word wins \
(+1, the other player gets -1). If both find it in the same turn, or neither finds it \
within {MAX_GUESSES} guesses each or {DEFAULT_MAX_CYCLES} turns, the game is a draw (0). An invalid \
guess does not use a guess, but it uses your turn."""

_DUEL_TASK = (f"Let's play Wordle Duel. A secret 5-letter word has been chosen; you and your opponent both look "
              f"for it, {MAX_GUESSES} guesses each. Make your first guess with the guess_word tool.")


class DuelGame(CycleGame):
    """The rules of Wordle Duel, one cycle (both seats' turns) at a time; see :class:`WordleDuelEnv`."""

    seats = SEATS
    charset = string.printable
    observation_chars = 8192
    action_chars = 100_000
    reward_range = (LOSS_REWARD, WIN_REWARD)
    success_threshold = WIN_REWARD

    @property
    def secret_word(self) -> str:
        """The word both seats look for (for tests and the kit's leak check; never show it to a seat)."""
        return self._secret

    def __init__(self, max_cycles: int = DEFAULT_MAX_CYCLES, invalid_word: str = "reject"):
        super().__init__(max_cycles)
        self.boards = {s: WordleEnv(invalid_word=invalid_word, max_steps=_UNLIMITED_TURNS) for s in SEATS}
        self.invalid_word = invalid_word
        self.system_prompt = SYSTEM_PROMPT + DUEL_RULES.replace(f"{DEFAULT_MAX_CYCLES} turns", f"{max_cycles} turns")
        self._secret = ""
        self._over = True

    # ------------------------------------------------------------------ reset

    def reset(self, rng: np.random.Generator, options: Mapping[str, Any]) -> dict[str, SeatUpdate]:
        secret, task_id = self._choose(rng, options)
        self._secret, self._over, self.cycle = secret, False, 0
        self._known = {s: Knowledge() for s in SEATS}
        self._used = {s: 0 for s in SEATS}
        updates = {}
        for s in SEATS:
            _, board_info = self.boards[s].reset(options={"answer": secret})
            info = {"system_prompt": self.system_prompt, "tools": TOOLS, "task_id": task_id, "seat": s,
                    "waiting": False, "guesses_used": 0, "cycle": 0,
                    "candidates_remaining": board_info["candidates_remaining"]}
            updates[s] = SeatUpdate(_DUEL_TASK, info=info)
        self._task_id = task_id
        return updates

    def _choose(self, rng: np.random.Generator, options: Mapping[str, Any]) -> tuple[str, str]:
        # Keys other than "answer" and "task" are ignored: PettingZoo's checkers pass {"options": 1}.
        if "task" in options:
            from mtrl_gym.datasets import decode_task

            row = decode_task(options["task"])
            answer, task_id = row.get("answer"), str(row.get("id") or "")
        elif "answer" in options:
            answer, task_id = options["answer"], ""
        else:
            answer = game.answers()[int(rng.integers(len(game.answers())))]
            task_id = ""
        if not isinstance(answer, str) or len(answer.strip()) != 5 or not answer.strip().isascii() \
                or not answer.strip().isalpha():
            raise InvalidTask(f"a Wordle Duel answer must be a 5-letter word a-z, got {answer!r}")
        answer = answer.strip().lower()
        return answer, task_id or _task_id(answer)

    # ------------------------------------------------------------------ cycles

    def waiting(self, seat: str) -> bool:
        return not self._over and self._used[seat] >= MAX_GUESSES

    def resolve(self, actions: Mapping[str, str | None]) -> dict[str, SeatUpdate]:
        if self._over:
            raise RuntimeError("the game has ended; call reset() before step()")
        self.cycle += 1
        moves: dict[str, _Move | None] = {}
        for s in SEATS:
            action = actions.get(s)
            if action is None or self.waiting(s):
                moves[s] = None
                continue
            text, _, _, _, info = self.boards[s].step(action)
            move = moves[s] = _Move(text, info)
            if move.valid:
                self._used[s] = info["guesses_used"]
                for k in SEATS:
                    self._known[k].update(move.guess, move.codes)
        solved = [s for s in SEATS if moves[s] is not None and moves[s].info["solved"]]
        exhausted = all(self._used[s] >= MAX_GUESSES for s in SEATS)
        terminated = bool(solved) or exhausted
        truncated = not terminated and self.cycle >= self.max_cycles
        self._over = terminated or truncated
        winner = solved[0] if len(solved) == 1 else None
        if winner is not None:
            ending = "win"
        elif solved:
            ending = "same_turn"
        else:
            ending = "exhausted" if exhausted else "turn_limit" if truncated else None
        return {s: self._update(s, moves, winner, ending, terminated, truncated) for s in SEATS}

    def _update(self, seat: str, moves: Mapping[str, _Move | None], winner: str | None, ending: str | None,
                terminated: bool, truncated: bool) -> SeatUpdate:
        other = SEATS[1 - SEATS.index(seat)]
        own, theirs = moves[seat], moves[other]
        info = own.seat_info() if own is not None else _skipped_info()
        results = info["tool_results"]
        if own is None:
            head = "You have no guesses left; your turn is skipped until the game ends."
        elif own.valid:
            text = (f"Guess {own.info['guesses_used']}/{MAX_GUESSES}: {own.guess.upper()}"
                    f"{' (you already guessed this word)' if own.info['repeated'] else ''}\n"
                    f"Feedback: {describe_feedback(own.guess, own.codes)}")
            played_at = next(i for i, r in enumerate(results) if r["name"] == "guess_word")
            results[played_at] = dict(results[played_at], content=text)
            head = "\n".join(r["content"] for r in results)
        else:  # an invalid action never ends a board: its text holds no secret
            left = f"\nYou have {MAX_GUESSES - self._used[seat]} guesses left."  # said below, with the opponent's
            results[:] = [dict(r, content=r["content"].removesuffix(left)) for r in results]
            head = own.text.removesuffix(left)
        lines = []
        if theirs is not None and theirs.valid:
            lines.append(f"Opponent's guess {theirs.info['guesses_used']}/{MAX_GUESSES}: {theirs.guess.upper()}\n"
                         f"Feedback: {describe_feedback(theirs.guess, theirs.codes)}")
        else:
            lines.append("Opponent: no valid guess this turn.")
        if self._known[seat].guesses:
            lines.append(self._known[seat].summary())
        over = terminated or truncated
        if over:
            lines.append(self._ending(seat, winner, ending))
        else:
            lines.append(f"You have {MAX_GUESSES - self._used[seat]} guesses left, your opponent "
                         f"{MAX_GUESSES - self._used[other]}; turn {self.cycle + 1} of {self.max_cycles} is next.")
        obs = (head + "\n" + "\n".join(lines))[:self.observation_chars]
        reward = DRAW_REWARD if winner is None else WIN_REWARD if winner == seat else LOSS_REWARD
        info.update(seat=seat, cycle=self.cycle, waiting=self.waiting(seat), guesses_used=self._used[seat],
                    opponent_guess=theirs.guess if theirs is not None and theirs.valid else None,
                    opponent_feedback=theirs.info["feedback"] if theirs is not None and theirs.valid else None,
                    opponent_guesses_used=self._used[other], outcome=None)
        if over:
            info.update(answer=self._secret, winner=winner, success=winner == seat,
                        outcome="win" if winner == seat else "loss" if winner is not None else "draw")
        return SeatUpdate(obs, reward, terminated, truncated, info)

    def _ending(self, seat: str, winner: str | None, ending: str | None) -> str:
        word = self._secret.upper()
        if winner == seat:
            return f"You found the word {word} first: you win. The game is over."
        if winner is not None:
            return f"Your opponent found the word {word} first: you lose. The game is over."
        if ending == "same_turn":
            return f"Both players found the word {word} in the same turn: a draw. The game is over."
        if ending == "exhausted":
            return f"Neither player found the word: a draw. The word was {word}. The game is over."
        return f"The turn limit ({self.max_cycles}) was reached: a draw. The word was {word}. The game is over."


class _Move:
    """One seat's turn on its board: the board's reply text and step info."""

    __slots__ = ("text", "info", "valid", "guess", "codes")

    def __init__(self, text: str, info: dict[str, Any]):
        self.text, self.info = text, info
        self.valid = bool(info["valid"])
        self.guess = info["guess"] if self.valid else None
        self.codes = tuple(game.COLOR_NAMES.index(c) for c in info["feedback"]) if self.valid else None

    def seat_info(self) -> dict[str, Any]:
        """The board's step facts a seat may see (never ``answer`` or ``success``)."""
        info = {k: self.info[k] for k in _MOVE_KEYS}
        info["tool_results"] = [dict(r) for r in self.info["tool_results"]]
        return info


def _task_id(answer: str) -> str:
    return "duel-" + hashlib.blake2b(answer.encode(), digest_size=5, key=b"mtrl_gym").hexdigest()


_MOVE_KEYS = ("tool_calls", "tool_results", "format_error", "loose_match", "error", "guess", "guess_text",
              "feedback", "valid", "in_dictionary", "repeated", "solved", "candidates_before",
              "candidates_remaining", "clue_violations", "new_letters")


def _skipped_info() -> dict[str, Any]:
    """The step facts of a seat whose turn was skipped (no guesses left)."""
    return {"tool_calls": [], "tool_results": [], "format_error": False, "loose_match": False, "error": None,
            "guess": None, "guess_text": None, "feedback": None, "valid": False, "in_dictionary": False,
            "repeated": False, "solved": False, "candidates_before": None, "candidates_remaining": None,
            "clue_violations": 0, "new_letters": 0}


_MANUAL = """Wordle Duel: two players race to find the same secret word, each on a board of its own.

    ## Description
    One secret 5-letter word is drawn from the seed. Two seats, ``player_0`` and
    ``player_1``, guess it with the ``guess_word`` tool, one guess per turn each, in turn
    order. A *cycle* is one turn of each seat; when it is complete both seats see the
    feedback of both guesses (so moving second reveals nothing), and each seat's knowledge
    summary combines the clues of both boards. The first seat to find the word wins.

    ## Agents
    ``player_0``, ``player_1`` (turn order within a cycle).

    ## Action Space
    ``Text`` per seat: the model's raw assistant message. Any string is accepted.

    ## Action Format
    Exactly as ``mtrl/Wordle-v0``: ``<tool_call>{"name": "guess_word", "arguments":
    {"guess": "crane"}}</tool_call>``, bare JSON, ``guess_word("crane")``,
    ``<guess>crane</guess>`` or a loose "My guess: CRANE"; the first ``guess_word`` call of a
    message is played.

    ## Observation Space
    ``Dict({"text": Text})`` per seat (see :mod:`mtrl_gym.envs.multiagent.base` for why a
    dict). At reset: the task prompt. After a cycle: the reply to the seat's own action
    (feedback of its guess, or what was wrong), the opponent's guess and feedback (never
    the opponent's text), the combined knowledge summary and the guesses left, or the result.

    ## Invalid Actions
    As ``mtrl/Wordle-v0``: no parsable guess, not 5 letters a-z, not in the word list
    (``invalid_word="reject"``) do not use a guess but use the turn; a repeated word is played.

    ## Starting State
    The secret is drawn with the env's seeded RNG from the answer list, or pinned with
    ``options={"answer": "paste"}`` or ``options={"task": row}`` (a Wordle task row). Other
    option keys are ignored.

    ## Rewards
    Zero-sum, on the final cycle only: the winner +1, the other seat -1; a draw 0 for both
    (both solve in the same cycle, both use their six guesses, or the turn limit).

    ## Episode End
    ``terminated`` for both seats when a seat solves or both have used six guesses;
    ``truncated`` for both after ``max_cycles`` cycles (12). A seat with no guesses left
    is *waiting* (``info["waiting"]``): its actions are ignored until the game ends.

    ## Information
    At reset: ``system_prompt``, ``tools``, ``task_id``, ``seat``, ``waiting``,
    ``guesses_used``, ``cycle``. After each cycle, the seat's own move as in
    ``mtrl/Wordle-v0`` (``tool_calls``, ``tool_results``, ``format_error``, ``error``,
    ``guess``, ``feedback``, ``valid``, ``repeated``, ``solved``, ``candidates_remaining`` of
    its own board, ...), plus ``cycle``, ``waiting``, ``guesses_used``, ``opponent_guess``,
    ``opponent_feedback``, ``opponent_guesses_used`` and ``outcome`` (None until the end).
    On the final cycle only: ``answer``, ``winner`` (a seat or None), ``success`` (this seat
    won) and ``outcome`` (``"win"``, ``"loss"`` or ``"draw"``).

    ## Arguments
    ``mtrl_gym.registry.make_multiagent("mtrl/WordleDuel-v0", parallel=False, max_cycles=12,
    invalid_word="reject")``.

    ## Version History
    - v0: initial version.
    """


class WordleDuelEnv(CycleAECEnv):
    __doc__ = _MANUAL
    game_class = DuelGame
    metadata = {"render_modes": ["ansi"], "name": "wordle_duel_v0", "is_parallelizable": True}

    def __init__(self, *, max_cycles: int = DEFAULT_MAX_CYCLES, invalid_word: str = "reject",
                 render_mode: str | None = None):
        super().__init__(render_mode=render_mode, max_cycles=max_cycles, invalid_word=invalid_word)


class WordleDuelParallelEnv(CycleParallelEnv):
    __doc__ = _MANUAL.replace("Wordle Duel:", "Wordle Duel, Parallel API:", 1)
    game_class = DuelGame
    metadata = {"render_modes": ["ansi"], "name": "wordle_duel_v0", "is_parallelizable": True}

    def __init__(self, *, max_cycles: int = DEFAULT_MAX_CYCLES, invalid_word: str = "reject",
                 render_mode: str | None = None):
        super().__init__(render_mode=render_mode, max_cycles=max_cycles, invalid_word=invalid_word)


def profile():
    """Wordle's task splits (the duel plays the same secrets); success is a win."""
    import dataclasses

    from mtrl_gym.envs.wordle.profile import wordle_profile

    return dataclasses.replace(wordle_profile(DuelGame.success_threshold), reference_policies={},
                               shaping_limits=None, turn_facts=None, secret=_seat_secrets,
                               fitting_actions=None)  # a duel's games replay in no single-seat env


def _seat_secrets(env: Any) -> dict[str, str]:
    """The kit's leak check: neither seat may see the shared word before the final cycle."""
    return {seat: env.game.secret_word for seat in env.possible_agents}


def env(**kwargs: Any) -> WordleDuelEnv:
    """The AEC env (PettingZoo's ``env()`` convention)."""
    return WordleDuelEnv(**kwargs)


def parallel_env(**kwargs: Any) -> WordleDuelParallelEnv:
    """The Parallel env (PettingZoo's ``parallel_env()`` convention)."""
    return WordleDuelParallelEnv(**kwargs)
