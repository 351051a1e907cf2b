"""Turning a run specification into a sampler, with the checks that must fail early.

Before the first episode of an evaluation, :meth:`ModelPool.preflight` checks every run:

* a model's config can be loaded (a bad name or path fails now, not after other runs);
* a LoRA adapter folder holds ``adapter_config.json`` and weights, was trained on the
  base model the run loads (``base_model_name_or_path``), and every adapter tensor fits
  the shape of the module it targets in that base model (checked on a weightless
  ``meta``-device copy, so it costs no memory);
* an endpoint answers ``GET /v1/models`` (and serves ``endpoint_model`` when given).

:meth:`ModelPool.open` then loads models lazily, once per (model, adapter), shares them
between runs (``base:1.0`` and ``base:0.0`` sample from the same weights) and merges an
adapter into its own copy of the base model for fast sampling.
"""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError, SamplerError
from mtrl_gym.evaluation.specs import ADAPTER_WEIGHT_FILES, RunSpec
from mtrl_gym.rollout.samplers.factory import make_sampler

__all__ = ["ModelPool", "BACKENDS", "read_adapter_config", "adapter_shape_problems", "same_base_model",
           "probe_endpoint"]

#: Model backends of :class:`ModelPool`.
BACKENDS = ("hf", "vllm")
#: LoRA ranks vLLM accepts for ``max_lora_rank``.
_VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def read_adapter_config(adapter: str | Path) -> dict[str, Any]:
    """The ``adapter_config.json`` of a peft adapter folder, with clear errors when it is not one."""
    path = Path(adapter).expanduser()
    if not path.is_dir():
        raise ConfigError(f"adapter folder {str(adapter)!r} does not exist")
    config_file = path / "adapter_config.json"
    if not config_file.is_file():
        found = sorted(str(p.parent) for p in path.glob("**/adapter_config.json"))[:5]
        hint = f"; adapters inside it: {found}" if found else ""
        raise ConfigError(f"{str(adapter)!r} is not a peft adapter folder (no adapter_config.json){hint}")
    if not any((path / f).is_file() for f in ADAPTER_WEIGHT_FILES):
        raise ConfigError(f"adapter folder {str(adapter)!r} has adapter_config.json but no weights "
                          f"({' or '.join(ADAPTER_WEIGHT_FILES)})")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{config_file} is not valid JSON ({e.msg})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{config_file} must hold a JSON object")
    return config


def _names_of(name: str) -> set[str]:
    """Forms of a model name that identify the same base: canonical name, resolved path, folder name."""
    from mtrl_gym import models

    out = {name.strip().rstrip("/").lower()}
    canonical = models.canonical_name(name)
    if canonical is not None:
        spec = models.EMBEDDED_MODELS[canonical]
        out |= {canonical, spec.cache_name}
    path = Path(name).expanduser()
    if path.exists():
        out.add(str(path.resolve()).lower())
    out.add(Path(name.strip().rstrip("/")).name.lower())
    return {o for o in out if o}


def same_base_model(a: str, b: str) -> bool:
    """Whether two model names (short name, Hugging Face id or folder) denote the same base.

    Equal after normalising: the embedded short name and its cache folder, a resolved
    path, or the last path component (``HuggingFaceTB/SmolLM2-135M-Instruct`` matches a
    local ``.../smollm2-135m-instruct`` folder).
    """
    return bool(_names_of(a) & _names_of(b))


def _adapter_shapes(adapter: Path) -> dict[str, tuple[int, ...]]:
    st = adapter / "adapter_model.safetensors"
    if st.is_file():  # the header is JSON after an 8-byte length: no tensor is read
        with open(st, "rb") as f:
            size = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(size))
        return {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}
    import torch

    state = torch.load(adapter / "adapter_model.bin", map_location="cpu", weights_only=True)
    return {k: tuple(v.shape) for k, v in state.items()}


