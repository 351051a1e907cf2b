"""Running an evaluation: every run on the same tasks and seeds, streamed to disk.

:func:`evaluate` is the whole pipeline behind ``mtrl-gym eval``:

1. **Check everything first**: the env id, the tasks (every row is reset once on a probe
   env), each run's system prompt, model config, adapter (base model and tensor shapes)
   and endpoint (it must answer). Bad input fails here, before any episode.
2. **Play**: for each run, ``n`` episodes of every task. Task ``i`` resets with seed
   ``seed + i`` in every run, so base and trained models, endpoints and the reference
   policies face identical games. Models go through the rollout engine in batches of
   ``batch_tasks`` tasks; each episode is appended to the run's JSONL as soon as it ends.
   The progress bar counts sampled tokens and turns, and after the first batch a line says
   how long the rest of the run should take (:mod:`mtrl_gym.evaluation.progress`).
   If every episode of a batch fails (endpoint gone, out of memory), the run stops with an
   error and what finished is kept; ``resume=True`` continues where it stopped.
3. **Score** with the bare env's outcome (:mod:`mtrl_gym.evaluation.scoring`), whatever
   training wrappers the config applies; summarise, compare runs, check the training run
   for reward hacking, write ``summary.json``, the report and (optionally) MLflow.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium

from mtrl_gym import registry
from mtrl_gym.error import ConfigError, SamplerError
from mtrl_gym.evaluation.backends import ModelPool
from mtrl_gym.evaluation.policies import make_policy, play_episode
from mtrl_gym.evaluation.progress import EvalProgress
from mtrl_gym.evaluation.scoring import OutcomeRecorder
from mtrl_gym.evaluation.specs import EvalConfig, RunSpec, resolve_system_prompt
from mtrl_gym.evaluation.store import EvalStore
from mtrl_gym.evaluation.summary import RunData, compare_runs, summarise_run
from mtrl_gym.evaluation.tasks import check_tasks, resolve_tasks, tasks_digest
from mtrl_gym.rollout.constraint import action_vocabulary
from mtrl_gym.rollout.envs import failure_reward as min_reward_or_raise
from mtrl_gym.rollout.envs import make_env
from mtrl_gym.rollout.constraint import vocabulary_constraint as constraint_of
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["evaluate", "EvalResult", "default_out_dir"]

_HEAVY = ("token_ids", "loss_mask", "logprobs")


@dataclass
class EvalResult:
    """What :func:`evaluate` returns: the output folder, the summary and the files written."""

    out_dir: Path
    summary: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)
    """``summary``, ``report``, ``config``, ``trajectories/<run>`` and ``plots/<name>`` paths."""

    def run(self, name: str) -> dict[str, Any]:
        """The summary of run ``name``."""
        try:
            return self.summary["runs"][name]
        except KeyError:
            raise KeyError(f"no run {name!r}; runs: {list(self.summary['runs'])}") from None


def default_out_dir() -> Path:
    """``./mtrl-eval/<YYYYmmdd-HHMMSS>``: where an evaluation writes when no folder is given."""
    return Path("mtrl-eval") / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def _env_maker(env_id: str, env_kwargs: Mapping[str, Any]) -> Callable[[], gymnasium.Env]:
    """A factory of the bare env of ``env_id`` (a multi-agent id: one seat, the others played
    by ``env_kwargs["opponents"]``); an unknown id raises here, with close matches."""
    bare = registry.normalize_id(env_id)
    if not (bare in registry.ENV_SPECS or registry.is_multiagent(bare) or bare in gymnasium.registry):
        registry.spec(bare)  # raises UnknownEnv with close matches
    return functools.partial(make_env, bare, env_kwargs)


def _wrappers(config: EvalConfig, spec: RunSpec) -> list[Callable[[gymnasium.Env], gymnasium.Env]]:
    """Outcome recorder innermost, then the training wrappers, then what the run's policy reads
    (its serving wrappers and system prompt: :meth:`ServingSettings.env_wrappers`)."""
    serving = spec.serving.replace(tools=True) if spec.kind == "policy" else spec.serving  # a text policy reads no prompt
    return [OutcomeRecorder, *config.wrappers, *serving.env_wrappers()]


def bare_failure_reward(env: gymnasium.Env) -> float:
    """The outcome of a failed or unfinished episode: the bare env's minimum reward, whatever
    training wrappers the evaluation applies."""
    return min_reward_or_raise(env.unwrapped, what=type(env.unwrapped).__name__,
                               fix="failed episodes cannot be scored")


def _record(traj: Trajectory, run: str, failure_reward: float, save_tokens: bool) -> dict[str, Any]:
    """The JSONL record of an episode, scored with the bare env's outcome.

    An episode that did not reach the end of its task (not ``terminated``: cut by a turn
    limit, ``truncated`` by a time-limit wrapper, or out of tokens or time) has no outcome: it
    scores like a failed one, the env's minimum reward and no success, and counts as
    ``unfinished``. Scoring it with its partial reward instead (0 in Wordle) would rank
    running out of budget above an honest loss (-0.5).
    """
    info = traj.final_info
    unfinished = not traj.failed and traj.stop_reason != "terminated"
    if traj.failed or unfinished:
        outcome, success = failure_reward, False
    else:
        outcome = float(info.get("eval/outcome_reward", traj.reward))
        success = bool(info.get("eval/success", False))
    metrics = {k: v for k, v in traj.metrics.items() if not k.startswith("info/eval/")}
    turns = metrics.get("turns", 0.0)
    invalid = float(info.get("eval/invalid_actions", 0))
    metrics.update(success=float(success), outcome_reward=outcome, unfinished=float(unfinished),
                   invalid_actions=invalid, invalid_action_rate=invalid / turns if turns else 0.0)
    traj.metrics = metrics
    d = traj.to_dict()
    if not save_tokens:
        for key in _HEAVY:
            d.pop(key, None)
    d.update(run=run, task_index=traj.group_id, outcome_reward=outcome, success=success)
    return d


def vocabulary_constraint(env_id: str, spec: RunSpec, tokenizer):
    """The dictionary-decoding constraint of a ``constrained`` run: every text of the env's
    action vocabulary followed by the run's first stop string, those that fit in the run's
    ``max_new_tokens``."""
    env_id = registry.normalize_id(env_id)
    return constraint_of(env_id, tokenizer, spec.serving.stop[0], max_tokens=spec.serving.max_new_tokens,
                         what=f"run {spec.name!r}: {env_id}")


def _play_model(spec: RunSpec, maker, tasks, config: EvalConfig, store: EvalStore, pool: ModelPool,
                done: set, failure_reward: float, bar) -> None:
    from mtrl_gym.rollout.engine import RolloutConfig, RolloutEngine

    sampler, tokenizer = pool.open(spec)
    constraint = vocabulary_constraint(store.header["env_id"], spec, tokenizer) if spec.serving.constrained else None
    sampling = spec.serving.sampling(constraint=constraint)
    rollout = RolloutConfig(group_size=config.n, sampling=sampling, max_turns=config.max_turns,
                            max_episode_tokens=config.max_episode_tokens, time_budget_s=config.time_budget_s,
                            seed=config.seed, failure_reward=failure_reward, assistant_prefix=spec.serving.assistant_prefix)
    try:
        bar.start_sampling()
        with RolloutEngine(maker, sampler, tokenizer, rollout, wrappers=_wrappers(config, spec),
                           observers=[bar]) as engine:
            _play_batches(spec, engine, tasks, config, store, done, failure_reward, bar)
    finally:
        if spec.kind == "endpoint":  # its own connection pool; loaded models are the pool's to release
            sampler.close()


def _play_batches(spec: RunSpec, engine, tasks, config: EvalConfig, store: EvalStore, done: set,
                  failure_reward: float, bar) -> None:
    """Batches of ``config.batch_tasks`` tasks through the rollout engine.

    Each episode is appended to disk as soon as it ends. Failed episodes wait for the end of
    their batch: if every episode of the batch failed (endpoint down, out of memory), none
    is written and the run stops, so that a resume plays them again.
    """
    for start in range(0, len(tasks), config.batch_tasks):
        stop = min(start + config.batch_tasks, len(tasks))
        todo = {(g, k) for g in range(start, stop) for k in range(config.n)} - done
        if not todo:
            continue
        failed: list[Trajectory] = []
        saved = 0

        def finished(t: Trajectory) -> None:
            nonlocal saved
            t.group_id += start
            t.env_id = store.header["env_id"]
            if t.failed:
                failed.append(t)
            elif (t.group_id, t.sample_index) in todo:
                saved += store.append(spec.name, [_record(t, spec.name, failure_reward, config.save_tokens)])
                bar.episode_done(t.sampled_tokens)

        engine.collect(tasks[start:stop], seed=config.seed + start, on_episode=finished)
        if failed and not saved and len(failed) == (stop - start) * config.n:
            raise SamplerError(
                f"run {spec.name!r}: every episode of tasks {start}..{stop - 1} failed "
                f"({failed[0].failure_reason}). Finished episodes are saved in {store.path(spec.name)}; fix the "
                "cause and run again with --resume (resume=True)")
        new = [t for t in failed if (t.group_id, t.sample_index) in todo]
        store.append(spec.name, [_record(t, spec.name, failure_reward, config.save_tokens) for t in new])
        for t in new:
            bar.episode_done(t.sampled_tokens)
        bar.batch_done()


def _play_policy(spec: RunSpec, maker, tasks, config: EvalConfig, store: EvalStore, done: set,
                 failure_reward: float, bar) -> None:
    env = make_env(maker, wrappers=_wrappers(config, spec))
    try:
        policy = make_policy(spec.policy, env)
        for g, task in enumerate(tasks):
            for k in range(config.n):
                if (g, k) in done:
                    continue
                traj = play_episode(env, policy, task, seed=config.seed + g, task_index=g, sample_index=k,
                                    env_id=store.header["env_id"], max_turns=config.max_turns,
                                    failure_reward=failure_reward)
                store.append(spec.name, [_record(traj, spec.name, failure_reward, config.save_tokens)])
                bar.episode_done()
    finally:
        env.close()


def _execution_order(runs: Sequence[RunSpec], pool: ModelPool) -> list[RunSpec]:
    """Runs that load the same model and adapter back to back, so that one is loaded at a time.

    The results do not depend on the order (every run has its own seeds); reports keep the
    order the runs were given in.
    """
    first: dict[Any, int] = {}
    keyed = []
    for i, spec in enumerate(runs):
        key = pool.key(spec)
        keyed.append((first.setdefault(key, i) if key is not None else i, i, spec))
    return [spec for _, _, spec in sorted(keyed, key=lambda x: (x[0], x[1]))]


def _preflight(env_id: str, runs: Sequence[RunSpec], tasks, config: EvalConfig, pool: ModelPool):
    names = [r.name for r in runs]
    if not runs:
        raise ConfigError("nothing to evaluate: give at least one run")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"run names must be unique, got {dupes} more than once")
    if config.reference_run is not None and config.reference_run not in names:
        raise ConfigError(f"`reference_run` {config.reference_run!r} is not one of the runs {names}")
    maker = _env_maker(env_id, config.env_kwargs)
    probe = maker()
    try:
        task_ids = check_tasks(probe, tasks, seed=config.seed)
        failure_reward = bare_failure_reward(probe)
        for spec in runs:
            resolve_system_prompt(spec.serving.system_prompt)
            if spec.kind == "policy":
                make_policy(spec.policy, probe)
            if spec.serving.constrained:
                action_vocabulary(probe, what=f"run {spec.name!r}: {registry.normalize_id(env_id)}")
        for spec in runs:
            pool.preflight(spec)
    finally:
        probe.close()
    return maker, task_ids, failure_reward


def evaluate(env_id: str, runs: Sequence[RunSpec], *, tasks: Any = None, split: str | None = None,
             limit: int | None = None, config: EvalConfig | None = None, out_dir: str | os.PathLike | None = None,
             resume: bool = False, retry_failed: bool = False, training_run: str | os.PathLike | None = None,
             training_keys: tuple[str | None, str | None] = (None, None), pool: ModelPool | None = None,
             report: bool = True, mlflow: bool = False, tracking_uri: str | None = None,
             experiment: str = "mtrl-gym-eval") -> EvalResult:
    """Evaluate ``runs`` on the tasks of ``env_id`` and write the results to ``out_dir``.

    Args:
        env_id: a registered env id (``"mtrl/Wordle-v0"``).
        runs: what to evaluate (:class:`~mtrl_gym.evaluation.specs.RunSpec`), in report order.
        tasks, split, limit: a task file or list of rows, or a named split (``"val"``,
            ``"seeds:100"``), first ``limit`` tasks (:func:`~mtrl_gym.evaluation.tasks.resolve_tasks`).
        config: shared settings (:class:`~mtrl_gym.evaluation.specs.EvalConfig`).
        out_dir: output folder; default :func:`default_out_dir`.
        resume: continue the evaluation in ``out_dir`` (same settings), skipping the
            episodes already on disk; ``retry_failed`` replays the failed ones too.
        training_run: a training run whose curves go in the report and are checked for
            reward hacking (:func:`~mtrl_gym.evaluation.training.load_training_curves`);
            ``training_keys`` = ``(reward_key, success_key)`` pick its series.
        pool: a :class:`~mtrl_gym.evaluation.backends.ModelPool` (backend, device, dtype, ...);
            runs that load the same model play back to back, and every model is released
            when the evaluation ends.
        report: write ``report/report.md`` and the PNG plots.
        mlflow, tracking_uri, experiment: also log to MLflow (see :mod:`mtrl_gym.evaluation.tracking`).
    """
    config = config or EvalConfig()
    pool = pool or ModelPool()
    runs = list(runs)
    _check_outputs(report=report, mlflow=mlflow)
    rows = resolve_tasks(env_id, tasks=tasks, split=split, limit=limit)
    curves = _curves(training_run, training_keys, tracking_uri)
    maker, task_ids, failure_reward = _preflight(env_id, runs, rows, config, pool)
    header = {"env_id": env_id, "tasks": {"count": len(rows), "digest": tasks_digest(rows)},
              "config": config.fingerprint()}
    store = EvalStore(out_dir if out_dir is not None else default_out_dir(), header, resume=resume)
    # once: an adapter's digest reads its weights; the pool's backend and dtype go with each model run
    described = {spec.name: {**spec.describe(), **pool.numerics(spec)} for spec in runs}
    for name, spec_dict in described.items():
        store.add_run(name, spec_dict)
    order = _execution_order(runs, pool)
    try:
        for i, spec in enumerate(order):
            done = store.done(spec.name, retry_failed=retry_failed)
            bar = EvalProgress(spec.name, len(rows) * config.n - len(done), enabled=config.progress,
                               batch=config.batch_tasks * config.n)
            try:
                if spec.kind == "policy":
                    _play_policy(spec, maker, rows, config, store, done, failure_reward, bar)
                else:
                    _play_model(spec, maker, rows, config, store, pool, done, failure_reward, bar)
            finally:
                bar.close()
            pool.release(order[i + 1:])
    finally:
        pool.close()
    return _finish(env_id, runs, described, rows, task_ids, config, store, curves, report=report, mlflow=mlflow,
                   tracking_uri=tracking_uri, experiment=experiment, training_run=training_run)


def _check_outputs(*, report: bool, mlflow: bool) -> None:
    """Missing plotting or tracking packages fail before the episodes, not after them."""
    import importlib.util

    from mtrl_gym.error import DependencyNotInstalled

    if report and importlib.util.find_spec("matplotlib") is None:
        raise DependencyNotInstalled("matplotlib", extra="train", hint="pip install matplotlib (or report=False)")
    if mlflow and importlib.util.find_spec("mlflow") is None:
        raise DependencyNotInstalled("mlflow", extra="train", hint="pip install mlflow (or pass --no-mlflow)")


def _curves(training_run, keys, tracking_uri):
    if training_run is None:
        return None
    from mtrl_gym.evaluation.training import load_training_curves

    return load_training_curves(training_run, reward_key=keys[0], success_key=keys[1], tracking_uri=tracking_uri)


def _finish(env_id, runs, described, rows, task_ids, config, store, curves, *, report, mlflow, tracking_uri,
            experiment, training_run) -> EvalResult:
    data = {s.name: RunData(s.name, store.records(s.name), len(rows), config.n) for s in runs}
    stats = {"confidence": config.confidence, "resamples": config.bootstrap_resamples, "seed": config.seed}
    summaries = {s.name: summarise_run(data[s.name], spec=described[s.name], ks=config.ks,
                                       with_training_reward=bool(config.wrappers), **stats) for s in runs}
    reference = config.reference_run or next((s.name for s in runs if s.kind != "policy"), None)
    top = compare_runs(summaries, data, reference=reference, **stats)
    summary: dict[str, Any] = {
        "env_id": env_id, "tasks": len(rows), "task_ids": task_ids, "samples_per_task": config.n,
        "seed": config.seed, "config": config.fingerprint(), **top, "runs": summaries, "flags": [],
    }
    if curves is not None:
        from mtrl_gym.evaluation.training import reward_hacking_flags

        summary["training_run"] = curves.to_dict()
        summary["flags"] = _flags(curves, runs, summaries, reward_hacking_flags(curves))
    files = {"config": str(store.dir / "eval_config.json"), "summary": str(store.dir / "summary.json")}
    files.update({f"trajectories/{s.name}": str(store.path(s.name)) for s in runs})
    if report:
        from mtrl_gym.evaluation.report import write_report

        files.update(write_report(summary, {s.name: data[s.name].records for s in runs}, store.dir / "report",
                                  curves=curves, examples=config.report_examples))
    (store.dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    result = EvalResult(out_dir=store.dir, summary=summary, files=files)
    if mlflow:
        from mtrl_gym.evaluation.tracking import log_to_mlflow

        summary["mlflow"] = log_to_mlflow(result, tracking_uri=tracking_uri, experiment=experiment,
                                          training_run=str(training_run) if training_run is not None else None)
        (store.dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return result


def _flags(curves, runs, summaries, curve_flags) -> list[dict[str, Any]]:
    """Reward-hacking flags for the adapter runs (the runs the training produced)."""
    from mtrl_gym.evaluation.training import training_reward_rose

    trained = [s for s in runs if s.kind == "adapter"] or [s for s in runs if s.kind in ("endpoint", "sampler")]
    flags = [dict(f, run=s.name) for s in trained for f in curve_flags]
    if not training_reward_rose(curves):
        return flags
    for s in trained:
        diff = summaries[s.name].get("vs_reference", {}).get("success_rate")
        if diff is not None and diff["high"] < 0:
            ref = summaries[s.name]["vs_reference"]["run"]
            flags.append({"kind": "below_reference", "run": s.name, "success_delta": diff["value"],
                          "message": f"the training reward rose, yet {s.name} solves fewer tasks than {ref} under "
                                     f"the same serving settings ({diff['value']:+.3f}, interval "
                                     f"[{diff['low']:+.3f}, {diff['high']:+.3f}])"})
    return flags
