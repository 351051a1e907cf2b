"""``check_text_env``: the contract of a text environment, checked on any registered id.

Checks, each reported on one line (:class:`CheckReport`):

* ``gymnasium``: Gymnasium's ``check_env`` passes with its warnings turned into failures;
* ``corpus``: every case of :func:`~mtrl_gym.testing.corpus.adversarial_texts` is a legal
  action: no exception, the observation in the space, ``info`` writable as JSON, and
  (with ``step_bound_s``) each step under the bound; the cases reach the action space's
  declared ``max_length``;
* ``determinism``: seeded episodes (a scripted one of corpus actions, and one of the env
  profile's reference policy) give the same observations, rewards, flags and ``info``, and
  the same secret after reset, in a fresh interpreter with another ``PYTHONHASHSEED``;
* ``leak`` (with a secret: ``secret=``, a dotted path, or the env profile's ``secret``
  hook): the secret appears in no observation, no ``info`` value (searched recursively)
  and not the system prompt before the final step, over the scripted episode and the
  first step of every corpus case (injections ask for it).

A check that cannot run is listed in :attr:`CheckReport.skipped` with the reason (and as a
``SKIP`` line): ``leak`` without a secret, ``determinism`` on an env instance.

A failing ``corpus`` or ``leak`` check reports the failing example shrunk by hypothesis
(:mod:`~mtrl_gym.testing.shrink`): the shortest text that fails the same way, or the
shortest action list that exposes the secret; :attr:`CheckResult.example` holds it.
A PettingZoo env (a multi-agent id of the registry) goes to
:func:`~mtrl_gym.testing.multiagent.check_multiagent_env`, its checks made per seat.

>>> report = check_text_env("mtrl/Sandbox-Shop-v0", corpus_size=2_000, processes=False)
>>> report.ok, [c.name for c in report.checks], list(report.skipped)
(True, ['gymnasium', 'corpus', 'determinism'], ['leak'])
"""

from __future__ import annotations

import importlib
import json
import warnings
from collections.abc import Callable, Sequence
from typing import Any

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

__all__ = ["check_text_env", "scripted_episode", "determinism_record", "is_pettingzoo"]

#: Steps a reference policy may take in the determinism check.
POLICY_STEPS = 60


def _make(env_or_id: Any, env_kwargs: dict[str, Any]) -> Any:
    import gymnasium

    return gymnasium.make(env_or_id, **env_kwargs) if isinstance(env_or_id, str) else env_or_id


def _play_policy(env: Any, env_id: str, name: str, seed: int) -> list[Any]:
    import numpy as np

    from mtrl_gym.envs.profile import profile_of

    policy = profile_of(env_id).policy(name, env)
    obs, info = env.reset(seed=seed)
    policy.reset(info, np.random.default_rng(seed), seed=seed, task=None)
    steps: list[Any] = [[obs, info]]
    for _ in range(POLICY_STEPS):
        obs, reward, terminated, truncated, info = env.step(str(policy(obs, info)))
        steps.append([obs, reward, terminated, truncated, info])
        if terminated or truncated:
            break
    return steps


def scripted_episode(env_id: str, seed: int, actions: Sequence[str], env_kwargs: dict[str, Any] | None = None,
                     policy: str | None = None) -> str:
    """The JSON text of a seeded episode (reset, then ``actions`` until it ends, or the env
    profile's reference ``policy``): what must be identical in every process."""
    import gymnasium

    from mtrl_gym.serialization import json_line

    env = gymnasium.make(env_id, **(env_kwargs or {}))
    if policy is not None:
        steps = _play_policy(env, env_id, policy, seed)
    else:
        obs, info = env.reset(seed=seed)
        steps = [[obs, info]]
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            steps.append([obs, reward, terminated, truncated, info])
            if terminated or truncated:
                break
    env.close()
    return json_line(steps)


def secret_record(env_id: str, seed: int, kwargs: dict[str, Any], secret: str) -> list[Any]:
    """The secret(s) after a seeded reset, as JSON values (``secret``: a :attr:`~mtrl_gym.testing.secret.Secret.ref`)."""
    import gymnasium

    from mtrl_gym.serialization import json_line
    from mtrl_gym.testing.leak import secret_values
    from mtrl_gym.testing.secret import load_secret

    env = gymnasium.make(env_id, **kwargs)
    try:
        env.reset(seed=seed)
        return json.loads(json_line(secret_values(load_secret(secret, env_id)(env))))
    finally:
        env.close()


