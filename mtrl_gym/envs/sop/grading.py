"""Strict, per-field grading of an SOP task's final JSON answer.

An SOP domain declares its output as a schema, ``{field name: Field}``. :func:`grade`
compares a prediction with the expected object field by field and returns a
:class:`GradeResult`: ``exact`` (every field right and no extra keys: the bare env's
reward is 1.0 exactly then), per-field scores (the dense reward of
:class:`~mtrl_gym.wrappers.FieldReward`), the reason each wrong field failed, and the
extra keys.

Normalisation is documented and deliberately small (docs/sop.md, "Grading"):

* ``int`` and ``float`` fields compare JSON numbers by value (``3 == 3.0``); a numeric
  string such as ``"3"`` is a wrong type; a ``float`` field may declare an absolute
  ``tolerance`` (default 0: exact);
* ``enum`` fields compare case-insensitively after trimming and collapsing inner
  whitespace, and the value must be one of the allowed values (``"d"`` never matches
  ``"Class D"``: no substring matching);
* ``str`` fields compare after trimming, case-sensitively;
* ``bool`` fields accept only JSON ``true``/``false``;
* ``null`` matches only ``null`` (``"null"``, ``""``, ``"none"``, ``"N/A"`` do not), and only
  where the field is ``nullable``;
* ``list`` fields need a JSON array whose items have the item type; they compare as
  multisets unless ``ordered``; a list pasted as one string is a wrong type;
* a missing key scores 0; an extra key makes the answer inexact and counts as one more
  zero-score field in ``score`` (so ``score == 1.0`` exactly when ``exact``).

>>> schema = {"hazard_class": Field("enum", values=("Class A", "Class D")), "score": Field("int")}
>>> r = grade({"hazard_class": " class  d", "score": 7.0}, {"hazard_class": "Class D", "score": 7}, schema)
>>> r.exact, r.score
(True, 1.0)
>>> r = grade({"hazard_class": "d", "score": "7"}, {"hazard_class": "Class D", "score": 7}, schema)
>>> r.exact, r.score, r.errors["hazard_class"], r.errors["score"]
(False, 0.0, "not an allowed value: got 'd'", 'wrong type: got string, expected integer')
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mtrl_gym.error import ConfigError, InvalidTask

__all__ = ["Field", "GradeResult", "grade", "check_expected", "normalize_enum", "FIELD_TYPES", "ITEM_TYPES"]

#: ``Field.type`` values.
FIELD_TYPES = ("enum", "int", "float", "bool", "str", "list")
#: ``Field.item_type`` values for ``list`` fields.
ITEM_TYPES = ("enum", "int", "float", "bool", "str")
_JSON_NAMES = {"enum": "string", "str": "string", "int": "integer", "float": "number", "bool": "boolean",
               "list": "array"}
_REPR_LIMIT = 60


def normalize_enum(text: str) -> str:
    """How enumeration values compare: trimmed, inner whitespace collapsed, case-folded.

    >>> normalize_enum("  Class   D ") == normalize_enum("class d")
    True
    """
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class Field:
    """One field of an SOP domain's output object."""

    type: str
    """``"enum"``, ``"int"``, ``"float"``, ``"bool"``, ``"str"`` or ``"list"``."""
    values: tuple[str, ...] = ()
    """Allowed values of an ``enum`` field (or of ``enum`` list items)."""
    item_type: str | None = None
    """For ``list`` fields: the type of the items (one of :data:`ITEM_TYPES`)."""
    ordered: bool = False
    """For ``list`` fields: the order of the items matters (default: compared as multisets)."""
    nullable: bool = False
    """The expected value may be JSON null (and then only null matches it)."""
    tolerance: float = 0.0
    """For ``float`` fields: the absolute tolerance (default 0, exact)."""
    description: str = ""
    """What the field means (shown to the model in the answer format)."""

    def __post_init__(self) -> None:
        if self.type not in FIELD_TYPES:
            raise ConfigError(f"Field type must be one of {FIELD_TYPES}, got {self.type!r}")
        if not isinstance(self.values, tuple) or not all(isinstance(v, str) and v.strip() for v in self.values):
            raise ConfigError(f"Field `values` must be a tuple of non-empty strings, got {self.values!r}")
        enum_like = self.type == "enum" or (self.type == "list" and self.item_type == "enum")
        if enum_like and not self.values:
            raise ConfigError("an enum Field (or a list of enum items) needs `values`, the allowed values")
        if not enum_like and self.values:
            raise ConfigError(f"`values` is only for enum fields and lists of enums, got a {self.type!r} "
                              f"field with values {self.values!r}")
        keys = [normalize_enum(v) for v in self.values]
        if len(set(keys)) != len(keys):
            raise ConfigError(f"Field `values` must differ after normalisation (case, whitespace), got {self.values!r}")
        if self.type == "list":
            if self.item_type not in ITEM_TYPES:
                raise ConfigError(f"a list Field needs `item_type` in {ITEM_TYPES}, got {self.item_type!r}")
        elif self.item_type is not None or self.ordered:
            raise ConfigError(f"`item_type` and `ordered` are only for list fields, got a {self.type!r} field")
        if isinstance(self.tolerance, bool) or not isinstance(self.tolerance, (int, float)) \
                or not math.isfinite(self.tolerance) or self.tolerance < 0:
            raise ConfigError(f"Field `tolerance` must be a finite number >= 0, got {self.tolerance!r}")
        if self.tolerance and self.type != "float":
            raise ConfigError(f"`tolerance` is only for float fields, got a {self.type!r} field with "
                              f"tolerance {self.tolerance}")

    def json_schema(self) -> dict[str, Any]:
        """The field as a JSON schema (for tool schemas and documentation)."""
        if self.type == "list":
            item = Field(self.item_type, values=self.values)  # type: ignore[arg-type]
            out: dict[str, Any] = {"type": "array", "items": item.json_schema()}
        else:
            out = {"type": _JSON_NAMES[self.type]}
            if self.type == "enum":
                out["enum"] = list(self.values)
        if self.nullable:
            out = {"anyOf": [out, {"type": "null"}]}
        if self.description:
            out["description"] = self.description
        return out

    def describe(self) -> str:
        """A short type description for the model: ``one of "Class A", "Class D"``, ``integer``, ..."""
        if self.type == "enum":
            text = "one of " + ", ".join(f'"{v}"' for v in self.values)
        elif self.type == "list":
            items = Field(self.item_type, values=self.values).describe()  # type: ignore[arg-type]
            text = f"{'ordered ' if self.ordered else ''}list of ({items})"
        elif self.type == "float" and self.tolerance:
            text = f"number (within {self.tolerance:g})"
        else:
            text = {"int": "integer", "float": "number", "bool": "true or false", "str": "string"}[self.type]
        return text + (", or null" if self.nullable else "")


