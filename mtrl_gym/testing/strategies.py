"""Hypothesis strategies for hostile assistant text (needs ``hypothesis``: ``pip install "mtrl-gym[testing]"``).

* :func:`tool_calls` draws ``{"name", "arguments"}`` calls for given tool schemas, mostly
  with the right names and parameters, sometimes wrong types, unknown names, extra keys;
* :func:`model_text` draws a raw assistant message: free text, calls of :func:`tool_calls`
  in every syntax the parser accepts (some cut short, some with noise around them), and
  small cases of the adversarial corpus (:mod:`mtrl_gym.testing.corpus`).

>>> from hypothesis import given, settings
>>> @settings(max_examples=5, database=None)
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

__all__ = ["tool_calls", "model_text", "json_values"]


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
    return st.one_of(st.text(), one, one, cut, noisy, corpus)
