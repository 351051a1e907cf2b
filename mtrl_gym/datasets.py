"""Task rows in and out: the managed-service row format in JSONL, JSON, CSV and Parquet.

A *task file* holds one row per task. Each row has a single field ``prompt`` whose value
is a JSON **string** encoding the task, e.g. for Wordle::

    {"prompt": "{\\"prompt\\": \\"Guess the 5-letter word\\", \\"answer\\": \\"riser\\", \\"id\\": \\"wordle_train_0000\\"}"}

:func:`read_tasks` returns the decoded tasks (``{"prompt": ..., "answer": ..., "id": ...}``
plus any extra fields an env uses); :func:`write_tasks` writes them back in the same
format. Envs accept either form in ``reset(options={"task": row})``.

>>> decode_task({"prompt": '{"prompt": "Guess the 5-letter word", "answer": "riser", "id": "t0"}'})["answer"]
'riser'

An env's named splits (Wordle's ``train``/``val``, the SOP domains' generated tasks) come
from its profile: ``mtrl_gym.envs.profile_of(env_id).tasks("train")``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError, DatasetError, DependencyNotInstalled, InvalidTask

__all__ = ["decode_task", "encode_task", "read_tasks", "write_tasks", "parse_options", "FORMATS", "REQUIRED_FIELDS"]

#: File suffix -> format name.
FORMATS = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
#: Fields every decoded task must have (override per env with ``required=``).
REQUIRED_FIELDS = ("prompt", "answer", "id")
_MAX_CSV_FIELD = 64 * 2**20  # 64 MiB per CSV field


def decode_task(row: Any, *, required: Sequence[str] = ()) -> dict[str, Any]:
    """A task dict from an encoded row (``{"prompt": "<json>"}``), a task dict, or a JSON string.

    Raises :class:`InvalidTask` naming the problem; ``required`` lists fields that must be present.
    """
    task = row
    if isinstance(task, str):
        task = _loads(task, "task")
    if isinstance(task, Mapping) and set(task) == {"prompt"} and isinstance(task["prompt"], str) \
            and task["prompt"].lstrip().startswith("{"):
        task = _loads(task["prompt"], "prompt")
    if not isinstance(task, Mapping):
        raise InvalidTask(f"a task must be a JSON object, got {type(task).__name__}")
    missing = [f for f in required if f not in task]
    if missing:
        raise InvalidTask(f"task is missing field(s) {missing}; it has {sorted(task)}")
    return dict(task)


def _loads(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidTask(f"{what} is not valid JSON ({e.msg} at character {e.pos})") from None
    except RecursionError:
        raise InvalidTask(f"{what} is nested too deeply to be a task (JSON arrays/objects nested "
                          f"{sys.getrecursionlimit()}+ levels)") from None


def encode_task(task: Mapping[str, Any]) -> dict[str, str]:
    """The row format: ``{"prompt": json.dumps(task)}``."""
    return {"prompt": json.dumps(dict(task), ensure_ascii=False)}


def _format_of(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS.values():
            raise DatasetError(f"unknown format {fmt!r}; use one of {sorted(set(FORMATS.values()))}", path=str(path))
        return fmt
    try:
        return FORMATS[path.suffix.lower()]
    except KeyError:
        raise DatasetError(f"cannot tell the format from the suffix {path.suffix!r}; use one of "
                           f"{sorted(FORMATS)} or pass format=", path=str(path)) from None


def read_tasks(path: str | os.PathLike, *, required: Sequence[str] = REQUIRED_FIELDS,
               format: str | None = None,  # noqa: A002
               validate: Callable[[dict[str, Any]], Any] | None = None) -> list[dict[str, Any]]:
    """Read and decode every row of a task file.

    A broken row raises :class:`DatasetError` naming the file, the line (JSONL, CSV: the
    file line; JSON, Parquet: the 1-based row) and the field. An empty file is an error too,
    and so are text that is not UTF-8 (a UTF-8 byte-order mark is fine), JSON nested too
    deeply to decode, and a path that is a directory.

    ``validate(task)`` checks each decoded task for an env (e.g. an env class's
    ``validate_task``, see :func:`mtrl_gym.envs.profile.task_validator`); an
    :class:`InvalidTask` or ``ValueError`` it raises becomes a :class:`DatasetError` with
    the file and line.
    """
    path = Path(path)
    if path.is_dir():
        raise DatasetError("is a directory, not a task file; give the file inside it (e.g. train.jsonl)",
                           path=str(path))
    if not path.is_file():
        raise DatasetError("no such file", path=str(path))
    fmt = _format_of(path, format)
    tasks = []
    for line, row in _raw_rows(path, fmt):
        if not isinstance(row, Mapping) or "prompt" not in row:
            raise DatasetError("row has no 'prompt' field", path=str(path), line=line, field="prompt")
        try:
            task = decode_task(row if isinstance(row["prompt"], str) else row["prompt"], required=required)
            if validate is not None:
                validate(task)
        except (InvalidTask, ValueError) as e:
            raise DatasetError(str(e), path=str(path), line=line, field="prompt") from None
        tasks.append(task)
    if not tasks:
        raise DatasetError("the file holds no task rows", path=str(path))
    return tasks


def _read_text(path: Path) -> str:
    """The file's text: UTF-8, an optional byte-order mark dropped; bad bytes name their line."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DatasetError(f"cannot read the file ({e.strerror})", path=str(path)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DatasetError(f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); save the file "
                           "as UTF-8", path=str(path), line=line) from None


