"""Reading a user's own checkout of the official SOP-Bench data: one domain folder, nothing shipped.

A domain folder holds ``sop.txt`` (the procedure), ``toolspecs.json`` (tool schemas: a list
of Bedrock-style ``{"toolSpec": {"name", "description", "inputSchema": {"json": ...}}}``
entries or OpenAI-style ``{"name", "description", "parameters"}`` ones), ``tools.py`` (the
tools, run in a separate process by :mod:`.worker`), ``metadata.json`` (``input_columns``
and ``output_columns``) and ``test_set_with_outputs.csv`` (one row per task).
The data's licence forbids training on it: :data:`LICENCE_TERMS` is printed on every load.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.error import ConfigError, DatasetError

__all__ = ["Benchmark", "load_benchmark", "benchmark_tasks", "list_domains", "LICENCE_TERMS", "REQUIRED_FILES",
           "MAX_ENUM_VALUES"]

REQUIRED_FILES = ("sop.txt", "toolspecs.json", "tools.py", "metadata.json", "test_set_with_outputs.csv")
#: An output column with at most this many distinct values is graded as an enumeration.
MAX_ENUM_VALUES = 12
LICENCE_TERMS = (
    "SOP-Bench data is licensed CC BY-NC 4.0 with the condition that no one take steps to facilitate training "
    "AI models on it. mtrl_gym uses it for evaluation only: these tasks are refused as training tasks, and none "
    "of the data is shipped with mtrl_gym. You are responsible for complying with the licence of your checkout.")


@dataclass
class Benchmark:
    """One SOP-Bench domain as read from disk."""

    domain: str
    folder: Path
    sop_text: str
    toolspecs: list[dict[str, Any]]
    input_columns: list[str]
    output_columns: list[str]
    rows: list[dict[str, str]] = field(repr=False)

    def output_schema(self) -> dict[str, Field]:
        """One field per output column: an enumeration of the column's values when it has few, else a string."""
        schema = {}
        for column in self.output_columns:
            values = sorted({r[column].strip() for r in self.rows if r[column].strip()}, key=str.lower)
            folded = {v.lower() for v in values}
            if 1 <= len(values) <= MAX_ENUM_VALUES and len(folded) == len(values):
                schema[column] = Field("enum", values=tuple(values))
            else:
                schema[column] = Field("str")
        return schema


def _toolspec(entry: Any, where: str) -> dict[str, Any]:
    spec = entry.get("toolSpec", entry) if isinstance(entry, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise DatasetError(f"{where}: each tool spec needs a 'name' (as {{'toolSpec': {{'name': ...}}}} or "
                           f"{{'name': ...}}), got {str(entry)[:120]!r}")
    params = spec.get("parameters") or (spec.get("inputSchema") or {}).get("json") or {"type": "object",
                                                                                         "properties": {}}
    if params.get("type") != "object":
        raise DatasetError(f"{where}: tool {spec['name']!r} has a parameter schema that is not a JSON object schema")
    return {"name": spec["name"], "description": str(spec.get("description", "")), "parameters": params}


def list_domains(path: str | Path) -> list[str]:
    """The domain folders under ``path`` that hold every required file (or ``path`` itself, as ``"."``)."""
    root = Path(path)
    if all((root / f).is_file() for f in REQUIRED_FILES):
        return ["."]
    return sorted(p.name for p in root.iterdir() if p.is_dir() and all((p / f).is_file() for f in REQUIRED_FILES)) \
        if root.is_dir() else []


def load_benchmark(path: str | Path, domain: str, *, quiet: bool = False) -> Benchmark:
    """Read the domain folder ``path/domain`` (``domain="."``: ``path`` itself); print the licence terms."""
    root = Path(path)
    folder = root if domain in (".", "") else root / domain
    if not folder.is_dir():
        found = list_domains(root)
        raise ConfigError(f"no SOP-Bench domain {domain!r} under {str(root)!r}; the domains there are {found or 'none'}"
                          f" (a domain folder holds {', '.join(REQUIRED_FILES)})")
    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    if missing:
        raise ConfigError(f"SOP-Bench domain folder {str(folder)!r} lacks {missing}; it needs {list(REQUIRED_FILES)}")
    if not quiet:
        print(f"SOP-Bench {folder.name}: {LICENCE_TERMS}", file=sys.stderr)
    try:
        specs = json.loads((folder / "toolspecs.json").read_text(encoding="utf-8"))
        meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    except ValueError as e:
        raise DatasetError(f"{folder}: toolspecs.json or metadata.json is not JSON ({e})") from None
    if isinstance(specs, dict):
        specs = specs.get("tools", [specs])
    toolspecs = [_toolspec(s, str(folder / "toolspecs.json")) for s in specs]
    inputs, outputs = meta.get("input_columns"), meta.get("output_columns")
    if not (isinstance(inputs, list) and isinstance(outputs, list) and outputs):
        raise DatasetError(f"{folder / 'metadata.json'} must list 'input_columns' and a non-empty 'output_columns'")
    with open(folder / "test_set_with_outputs.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    absent = [c for c in [*inputs, *outputs] if rows and c not in rows[0]]
    if not rows or absent:
        raise DatasetError(f"{folder / 'test_set_with_outputs.csv'}: " +
                           ("no rows" if not rows else f"the columns {absent} named in metadata.json are missing"))
    return Benchmark(folder.name if domain not in (".", "") else folder.name, folder,
                     (folder / "sop.txt").read_text(encoding="utf-8"), toolspecs, list(inputs), list(outputs),
                     [{k: (v or "") for k, v in r.items()} for r in rows])


def benchmark_tasks(bench: Benchmark) -> list[dict[str, Any]]:
    """Evaluation task rows: ``{"id", "index", "inputs", "answer"}`` (the answer stays out of every observation)."""
    return [{"id": f"sop-bench-{bench.domain}-{i:05d}", "index": i, "evaluation_only": True,
             "inputs": {c: row[c] for c in bench.input_columns},
             "answer": {c: row[c].strip() for c in bench.output_columns}} for i, row in enumerate(bench.rows)]
