"""The ``leak`` check: a secret named by an extractor never reaches the agent before the end.

``secret(env)``, called after reset, returns what the agent must not learn: a string, any
JSON value, or a list of several. A string is searched as text; any other value as its JSON
text (with and without spaces after separators) in every string, and as the value itself
anywhere inside ``info`` (an answer object left in a debug field). Observations and
``info`` (recursively, dict keys and the system prompt included) are scanned after reset
and after every step but the final one (``info["answer"]`` may appear when the episode
ends), over a scripted episode of corpus actions and the first step of each corpus case
(the injections ask for the answer). A leak is reported with the actions that exposed it,
shrunk by hypothesis.

>>> checks, problem = secret_checks([{"order": "A-1"}, "alpha-word"])
>>> [text for text, _ in checks], problem
(['{"order": "A-1"}', 'alpha-word'], '')
>>> found = checks[0][1]
>>> found({"debug": {"expected": {"order": "A-1"}}}), found('it was {"order":"A-1"}'), found("A-1")
(True, True, False)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mtrl_gym.testing.kit import CheckResult, Shrinking, one_line, probe_script

__all__ = ["check_leak", "secret_checks", "secret_finder", "secret_texts", "secret_values", "leak_failure",
           "LEAK_CASE_CHARS"]

#: Characters of the corpus cases the leak check plays (one step each).
LEAK_CASE_CHARS = 2_000


def _nodes(value: Any, limit: int = 200_000) -> Iterator[Any]:
    """Every value inside ``value`` (dict keys included), iteratively."""
    stack, seen = [value], 0
    while stack and seen < limit:
        v = stack.pop()
        seen += 1
        yield v
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set)):
            stack.extend(v)


def secret_texts(value: Any) -> list[str]:
    """The texts a secret is searched as: a string itself; any other value its JSON text, with
    and without spaces after separators."""
    if isinstance(value, str):
        return [value]
    return list(dict.fromkeys(json.dumps(value, sort_keys=True, ensure_ascii=False, separators=sep)
                              for sep in ((", ", ": "), (",", ":"))))


def secret_finder(values: Sequence[Any]) -> tuple[Callable[[Any], bool] | None, str]:
    """``(found, problem)``: ``found(payload)`` tells whether a secret is in ``payload`` (its text in a
    string, or a non-string secret as a value); ``found`` is None with a problem for a secret too short."""
    texts = [t for v in values for t in secret_texts(v)]
    for value in values:
        if len(secret_texts(value)[0]) < 2:
            return None, f"the secret {value!r} is too short to search for"
    structured = [v for v in values if isinstance(v, (dict, list))]

    def found(payload: Any) -> bool:
        for node in _nodes(payload):
            if isinstance(node, str):
                if any(t in node for t in texts):
                    return True
            elif node is not None and not isinstance(node, (bool, dict, list, tuple, set)):
                if any(t in str(node) for t in texts):
                    return True
            elif structured and isinstance(node, (dict, list)) and any(node == v for v in structured):
                return True
        return False

    return found, ""


def secret_values(value: Any) -> list[Any]:
    """What an extractor returned, as a list of secrets (a list or tuple names several; None: none)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if v is not None]


def leak_failure(where: str, needle: str, actions: list[str], fails: Callable[[list[str]], bool],
                 shrinking: Shrinking) -> CheckResult:
    """The failed ``leak`` result, with the actions that exposed the secret shrunk by hypothesis."""
    from mtrl_gym.testing.shrink import show, shrink_actions

    detail = f"the secret {needle[:40]!r} appears in {where}"
    if actions and shrinking.max_examples > 0:
        actions = shrink_actions(fails, actions, max_examples=shrinking.max_examples,
                                 deadline_s=shrinking.deadline_s)
        shown = ", ".join(show(a, 30) for a in actions)
        detail += f"; shrunk by hypothesis to {len(actions)} action(s): [{shown}]"
    return CheckResult("leak", False, detail, example=actions)


def secret_checks(value: Any) -> tuple[list[tuple[str, Callable[[Any], bool]]], str]:
    """``([(text, found)], problem)``: one finder per secret an extractor returned (see :func:`secret_values`)."""
    checks = []
    for v in secret_values(value):
        found, problem = secret_finder([v])
        if found is None:
            return [], problem
        checks.append((secret_texts(v)[0], found))
    return checks, ""


def check_leak(env: Any, secret: Callable[[Any], Any], seed: int, shrinking: Shrinking) -> CheckResult:
    """The ``leak`` check of a single-agent env (see the module docstring)."""
    _, info = env.reset(seed=seed)
    try:
        value = secret(env)
    except Exception as e:  # a broken extractor is the caller's bug: one line, not a traceback
        return CheckResult("leak", False, f"could not be checked: the secret extractor raised {one_line(e)}")
    checks, problem = secret_checks(value)
    if problem:
        return CheckResult("leak", False, problem)
    script = probe_script(info.get("tools") or [])

    def seen(obs: Any, info: Any, step: int) -> tuple[str, str, int] | None:
        for text, found in checks:
            where = "observation" if found(obs) else "info" if found(info) else None
            if where:
                if step:
                    return text, (f"the observation of step {step}" if where == "observation" else
                                  f"info of step {step}"), step
                return text, ("the first observation" if where == "observation" else "reset info"), step
        return None

    def first_leak(actions: Sequence[str]) -> tuple[str, str, int] | None:
        """``(secret text, where, step)`` of the first leak before the final step."""
        obs, info = env.reset(seed=seed)
        hit = seen(obs, info, 0)
        for step, action in enumerate(actions, 1):
            if hit:
                break
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                return None
            hit = seen(obs, info, step)
        return hit

    try:
        hit = first_leak(script)
    except Exception as e:
        return CheckResult("leak", False, f"could not be checked: the scripted episode raised {one_line(e)}")
    if hit is None:  # and after one message of each corpus case (injections ask for the answer)
        from mtrl_gym.testing.corpus import adversarial_texts

        cases = adversarial_texts(info.get("tools") or [], size=LEAK_CASE_CHARS)
        for case in cases:
            try:
                hit = first_leak([case.text])
            except Exception:  # a case the env cannot take is the corpus check's finding
                continue
            if hit is not None:
                text, where, _ = hit
                return leak_failure(f"{where} ({case.name})", text, [case.text],
                                    lambda a: first_leak(a) is not None, shrinking)
        return CheckResult("leak", True, f"the secret is in no observation or info over {len(script)} scripted "
                                         f"step(s) and the first step of {len(cases)} corpus cases "
                                         "(or until the episode ended)")
    text, where, steps = hit
    return leak_failure(where, text, script[:steps], lambda a: first_leak(a) is not None, shrinking)
