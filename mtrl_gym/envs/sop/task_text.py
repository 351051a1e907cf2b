"""The first observation of an SOP task: the request, then its inputs as a JSON block.

>>> text = render_task("Classify the shipment.", {"id": "S-1"})
>>> parse_task_inputs(text)
{'id': 'S-1'}
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["render_task", "parse_task_inputs"]

_INPUTS_HEADER = "Task inputs:"
_INPUTS_RE = re.compile(r"Task inputs:\s*```json\s*\n(.*?)\n```", re.DOTALL)


def render_task(request: str, inputs: Mapping[str, Any]) -> str:
    """The first observation: the request, then the inputs as a JSON block (:func:`parse_task_inputs`)."""
    return f"{request.strip()}\n\n{_INPUTS_HEADER}\n```json\n{json.dumps(dict(inputs), indent=2, ensure_ascii=False)}\n```"


def parse_task_inputs(text: str) -> dict[str, Any]:
    """The task inputs from a first observation made by :func:`render_task`."""
    m = _INPUTS_RE.search(text)
    if m is None:
        raise ValueError("no 'Task inputs:' JSON block in the text")
    return json.loads(m.group(1))
