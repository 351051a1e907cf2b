"""The SOP framework: :class:`SOPDomain` (what a domain provides) and :class:`SOPEnv` (the env that runs it).

A *domain* is a standard operating procedure (a markdown document shipped next to the
domain's code), a seeded world generator, tools over that world (read-only lookups, at
least one stateful action, some distractors), a reference procedure that computes the
expected final JSON object by applying the SOP's rules to the world, a scripted oracle
that reaches the same object through tool calls only, and the output schema.

:class:`SOPEnv` is a :class:`~mtrl_gym.envs.sandbox.ToolSandboxEnv` configured by a
domain, so parallel tool calls, argument validation, the tool-call budget, per-episode
state isolation and the ``info`` counters all come from the sandbox. A task is a world
seed plus difficulty knobs; the world, the prompt and the expected answer are regenerated
from them on every reset (a stale task row raises :class:`~mtrl_gym.error.InvalidTask`).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from mtrl_gym.envs.sandbox.env import ToolSandboxEnv
from mtrl_gym.envs.sandbox.final import FinalAnswer
from mtrl_gym.envs.sandbox.grading import Grade
from mtrl_gym.envs.sandbox.tools import ToolSet
from mtrl_gym.envs.sop.document import FrontMatter, read_document, sop_path
from mtrl_gym.envs.sop.grading import Field, GradeResult, check_expected, grade
from mtrl_gym.envs.sop.manual import complete_manual
from mtrl_gym.envs.sop.parts import package_parts
from mtrl_gym.envs.sop.task_text import render_task
from mtrl_gym.envs.sop.tasks import SPLITS
from mtrl_gym.error import ConfigError, InvalidTask

__all__ = ["SOPDomain", "SOPEnv", "RecordCheck", "NOISE_LEVELS", "canonical"]

#: Allowed values of the ``noise`` difficulty knob: 0 clean records, 1 some noise, 2 heavy noise.
NOISE_LEVELS = (0, 1, 2)

#: The fields of an SOP task row (:mod:`mtrl_gym.envs.sop.tasks`); a row with any other is refused.
TASK_ROW_FIELDS = ("id", "seed", "difficulty", "prompt", "answer")
_NAME_RE = re.compile(r"^[A-Z][A-Za-z0-9]{0,39}$")
_WORLD_CACHE = 64


def canonical(value: Any) -> str:
    """Canonical JSON text of a value (sorted keys): how expected answers and worlds are compared."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class RecordCheck:
    """The check of a domain's stateful action, declared instead of written: the world's list
    ``state[collection]`` must hold a record whose ``id_key`` is the answer's ``field`` and whose
    ``fields`` equal the answer's; when the answer's ``field`` is null, no record may exist.
    A failed check fails ``field`` (see :meth:`SOPDomain.state_errors`)."""

    field: str
    """The answer field that carries the id the stateful action returned."""
    collection: str
    """The key of the world's list of recorded records (cases, filings, registrations, ...)."""
    fields: tuple[str, ...] = ()
    """Answer fields the record must carry with the same name and value."""
    what: str = "record"
    """What a record is called in the failure reason."""
    id_key: str | None = None
    """The record's id key, when it is not named like ``field``."""

    def errors(self, state: Mapping[str, Any], expected: Mapping[str, Any]) -> dict[str, str]:
        records = state[self.collection]
        rid = expected[self.field]
        if rid is None:
            return {self.field: f"a {self.what} was recorded although the SOP records none"} if records else {}
        made = [r for r in records if r.get(self.id_key or self.field) == rid]
        if not made:
            return {self.field: f"no {self.what} {rid} was recorded"}
        wrong = [f"{k}={made[0].get(k)!r} (expected {expected[k]!r})" for k in self.fields
                 if canonical(made[0].get(k)) != canonical(expected[k])]
        return {self.field: f"the {self.what} was recorded with " + ", ".join(wrong)} if wrong else {}


