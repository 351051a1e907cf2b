"""Hypothesis strategies for hostile assistant text (needs ``hypothesis``: ``pip install "mtrl-gym[testing]"``).

* :func:`tool_calls` draws ``{"name", "arguments"}`` calls for given tool schemas, mostly
  with the right names and parameters, sometimes wrong types, unknown names, extra keys;
* :func:`task_rows` draws task rows of an env's named splits (its profile), for
  ``reset(options={"task": row})``;
* :func:`episode_machine` builds a stateful ``RuleBasedStateMachine`` that plays an env;
* :func:`model_text` draws a raw assistant message: free text, calls of :func:`tool_calls`
  in every syntax the parser accepts (some cut short, some with noise around them), and
  small cases of the adversarial corpus (:mod:`mtrl_gym.testing.corpus`).

>>> from hypothesis import HealthCheck, given, settings
>>> @settings(max_examples=5, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
... @given(model_text([]))
... def check(text):
...     assert isinstance(text, str)
>>> check()
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mtrl_gym.error import DependencyNotInstalled
from mtrl_gym.testing.corpus import adversarial_texts, tool_names, tool_params

try:
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - exercised without hypothesis only
    raise DependencyNotInstalled("hypothesis", extra="testing") from None

__all__ = ["tool_calls", "model_text", "json_values", "task_rows", "episode_machine"]


def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """Any JSON value (lone surrogates and huge integers included), small."""
    leaves = (st.none() | st.booleans() | st.integers() | st.integers(min_value=10**30)
              | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20))
    return st.recursive(leaves, lambda kids: st.lists(kids, max_size=3)
                        | st.dictionaries(st.text(max_size=5), kids, max_size=3), max_leaves=max_leaves)


def tool_calls(tools: Sequence[Mapping[str, Any]] = ()) -> st.SearchStrategy[dict[str, Any]]:
    """``{"name": ..., "arguments": {...}}`` for the schemas ``tools`` (biased toward valid names)."""
    names = tool_names(tools)
    params = {n: tool_params(t) for n, t in zip(names, tools)}
    values = st.one_of(st.text(max_size=12), st.sampled_from(["crane", "Oslo", "2024-06-01", "A-1", "1"]),
                       json_values(4))
    known = st.sampled_from(names) if names else st.just("guess_word")
    name = st.one_of(known, known, known, st.text(max_size=12))

    def args_for(n: str) -> st.SearchStrategy[dict[str, Any]]:
        keys = params.get(n) or ["guess"]
        good = st.fixed_dictionaries({}, optional={k: values for k in keys})
        return st.one_of(good, good, st.dictionaries(st.text(max_size=6), values, max_size=3))

    return name.flatmap(lambda n: args_for(n).map(lambda a: {"name": n, "arguments": a}))


def _render(call: dict[str, Any], style: str) -> str:
    body = json.dumps(call, ensure_ascii=False)
    if style == "hermes":
        return f"<tool_call>{body}</tool_call>"
    if style == "bare":
        return body
    if style == "openai":
        return json.dumps({"function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}})
    if style == "syntax":
        args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call["arguments"].items()
                         if isinstance(k, str) and k.isidentifier())
        return f"{call['name']}({args})"
    first = next(iter(call["arguments"].values()), "")
    return f"<final_answer>{json.dumps(first, ensure_ascii=False)}</final_answer>"


def model_text(tools: Sequence[Mapping[str, Any]] = (), *, corpus_size: int = 2_000) -> st.SearchStrategy[str]:
    """A raw assistant message for an env with these tool schemas (see the module docstring)."""
    styles = st.sampled_from(["hermes", "hermes", "bare", "openai", "syntax", "final"])
    one = st.tuples(tool_calls(tools), styles).map(lambda cs: _render(*cs))
    cut = st.tuples(one, st.integers(min_value=0, max_value=200)).map(lambda t: t[0][: t[1]])
    noisy = st.tuples(st.text(max_size=30), st.lists(one, min_size=1, max_size=3), st.text(max_size=30)).map(
        lambda t: t[0] + "\n".join(t[1]) + t[2])
    corpus = st.sampled_from([c.text for c in adversarial_texts(tools, size=corpus_size)])
    # st.text() never draws lone surrogates; these characters are what breaks parsers and writers
    hostile = st.text(st.sampled_from(["\ud800", "\udfff", "\x00", "<", ">", "{", "}", "[", "]", "(", ")", '"',
                                       "\\", "\n", "é", "a"]), min_size=1, max_size=60)
    return st.one_of(st.text(), hostile, one, one, cut, noisy, corpus)


def task_rows(env_or_id: Any, *, splits: Sequence[str] | None = None, n: int = 16,
              seed: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """A task row of one of the env's named splits (``n`` rows of each, made with ``seed``), as
    ``reset(options={"task": row})`` takes it. The splits are those of the env's profile
    (``mtrl_gym.profile_of``); ``splits`` picks some. Rows shrink toward the first row of the
    first split.

    >>> from hypothesis import find
    >>> sorted(find(task_rows("mtrl/Wordle-v0", splits=["val"], n=4), lambda row: True))
    ['answer', 'id', 'prompt']
    """
    from mtrl_gym.envs.profile import profile_of
    from mtrl_gym.error import ConfigError

    profile = profile_of(env_or_id)
    names = list(splits) if splits is not None else list(profile.split_names)
    if not names:
        raise ConfigError(f"{env_or_id!r} has no named task splits (its profile's `splits`); it draws its task "
                          "from the reset seed, so play it with seeds instead")
    unknown = [name for name in names if name not in profile.splits]
    if unknown:
        raise ConfigError(f"unknown split(s) {unknown} for {env_or_id!r}; its splits: {list(profile.split_names)}")
    rows = [dict(row) for name in names for row in profile.tasks(name, n, seed=seed)]
    return st.sampled_from(rows).map(dict)


def episode_machine(env_id: str, *, env_kwargs: Mapping[str, Any] | None = None, max_seed: int = 1_000):
    """A hypothesis ``RuleBasedStateMachine`` class playing ``env_id``: it interleaves resets (by
    seed, and with a pinned task row of :func:`task_rows` when the env has named splits),
    near-valid and invalid messages (:func:`model_text`) and repeats of the last message, and
    after every step checks the contract (observation in the space, float reward, bool
    flags, JSON ``info``, no step after the end without a reset). Run it with
    ``TestMyEnv = episode_machine("my/Env-v0").TestCase``."""
    import gymnasium
    from hypothesis.stateful import (
        RuleBasedStateMachine,
        initialize,
        invariant,
        precondition,
        rule,
    )

    from mtrl_gym.serialization import json_line

    probe = gymnasium.make(env_id, **dict(env_kwargs or {}))
    tools = probe.reset(seed=0)[1].get("tools") or []
    probe.close()
    texts = model_text(tools)
    from mtrl_gym.envs.profile import profile_of

    rows = task_rows(env_id, n=8) if profile_of(env_id).split_names else None

    class EpisodeMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.env = gymnasium.make(env_id, **dict(env_kwargs or {}))
            self.done, self.last, self.obs = True, "", None

        @initialize(seed=st.integers(0, max_seed))
        def start(self, seed: int) -> None:
            self.obs, info = self.env.reset(seed=seed)
            json_line(info)
            self.done = False

        @rule(seed=st.integers(0, max_seed))
        def reset(self, seed: int) -> None:
            self.start(seed)

        @precondition(lambda self: rows is not None)
        @rule(row=rows if rows is not None else st.nothing())
        def reset_task(self, row: dict[str, Any]) -> None:
            self.obs, info = self.env.reset(options={"task": row})
            json_line(info)
            if "id" in row:
                assert str(info.get("task_id")) == str(row["id"]), (info.get("task_id"), row["id"])
            self.done = False

        @precondition(lambda self: not self.done)
        @rule(text=texts)
        def step(self, text: str) -> None:
            self._step(text)

        @precondition(lambda self: not self.done and bool(self.last))
        @rule()
        def repeat(self) -> None:
            self._step(self.last)

        def _step(self, text: str) -> None:
            self.last = text
            self.obs, reward, terminated, truncated, info = self.env.step(text)
            assert isinstance(reward, float), f"reward {reward!r} is not a float"
            assert isinstance(terminated, bool) and isinstance(truncated, bool)
            json.loads(json_line(info))
            self.done = terminated or truncated

        @invariant()
        def observation_in_space(self) -> None:
            if self.obs is not None:
                assert self.env.observation_space.contains(self.obs), "observation outside the space"

        def teardown(self) -> None:
            self.env.close()

    EpisodeMachine.__name__ = f"EpisodeMachine_{env_id.replace('/', '_').replace('-', '_')}"
    return EpisodeMachine
