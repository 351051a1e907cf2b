"""``check_text_env``: the contract of a text environment, checked on any registered id.

Checks, each reported on one line (:class:`CheckReport`):

* ``gymnasium``: Gymnasium's ``check_env`` passes with its warnings turned into failures;
* ``corpus``: every case of :func:`~mtrl_gym.testing.corpus.adversarial_texts` is a legal
  action: no exception, the observation in the space, ``info`` writable as JSON, and
  (with ``step_bound_s``) each step under the bound;
* ``determinism``: a seeded scripted episode gives the same observations, rewards, flags
  and ``info`` in a fresh interpreter with another ``PYTHONHASHSEED``;
* ``leak`` (with ``secret=lambda env: ...``): the secret appears in no observation, no
  ``info`` value (searched recursively) and not the system prompt before the final step.

>>> report = check_text_env("mtrl/Sandbox-Shop-v0", corpus_size=2_000, processes=False)
>>> report.ok, [c.name for c in report.checks]
(True, ['gymnasium', 'corpus', 'determinism'])
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["check_text_env", "CheckReport", "CheckResult", "scripted_episode"]


@dataclass
class CheckResult:
    """One check: its name, whether it passed, and a one-line explanation."""

    name: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.name:<12} {self.detail}"


@dataclass
class CheckReport:
    """Every check run on one env."""

    env_id: str
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __str__(self) -> str:
        return "\n".join([f"{self.env_id}:"] + ["  " + c.line() for c in self.checks])

    def raise_on_failure(self) -> None:
        """Raise ``AssertionError`` with the report when a check failed."""
        if not self.ok:
            raise AssertionError(str(self))


def _make(env_or_id: Any, env_kwargs: dict[str, Any]) -> Any:
    import gymnasium

    return gymnasium.make(env_or_id, **env_kwargs) if isinstance(env_or_id, str) else env_or_id


def scripted_episode(env_id: str, seed: int, actions: Sequence[str], env_kwargs: dict[str, Any] | None = None) -> str:
    """The JSON text of a seeded episode (reset, then ``actions`` until it ends): what must
    be identical in every process."""
    import gymnasium

    from mtrl_gym.serialization import json_line

    env = gymnasium.make(env_id, **(env_kwargs or {}))
    obs, info = env.reset(seed=seed)
    steps: list[Any] = [[obs, info]]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append([obs, reward, terminated, truncated, info])
        if terminated or truncated:
            break
    env.close()
    return json_line(steps)


def _script(tools: list[Any]) -> list[str]:
    from mtrl_gym.testing.corpus import adversarial_texts

    small = [c.text for c in adversarial_texts(tools, size=300)]
    return small[::5][:12]


def check_text_env(env_or_id: Any, *, secret: Callable[[Any], Any] | None = None, seed: int = 0,
                   step_bound_s: float | None = None, corpus_size: int = 20_000,
                   env_kwargs: dict[str, Any] | None = None, processes: bool = True,
                   imports: Sequence[str] = ()) -> CheckReport:
    """Run every check on an env id (or instance) and return the report (see the module docstring).

    Args:
        secret: ``secret(env) -> value`` read after each reset (e.g. ``lambda env: env.unwrapped.task["answer"]``);
            its text must not reach the agent before the final step.
        step_bound_s: fail a corpus case whose step takes longer (None: no time bound).
        corpus_size: characters per corpus case.
        processes: run the determinism check in a fresh interpreter (else in this one, twice).
        imports: modules imported first, here and in the fresh interpreter (where your env registers itself).
    """
    import importlib

    for module in imports:
        importlib.import_module(module)
    env_kwargs = dict(env_kwargs or {})
    env_id = env_or_id if isinstance(env_or_id, str) else getattr(getattr(env_or_id, "spec", None), "id", "<env>")
    report = CheckReport(str(env_id))
    report.checks.append(_check_gymnasium(env_or_id, env_kwargs))
    env = _make(env_or_id, env_kwargs)
    report.checks.append(_check_corpus(env, seed, corpus_size, step_bound_s))
    if isinstance(env_or_id, str):
        report.checks.append(_check_determinism(env, env_or_id, seed, env_kwargs, processes, imports))
    if secret is not None:
        report.checks.append(_check_leak(env, secret, seed))
    return report


def _check_gymnasium(env_or_id: Any, env_kwargs: dict[str, Any]) -> CheckResult:
    from gymnasium.utils.env_checker import check_env

    env = _make(env_or_id, env_kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped, skip_render_check=True)
    except Exception as e:
        return CheckResult("gymnasium", False, f"check_env: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    return CheckResult("gymnasium", True, "check_env passes, no warnings")


def _check_corpus(env: Any, seed: int, size: int, bound: float | None) -> CheckResult:
    from mtrl_gym.testing.corpus import adversarial_texts

    tools = env.reset(seed=seed)[1].get("tools") or []
    cases = adversarial_texts(tools, size=size)
    worst, worst_name = 0.0, ""
    for case in cases:
        env.reset(seed=seed)
        try:
            t0 = time.perf_counter()
            obs, _, _, _, info = env.step(case.text)
            took = time.perf_counter() - t0
        except Exception as e:
            return CheckResult("corpus", False, f"{case.name} ({len(case.text)} chars) raised "
                                                f"{type(e).__name__}: {' '.join(str(e).split())[:200]}")
        try:
            json.dumps(info)  # plain JSON, as the env hands it over (writers only add a safety net)
        except (TypeError, ValueError, RecursionError) as e:
            return CheckResult("corpus", False, f"{case.name}: info is not JSON ({type(e).__name__}: "
                                                f"{' '.join(str(e).split())[:160]})")
        if not env.observation_space.contains(obs):
            return CheckResult("corpus", False, f"{case.name}: the observation is outside the observation space")
        if took > worst:
            worst, worst_name = took, case.name
        if bound is not None and took > bound:
            return CheckResult("corpus", False, f"{case.name}: a step took {took * 1e3:.1f} ms, over the "
                                                f"{bound * 1e3:g} ms bound")
    return CheckResult("corpus", True, f"{len(cases)} cases of {size} characters; slowest {worst_name} "
                                       f"{worst * 1e3:.1f} ms")


def _check_determinism(env: Any, env_id: str, seed: int, env_kwargs: dict[str, Any], processes: bool,
                       imports: Sequence[str]) -> CheckResult:
    actions = _script(env.reset(seed=seed)[1].get("tools") or [])
    here = scripted_episode(env_id, seed, actions, env_kwargs)
    if processes:
        code = ("import json, sys; " + "".join(f"import {m}; " for m in imports)
                + "from mtrl_gym.testing.check import scripted_episode; a = json.loads(sys.stdin.read()); "
                "sys.stdout.write(scripted_episode(a['env'], a['seed'], a['actions'], a['kwargs']))")
        hashseed = str((int(os.environ.get("PYTHONHASHSEED", "0") or 0) + 12345) % 4294967295)
        proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(
            {"env": env_id, "seed": seed, "actions": actions, "kwargs": env_kwargs}), capture_output=True, text=True,
            env={**os.environ, "PYTHONHASHSEED": hashseed}, timeout=600)
        if proc.returncode != 0:
            tail = " ".join(proc.stderr.strip().splitlines()[-1:])
            return CheckResult("determinism", False, f"the fresh interpreter failed: {tail[:300]}")
        there, where = proc.stdout, f"a fresh interpreter (PYTHONHASHSEED={hashseed})"
    else:
        for module in imports:
            importlib.import_module(module)
        there, where = scripted_episode(env_id, seed, actions, env_kwargs), "a second run in this process"
    if here != there:
        a, b = json.loads(here), json.loads(there)
        step = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return CheckResult("determinism", False, f"seed {seed}: step {step} differs in {where}")
    return CheckResult("determinism", True, f"seed {seed}, {len(json.loads(here)) - 1} steps identical in {where}")


def _strings(value: Any) -> list[str]:
    out, stack, seen = [], [value], 0
    while stack and seen < 200_000:
        v = stack.pop()
        seen += 1
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set)):
            stack.extend(v)
        elif v is not None and not isinstance(v, bool):
            out.append(str(v))
    return out


def _check_leak(env: Any, secret: Callable[[Any], Any], seed: int) -> CheckResult:
    obs, info = env.reset(seed=seed)
    value = secret(env)
    needle = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if not needle or len(needle) < 2:
        return CheckResult("leak", False, f"the secret {value!r} is too short to search for")

    def found(where: str, payload: Any) -> str | None:
        return where if any(needle in s for s in _strings(payload)) else None

    hit = found("the first observation", obs) or found("reset info", info)
    steps = 0
    for action in _script(info.get("tools") or []):
        if hit:
            break
        obs, _, terminated, truncated, info = env.step(action)
        steps += 1
        if terminated or truncated:
            break
        hit = found(f"the observation of step {steps}", obs) or found(f"info of step {steps}", info)
    if hit:
        return CheckResult("leak", False, f"the secret {needle[:40]!r} appears in {hit}")
    return CheckResult("leak", True, f"the secret is in no observation or info over {steps} step(s)")
