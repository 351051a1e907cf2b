"""The SOP document of a domain: where its file is, its front matter (role, request) and its text.

A domain's ``sop.md`` may open with a front matter block that holds the two sentences the
model reads around the SOP, so the domain's code carries none of its prose::

    ---
    role: You are a content moderator. Follow the standard operating procedure (SOP) below exactly.
    request: A user has reported a post. Review it by following SOP CM-12, then submit the final
      JSON object.
    ---
    # SOP CM-12: Review of a reported post

Each entry is ``key: value`` on one line; a line that starts with spaces continues the value
above (joined with one space). Only the keys in :data:`FRONT_MATTER_KEYS` are allowed. The
SOP text is what follows the block, exactly as written.

>>> read_document("---\\nrole: You are a clerk.\\n---\\n# SOP 1\\n")
({'role': 'You are a clerk.'}, '# SOP 1\\n')
>>> read_document("# SOP 1\\n")
({}, '# SOP 1\\n')
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["FRONT_MATTER_KEYS", "read_document", "sop_path", "FrontMatter"]

#: The keys a front matter block may set: :attr:`SOPDomain.role` and :attr:`SOPDomain.request`.
FRONT_MATTER_KEYS = ("role", "request")
_FENCE = "---"


def read_document(text: str, where: str = "the SOP") -> tuple[dict[str, str], str]:
    """``(front matter, SOP text)`` of a document; a document without a block has ``{}``."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != _FENCE:
        return {}, text
    meta: dict[str, str] = {}
    last = None
    for n, line in enumerate(lines[1:], start=2):
        body = line.rstrip("\r\n")
        if body == _FENCE:
            return meta, "".join(lines[n:])
        if body[:1].isspace() and last is not None:
            meta[last] = f"{meta[last]} {body.strip()}" if body.strip() else meta[last]
            continue
        key, sep, value = body.partition(":")
        if not sep or key.strip() not in FRONT_MATTER_KEYS or key.strip() in meta:
            raise ConfigError(f"{where}, line {n}: front matter lines are `key: value` with a key of "
                              f"{list(FRONT_MATTER_KEYS)}, each once; got {body!r}")
        last = key.strip()
        meta[last] = value.strip()
    raise ConfigError(f"{where}: the front matter block opened by '---' on line 1 is never closed; end it with a "
                      "line '---'")


def sop_path(cls: type, sop_file: str, base: type) -> Path:
    """The SOP file of domain class ``cls``: ``sop_file`` next to the module of ``cls`` or, where that has
    none, of the nearest base class below ``base`` whose module has one (a subclass of a domain shares
    its SOP). Raises :class:`ConfigError` naming the first place looked at when there is none."""
    places = [Path(inspect.getfile(c)).parent / sop_file for c in cls.__mro__
              if c is not base and issubclass(c, base)]
    for path in places:
        if path.is_file():
            return path
    raise ConfigError(f"domain {getattr(cls, 'name', cls.__name__)!r}: its SOP file {str(places[0])!r} does not "
                      "exist; set `sop_file` to a path relative to the module that defines the domain")


class FrontMatter:
    """A domain attribute read from the SOP's front matter, else ``default``; a subclass or an
    instance that sets the attribute itself overrides both."""

    def __init__(self, key: str, default: str):
        self.key, self.default = key, default

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return obj.sop_front_matter.get(self.key, self.default)
