"""Wordle as a text-action Gymnasium environment (``mtrl/Wordle-v0``, ``mtrl/Wordle-Hard-v0``)."""

from __future__ import annotations

import re
import string
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from mtrl_gym.envs.spaces import TextSpace
from mtrl_gym.envs.wordle import game
from mtrl_gym.envs.wordle.game import MAX_GUESSES, WORD_LENGTH
from mtrl_gym.envs.wordle.knowledge import Knowledge, feedback_text
from mtrl_gym.envs.wordle.prompts import HARD_MODE_RULE, NO_GUESS_HELP, SYSTEM_PROMPT, TASK_PROMPT, TOOLS
from mtrl_gym.envs.wordle.task_ids import task_id_for
from mtrl_gym.error import InvalidTask
from mtrl_gym.parsing import ParseResult, ToolCallParser

__all__ = ["WordleEnv", "SUCCESS_THRESHOLD", "MIN_REWARD", "MAX_REWARD", "LOSS_REWARD", "solve_reward"]

#: An episode counts as a success when its reward is at least this (any solve).
SUCCESS_THRESHOLD = 1.0
#: Reward of an episode that ends without a single valid guess.
MIN_REWARD = -1.5
#: Reward of a lost game (six valid guesses, or the step cap, without a solve).
LOSS_REWARD = -0.5
#: Reward of a solve on the first guess.
MAX_REWARD = 1.55
#: Characters that can appear in observations (model text is never echoed verbatim).
CHARSET = string.printable
MAX_OBSERVATION_CHARS = 8_192
MAX_ACTION_CHARS = 100_000
DEFAULT_MAX_STEPS = 12


def solve_reward(n: int) -> float:
    """Outcome reward of a solve on guess ``n`` (1..6): 1.55, 1.45, ..., 1.05."""
    return 1.05 + 0.5 * (MAX_GUESSES - n) / 5


# One whitespace run before and after the optional "is"/":"/"="/"->": written as
# ``\s*(?:(?:is|...)\s*)?`` rather than ``\s*(?:is|...)?\s*``, whose two adjacent runs
# backtrack quadratically on a long run of spaces (the same matches otherwise).
_LOOSE_RE = re.compile(
    r"\b(?:guess(?:_word)?|answer|word)\b\s*(?:(?:is|:|=|->)\s*)?[\"'*`]*([A-Za-z]{5})(?![A-Za-z])", re.IGNORECASE)
_LONE_WORD_RE = re.compile(r"^\W*([A-Za-z]{5})\W*$")


