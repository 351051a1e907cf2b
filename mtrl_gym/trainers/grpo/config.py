"""The GRPO trainer's configuration: one dataclass, loadable from YAML/TOML, overridable.

:class:`GRPOConfig` holds every setting of a training run. The knobs most runs touch (the
env, the model, the batch, the step limit, the learning rate) are its top-level fields; the
rest live in nested setting groups, one class each: ``episode`` (:class:`EpisodeSettings`),
``lora``, ``optimizer``, ``tracking`` and ``checkpoints`` (shared with SFT:
:mod:`mtrl_gym.trainers.settings`), ``serving`` (how the policy is prompted and sampled:
:class:`~mtrl_gym.rollout.serving.ServingSettings`), ``objective`` (:class:`ObjectiveSettings`),
``collapse`` (:class:`CollapseGuards`) and ``validation`` (:class:`ValidationSettings`). A group
is a mapping in YAML (``lora: {rank: 8}``), a dotted key elsewhere (``--set lora.rank=8``,
``--lora.rank 8``); a mapping sets only the fields it names.

Each field's docstring (the string under it) is its only documentation: ``mtrl-gym train
--help`` and ``docs/training.md`` show it from there (``GRPOConfig.field_docs()``). A group's
``__post_init__`` validates its own values and ``GRPOConfig.__post_init__`` the ones that
involve several groups, saying what was wrong and how to fix it; loading and saving are the
project's one config base (:class:`mtrl_gym.config_base.ConfigBase`).

Sources, later ones win: the defaults, a preset (``presets/<name>.yaml`` next to this
module: ``GRPOConfig.preset_names()``), a YAML or TOML file, and ``key=value`` overrides::

    cfg = GRPOConfig.load("cpu", "my_run.yaml", overrides=["learning_rate=1e-4", "serving.max_new_tokens=8"])
    cfg.save("runs/x/config.yaml")       # the resolved config is saved with every run

>>> cfg = GRPOConfig(global_batch_size=4, group_size=2, max_steps=3, lora={"rank": 8})
>>> cfg.rollouts_per_step, cfg.lora.rank, cfg.lora.alpha
(8, 8, 64.0)
>>> GRPOConfig.from_dict({"learning_rate": "1e-4"}).learning_rate
0.0001
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_gym.config_base import ConfigBase
from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.samplers.factory import SAMPLERS
from mtrl_gym.rollout.serving import ServingSettings, check_listed_once
from mtrl_gym.rollout.sources.local import unfinished_reward_value, wrapper_spec
from mtrl_gym.rollout.traces import TraceConfig
from mtrl_gym.trainers.settings import (
    LR_SCHEDULES,
    TRACKERS,
    CheckpointSettings,
    LoRASettings,
    OptimizerSettings,
    TrackingSettings,
    at_least,
    one_of,
    optional_at_least,
    positive_or_none,
)

__all__ = ["GRPOConfig", "EpisodeSettings", "ObjectiveSettings", "CollapseGuards", "ValidationSettings",
           "GRPOTrackingSettings", "PACKING_MODES", "AUTOCAST_DTYPES", "OLD_LOGPROB_MODES", "LR_SCHEDULES",
           "TRACKERS"]

#: The bundled presets (``<name>.yaml``).
PRESET_DIR = Path(__file__).with_name("presets")
PACKING_MODES = ("auto", "shared_prefix", "padding_free", "sorted")
OLD_LOGPROB_MODES = ("auto", "recompute", "sampler")
_DTYPES = ("float32", "bfloat16", "float16")
AUTOCAST_DTYPES = ("auto", "bfloat16", "float16")


@dataclass
class EpisodeSettings(ConfigBase):
    """How one training episode is played: its limits, how env replies reach the model, and the
    reward of an episode cut short."""

    max_turns: int | None = None
    """Most assistant turns per episode; None lets the environment end the episode."""
    max_tokens: int = 4096
    """Token budget of one episode's context (prompt, all turns, env replies). It is also the
    constant ``token_sum_norm`` divides by."""
    reply_mode: str = "auto"
    """How env replies become chat messages: ``auto``, ``tool`` or ``user``."""
    env_workers: int = 0
    """Threads for env ``reset``/``step`` (0: the calling thread); for envs that wait on I/O."""
    time_budget_s: float | None = None
    """Wall-clock seconds one episode may take; over it the episode fails (minimum reward)."""
    unfinished_reward: str = "min"
    """Reward of an episode cut before the env gave its outcome (``max_turns``, token budget):
    ``min`` (the env's minimum reward: stalling never beats losing), ``sum`` (its turn
    rewards) or a number such as ``-0.5``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        optional_at_least(self, "max_turns", 1)
        at_least(self, "max_tokens", 2)
        one_of(self, "reply_mode", ("auto", "tool", "user"))
        at_least(self, "env_workers", 0)
        positive_or_none(self, "time_budget_s")
        unfinished_reward_value(self.unfinished_reward)


