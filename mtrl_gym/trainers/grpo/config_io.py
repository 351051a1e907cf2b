"""Reading, parsing and converting config values: YAML/TOML/JSON files, presets, ``key=value``.

Helpers of :mod:`mtrl_gym.trainers.grpo.config`: :func:`coerce` converts a value (often a
string from the command line) to a field's annotated type, :func:`read_config_file` reads a
config file, :func:`preset_names`/:func:`preset_path` find the bundled presets and
:func:`parse_override` splits ``key=value``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import types
import typing
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["coerce", "read_config_file", "preset_names", "preset_path", "parse_override", "yaml_module",
           "PRESET_DIR"]

#: Folder of the bundled presets (``<name>.yaml``).
PRESET_DIR = Path(__file__).with_name("presets")


def coerce(name: str, value: Any, tp: Any) -> Any:
    """Convert ``value`` (often a string from the command line) to the annotated type ``tp``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if type(None) in args and (value is None or (isinstance(value, str)
                                                     and value.strip().lower() in ("none", "null", "~"))):
            return None
        if isinstance(value, str) and str in options and not _looks_structured(value):
            return value
        errors = []
        for option in options:
            try:
                return coerce(name, value, option)
            except ConfigError as e:
                errors.append(str(e).split(", got")[0].removeprefix(f"`{name}` must be "))
        allowed = " or ".join(errors + (["None"] if type(None) in args else []))
        raise ConfigError(f"`{name}` must be {allowed}, got {value!r}")
    if tp is bool:
        return _to_bool(name, value)
    if tp is int:
        return _to_int(name, value)
    if tp is float:
        return _to_float(name, value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"`{name}` must be a string, got {value!r}")
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _to_dataclass(name, value, tp)
    if origin in (list, dict):
        if isinstance(value, str):
            value = _parse_structured(name, value)
        if isinstance(value, tuple) and origin is list:
            value = list(value)
        if not isinstance(value, origin):
            raise ConfigError(f"`{name}` must be a {origin.__name__}, got {value!r}")
        return value
    return value


def _to_dataclass(name: str, value: Any, tp: type) -> Any:
    """A nested settings object from itself, a mapping or a JSON/YAML mapping string."""
    if isinstance(value, tp):
        return value
    if isinstance(value, str):
        value = _parse_structured(name, value)
    if not isinstance(value, dict):
        raise ConfigError(f"`{name}` must be a mapping of {tp.__name__} fields, got {value!r}")
    names = [f.name for f in dataclasses.fields(tp)]
    unknown = [k for k in value if k not in names]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), names, n=1)
        raise ConfigError(f"`{name}` has no field {unknown[0]!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                          + f"; its fields are {', '.join(names)}")
    hints = typing.get_type_hints(tp)
    return tp(**{k: coerce(f"{name}.{k}", v, hints[k]) for k, v in value.items()})


def _looks_structured(text: str) -> bool:
    return text.lstrip()[:1] in ("[", "{")


def _parse_structured(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        why = f"{e.msg} at character {e.pos}"
    except RecursionError:
        why = "nested too deeply"
    if len(text) <= 10_000:
        try:
            return yaml_module().safe_load(text)
        except Exception:  # noqa: BLE001 - any parse failure is the user's value
            pass
    shown = text if len(text) <= 80 else text[:77] + "..."
    raise ConfigError(f"`{name}`: cannot parse {shown!r} as JSON or YAML (JSON: {why}); write it as JSON, "
                      f"e.g. '{{\"key\": 1}}'") from None


def _to_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "0"):
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ConfigError(f"`{name}` must be true or false, got {value!r}")


def _to_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"`{name}` must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip().replace("_", ""))
        except ValueError:
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if number.is_integer():
                return int(number)
    raise ConfigError(f"`{name}` must be an integer, got {value!r}")


def _to_float(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"`{name}` must be a number, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"`{name}` must be a number, got {value!r}")


# ---------------------------------------------------------------------- files, presets, overrides

def yaml_module():
    """The ``yaml`` module, or :class:`~mtrl_gym.error.DependencyNotInstalled` naming the ``train`` extra."""
    try:
        import yaml
    except ImportError:
        from mtrl_gym.error import DependencyNotInstalled

        raise DependencyNotInstalled("pyyaml", extra="train") from None
    return yaml


def _toml():
    try:
        import tomllib  # Python >= 3.11
    except ImportError:
        try:
            import tomli as tomllib
        except ImportError:
            from mtrl_gym.error import DependencyNotInstalled

            raise DependencyNotInstalled("tomli", hint="pip install tomli (TOML configs on Python 3.10)") from None
    return tomllib


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML (``.yaml``/``.yml``), TOML (``.toml``) or JSON file into a dict.

    A TOML file may put the fields at the top level or under a ``[grpo]`` table.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        names = ", ".join(preset_names())
        raise ConfigError(f"cannot read config {str(path)!r} ({e.strerror}); give a YAML/TOML file "
                          f"or a preset name ({names})") from None
    suffix = path.suffix.lower()
    parse = _toml().loads if suffix == ".toml" else json.loads if suffix == ".json" else yaml_module().safe_load
    try:
        data = parse(text)
    except Exception as e:  # noqa: BLE001 - yaml, toml and json errors differ
        raise ConfigError(f"{path}: not valid {suffix.lstrip('.') or 'YAML'} ({e})") from None
    if suffix == ".toml" and isinstance(data, dict):
        data = data.get("grpo", data)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must hold a mapping of field: value, got {type(data).__name__}")
    return data


def preset_names() -> list[str]:
    """Names of the bundled presets (``presets/*.yaml``)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def preset_path(name: str) -> Path:
    """The file of preset ``name``."""
    path = PRESET_DIR / f"{name}.yaml"
    if not path.is_file():
        close = difflib.get_close_matches(name, preset_names(), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown preset {name!r}.{hint} Presets: {', '.join(preset_names())}")
    return path


def parse_override(item: str) -> tuple[str, Any]:
    """``"key=value"`` -> ``(key, value)``; dashes in the key become underscores.

    The value stays a string unless it is JSON/YAML structure (``[...]`` or ``{...}``);
    :class:`GRPOConfig` converts strings to the field's type.
    """
    if "=" not in item:
        raise ConfigError(f"an override must look like key=value, got {item!r}")
    key, value = item.split("=", 1)
    key = key.strip().lstrip("-").replace("-", "_")
    if not key:
        raise ConfigError(f"an override must look like key=value, got {item!r}")
    return key, value


