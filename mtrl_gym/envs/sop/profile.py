"""What the SOP envs tell the rest of mtrl_gym (their :class:`~mtrl_gym.envs.profile.EnvProfile`).

* **Splits.** ``train`` and ``val``: :func:`~mtrl_gym.envs.sop.tasks.generate_tasks` rows
  whose world seeds lie in disjoint ranges, :data:`SPLIT_SIZE` tasks unless ``n`` is given;
  the option ``difficulty`` (a dict of knobs) changes the worlds. ``val`` is held out.
* **Reference policies.** ``solver``: the domain's reference procedure, replayed as text
  (:class:`~mtrl_gym.envs.sop.replay.OracleReplay`); ``teacher`` is the same procedure
  (what demonstrations imitate). ``constant``: the most common training answer submitted
  with no tool call (:class:`~mtrl_gym.envs.sop.constant.ConstantAnswer`; option ``n``, the
  training tasks it is counted on), the shortcut a policy could learn instead of the SOP.
* **Success.** The strict outcome: 1.0 exactly when every field is right.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.profile import EnvProfile
from mtrl_gym.envs.sop.replay import OracleReplay
from mtrl_gym.error import ConfigError

__all__ = ["sop_profile", "OracleReplay", "SPLIT_SIZE"]

#: Tasks of an SOP split when no ``n`` is given (the size of Wordle's validation split).
SPLIT_SIZE = 128


def _oracle(env, **options):
    if options:
        raise ConfigError(f"the SOP reference procedure takes no options, got {sorted(options)}")
    return OracleReplay(env)


def _secret(env) -> dict:
    """The expected answer object: the kit's leak check searches for it (as JSON text and as a value)."""
    return env.unwrapped.expected_answer


def _constant(env, **options):
    from mtrl_gym.envs.sop.constant import ConstantAnswer

    unknown = sorted(set(options) - {"n"})
    if unknown:
        raise ConfigError(f"the constant baseline takes only the option 'n', got {unknown}")
    return ConstantAnswer(env, **options)


def sop_profile(env_cls: type) -> EnvProfile:
    """The profile of an :class:`~mtrl_gym.envs.sop.SOPEnv` subclass (its class attribute ``domain``)."""
    domain = env_cls.domain

    def split(name: str):
        def make(n: int | None, seed: int | None, *, difficulty: Mapping[str, Any] | None = None) -> list[dict]:
            from mtrl_gym.envs.sop.tasks import generate_tasks

            return generate_tasks(domain, n or SPLIT_SIZE, seed=seed or 0, split=name, difficulty=difficulty)
        return make

    splits = {"train": split("train"), "val": split("val")} if domain is not None else {}
    return EnvProfile(splits=splits, eval_splits=frozenset({"val"}),
                      reference_policies={"solver": _oracle, "teacher": _oracle, "constant": _constant}
                      if domain is not None else {},
                      success_threshold=float(env_cls.success_threshold),
                      secret=_secret)
