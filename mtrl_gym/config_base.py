"""The one config base: every config class of the project extends :class:`ConfigBase`.

A config is a dataclass whose field docstrings (the string under each field) are its only
documentation and whose ``__post_init__`` validates. The base gives each of them the same
loading and saving:

* :meth:`ConfigBase.load` merges presets (by name, from the class's ``PRESETS`` folder),
  YAML/TOML/JSON files and mappings in order, then ``key=value`` overrides; a dotted key
  (``serving.max_new_tokens=6``) sets a field of a nested group;
* :meth:`ConfigBase.from_dict` refuses unknown keys with close matches (a setting's dotted
  place in a group too: ``lora_rank`` -> ``lora.rank``), converts strings to the field's type
  (``"1e-4"`` for a float) and builds nested groups from mappings, over the field's default
  (a config may give a shared group its own defaults with ``default_factory``);
* :meth:`ConfigBase.save` / :meth:`ConfigBase.to_dict` write plain YAML/JSON;
* :meth:`ConfigBase.field_docs` reads the field docstrings (dotted for nested groups), for
  ``--help`` and the docs' tables.

>>> from dataclasses import dataclass, field
>>> @dataclass
... class Inner(ConfigBase):
...     rate: float = 0.5
...     '''A rate.'''
>>> @dataclass
... class Outer(ConfigBase):
...     steps: int = 1
...     '''How many steps.'''
...     inner: Inner = field(default_factory=Inner)
...     '''A nested group.'''
>>> Outer.load({"steps": "3"}, overrides=["inner.rate=0.25"])
Outer(steps=3, inner=Inner(rate=0.25))
>>> Outer.groups()
{'inner': <class 'mtrl_gym.config_base.Inner'>}
>>> Outer.field_names()
['steps', 'inner', 'inner.rate']
"""


import ast
import dataclasses
import difflib
import inspect
import json
import math
import os
import textwrap
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from mtrl_gym.error import ConfigError
from mtrl_gym.files import write_text_atomic

__all__ = ["ConfigBase", "coerce", "close_names", "read_config_file", "parse_override", "yaml_module",
           "looks_structured", "parse_structured"]


