"""``check_multiagent_env``: the text-env contract, per seat, on a PettingZoo env.

The same properties as :func:`~mtrl_gym.testing.check_text_env`, for every seat:

* ``pettingzoo``: PettingZoo's ``api_test``, ``parallel_api_test``, ``seed_test`` and
  ``parallel_seed_test`` pass with their warnings turned into failures, except the advice
  every text env draws (:data:`TEXT_ENV_ADVICE`: spaces that are not ``Box``/``Discrete``,
  observations that are not NumPy arrays, seat names not like ``player_0``);
* ``corpus``: each seat's action may be any text of the adversarial corpus (built from that
  seat's ``info["tools"]``): the cycle never raises, every seat's observation stays in its
  space, every seat's ``info`` is JSON, each step is under ``step_bound_s``. A seat that
  waits at reset (``info["waiting"]``) is reached first by one lead-in cycle in which
  another seat calls one of its tools with placeholder arguments (an agent asking the
  customer something);
* ``determinism``: a seeded scripted game (each seat plays corpus actions) gives the same
  observations, rewards, flags and infos of every seat in a fresh interpreter with another
  ``PYTHONHASHSEED``;
* ``leak`` (with ``secret=``): ``secret(env) -> {seat: value or list of values}`` after
  reset names what each seat must not learn; the scripted game's observations and infos
  of that seat (its system prompt included) never contain it before the final cycle.

A failing ``corpus`` or ``leak`` check shows the example shrunk by hypothesis, as for a
single-agent env. The env is a multi-agent id of :mod:`mtrl_gym.registry`, a module with
PettingZoo's ``env()`` / ``parallel_env()`` functions (``"my_pkg.my_game"``; the fresh
interpreter imports it too), or an AEC / Parallel env instance (no determinism check).

>>> report = check_multiagent_env("mtrl/WordleDuel-v0", corpus_size=500, processes=False)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mtrl_gym.error import ConfigError
from mtrl_gym.parsing import format_tool_call
from mtrl_gym.testing.kit import (
    NO_SECRET,
    CheckReport,
    CheckResult,
    Shrinking,
    Views,
    corpus_cases,
    corpus_failure,
    determinism_check,
    one_line,
    probe_script,
    seed_list,
    step_problem,
)
from mtrl_gym.testing.leak import leak_failure, secret_checks

__all__ = ["check_multiagent_env", "multiagent_record", "TEXT_ENV_ADVICE"]

#: PettingZoo checker warnings every text env draws (its advice for numeric envs); the rest fail.
TEXT_ENV_ADVICE: tuple[str, ...] = (
    r"^Observation is not a NumPy array",
    r"space for each agent probably should be gymnasium\.spaces\.box or gymnasium\.spaces\.discrete",
    r"^We recommend agents to be named in the format <descriptor>_<number>",
)

#: Cycles PettingZoo's checkers play.
API_CYCLES = 30


def _module(ref: str) -> Any:
    from mtrl_gym.registry import MULTIAGENT_SPECS, normalize_id

    bare = normalize_id(ref)
    if bare in MULTIAGENT_SPECS:
        return importlib.import_module(MULTIAGENT_SPECS[bare][0])
    try:
        module = importlib.import_module(ref)
    except ImportError as e:
        raise ConfigError(f"{ref!r} is neither a multi-agent id (mtrl_gym.registry.list_multiagent_envs()) "
                          f"nor an importable module with env() and parallel_env(): {e}") from None
    if not callable(getattr(module, "parallel_env", None)):
        raise ConfigError(f"module {ref!r} has no parallel_env() function (PettingZoo's convention)")
    return module


def _factories(env_or_id: Any, env_kwargs: Mapping[str, Any]) -> tuple[Callable[[], Any] | None,
                                                                         Callable[[], Any]]:
    """``(aec, parallel)`` env makers (``aec`` None when there is no AEC version)."""
    if isinstance(env_or_id, str):
        from mtrl_gym.registry import MULTIAGENT_SPECS, normalize_id

        module = _module(env_or_id)
        kwargs = {**MULTIAGENT_SPECS.get(normalize_id(env_or_id), ("", {}))[1], **env_kwargs}
        aec = getattr(module, "env", None)
        return ((lambda: aec(**kwargs)) if callable(aec) else None), (lambda: module.parallel_env(**kwargs))
    from pettingzoo import AECEnv
    from pettingzoo.utils.conversions import aec_to_parallel

    if isinstance(env_or_id, AECEnv):
        return (lambda: env_or_id), (lambda: aec_to_parallel(env_or_id))
    return None, lambda: env_or_id


def check_multiagent_env(env_or_id: Any, *, secret: Callable[[Any], Mapping[str, Any]] | None = None,
                         seed: int | Sequence[int] = 0, step_bound_s: float | None = None,
                         corpus_size: int = 20_000, env_kwargs: dict[str, Any] | None = None,
                         processes: bool = True, imports: Sequence[str] = (), shrink_examples: int = 100,
                         shrink_deadline_s: float = 10.0) -> CheckReport:
    """Run every check on a PettingZoo env and return the report (see the module docstring;
    the arguments are those of :func:`~mtrl_gym.testing.check_text_env`)."""
    try:
        import pettingzoo  # noqa: F401
    except ImportError:
        from mtrl_gym.error import DependencyNotInstalled

        raise DependencyNotInstalled("pettingzoo", extra="pettingzoo") from None
    for module in imports:
        importlib.import_module(module)
    from mtrl_gym.testing.secret import resolve_secret

    seeds = seed_list(seed)
    shrinking = Shrinking(shrink_examples, shrink_deadline_s)
    env_kwargs = dict(env_kwargs or {})
    resolved = resolve_secret(secret, env_or_id)
    aec, parallel = _factories(env_or_id, env_kwargs)
    name = env_or_id if isinstance(env_or_id, str) else type(env_or_id).__name__
    report = CheckReport(str(name))
    report.checks.append(_check_pettingzoo(aec, parallel, reusable=isinstance(env_or_id, str)))
    env = parallel()
    report.checks.append(_check_corpus(env, seeds[0], corpus_size, step_bound_s, shrinking))
    if isinstance(env_or_id, str):
        report.checks.append(_check_determinism(env_or_id, seeds, env_kwargs, processes, imports,
                                                resolved.ref if resolved is not None else None))
    else:
        report.skipped["determinism"] = "an env instance: give an id or a module to replay it in a fresh interpreter"
    if resolved is not None:
        report.checks.append(_check_leak(env, resolved.fn, seeds[0], shrinking))
    else:
        report.skipped["leak"] = NO_SECRET
    return report


def _check_pettingzoo(aec: Callable[[], Any] | None, parallel: Callable[[], Any], reusable: bool) -> CheckResult:
    from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

    runs: list[tuple[str, Callable[[], None]]] = []
    if aec is not None:
        runs.append(("api_test", lambda: api_test(aec(), num_cycles=API_CYCLES)))
    runs.append(("parallel_api_test", lambda: parallel_api_test(parallel(), num_cycles=API_CYCLES)))
    if reusable:  # the seed tests make fresh envs
        if aec is not None:
            runs.append(("seed_test", lambda: seed_test(lambda **kw: aec(), num_cycles=API_CYCLES)))
        runs.append(("parallel_seed_test", lambda: parallel_seed_test(lambda **kw: parallel(),
                                                                     num_cycles=API_CYCLES)))
    for label, run in runs:
        try:
            with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("always")
                run()  # PettingZoo's checkers print their progress
        except Exception as e:
            return CheckResult("pettingzoo", False, f"{label}: {one_line(e, 300)}")
        bad = [str(w.message) for w in caught if not any(re.search(a, str(w.message)) for a in TEXT_ENV_ADVICE)]
        if bad:
            return CheckResult("pettingzoo", False, f"{label} warned: {' '.join(bad[0].split())[:300]}")
    return CheckResult("pettingzoo", True, f"{', '.join(label for label, _ in runs)} pass, no warnings "
                                           "(beyond the numeric-space advice)")


# ---------------------------------------------------------------------------------------------- playing

def _step_all(env: Any, actions: Mapping[str, str]) -> tuple[Any, ...]:
    """One Parallel step with an action for every live seat (``""`` for the seats not in ``actions``)."""
    return env.step({s: actions.get(s, "") for s in env.agents})


def _placeholder_calls(tools: Sequence[Any]) -> list[str]:
    from mtrl_gym.testing.corpus import tool_names, tool_params

    return [format_tool_call(name, {p: "hello" for p in tool_params(t)}) for t in tools for name in tool_names([t])]


def _lead_in(env: Any, seed: int, seat: str) -> list[dict[str, str]] | None:
    """The cycles that bring ``seat`` to act (``[]`` if it acts at reset; None if none was found)."""
    _, infos = env.reset(seed=seed)
    if not infos[seat].get("waiting"):
        return []
    for other in [s for s in env.agents if s != seat and not infos[s].get("waiting")]:
        for action in _placeholder_calls(infos[other].get("tools") or []):
            env.reset(seed=seed)
            _, _, _, _, after = _step_all(env, {other: action})
            if seat in env.agents and not after[seat].get("waiting"):
                return [{other: action}]
    return None


def _views(env: Any, obs: Mapping[str, Any], infos: Mapping[str, Any]) -> Views:
    return [(f"seat {s}: ", obs[s], infos.get(s), env.observation_space(s)) for s in obs]


def _check_corpus(env: Any, seed: int, size: int, bound: float | None, shrinking: Shrinking) -> CheckResult:
    _, infos = env.reset(seed=seed)
    seats, notes, cases_run, longest = list(env.agents), [], 0, size
    worst, worst_name = 0.0, ""
    for seat in seats:
        lead = _lead_in(env, seed, seat)
        if lead is None:
            notes.append(f"{seat} waits at reset and no lead-in reached it")
            continue

        def step_of(text: str, seat: str = seat, lead: list[dict[str, str]] = lead) -> Callable[[], Views]:
            env.reset(seed=seed)
            for cycle in lead:
                _step_all(env, cycle)

            def step() -> Views:
                obs, _, _, _, step_infos = _step_all(env, {seat: text})
                return _views(env, obs, step_infos)
            return step

        cases, extra = corpus_cases(infos[seat].get("tools") or [], size, env.action_space(seat))
        if extra:
            longest = max(longest, env.action_space(seat).max_length)
        for case in cases:
            problem, took = step_problem(step_of(case.text), bound)
            if problem is not None:
                return corpus_failure(f"{case.name} played by {seat}", case.text, *problem, step_of, bound, shrinking)
            cases_run += 1
            if took > worst:
                worst, worst_name = took, f"{seat}: {case.name}"
        if lead:
            notes.append(f"{seat} after a lead-in cycle")
    extra = f" ({'; '.join(notes)})" if notes else ""
    reach = f", up to the action spaces' max_length {longest}" if longest > size else ""
    return CheckResult("corpus", True, f"{cases_run} cases of {size} characters{reach} over {len(seats)} seats{extra}; "
                                       f"slowest {worst_name} {worst * 1e3:.1f} ms")


def _seat_scripts(infos: Mapping[str, Any]) -> dict[str, list[str]]:
    return {s: probe_script(info.get("tools") or []) for s, info in infos.items()}


def _play(env: Any, seed: int, script: Mapping[str, Sequence[str]],
          watch: Callable[[int, Any, Any, bool], bool] | None = None) -> list[Any]:
    """The log of a scripted game; ``watch(cycle, obs, infos, final)`` returning True stops it."""
    obs, infos = env.reset(seed=seed)
    log: list[Any] = [[obs, infos]]
    if watch is not None and watch(0, obs, infos, False):
        return log
    cycles = max((len(v) for v in script.values()), default=0)
    for i in range(cycles):
        if not env.agents:
            break
        actions = {s: script[s][i] for s in env.agents if i < len(script.get(s, ()))}
        obs, rewards, terms, truncs, infos = _step_all(env, actions)
        log.append([actions, obs, rewards, terms, truncs, infos])
        final = not env.agents or all(terms.get(s) or truncs.get(s) for s in obs)
        if watch is not None and watch(i + 1, obs, infos, final):
            break
    return log


def multiagent_record(env_ref: str, seeds: Sequence[int], kwargs: dict[str, Any], secret: str | None = None) -> str:
    """The scripted games of the determinism check as one JSON text: ``{label: game log}``; with
    ``secret`` (a reference of :mod:`mtrl_gym.testing.secret`) each seat's secret after reset too."""
    from mtrl_gym.serialization import json_line
    from mtrl_gym.testing.secret import load_secret

    _, parallel = _factories(env_ref, kwargs)
    env = parallel()
    out = {}
    for seed in seeds:
        _, infos = env.reset(seed=seed)
        if secret is not None:
            out[f"seed {seed}, secret"] = json.loads(json_line(load_secret(secret, env_ref)(env)))
            _, infos = env.reset(seed=seed)
        out[f"seed {seed}"] = json.loads(json_line(_play(env, seed, _seat_scripts(infos))))
    return json.dumps(out, sort_keys=True)


