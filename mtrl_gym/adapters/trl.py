"""mtrl_gym envs under TRL's ``GRPOTrainer`` (``trl>=1.8,<2``; CI runs 1.8.0 and 1.16.0).

Two ways in, both for any registered env (Wordle, SOP, sandboxes, your own):

* :func:`environment_factory` — TRL plays the conversation and calls the env's **tools**.
  It returns a class whose public methods are the tools of ``info["tools"]``
  (``guess_word(guess: str) -> str`` for Wordle, every SOP tool with its arguments), each
  with an ``Args:`` docstring TRL turns into a schema. ``reset(**row)`` resets the env on
  the dataset row's task and returns the first observation (TRL appends it to the last
  user message); each tool call becomes the Hermes text of that call and goes to
  ``env.step``; ``get_reward()`` is the bare env's outcome (the env's minimum reward when
  the model stopped before the env ended the episode). Build the dataset with
  :func:`environment_dataset`::

      from trl import GRPOConfig, GRPOTrainer
      from mtrl_gym.adapters.trl import environment_dataset, environment_factory

      trainer = GRPOTrainer(model, args=GRPOConfig(...), processing_class=tokenizer,
                            train_dataset=environment_dataset("mtrl/Wordle-v0", split="train"),
                            environment_factory=environment_factory("mtrl/Wordle-v0"))

* :class:`RolloutFunc` — mtrl_gym's rollout engine plays **full multi-turn episodes** with
  TRL's own generation through its public API (``trainer.vllm_generation`` when the trainer
  uses vLLM, else the trainer's model with ``trl.models.unwrap_model_for_generation``): one
  generation call per turn for the whole batch, in step across processes and returns ``prompt_ids``, ``completion_ids`` (model and env tokens,
  token-in/token-out: nothing re-tokenised), ``logprobs`` and ``env_mask`` (1 on sampled
  tokens, 0 exactly on env tokens), plus ``env_reward`` for :func:`env_reward`. The raw
  text of every turn goes to ``env.step``, so the env's own parser (tags, bare JSON,
  call syntax) applies, as in mtrl_gym's trainer. Build the dataset with
  :func:`rollout_dataset`::

      trainer = GRPOTrainer(model, reward_funcs=env_reward, args=GRPOConfig(...),
                            processing_class=tokenizer, train_dataset=rollout_dataset("mtrl/Wordle-v0"),
                            rollout_func=RolloutFunc("mtrl/Wordle-v0", max_turns=6))

Tasks come from :func:`mtrl_gym.adapters.episode.resolve_episode_tasks` (a task list, a
named split, or ``seeds:N``); each dataset row carries its reset seed (``mtrl_seed``) and
task row (``mtrl_task``, JSON), so the ``num_generations`` copies of a row play the same task.
"""

from __future__ import annotations

import inspect
import json
import keyword
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import gymnasium

from mtrl_gym.adapters.episode import (
    EnvEpisode,
    EpisodeTask,
    decode_row,
    encode_row,
    resolve_episode_tasks,
    tool_call_text,
)
from mtrl_gym.adapters.schema import annotation, schema_note
from mtrl_gym.error import ConfigError, DependencyNotInstalled

__all__ = [
    "SEED_COLUMN",
    "TASK_COLUMN",
    "MtrlToolEnvironment",
    "RolloutFunc",
    "env_reward",
    "environment_dataset",
    "environment_factory",
    "rollout_dataset",
    "tool_methods",
]

#: Dataset column with the task row (JSON string, ``""`` when the seed draws the task).
TASK_COLUMN = "mtrl_task"
#: Dataset column with the reset seed.
SEED_COLUMN = "mtrl_seed"
_RESERVED = frozenset({"reset", "get_reward"})


def _require_datasets():
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - trl depends on datasets
        raise DependencyNotInstalled("datasets", "trl") from e
    return datasets