class ConfigBase:
    """Loading, saving, coercion and field docs shared by every config dataclass."""

    #: Folder of the class's presets (``<name>.yaml``), or None.
    PRESETS: ClassVar[Path | None] = None
    #: The table a TOML file may put the fields under (``[grpo]``).
    TOML_TABLE: ClassVar[str | None] = None
    #: What error messages call the config (``unknown <KIND> key(s): ...``).
    KIND: ClassVar[str] = "config"
    #: Where the error for an unknown key sends the reader; None lists the fields.
    FIELDS_HINT: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        """Convert every field to its annotated type (nested groups from mappings, merged over the
        field's default: ``lora={"rank": 8}`` keeps the other settings of the config's ``lora``)."""
        hints = _hints(type(self))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            group = _group_class(hints[f.name])
            if group is not None and f.default_factory is not dataclasses.MISSING:
                value = _over_default(f.name, group, value, f.default_factory)
            setattr(self, f.name, coerce(f.name, value, hints[f.name]))

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        """A config from a mapping; unknown keys raise ConfigError with close matches among every
        field's dotted name (``lora_rank``: did you mean ``lora.rank``?)."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in values if k not in names]
        if unknown:
            raise ConfigError(_unknown_keys_message(cls, unknown, names))
        return cls(**dict(values))

    @classmethod
    def preset_names(cls) -> list[str]:
        """Names of the class's presets."""
        return sorted(p.stem for p in cls.PRESETS.glob("*.yaml")) if cls.PRESETS is not None else []

    @classmethod
    def preset_path(cls, name: str) -> Path:
        """The file of preset ``name``."""
        path = cls.PRESETS / f"{name}.yaml" if cls.PRESETS is not None else None
        if path is None or not path.is_file():
            close = difflib.get_close_matches(name, cls.preset_names(), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown preset {name!r}.{hint} Presets: {', '.join(cls.preset_names()) or 'none'}")
        return path

    @classmethod
    def read(cls, source: str | os.PathLike) -> dict[str, Any]:
        """The values of one preset name or config file."""
        if str(source) in cls.preset_names():
            return read_config_file(cls.preset_path(str(source)))
        names = ", ".join(cls.preset_names())
        hint = "give a YAML/TOML file" + (f" or a preset name ({names})" if names else "")
        return read_config_file(source, table=cls.TOML_TABLE, hint=hint)

    @classmethod
    def load(cls, *sources: str | os.PathLike | Mapping[str, Any], overrides: Iterable[str] = ()):
        """Merge presets (by name), YAML/TOML files and mappings in order, then ``key=value`` overrides."""
        merged: dict[str, Any] = {}
        for source in sources:
            _merge(cls, merged, source if isinstance(source, Mapping) else cls.read(source))
        for item in overrides:
            key, value = parse_override(item)
            _set_dotted(merged, key, value)
        return cls.from_dict(merged)

    def replace(self, **changes: Any):
        """A copy with ``changes`` applied (validated again); a group's mapping changes only the
        fields it names (``replace(lora={"rank": 8})`` keeps this config's other LoRA settings)."""
        values = self.to_dict()
        _merge(type(self), values, changes)
        return type(self).from_dict(values)

    # ------------------------------------------------------------------ saving

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML-safe values of every field (nested groups as mappings)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def save(self, path: str | os.PathLike) -> Path:
        """Write the config as YAML (``.yaml``/``.yml``) or JSON (any other suffix), atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.to_dict()
        if path.suffix.lower() in (".yaml", ".yml"):
            text = yaml_module().safe_dump(data, sort_keys=False, allow_unicode=True)
        else:
            text = json.dumps(data, indent=2)
        return write_text_atomic(path, text)

    # ------------------------------------------------------------------ docs

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Each field's docstring, whitespace-normalised; a nested group's fields as ``group.field``."""
        cached = cls.__dict__.get("_field_docs_cache")
        if cached is not None:
            return cached
        docs: dict[str, str] = {}
        hints = _hints(cls)
        own = _docstrings(cls)
        for f in dataclasses.fields(cls):
            docs[f.name] = own.get(f.name, "")
            group = _group_class(hints[f.name])
            if group is not None:
                docs.update({f"{f.name}.{k}": v for k, v in group.field_docs().items()})
        cls._field_docs_cache = docs
        return docs

    @classmethod
    def groups(cls) -> dict[str, type]:
        """The nested groups: field name -> config class."""
        hints = _hints(cls)
        return {f.name: g for f in dataclasses.fields(cls) if (g := _group_class(hints[f.name])) is not None}

    @classmethod
    def field_names(cls) -> list[str]:
        """Every field's name, a nested group's fields as ``group.field`` (after the group itself)."""
        groups = cls.groups()
        names: list[str] = []
        for f in dataclasses.fields(cls):
            names.append(f.name)
            if f.name in groups:
                names.extend(f"{f.name}.{n}" for n in groups[f.name].field_names())
        return names


def _docstrings(cls: type) -> dict[str, str]:
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0].body
        for node, nxt in zip(body, body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) \
                    and isinstance(nxt.value.value, str):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _hints(cls: type) -> dict[str, Any]:
    cached = cls.__dict__.get("_type_hints_cache")
    if cached is None:
        cached = typing.get_type_hints(cls)
        cls._type_hints_cache = cached
    return cached


def _group_class(tp: Any) -> type | None:
    return tp if isinstance(tp, type) and issubclass(tp, ConfigBase) else None


def _over_default(name: str, group: type, value: Any, default_factory: Any) -> Any:
    """A group's value given as a mapping (or its JSON/YAML text), merged over the field's default."""
    if isinstance(value, str) and looks_structured(value):
        value = parse_structured(name, value)
    if not isinstance(value, Mapping):
        return value
    default = default_factory()
    if not isinstance(default, group):
        return value
    base = dataclasses.asdict(default)
    _merge(group, base, value)
    return base