def _loose_guess(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Plain-text fallback: "My guess: CRANE", "guess_word crane", or a message that is one word."""
    m = _LONE_WORD_RE.match(text)
    if m is None:
        matches = _LOOSE_RE.findall(text)
        if not matches:
            return []
        return [("guess_word", {"guess": matches[-1]})]
    return [("guess_word", {"guess": m.group(1)})]


_PARSER = ToolCallParser(TOOLS, tags={"guess": ("guess_word", "guess")}, loose=_loose_guess)


def _ascii(text: str, limit: int = 40) -> str:
    """Model text made safe to quote in an observation (printable ASCII, short)."""
    clean = "".join(ch if ch in CHARSET and ch not in "\r\x0b\x0c" else "?" for ch in text[:limit])
    return clean + ("..." if len(text) > limit else "")


_ALL_COLUMNS = np.arange(len(game.answers()))
_ALL_COLUMNS.flags.writeable = False
_FEEDBACK_NAMES = tuple(tuple(game.COLOR_NAMES[c] for c in game.decode_pattern(code)) for code in range(3 ** WORD_LENGTH))
_FEW_CANDIDATES = 48  # below this many, candidates are filtered as a list
_SOLVED_CODE = game.SOLVED_CODE
_ALLOWED = game.allowed_index()
_REPEATED_NOTE = " (you already guessed this word)"
# "\nYou have 4 guesses left." / "... left and 2 turns." by (guesses left, turns left)
# "\nYou have 4 guesses left." / "... left and 2 turns.", indexed [guesses left][min(turns left, 4)]
_LEFT = tuple(tuple(f"\nYou have {g} guesses left" + (f" and {t} turns." if t <= 3 else ".") for t in range(5))
              for g in range(MAX_GUESSES + 1))


_ANSWER_RE = re.compile(r"[A-Za-z]{5}")


class WordleEnv(gymnasium.Env[str, str]):
    """Wordle: find a secret 5-letter word in six guesses, using per-letter feedback.

    ## Description
    The classic word game as a multi-turn tool-use task. The agent calls ``guess_word``
    once per turn; the environment answers with green/yellow/gray feedback per letter and
    a summary of everything known so far. Word lists (1,923 answers, 11,072 accepted
    guesses) are built from SCOWL and ship with the package; see ``data/licenses``.

    ## Action Space
    ``Text``: the model's raw assistant message. Any string is accepted.

    ## Action Format
    Any format of :mod:`mtrl_gym.parsing`: ``<tool_call>{"name": "guess_word",
    "arguments": {"guess": "crane"}}</tool_call>``, bare JSON, ``guess_word("crane")``,
    ``<guess>crane</guess>``; plain text such as ``My guess: CRANE`` is accepted as a loose
    fallback and flagged ``info["loose_match"]``. A guess may be spelled out, ``R E S I N``
    (five letters separated by single spaces or hyphens) or ``R1 E2 S3 I4 N5`` (each letter
    tagged with its position), flagged ``info["spelled"]`` (the key is only there then).
    The first ``guess_word`` call is played;
    further calls in the same message are ignored and the observation says so.

    ## Observation Space
    ``Text`` (printable ASCII). At reset: the task prompt. After a played guess: the
    feedback (``C gray, R yellow, ...``), the knowledge summary (greens by position, yellow
    letters with counts and excluded positions, letters with no further copies, gray
    letters, words guessed) and the guesses remaining. After an invalid action: what was
    wrong and how to fix it.

    ## Invalid Actions
    None of these uses a guess: no parsable guess (``format_error``), a guess that is not
    5 letters a-z, a word not in the dictionary (with ``invalid_word="reject"``), and in
    hard mode a guess that ignores a revealed clue. A repeated word is played, uses a guess
    and is flagged ``repeated``.

    ## Starting State
    The secret is drawn with ``self.np_random`` from the answer list, or pinned with
    ``options={"answer": "paste"}`` or ``options={"task": row}`` (a task row, see
    :mod:`mtrl_gym.datasets`). The same seed gives the same secret in every process.

    ## Rewards
    Outcome only, on the final step (0 on other steps): a solve on guess ``n`` gives
    ``1.05 + 0.5 * (6 - n) / 5`` (1.55 ... 1.05); a loss gives -0.5; an episode with no
    valid guess at all gives -1.5. Success is ``reward >= SUCCESS_THRESHOLD`` (1.0).
    Shaping is the job of wrappers (:class:`mtrl_gym.wrappers.WordleShaping`).

    ## Episode End
    ``terminated`` when the word is found, after six played guesses, or on the
    ``max_steps``-th step (12 by default) whatever the steps contained. Never ``truncated``
    by the env itself.

    ## Information
    At reset: ``system_prompt``, ``tools``, ``task_id``. Every step: ``tool_calls``,
    ``tool_results``, ``format_error``, ``loose_match``, ``error`` (None or one of
    ``no_guess``, ``bad_arguments``, ``not_letters``, ``wrong_length``,
    ``not_in_dictionary``, ``hard_mode``), ``guess`` (lower-case or None), ``guess_text``
    (the guess argument as written, at most 64 characters, or None), ``feedback``
    (list of ``"green"``/``"yellow"``/``"gray"`` or None), ``valid`` (the guess was
    played), ``in_dictionary``, ``repeated``, ``solved``, ``guesses_used``, ``turns_used``,
    ``candidates_before``/``candidates_remaining`` (answers consistent with the feedback
    before/after this step), ``clue_violations`` (revealed clues the guess ignores),
    ``new_letters`` (distinct letters not in earlier guesses). ``spelled`` (True) only on a
    step whose guess was spelled out (``R E S I N``). ``message_truncated`` (True)
    only on a step whose message was longer than the parser reads
    (:data:`mtrl_gym.parsing.MAX_PARSE_CHARS`; the observation says so too). On the final
    step only: ``answer`` and ``success``.

    ## Arguments
    ``gymnasium.make("mtrl/Wordle-v0", invalid_word="reject", max_steps=12)``;
    ``mtrl/Wordle-Hard-v0`` sets ``hard_mode=True``.

    - ``hard_mode``: every guess must be consistent with all feedback so far.
    - ``invalid_word``: ``"reject"`` (default) or ``"play"`` out-of-dictionary words.
    - ``max_steps``: steps per episode whatever they contain (>= 6).

    ## Version History
    - v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}
    success_threshold = SUCCESS_THRESHOLD

    @classmethod
    def profile(cls):
        """Splits, reference policies and tiers (:mod:`mtrl_gym.envs.wordle.profile`)."""
        from mtrl_gym.envs.wordle.profile import wordle_profile

        return wordle_profile(cls.success_threshold)

    reward_range = (MIN_REWARD, MAX_REWARD)

    def __init__(self, *, hard_mode: bool = False, invalid_word: str = "reject",
                 max_steps: int = DEFAULT_MAX_STEPS, render_mode: str | None = None):
        if invalid_word not in ("reject", "play"):
            raise ValueError(f'`invalid_word` must be "reject" or "play", got {invalid_word!r}')
        if not isinstance(max_steps, (int, np.integer)) or max_steps < MAX_GUESSES:
            raise ValueError(f"`max_steps` must be an int >= {MAX_GUESSES}, got {max_steps!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"`render_mode` must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.hard_mode = bool(hard_mode)
        self.invalid_word = invalid_word
        self.max_steps = int(max_steps)
        self.render_mode = render_mode
        # TextSpace: a Text space whose observations stay current in async vector envs.
        self.observation_space = TextSpace(MAX_OBSERVATION_CHARS, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=CHARSET)
        self.system_prompt = SYSTEM_PROMPT + (HARD_MODE_RULE if self.hard_mode else "")
        self._answer = ""
        self._done = True
        self._last_obs = ""

    @property
    def expected_answer(self) -> str:
        """The current game's answer word (for tests and the kit's leak check; never show it to the agent)."""
        return self._answer

    # ------------------------------------------------------------------ reset

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        answer, task_id, prompt = self._choose_task(options or {})
        self._answer = answer
        self._answer_col = game.answer_index().get(answer, -1)
        # Columns of the answers still consistent with the feedback: an index array (it
        # shrinks fast, so cheaper to filter than a 1,923-long mask), then a plain list once
        # at most _FEW_CANDIDATES are left (see _filter_candidates).
        self._candidates: np.ndarray | list[int] = _ALL_COLUMNS
        self._candidates_extra = self._answer_col < 0  # a secret outside the answer list counts too
        self._n_candidates = len(_ALL_COLUMNS) + self._candidates_extra
        self._knowledge = Knowledge()
        self._guesses_used = 0
        self._turns_used = 0
        self._valid_guesses = 0
        self._done = False
        self._last_obs = prompt
        self._task_id = task_id
        info = {
            "system_prompt": self.system_prompt,
            "tools": TOOLS,
            "task_id": task_id,
            "guesses_used": 0,
            "turns_used": 0,
            "candidates_remaining": self._n_candidates,
        }
        return prompt, info

    def _choose_task(self, options: dict[str, Any]) -> tuple[str, str, str]:
        if not options:  # the common case: a secret drawn from the answer list
            answer = game.answers()[int(self.np_random.integers(len(game.answers())))]
            return answer, task_id_for(answer), TASK_PROMPT
        unknown = set(options) - {"answer", "task"}
        if unknown:
            raise InvalidTask(f"unknown reset option(s) {sorted(unknown)}; Wordle accepts 'answer' and 'task'")
        if "task" in options:
            from mtrl_gym.datasets import decode_task

            row = decode_task(options["task"])
            answer = row.get("answer")
            task_id = str(row.get("id") or "")
        else:
            answer, task_id = options["answer"], ""
        if not isinstance(answer, str) or not _ANSWER_RE.fullmatch(answer.strip()):
            raise InvalidTask(f"a Wordle answer must be a 5-letter word a-z, got {answer!r}")
        answer = answer.strip().lower()
        return answer, task_id or task_id_for(answer), TASK_PROMPT

    @classmethod
    def validate_task(cls, task: dict[str, Any]) -> None:
        """Raise :class:`InvalidTask` for a task row whose answer ``reset`` would refuse."""
        answer = task.get("answer")
        if not isinstance(answer, str) or not _ANSWER_RE.fullmatch(answer.strip()):
            raise InvalidTask(f"a Wordle answer must be a 5-letter word a-z, got {answer!r}")

    def _num_candidates(self) -> int:
        return len(self._candidates) + self._candidates_extra

    def candidate_answers(self) -> list[str]:
        """The answers still consistent with every clue of this episode, in answer-list order
        (the secret itself included when it is not on the list). Never show them to the agent."""
        words = game.answers()
        out = [words[j] for j in (self._candidates.tolist() if isinstance(self._candidates, np.ndarray)
                                  else self._candidates)]
        return out + [self._answer] if self._candidates_extra else out

    # ------------------------------------------------------------------ step

    def step(self, action: str):
        if self._done:
            raise gymnasium.error.ResetNeeded("The episode has ended; call reset() before step().")
        turns = self._turns_used = self._turns_used + 1
        parsed: ParseResult = _PARSER(action)
        calls = parsed.calls
        played = None
        replies: dict[str, str] = {}  # tool_call_id -> content, for the calls not played
        for c in calls:
            if c.name != "guess_word":
                replies[c.id] = f"Unknown tool {_ascii(c.name)!r}. The only tool is guess_word."
            elif played is not None:
                replies[c.id] = "Ignored: only one guess per turn is played."
            else:
                played = c
        n = self._n_candidates
        info = {
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments, "format": c.format}
                           for c in calls],
            "tool_results": None,
            "format_error": False,
            "loose_match": False,
            "error": None,
            "guess": None,
            "guess_text": None,
            "feedback": None,
            "valid": False,
            "in_dictionary": False,
            "repeated": False,
            "solved": False,
            "guesses_used": self._guesses_used,
            "turns_used": turns,
            "candidates_before": n,
            "candidates_remaining": n,
            "clue_violations": 0,
            "new_letters": 0,
        }
        if played is None:
            info["format_error"] = True
            info["error"] = "no_guess"
            problem = (" (" + _ascii(parsed.errors[0], 120) + ")") if parsed.errors else ""
            content = NO_GUESS_HELP + problem
        else:
            if played.format == "loose":
                info["loose_match"] = True
            content = self._play(played, info)
        if parsed.truncated:  # only the first MAX_PARSE_CHARS characters were read
            info["message_truncated"] = True
            content += "\nNote: your message was too long; only its beginning was read."

        guesses = self._guesses_used
        terminated = info["solved"] or guesses >= MAX_GUESSES or turns >= self.max_steps
        reward = 0.0
        if terminated:
            reward = self._final_reward(info)
            content += self._ending(info)
        else:
            turns_left = self.max_steps - turns
            content += _LEFT[MAX_GUESSES - guesses][turns_left if turns_left < 4 else 4]
        # The main reply belongs to the played call; without one it is appended to the last
        # call's reply, so an agent loop that renders only tool messages loses nothing.
        if played is not None:
            replies[played.id] = content
        elif calls:
            replies[calls[-1].id] += "\n" + content
        if len(calls) == 1:
            c = calls[0]
            info["tool_results"] = [{"tool_call_id": c.id, "name": c.name, "content": replies[c.id]}]
            obs = replies[c.id]
        else:
            results = info["tool_results"] = [
                {"tool_call_id": c.id, "name": c.name, "content": replies[c.id]} for c in calls]
            obs = "\n".join([r["content"] for r in results]) if calls else content
        if len(obs) > MAX_OBSERVATION_CHARS:
            obs = obs[:MAX_OBSERVATION_CHARS]
        self._last_obs = obs
        if self.render_mode == "human":
            print(obs)
        return obs, reward, terminated, False, info

    def _play(self, call, info: dict[str, Any]) -> str:
        """Validate the guess of ``call`` and play it if it is legal; return the reply text."""
        args = call.arguments
        raw = args["guess"] if "guess" in args else next(iter(args.values())) if len(args) == 1 else None
        if call.error or not isinstance(raw, str):
            info["format_error"] = True
            info["error"] = "bad_arguments"
            why = call.error or 'guess_word needs one argument "guess" with a 5-letter word'
            return f"Invalid call to guess_word: {_ascii(why, 120)}."
        info["guess_text"] = raw[:64]
        word = raw.strip().strip("\"'`*.")
        spelled = game.unspell(word)
        if spelled is not None:
            word = spelled
            info["spelled"] = True
        word = word.lower()
        if not word.isascii() or not word.isalpha():
            info["error"] = "not_letters"
            return f"Invalid guess {_ascii(raw)!r}: use only the letters a-z. No guess was used."
        info["guess"] = word
        if len(word) != WORD_LENGTH:
            info["error"] = "wrong_length"
            return f"Invalid guess {word.upper()!r}: it has {len(word)} letters, not 5. No guess was used."
        known = self._knowledge
        violations = info["clue_violations"] = known.violations(word)
        info["new_letters"] = known.new_letters(word)
        row = _ALLOWED.get(word)
        in_dict = row is not None or word == self._answer
        info["in_dictionary"] = in_dict
        upper = word.upper()
        if not in_dict and self.invalid_word == "reject":
            info["error"] = "not_in_dictionary"
            return f"{upper} is not in the word list. No guess was used; try another word."
        if self.hard_mode and violations > 0:
            info["error"] = "hard_mode"
            return (f"{upper} ignores {violations} revealed clue(s); in hard mode every "
                    "guess must fit all feedback so far. No guess was used.")
        if row is not None and self._answer_col >= 0:  # both in the shared table: a lookup
            code = game.pattern_table().item(row, self._answer_col)
        else:
            code = game.pattern_code(game.feedback(word, self._answer))
        repeated = word in known.guesses
        known.update(word, game.decode_pattern(code))
        guesses = self._guesses_used = self._guesses_used + 1
        self._valid_guesses += 1
        self._filter_candidates(word, row, code)
        info["feedback"] = list(_FEEDBACK_NAMES[code])
        info["valid"] = True
        if repeated:
            info["repeated"] = True
        if code == _SOLVED_CODE:
            info["solved"] = True
        info["guesses_used"] = guesses
        info["candidates_remaining"] = self._n_candidates
        return (f"Guess {guesses}/{MAX_GUESSES}: {upper}{_REPEATED_NOTE if repeated else ''}\n"
                f"Feedback: {feedback_text(upper, code)}\n{known.summary()}")

    def _filter_candidates(self, word: str, row: int | None, code: int) -> None:
        """Keep the candidate answers that would have given ``code`` for ``word`` (incremental).

        The candidates start as every column of the pattern table and only shrink: numpy
        filters them while there are many, a plain list once few are left (numpy's
        per-call cost would dominate there). The count is kept for ``info``.
        """
        candidates = self._candidates
        if row is None:  # a word outside the table (invalid_word="play"): score it here
            columns = np.asarray(candidates, dtype=np.intp)
            codes = game.feedback_codes(game.letters_of([word]), game.answer_letters()[columns])[0]
            kept = columns[codes == code]
        elif isinstance(candidates, list):
            patterns = game.pattern_table()[row].tobytes()
            kept = self._candidates = [j for j in candidates if patterns[j] == code]
            self._n_candidates = len(kept) + self._candidates_extra
            return
        elif candidates is _ALL_COLUMNS:  # first guess: the table row itself
            kept = (game.pattern_table()[row] == code).nonzero()[0]
        else:  # basic-index the row, then gather: far cheaper than table[row, candidates]
            kept = candidates[game.pattern_table()[row][candidates] == code]
        self._candidates = kept.tolist() if len(kept) <= _FEW_CANDIDATES else kept
        self._n_candidates = len(kept) + self._candidates_extra

    def _final_reward(self, info: dict[str, Any]) -> float:
        self._done = True
        info["answer"] = self._answer
        info["success"] = info["solved"]
        if info["solved"]:
            return solve_reward(self._guesses_used)
        return LOSS_REWARD if self._valid_guesses > 0 else MIN_REWARD

    def _ending(self, info: dict[str, Any]) -> str:
        if info["solved"]:
            return f"\nSolved in {self._guesses_used} guesses. The game is over."
        if self._guesses_used >= MAX_GUESSES:
            return f"\nNo guesses left: the word was {self._answer.upper()}. The game is over."
        return f"\nThe turn limit ({self.max_steps}) was reached: the word was {self._answer.upper()}. The game is over."

    # ------------------------------------------------------------------ render

    def render(self) -> str | None:
        text = self._last_obs
        if self.render_mode == "ansi":
            return text
        return None
