"""Rollout workers on Ray: the training batch's episodes played by N actors, on one machine or a cluster.

With ``source: {name: ray}`` the GRPO trainer's training rollouts go through a
:class:`RayRolloutEngine` instead of the in-process
:class:`~mtrl_gym.rollout.engine.RolloutEngine`. It has the same ``collect(tasks, seed=)``
and returns the same :class:`~mtrl_gym.rollout.trajectory.Trajectory` objects (sent back
in their JSON form, ``Trajectory.to_dict``). Each actor owns its envs and a sampler:

* ``sampler: hf``: its own copy of the policy (CPU unless the actor gets a GPU), shipped
  once through the object store; after every update the driver sends only the trainable
  tensors (the LoRA matrices), which the actor copies in before its next batch;
* ``sampler: openai``: a client of an OpenAI-compatible endpoint (``vllm serve``,
  ``mtrl-gym serve``) that the driver keeps up to date; the actor holds no model.

**Sharding and seeds.** A batch of G groups is cut into ``workers`` contiguous shards;
the shard starting at group ``g0`` is played with the batch's seed and
``group_offset=g0``, so every episode resets and samples with the seeds the local engine
would give it: the same seeds give the same trajectories (``tests/rollout/sources/test_ray.py``).

**A worker that dies** (node lost, out of memory, ``ray.kill``) fails only its shard: with
``worker_retries: 0`` its episodes come back as failed trajectories (the env's minimum
reward, ``failure_reason`` naming the worker, ``metrics["worker_lost"] = 1``); with ``1``
the shard is played again, once, on a fresh worker that gets the current weights. Either
way the step completes and the pool is back to ``workers`` actors for the next one.
``last_metrics`` counts it: ``ray/workers``, ``ray/lost_episodes``, ``ray/retried_shards``,
``ray/restarted_workers``.

**No files in the user's home.** A local cluster (``address`` None) is started with
token authentication whose token lives in the environment (``RAY_AUTH_TOKEN``), not in
``~/.ray/auth_token``, without the dashboard, and with usage statistics off; see
:func:`start_local_ray`.

>>> shard_bounds(5, 2)
[(0, 3), (3, 5)]
>>> shard_bounds(1, 3)
[(0, 1)]
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mtrl_gym.error import ConfigError, DependencyNotInstalled, RolloutError
from mtrl_gym.rollout.metrics import episode_metrics
from mtrl_gym.rollout.sources.base import RolloutSource
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["RayRolloutEngine", "RolloutWorker", "shard_bounds", "start_local_ray"]


@dataclass
class RayOptions:
    """Options of the ``ray`` source (``source: {name: ray, workers: 4}``); needs
    ``pip install "mtrl-gym[ray]"``. Validation stays in the trainer's process."""

    address: str | None = None
    """Ray cluster to join (``auto``, ``ray://host:10001``); None starts a local one."""
    workers: int = 2
    """Rollout actors; each plays a contiguous share of the batch's groups."""
    worker_retries: int = 0
    """Episodes of a worker that dies: 0 makes them failed trajectories (minimum reward),
    1 plays them again once on a fresh worker (the step waits for it)."""

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"`source.workers` must be an integer >= 1, got {self.workers!r}")
        if self.worker_retries not in (0, 1) or isinstance(self.worker_retries, bool):
            raise ConfigError(f"`source.worker_retries` must be 0 (failed trajectories) or 1 (retry once), "
                              f"got {self.worker_retries!r}")
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            raise ConfigError(f"`source.address` must be a cluster address such as 'auto' or None, "
                              f"got {self.address!r}")


def _ray():
    try:
        import ray
    except ImportError:
        raise DependencyNotInstalled("ray", extra="ray") from None
    return ray


