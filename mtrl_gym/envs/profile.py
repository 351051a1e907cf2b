"""How an environment describes itself to the rest of mtrl_gym: one hook, :class:`EnvProfile`.

Trainers, evaluation and the command line need a few facts that only an environment
knows: how its named task splits are made, which splits are for evaluation only, which
reference policies can play it, when an episode counts as a success, and how much
shaping its outcome tiers can take. Instead of branching on env families, they ask the
env class through one classmethod::

    class MyEnv(gymnasium.Env):
        @classmethod
        def profile(cls) -> EnvProfile:
            return EnvProfile(splits={"train": make_train, "val": make_val},
                              reference_policies={"solver": MySolver})

and read it with :func:`profile_of` (an env, a wrapped env, an env class, or a registered
id). An env without the hook gets the default profile: no named splits, no reference
policies of its own (``random`` still works: evaluation has a generic random tool caller),
its ``success_threshold`` attribute if it has one, no tier limits.

A *split function* is ``fn(n: int | None, seed: int | None, **options) -> list[dict]``:
``n`` rows (``None``: the split's natural size), reproducible for the same arguments in
any process, and disjoint from every other split of the env; ``options`` are env-specific
knobs (SOP: ``difficulty``), and a split function that takes none rejects them. A *policy factory* is
``factory(env) -> policy``, where a policy is a :class:`TextPolicy`.

>>> import mtrl_gym
>>> p = profile_of("mtrl/Wordle-v0")
>>> p.split_names, sorted(p.reference_policies), p.eval_splits
(('train', 'val', 'all'), ['random', 'solver', 'teacher'], frozenset({'val'}))
>>> len(p.tasks("val")), p.tasks("train", 2)[0]["id"]
(128, 'wordle_train_0000')
>>> profile_of("mtrl/Sandbox-Weather-v0").split_names
()
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import gymnasium

from mtrl_gym.error import ConfigError

__all__ = ["EnvProfile", "TextPolicy", "profile_of", "task_validator", "SplitFn", "PolicyFactory"]

#: ``fn(n, seed, **options) -> task rows`` of one named split.
SplitFn = Callable[..., list[dict[str, Any]]]


@runtime_checkable
class TextPolicy(Protocol):
    """A policy that plays an env with text: ``reset`` after every ``env.reset``, then one call per turn."""

    def reset(self, info: Mapping[str, Any], rng: Any, **episode: Any) -> None:
        """Start an episode: the reset ``info``, a generator seeded per episode, and
        ``seed=`` / ``task=`` (the episode's reset seed and task row)."""

    def __call__(self, observation: str, info: Mapping[str, Any]) -> str:
        """The next action (raw assistant text) for the latest observation and info."""


#: ``factory(env, **options) -> TextPolicy`` (options: the policy's own knobs, e.g. a teacher's ``choice``).
PolicyFactory = Callable[..., TextPolicy]


@dataclasses.dataclass(frozen=True)
class EnvProfile:
    """What an env tells trainers, evaluation and the CLI about itself (see the module docstring)."""

    splits: Mapping[str, SplitFn] = dataclasses.field(default_factory=dict)
    """Named task splits, each a split function ``fn(n, seed) -> rows``."""
    eval_splits: frozenset[str] = frozenset({"val"})
    """Splits held out for evaluation: demonstrations and training refuse them."""
    reference_policies: Mapping[str, PolicyFactory] = dataclasses.field(default_factory=dict)
    """Policies that play the env by name (``solver``, ``teacher``, ``random``, ...)."""
    success_threshold: float | None = None
    """An episode succeeds when its outcome reward is at least this (``None``: the env says in ``info``)."""
    shaping_limits: tuple[float, float] | None = None
    """Largest ``(success_weight, failure_weight)`` of bounded shaping that keeps the outcome tiers apart."""
    turn_facts: Callable[[Mapping[str, Any]], Mapping[str, bool]] | None = None
    """Per-turn yes/no facts of a step's ``info`` (Wordle: ``valid_guess``, ``new_word``) that
    play statistics average (:class:`mtrl_gym.wrappers.EpisodeStats`, the training summary)."""
    validate_task: Callable[[Mapping[str, Any]], Any] | None = None
    """Raises :class:`~mtrl_gym.error.InvalidTask` for a task row ``reset`` would refuse, so task-file
    readers report it with file and line before a run starts (default: the class's
    ``validate_task`` classmethod, when it has one)."""
    play_metrics: Callable[[Any], Mapping[str, Any] | None] | None = None
    """``fn(episode records) -> metrics`` of how the env was played beyond its outcome (Wordle:
    valid and new words, clue consistency against a random word on the same boards, a
    shuffled-feedback control, solves with an interval); evaluation reports them."""
    action_vocabulary: Callable[[], Sequence[str]] | None = None
    """``fn() -> texts``: the closed set of values an action's free argument can take (Wordle:
    every allowed guess), for dictionary-constrained decoding (``RunSpec.constrained``);
    ``None``: the env has no closed vocabulary."""
    fitting_actions: Callable[[Any], Sequence[Sequence[str] | None]] | None = None
    """``fn(game) -> per turn``: for each assistant turn of a finished game (a
    :class:`~mtrl_gym.rollout.trajectory.Trajectory`), the texts of the action's free argument
    that fit everything the env had shown before that turn, written the way that turn wrote
    its own (Wordle: the answers consistent with every clue so far); ``None`` for a turn where
    any action of the vocabulary fits (before the first clue). Distillation toward fitting
    actions (``SFTConfig.distill_fitting``) scores the guesses of a constrained policy's games
    by it. ``None``: the env has no such notion."""
    secret: Callable[[Any], Any] | None = None
    """``fn(env) -> value`` read after reset: what the agent must not learn before the final step
    (Wordle: the answer word); a list names several. The test kit's ``leak`` check searches
    every observation and ``info`` for it (``mtrl-gym check``; :mod:`mtrl_gym.testing.secret`)."""
    evaluation_only: bool = False
    """Every task of this env is for evaluation only (e.g. a benchmark whose licence forbids
    training): the trainer and demonstrations refuse the env."""

    @property
    def split_names(self) -> tuple[str, ...]:
        """The named splits, in declaration order."""
        return tuple(self.splits)

    def tasks(self, split: str, n: int | None = None, seed: int | None = None,
              **options: Any) -> list[dict[str, Any]]:
        """``n`` task rows of the named ``split`` (its natural size when ``n`` is ``None``)."""
        if split not in self.splits:
            known = ", ".join(map(repr, self.splits)) or "none"
            raise ConfigError(f"unknown split {split!r}; this env's named splits: {known} "
                              "(or give a task file)")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ConfigError(f"the number of tasks must be an int >= 1, got {n!r}")
        return self.splits[split](n, seed, **options)

    def training_tasks(self, split: str, n: int | None = None, seed: int | None = None,
                       **options: Any) -> list[dict[str, Any]]:
        """Like :meth:`tasks`, but an evaluation split is refused (demonstrations, training data)."""
        if split in self.eval_splits:
            others = [s for s in self.splits if s not in self.eval_splits]
            raise ConfigError(f"split {split!r} is held out for evaluation and cannot be used for training or "
                              f"demonstrations; use {' or '.join(map(repr, others)) or 'a task file'}")
        return self.tasks(split, n, seed, **options)

    def policy(self, name: str, env: gymnasium.Env, *, fallbacks: Mapping[str, PolicyFactory] | None = None,
               **options: Any) -> TextPolicy:
        """The reference policy ``name`` for ``env`` (``options`` go to its factory).

        This is the one lookup of a reference policy by name. ``fallbacks`` are policies any
        env can be played with (evaluation's generic ``random``); the profile's own win. An
        unknown name raises :class:`~mtrl_gym.error.ConfigError` listing the known ones.
        """
        policies = {**(fallbacks or {}), **self.reference_policies}
        if name not in policies:
            known = ", ".join(sorted(policies)) or "none"
            raise ConfigError(f"no reference policy {name!r} for {type(env.unwrapped).__name__}; it has: {known}")
        return policies[name](env, **options)


def _env_class(target: Any) -> Any:
    """The object whose ``profile()`` describes ``target``: an env class, or a multi-agent env's module."""
    if isinstance(target, str):
        from mtrl_gym import registry

        if registry.is_multiagent(target):  # PettingZoo envs: the module defines profile()
            import importlib

            return importlib.import_module(registry.MULTIAGENT_SPECS[registry.normalize_id(target)][0])

        spec = registry.spec(target) if registry.normalize_id(target).startswith(registry.NAMESPACE + "/") \
            else gymnasium.spec(target)
        entry = spec.entry_point
        if isinstance(entry, str):
            from gymnasium.envs.registration import load_env_creator

            entry = load_env_creator(entry)
        return entry if isinstance(entry, type) else None
    if isinstance(target, gymnasium.Env):
        return type(target.unwrapped)
    return target if isinstance(target, type) else None


def profile_of(target: Any) -> EnvProfile:
    """The :class:`EnvProfile` of an env, wrapped env, env class or registered env id.

    Classes define it with a ``profile()`` classmethod; any other env gets the default
    profile (with its ``success_threshold`` attribute, if any).
    """
    cls = _env_class(target)
    # An env instance answers itself (an env whose facts depend on its arguments, such as one
    # seat of a multi-agent game, defines profile() as an instance method).
    owner = target.unwrapped if isinstance(target, gymnasium.Env) else cls
    hook = getattr(owner, "profile", None) if owner is not None else None
    if callable(hook):
        profile = hook()
        if not isinstance(profile, EnvProfile):
            raise ConfigError(f"{getattr(cls, '__name__', cls)}.profile() must return an EnvProfile, got "
                              f"{type(profile).__name__}")
    else:
        threshold = getattr(cls, "success_threshold", None)
        profile = EnvProfile(success_threshold=float(threshold) if isinstance(threshold, (int, float)) else None)
    row_check = getattr(cls, "validate_task", None)
    if profile.validate_task is None and callable(row_check):
        profile = dataclasses.replace(profile, validate_task=row_check)
    return profile


def task_validator(env_id: str) -> Callable[[dict[str, Any]], Any] | None:
    """The row check of an env id (its profile's ``validate_task``), or None when it has none.

    Task-file readers pass it to :func:`mtrl_gym.datasets.read_tasks`, so a bad row is
    reported with its file and line before a run starts. Works for any gymnasium id.
    """
    from mtrl_gym import registry

    return profile_of(registry.normalize_id(env_id)).validate_task
