"""A domain package's modules wired into its :class:`~mtrl_gym.envs.sop.SOPDomain` by their conventional names.

A domain package keeps its generator in ``world.py``, its reference procedure and oracle in
``procedure.py`` and its tools in ``tools.py``. Naming them in the class statement,
``class ContentFlagging(SOPDomain, world=world, procedure=procedure, tools=tools)``, sets
the attributes of :data:`PARTS` from those modules, so the class body holds only what is the
domain's own (its output schema, state checks, hooks). An attribute the class body sets
itself is left as written.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["PARTS", "package_parts"]

#: module keyword -> ``(domain attribute, name in the module, required)``: what :func:`package_parts` reads.
PARTS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "world": (("generate", "generate_world", True), ("default_difficulty", "DEFAULT_DIFFICULTY", True),
              ("difficulty_limits", "DIFFICULTY_LIMITS", False)),
    "procedure": (("expected", "expected", True), ("oracle", "oracle", True)),
    "tools": (("tools", "TOOLS", True), ("distractor_tools", "DISTRACTOR_TOOLS", True)),
}
_FUNCTIONS = ("generate", "expected", "oracle")


def package_parts(cls: type, modules: dict[str, ModuleType | None]) -> dict[str, Any]:
    """The attributes of domain class ``cls`` that ``modules`` (keyword -> module, see :data:`PARTS`)
    provide and its class body does not set; functions come as static methods."""
    unknown = [k for k in modules if k not in PARTS]
    if unknown:
        raise ConfigError(f"{cls.__name__}: unknown domain part(s) {unknown} in the class statement; the parts are "
                          f"{list(PARTS)}")
    out: dict[str, Any] = {}
    for part, module in modules.items():
        if module is None:
            continue
        if not isinstance(module, ModuleType):
            raise ConfigError(f"{cls.__name__}: `{part}=` must be the domain's {part} module, got {module!r}")
        for attr, name, required in PARTS[part]:
            if attr in vars(cls):
                continue
            if not hasattr(module, name):
                if required:
                    raise ConfigError(f"{cls.__name__}: module {module.__name__} has no {name!r}; define it there or "
                                      f"set `{attr}` in the class body")
                continue
            value = getattr(module, name)
            out[attr] = staticmethod(value) if attr in _FUNCTIONS else value
    return out