def determinism_record(env_id: str, seeds: Sequence[int], actions: Sequence[str], kwargs: dict[str, Any],
                       policies: Sequence[str], secret: str | None = None) -> str:
    """The episodes of the determinism check as one JSON text: ``{label: episode}``, and with
    ``secret`` (a reference another process can load) ``{"seed N, secret": [values]}`` too."""
    out = {}
    for seed in seeds:
        out[f"seed {seed}"] = json.loads(scripted_episode(env_id, seed, actions, kwargs))
        for name in policies:
            out[f"seed {seed}, policy {name!r}"] = json.loads(scripted_episode(env_id, seed, (), kwargs, name))
        if secret is not None:
            out[f"seed {seed}, secret"] = secret_record(env_id, seed, kwargs, secret)
    return json.dumps(out, sort_keys=True)


def _policies(env_id: str, policies: Sequence[str] | None) -> list[str]:
    from mtrl_gym.envs.profile import profile_of
    from mtrl_gym.error import ConfigError

    known = list(profile_of(env_id).reference_policies)
    if policies is None:
        return known[:1]
    unknown = [p for p in policies if p not in known]
    if unknown:
        raise ConfigError(f"`policies` names {unknown}, which {env_id}'s profile does not have; it has: "
                          f"{', '.join(map(repr, known)) or 'none'}")
    return list(policies)


def is_pettingzoo(env_or_id: Any) -> bool:
    """Whether ``env_or_id`` is a PettingZoo env: a multi-agent id of the registry, a module with
    PettingZoo's ``parallel_env()`` (``"my_pkg.my_game"``, not a gymnasium id) or an instance."""
    if isinstance(env_or_id, str):
        import gymnasium

        from mtrl_gym.registry import is_multiagent

        if is_multiagent(env_or_id):
            return True
        if "/" in env_or_id or env_or_id in gymnasium.registry:
            return False
        try:
            return callable(getattr(importlib.import_module(env_or_id), "parallel_env", None))
        except ImportError:
            return False
    return any(c.__module__.split(".")[0] == "pettingzoo" for c in type(env_or_id).__mro__)


def check_text_env(env_or_id: Any, *, secret: Callable[[Any], Any] | str | None = None, seed: int | Sequence[int] = 0,
                   step_bound_s: float | None = None, corpus_size: int = 20_000,
                   env_kwargs: dict[str, Any] | None = None, processes: bool = True,
                   imports: Sequence[str] = (), policies: Sequence[str] | None = None,
                   shrink_examples: int = 100, shrink_deadline_s: float = 10.0) -> CheckReport:
    """Run every check on an env id (or instance) and return the report (see the module docstring).

    Args:
        secret: ``secret(env) -> value`` read after each reset (e.g. ``lambda env: env.unwrapped.task["answer"]``),
            or a list of such values; its text (a non-string value: its JSON text, or the value itself inside
            ``info``) must not reach the agent before the final step. For a multi-agent env:
            ``{seat: value or list of values}``. Also a dotted path to such a function
            (``"my_pkg.secrets:answer"``); None: the env profile's ``secret`` hook, or no leak check (the
            report's ``skipped`` says so). A named function (not a lambda) is also read in the fresh
            interpreter: the determinism check compares the secret too (:mod:`mtrl_gym.testing.secret`).
        seed: the seed of the corpus and leak checks; a list of seeds plays the determinism check on each.
        step_bound_s: fail a corpus case whose step takes longer (None: no time bound).
        corpus_size: characters per corpus case; the cases that grow with it are played again at the
            action space's ``max_length`` when that is larger (an env must take every text its space admits).
        processes: run the determinism check in a fresh interpreter (else in this one, twice).
        imports: modules imported first, here and in the fresh interpreter (where your env registers itself).
        policies: reference policies of the env's profile played in the determinism check
            (None: the first one, if the profile has any).
        shrink_examples, shrink_deadline_s: the budget of the hypothesis search shrinking a failing
            example (examples per pass, seconds in all); 0 examples reports the failing case unshrunk.
    """
    for module in imports:
        importlib.import_module(module)
    if is_pettingzoo(env_or_id):
        from mtrl_gym.testing.multiagent import check_multiagent_env

        return check_multiagent_env(env_or_id, secret=secret, seed=seed, step_bound_s=step_bound_s,
                                    corpus_size=corpus_size, env_kwargs=env_kwargs, processes=processes,
                                    imports=imports, shrink_examples=shrink_examples,
                                    shrink_deadline_s=shrink_deadline_s)
    from mtrl_gym.testing.secret import resolve_secret

    seeds = seed_list(seed)
    shrinking = Shrinking(shrink_examples, shrink_deadline_s)
    env_kwargs = dict(env_kwargs or {})
    resolved = resolve_secret(secret, env_or_id)
    if isinstance(env_or_id, str):
        policies = _policies(env_or_id, policies)
    env_id = env_or_id if isinstance(env_or_id, str) else getattr(getattr(env_or_id, "spec", None), "id", "<env>")
    report = CheckReport(str(env_id))
    report.checks.append(_check_gymnasium(env_or_id, env_kwargs))
    env = _make(env_or_id, env_kwargs)
    report.checks.append(_check_corpus(env, seeds[0], corpus_size, step_bound_s, shrinking))
    if isinstance(env_or_id, str):
        report.checks.append(_check_determinism(env, env_or_id, seeds, env_kwargs, processes, imports,
                                                list(policies or ()), resolved))
    else:
        report.skipped["determinism"] = ("an env instance: give a registered id to replay it in a fresh "
                                         "interpreter")
    if resolved is not None:
        from mtrl_gym.testing.leak import check_leak

        report.checks.append(check_leak(env, resolved.fn, seeds[0], shrinking))
    else:
        report.skipped["leak"] = NO_SECRET
    return report


