"""Reading a user's own checkout of the official SOP-Bench data: one domain folder, nothing shipped.

A domain folder holds ``sop.txt`` (the procedure), ``toolspecs.json`` (tool schemas: a list
of Bedrock-style ``{"toolSpec": {"name", "description", "inputSchema": {"json": ...}}}``
entries or OpenAI-style ``{"name", "description", "parameters"}`` ones), ``tools.py`` (the
tools, run in a separate process by :mod:`.worker`), ``test_set_with_outputs.csv`` (one row
per task) and usually ``metadata.json`` (``input_columns``, ``output_columns``).

The rows are read as the official loader reads them: with pandas' ``read_csv``, so every
value keeps the type pandas gives it (numbers, booleans, empty cells as null), converted to
plain JSON values. Without ``output_columns`` the output is the ``expected_output`` or else
the ``final_decision`` column (the official legacy mode); without ``input_columns`` the
inputs are every other column (the official loader then passes the whole row, the label
included; we leave the output columns out). An empty expected value is kept as null and
flagged on its case (:meth:`Benchmark.case_flags`). The data's licence forbids training on
it: :data:`LICENCE_TERMS` is printed on every load.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_gym.envs.sop.grading import Field, normalize_enum
from mtrl_gym.error import ConfigError, DatasetError

__all__ = ["Benchmark", "load_benchmark", "benchmark_tasks", "list_domains", "LICENCE_TERMS", "REQUIRED_FILES",
           "MAX_ENUM_VALUES", "LEGACY_OUTPUT_COLUMNS", "to_json_value"]

REQUIRED_FILES = ("sop.txt", "toolspecs.json", "tools.py", "test_set_with_outputs.csv")
#: The output column of a folder whose ``metadata.json`` names none (the official legacy mode), in order.
LEGACY_OUTPUT_COLUMNS = ("expected_output", "final_decision")
#: An output column with at most this many distinct values is graded as an enumeration.
MAX_ENUM_VALUES = 12
LICENCE_TERMS = (
    "SOP-Bench data is licensed CC BY-NC 4.0 with the condition that no one take steps to facilitate training "
    "AI models on it. mtrl_gym uses it for evaluation only: these tasks are refused as training tasks, and none "
    "of the data is shipped with mtrl_gym. You are responsible for complying with the licence of your checkout.")


def to_json_value(value: Any) -> Any:
    """A pandas/numpy cell as a plain JSON value: NaN and None -> None, numpy scalars -> int/float/bool."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


@dataclass
class Benchmark:
    """One SOP-Bench domain as read from disk (``rows`` hold JSON values, typed as pandas reads them)."""

    domain: str
    folder: Path
    sop_text: str
    toolspecs: list[dict[str, Any]]
    input_columns: list[str]
    output_columns: list[str]
    rows: list[dict[str, Any]] = field(repr=False)
    inputs_derived: bool = False
    """``metadata.json`` lists no ``input_columns``: the inputs are every column but the outputs."""

    def output_schema(self) -> dict[str, Field]:
        """One field per output column: a boolean when pandas reads the column as booleans, an enumeration of
        the column's values when it has few, an integer or number when it is numeric, else a string; a column
        with an empty cell is nullable."""
        schema = {}
        for column in self.output_columns:
            cells = [r[column] for r in self.rows]
            present = [v for v in cells if v is not None and str(v).strip()]
            nullable = len(present) < len(cells)
            if present and all(isinstance(v, bool) for v in present):
                schema[column] = Field("bool", nullable=nullable)
                continue
            if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
                schema[column] = Field("int", nullable=nullable)
                continue
            values = sorted({str(v).strip() for v in present}, key=str.lower)
            folded = {normalize_enum(v) for v in values}
            if all(isinstance(v, str) for v in present) and 1 <= len(values) <= MAX_ENUM_VALUES \
                    and len(folded) == len(values):
                schema[column] = Field("enum", values=tuple(values), nullable=nullable)
            elif present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
                schema[column] = Field("float", nullable=nullable)
            else:
                schema[column] = Field("str", nullable=nullable)
        return schema

    def case_flags(self, row: dict[str, Any]) -> dict[str, str]:
        """``{output column: why}`` for the row's expected values the strict grader cannot take as written."""
        return {c: "the CSV's expected value is empty: the strict grade expects null, the official parser any "
                   "null-like value ('', 'none', 'null', 'n/a', 'unknown')"
                for c in self.output_columns if row[c] is None or not str(row[c]).strip()}


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
    root = Path(path).expanduser()
    if all((root / f).is_file() for f in REQUIRED_FILES):
        return ["."]
    return sorted(p.name for p in root.iterdir() if p.is_dir() and all((p / f).is_file() for f in REQUIRED_FILES)) \
        if root.is_dir() else []