def _check_determinism(env_ref: str, seeds: list[int], env_kwargs: dict[str, Any], processes: bool,
                       imports: Sequence[str], secret: str | None) -> CheckResult:
    payload = {"env_ref": env_ref, "seeds": seeds, "kwargs": env_kwargs, "secret": secret}
    return determinism_check(multiagent_record, payload, processes, imports, seeds,
                             "scripted game" + " and the secret" * bool(secret))


# ---------------------------------------------------------------------------------------------- leak

def _case_scripts(env: Any, seed: int, infos: Mapping[str, Any], first_leak: Callable[[Any], Any]):
    """``(script, first_leak(script))`` for each seat's corpus cases: its lead-in cycles, then the case."""
    from mtrl_gym.testing.corpus import adversarial_texts
    from mtrl_gym.testing.leak import LEAK_CASE_CHARS

    for seat in list(infos):
        lead = _lead_in(env, seed, seat)
        if lead is None:
            continue
        for case in adversarial_texts(infos[seat].get("tools") or [], size=LEAK_CASE_CHARS):
            script = {s: [cycle.get(s, "") for cycle in lead] + [case.text if s == seat else ""] for s in infos}
            try:
                yield script, first_leak(script)
            except Exception:  # a case the env cannot take is the corpus check's finding
                continue