_LORA_PARTS = (".lora_A.", ".lora_B.", ".lora_embedding_A", ".lora_embedding_B", ".lora_magnitude_vector")


def _module_and_part(key: str) -> tuple[str, str]:
    key = key.removeprefix("base_model.model.")
    for part in _LORA_PARTS:
        if part in key:
            return key.split(part)[0], part.strip(".")
    return key.rsplit(".", 1)[0], "full:" + key.rsplit(".", 1)[-1]


def adapter_shape_problems(adapter: str | Path, model) -> list[str]:
    """Adapter tensors that do not fit ``model`` (a torch module, possibly on ``meta``).

    LoRA ``A`` of a linear layer must be ``[r, in_features]`` and ``B`` ``[out_features, r]``;
    embedding LoRA ``[r, num_embeddings]`` / ``[dim, r]``; ``modules_to_save`` tensors the
    module's own shape. An empty list means the adapter fits.
    """
    modules = dict(model.named_modules())
    problems = []
    for key, shape in sorted(_adapter_shapes(Path(adapter).expanduser()).items()):
        name, part = _module_and_part(key)
        module = modules.get(name) or modules.get("model." + name)
        if module is None:
            problems.append(f"{key}: the model has no module {name!r}")
            continue
        expected = _expected_shape(module, part, shape)
        if expected is not None and tuple(expected) != tuple(shape):
            problems.append(f"{key}: adapter shape {list(shape)}, the model needs {list(expected)}")
    return problems


