"""A dense reward for SOP tasks: the share of the final answer's fields that are right.

The bare ``mtrl/SOP-*`` env pays the strict outcome (1.0 when every field of the final
JSON object is exactly right, else 0.0), which gives no signal between "one field wrong"
and "nothing right". :class:`FieldReward` replaces the final step's reward with the mean
of the per-field scores of the env's :class:`~mtrl_gym.envs.sop.GradeResult`
(``info["grade_result"]["score"]``: each field 0 or 1, list fields their Jaccard overlap,
each extra key one more field scoring 0); 0 without a final answer or when the answer is
not a JSON object. Non-final steps pay 0. An answer earns 1.0 exactly when the strict
outcome is 1.0, so success thresholds keep their meaning.

A gymnasium reward is one float. With ``as_list=True`` the final step's ``info`` also
carries ``field_rewards`` (the per-field scores as a list, in the order of the domain's
output schema, which :attr:`FieldReward.field_names` gives) and ``metrics`` (a flat dict
of floats: ``exact``, ``field_score``, ``fields/<name>`` for each field, ``extra_keys``,
``no_answer``, ``not_an_object``) for trainers that want a vector reward or per-field
logging. Every step's ``info["reward_components"]`` shows ``outcome`` (the env's reward),
``field_score`` and ``reward``.

Put it directly on the env, under any shaping wrapper: shaping layers then read the field
score as the outcome (``BoundedShaping(FieldReward(env), ...)``); the other order would
discard their shaping, so it raises.

>>> from mtrl_gym.envs.sop import GradeResult
>>> r = GradeResult(False, 2 / 3, {"a": 1.0, "b": 1.0, "c": 0.0}, {"c": "missing"})
>>> field_metrics(r, answer_error=None)["fields/c"], round(field_metrics(r, answer_error=None)["field_score"], 4)
(0.0, 0.6667)
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium
from gymnasium.utils import RecordConstructorArgs

from mtrl_gym.error import ConfigError

__all__ = ["FieldReward", "field_metrics"]


def field_metrics(result: Any, *, answer_error: str | None) -> dict[str, float]:
    """The flat metrics dict of a :class:`~mtrl_gym.envs.sop.GradeResult` (or its ``to_dict()``)."""
    data = result.to_dict() if hasattr(result, "to_dict") else result
    out = {"exact": float(bool(data["exact"])), "field_score": float(data["score"])}
    out.update({f"fields/{name}": float(score) for name, score in data["fields"].items()})
    out.update(extra_keys=float(len(data["extra_keys"])), no_answer=float(answer_error == "missing"),
               not_an_object=float(answer_error == "not_an_object"))
    return out


class FieldReward(gymnasium.Wrapper, RecordConstructorArgs):
    """Pay the mean per-field score of an SOP env's final answer instead of the strict outcome.

    Args:
        env: an ``mtrl/SOP-*`` env (its unwrapped env is an :class:`~mtrl_gym.envs.sop.SOPEnv`).
        as_list: also put ``field_rewards`` (list of per-field scores) and ``metrics`` (dict)
            into the final step's ``info``.

    ``FieldReward(gymnasium.make("mtrl/SOP-DangerousGoods-v0"), as_list=True)``.
    """

    def __init__(self, env: gymnasium.Env, *, as_list: bool = False):
        if not isinstance(as_list, bool):
            raise ConfigError(f"`as_list` must be True or False, got {as_list!r}")
        from mtrl_gym.envs.sop.base import SOPEnv

        if not isinstance(env.unwrapped, SOPEnv):
            raise ConfigError(f"FieldReward needs an SOP env (an mtrl/SOP-* id, whose unwrapped env is an SOPEnv), "
                              f"got {type(env.unwrapped).__name__}")
        from mtrl_gym.wrappers.shaping import BoundedShaping

        inner = env
        while isinstance(inner, gymnasium.Wrapper):
            if isinstance(inner, BoundedShaping):
                raise ConfigError(f"FieldReward must wrap the env before any shaping wrapper, found "
                                  f"{type(inner).__name__} inside it: use {type(inner).__name__}(FieldReward(env), ...)")
            inner = inner.env
        RecordConstructorArgs.__init__(self, as_list=as_list)
        gymnasium.Wrapper.__init__(self, env)
        self.as_list = as_list
        self.field_names: tuple[str, ...] = tuple(env.unwrapped.output_schema)
        """The output fields, in the order of ``info["field_rewards"]``."""
        self.reward_range = (0.0, 1.0)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, outcome, terminated, truncated, info = self.env.step(action)
        reward, score = 0.0, None
        if terminated or truncated:
            result = info.get("grade_result")
            if result is None:
                raise ConfigError("FieldReward found no info['grade_result'] on the final step; a wrapper between "
                                  "it and the SOP env dropped it")
            score = float(result["score"]) if info.get("answer_error") is None else 0.0
            reward = score
            if self.as_list:
                info["field_rewards"] = [float(result["fields"][name]) for name in self.field_names]
                info["metrics"] = field_metrics(result, answer_error=info.get("answer_error"))
        info["reward_components"] = {"outcome": float(outcome), "field_score": score, "reward": reward}
        return obs, reward, terminated, truncated, info