def _merge(cls: type, into: dict[str, Any], values: Mapping[str, Any]) -> None:
    """Merge ``values`` into ``into``: a nested group's mapping is merged field by field (a later
    file that sets ``serving: {temperature: 0.5}`` keeps the preset's other serving settings),
    a dotted key sets one field of a group, any other key replaces the value."""
    groups = cls.groups()
    for key, value in values.items():
        key = str(key)
        if key in groups and isinstance(value, Mapping):
            inner = into.get(key)
            if dataclasses.is_dataclass(inner) and not isinstance(inner, type):
                inner = dataclasses.asdict(inner)
            inner = dict(inner) if isinstance(inner, Mapping) else {}
            _merge(groups[key], inner, value)
            into[key] = inner
        else:
            _set_dotted(into, key, value)


def _set_dotted(values: dict[str, Any], key: str, value: Any) -> None:
    """``values[key] = value``; ``a.b`` sets key ``b`` of the mapping ``values["a"]`` (``source.workers=4``)."""
    head, dot, rest = key.partition(".")
    if not dot:
        values[key] = value
        return
    inner = values.get(head)
    if dataclasses.is_dataclass(inner) and not isinstance(inner, type):
        inner = dataclasses.asdict(inner)
    if inner is not None and not isinstance(inner, Mapping):
        raise ConfigError(f"cannot set `{head}.{rest}`: `{head}` is {inner!r}, not a mapping; give it as one "
                          f"(e.g. --set {head}.name=... for a named choice) or set `{head}` whole")
    inner = dict(inner or {})
    _set_dotted(inner, rest, value)
    values[head] = inner