# ---------------------------------------------------------------------- tool methods


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def _call_syntax(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """``name(arg, ..., key=value, ...)`` with Python literals: the call syntax every env parses."""
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _tool_method(tool: Mapping[str, Any]) -> Callable[..., str]:
    """A method ``name(self, **arguments) -> str`` that plays one call of ``tool``.

    The signature follows the tool's JSON schema (``list[str]``, ``Literal[...]``, defaults;
    see :mod:`mtrl_gym.adapters.schema`); what a type hint cannot say (a nested object's
    properties, a default, bounds) is written into the argument's ``Args:`` line as JSON.
    """
    fn = tool.get("function", tool)
    name = str(fn.get("name", ""))
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise ConfigError(f"tool name {name!r} is not a Python identifier; TRL exposes tools as methods, "
                          "so rename the tool in the env")
    if name in _RESERVED:
        raise ConfigError(f"tool name {name!r} clashes with TRL's environment method of the same name; "
                          "rename the tool in the env")
    params = fn.get("parameters") or {}
    props = params.get("properties") if isinstance(params, Mapping) else None
    props = {str(k): v if isinstance(v, Mapping) else {} for k, v in props.items()} if isinstance(props, Mapping) else {}
    listed = params.get("required") if isinstance(params, Mapping) else None
    required = [p for p in listed if p in props] if isinstance(listed, list) else []
    optional = [p for p in props if p not in required]
    order = [*required, *optional]
    for arg in props:
        if not arg.isidentifier() or keyword.iskeyword(arg) or arg == "self":
            raise ConfigError(f"argument {arg!r} of tool {name!r} is not a Python identifier; rename it in the env")

    def method(self, *args: Any, **kwargs: Any) -> str:
        # The declared signature is for the schema only: the env gets exactly the arguments
        # given (defaults are the env's business), and a call with wrong arguments still
        # reaches the env, which answers with its usual observation and format flag.
        if args and (len(args) > len(order) or any(arg in kwargs for arg in order[:len(args)])):
            # too many positional arguments, or one given twice: the env's parser says which
            return self._play(_call_syntax(name, args, kwargs))
        arguments = dict(zip(order, args))
        arguments.update(kwargs)
        return self._call(name, arguments)

    annotations: dict[str, Any] = {}
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for arg in order:
        hint = annotation(props[arg])
        default = inspect.Parameter.empty
        if arg in optional:
            default = props[arg].get("default")
            if default is None and hint is not Any:
                hint = typing.Optional[hint]  # noqa: UP045 - built at run time
        annotations[arg] = hint
        parameters.append(inspect.Parameter(arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                            annotation=hint))
    annotations["return"] = str
    lines = [_one_line(fn.get("description")) or f"Call the {name} tool.", ""]
    if props:
        lines.append("Args:")
        for arg in order:
            text = _one_line(props[arg].get("description")) or f"The {arg} argument."
            note = schema_note(props[arg])
            lines.append(f"    {arg}: {text} ({note})" if note else f"    {arg}: {text}")
        lines.append("")
    lines += ["Returns:", "    The environment's reply."]
    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines)
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)
    return method


def tool_methods(tools: Sequence[Mapping[str, Any]]) -> dict[str, Callable[..., str]]:
    """``{tool name: method}`` for OpenAI-style tool schemas (see :func:`environment_factory`)."""
    methods: dict[str, Callable[..., str]] = {}
    for tool in tools:
        method = _tool_method(tool)
        if method.__name__ in methods:
            raise ConfigError(f"tool {method.__name__!r} is listed twice in the env's tools")
        methods[method.__name__] = method
    return methods


# ---------------------------------------------------------------------- environment_factory


class MtrlToolEnvironment:
    """Base of the classes :func:`environment_factory` builds; one instance plays one episode at a time.

    Public methods are TRL's tools, so this base has only ``reset`` and ``get_reward``.
    """

    env_id: ClassVar[str] = ""
    env_kwargs: ClassVar[dict[str, Any]] = {}
    wrappers: ClassVar[tuple[Callable[[gymnasium.Env], gymnasium.Env], ...]] = ()

    def __init__(self) -> None:
        self._episode = EnvEpisode(self.env_id, env_kwargs=self.env_kwargs, wrappers=self.wrappers)
        self._resets = 0

    def reset(self, **row: Any) -> str:
        """Reset the env on the dataset row's task (``mtrl_seed``, ``mtrl_task``); the first observation."""
        seed = row.get(SEED_COLUMN)
        seed = self._resets if seed is None else int(seed)
        self._resets += 1
        return self._episode.reset(EpisodeTask(seed=seed, row=decode_row(row.get(TASK_COLUMN))))

    def get_reward(self) -> float:
        """The bare env's outcome of the episode (its minimum reward if the env did not end it)."""
        return self._episode.outcome()

    def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return self._play(tool_call_text(name, arguments))

    def _play(self, text: str) -> str:
        if not self._episode.started:
            self._episode.reset(EpisodeTask(seed=0))
        return self._episode.step(text)

    @property
    def episode(self) -> EnvEpisode:
        """The episode being played (observation, info, rewards, metrics)."""
        return self._episode