def shard_bounds(groups: int, workers: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` group ranges, as even as possible, no empty one."""
    n = max(1, min(groups, workers))
    size, extra = divmod(groups, n)
    bounds, start = [], 0
    for i in range(n):
        end = start + size + (i < extra)
        bounds.append((start, end))
        start = end
    return bounds


def start_local_ray(num_cpus: int | None = None, *, temp_dir: str | None = None, **kwargs: Any) -> None:
    """``ray.init`` of a local cluster that writes nothing to the user's home.

    Ray 2.5x turns token authentication on for a new local cluster and saves a fresh
    token to ``~/.ray/auth_token``; here the token is generated into ``RAY_AUTH_TOKEN`` of
    this process (inherited by Ray's processes) unless one is already set, so auth stays on
    and no file is written. No dashboard, no usage statistics; ``temp_dir`` holds Ray's
    sockets and logs (default: Ray's, under ``/tmp``).
    """
    ray = _ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if os.environ.get("RAY_AUTH_MODE", "token").lower() == "token":
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
        _reload_ray_auth_settings()
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **kwargs}
    if num_cpus is not None:
        options["num_cpus"] = num_cpus
    if temp_dir is not None:
        options["_temp_dir"] = str(temp_dir)
    ray.init(**options)


def _reload_ray_auth_settings() -> None:
    """Make an already imported Ray read ``RAY_AUTH_MODE``/``RAY_AUTH_TOKEN`` again (it caches both
    at import; this is what ``ray.init`` itself does when it turns token auth on)."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:  # another Ray version: it reads the environment at init
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


class RolloutWorker:
    """One rollout actor's state: its envs, sampler and (``hf``) model copy. Ray runs it as an actor;
    it is a plain class, so it can also be tested or run in-process.

    Args:
        config: the run's config (a picklable GRPO config object).
        policy, tokenizer: the policy to copy (``hf``; None for ``openai``) and its tokenizer.
        env: the env id or factory the trainer was given (None: ``config["env"]``).
        torch_threads: intra-op threads of this worker's torch (1 keeps N workers from fighting).
    """

    def __init__(self, config: Mapping[str, Any], policy: Any, tokenizer: Any, env: Any = None,
                 torch_threads: int = 1):
        from mtrl_gym.rollout.samplers.factory import make_sampler
        from mtrl_gym.rollout.sources.local import make_rollout_engine

        if policy is not None:
            import torch

            torch.set_num_threads(int(torch_threads))
            policy.eval()
            policy.requires_grad_(False)
        cfg = config
        self.model = policy
        self._params = dict(policy.named_parameters()) if policy is not None else {}
        self.sampler = make_sampler(cfg.sampler, policy=policy, tokenizer=tokenizer, model_name=cfg.model,
                                    seed=cfg.seed, **cfg.sampler_kwargs)
        self.engine = make_rollout_engine(cfg, self.sampler, tokenizer, env=env)
        self.version: int | None = None

    def describe(self) -> dict[str, Any]:
        """What the driver needs to know: the failure reward, the process id."""
        return {"failure_reward": self.engine.failure_reward, "pid": os.getpid()}

    def load_weights(self, tensors: Mapping[str, Any] | None, version: int) -> int:
        """Copy the trainable tensors of policy ``version`` in (None: the sampler's endpoint has them)."""
        if tensors:
            import torch

            with torch.no_grad():
                for name, value in tensors.items():
                    self._params[name].copy_(value)
        self.sampler.update_policy(self.model, version=version)
        self.version = int(version)
        return self.version

    def collect(self, tasks: Sequence[Mapping[str, Any] | None], seed: int, group_offset: int) -> list[dict[str, Any]]:
        """Play a shard of a batch; trajectories as ``Trajectory.to_dict()`` records."""
        return [t.to_dict() for t in self.engine.collect(tasks, seed=seed, group_offset=group_offset)]

    def close(self) -> None:
        self.engine.close()
        self.sampler.close()


@dataclass
class _Shard:
    start: int
    tasks: list[Any]
    worker: int
    ref: Any
    error: BaseException | None = None
    """Why no worker took the shard (its replacement could not start); ``ref`` is then None."""


@dataclass
class _Pending:
    """A batch submitted to the workers (:meth:`RayRolloutEngine.submit`)."""

    seed: int
    shards: list[_Shard]


class RayRolloutEngine(RolloutSource):
    """Plays a batch's episodes on ``options.workers`` Ray actors: the ``ray`` rollout source.

    Args:
        config: the run's config (the GRPO config's fields; picklable: each worker gets a copy).
        policy: the model the workers copy (``hf``); ignored for ``openai``.
        tokenizer: its tokenizer.
        env: env id or factory (must be importable in the workers' processes).
        options: the source's :class:`RayOptions` (cluster, workers, retries).
        actor_options: extra ``ray.remote`` options of each actor (``{"num_gpus": 1}``,
            ``{"resources": {...}}``); the default asks for one CPU.
        local_sampler: the trainer's own sampler (validation), which gets new weights with the workers.
    """

    counted_metrics = ("ray/lost_episodes", "ray/retried_shards")

    def __init__(self, config: Any, policy: Any, tokenizer: Any, *, options: RayOptions | None = None,
                 env: Any = None, actor_options: Mapping[str, Any] | None = None, local_sampler: Any = None):
        options = options or RayOptions()
        if config.sampler not in ("hf", "openai"):
            raise ConfigError(f"source 'ray' cannot be combined with sampler {config.sampler!r}; see docs/scaling.md")
        ray = _ray()
        from mtrl_gym.registry import is_multiagent

        if env is None and is_multiagent(config.env):
            raise ConfigError(f"the 'ray' source plays single-agent envs; {config.env!r} is a multi-agent "
                              "env: use source 'selfplay'")
        if config.sampler == "hf" and policy is None:
            raise ConfigError("sampler 'hf' on Ray workers needs the `policy` each worker copies")
        if not ray.is_initialized():
            if options.address is None:
                start_local_ray()
            else:
                ray.init(address=options.address, include_dashboard=False, log_to_driver=False)
        self.config = config
        self.options = options
        self.local_sampler = local_sampler
        self.samples_off_policy = bool(config.serving.constrained)  # the workers' engines sample constrained
        self.group_size = config.group_size
        self.env_id = env if isinstance(env, str) else (config.env if env is None else
                                                        getattr(env, "__name__", type(env).__name__))
        self._hf = config.sampler == "hf"
        self._names = [n for n, p in policy.named_parameters() if p.requires_grad] if self._hf else []
        # Put once, shared by every worker (and a replacement); Ray resolves top-level refs.
        self._init_refs = [ray.put(x) for x in (config, policy if self._hf else None, tokenizer, env)]
        self._actor_cls = ray.remote(RolloutWorker).options(**{"num_cpus": 1, **dict(actor_options or {})})
        self._weights: tuple[Any, int] | None = None
        self.restarted = 0
        self.last_metrics: dict[str, float] = {}
        self.workers = [self._new_worker() for _ in range(options.workers)]
        try:
            info = ray.get(self.workers[0].describe.remote())
        except Exception as e:  # noqa: BLE001 - e.g. the env cannot be imported in the worker's process
            self.close()
            raise RolloutError(f"the Ray rollout workers could not start: {type(e).__name__}: "
                               f"{str(e).strip().splitlines()[-1][:500]} (an env factory or wrapper must be "
                               "importable in the workers: pass a registered env id or set PYTHONPATH in "
                               "the cluster's runtime_env)") from e
        self.failure_reward = float(info["failure_reward"])

    # ------------------------------------------------------------------ workers

    def _new_worker(self) -> Any:
        ray = _ray()
        worker = self._actor_cls.remote(*self._init_refs)
        if self._weights is not None:
            ref, version = self._weights
            ray.get(worker.load_weights.remote(ref, version))
        return worker

    def update_policy(self, model: Any = None, *, version: int | None = None, adapter_path: str | None = None) -> None:
        """Send the trainable tensors of ``model`` (policy ``version``) to every worker (and the
        local sampler, if any); waits for all."""
        ray = _ray()
        if self.local_sampler is not None:
            self.local_sampler.update_policy(model, version=version)
        tensors = None
        if self._hf and model is not None:
            import torch

            wanted = set(self._names)
            with torch.no_grad():
                tensors = {n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters() if n in wanted}
        ref = ray.put(tensors)
        self._weights = (ref, int(version or 0))
        # A slot emptied by a death (gather) stays empty: its replacement gets these weights when next used.
        calls = [(i, w.load_weights.remote(ref, int(version or 0))) for i, w in enumerate(self.workers)
                 if w is not None]
        for i, call in calls:
            try:
                ray.get(call)
            except _worker_errors():  # a dead worker is replaced (with these weights) when next used
                self.workers[i] = None

    def _live_worker(self, i: int) -> Any:
        if self.workers[i] is None:
            self.workers[i] = self._new_worker()
            self.restarted += 1
        return self.workers[i]

    # ------------------------------------------------------------------ batches

    def submit(self, tasks: Sequence[Mapping[str, Any] | None], *, seed: int) -> _Pending:
        """Send a batch's shards to the workers; :meth:`gather` collects them."""
        tasks = list(tasks)
        shards = []
        for i, (start, end) in enumerate(shard_bounds(len(tasks), len(self.workers))):
            try:
                worker = self._live_worker(i)
            except _worker_errors() as e:  # the replacement died starting: the shard is lost (or retried)
                self.workers[i] = None
                shards.append(_Shard(start, tasks[start:end], i, None, e))
                continue
            shards.append(_Shard(start, tasks[start:end], i, worker.collect.remote(tasks[start:end], seed, start)))
        return _Pending(int(seed), shards)

    def gather(self, pending: _Pending) -> list[Trajectory]:
        """The batch's trajectories in (task, sample) order; a dead worker's shard is retried or failed."""
        ray = _ray()
        out: list[Trajectory] = []
        lost = retried = 0
        for shard in pending.shards:
            try:
                if shard.ref is None:
                    raise shard.error
                records = ray.get(shard.ref)
            except _worker_errors() as first:
                self.workers[shard.worker] = None
                error: BaseException = first
                records = None
                if self.options.worker_retries:
                    retried += 1
                    try:
                        worker = self._live_worker(shard.worker)
                        records = ray.get(worker.collect.remote(shard.tasks, pending.seed, shard.start))
                    except _worker_errors() as second:
                        self.workers[shard.worker] = None
                        error = second
                if records is None:
                    lost += len(shard.tasks) * self.group_size
                    out.extend(self._failed(shard, pending.seed, error))
                    continue
            out.extend(Trajectory.from_dict(r) for r in records)
        self.last_metrics = {"ray/workers": float(len(self.workers)), "ray/lost_episodes": float(lost),
                             "ray/retried_shards": float(retried), "ray/restarted_workers": float(self.restarted)}
        return out

    def collect(self, tasks: Sequence[Mapping[str, Any] | None], *, seed: int | None = None) -> list[Trajectory]:
        """Play ``group_size`` episodes of every task on the workers (see :meth:`submit`)."""
        if seed is None:
            raise ConfigError("RayRolloutEngine.collect needs an explicit `seed` (the trainer passes one per step)")
        return self.gather(self.submit(tasks, seed=seed))

    def _failed(self, shard: _Shard, seed: int, error: BaseException) -> list[Trajectory]:
        reason = f"ray worker {shard.worker} died: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
        trajectories = []
        for j, task in enumerate(shard.tasks):
            g = shard.start + j
            row_id = str(task.get("id", "")) if isinstance(task, Mapping) else ""
            for k in range(self.group_size):
                t = Trajectory(task_id=row_id, env_id=self.env_id, group_id=g, sample_index=k, seed=seed + g,
                               stop_reason="failed", failed=True, failure_reason=reason, reward=self.failure_reward)
                t.metrics = episode_metrics(t, tool_calls=0, format_errors=0, cut_turns=0, wall_time_s=0.0)
                t.metrics["worker_lost"] = 1.0
                trajectories.append(t)
        return trajectories

    def close(self) -> None:
        """Stop the workers (the Ray cluster itself stays up)."""
        ray = _ray()
        for worker in self.workers:
            if worker is not None:
                ray.kill(worker)
        self.workers = []


def _worker_errors() -> tuple[type[BaseException], ...]:
    ray = _ray()
    return (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ActorDiedError,
            ray.exceptions.ActorUnavailableError, ray.exceptions.ObjectLostError)