def _unknown_keys_message(cls: type, unknown: Sequence[str], names: Sequence[str]) -> str:
    parts = []
    for key in unknown:
        close = close_names(str(key), cls.field_names())
        parts.append(f"{key!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""))
    hint = cls.FIELDS_HINT or f"Its fields: {', '.join(names)}."
    return f"unknown {cls.KIND} key(s): {', '.join(parts)}. {hint}"


def close_names(key: str, names: Iterable[str], *, n: int = 2, cutoff: float = 0.6) -> list[str]:
    """The names among ``names`` (dotted for a group's fields) that ``key`` most likely meant.

    A key that names a field of a group without the group, or with the group's name (or its
    start) written into it, finds that field: ``lora_rank`` -> ``lora.rank``, ``val_every`` ->
    ``validation.every``, ``keep_checkpoints`` -> ``checkpoints.keep``, ``tracker`` ->
    ``tracking.tracker``. Otherwise the closest spellings (``difflib`` ratio >= ``cutoff``, within
    0.1 of the best) are returned; dashes count as underscores.

    >>> close_names("lora_rank", ["learning_rate", "lora", "lora.rank", "lora.alpha"])
    ['lora.rank']
    >>> close_names("learning-rat", ["learning_rate", "lora.rank"])
    ['learning_rate']
    """
    wanted = str(key).strip().lstrip("-").replace("-", "_")
    scored = []
    for name in names:
        *groups, leaf = name.split(".")
        if wanted in (name, leaf, name.replace(".", "_")):
            score = 1.0
        elif groups and _regrouped(wanted, leaf, groups):
            score = 0.95
        else:
            score = max(difflib.SequenceMatcher(None, wanted, form).ratio()
                        for form in (name, name.replace(".", "_"), leaf))
        scored.append((score, name))
    scored.sort(key=lambda item: -item[0])
    if not scored or scored[0][0] < cutoff:
        return []
    best = scored[0][0]
    floor = 0.95 if best >= 0.95 else max(cutoff, best - 0.1)
    return [name for score, name in scored if score >= floor][:n]


def _regrouped(key: str, leaf: str, groups: Sequence[str]) -> bool:
    """Whether ``key`` is ``leaf`` with words naming its groups (or their start) put in: ``val_every``
    for ``validation.every``, ``max_episode_tokens`` for ``episode.max_tokens``."""
    group_words = [w for g in groups for w in g.split("_")]
    words = key.split("_")
    kept = [w for w in words if not (len(w) >= 3 and any(g.startswith(w) for g in group_words))]
    return len(kept) < len(words) and kept == leaf.split("_")


def coerce(name: str, value: Any, tp: Any) -> Any:
    """Convert ``value`` (often a string from the command line) to the annotated type ``tp``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if type(None) in args and (value is None or (isinstance(value, str)
                                                     and value.strip().lower() in ("none", "null", "~"))):
            return None
        if isinstance(value, str) and str in options and not looks_structured(value):
            return value
        errors = []
        for option in options:
            try:
                return coerce(name, value, option)
            except ConfigError as e:
                errors.append(str(e).split(", got")[0].removeprefix(f"`{name}` must be "))
        allowed = " or ".join(errors + (["None"] if type(None) in args else []))
        raise ConfigError(f"`{name}` must be {allowed}, got {value!r}")
    group = _group_class(tp)
    if group is not None:
        if isinstance(value, group):
            return value
        if isinstance(value, str) and looks_structured(value):
            value = parse_structured(name, value)
        names = [f.name for f in dataclasses.fields(group)]
        if not isinstance(value, Mapping):
            raise ConfigError(f"`{name}` must be a mapping of its fields ({', '.join(names)}), got {value!r}")
        unknown = [k for k in value if k not in names]
        if unknown:
            close = close_names(str(unknown[0]), group.field_names(), n=1)
            raise ConfigError(f"`{name}` has no field {unknown[0]!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                              + f"; its fields are {', '.join(names)}")
        try:
            return group.from_dict(value)
        except ConfigError as e:
            raise ConfigError(_in_group(name, str(e))) from None
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
    if origin in (list, dict):
        if isinstance(value, str):
            value = parse_structured(name, value)
        if isinstance(value, tuple) and origin is list:
            value = list(value)
        if not isinstance(value, origin):
            raise ConfigError(f"`{name}` must be a {origin.__name__}, got {value!r}")
        return value
    return value


def _in_group(name: str, message: str) -> str:
    """A group's error as its parent reports it: "`rank` must be ..." -> "`lora.rank` must be ..."."""
    if message.startswith("`") and not message.startswith(f"`{name}."):
        return f"`{name}.{message[1:]}"
    if message.startswith(f"`{name}."):
        return message
    return f"`{name}`: {message}"


def looks_structured(text: str) -> bool:
    """Whether a command-line value is a JSON/YAML list or mapping (it starts with [ or {)."""
    return text.lstrip()[:1] in ("[", "{")


def parse_structured(name: str, text: str) -> Any:
    """``text`` (a command-line value of field ``name``) parsed as JSON, else YAML; ConfigError otherwise."""
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


def read_config_file(path: str | os.PathLike, *, table: str | None = None,
                     hint: str = "give a YAML/TOML file") -> dict[str, Any]:
    """Read a YAML (``.yaml``/``.yml``), TOML (``.toml``) or JSON file into a dict.

    A TOML file may put the fields at the top level or under a ``[<table>]`` table.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config {str(path)!r} ({e.strerror}); {hint}") from None
    suffix = path.suffix.lower()
    parse = _toml().loads if suffix == ".toml" else json.loads if suffix == ".json" else yaml_module().safe_load
    try:
        data = parse(text)
    except Exception as e:  # noqa: BLE001 - yaml, toml and json errors differ
        raise ConfigError(f"{path}: not valid {suffix.lstrip('.') or 'YAML'} ({e})") from None
    if suffix == ".toml" and isinstance(data, dict) and table is not None:
        data = data.get(table, data)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must hold a mapping of field: value, got {type(data).__name__}")
    return data


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


