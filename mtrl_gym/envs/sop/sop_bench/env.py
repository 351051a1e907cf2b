"""``SOPBenchEnv``: the rows of one official SOP-Bench domain as evaluation-only tool-use tasks.

The system prompt holds the benchmark's SOP and our answer format (one field per output
column); the first observation holds the row's input columns; tools are the benchmark's
own (:mod:`.worker`, in a separate process, dispatched as the official harness does). Calls
are as permissive as the official runtime: arguments pass unchanged, and what the spec's
schema would refuse (a ``pattern``, ``minLength``, ``enum``, a type) is only reported in
``info["schema_warnings"]``. Every tool reply is checked against the row's expected outputs
(``info["leaked_outputs"]``). The final answer is graded twice: with our strict grader (the
reward) and with the benchmark's own measure (``info["official_success"]``, see
:mod:`.official`).
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mtrl_gym.envs.sandbox.env import ToolSandboxEnv
from mtrl_gym.envs.sandbox.final import FinalAnswer
from mtrl_gym.envs.sandbox.grading import Grade
from mtrl_gym.envs.sandbox.tools import Tool, ToolError
from mtrl_gym.envs.sop.base import SOPDomain
from mtrl_gym.envs.sop.task_text import render_task
from mtrl_gym.envs.sop.grading import GradeResult, grade
from mtrl_gym.envs.sandbox.schema import validate_arguments
from mtrl_gym.envs.sop.sop_bench.data import LICENCE_TERMS, Benchmark, benchmark_tasks, load_benchmark
from mtrl_gym.envs.sop.sop_bench.official import official_match, official_success
from mtrl_gym.envs.sop.sop_bench.worker import ToolProcess
from mtrl_gym.error import ConfigError

__all__ = ["SOPBenchEnv", "official_match", "official_success", "leaks_in", "check_trainable", "EVALUATION_ONLY"]

EVALUATION_ONLY = "evaluation_only"
_ROLE = "You are an operations agent. Follow the standard operating procedure (SOP) below exactly."
_REQUEST = "Handle the case below by following the SOP, using the tools, then submit the final JSON object."


class _OfficialTool(Tool):
    """A benchmark tool that takes any argument object, as the official runtime does; what its schema
    would refuse is appended to ``warnings`` (the env's list) instead."""

    def __init__(self, fn, warnings: list[str], **kwargs: Any):
        super().__init__(fn, **kwargs)
        self._warnings = warnings

    def validate(self, arguments: Any) -> tuple[dict[str, Any], list[str]]:
        if not isinstance(arguments, Mapping):
            return super().validate(arguments)
        _, problems = validate_arguments(arguments, self.parameters)
        self._warnings.extend(f"{self.name}: {p}" for p in problems)
        return dict(arguments), []


def leaks_in(text: str, row: Mapping[str, Any]) -> list[str]:
    """Output columns whose expected value a tool reply hands over (values of 3+ characters that
    are not also one of the row's inputs)."""
    low = text.lower()
    inputs = {str(v).strip().lower() for v in row["inputs"].values() if v is not None}
    wanted = {c: str(v).strip().lower() for c, v in row["answer"].items() if v is not None}
    return [c for c, v in wanted.items() if len(v) >= 3 and v not in inputs and v in low]


def check_trainable(rows: Any) -> None:
    """Raise :class:`ConfigError` when task rows are evaluation-only SOP-Bench rows (call before training)."""
    for row in rows or ():
        if isinstance(row, Mapping) and row.get(EVALUATION_ONLY):
            raise ConfigError(f"task {row.get('id', '?')!r} comes from the official SOP-Bench data, which may be used "
                              f"for evaluation only. {LICENCE_TERMS} Train on the mtrl/SOP-* domains instead.")


class SOPBenchEnv(ToolSandboxEnv):
    """Evaluate an agent on one domain of the user's own SOP-Bench checkout (evaluation only).

    ## Description
    Each row of the domain's ``test_set_with_outputs.csv`` is one task: the system prompt
    holds the domain's ``sop.txt`` and the answer format (one field per output column of
    ``metadata.json``), the first observation the row's input columns, and the tools are
    the benchmark's ``tools.py`` (``toolspecs.json`` schemas), run in a separate process.
    The licence terms are printed when the domain is loaded.

    ## Action Space
    ``Text``: the model's raw assistant message; any string is accepted.

    ## Action Format
    As :class:`~mtrl_gym.envs.sop.SOPEnv`: tool calls, then ``submit(answer={...})`` or
    ``<final_answer>{...}</final_answer>``.

    ## Observation Space
    ``Text``: the request and the row's inputs as a JSON block; then tool results.

    ## Invalid Actions
    As the sandbox, except that arguments are not checked against the specs' schemas (the
    official runtime does not check them; ``info["schema_warnings"]`` says what a check would
    have refused); an exception inside the benchmark's tool manager is a ``tool_error``
    result holding the official error text.

    ## Starting State
    ``options={"task": row}`` (a row of :func:`benchmark_tasks`) or a row drawn from the
    domain's rows.

    ## Rewards
    Our strict grade on the final step: 1.0 when every output column is exactly right
    (:func:`~mtrl_gym.envs.sop.grade`), else 0.0.

    ## Episode End
    On a final answer, at the tool-call limit (30) or the turn limit (40).

    ## Information
    The sandbox keys, plus ``leaked_outputs`` (output columns a tool reply handed over this
    step), ``schema_warnings`` (what the tool specs' schemas would have refused in this step's
    calls; the calls ran anyway, as in the official runtime) and ``case_flags`` (the row's
    expected values the strict grader reads as null, with why). On the final step:
    ``answer``, ``grade_result``, ``answer_error``, ``official_success`` (the benchmark's own
    measure, :func:`~mtrl_gym.envs.sop.sop_bench.official.official_success`) and ``leak_seen``
    (some tool reply of the episode handed over an expected output).

    ## Arguments
    ``SOPBenchEnv(path, domain)``; ``purpose`` must be ``"evaluation"`` (anything else raises
    :class:`ConfigError`: the data's licence forbids training on it). Registered as
    ``mtrl/SOP-Bench-v0`` when :mod:`mtrl_gym.envs.sop.sop_bench` is imported.

    ## Version History
    - v0: initial version.
    """

    task_fields = ("inputs", "answer")
    evaluation_only = True
    """The tasks of this env are never training tasks."""

    @classmethod
    def profile(cls):
        """Evaluation only: no named splits (the rows come from the user's checkout), refused for training."""
        from mtrl_gym.envs.profile import EnvProfile

        return EnvProfile(evaluation_only=True, success_threshold=float(cls.success_threshold))

    def __init__(self, path: str | Path, domain: str, *, purpose: str = "evaluation", max_tool_calls: int = 30,
                 max_turns: int | None = None, tasks: Any = None, quiet: bool = False, render_mode: str | None = None):
        if purpose != "evaluation":
            raise ConfigError(f"SOP-Bench tasks are evaluation-only, got purpose={purpose!r}. {LICENCE_TERMS}")
        bench = load_benchmark(path, domain, quiet=quiet)
        self.benchmark: Benchmark = bench
        self.output_schema = bench.output_schema()
        self._process = ToolProcess(bench.folder, [s["name"] for s in bench.toolspecs])
        self._step_warnings: list[str] = []
        tools = [_OfficialTool(self._forwarder(s["name"]), self._step_warnings, name=s["name"],
                               description=s["description"], schema=s["parameters"], subprocess=True)
                 for s in bench.toolspecs]
        answer_format = SOPDomain.answer_format(types.SimpleNamespace(output_schema=self.output_schema))
        final = FinalAnswer(schema={}, answer_description="The final JSON object, with exactly the keys of the "
                                                          "answer format: " + ", ".join(self.output_schema) + ".")
        self._step_leaks: list[str] = []
        self._result: GradeResult | None = None
        super().__init__(tools=tools, tasks=tasks if tasks is not None else benchmark_tasks(bench),
                         system_prompt=f"{_ROLE}\n\n{bench.sop_text.strip()}\n\n{answer_format}", final_answer=final,
                         mode="live", max_tool_calls=max_tool_calls,
                         max_turns=max_turns if max_turns is not None else max_tool_calls + 10,
                         tool_exceptions="report", render_mode=render_mode)

    def _forwarder(self, name: str):
        def forward(**arguments: Any) -> Any:
            reply = self._process.call(name, arguments)
            if not reply.get("ok"):
                raise ToolError(str(reply.get("error")))
            self._step_leaks += leaks_in(json.dumps(reply["result"], ensure_ascii=False, default=str), self.task)
            return reply["result"]
        return forward

    def sample_task(self, rng) -> dict[str, Any]:
        rows = benchmark_tasks(self.benchmark)
        return rows[int(rng.integers(len(rows)))]

    def instruction(self, task: Mapping[str, Any]) -> str:
        return render_task(_REQUEST, task["inputs"])

    def grade(self, answer: Any, task: Mapping[str, Any], state: Any) -> Grade:
        result = grade(answer, task["answer"], self.output_schema)
        self._result = result
        self._official = official_success(answer, task["answer"], list(self.output_schema))
        return Grade.correct(result.summary(), field_score=result.score) if result.exact else \
            Grade.wrong(result.summary(), score=0.0, field_score=result.score)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._result, self._official, self._step_leaks, self._leaked = None, False, [], False
        obs, info = super().reset(seed=seed, options=options)
        info["case_flags"] = dict(self.task.get("flags") or {})
        return obs, info

    def step(self, action: str):
        self._step_leaks = []
        self._step_warnings.clear()
        obs, reward, terminated, truncated, info = super().step(action)
        info["leaked_outputs"] = sorted(set(self._step_leaks))
        info["schema_warnings"] = list(self._step_warnings)
        info["case_flags"] = dict(self.task.get("flags") or {})
        self._leaked = self._leaked or bool(self._step_leaks)
        if terminated or truncated:
            if not info["submitted"]:
                result, error = GradeResult.failed(self.output_schema, "no final answer"), "missing"
                self._official = False
            else:
                result = self._result
                error = None if isinstance(info["submitted_answer"], Mapping) else "not_an_object"
            info["grade_result"], info["answer_error"] = result.to_dict(), error
            info["official_success"] = bool(self._official)
            info["leak_seen"] = self._leaked
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._process.close()
        super().close()