def _expected_shape(module, part: str, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    weight = getattr(module, "weight", None)
    if weight is None or len(shape) == 0:
        return None
    rows, cols = (tuple(weight.shape) + (1,))[:2]
    r = shape[0] if part in ("lora_A", "lora_embedding_A") else shape[-1]
    if part == "lora_A":  # Linear weight is [out, in]
        return (r, cols)
    if part == "lora_B":
        return (rows, r)
    if part == "lora_embedding_A":  # Embedding weight is [num, dim]
        return (r, rows)
    if part == "lora_embedding_B":
        return (cols, r)
    if part.startswith("full:"):
        param = getattr(module, part.removeprefix("full:"), None)
        return tuple(param.shape) if param is not None else None
    return None


def probe_endpoint(base_url: str, *, timeout_s: float = 10.0, model: str | None = None,
                   api_key: str | None = None) -> list[str]:
    """The model names ``GET /v1/models`` lists; raises :class:`SamplerError` when it does not answer."""
    root = base_url.rstrip("/")
    url = (root if root.endswith("/v1") else root + "/v1") + "/models"
    request = urllib.request.Request(url, headers={"Accept": "application/json",
                                                   **({"Authorization": f"Bearer {api_key}"} if api_key else {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            data = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise SamplerError(f"endpoint {base_url} answered HTTP {e.code} to GET {url}; is it an "
                           "OpenAI-compatible server (e.g. `vllm serve MODEL`)?") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise SamplerError(f"endpoint {base_url} is not reachable ({reason}); start the server "
                           "(e.g. `vllm serve MODEL --port 8000`) or fix --endpoint") from None
    names = [str(m.get("id")) for m in (data.get("data") or []) if isinstance(m, dict) and m.get("id")]
    if model is not None and names and model not in names:
        raise ConfigError(f"endpoint {base_url} does not serve model {model!r}; it serves {names}")
    return names


class ModelPool:
    """Loads and caches the samplers of model runs (see module docstring).

    Args:
        backend: ``"hf"`` (transformers, CPU or GPU: :class:`HFSampler`) or ``"vllm"`` (an
            in-process vLLM engine per model and adapter: :class:`VLLMSampler`; the adapter
            is served as a LoRA, not merged).
        device, dtype: passed to :func:`mtrl_gym.models.load` (vLLM: ``dtype`` only).
        max_batch_size: most requests per forward pass of an :class:`HFSampler`.
        allow_base_mismatch: accept an adapter whose recorded base model has another name
            (its tensor shapes are still checked).
        endpoint_timeout_s: seconds per endpoint request.
        vllm_kwargs: fields of :class:`~mtrl_gym.rollout.samplers.vllm.VLLMConfig`
            (``max_model_len``, ``gpu_memory_utilization`` (default 0.85 here: evaluation
            shares the GPU with no trainer), ...).
    """

    def __init__(self, *, backend: str = "hf", device: str | None = None, dtype: Any = None,
                 max_batch_size: int | None = None, allow_base_mismatch: bool = False,
                 endpoint_timeout_s: float = 120.0, vllm_kwargs: dict[str, Any] | None = None):
        if backend not in BACKENDS:
            raise ConfigError(f"`backend` must be one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        self.device, self.dtype, self.max_batch_size = device, dtype, max_batch_size
        self.allow_base_mismatch = allow_base_mismatch
        self.endpoint_timeout_s = endpoint_timeout_s
        self.vllm_kwargs = {"gpu_memory_utilization": 0.85, **(vllm_kwargs or {})}
        self._models: dict[tuple[str, str | None], tuple[Any, Any]] = {}

    # ------------------------------------------------------------------ checks

    def base_of(self, spec: RunSpec) -> str:
        """The base model a model/adapter run loads (the adapter's recorded base if none given)."""
        if spec.adapter is None:
            return str(spec.model)
        recorded = read_adapter_config(spec.adapter).get("base_model_name_or_path")
        if spec.model is None:
            if not recorded:
                raise ConfigError(f"adapter {spec.adapter!r} does not record its base model "
                                  "(base_model_name_or_path); pass --model")
            return str(recorded)
        if recorded and not self.allow_base_mismatch and not same_base_model(str(recorded), spec.model):
            raise ConfigError(
                f"adapter {spec.adapter!r} was trained on base model {recorded!r} (adapter_config.json "
                f"base_model_name_or_path), but run {spec.name!r} loads {spec.model!r}. Pass --model {recorded}, "
                "or --allow-base-mismatch if both names denote the same weights")
        return spec.model

    def preflight(self, spec: RunSpec) -> None:
        """Every check of the module docstring for one run; loads no weights."""
        if spec.kind == "endpoint":
            probe_endpoint(spec.endpoint, model=spec.endpoint_model, timeout_s=min(10.0, self.endpoint_timeout_s))
            return
        if spec.kind not in ("model", "adapter"):
            return
        base = self.base_of(spec)
        skeleton = self._skeleton(base)
        if spec.adapter is not None:
            problems = adapter_shape_problems(spec.adapter, skeleton)
            if problems:
                shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
                raise ConfigError(f"adapter {spec.adapter!r} does not fit base model {base!r} (it was trained on "
                                  f"another model): {shown}")

    def _skeleton(self, name: str):
        """The model's architecture on the ``meta`` device (shapes without weights)."""
        from mtrl_gym import models

        try:
            import torch
            import transformers
        except ImportError as e:
            from mtrl_gym.error import DependencyNotInstalled

            raise DependencyNotInstalled(e.name or "transformers", extra="train") from None

        path = str(models.embedded_path(name)) if models.canonical_name(name) else name
        try:
            config = transformers.AutoConfig.from_pretrained(path)
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot load model {name!r}: {e}") from None
        with torch.device("meta"):
            return transformers.AutoModelForCausalLM.from_config(config)

    # ------------------------------------------------------------------ samplers

    def open(self, spec: RunSpec):
        """``(sampler, tokenizer)`` of a model, adapter, endpoint or sampler run."""
        if spec.kind == "sampler":
            return spec.sampler, spec.tokenizer
        if spec.kind == "endpoint":
            from mtrl_gym import models

            tokenizer = spec.tokenizer or models.load_tokenizer(spec.model)
            return make_sampler("openai", base_url=spec.endpoint, model=spec.endpoint_model,
                                timeout_s=self.endpoint_timeout_s), tokenizer
        if self.backend == "vllm":
            return self._load_vllm(self.base_of(spec), spec.adapter)
        model, tokenizer = self._load(self.base_of(spec), spec.adapter)
        return make_sampler("hf", policy=model, tokenizer=tokenizer, max_batch_size=self.max_batch_size), tokenizer

    def _load_vllm(self, base: str, adapter: str | None):
        key = (base, adapter)
        if key not in self._models:
            from mtrl_gym import models

            kwargs = dict(self.vllm_kwargs)
            if self.dtype is not None:
                kwargs.setdefault("dtype", str(self.dtype).removeprefix("torch."))
            if adapter is not None:
                rank = int(read_adapter_config(adapter).get("r") or 16)
                kwargs.update(enable_lora=True, max_lora_rank=next((r for r in _VLLM_LORA_RANKS if r >= rank), rank))
            sampler = make_sampler("vllm", model_name=base, **kwargs)
            if adapter is not None:
                sampler.load_adapter(str(Path(adapter).expanduser()))
            self._models[key] = (sampler, models.load_tokenizer(base))
        return self._models[key]

    def _load(self, base: str, adapter: str | None):
        key = (base, adapter)
        if key not in self._models:
            from mtrl_gym import models

            try:
                model, tokenizer = models.load(base, dtype=self.dtype, device=self.device)
            except OSError as e:
                raise ConfigError(f"cannot load model {base!r}: {e}") from None
            if adapter is not None:
                model = _merge_adapter(model, adapter)
            self._models[key] = (model, tokenizer)
        return self._models[key]

    def numerics(self, spec: RunSpec) -> dict[str, str]:
        """How a model or adapter run computes, where this pool differs from the default
        (``backend`` other than ``hf``, a ``dtype``): recorded with the run, so that a resumed
        evaluation never mixes, e.g., float32 and bfloat16 episodes. Empty for other runs and
        for the default pool (the record evaluations had before these fields existed)."""
        if spec.kind not in ("model", "adapter"):
            return {}
        out = {"backend": self.backend} if self.backend != "hf" else {}
        dtype = self.vllm_kwargs.get("dtype") if self.dtype is None and self.backend == "vllm" else self.dtype
        if dtype is not None:  # as given: an explicit float32 is recorded, the checkpoint's own dtype is not
            out["dtype"] = str(dtype).removeprefix("torch.")
        return out

    def key(self, spec: RunSpec) -> tuple[str, str | None] | None:
        """What a run loads: ``(base model, adapter)``, or ``None`` for runs that load nothing."""
        return (self.base_of(spec), spec.adapter) if spec.kind in ("model", "adapter") else None

    def release(self, keep: list[RunSpec]) -> None:
        """Drop (and close, for vLLM engines) loaded models no run in ``keep`` needs."""
        needed = {self.key(s) for s in keep}
        for key in [k for k in self._models if k not in needed]:
            loaded = self._models.pop(key)[0]
            if self.backend == "vllm":
                loaded.close()

    def close(self) -> None:
        """Release every loaded model."""
        self.release([])


def _merge_adapter(model, adapter: str):
    try:
        from peft import PeftModel
    except ImportError:
        from mtrl_gym.error import DependencyNotInstalled

        raise DependencyNotInstalled("peft", extra="train") from None
    try:
        with warnings.catch_warnings():  # peft reads transformers' deprecated alias; not the user's concern
            warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated",
                                    category=FutureWarning)
            peft_model = PeftModel.from_pretrained(model, str(Path(adapter).expanduser()))
    except (RuntimeError, ValueError, KeyError) as e:
        raise ConfigError(f"adapter {adapter!r} cannot be loaded onto its base model: {e}") from None
    return peft_model.merge_and_unload().eval()