def _check_leak(env: Any, secret: Callable[[Any], Mapping[str, Any]], seed: int,
                shrinking: Shrinking) -> CheckResult:
    from mtrl_gym.testing.shrink import show, shrink_script

    _, infos = env.reset(seed=seed)
    try:
        hidden = secret(env)
    except Exception as e:  # a broken extractor is the caller's bug: one line, not a traceback
        return CheckResult("leak", False, f"could not be checked: the secret extractor raised {one_line(e)}")
    if not isinstance(hidden, Mapping):
        return CheckResult("leak", False, "could not be checked: a multi-agent secret extractor returns {seat: "
                                          f"value or list of values}}, got {type(hidden).__name__}")
    unknown = sorted(set(hidden) - set(env.possible_agents))
    if unknown:
        raise ConfigError(f"the secret extractor names seats {unknown}; the env's seats are {env.possible_agents}")
    finders: dict[str, list[tuple[str, Callable[[Any], bool]]]] = {}
    for seat, value in hidden.items():
        finders[seat], problem = secret_checks(value)
        if problem:
            return CheckResult("leak", False, f"seat {seat}: {problem}")
    script = _seat_scripts(infos)

    def first_leak(script: Mapping[str, Sequence[str]]) -> tuple[str, str, int] | None:
        """``(where, secret text, cycle)`` of the first secret a seat sees before the final cycle."""
        hits: list[tuple[str, str, int]] = []

        def watch(cycle: int, obs: Any, infos: Any, final: bool) -> bool:
            if final:
                return True
            for seat, checks in finders.items():
                for text, found in checks:
                    where = "observation" if found(obs.get(seat)) else "info" if found(infos.get(seat)) else None
                    if where:
                        when = f"after cycle {cycle}" if cycle else "at reset"
                        hits.append((f"seat {seat}'s {where} {when}", text, cycle))
                        return True
            return False

        _play(env, seed, script, watch)
        return hits[0] if hits else None

    try:
        leak = first_leak(script)
    except Exception as e:
        return CheckResult("leak", False, f"could not be checked: the scripted game raised {one_line(e)}")
    cases = 0
    if leak is None:  # then one corpus message from each seat (injections ask for the secret)
        for case_script, leak in _case_scripts(env, seed, infos, first_leak):
            cases += 1
            if leak is not None:
                script = case_script  # what the shrinking starts from
                break
    if leak is None:
        cycles = max(map(len, _seat_scripts(infos).values()), default=0)
        return CheckResult("leak", True, f"no seat's secret is in its observations or infos over {cycles} "
                                         f"scripted cycles and {cases} corpus messages (or until the game ended)")
    where, needle, cycles = leak
    result = leak_failure(where, needle, [], lambda _: False, shrinking)
    if cycles and shrinking.max_examples > 0:
        small = shrink_script(lambda s: first_leak(s) is not None, {s: list(v[:cycles]) for s, v in script.items()},
                              max_examples=shrinking.max_examples, deadline_s=shrinking.deadline_s)
        shown = "; ".join(f"{s}: [{', '.join(show(a, 30) for a in v)}]" for s, v in small.items())
        result.detail += f"; shrunk by hypothesis to {max(map(len, small.values()), default=0)} cycle(s): {shown}"
        result.example = small
    return result