@dataclass
class ObjectiveSettings(ConfigBase):
    """What the update optimises: the advantage estimator, the policy loss and its terms, and
    which rollouts it trains on."""

    loss: str = "ppo"
    """Policy loss: ``ppo``, ``cispo``, ``importance_sampling`` or ``gspo``
    (``mtrl_gym.trainers.grpo.losses``)."""
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    """Options of the loss, e.g. ``{"ratio_high": 1.28}`` or ``{"dual_clip": 3.0}``."""
    aggregation: str = "token_mean"
    """How token losses are reduced: ``token_mean``, ``seq_mean_token_mean`` or
    ``token_sum_norm``."""
    advantage: str = "group_based"
    """Advantage estimator: ``group_based``, ``group_based_per_turn``, ``rloo`` or
    ``grpo_passk`` (``mtrl_gym.trainers.grpo.advantages``)."""
    advantage_kwargs: dict[str, Any] = field(default_factory=dict)
    """Options of the estimator, e.g. ``{"normalize_std": false}`` or ``{"k": 4}``."""
    kl_coef: float = 0.0
    """Weight of a k3 KL penalty to the reference policy: the base model (adapter disabled),
    or the ``init_adapter`` policy when there is one; 0 skips the extra forward pass."""
    old_logprobs: str = "auto"
    """Old-policy log-probs for mini-batches after the first: ``recompute`` (a no-grad
    forward before updating), ``sampler`` (the sampling log-probs: right when the sampler
    shares the trainer's weights and numerics) or ``auto`` (``sampler`` for ``hf`` without
    autocast, dropout, stale async batches or ``constrained`` sampling, else ``recompute``). Unused when ``updates_per_step == 1``."""
    tis_cap: float | None = 2.0
    """Truncated importance sampling: weight tokens by ``min(pi_old / pi_sampler, tis_cap)``
    to correct for sampler/trainer mismatch (vLLM kernels, bf16). None disables it."""
    drop_zero_variance_groups: bool = True
    """Skip groups whose rewards are all equal (zero advantage) in the update: saves compute.
    They are counted and logged either way."""
    train_on_failed: bool = True
    """Train on the sampled tokens of failed rollouts (they get the minimum reward). False
    keeps them in the advantage baseline but gives them no loss."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.kl_coef >= 0 and math.isfinite(self.kl_coef)):
            raise ConfigError(f"`kl_coef` must be a finite number >= 0, got {self.kl_coef!r}")
        if self.tis_cap is not None and not self.tis_cap >= 1.0:
            raise ConfigError(f"`tis_cap` must be >= 1 or None (off), got {self.tis_cap!r}")
        one_of(self, "old_logprobs", OLD_LOGPROB_MODES)
        _check_maths_names(self)


@dataclass
class CollapseGuards(ConfigBase):
    """Guards against a policy collapsing onto one action: reward penalties for actions repeated
    within a group or dominating the batch (``mtrl_gym.trainers.grpo.diversity``), and a warning."""

    repeat_penalty: float = 0.0
    """Subtract ``repeat_penalty * mean over turns of (other rollouts of the group that played
    the same action) / (group_size - 1)`` from each episode's reward before the advantages; 0: off."""
    dominance_penalty: float = 0.0
    """Subtract ``dominance_penalty * mean over turns of max(0, share of the batch's actions equal
    to this one - dominance_threshold) / (1 - dominance_threshold)``; 0: off."""
    dominance_threshold: float = 0.1
    """Batch share above which an action pays the dominance penalty."""
    warning_share: float = 0.3
    """Print a warning when one action is more than this share of a step's sampled actions."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("repeat_penalty", "dominance_penalty"):
            if not (getattr(self, name) >= 0 and math.isfinite(getattr(self, name))):
                raise ConfigError(f"`{name}` must be a finite number >= 0, got {getattr(self, name)!r}")
        if not 0.0 <= self.dominance_threshold < 1.0:
            raise ConfigError(f"`dominance_threshold` must be in [0, 1), got {self.dominance_threshold!r}")
        if not 0.0 < self.warning_share <= 1.0:
            raise ConfigError(f"`warning_share` must be in (0, 1], got {self.warning_share!r}")


@dataclass
class ValidationSettings(ConfigBase):
    """The held-out check during training: how often, on how many validation tasks (``val_tasks``),
    how they are sampled and which wrappers their envs get."""

    every: int = 10
    """Validate every N steps (and before the first and after the last); 0 disables."""
    max_tasks: int | None = None
    """Validate on at most this many validation tasks (the first ones)."""
    group_size: int = 1
    """Rollouts per validation task (pass@k uses them)."""
    temperature: float = 0.0
    """Sampling temperature of validation; 0 is greedy."""
    env_wrappers: list[dict[str, Any]] = field(default_factory=list)
    """Wrappers of the validation envs (same format as ``env_wrappers``). Empty by default, so
    validation scores the bare environment's outcome reward, not shaping or curricula."""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, "every", 0)
        optional_at_least(self, "max_tasks", 1)
        at_least(self, "group_size", 1)
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise ConfigError(f"`temperature` must be a finite number >= 0, got {self.temperature!r}")
        if self.group_size > 1 and self.temperature == 0:
            raise ConfigError(f"`validation.group_size` is {self.group_size} but `validation.temperature` is 0: "
                              "greedy rollouts of a task are identical, so pass@k would equal pass@1; set "
                              "validation.temperature > 0 (e.g. 1.0) or validation.group_size = 1")
        self.env_wrappers = [wrapper_spec("env_wrappers", i, w) for i, w in enumerate(self.env_wrappers)]


