"""Wordle play metrics that a collapsed or copying policy cannot game.

Pure functions over finished games, each given as ``(secret, actions)``: the secret word
and the agent's raw assistant texts in order. Every game is replayed through the bare
:class:`~mtrl_gym.envs.wordle.env.WordleEnv` (so "valid" means exactly what the env says),
and each turn is scored against the board the agent saw before it:

* ``valid_word_rate``: turns whose guess is a 5-letter dictionary word (repeats included);
* ``new_word_rate``: valid turns whose word was not guessed before in the game; both with
  their counts (``valid_words``, ``new_words``) and Wilson 95 % intervals over turns
  (``valid_word_low``/``_high``, ``new_word_low``/``_high``);
* ``consistency``: turns with at least one played guess on the board (turns 2-6) whose
  guess is a dictionary word that fits *all* feedback so far (it could be the secret);
  an invalid or repeated guess counts as inconsistent;
* ``random_consistency``: the same for a uniformly random allowed word **on the same
  boards**, computed exactly (the share of the 11,072 allowed words that fit each board),
  and ``consistency_vs_random``, the ratio;
* ``control_consistency``: the shuffled-feedback control. Each game's board is kept (the
  agent's own words) but its feedback is recomputed for the secret of another game (a
  seeded derangement); the agent's actual guess is scored against that board. An agent
  that ignores the feedback is as consistent with the wrong feedback as with the right one;
  one that reads it is far more consistent with its own;
* letter-level clue use, for every later turn whose guess is five letters a-z, *a word or
  not* (so a policy that reads the board but cannot yet spell shows it), and not a repeat (a
  word already on the board keeps its own greens for free): ``greens_kept``,
  the share of turns with a green on the board whose guess keeps every green letter in
  place; ``grays_avoided``, with a gray letter on the board, uses none; ``yellows_used``,
  with a letter known to be in the word but not yet placed, contains every such letter;
  each with its count (``greens_kept_n``/``green_turns``, ...) and ``random_greens_kept``
  (...), the share of the allowed words that do so on the same boards, computed exactly;
* ``solve_rate`` with a Wilson 95 % interval (``solve_rate_low``/``_high``), and the
  random-answer-word policy's exact solve rate (a distinct answer each of 6 turns:
  6 / 1,923 = 0.31 %) as the floor to beat;
* ``top_guess_share``/``top_guess``: the most common *valid* guess (a dictionary word) and
  its share of the valid turns, so a policy that plays one word whenever it spells a word is
  seen as collapsed however few words it spells (``top_guess_n``: its count, which reports
  print beside the share, so 100 % of one valid turn reads as what it is); ``top_guess`` is
  ``""`` when no turn made a valid guess (reports then say "no valid guess").

>>> from mtrl_gym.envs.wordle.solver import format_guess
>>> m = play_metrics([("paste", [format_guess("crane"), format_guess("paste")])])
>>> m["solve_rate"], m["valid_word_rate"], m["consistency"]
(1.0, 1.0, 1.0)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mtrl_gym import registry
from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.knowledge import Knowledge

__all__ = ["TurnFacts", "replay_game", "board_consistent", "random_consistency", "letter_clues", "LETTER_CLUES",
           "play_metrics", "wilson_interval",
           "RANDOM_ANSWER_SOLVE_RATE", "REPLAY_ENV_ID"]

#: Solve rate of a policy that plays a distinct random answer-list word on each of 6 turns.
RANDOM_ANSWER_SOLVE_RATE = game.MAX_GUESSES / len(game.answers())
#: The env replays run through, made by id (the Wordle profile names this module): the standard game.
REPLAY_ENV_ID = "mtrl/Wordle-v0"


@dataclass
class TurnFacts:
    """One agent turn of a replayed game."""

    guess: str | None
    """The parsed guess (lower-case), or None (no parsable guess)."""
    valid: bool
    """A 5-letter dictionary word (repeats included)."""
    repeated: bool
    board: list[tuple[str, int]]
    """The played ``(word, pattern code)`` before this turn."""


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % by default); ``(0, 1)`` when n = 0.

    >>> [round(x, 4) for x in wilson_interval(0, 128)]
    [0.0, 0.0291]
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def replay_game(secret: str, actions: Sequence[str]) -> tuple[list[TurnFacts], bool]:
    """Replay ``actions`` against ``secret`` in the bare env; ``(turn facts, solved)``.

    Replay stops when the env ends the game; actions after that are ignored.
    """
    env = registry.make(REPLAY_ENV_ID).unwrapped
    env.reset(seed=0, options={"answer": secret})
    board: list[tuple[str, int]] = []
    turns: list[TurnFacts] = []
    solved = False
    for action in actions:
        _, _, terminated, truncated, info = env.step(str(action))
        guess = info.get("guess")
        valid = bool(info.get("in_dictionary")) and guess is not None and len(guess) == game.WORD_LENGTH
        turns.append(TurnFacts(guess, valid, bool(info.get("repeated")), list(board)))
        if info.get("valid") and info.get("feedback") is not None:
            codes = [game.COLOR_NAMES.index(c) for c in info["feedback"]]
            board.append((guess, game.pattern_code(codes)))
        solved = bool(info.get("solved"))
        if terminated or truncated:
            break
    return turns, solved


def board_consistent(guess: str | None, board: Sequence[tuple[str, int]]) -> bool:
    """Whether ``guess`` is an allowed word that gives every board word its recorded feedback
    (i.e. it could be the secret)."""
    if guess is None or guess not in game.allowed_index():
        return False
    return all(game.pattern_code(game.feedback(word, guess)) == code for word, code in board)


def random_consistency(board: Sequence[tuple[str, int]]) -> float:
    """Share of the allowed words consistent with ``board`` (a random word's chance)."""
    letters = _allowed_letters()
    mask = np.ones(len(letters), dtype=bool)
    for word, code in board:
        mask &= game.feedback_codes(game.letters_of([word]), letters)[0] == code
    return float(mask.mean())


def _allowed_letters() -> np.ndarray:
    global _LETTERS
    if _LETTERS is None:
        _LETTERS = game.letters_of(game.allowed_guesses())
    return _LETTERS


_LETTERS: np.ndarray | None = None


def _derangement(n: int, seed: int) -> list[int]:
    """A seeded permutation of ``range(n)`` with no fixed point (identity when n < 2)."""
    if n < 2:
        return list(range(n))
    order = np.random.default_rng(seed).permutation(n)
    shifted = np.roll(order, 1)  # i -> the next index in a random cycle: never itself
    out = [0] * n
    for a, b in zip(order, shifted):
        out[int(a)] = int(b)
    return out


#: The letter-level clue checks of :func:`letter_clues`, in the order of its tuples, each with the
#: :func:`play_metrics` key that counts the turns whose board had that clue.
LETTER_CLUES = {"greens_kept": "green_turns", "grays_avoided": "gray_turns", "yellows_used": "yellow_turns"}


def _five_letters(text: str | None) -> bool:
    return text is not None and len(text) == game.WORD_LENGTH and text.isascii() and text.isalpha()


def letter_clues(board: Sequence[tuple[str, int]], guess: str) -> tuple[tuple[bool | None, ...], tuple[float, ...]]:
    """Which letter-level clues of ``board`` a five-letter ``guess`` (word or not) follows, in the
    order of :data:`LETTER_CLUES` (``None`` where the board has no such clue), and the share of the
    allowed words that follow each one (a random word's chance on this board; 0 where ``None``).

    >>> follows, chance = letter_clues([("crane", game.pattern_code((0, 1, 2, 0, 0)))], "shard")
    >>> follows, [round(c, 3) for c in chance]
    ((True, True, True), [0.098, 0.351, 0.304])
    >>> letter_clues([("crane", game.pattern_code((0, 1, 2, 0, 0)))], "XXAXX")[0]  # not a word: still scored
    (True, True, False)
    """
    if not _five_letters(guess):
        raise ValueError(f"letter_clues scores five letters a-z, got {guess[:20]!r}")
    guess = guess.lower()
    known = Knowledge()
    for word, code in board:
        known.update(word, game.decode_pattern(code))
    letters = _allowed_letters()
    codes = np.frombuffer(guess.encode("ascii"), dtype=np.uint8) - ord("a")
    greens = [(i, ord(ch) - ord("a")) for i, ch in enumerate(known.greens) if ch is not None]
    gray = [ord(ch) - ord("a") for ch, m in known.max_count.items() if m == 0]
    yellow = [ord(ch) - ord("a") for ch, m in known.min_count.items() if m > known.greens.count(ch)]
    follows: list[bool | None] = [None, None, None]
    chance = [0.0, 0.0, 0.0]
    if greens:
        follows[0] = all(codes[i] == c for i, c in greens)
        chance[0] = float(np.logical_and.reduce([letters[:, i] == c for i, c in greens]).mean())
    if gray:
        follows[1] = not np.isin(codes, gray).any()
        chance[1] = float((~np.isin(letters, gray).any(axis=1)).mean())
    if yellow:
        follows[2] = all((codes == c).any() for c in yellow)
        chance[2] = float(np.logical_and.reduce([(letters == c).any(axis=1) for c in yellow]).mean())
    return tuple(follows), tuple(chance)


def play_metrics(games: Sequence[tuple[str, Sequence[str]]], *, control_seed: int = 0) -> dict[str, Any]:
    """The metrics of the module docstring over ``games`` = ``[(secret, actions), ...]``."""
    replays = [replay_game(secret, actions) for secret, actions in games]
    secrets = [secret for secret, _ in games]
    other = _derangement(len(games), control_seed)
    turns = valid = new = later = consistent = control = 0
    random_sum = 0.0
    guesses: Counter[str] = Counter()
    clue_turns, clue_kept, clue_chance = [0] * 3, [0] * 3, [0.0] * 3
    for g, (facts, _) in enumerate(replays):
        for f in facts:
            turns += 1
            valid += f.valid
            new += f.valid and not f.repeated
            if f.valid:
                guesses[f.guess] += 1
            if not f.board:
                continue
            later += 1
            consistent += (not f.repeated) and board_consistent(f.guess, f.board)
            random_sum += random_consistency(f.board)
            shuffled = [(w, game.pattern_code(game.feedback(w, secrets[other[g]]))) for w, _ in f.board]
            control += (not f.repeated) and board_consistent(f.guess, shuffled)
            if not f.repeated and _five_letters(f.guess):
                for k, (follows, chance) in enumerate(zip(*letter_clues(f.board, f.guess))):
                    if follows is not None:
                        clue_turns[k] += 1
                        clue_kept[k] += follows
                        clue_chance[k] += chance
    solved = sum(s for _, s in replays)
    low, high = wilson_interval(solved, len(games))
    top, top_n = guesses.most_common(1)[0] if guesses else ("", 0)
    def rate(a, b):
        return (a / b if b else 0.0)
    cons, rand = rate(consistent, later), rate(random_sum, later)
    valid_low, valid_high = wilson_interval(valid, turns)
    new_low, new_high = wilson_interval(new, turns)
    clues = {}
    for k, (name, count) in enumerate(LETTER_CLUES.items()):
        clues.update({name: rate(clue_kept[k], clue_turns[k]), f"{name}_n": clue_kept[k], count: clue_turns[k],
                      f"random_{name}": rate(clue_chance[k], clue_turns[k])})
    return {"games": len(games), "turns": turns, "later_turns": later, **clues,
            "valid_word_rate": rate(valid, turns), "valid_words": valid, "valid_word_low": valid_low,
            "valid_word_high": valid_high,
            "new_word_rate": rate(new, turns), "new_words": new, "new_word_low": new_low, "new_word_high": new_high,
            "consistency": cons, "random_consistency": rand,
            "consistency_vs_random": cons / rand if rand else 0.0,
            "control_consistency": rate(control, later),
            "solve_rate": rate(solved, len(games)), "solved": solved, "solve_rate_low": low, "solve_rate_high": high,
            "random_answer_solve_rate": RANDOM_ANSWER_SOLVE_RATE,
            "top_guess": top, "top_guess_share": rate(top_n, sum(guesses.values())), "top_guess_n": top_n}


def records_play_metrics(records: Sequence[Mapping[str, Any]], *, split_seed: int = 42) -> dict[str, Any]:
    """:func:`play_metrics` of evaluation episode records (dicts with ``messages``, ``task_id``,
    ``final_info``): the secret is the final step's ``info["answer"]``, else the split row named
    by the record's ``task_id``; records whose secret cannot be found are left out."""
    from mtrl_gym.envs.wordle.splits import wordle_split

    by_id = {row["id"]: row["answer"] for split in wordle_split(seed=split_seed) for row in split}
    games = []
    for record in records:
        secret = (record.get("final_info") or {}).get("answer") or by_id.get(str(record.get("task_id", "")))
        if not secret:
            continue
        actions = [str(m.get("content") or "") for m in record.get("messages") or [] if m.get("role") == "assistant"]
        games.append((str(secret), actions))
    return play_metrics(games)
