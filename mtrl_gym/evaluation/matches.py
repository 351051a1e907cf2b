"""Evaluating a seat of a multi-agent env: matches against reference opponents, win/draw/loss with intervals.

:func:`evaluate_matches` runs :func:`~mtrl_gym.evaluation.runner.evaluate` once per
opponent: the runs play one seat of the env (a
:class:`~mtrl_gym.envs.multiagent.seat.SeatEnv`), the opponent policy every other seat,
on the same tasks and seeds for every run. Each opponent's evaluation is a complete one
(its own folder ``vs-<opponent>/`` with trajectories, ``summary.json`` and report); on
top, every run gets win, draw and loss rates with cluster-bootstrap intervals over tasks
(:func:`match_summary`), written to ``matches.json``.

An episode's result is the game's ``info["outcome"]`` (``win``/``draw``/``loss``, Wordle
Duel) or, for cooperative games, ``win`` on success and ``loss`` otherwise. An episode that
did not reach the end of the game (failed, or cut by ``max_turns`` or the token budget) is
a forfeit and counts as a loss; a game the env itself truncated keeps its outcome (a
Wordle Duel turn limit is a draw).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mtrl_gym.evaluation.specs import EvalConfig, RunSpec
from mtrl_gym.stats import bootstrap_ci

__all__ = ["evaluate_matches", "match_summary", "episode_outcome", "match_table", "OUTCOMES", "MatchResult"]

OUTCOMES = ("win", "draw", "loss")


@dataclasses.dataclass
class MatchResult:
    """The output folder, ``matches`` (opponent -> run -> :func:`match_summary`) and each opponent's EvalResult."""

    out_dir: Path
    matches: dict[str, dict[str, dict[str, Any]]]
    evaluations: dict[str, Any]


def episode_outcome(record: Mapping[str, Any]) -> str:
    """``win``, ``draw`` or ``loss`` of one evaluation record (see the module docstring)."""
    info = record.get("final_info") or {}
    if record.get("failed") or record.get("stop_reason") not in ("terminated", "truncated"):
        return "loss"
    outcome = info.get("outcome")
    if outcome in OUTCOMES:
        return outcome
    if record.get("stop_reason") != "terminated":
        return "loss"
    return "win" if record.get("success") else "loss"


def match_summary(records: Sequence[Mapping[str, Any]], n_tasks: int, *, confidence: float = 0.95,
                  resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Win, draw and loss rates and the score ``win - loss`` of one run, each with a bootstrap interval over tasks."""
    per_task = np.zeros((n_tasks, len(OUTCOMES)))
    counts = np.zeros(n_tasks)
    for r in records:
        per_task[int(r["task_index"]), OUTCOMES.index(episode_outcome(r))] += 1
        counts[int(r["task_index"])] += 1
    played = counts > 0
    rates = per_task[played] / counts[played, None]
    stats = {"confidence": confidence, "resamples": resamples, "seed": seed}
    out: dict[str, Any] = {"games": int(counts.sum())}
    for i, name in enumerate(OUTCOMES):
        out[name] = bootstrap_ci(rates[:, i], **stats).to_dict()
    out["score"] = bootstrap_ci(rates[:, 0] - rates[:, 2], **stats).to_dict()
    return out


def evaluate_matches(env_id: str, runs: Sequence[RunSpec], *, opponents: Sequence[str] | None = None,
                     seat: str | None = None, config: EvalConfig | None = None,
                     out_dir: str | os.PathLike | None = None, **evaluate_kwargs: Any) -> MatchResult:
    """Evaluate ``runs`` in ``seat`` of the multi-agent ``env_id`` against each of ``opponents``.

    ``opponents`` are reference policy names for the other seats (default: the env's, e.g.
    ``solver`` and ``random`` for Wordle Duel). ``evaluate_kwargs`` (tasks, split, limit,
    pool, resume, report, ...) go to :func:`~mtrl_gym.evaluation.runner.evaluate`.
    """
    from mtrl_gym.envs.multiagent.seat import MATCH_OPPONENTS
    from mtrl_gym.error import ConfigError
    from mtrl_gym.evaluation.runner import default_out_dir, evaluate
    from mtrl_gym.registry import is_multiagent, make_multiagent, normalize_id

    if not is_multiagent(env_id):
        raise ConfigError(f"{env_id!r} is not a multi-agent env; matches need one of "
                          "mtrl_gym.registry.list_multiagent_envs()")
    config = config or EvalConfig()
    from mtrl_gym.rollout.sources.multiagent import refuse_serving_wrappers

    refuse_serving_wrappers(env_id, [w for run in runs for w in run.serving.wrappers],
                            fix=" (mtrl-gym eval: --wrapper none)")
    opponents = list(opponents or MATCH_OPPONENTS.get(normalize_id(env_id), ()))
    if not opponents:
        raise ConfigError(f"give the opponents of {env_id} (reference policy names of its other seats)")
    probe = make_multiagent(env_id, **config.env_kwargs)
    seats = list(probe.possible_agents)
    seat = seat or seats[0]
    root = Path(out_dir) if out_dir is not None else default_out_dir()
    pool = evaluate_kwargs.pop("pool", None)
    matches: dict[str, dict[str, dict[str, Any]]] = {}
    evaluations = {}
    for opponent in opponents:
        kwargs = {**config.env_kwargs, "seat": seat, "opponents": {s: opponent for s in seats if s != seat}}
        result = evaluate(env_id, runs, config=dataclasses.replace(config, env_kwargs=kwargs),
                          out_dir=root / f"vs-{opponent}", pool=pool, **evaluate_kwargs)
        evaluations[opponent] = result
        n_tasks = int(result.summary["tasks"])
        matches[opponent] = {
            run.name: match_summary(_records(result, run.name), n_tasks, confidence=config.confidence,
                                    resamples=config.bootstrap_resamples, seed=config.seed)
            for run in runs}
    root.mkdir(parents=True, exist_ok=True)
    (root / "matches.json").write_text(json.dumps({"env_id": env_id, "seat": seat, "matches": matches}, indent=1)
                                       + "\n", encoding="utf-8")
    return MatchResult(out_dir=root, matches=matches, evaluations=evaluations)


def _records(result: Any, run: str) -> list[dict[str, Any]]:
    from mtrl_gym.evaluation.store import read_records

    return read_records(result.files[f"trajectories/{run}"])


def match_table(matches: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """A plain-text table: one row per (opponent, run) with win/draw/loss rates and their intervals."""
    def cell(d: Mapping[str, float]) -> str:
        return f"{d['value']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"

    lines = [f"{'opponent':<10} {'run':<16} {'games':>5}  {'win':<22} {'draw':<22} {'loss':<22}"]
    for opponent, runs in matches.items():
        for run, s in runs.items():
            lines.append(f"{opponent:<10} {run:<16} {s['games']:>5}  {cell(s['win']):<22} {cell(s['draw']):<22} "
                         f"{cell(s['loss']):<22}")
    return "\n".join(lines)