@dataclass
class GRPOTrackingSettings(TrackingSettings):
    """Where a run's metrics and sampled episodes go besides its run folder's ``metrics.jsonl``
    (always written)."""

    log_trajectories: int = 4
    """Trajectories per step saved (run folder and tracker artifacts); 0 saves none."""
    traces: TraceConfig = field(default_factory=TraceConfig)
    """Episodes sent to the tracker as MLflow traces: ``per_step`` (per step and per
    validation, default 4; 0: none) and ``max_chars`` (text kept per span), e.g.
    ``--tracking.traces '{"per_step": 8}'``. See docs/training.md, "Episodes as traces"."""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, "log_trajectories", 0)


@dataclass
class GRPOConfig(ConfigBase):
    """Everything a GRPO run needs. Defaults follow the Amazon SageMaker AI multi-turn RL service (128 tasks x 8
    rollouts, LoRA rank 32, alpha 64, learning rate 4e-5); the ``cpu`` preset is small."""

    PRESETS = PRESET_DIR
    TOML_TABLE = "grpo"
    FIELDS_HINT = "`mtrl-gym train --help-all` lists every field."

    # ------------------------------------------------------------------ run
    output_dir: str = "runs/grpo"
    """Run folder. It holds the resolved config, checkpoints, metrics.jsonl, trajectories and the summary."""
    run_name: str | None = None
    """Name of the run in the tracker; default: the output folder's name."""
    seed: int = 0
    """Seeds model set-up, task order, rollouts and dropout; same seed, same run (on CPU)."""
    progress: bool = True
    """Show progress bars in the terminal."""

    # ------------------------------------------------------------------ environment, tasks, episodes
    env: str = "mtrl/Wordle-v0"
    """Registered environment id (``mtrl-gym envs`` lists them)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make(env, **env_kwargs)``."""
    env_wrappers: list[dict[str, Any]] = field(default_factory=list)
    """Wrappers applied to every training env, in order: ``[{"name": "WordleShaping",
    "kwargs": {...}}]``. A name is looked up in ``mtrl_gym.wrappers``, then
    ``gymnasium.wrappers``; ``"package.module:Class"`` imports any class. The validation envs
    get ``validation.env_wrappers`` instead."""
    train_tasks: str | None = None
    """Training task file (JSONL, JSON, CSV or Parquet; see ``mtrl_gym.datasets``). None: the
    env's named ``train`` split when its profile has one (``mtrl_gym.envs.profile_of``), else
    the env draws a task from each reset seed."""
    val_tasks: str | None = None
    """Validation task file; None: the env's named ``val`` split (or seeds)."""
    train_size: int = 640
    """Training tasks of the generated split (when ``train_tasks`` is None)."""
    val_size: int = 128
    """Validation tasks of the generated split (when ``val_tasks`` is None)."""
    split_seed: int = 42
    """Seed of the generated split."""
    episode: EpisodeSettings = field(default_factory=EpisodeSettings)
    """How one episode is played: ``max_turns``, its token budget (``max_tokens``), how env
    replies become messages, env worker threads, a time budget and the reward of an
    unfinished episode."""

    # ------------------------------------------------------------------ model and trained weights
    model: str = "smollm2-135m"
    """Embedded model name (``smollm2-135m``), Hugging Face id or local folder."""
    model_dtype: str | None = None
    """Dtype the weights are loaded in (``float32``, ``bfloat16``, ``float16``); None keeps
    the checkpoint's."""
    autocast_dtype: str | None = None
    """``torch.autocast`` dtype of the training forward and backward: ``bfloat16``, ``float16``,
    ``auto`` (bfloat16 where the hardware computes it natively: GPUs with bf16, CPUs with
    AVX512-BF16/AMX; else off) or None (the weights' dtype). On a CPU without native bf16
    (AVX2 only) bf16 autocast is several times *slower*. Log-probs are always float32."""
    device: str | None = None
    """``cpu``, ``cuda``, ``cuda:1``...; None picks CUDA when available."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, about a third more time."""
    init_adapter: str | None = None
    """A LoRA adapter folder to start from (e.g. an SFT run's ``checkpoints/step_N/adapter``):
    it is loaded and trained further (its own rank and modules; the ``lora`` group is then
    unused), and the KL anchor (``objective.kl_coef``) refers to it, a frozen copy, not the raw base."""
    lora: LoRASettings = field(default_factory=LoRASettings)
    """The LoRA adapter that is trained (rank, alpha, dropout, target modules, last N layers)
    or ``full_finetune``."""

    # ------------------------------------------------------------------ batch and schedule
    global_batch_size: int = 128
    """Tasks per step (each played ``group_size`` times)."""
    group_size: int = 8
    """Rollouts per task. Advantages compare the rollouts of a group, so at least 2 (see
    ``allow_zero_signal``)."""
    allow_zero_signal: bool = False
    """Accept ``group_size`` 1, where every advantage is 0 and only a KL term can move the
    policy (e.g. to measure a pipeline's cost); otherwise such a run is refused."""
    max_steps: int | None = 100
    """Training steps (one step: sample a batch, update). None: run ``max_epochs``."""
    max_epochs: float | None = None
    """Passes over the training tasks; the run stops at whichever limit comes first."""
    updates_per_step: int = 1
    """Optimiser steps per batch (the batch is split into this many mini-batches). 1 is
    on-policy: the ratio is exactly 1 and no forward pass is spent on old log-probs."""
    micro_batch_tokens: int = 8192
    """Token budget of one forward/backward (gradients accumulate over micro-batches);
    bounds memory. A longer sequence gets a micro-batch of its own."""
    packing: str = "auto"
    """Micro-batch layout: ``shared_prefix`` (episodes that start with the same prompt run it
    once: its keys/values are shared by their rows), ``padding_free`` (sequences concatenated
    in one row, block-diagonal attention), ``sorted`` (length-sorted, padded rows) or ``auto``
    (``shared_prefix``; with gradient checkpointing, padding-free with flash-attention,
    else sorted)."""

    # ------------------------------------------------------------------ optimiser
    learning_rate: float = 4e-5
    """Peak learning rate of AdamW."""
    optimizer: OptimizerSettings = field(default_factory=OptimizerSettings)
    """AdamW's schedule (constant, cosine or linear, with warm-up), weight decay, betas, epsilon
    and gradient clipping."""

    # ------------------------------------------------------------------ sampling
    sampler: str = "hf"
    """The rollouts' sampler: ``hf``, ``vllm`` or ``openai``. ``hf`` (transformers) shares the
    trainer's weights, ``vllm`` (GPU) gets them synced after each step, ``openai`` is any
    OpenAI-compatible completions endpoint."""
    sampler_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra arguments of the sampler class (``base_url`` for openai, ``gpu_memory_utilization``
    for vllm, ``max_batch_size`` for hf...)."""
    serving: ServingSettings = field(default_factory=ServingSettings)
    """How the policy is prompted and sampled: system prompt, tool schemas, format prefill
    (``assistant_prefix``), stop strings, tokens per turn, temperature, top-p, top-k and
    dictionary decoding (``constrained``). Saved as ``serving.yaml`` in the run folder, where
    ``mtrl-gym eval --adapter`` reads it, so the adapter is evaluated as it was trained."""

    # ------------------------------------------------------------------ objective
    objective: ObjectiveSettings = field(default_factory=ObjectiveSettings)
    """The advantage estimator, the policy loss (and its options, token aggregation, KL term,
    old log-probs, truncated importance sampling) and which groups and rollouts are trained on."""
    collapse: CollapseGuards = field(default_factory=CollapseGuards)
    """Collapse guards: reward penalties for an action repeated across a group or dominating
    the batch, and a warning when one action dominates a step."""

    # ------------------------------------------------------------------ validation
    validation: ValidationSettings = field(default_factory=ValidationSettings)
    """The held-out check during training: every N steps, on how many tasks, rollouts per task,
    temperature and the validation envs' wrappers."""

    # ------------------------------------------------------------------ where episodes come from
    source: dict[str, Any] | str = field(default_factory=lambda: {"name": "local"})
    """The rollout source, by name (``ray``) or by name with its own options (``mtrl_gym.rollout.sources.factory``):
    ``{name: local}`` (the built-in loop), ``{name: agent, target: "pkg.module:run"}`` (your
    own agent, docs/agents.md), ``{name: ray, workers: 4}`` (Ray actors), ``{name: selfplay,
    seats: {...}}`` (multi-agent envs), ``{name: async, max_staleness: 1, source: {...}}``
    (another source sampled ahead of the optimiser; docs/scaling.md) or ``{name: dynamic,
    max_draws: 3, source: {...}}`` (another source, with more task rows played while too few
    groups disagree; docs/training.md)."""

    # ------------------------------------------------------------------ tracking and checkpoints
    tracking: GRPOTrackingSettings = field(default_factory=GRPOTrackingSettings)
    """Where metrics, sampled trajectories and traces go: the tracker (MLflow or none), its URI
    and experiment."""
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    """How often the run checkpoints (``save_every``) and how many checkpoints it keeps."""

    # ------------------------------------------------------------------ validation of values

    def __post_init__(self) -> None:
        from mtrl_gym.envs.external import refuse_training

        refuse_training(self.env)  # an evaluation-only benchmark: refused, with its licence, before any model loads
        super().__post_init__()
        self._check_run()
        self._check_model()
        self._check_batch()
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ConfigError(f"`learning_rate` must be a finite number > 0, got {self.learning_rate!r}")
        one_of(self, "sampler", SAMPLERS)
        self._check_source()
        self._check_constrained()

    def _check_constrained(self) -> None:
        if self.serving.constrained:
            if self.sampler != "hf":
                raise ConfigError(f"`constrained` sampling needs the 'hf' sampler (got sampler={self.sampler!r})")
            if self.objective.old_logprobs == "sampler":
                raise ConfigError("`constrained` sampling cannot use `objective.old_logprobs: sampler`: the "
                                  "sampler's log-probs are the constrained distribution's, not the policy's; use "
                                  "auto or recompute")
            if not self.serving.stop or self.objective.tis_cap is None:
                raise ConfigError("`constrained` sampling needs a `serving.stop` string (it ends every allowed text) "
                                  "and `objective.tis_cap` (the constrained sampler is not the policy: its tokens are "
                                  "reweighted)")

    def _check_source(self) -> None:
        from mtrl_gym.rollout.sources.factory import check_source

        spec = check_source(self.source, self)
        self.source = {"name": spec.name, **dataclasses.asdict(spec.options)}

    def _check_run(self) -> None:
        at_least(self, "train_size", 1)
        at_least(self, "val_size", 0)
        if not isinstance(self.env, str) or not self.env:
            raise ConfigError(f"`env` must be an environment id such as 'mtrl/Wordle-v0', got {self.env!r}")
        self.env_wrappers = [wrapper_spec("env_wrappers", i, w) for i, w in enumerate(self.env_wrappers)]
        check_listed_once(self.env_wrappers, self.serving)
        check_listed_once(self.validation.env_wrappers, self.serving, where="validation.env_wrappers")

    def _check_model(self) -> None:
        if self.model_dtype is not None:
            one_of(self, "model_dtype", _DTYPES)
        if self.autocast_dtype is not None:
            one_of(self, "autocast_dtype", AUTOCAST_DTYPES)

    def _check_batch(self) -> None:
        at_least(self, "global_batch_size", 1)
        at_least(self, "group_size", 1)
        if self.group_size == 1 and not self.allow_zero_signal:
            raise ConfigError("`group_size` is 1: every group has a single rollout, so every advantage is 0 and "
                              "the run would train nothing; use group_size >= 2 (e.g. 8), or set "
                              "allow_zero_signal: true to run it anyway")
        at_least(self, "updates_per_step", 1)
        at_least(self, "micro_batch_tokens", 16)
        optional_at_least(self, "max_steps", 1)
        if self.max_epochs is not None and not (self.max_epochs > 0 and math.isfinite(self.max_epochs)):
            raise ConfigError(f"`max_epochs` must be a number > 0 or None, got {self.max_epochs!r}")
        if self.max_steps is None and self.max_epochs is None:
            raise ConfigError("set `max_steps` or `max_epochs` (both are None, so the run would never end)")
        if self.updates_per_step > self.rollouts_per_step:
            raise ConfigError(f"`updates_per_step` ({self.updates_per_step}) must be <= the rollouts per step "
                              f"(global_batch_size * group_size = {self.rollouts_per_step}): each "
                              "mini-batch needs at least one rollout")
        one_of(self, "packing", PACKING_MODES)
        if self.packing == "shared_prefix" and self.gradient_checkpointing:
            raise ConfigError("`packing` 'shared_prefix' cannot be combined with `gradient_checkpointing` (a "
                              "checkpointed forward pass cannot carry the shared keys/values); use 'auto'")

    # ------------------------------------------------------------------ derived values

    @property
    def rollouts_per_step(self) -> int:
        """Episodes sampled per step: ``global_batch_size * group_size``."""
        return self.global_batch_size * self.group_size

    @property
    def resolved_run_name(self) -> str:
        """``run_name``, or the output folder's name."""
        return self.run_name or Path(self.output_dir).name or "grpo"

# ---------------------------------------------------------------------- field checks


def _check_maths_names(cfg: ObjectiveSettings) -> None:
    """Check loss, aggregation, estimator names and their options against the maths modules."""
    from mtrl_gym.trainers.grpo import advantages, losses
    from mtrl_gym.trainers.grpo.selection import check_options

    losses.get_aggregation(cfg.aggregation)
    reserved = ("aggregation", "max_tokens", "denominator", "ref_logp", "kl_coef", "is_weights")
    bad = sorted(set(cfg.loss_kwargs) & set(reserved))
    if bad:
        raise ConfigError(f"`loss_kwargs` may not set {bad}: use the config fields "
                          "`aggregation`, `kl_coef` and `tis_cap` instead")
    check_options(losses.get_loss(cfg.loss), cfg.loss_kwargs, f"loss {cfg.loss!r}", reserved=reserved)
    estimator = advantages.get_advantage_estimator(cfg.advantage)
    check_options(estimator, cfg.advantage_kwargs, f"advantage estimator {cfg.advantage!r}",
                  reserved=("turn_mask",))