def _check_gymnasium(env_or_id: Any, env_kwargs: dict[str, Any]) -> CheckResult:
    from gymnasium.utils.env_checker import check_env

    env = _make(env_or_id, env_kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped, skip_render_check=True)
    except Exception as e:
        return CheckResult("gymnasium", False, f"check_env: {one_line(e, 300)}")
    return CheckResult("gymnasium", True, "check_env passes, no warnings")


# ---------------------------------------------------------------------------------------------- corpus


def _corpus_extra(extra: int, env: Any) -> str:
    """The report's words for the cases at the declared length."""
    return f" and {extra} at the action space's max_length {env.action_space.max_length}" if extra else ""


def _check_corpus(env: Any, seed: int, size: int, bound: float | None, shrinking: Shrinking) -> CheckResult:
    tools = env.reset(seed=seed)[1].get("tools") or []
    cases, extra = corpus_cases(tools, size, env.action_space)

    def step_of(text: str) -> Callable[[], Views]:
        env.reset(seed=seed)

        def step() -> Views:
            obs, _, _, _, info = env.step(text)
            return [("", obs, info, env.observation_space)]
        return step

    worst, worst_name = 0.0, ""
    for case in cases:
        problem, took = step_problem(step_of(case.text), bound)
        if problem is not None:
            return corpus_failure(case.name, case.text, *problem, step_of, bound, shrinking)
        if took > worst:
            worst, worst_name = took, case.name
    return CheckResult("corpus", True, f"{len(cases) - extra} cases of {size} characters{_corpus_extra(extra, env)}; "
                                       f"slowest {worst_name} {worst * 1e3:.1f} ms")


# ---------------------------------------------------------------------------------------------- determinism


def _check_determinism(env: Any, env_id: str, seeds: list[int], env_kwargs: dict[str, Any], processes: bool,
                       imports: Sequence[str], policies: list[str], secret: Any) -> CheckResult:
    ref = secret.ref if secret is not None else None
    payload = {"env_id": env_id, "seeds": seeds,
               "actions": probe_script(env.reset(seed=seeds[0])[1].get("tools") or []),
               "kwargs": env_kwargs, "policies": policies, "secret": ref}
    episodes = "scripted episode" + "".join(f" and policy {p!r}" for p in policies) + (" and the secret" * bool(ref))
    result = determinism_check(determinism_record, payload, processes, imports, seeds, episodes)
    if secret is not None and ref is None and result.ok:
        result.detail += ("; the secret was not compared (a lambda cannot be found in another process: pass a "
                          "module-level function or a dotted path)")
    return result
