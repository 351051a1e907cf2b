"""How an adapter was served in training, read back from its run folder.

An adapter trained with a format prefill, a stop string, a short system prompt without
tool schemas and a few tokens per turn scores near zero when it is evaluated without them.
A training run saves its :class:`~mtrl_gym.rollout.serving.ServingSettings` (the config's
``serving`` group) in its folder; :func:`training_serving` reads them back from the
training config saved next to the adapter (``<run>/checkpoints/step_N/config.yaml``, else
``<run>/config.yaml``) as :class:`~mtrl_gym.evaluation.specs.RunSpec` fields, so
``mtrl-gym eval --adapter`` serves the adapter as it was trained unless told otherwise
(:func:`differences` says what an override changes).

The fields: ``max_new_tokens``, ``assistant_prefix``, ``stop``, ``tools``,
``system_prompt_text`` (the text of the run's :class:`~mtrl_gym.wrappers.SystemPrompt`
wrapper, ``None`` when it kept the env's prompt; a caller turns it into a
``system_prompt`` file with :func:`system_prompt_file`) and ``wrappers`` (what the policy
read: the serving wrappers, and any ``observation_only`` wrapper among the run's env
wrappers). An SFT run's env wrappers are those its first demonstration file was made with.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["ServingSettings", "training_config_of", "training_serving", "differences", "system_prompt_file",
           "SERVING_FIELDS"]

#: The RunSpec fields an adapter's training decides (system_prompt_text becomes system_prompt).
SERVING_FIELDS = ("max_new_tokens", "assistant_prefix", "stop", "tools", "system_prompt_text", "wrappers")

ServingSettings = dict[str, Any]


def training_config_of(adapter: str | os.PathLike) -> Path | None:
    """The ``config.yaml`` of the run that wrote ``adapter``: beside the adapter (its
    checkpoint folder) or in a folder up to three levels above it."""
    path = Path(adapter).expanduser().resolve()
    for parent in list(path.parents)[:4]:
        if (parent / "config.yaml").is_file():
            return parent / "config.yaml"
    return None


def _system_prompt(wrappers: Any, source: Path) -> tuple[str | None, bool] | None:
    """``(text, tools)`` of the first SystemPrompt wrapper in ``wrappers`` (None: there is none)."""
    for spec in wrappers or []:
        name = spec.get("name", "") if isinstance(spec, Mapping) else str(spec)
        if name.rsplit(":", 1)[-1].rsplit(".", 1)[-1] != "SystemPrompt":
            continue
        kwargs = (spec.get("kwargs") or {}) if isinstance(spec, Mapping) else {}
        text = kwargs.get("text")
        if text is None and kwargs.get("file"):
            file = Path(kwargs["file"]).expanduser()
            try:
                text = file.read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError(f"{source}: the SystemPrompt file {str(file)!r} of the training run cannot be "
                                  f"read ({e.strerror}); pass --system-prompt FILE") from None
        return text, bool(kwargs.get("tools", True))
    return None


def _demo_wrappers(config: Mapping[str, Any], config_path: Path) -> Any:
    """The ``env_wrappers`` an SFT run's first demonstration file was made with (its
    ``.meta.json``), or None. A relative path is read from where the run was started: the
    folder that holds the run folder as its ``output_dir`` names it. A record that cannot be
    found is warned about (the prompt and serving wrappers then come from the flags)."""
    import warnings

    from mtrl_gym.rollout.trajectory import meta_path, read_meta

    demos = config.get("demos")
    first = demos[0] if isinstance(demos, list) and demos else demos
    if not isinstance(first, str):
        return None
    candidates = [Path(first).expanduser()]
    output_dir = config.get("output_dir")
    if not candidates[0].is_absolute() and isinstance(output_dir, str) and not Path(output_dir).is_absolute():
        run = next((p for p in [config_path.parent, *config_path.parents] if (p / "config.yaml").is_file()
                    and p.parts[-len(Path(output_dir).parts):] == Path(output_dir).parts), None)
        if run is not None:
            candidates.append(run.parents[len(Path(output_dir).parts) - 1] / first)
    for path in candidates:
        if meta_path(path).is_file():
            try:
                made = (read_meta(path) or {}).get("config")
            except (OSError, ValueError):
                break
            return made.get("env_wrappers") if isinstance(made, Mapping) else None
    warnings.warn(f"{config_path}: this SFT run's demonstration record {str(meta_path(first))!r} is not found, so the "
                  "system prompt its demonstrations were made with is not known; pass --system-prompt and --wrapper "
                  "as it was trained", stacklevel=3)
    return None


def saved_serving_of(adapter: str | os.PathLike) -> Path | None:
    """The ``serving.yaml`` a training run saved (beside the adapter or up to three levels above it)."""
    from mtrl_gym.rollout.serving import SERVING_FILE

    path = Path(adapter).expanduser().resolve()
    for parent in list(path.parents)[:4]:
        if (parent / SERVING_FILE).is_file():
            return parent / SERVING_FILE
    return None


def training_serving(adapter: str | os.PathLike) -> tuple[ServingSettings, Path] | None:
    """``(settings, config_path)`` of the run that trained ``adapter``; None without a config.yaml.

    The run's saved ``serving.yaml`` wins over its config's ``serving`` group (an SFT run saves
    there the format its demonstrations were made in)."""
    path = training_config_of(adapter)
    if path is None:
        return None
    try:
        import yaml
    except ImportError:
        from mtrl_gym.error import DependencyNotInstalled

        raise DependencyNotInstalled("pyyaml", extra="train") from None
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML ({e}); pass the serving settings as flags") from None
    if not isinstance(config, Mapping):
        raise ConfigError(f"{path} does not hold a training config (a mapping); pass the serving settings as flags")
    from mtrl_gym.rollout.serving import ServingSettings as Serving
    from mtrl_gym.rollout.serving import observation_wrappers

    saved = saved_serving_of(adapter)
    try:
        serving = Serving.load(saved) if saved is not None else Serving.from_dict(config.get("serving") or {})
    except ConfigError as e:
        raise ConfigError(f"{saved or path}: its serving settings are not valid ({e}); pass the serving settings "
                          "as flags") from None
    settings: ServingSettings = {"max_new_tokens": serving.max_new_tokens,
                                 "assistant_prefix": serving.assistant_prefix, "stop": tuple(serving.stop)}
    validation = config.get("validation") if isinstance(config.get("validation"), Mapping) else {}
    val_wrappers = validation.get("env_wrappers", config.get("val_env_wrappers"))  # the latter: a run saved before the groups
    env_wrappers = config.get("env_wrappers")
    if env_wrappers is None and config.get("demos"):  # an SFT run: the env its first demonstration file was made in
        env_wrappers = _demo_wrappers(config, path)
    prompt = _system_prompt(env_wrappers, path) or _system_prompt(val_wrappers, path)
    # a run saved before serving.wrappers kept them among its env wrappers
    settings["wrappers"] = observation_wrappers([*(env_wrappers or val_wrappers or []), *serving.wrappers])
    text, tools = prompt if prompt is not None else (None, True)
    if serving.system_prompt != "default" or not serving.tools:  # the serving group's prompt is applied outermost
        own = serving.system_prompt_text()
        text, tools = (own if own is not None else text), serving.tools
    settings["tools"] = tools
    settings["system_prompt_text"] = text
    return settings, path


def differences(inherited: Mapping[str, Any], given: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(field, trained_with, given)`` for each given setting that differs from training's."""
    out = []
    for key, value in given.items():
        if key in inherited and inherited[key] != value:
            out.append((key, inherited[key], value))
    return out


def system_prompt_file(text: str, folder: str | os.PathLike) -> str:
    """Write ``text`` to ``<folder>/prompts/<sha>.txt`` (a RunSpec ``system_prompt`` file); its path."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    path = Path(folder) / "prompts" / f"{digest}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file():
        path.write_text(text + "\n", encoding="utf-8", errors="surrogatepass")
    return str(path)