def _read_rows(csv_path: Path) -> list[dict[str, Any]]:
    import pandas as pd  # lazy: only evaluations on the official data need it

    try:
        frame = pd.read_csv(csv_path)
    except (ValueError, OSError) as e:
        raise DatasetError(f"{csv_path}: not a readable CSV file ({e})") from None
    return [{str(k): to_json_value(v) for k, v in r.items()} for r in frame.to_dict("records")]


def _columns(meta: dict[str, Any], rows: list[dict[str, Any]], where: Path) -> tuple[list[str], list[str], bool]:
    header = list(rows[0]) if rows else []
    outputs = meta.get("output_columns") or [next((c for c in LEGACY_OUTPUT_COLUMNS if c in header), None)]
    if not isinstance(outputs, list) or outputs == [None] or not all(isinstance(c, str) for c in outputs):
        raise DatasetError(f"{where}: metadata.json lists no 'output_columns' and the CSV has neither of "
                           f"{list(LEGACY_OUTPUT_COLUMNS)}; name the output columns in metadata.json")
    inputs = meta.get("input_columns")
    derived = not inputs
    if derived:
        inputs = [c for c in header if c not in outputs]
    if not isinstance(inputs, list) or not all(isinstance(c, str) for c in inputs):
        raise DatasetError(f"{where / 'metadata.json'}: 'input_columns' must be a list of column names")
    absent = [c for c in [*inputs, *outputs] if c not in header]
    if absent:
        raise DatasetError(f"{where / 'test_set_with_outputs.csv'}: the columns {absent} named in metadata.json "
                           "are missing")
    return list(inputs), list(outputs), derived


def load_benchmark(path: str | Path, domain: str, *, quiet: bool = False) -> Benchmark:
    """Read the domain folder ``path/domain`` (``domain="."``: ``path`` itself); print the licence terms."""
    root = Path(path).expanduser()
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
        meta_file = folder / "metadata.json"
        meta = json.loads(meta_file.read_text(encoding="utf-8")) if meta_file.is_file() else {}
    except ValueError as e:
        raise DatasetError(f"{folder}: toolspecs.json or metadata.json is not JSON ({e})") from None
    if isinstance(specs, dict):
        specs = specs.get("tools", [specs])
    if not isinstance(meta, dict):
        raise DatasetError(f"{folder / 'metadata.json'} must hold a JSON object")
    toolspecs = [_toolspec(s, str(folder / "toolspecs.json")) for s in specs]
    rows = _read_rows(folder / "test_set_with_outputs.csv")
    if not rows:
        raise DatasetError(f"{folder / 'test_set_with_outputs.csv'}: no rows")
    inputs, outputs, derived = _columns(meta, rows, folder)
    return Benchmark(folder.name, folder, (folder / "sop.txt").read_text(encoding="utf-8"), toolspecs, inputs,
                     outputs, rows, derived)


def _expected(value: Any, spec: Field) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if spec.type in ("bool", "int", "float"):
        return value
    return str(value).strip()


def benchmark_tasks(bench: Benchmark) -> list[dict[str, Any]]:
    """Evaluation task rows: ``{"id", "index", "evaluation_only", "inputs", "answer", "flags"}`` (the answer
    stays out of every observation; ``flags`` names the expected values the strict grader reads as null)."""
    schema = bench.output_schema()
    return [{"id": f"sop-bench-{bench.domain}-{i:05d}", "index": i, "evaluation_only": True,
             "inputs": {c: row[c] for c in bench.input_columns},
             "answer": {c: _expected(row[c], schema[c]) for c in bench.output_columns},
             "flags": bench.case_flags(row)} for i, row in enumerate(bench.rows)]