class SOPDomain(ABC):
    """One SOP business domain. Subclass it, set the attributes and provide the three parts.

    A domain writes only what is its own: the SOP text, the output schema, the tools, the
    difficulty knobs with their limits, and three functions. A domain package names its
    modules in the class statement, ``class Parcels(SOPDomain, world=world, procedure=procedure,
    tools=tools)``, and the kit takes ``generate_world``, ``DEFAULT_DIFFICULTY``,
    ``DIFFICULTY_LIMITS``, ``expected``, ``oracle``, ``TOOLS`` and ``DISTRACTOR_TOOLS`` from
    them (:mod:`mtrl_gym.envs.sop.parts`); :attr:`name` defaults to the class name, and
    :attr:`role` and :attr:`request` to the SOP file's front matter
    (:mod:`mtrl_gym.envs.sop.document`). Anything set in the class body wins.
    ``task_inputs`` defaults to the world's ``"inputs"`` entry; ``state_errors`` to none.

    ``generate``, ``task_inputs`` and ``expected`` must be pure: every random draw from the
    given ``rng``, no mutation of the world (tools mutate a per-episode copy). Worlds are
    JSON-ready dicts. See docs/sop.md, "Adding a domain".
    """

    name: str = ""
    """CamelCase name: ``"DangerousGoods"`` gives the env id ``mtrl/SOP-DangerousGoods-v0``."""
    sop_file: str = "sop.md"
    """The SOP document, relative to the directory of the module that defines the subclass."""
    output_schema: Mapping[str, Field] = {}
    """The fields of the final JSON object, in the order they are shown to the model."""
    tools: ToolSet = ToolSet()
    """All tools: read-only lookups, at least one stateful action, and the distractors."""
    distractor_tools: tuple[str, ...] = ()
    """Names of tools the SOP never needs (hidden when ``difficulty["distractors"]`` is false)."""
    default_difficulty: Mapping[str, Any] = {"noise": 1, "distractors": True}
    """The difficulty knobs and their defaults; overrides must keep each knob's type."""
    difficulty_limits: Mapping[str, tuple[int, int]] = {}
    """Inclusive ``(low, high)`` ranges of the integer knobs (``noise`` is always ``(0, 2)``): checked
    on every override, so a domain writes no range checks of its own."""
    role: str = FrontMatter("role", "You are an operations agent. Follow the standard operating procedure (SOP) "
                                    "below exactly.")
    """The first paragraph of the system prompt (default: the SOP's front matter ``role``)."""
    request: str = FrontMatter("request", "Handle the case below by following the SOP, then submit the final JSON "
                                          "object.")
    """The sentence above the task inputs in the first observation (default: the front matter ``request``)."""
    max_tool_calls: int = 30
    """The env's default tool-call budget (the final answer does not count)."""
    record_check: RecordCheck | None = None
    """The declared check of the stateful action (used by the default :meth:`state_errors`)."""

    def __init_subclass__(cls, *, world: ModuleType | None = None, procedure: ModuleType | None = None,
                          tools: ModuleType | None = None, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if not cls.name:
            cls.name = cls.__name__
        for attr, value in package_parts(cls, {"world": world, "procedure": procedure, "tools": tools}).items():
            setattr(cls, attr, value)

    # ------------------------------------------------------------------ to implement

    @abstractmethod
    def generate(self, rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
        """The world of one task: entities, records and counters (JSON-ready), drawn from ``rng`` only."""

    def task_inputs(self, world: Mapping[str, Any]) -> dict[str, Any]:
        """What the task prompt shows (ids, the request): never the label or anything it can be read from.

        The default is a copy of ``world["inputs"]``: a generator that keeps the prompt's
        inputs there needs no override.
        """
        return dict(world["inputs"])

    @abstractmethod
    def expected(self, world: Mapping[str, Any]) -> dict[str, Any]:
        """The reference procedure: the expected final object, by applying the SOP's rules to the world."""

    @abstractmethod
    def oracle(self, inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
        """A scripted agent: follows the SOP using only ``inputs`` and ``call(tool, arguments)`` results.

        ``call`` returns the decoded tool result and raises :class:`ToolError` when the
        tool answers with an error. The return value is submitted as the final answer.
        """

    # ------------------------------------------------------------------ optional hooks

    def check_difficulty(self, difficulty: Mapping[str, Any]) -> None:
        """Raise :class:`ConfigError` for knob combinations the domain cannot build (types, ``noise``
        and :attr:`difficulty_limits` are already checked); the default accepts all."""

    def state_errors(self, state: Any, expected: Mapping[str, Any]) -> dict[str, str]:
        """Output fields the final world state contradicts, with the reason (default: none).

        Use it when a stateful action must have been taken with the right values (a case
        filed with the submitted classification): the named fields then score 0. The default
        applies :attr:`record_check` (none: no state check).
        """
        return {} if self.record_check is None else self.record_check.errors(state, expected)

    # ------------------------------------------------------------------ provided

    @property
    def env_id(self) -> str:
        """``mtrl/SOP-<name>-v0``."""
        return f"mtrl/SOP-{self.name}-v0"

    @property
    def slug(self) -> str:
        """The name in kebab case, for task ids: ``DangerousGoods`` -> ``dangerous-goods``."""
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", self.name).lower()

    @functools.cached_property
    def sop_text(self) -> str:
        """The SOP document (markdown), without its front matter."""
        return self._sop_document[1]

    @functools.cached_property
    def sop_front_matter(self) -> dict[str, str]:
        """The SOP file's front matter (``{}`` for a domain that sets :attr:`sop_text` itself and has no file)."""
        if type(self).sop_text is not SOPDomain.__dict__["sop_text"]:
            try:
                sop_path(type(self), self.sop_file, SOPDomain)
            except ConfigError:
                return {}
        return self._sop_document[0]

    @functools.cached_property
    def _sop_document(self) -> tuple[dict[str, str], str]:
        path = sop_path(type(self), self.sop_file, SOPDomain)
        return read_document(path.read_text(encoding="utf-8"), where=str(path))

    def core_tools(self) -> ToolSet:
        """The tools without the distractors."""
        return ToolSet([t for name, t in self.tools.items() if name not in self.distractor_tools])

    def resolve_difficulty(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``default_difficulty`` updated with ``overrides``; unknown knobs and wrong types raise."""
        overrides = dict(overrides or {})
        merged = dict(self.default_difficulty)
        for key, value in overrides.items():
            if key not in merged:
                close = difflib.get_close_matches(str(key), list(merged), n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown difficulty knob {key!r} for {self.name}.{hint} Its knobs are "
                                  f"{sorted(merged)}")
            default = merged[key]
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool)
            elif isinstance(default, float):
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            else:
                ok = isinstance(value, type(default))
            if not ok:
                raise ConfigError(f"difficulty knob {key!r} of {self.name} must be of type {type(default).__name__} "
                                  f"(like its default {default!r}), got {value!r}")
            merged[key] = value
        self._check_limits(merged)
        self.check_difficulty(merged)
        return merged

    def _check_limits(self, difficulty: Mapping[str, Any]) -> None:
        if "noise" in difficulty and difficulty["noise"] not in NOISE_LEVELS:
            raise ConfigError(f"difficulty knob 'noise' must be one of {NOISE_LEVELS}, got {difficulty['noise']!r}")
        for key, (low, high) in self.difficulty_limits.items():
            if key in difficulty and not low <= difficulty[key] <= high:
                raise ConfigError(f"difficulty knob {key!r} of {self.name} must be between {low} and {high}, "
                                  f"got {difficulty[key]!r}")

    def world(self, seed: int, difficulty: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The world of ``seed`` under ``difficulty`` (resolved over the defaults)."""
        return self.generate(np.random.default_rng(seed), self.resolve_difficulty(difficulty))

    def render_task(self, inputs: Mapping[str, Any]) -> str:
        """The first observation: :attr:`request` and the inputs as a JSON block."""
        return render_task(self.request, inputs)

    def answer_format(self) -> str:
        """The system prompt's section on the final answer: every field, its type and meaning."""
        lines = ["## Final answer",
                 "Submit one JSON object with exactly these keys (no others):"]
        for name, spec in self.output_schema.items():
            lines.append(f'- "{name}": {spec.describe()}' + (f". {spec.description}" if spec.description else ""))
        lines.append("Write enumeration values as listed (case and extra spaces do not matter), numbers as JSON "
                     "numbers, true/false as JSON booleans and lists as JSON arrays; use null only where a field "
                     "allows it. Every field is graded exactly; the task succeeds only if all are right.")
        return "\n".join(lines)

    def system_text(self) -> str:
        """The domain part of the system prompt: :attr:`role`, the SOP, the answer format."""
        return f"{self.role.strip()}\n\n{self.sop_text.strip()}\n\n{self.answer_format()}"

    def validate(self) -> None:
        """Check the domain's configuration; raise :class:`ConfigError` naming the problem."""
        who = type(self).__name__
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ConfigError(f"{who}.name must be a CamelCase name like 'DangerousGoods', got {self.name!r}")
        if not isinstance(self.output_schema, Mapping) or not self.output_schema or \
                not all(isinstance(f, Field) for f in self.output_schema.values()):
            raise ConfigError(f"{who}.output_schema must be a non-empty mapping of field name -> Field")
        if not isinstance(self.tools, ToolSet) or not self.tools:
            raise ConfigError(f"{who}.tools must be a non-empty ToolSet")
        unknown = [n for n in self.distractor_tools if n not in self.tools]
        if unknown:
            raise ConfigError(f"{who}.distractor_tools names tools that are not in `tools`: {unknown}; the tools "
                              f"are {list(self.tools)}")
        if not self.core_tools():
            raise ConfigError(f"{who}: every tool is a distractor; the SOP needs at least one")
        try:
            json.dumps(dict(self.default_difficulty))
        except (TypeError, ValueError):
            raise ConfigError(f"{who}.default_difficulty must be JSON-ready, got "
                              f"{self.default_difficulty!r}") from None
        for key, limits in self.difficulty_limits.items():
            default = self.default_difficulty.get(key)
            if isinstance(default, bool) or not isinstance(default, int) or not (
                    isinstance(limits, tuple) and len(limits) == 2 and limits[0] <= limits[1]):
                raise ConfigError(f"{who}.difficulty_limits[{key!r}] must be a (low, high) range of an integer knob "
                                  f"of default_difficulty, got {limits!r} for the default {default!r}")
        self._check_limits(self.default_difficulty)
        self.check_difficulty(self.default_difficulty)



def _check_row_fields(row: Mapping[str, Any]) -> None:
    """The checks of an SOP row that need no domain: known fields, ``id``/``prompt`` text, the ``seed``."""
    task_id = row.get("id", "?")
    for key in row:
        if key not in TASK_ROW_FIELDS:
            close = difflib.get_close_matches(str(key), TASK_ROW_FIELDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidTask(f"task {task_id!r}: unknown field {key!r}{hint}; an SOP task row has the fields "
                              f"{', '.join(TASK_ROW_FIELDS)}")
    for key in ("id", "prompt"):
        if key in row and not isinstance(row[key], str):
            raise InvalidTask(f"task {task_id!r}: {key!r} must be a string, got {row[key]!r}")
    seed = row.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise InvalidTask(f"task {task_id!r}: 'seed' must be an int in [0, 2**63), got {seed!r}")
    difficulty = row.get("difficulty")
    if difficulty is not None and not isinstance(difficulty, Mapping):
        raise InvalidTask(f"task {task_id!r}: 'difficulty' must be an object, got {difficulty!r}")


def _check_row_difficulty(row: Mapping[str, Any], domain: SOPDomain) -> None:
    """A row's ``difficulty`` knobs: each known to ``domain``, of its type and within its limits."""
    try:
        domain.resolve_difficulty(row.get("difficulty") or {})
    except ConfigError as e:
        raise InvalidTask(f"task {row.get('id', '?')!r}: {e}") from None


class SOPEnv(ToolSandboxEnv):
    """A business task solved by following a standard operating procedure with tools.

    ## Description
    The base of the ``mtrl/SOP-*`` environments. The system prompt holds the domain's
    SOP (a markdown document: numbered steps, decision rules, thresholds, rules for
    missing data), the final-answer format and how to call tools; the first observation
    holds the task inputs (ids and the request, never the label). The agent looks records
    up with read-only tools, takes the SOP's stateful action (file a case, ...), and
    submits one JSON object that is graded field by field against the reference
    procedure's answer (:mod:`mtrl_gym.envs.sop.grading`). Worlds are generated from a
    seed, so tasks are unlimited, reproducible, and correct by construction.

    ## Action Space
    ``Text``: the model's raw assistant message; any string is accepted.

    ## Action Format
    As :class:`~mtrl_gym.envs.sandbox.ToolSandboxEnv`: ``<tool_call>{"name": ...,
    "arguments": {...}}</tool_call>`` (several per message run in order), bare JSON or
    ``name(arg=...)``. The final answer is ``submit(answer={...})`` or
    ``<final_answer>{...}</final_answer>``; any value ends the episode.

    ## Observation Space
    ``Text``. At reset: the request and the task inputs as a JSON block. After a step: the
    tool results (JSON records or ``Error: ...``), then notes (calls left, the verdict).

    ## Invalid Actions
    As the sandbox: no call, bad arguments, unknown tools, hidden distractors and
    :class:`ToolError` (unknown ids, refused actions) are tool results the model reads;
    nothing raises. A final answer that is not a JSON object ends the episode with
    reward 0 and ``info["answer_error"] = "not_an_object"``.

    ## Starting State
    ``options={"task": row}`` with ``seed`` (and optionally ``difficulty``, ``prompt``,
    ``answer``, ``id``: a row whose ``prompt`` or ``answer`` differs from the regenerated
    ones raises :class:`InvalidTask` naming the task id), or a world seed drawn with
    ``self.np_random`` from the ``split``'s seed range (:data:`SPLITS`).

    ## Rewards
    Strict outcome, on the final step: 1.0 when every field is right and there are no
    extra keys (and the domain's state checks hold), else 0.0; 0 without a final answer.
    :class:`~mtrl_gym.wrappers.FieldReward` gives the dense per-field reward.

    ## Episode End
    ``terminated`` on a final answer or when a call would exceed ``max_tool_calls``;
    ``truncated`` after ``max_turns`` steps without an answer.

    ## Information
    As the sandbox (``tool_calls``, ``tool_results``, ``tool_outcomes``, counters, ...),
    plus every step ``num_distractor_calls`` (calls this step to tools the SOP never
    needs). On the final step: ``answer`` (the expected object), ``submitted_answer``,
    ``grade`` (``score`` is the strict reward; ``details["field_score"]``), ``success``,
    ``end_reason``, ``grade_result`` (:meth:`GradeResult.to_dict`: ``exact``, ``score``,
    ``fields``, ``errors``, ``extra_keys``) and ``answer_error`` (None, ``"missing"`` or
    ``"not_an_object"``).

    ## Arguments
    ``gymnasium.make("mtrl/SOP-DangerousGoods-v0", difficulty={"noise": 2}, split="val")``.

    - ``domain``: the :class:`SOPDomain` (default: the class attribute ``domain``).
    - ``difficulty``: knob overrides over the domain's ``default_difficulty``; a task
      row's ``difficulty`` overrides these for that task.
    - ``split``: ``"train"`` or ``"val"``: the seed range sampled tasks come from.
    - ``tasks``: task rows or a task file (made by ``mtrl-gym make-dataset``).
    - ``max_tool_calls`` (the domain's, 30 by default), ``max_turns`` (``max_tool_calls + 10``),
      ``max_result_chars`` (4000), ``tool_exceptions``, ``render_mode``: as the sandbox.

    ## Version History
    - v0: initial version.
    """

    domain: SOPDomain | None = None
    """The domain this env class runs (subclasses set it)."""

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        # a domain env's manual gets the sections every SOP env shares (mtrl_gym.envs.sop.manual)
        if isinstance(vars(cls).get("domain"), SOPDomain) and "## Description" in (cls.__doc__ or ""):
            cls.__doc__ = complete_manual(cls.__doc__, cls.domain)

    @classmethod
    def profile(cls):
        """Splits, the oracle policy and the success threshold (:mod:`mtrl_gym.envs.sop.profile`)."""
        from mtrl_gym.envs.sop.profile import sop_profile

        return sop_profile(cls)
    task_fields = ("seed",)

    def __init__(self, domain: SOPDomain | None = None, *, difficulty: Mapping[str, Any] | None = None,
                 split: str = "train", tasks: str | Sequence[Mapping[str, Any]] | None = None,
                 max_tool_calls: int | None = None, max_turns: int | None = None, max_result_chars: int = 4000,
                 tool_exceptions: str = "raise", render_mode: str | None = None):
        domain = domain if domain is not None else type(self).domain
        if not isinstance(domain, SOPDomain):
            raise ConfigError(f"{type(self).__name__} needs an SOPDomain (the `domain` argument or class "
                              f"attribute), got {domain!r}")
        domain.validate()
        if split not in SPLITS:
            raise ConfigError(f"`split` must be one of {sorted(SPLITS)}, got {split!r}")
        self.domain, self.split = domain, split
        self.difficulty = domain.resolve_difficulty(difficulty)
        self.output_schema = dict(domain.output_schema)
        self._all_tools, self._core_tools = domain.tools, domain.core_tools()
        self._distractors = frozenset(domain.distractor_tools)
        self._worlds: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._result: GradeResult | None = None
        self._pristine: dict[str, Any] | None = None
        calls = domain.max_tool_calls if max_tool_calls is None else max_tool_calls
        if max_turns is None:  # room for one call per turn, the answer, and some slack
            max_turns = calls + 10 if isinstance(calls, int) and not isinstance(calls, bool) else 30
        final = FinalAnswer(schema={}, answer_description="The final JSON object, with exactly the keys of the "
                                                          "answer format: " + ", ".join(self.output_schema) + ".")
        super().__init__(tools=list(domain.tools.values()), tasks=tasks, system_prompt=domain.system_text(),
                         final_answer=final, mode="live", max_tool_calls=calls,
                         max_turns=max_turns,
                         max_result_chars=max_result_chars, tool_exceptions=tool_exceptions, render_mode=render_mode)
        self._use_tools(bool(self.difficulty.get("distractors", True)))

    # ---------------------------------------------------------------- sandbox hooks

    def build_system_prompt(self) -> str:
        # The base names the first tool in its call example; make it one the SOP uses.
        first = self.tools
        self.tools = self._core_tools
        try:
            return super().build_system_prompt()
        finally:
            self.tools = first

    @classmethod
    def validate_task(cls, task: Mapping[str, Any]) -> None:
        """Raise :class:`InvalidTask` for a row ``reset`` would refuse, field by field (so task-file
        readers report it with file and line): only the fields of :data:`TASK_ROW_FIELDS` (a misspelt
        one is named with the closest), ``id`` text, ``seed`` an int in ``[0, 2**63)``, ``difficulty``
        an object of the domain's knobs (names, types, limits), ``prompt`` text, ``answer`` an object
        with the keys of the domain's answer format."""
        from mtrl_gym.datasets import decode_task

        super().validate_task(task)
        row = decode_task(task, required=cls.task_fields)
        _check_row_fields(row)
        if isinstance(cls.domain, SOPDomain):
            _check_row_difficulty(row, cls.domain)
            answer, keys = row.get("answer"), list(cls.domain.output_schema)
            if "answer" in row and (not isinstance(answer, Mapping) or sorted(answer) != sorted(keys)):
                got = sorted(answer) if isinstance(answer, Mapping) else type(answer).__name__
                raise InvalidTask(f"task {row.get('id', '?')!r}: 'answer' must be an object with the keys "
                                  f"{sorted(keys)} of {cls.domain.name}'s answer format, got {got}")

    def sample_task(self, rng: np.random.Generator) -> dict[str, Any]:
        low, high = SPLITS[self.split]
        seed = int(rng.integers(low, high))
        # The id is a draw of its own: it says nothing about the world seed, from which anyone
        # reading ``info`` could regenerate the world and its expected answer.
        tag = int(rng.integers(2**63))
        return {"id": f"sop-{self.domain.slug}-{self.split}-{tag:016x}", "seed": seed,
                "difficulty": dict(self.difficulty)}

    def make_state(self, task: Mapping[str, Any], seed: int) -> dict[str, Any]:
        """Regenerate the world from the row's ``seed`` and ``difficulty``, check the row against it,
        and complete the row (``prompt``, ``answer``, ``difficulty``) for the base class."""
        task_id = task.get("id", "?")
        _check_row_fields(task)
        world_seed = task.get("seed")
        row_difficulty = task.get("difficulty") or {}
        try:
            difficulty = self.domain.resolve_difficulty({**self.difficulty, **row_difficulty})
        except ConfigError as e:
            raise InvalidTask(f"task {task_id!r}: {e}") from None
        world = self._world(world_seed, difficulty)
        self._pristine = world
        expected = self.domain.expected(world)
        problems = check_expected(expected, self.output_schema)
        if problems:
            raise InvalidTask(f"task {task_id!r}: the reference procedure of {self.domain.name} returned an answer "
                              f"that does not fit its output schema ({'; '.join(problems)}); this is a bug in the "
                              "domain")
        prompt = self.domain.render_task(self.domain.task_inputs(world))
        stale = [k for k, v in (("answer", canonical(expected)), ("prompt", prompt))
                 if k in task and (canonical(task[k]) if k == "answer" else task[k]) != v]
        if stale:
            raise InvalidTask(f"task {task_id!r}: its {' and '.join(stale)} differ(s) from what seed {world_seed} "
                              f"generates now; the task file was made by another version of the {self.domain.name} "
                              "generator: regenerate it with `mtrl-gym make-dataset`")
        # The row is the base class's private deep copy: completing it here is what puts the
        # expected answer into info["answer"] on the final step and the prompt into reset().
        task = task if isinstance(task, dict) else dict(task)
        task.update(prompt=prompt, answer=expected, difficulty=difficulty)
        self._use_tools(bool(difficulty.get("distractors", True)))
        self._result = None
        return world

    def instruction(self, task: Mapping[str, Any]) -> str:
        return task["prompt"]

    def grade(self, answer: Any, task: Mapping[str, Any], state: Any) -> Grade:
        result = grade(answer, task["answer"], self.output_schema)
        if isinstance(answer, Mapping):
            result = self._apply_state_errors(result, self.domain.state_errors(state, task["answer"]))
        self._result = result
        details = {"field_score": result.score}
        return Grade.correct(result.summary(), **details) if result.exact else \
            Grade.wrong(result.summary(), score=0.0, **details)

    def step(self, action: str):
        obs, reward, terminated, truncated, info = super().step(action)
        info["num_distractor_calls"] = sum(o["name"] in self._distractors and o["status"] not in ("ignored", "limit", "unknown_tool")
                                           for o in info["tool_outcomes"])
        if terminated or truncated:
            if not info["submitted"]:
                result, error = GradeResult.failed(self.output_schema, "no final answer"), "missing"
            else:
                result = self._result
                error = None if isinstance(info["submitted_answer"], Mapping) else "not_an_object"
            info["grade_result"], info["answer_error"] = result.to_dict(), error
        return obs, reward, terminated, truncated, info

    # ---------------------------------------------------------------- helpers

    @property
    def expected_answer(self) -> dict[str, Any]:
        """The current task's expected object (for tests; never show it to the agent)."""
        return self.task["answer"]

    @property
    def initial_world(self) -> dict[str, Any] | None:
        """The current task's world as generated, before any tool call (shared: do not mutate it).

        Compare it with :attr:`state` to see what the episode's actions changed.
        """
        return self._pristine

    def _world(self, seed: int, difficulty: Mapping[str, Any]) -> dict[str, Any]:
        """The pristine world, cached (the base class deep-copies it for the episode)."""
        key = f"{seed}|{canonical(difficulty)}"
        world = self._worlds.get(key)
        if world is None:
            world = self.domain.generate(np.random.default_rng(seed), difficulty)
            self._worlds[key] = world
            if len(self._worlds) > _WORLD_CACHE:
                self._worlds.popitem(last=False)
        else:
            self._worlds.move_to_end(key)
        return world

    def _use_tools(self, distractors: bool) -> None:
        tools = self._all_tools if distractors else self._core_tools
        if self.tools is not tools:
            self.tools = tools
            self.tool_schemas = [*tools.schemas, *filter(None, [self.final_answer.tool_schema])]

    def _apply_state_errors(self, result: GradeResult, problems: Mapping[str, str]) -> GradeResult:
        if not problems:
            return result
        unknown = [k for k in problems if k not in self.output_schema]
        if unknown:
            raise ConfigError(f"{self.domain.name}.state_errors named field(s) {unknown} that are not in the output "
                              f"schema {list(self.output_schema)}")
        fields, errors = dict(result.fields), dict(result.errors)
        for name, why in problems.items():
            fields[name] = 0.0
            errors.setdefault(name, why)
        score = sum(fields.values()) / (len(fields) + len(result.extra_keys))
        return GradeResult(False, score, fields, errors, result.extra_keys)