def environment_factory(env_id: str, *, env_kwargs: Mapping[str, Any] | None = None,
                        wrappers: Sequence[Callable[[gymnasium.Env], gymnasium.Env]] = (),
                        probe: EpisodeTask | None = None) -> type[MtrlToolEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)`` whose methods are ``env_id``'s tools.

    The tools are read from ``info["tools"]`` after resetting a probe env on ``probe``
    (default: seed 0). TRL builds the tool schema once, from the first instance, so envs
    whose tool list changes per task expose the probe task's tools (a call to a tool the
    current task lacks is answered by the env as an unknown tool).
    """
    kwargs = dict(env_kwargs or {})
    episode = EnvEpisode(env_id, env_kwargs=kwargs, wrappers=wrappers)
    try:
        episode.reset(probe or EpisodeTask(seed=0))
        tools = episode.tools
    finally:
        episode.close()
    if not tools:
        raise ConfigError(f"environment {env_id!r} has no tools in info['tools']; TRL's environment_factory "
                          "needs tools to call, use RolloutFunc for text-only envs")
    base = env_id.split("/")[-1].split("-v")[0].replace("-", "")
    name = "".join(ch for ch in base if ch.isalnum()) or "Mtrl"
    attrs: dict[str, Any] = {"env_id": env_id, "env_kwargs": kwargs, "wrappers": tuple(wrappers),
                             "__doc__": f"TRL environment of {env_id}: one method per tool.",
                             "__module__": __name__}
    attrs.update(tool_methods(tools))
    return type(f"{name}Environment", (MtrlToolEnvironment,), attrs)


def environment_dataset(env_id: str, *, tasks: Sequence[Mapping[str, Any] | None] | None = None,
                        split: str | None = None, limit: int | None = None, seed: int = 0,
                        env_kwargs: Mapping[str, Any] | None = None):
    """A ``datasets.Dataset`` for :func:`environment_factory`: one row per task.

    ``prompt`` is the env's system prompt plus an empty user message (TRL appends the
    first observation that ``reset`` returns); ``mtrl_seed``/``mtrl_task`` pin the task.
    """
    datasets = _require_datasets()
    rows = []
    episode = EnvEpisode(env_id, env_kwargs=env_kwargs)
    try:
        for task in resolve_episode_tasks(env_id, tasks=tasks, split=split, limit=limit, seed=seed):
            episode.reset(task)
            prompt = [{"role": "system", "content": episode.system_prompt}] if episode.system_prompt else []
            prompt.append({"role": "user", "content": ""})
            rows.append({"prompt": prompt, SEED_COLUMN: task.seed, TASK_COLUMN: encode_row(task.row)})
    finally:
        episode.close()
    return datasets.Dataset.from_list(rows)


# ---------------------------------------------------------------------- rollout_func


def env_reward(completions: Sequence[Any], env_reward: Sequence[float] | None = None, **_: Any) -> list[float]:
    """TRL reward function for :class:`RolloutFunc`: the env outcome it returned for each row."""
    if env_reward is None:
        raise ConfigError("env_reward needs the `env_reward` column that RolloutFunc returns; pass "
                          "rollout_func=RolloutFunc(...) to GRPOTrainer")
    return [float(r) for r in env_reward]


def rollout_dataset(env_id: str, *, tasks: Sequence[Mapping[str, Any] | None] | None = None,
                    split: str | None = None, limit: int | None = None, seed: int = 0,
                    env_kwargs: Mapping[str, Any] | None = None):
    """A ``datasets.Dataset`` for :class:`RolloutFunc`: one row per task.

    ``rollout_func`` receives only the prompts, so each prompt message carries the task
    key (``mtrl_task``: JSON of seed and row) next to the env's first system and user
    messages (which RolloutFunc renders again from the env's reset, tools included).
    """
    datasets = _require_datasets()
    rows = []
    episode = EnvEpisode(env_id, env_kwargs=env_kwargs)
    try:
        for task in resolve_episode_tasks(env_id, tasks=tasks, split=split, limit=limit, seed=seed):
            obs = episode.reset(task)
            key = json.dumps({"seed": task.seed, "row": task.row}, sort_keys=True, ensure_ascii=False)
            prompt = [{"role": "system", "content": episode.system_prompt, TASK_COLUMN: key}] \
                if episode.system_prompt else []
            prompt.append({"role": "user", "content": obs, TASK_COLUMN: key})
            rows.append({"prompt": prompt})
    finally:
        episode.close()
    return datasets.Dataset.from_list(rows)


def _task_of(prompt: Any) -> EpisodeTask:
    messages = prompt if isinstance(prompt, list) else []
    for m in messages:
        key = m.get(TASK_COLUMN) if isinstance(m, Mapping) else None
        if key:
            data = json.loads(key)
            return EpisodeTask(seed=int(data.get("seed", 0)), row=data.get("row"))
    raise ConfigError("a prompt has no `mtrl_task` key; build the train dataset with "
                      "mtrl_gym.adapters.trl.rollout_dataset(...)")


def _tokenizer_of(trainer):
    processing = trainer.processing_class
    return getattr(processing, "tokenizer", None) or processing  # a processor (VLM) holds its tokenizer


class _TrainerSampler:
    """Our sampler interface over TRL's own generation, through its public API only.

    vLLM (``trainer.use_vllm``): ``trainer.vllm_generation.generate``; else the trainer's
    model with ``trl.models.unwrap_model_for_generation`` and ``trainer.generation_config``.
    With several processes, generation is a collective (vLLM server mode gathers every
    process's prompts; DeepSpeed ZeRO-3 gathers the weights), so every process must call it
    the same number of times with the same number of prompts: each call first gathers the
    processes' prompt counts and pads to the largest, and :meth:`finish` keeps a process
    that is done joining the others' calls until every process is done.
    """

    name = "trl"

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.tokenizer = _tokenizer_of(trainer)
        ids = getattr(trainer, "eos_token_ids", None) or [self.tokenizer.eos_token_id]
        self.eos_token_ids = tuple(int(t) for t in ids if t is not None)
        self.saw_logprobs = True
        self.calls = 0
        accelerator = getattr(trainer, "accelerator", None)
        self.processes = int(getattr(accelerator, "num_processes", 1) or 1)
        self._pad: list[int] = [self.eos_token_ids[0]] if self.eos_token_ids else [0]

    def sample(self, requests):
        from mtrl_gym.rollout.samplers.base import SampleResult

        prompts = [list(r.prompt_ids) for r in requests]
        if prompts and prompts[0]:
            self._pad = prompts[0][:1]
        completion_ids, logprobs = self._generate(prompts)
        if logprobs is None:
            self.saw_logprobs = False
        results = []
        for i, (req, ids) in enumerate(zip(requests, completion_ids)):
            ids = [int(t) for t in ids]
            lps = [float(x) if x is not None else math.nan for x in logprobs[i]] if logprobs is not None \
                else [math.nan] * len(ids)
            cap = req.params.max_new_tokens
            ids, lps = ids[:cap], lps[:cap]
            finish = "stop" if ids and ids[-1] in self.eos_token_ids else "length"
            results.append(SampleResult(ids, lps, finish, prompt_tokens=len(req.prompt_ids)))
        return results

    def _generate(self, prompts: list[list[int]]):
        """Generate for ``prompts`` in step with the other processes (see the class docstring)."""
        n = len(prompts)
        if self.processes > 1:
            from accelerate.utils import gather_object

            most = max(int(c) for c in gather_object([n]))
            if most == 0:
                return [], None
            prompts = prompts + [list(self._pad)] * (most - n)
        self.calls += 1
        completion_ids, logprobs = self._backend(prompts)
        return completion_ids[:n], (logprobs[:n] if logprobs is not None else None)

    def finish(self) -> None:
        """Join the other processes' generation calls until all of them are done (one process: nothing)."""
        while self.processes > 1:
            from accelerate.utils import gather_object

            most = max(int(c) for c in gather_object([0]))
            if most == 0:
                return
            self.calls += 1
            self._backend([list(self._pad)] * most)

    def _backend(self, prompts: list[list[int]]):
        trainer = self.trainer
        if getattr(trainer, "use_vllm", False):
            _, completion_ids, logprobs, _ = trainer.vllm_generation.generate(prompts=prompts, images=None,
                                                                               num_generations=1)
            # vLLM gives per-token top-k log-probs; the first is the sampled token's
            logprobs = [[lp[0] for lp in seq] for seq in logprobs] if logprobs is not None else None
            return completion_ids, logprobs
        return self._transformers_generate(prompts), None

    def _transformers_generate(self, prompts: list[list[int]]) -> list[list[int]]:
        import torch
        from trl.models import unwrap_model_for_generation

        trainer = self.trainer
        pad = self.tokenizer.pad_token_id
        pad = int(pad if pad is not None else self._pad[0])
        width = max(len(p) for p in prompts)
        device = trainer.accelerator.device
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        gather = bool(getattr(trainer.args, "ds3_gather_for_generation", True))
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=gather) as model, torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=attention,
                                 generation_config=trainer.generation_config)
        completions = []
        for row in out[:, width:].tolist():
            ends = [i for i, t in enumerate(row) if t in self.eos_token_ids]
            completions.append(row[:ends[0] + 1] if ends else row)
        return completions

    def end_session(self, session_id: str) -> None:
        pass

    def update_policy(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass


class RolloutFunc:
    """``GRPOTrainer(rollout_func=RolloutFunc(env_id, ...))``: full episodes with TRL's generation.

    Args:
        env_id: a registered env id.
        env_kwargs: keyword arguments for ``gymnasium.make``.
        wrappers: callables ``env -> env`` (the reward is what the outermost env returns).
        max_turns: most assistant turns per episode (``None``: until the env ends it).
        max_episode_tokens: token budget of an episode (prompt, turns and env replies).
        reply_mode: how env replies become messages (``"auto"``, ``"tool"``, ``"user"``).

    Each row of the result holds one episode: its first prompt's ids, then every sampled
    and env token after it (``env_mask`` 0 on env tokens), up to the last sampled token
    (the final env reply carries no training signal and is left out). Every row resets
    with its own prompt's seed and task, so the ``num_generations`` copies of a prompt
    (TRL repeats each) play the same task. All rows are played together: one generation
    call per turn for the batch (:attr:`generate_calls` after a call), and with several
    processes every process makes the same calls (padded to the largest batch), so
    collective generation (vLLM server mode, ZeRO-3) cannot deadlock. ``logprobs`` are the backend's sampling log-probs, or
    ``None`` when the backend gives none (transformers generation), as in TRL itself.
    """

    def __init__(self, env_id: str, *, env_kwargs: Mapping[str, Any] | None = None,
                 wrappers: Sequence[Callable[[gymnasium.Env], gymnasium.Env]] = (),
                 max_turns: int | None = None, max_episode_tokens: int = 4096, reply_mode: str = "auto"):
        from mtrl_gym.rollout.engine import RolloutConfig

        self.env_id = env_id
        self.wrappers = tuple(wrappers)
        # validated here, so a bad value fails before the trainer starts
        self.config = RolloutConfig(max_turns=max_turns, max_episode_tokens=max_episode_tokens,
                                    reply_mode=reply_mode, env_kwargs=dict(env_kwargs or {}), seed=0)
        self.last_trajectories: list = []
        #: Generation calls of the last batch (one per turn of its longest episode).
        self.generate_calls = 0

    def __call__(self, prompts: Sequence[Any], trainer) -> dict[str, list]:
        import dataclasses

        from mtrl_gym.rollout.engine import RolloutEngine
        from mtrl_gym.rollout.samplers.base import SamplingParams

        sampler = _TrainerSampler(trainer)
        tokenizer = sampler.tokenizer
        args = getattr(trainer, "args", None)
        sampling = SamplingParams(temperature=float(getattr(args, "temperature", 1.0) or 0.0),
                                  max_new_tokens=int(getattr(args, "max_completion_length", 256) or 256))
        tasks = [_task_of(p) for p in prompts]
        # every row of the batch in one engine call: one generation call per turn for all of them
        config = dataclasses.replace(self.config, group_size=1, sampling=sampling)
        try:
            with RolloutEngine(self.env_id, sampler, tokenizer, config, wrappers=self.wrappers) as engine:
                trajectories = engine.collect([t.row for t in tasks], seed=0, reset_seeds=[t.seed for t in tasks])
        finally:
            sampler.finish()
        self.generate_calls = sampler.calls
        self.last_trajectories = trajectories
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                "env_reward": [], "env_failed": []}
        end = int(sampler.eos_token_ids[0])
        for t in trajectories:
            start = t.prompt_length
            last = max((i for i, m in enumerate(t.loss_mask) if m), default=-1) + 1
            completion, mask = t.token_ids[start:last], t.loss_mask[start:last]
            logprobs = [0.0 if not m else lp for lp, m in zip(t.logprobs[start:last], mask)]
            if not completion:  # no sampled token at all (a failed episode): one masked end token
                completion, mask, logprobs = [end], [0], [0.0]
            out["prompt_ids"].append(list(t.token_ids[:start]))
            out["completion_ids"].append(list(completion))
            out["env_mask"].append(list(mask))
            out["logprobs"].append(logprobs)
            out["env_reward"].append(float(t.reward))
            out["env_failed"].append(bool(t.failed))
        if not sampler.saw_logprobs:
            out["logprobs"] = None
        return out
