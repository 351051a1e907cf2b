"""What the Wordle envs tell the rest of mtrl_gym (their :class:`~mtrl_gym.envs.profile.EnvProfile`).

* **Splits.** ``train`` and ``val`` are the service's split (:func:`~mtrl_gym.envs.wordle.splits.wordle_split`:
  640 and 128 of the 1,923 answers, shuffled with seed 42 by default), and ``all`` is every
  answer in list order. ``val`` is held out: demonstrations and training refuse it.
* **Reference policies.** ``solver`` (the entropy solver, hard-mode aware), ``random`` (a
  uniformly random allowed word each turn, as a tool call) and ``teacher`` (the consistent
  teacher that demonstrations imitate, :mod:`mtrl_gym.envs.wordle.teacher`).
* **Actions.** ``action_vocabulary`` is every allowed guess in its three written forms
  (:func:`guess_texts`, for dictionary decoding); ``fitting_actions`` the answers consistent with
  every clue before a turn of a finished game (:func:`fitting_guesses`, for distillation toward them).
* **Tiers.** A solve (1.05-1.55) always beats a loss (-0.5), which beats an episode without
  a valid guess (-1.5); :data:`MAX_SUCCESS_WEIGHT` and :data:`MAX_FAILURE_WEIGHT` are the
  largest shaping weights that keep them apart.

>>> train, val = wordle_split()
>>> len(train), len(val), train[0]["answer"], val[0]["id"]
(640, 128, 'riser', 'wordle_val_0000')
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.profile import EnvProfile
from mtrl_gym.envs.wordle.game import allowed_guesses, answers, spell
from mtrl_gym.envs.wordle.solver import format_guess
from mtrl_gym.envs.wordle.splits import SPLIT_SEED, TASK_PROMPT, TRAIN_SIZE, VAL_SIZE, wordle_split
from mtrl_gym.envs.wordle.turn_facts import wordle_turn_facts
from mtrl_gym.error import ConfigError

__all__ = ["wordle_split", "wordle_profile", "guess_texts", "fitting_guesses", "SolverPolicyAdapter",
           "RandomWordPolicy", "TASK_PROMPT", "TRAIN_SIZE", "VAL_SIZE", "SPLIT_SEED", "MAX_SUCCESS_WEIGHT",
           "MAX_FAILURE_WEIGHT"]

#: Largest success weight of bounded shaping: adjacent solves differ by 0.1, so 2 * 0.04 < 0.1 keeps a
#: solve in n guesses above any solve in n + 1, and the worst solve stays >= 1.05 - 0.04 = 1.01.
MAX_SUCCESS_WEIGHT = 0.04
#: Largest failure weight: a loss (-0.5) stays in [-0.65, -0.35], far above an episode without a
#: valid guess (-1.5, whose shaping is never positive).
MAX_FAILURE_WEIGHT = 0.15


def _split_fn(which: str):
    def make(n: int | None, seed: int | None, **options: Any) -> list[dict]:
        _no_options(options)
        seed = SPLIT_SEED if seed is None else seed
        if which == "train":
            if n is not None and n > TRAIN_SIZE:
                raise ConfigError(f"the Wordle train split has {TRAIN_SIZE} answers (the rest are held out), "
                                  f"got n={n}")
            return wordle_split(train=TRAIN_SIZE if n is None else n, val=0, seed=seed)[0]
        if n is not None and n > VAL_SIZE:
            raise ConfigError(f"the Wordle val split has {VAL_SIZE} answers, got n={n}")
        return wordle_split(train=TRAIN_SIZE, val=VAL_SIZE if n is None else n, seed=seed)[1]
    return make


def _no_options(options: Mapping[str, Any]) -> None:
    if options:
        raise ConfigError(f"Wordle task splits take no options, got {sorted(options)}")


def _all_split(n: int | None, seed: int | None, **options: Any) -> list[dict]:
    _no_options(options)
    rows = [{"prompt": TASK_PROMPT, "answer": a, "id": f"wordle_all_{i:04d}"} for i, a in enumerate(answers())]
    return rows[:n] if n else rows


class SolverPolicyAdapter:
    """The entropy solver (hard-mode aware) as a text policy."""

    def __init__(self, hard_mode: bool = False):
        from mtrl_gym.envs.wordle.solver import SolverPolicy, WordleSolver

        self._policy = SolverPolicy(WordleSolver(hard_mode=hard_mode))

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        self._policy.reset()

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        return self._policy(observation, dict(info))


class RandomWordPolicy:
    """A uniformly random allowed word each turn, as a ``guess_word`` tool call."""

    def __init__(self) -> None:
        self._words = allowed_guesses()
        self._rng = np.random.default_rng(0)

    def reset(self, info: Mapping[str, Any], rng: np.random.Generator, **episode: Any) -> None:
        self._rng = rng

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        return format_guess(self._words[int(self._rng.integers(len(self._words)))])


@functools.cache
def guess_texts() -> tuple[str, ...]:
    """Every text the env plays as an allowed guess, for dictionary decoding: each allowed
    word as written (``resin``), spelled out (``R E S I N``) and spelled with positions
    (``R1 E2 S3 I4 N5``), so a model trained on any form keeps it under the constraint."""
    words = allowed_guesses()
    return words + tuple(spell(w) for w in words) + tuple(spell(w, tagged=True) for w in words)


def fitting_guesses(game: Any) -> list[tuple[str, ...] | None]:
    """For each assistant turn of a finished Wordle game (a
    :class:`~mtrl_gym.rollout.trajectory.Trajectory` whose final ``info`` names the answer), the
    answers consistent with every clue shown before that turn, written as that turn wrote its
    guess (word, spelled out, or spelled with positions); ``None`` before the first clue.

    The game is replayed in a bare env of its id (hard mode included when the id says so), and
    every replayed turn must end as the recorded one did (the same error, or none) and the
    game with the same guess count: a game played with env arguments or wrappers the replay
    does not know (``hard_mode=True`` as an argument, pre-played guesses) would otherwise narrow
    the sets by clues the model never saw. ConfigError names the game and turn then, and when
    the game did not end (no answer in its final ``info``) or its env is not Wordle."""
    from mtrl_gym import registry

    answer = (game.final_info or {}).get("answer")
    if not isinstance(answer, str):
        raise ConfigError(f"game {game.task_id!r} stopped ({game.stop_reason or 'no reason recorded'}) before the env "
                          "ended it, so its final info names no answer to replay its clues from: play the games to "
                          "their end (e.g. `mtrl-gym eval --max-turns 12`), or distil them toward the vocabulary")
    env = registry.make(game.env_id).unwrapped
    if not callable(getattr(env, "candidate_answers", None)):  # a WordleEnv (not imported here: it imports this)
        raise ConfigError(f"game {game.task_id!r} was played in {game.env_id!r}, not a Wordle env")
    env.reset(seed=0, options={"answer": answer})
    out: list[tuple[str, ...] | None] = []
    clued = False  # a guess was played (so there is feedback to fit)
    info: dict[str, Any] = {}
    actions = [m for m in game.messages if m.get("role") == "assistant"]
    for turn, message in enumerate(actions):
        fitting = env.candidate_answers() if clued else None
        _, _, terminated, truncated, info = env.step(str(message.get("content") or ""))
        recorded = game.turn_info[turn] if turn < len(game.turn_info) else {}
        if "error" in recorded and recorded.get("error") != info.get("error"):
            raise _replay_differs(game, f"turn {turn + 1} ended with {info.get('error')!r} in the replay, "
                                        f"{recorded.get('error')!r} when played")
        clued = clued or bool(info.get("valid"))
        if fitting is not None and info.get("spelled"):
            tagged = any(ch.isdigit() for ch in str(info.get("guess_text", "")))
            fitting = [spell(w, tagged=tagged) for w in fitting]
        out.append(None if fitting is None else tuple(fitting))
        if terminated or truncated:
            break
    played = game.final_info.get("guesses_used")
    if played is not None and played != info.get("guesses_used"):
        raise _replay_differs(game, f"{info.get('guesses_used')} guesses in the replay, {played} when played")
    return out


def _replay_differs(game: Any, what: str) -> ConfigError:
    return ConfigError(f"game {game.task_id!r} replays differently in a bare {game.env_id!r} ({what}): it was played "
                       "with env arguments or wrappers the replay does not know, so its clues cannot be recomputed; "
                       "distil it toward the vocabulary (leave out distill_fitting)")


def _teacher(env, **options):
    from mtrl_gym.envs.wordle.teacher import ConsistentTeacher

    return ConsistentTeacher(**options)


def _play_metrics(records):
    from mtrl_gym.envs.wordle.play_metrics import records_play_metrics

    return records_play_metrics(records)


def _secret(env) -> str:
    """The answer word: the kit's leak check (``mtrl-gym check``) searches every observation for it."""
    return env.unwrapped.expected_answer


def wordle_profile(success_threshold: float) -> EnvProfile:
    """The profile of :class:`~mtrl_gym.envs.wordle.env.WordleEnv` (both modes)."""
    return EnvProfile(
        splits={"train": _split_fn("train"), "val": _split_fn("val"), "all": _all_split},
        eval_splits=frozenset({"val"}),
        reference_policies={
            "solver": lambda env: SolverPolicyAdapter(hard_mode=bool(getattr(env.unwrapped, "hard_mode", False))),
            "random": lambda env: RandomWordPolicy(),
            "teacher": _teacher,
        },
        success_threshold=success_threshold,
        shaping_limits=(MAX_SUCCESS_WEIGHT, MAX_FAILURE_WEIGHT),
        turn_facts=wordle_turn_facts,
        play_metrics=_play_metrics,
        action_vocabulary=guess_texts,
        fitting_actions=fitting_guesses,
        secret=_secret,
    )
