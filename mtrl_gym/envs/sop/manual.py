"""The user manual of a domain's env class: the docstring sections every SOP env shares, filled in.

A domain's env class docstring holds only what is its own (Description, Observation Space,
Invalid Actions, Starting State, Rewards, Arguments, ...). :func:`complete_manual` adds the
sections it leaves out that read the same for every domain (:data:`SHARED_SECTIONS`): the
action space, the action format with a call of the domain's first tool, the episode end at the
domain's limits, the information and the version history, in the fixed order of
:data:`SECTION_ORDER`. :class:`~mtrl_gym.envs.sop.SOPEnv` applies it to every subclass whose
docstring has a ``## Description`` section.
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from typing import Any

__all__ = ["SECTION_ORDER", "SHARED_SECTIONS", "complete_manual"]

#: The sections of an env's manual, in order.
SECTION_ORDER = ("Description", "Action Space", "Action Format", "Observation Space", "Invalid Actions",
                 "Starting State", "Rewards", "Episode End", "Information", "Arguments", "Version History")
#: The sections :func:`complete_manual` can write.
SHARED_SECTIONS = ("Action Space", "Action Format", "Episode End", "Information", "Version History")
_EXAMPLE_RE = re.compile(r'e\.g\. "([^"]+)"')


def _example_call(domain: Any) -> str:
    tool = next(iter(domain.core_tools().values()))
    props = tool.parameters.get("properties", {})
    args = {}
    for name, spec in props.items():
        m = _EXAMPLE_RE.search(spec.get("description", ""))
        args[name] = m.group(1) if m else "..."
    return json.dumps({"name": tool.name, "arguments": args})


def _shared(domain: Any, section: str) -> str:
    if section == "Action Space":
        return "``Text``: the model's raw assistant message; any string is accepted."
    if section == "Action Format":
        return (f"Tool calls (``<tool_call>{_example_call(domain)}</tool_call>``, several per message allowed) and a "
                "final answer ``submit(answer={...})`` or ``<final_answer>{...}</final_answer>``, as "
                ":class:`~mtrl_gym.envs.sop.SOPEnv`.")
    if section == "Episode End":
        calls = domain.max_tool_calls
        return f"On a final answer, at the tool-call limit ({calls}) or the turn limit ({calls + 10})."
    if section == "Information":
        return ("As :class:`~mtrl_gym.envs.sop.SOPEnv` (``grade_result``, ``answer_error`` and ``answer`` on the "
                "final step; ``num_distractor_calls`` every step).")
    return "- v0: initial version."


def complete_manual(doc: str, domain: Any) -> str:
    """``doc`` (an env class docstring) with the :data:`SHARED_SECTIONS` it lacks, written for ``domain``.

    A section counts as present when a ``## `` heading names it (a heading may name several,
    separated by commas). The summary and the sections ``doc`` has stay as written.
    """
    text = inspect.cleandoc(doc)
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    summary, sections = parts[0].rstrip(), list(zip(parts[1::2], (b.strip("\n") for b in parts[2::2])))
    present = {name.strip() for title, _ in sections for name in title.split(",")}
    for name in SHARED_SECTIONS:
        if name in present:
            continue
        rank = SECTION_ORDER.index(name)
        at = next((i for i, (title, _) in enumerate(sections)
                   if SECTION_ORDER.index(_first_known(title)) > rank), len(sections))
        body = textwrap.fill(_shared(domain, name), 88, break_long_words=False, break_on_hyphens=False)
        sections.insert(at, (name, body))
    return summary + "\n\n" + "\n\n".join(f"## {title}\n{body}" for title, body in sections) + "\n"


def _first_known(title: str) -> str:
    names = [n.strip() for n in title.split(",") if n.strip() in SECTION_ORDER]
    return names[0] if names else "Version History"