def _raw_rows(path: Path, fmt: str) -> Iterable[tuple[int, Any]]:
    if fmt == "parquet":
        yield from enumerate(_read_parquet(path), start=1)
        return
    text = _read_text(path)
    if fmt == "jsonl":
        # split("\n"), not splitlines(): U+2028 and friends may sit unescaped inside JSON strings.
        for i, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                yield i, _json_line(line, path, i)
    elif fmt == "json":
        data = _json_line(text, path, None)
        if not isinstance(data, list):
            raise DatasetError(f"a JSON task file must hold an array of rows, got {type(data).__name__}", path=str(path))
        yield from enumerate(data, start=1)
    else:
        yield from _csv_rows(path, text)


def _csv_rows(path: Path, text: str) -> Iterable[tuple[int, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    previous = csv.field_size_limit()
    csv.field_size_limit(max(previous, _MAX_CSV_FIELD))  # a task can be long (the default limit is 128 KiB)
    try:
        try:
            fieldnames = reader.fieldnames
        except csv.Error as e:
            raise DatasetError(f"not a readable CSV file ({e})", path=str(path), line=1) from None
        if fieldnames is None or "prompt" not in fieldnames:
            raise DatasetError(f"the CSV header must have a 'prompt' column, got {fieldnames}",
                               path=str(path), line=1, field="prompt")
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise DatasetError(f"not a readable CSV row ({e})", path=str(path), line=reader.line_num) from None
            yield reader.line_num, row
    finally:
        csv.field_size_limit(previous)


def _json_line(text: str, path: Path, line: int | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"invalid JSON ({e.msg} at character {e.pos})", path=str(path), line=line) from None
    except RecursionError:
        raise DatasetError("JSON nested too deeply to decode (thousands of levels); a task row is a flat "
                           "object", path=str(path), line=line) from None


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DependencyNotInstalled("pyarrow", extra="parquet") from None
    try:
        return pq.read_table(path).to_pylist()
    except Exception as e:  # pyarrow raises several unrelated types for a corrupt file
        raise DatasetError(f"not a readable Parquet file ({e})", path=str(path)) from None


def write_tasks(tasks: Iterable[Mapping[str, Any]], path: str | os.PathLike, *,
                format: str | None = None) -> Path:  # noqa: A002
    """Write decoded tasks as encoded rows; the format follows the suffix unless given."""
    path = Path(path)
    fmt = _format_of(path, format)
    rows = [encode_task(t) for t in tasks]
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    elif fmt == "json":
        path.write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    elif fmt == "csv":
        with open(path, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["prompt"])
            writer.writeheader()
            writer.writerows(rows)
    else:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise DependencyNotInstalled("pyarrow", extra="parquet") from None
        pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([("prompt", pa.string())])), path)
    return path


def parse_options(text: str | None) -> dict[str, Any]:
    """``"noise=1, distractors=false, label=hard"`` -> ``{"noise": 1, "distractors": False, "label": "hard"}``.

    Task options written on a command line: ints, floats, booleans, else text.
    """
    out: dict[str, Any] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"options must be KEY=VALUE pairs separated by commas "
                              f"(e.g. noise=1,distractors=true), got {part.strip()!r}")
        out[key.strip()] = _option_value(value.strip())
    return out


def _option_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