@dataclass(frozen=True)
class GradeResult:
    """The per-field comparison of a prediction with the expected object."""

    exact: bool
    """Every field right and no extra keys (the strict outcome)."""
    score: float
    """Mean of the field scores in [0, 1]; each extra key counts as one more field scoring 0."""
    fields: dict[str, float]
    """Score of each schema field, in schema order: 0 or 1 (lists: multiset Jaccard overlap)."""
    errors: dict[str, str]
    """Why each failed field failed (``"missing"``, ``"wrong type: got string, expected integer"``, ...)
    and ``"extra key"`` for each key the schema does not have."""
    extra_keys: tuple[str, ...] = ()
    """Keys of the prediction that are not in the schema, sorted."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``info["grade_result"]`` holds)."""
        return {"exact": self.exact, "score": self.score, "fields": dict(self.fields), "errors": dict(self.errors),
                "extra_keys": list(self.extra_keys)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GradeResult:
        """The inverse of :meth:`to_dict`."""
        return cls(bool(data["exact"]), float(data["score"]), dict(data["fields"]), dict(data["errors"]),
                   tuple(data.get("extra_keys", ())))

    @classmethod
    def failed(cls, schema: Mapping[str, Field], reason: str) -> GradeResult:
        """Every field 0 for the same reason (no answer, not a JSON object)."""
        return cls(False, 0.0, {k: 0.0 for k in schema}, {k: reason for k in schema}, ())

    def summary(self) -> str:
        """One line for people and logs: ``exact match`` or the failed fields and why."""
        if self.exact:
            return "exact match"
        wrong = [f"{k!r} ({v})" for k, v in self.errors.items()]
        return f"{len(wrong)} problem(s): " + "; ".join(wrong)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_LIMIT else text[:_REPR_LIMIT - 3] + "..."


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar_problem(value: Any, ftype: str, values: tuple[str, ...]) -> str | None:
    """Why ``value`` cannot be a value of a scalar type (None when it can)."""
    if ftype in ("enum", "str"):
        ok = isinstance(value, str)
    elif ftype in ("int", "float"):
        ok = _is_number(value)
    else:
        ok = isinstance(value, bool)
    if not ok:
        want = {"int": "integer", "float": "number"}.get(ftype, _JSON_NAMES[ftype])
        return f"wrong type: got {_json_type(value)}, expected {want}"
    if ftype in ("int", "float") and not math.isfinite(value):
        return f"not a finite number: got {_short(value)}"
    if ftype == "enum" and normalize_enum(value) not in {normalize_enum(v) for v in values}:
        return f"not an allowed value: got {_short(value)}"
    return None


def _key(value: Any, ftype: str) -> Any:
    """The comparison key of a valid scalar value."""
    if ftype == "enum":
        return normalize_enum(value)
    if ftype == "str":
        return value.strip()
    if ftype in ("int", "float"):
        return ("num", float(value)) if not float(value).is_integer() else ("num", int(value))
    return ("bool", value)


def _grade_field(got: Any, want: Any, spec: Field) -> tuple[float, str | None]:
    """``(score, error)`` of one present field."""
    if want is None:
        return (1.0, None) if got is None else (0.0, f"expected null, got {_short(got)}")
    if got is None and spec.nullable:
        return 0.0, "wrong value: got null"
    if spec.type != "list":
        problem = _scalar_problem(got, spec.type, spec.values)
        if problem:
            return 0.0, problem
        if spec.type == "float":
            ok = abs(float(got) - float(want)) <= spec.tolerance
        else:
            ok = _key(got, spec.type) == _key(want, spec.type)
        return (1.0, None) if ok else (0.0, f"wrong value: got {_short(got)}")
    if not isinstance(got, list):
        return 0.0, f"wrong type: got {_json_type(got)}, expected array"
    for i, item in enumerate(got):
        problem = _scalar_problem(item, spec.item_type, spec.values)  # type: ignore[arg-type]
        if problem:
            return 0.0, f"item {i}: {problem}"
    got_keys = [_key(v, spec.item_type) for v in got]  # type: ignore[arg-type]
    want_keys = [_key(v, spec.item_type) for v in want]  # type: ignore[arg-type]
    if spec.ordered:
        if got_keys == want_keys:
            return 1.0, None
        same = sum(a == b for a, b in zip(got_keys, want_keys))
        return same / max(len(got_keys), len(want_keys)), "wrong items or order"
    a, b = Counter(got_keys), Counter(want_keys)
    if a == b:
        return 1.0, None
    union = sum((a | b).values())
    missing, unexpected = sum((b - a).values()), sum((a - b).values())
    return sum((a & b).values()) / union, f"{missing} item(s) missing, {unexpected} unexpected"


def grade(prediction: Any, expected: Mapping[str, Any], schema: Mapping[str, Field]) -> GradeResult:
    """Compare ``prediction`` with ``expected`` field by field under ``schema`` (module docstring).

    ``expected`` must satisfy the schema (:func:`check_expected`); the prediction may be
    anything. A prediction that is not a JSON object scores 0 on every field.
    """
    problems = check_expected(expected, schema)
    if problems:
        raise InvalidTask("the expected answer does not fit the output schema: " + "; ".join(problems))
    if not isinstance(prediction, Mapping):
        return GradeResult.failed(schema, f"the answer is not a JSON object (got {_json_type(prediction)})")
    fields: dict[str, float] = {}
    errors: dict[str, str] = {}
    for name, spec in schema.items():
        if name not in prediction:
            fields[name], errors[name] = 0.0, "missing"
            continue
        score, error = _grade_field(prediction[name], expected[name], spec)
        fields[name] = score
        if error is not None:
            errors[name] = error
    extra = tuple(sorted((str(k) for k in prediction if k not in schema)))
    for key in extra:
        errors[key] = "extra key"
    total = sum(fields.values()) / (len(fields) + len(extra)) if fields or extra else 1.0
    exact = not errors  # a field scores 1 only without an error, so score == 1.0 exactly when exact
    return GradeResult(exact, 1.0 if exact else total, fields, errors, extra)


def check_expected(expected: Any, schema: Mapping[str, Field]) -> list[str]:
    """Problems that keep ``expected`` from being a valid answer under ``schema`` (empty: valid)."""
    if not isinstance(expected, Mapping):
        return [f"the expected answer must be an object, got {_json_type(expected)}"]
    problems = [f"missing field {k!r}" for k in schema if k not in expected]
    problems += [f"field {k!r} is not in the schema" for k in expected if k not in schema]
    for name, spec in schema.items():
        if name not in expected:
            continue
        value = expected[name]
        if value is None:
            if not spec.nullable:
                problems.append(f"field {name!r} is null but not nullable")
            continue
        if spec.type == "list":
            if not isinstance(value, list):
                problems.append(f"field {name!r}: expected an array, got {_json_type(value)}")
                continue
            bad = [_scalar_problem(v, spec.item_type, spec.values) for v in value]  # type: ignore[arg-type]
            problems += [f"field {name!r}, item {i}: {p}" for i, p in enumerate(bad) if p]
        else:
            problem = _scalar_problem(value, spec.type, spec.values)
            if spec.type == "int" and problem is None and not float(value).is_integer():
                problem = f"not an integer: got {_short(value)}"
            if problem:
                problems.append(f"field {name!r}: {problem}")
    return problems
