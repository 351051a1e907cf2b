"""``ToolSandboxEnv``: the base of every tool-sandbox environment (record-replay, stateful, graded)."""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from mtrl_gym.envs.sandbox.cassette import Cassette, ToolResponse
from mtrl_gym.envs.sandbox.final import CHARSET, FinalAnswer, clean_text
from mtrl_gym.envs.sandbox.grading import Grade, make_checker
from mtrl_gym.envs.sandbox.isolation import sandbox_guard, suspended
from mtrl_gym.envs.sandbox.tools import Tool, ToolContext, ToolError, ToolSet, render_result
from mtrl_gym.envs.spaces import TextSpace
from mtrl_gym.error import CassetteError, ConfigError, InvalidTask
from mtrl_gym.parsing import ParseResult, ToolCall, ToolCallParser

__all__ = ["ToolSandboxEnv", "MODES", "STATUSES", "ERROR_STATUSES", "MAX_OBSERVATION_CHARS", "MAX_ACTION_CHARS"]

#: ``mode`` values: the three cassette modes, and ``"live"`` (no cassette: recorded tools run for real).
MODES = ("replay", "record", "replay_or_record", "live")
#: ``info["tool_outcomes"][i]["status"]`` values.
STATUSES = ("ok", "final", "tool_error", "bad_arguments", "unknown_tool", "not_available", "refused",
            "exception", "limit", "ignored")
#: Statuses that count as a failed call in ``info["num_tool_errors"]``.
ERROR_STATUSES = frozenset({"tool_error", "bad_arguments", "unknown_tool", "not_available", "refused", "exception"})
MAX_OBSERVATION_CHARS = 65_536
MAX_ACTION_CHARS = 100_000

DEFAULT_PROMPT = "You are an assistant that completes the user's task by calling tools."
_CALL_HELP = ('Call a tool by writing <tool_call>{{"name": "{name}", "arguments": {{...}}}}</tool_call>. '
              "You may make several calls in one message; they run in order.")


class ToolSandboxEnv(gymnasium.Env[str, str]):
    """A task solved by calling sandboxed tools, ending with a graded final answer.

    ## Description
    The base class of tool-sandbox environments. A *domain* (a subclass, or constructor
    arguments) provides tools (:func:`~mtrl_gym.envs.sandbox.tool` functions), tasks,
    optionally a per-episode state built from a seed, and a grader. Tools are answered
    live, from a recorded cassette (``mode="replay"``), or recorded into one. Every tool
    call runs under a best-effort guard that refuses network access, writes outside the
    episode's temporary directory and new processes unless the tool declares them
    (:mod:`~mtrl_gym.envs.sandbox.isolation`).

    ## Action Space
    ``Text``: the model's raw assistant message; any string is accepted.

    ## Action Format
    Any tool-call format of :mod:`mtrl_gym.parsing` (``<tool_call>{json}</tool_call>``,
    bare JSON, ``name(arg=...)``). Several calls in one message all run, in order, and get
    one tool result each. The final answer is a ``submit(answer=...)`` call or a
    ``<final_answer>...</final_answer>`` block (:class:`FinalAnswer`); calls after it in the
    same message are not run.

    ## Invalid Actions
    Nothing the model writes raises. No tool call (``format_error``, ``error="no_tool_call"``),
    undecodable or schema-violating arguments (``bad_arguments``, also ``format_error``), an
    unknown tool (``unknown_tool``, with close names suggested), a :class:`ToolError`
    (``tool_error``), an unrecorded call in replay (``not_available``) and a guard refusal
    (``refused``) each produce an error tool result the model can read; the episode goes on.

    ## Observation Space
    ``Text`` over :data:`~mtrl_gym.envs.sandbox.final.CHARSET`. At reset: the task
    instruction. After a step: the contents of ``info["tool_results"]`` joined by newlines,
    then notes on new lines (calls left, the episode is over), so an agent loop can send
    the results as ``tool`` messages and the rest as a user message. Each result is cut
    to ``max_result_chars``; characters outside the charset are replaced.

    ## Starting State
    ``options={"task": row}`` pins the task; otherwise a row of ``tasks`` is drawn with
    ``self.np_random``, or :meth:`sample_task` generates one. The state is
    :meth:`make_state(task, seed) <make_state>` with ``seed = task["state_seed"]`` (or a
    digest of the task id), deep-copied, so every episode of a task starts from the same
    snapshot and no episode sees another's writes.

    ## Rewards
    Outcome only, on the final step: the grade's ``score`` in [0, 1] (0 without a final
    answer); 0 on other steps. Success is ``reward >= success_threshold`` (1.0). The grade
    comes from :meth:`grade` (a task ``checker`` spec, see
    :mod:`~mtrl_gym.envs.sandbox.grading`, or a domain grader); shaping is a wrapper's job.

    ## Episode End
    ``terminated`` on a final answer, or when a call would exceed ``max_tool_calls``
    (a failure: the call is not run). ``truncated`` after ``max_turns`` steps without an
    answer.

    ## Information
    At reset: ``system_prompt``, ``tools``, ``task_id``, ``tool_calls_used``,
    ``tool_calls_left``, ``turns_used``. Every step: ``tool_calls``, ``tool_results``
    (``{"tool_call_id", "name", "content"}``), ``tool_outcomes`` (per call:
    ``tool_call_id``, ``name``, ``status`` in :data:`STATUSES`, ``source`` of the result:
    ``"live"``, ``"cassette"``, ``"nearest"``, ``"missing"`` or None), ``format_error``,
    ``error`` (first error status of the step or ``"no_tool_call"``), ``num_tool_calls``,
    ``num_tool_errors``, ``num_unknown_tools``, ``num_bad_arguments``, ``num_refused``,
    ``num_not_available``, ``tool_calls_used``, ``tool_calls_left``, ``turns_used``,
    ``submitted``, ``message_truncated`` (the message was longer than the parser reads:
    calls past the cut were not seen), plus :meth:`step_facts`. On the final step only: ``answer`` (the
    expected answer, when the task has one), ``submitted_answer``, ``grade``
    (``{"score", "passed", "reason", "details"}``), ``success``, ``end_reason``
    (``"submitted"``, ``"tool_limit"``, ``"turn_limit"``).

    ## Arguments
    ``ToolSandboxEnv(tools=[...], tasks=[...], cassette="calls.jsonl", mode="replay")``; the
    registered examples are ``gymnasium.make("mtrl/Sandbox-Weather-v0")``,
    ``"mtrl/Sandbox-Orders-v0"`` and ``"mtrl/Sandbox-Shop-v0"``.

    - ``tools``, ``system_prompt``, ``final_answer``: override the class's ``tools``,
      ``domain_prompt`` and ``final_answer``.
    - ``tasks``: task rows (dicts or encoded rows) or a task file (:mod:`mtrl_gym.datasets`).
    - ``state_factory(task, seed) -> state`` and ``grader(answer, task, state) -> Grade``:
      for envs built without subclassing.
    - ``cassette``: a path or a :class:`Cassette` (a row's ``cassette`` field overrides it).
    - ``mode``: ``"replay"`` (default), ``"record"``, ``"replay_or_record"`` or ``"live"``.
    - ``on_missing``: unrecorded calls in replay: ``"error"``, ``"nearest"``, ``"strict"``.
    - ``max_tool_calls`` (20), ``max_turns`` (30), ``max_result_chars`` (4000).
    - ``tool_exceptions``: ``"raise"`` (default; a bug in a tool propagates) or
      ``"report"`` (becomes an ``exception`` tool result).

    ## Version History
    - v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}
    success_threshold = 1.0
    reward_range = (0.0, 1.0)

    # Domain configuration: subclasses set these (constructor arguments override them).
    tools: ToolSet | Sequence[Tool] = ()
    """The domain's tools (the submit tool is added from :attr:`final_answer`)."""
    domain_prompt: str = DEFAULT_PROMPT
    """The domain's part of the system prompt; call and answer instructions are appended."""
    final_answer: FinalAnswer = FinalAnswer()
    """How the model gives its final answer, and the answer's schema."""
    task_fields: tuple[str, ...] = ("prompt",)
    """Fields every task row must have."""
    default_cassette: str | os.PathLike | None = None
    """Cassette used when neither the constructor nor the task names one."""
    copy_state: bool = True
    """Deep-copy the state :meth:`make_state` returns (protects cached snapshots)."""

    def __init__(self, *, tools: Sequence[Tool | Callable[..., Any]] | None = None,
                 tasks: str | os.PathLike | Sequence[Mapping[str, Any]] | None = None,
                 system_prompt: str | None = None, final_answer: FinalAnswer | None = None,
                 state_factory: Callable[[Mapping[str, Any], int], Any] | None = None,
                 grader: Callable[[Any, Mapping[str, Any], Any], Grade] | None = None,
                 cassette: str | os.PathLike | Cassette | None = None, mode: str | None = None,
                 on_missing: str | None = None, max_tool_calls: int = 20, max_turns: int = 30,
                 max_result_chars: int = 4000, tool_exceptions: str = "raise", render_mode: str | None = None):
        _check_int("max_tool_calls", max_tool_calls, 1)
        _check_int("max_turns", max_turns, 1)
        _check_int("max_result_chars", max_result_chars, 100)
        if mode is not None and mode not in MODES:
            raise ConfigError(f"`mode` must be one of {MODES}, got {mode!r}")
        if isinstance(cassette, Cassette) and mode not in (None, cassette.mode):
            raise ConfigError(f"`mode` is {mode!r} but the given Cassette has mode {cassette.mode!r}; "
                              "set the mode on the Cassette (or pass a path)")
        if on_missing is not None and on_missing not in ("error", "nearest", "strict"):
            raise ConfigError(f'`on_missing` must be "error", "nearest" or "strict", got {on_missing!r}')
        if isinstance(cassette, Cassette) and on_missing not in (None, cassette.on_missing):
            raise ConfigError(f"`on_missing` is {on_missing!r} but the given Cassette has on_missing "
                              f"{cassette.on_missing!r}; set it on the Cassette (or pass a path)")
        if tool_exceptions not in ("raise", "report"):
            raise ConfigError(f'`tool_exceptions` must be "raise" or "report", got {tool_exceptions!r}')
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"`render_mode` must be one of {self.metadata['render_modes']} or None, "
                              f"got {render_mode!r}")
        self.tools = ToolSet(tools if tools is not None else type(self).tools)
        self.final_answer = final_answer or type(self).final_answer
        if self.final_answer.call_name in self.tools:
            raise ConfigError(f"a tool is named {self.final_answer.call_name!r} like the final-answer tool; "
                              "rename it or set FinalAnswer(tool=...)")
        self.domain_prompt = system_prompt if system_prompt is not None else type(self).domain_prompt
        self._state_factory, self._grader = state_factory, grader
        self.mode = mode or (cassette.mode if isinstance(cassette, Cassette) else "replay")
        self.on_missing = on_missing or (cassette.on_missing if isinstance(cassette, Cassette) else "error")
        self._cassette_arg = cassette
        self._cassettes: dict[str, Cassette] = {}
        self.max_tool_calls, self.max_turns = int(max_tool_calls), int(max_turns)
        self.max_result_chars = int(max_result_chars)
        self.tool_exceptions = tool_exceptions
        self.render_mode = render_mode
        self._tasks = self._load_tasks(tasks)
        self.tool_schemas = [*self.tools.schemas, *filter(None, [self.final_answer.tool_schema])]
        self._parser = ToolCallParser(self.tool_schemas, tags=self.final_answer.parser_tags())
        self.system_prompt = self.build_system_prompt()
        # TextSpace: observations stay current in async vector envs (see mtrl_gym.envs.spaces).
        self.observation_space = TextSpace(MAX_OBSERVATION_CHARS, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=CHARSET)
        self._workdirs: list[Path] = []
        self._finalizer = weakref.finalize(self, _remove_dirs, self._workdirs)
        self._done, self._last_obs = True, ""
        self._task: dict[str, Any] = {}
        self._ctx = ToolContext()
        self._cassette: Cassette | None = None

    # ------------------------------------------------------------------ extension points

    def build_system_prompt(self) -> str:
        """The system prompt: :attr:`domain_prompt`, how to call tools, how to answer, the budget."""
        example = next(iter(self.tools), self.final_answer.tool or "tool_name")
        return "\n\n".join([self.domain_prompt.strip(), _CALL_HELP.format(name=example),
                            self.final_answer.instructions(),
                            f"You can make at most {self.max_tool_calls} tool calls in an episode."])

    @classmethod
    def validate_task(cls, task: Mapping[str, Any]) -> None:
        """Raise :class:`InvalidTask` for a task row this env cannot play (its required fields)."""
        from mtrl_gym.datasets import decode_task

        decode_task(task, required=cls.task_fields)

    def sample_task(self, rng) -> dict[str, Any]:
        """A task when ``reset`` gets none and the env has no task list (override to generate)."""
        raise InvalidTask(f"{type(self).__name__} has no tasks: pass tasks=[...] (rows or a task file) or "
                          "reset(options={'task': row})")

    def make_state(self, task: Mapping[str, Any], seed: int) -> Any:
        """The initial state of an episode of ``task`` (a pure function of ``task`` and ``seed``)."""
        return self._state_factory(task, seed) if self._state_factory is not None else None

    def instruction(self, task: Mapping[str, Any]) -> str:
        """The first observation: the task's ``prompt``."""
        prompt = task.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidTask(f"task {task.get('id', '?')!r} has no 'prompt' text; override instruction() "
                              "to build one from other fields")
        return prompt

    def grade(self, answer: Any, task: Mapping[str, Any], state: Any) -> Grade:
        """Grade a submitted answer: the ``grader`` if one was given, else the task's ``checker``
        spec (default ``"exact"``) against its ``answer``. Override for state-based grading."""
        if self._grader is not None:
            return self._grader(answer, task, state)
        return make_checker(task.get("checker"))(answer, task.get("answer"))

    def step_facts(self) -> dict[str, Any]:
        """Domain facts added to every step's ``info`` (for shaping wrappers); none by default."""
        return {}

    @property
    def state(self) -> Any:
        """The current episode's state (for tests and graders; agents see it only through tools)."""
        return self._ctx.state

    @property
    def task(self) -> dict[str, Any]:
        """The current task row (holds the expected answer: never show it to the agent)."""
        return self._task

    # ------------------------------------------------------------------------- reset

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        task = copy.deepcopy(self._select_task(options or {}))  # tools cannot alter the stored row
        self._remove_workdirs()
        # The row's digest seeds the state (as it always has); it is never shown: it covers the
        # answer, so for a small answer space it could be inverted.
        row_key = str(task.get("id") or "sandbox-" + _digest(json.dumps(_jsonable(task), sort_keys=True, default=repr,
                                                                       ensure_ascii=False))[:10])
        task_id = str(task.get("id") or "?")
        state_seed = _state_seed(task, row_key)
        if self._grader is None and type(self).grade is ToolSandboxEnv.grade:
            if "answer" not in task:
                raise InvalidTask(f"task {task_id!r} has no 'answer' and the env has no grader")
            make_checker(task.get("checker"))(task["answer"], task["answer"])  # a bad spec fails now
        state = self.make_state(task, state_seed)
        if self.copy_state:
            state = copy.deepcopy(state)
        self._ctx = ToolContext(state=state, task=task, rng=np.random.default_rng(state_seed),
                                workdir_factory=self._new_workdir)
        self._task, self._task_id = task, task_id
        self._cassette = self._cassette_for(task)
        self._calls_used, self._turns, self._done, self._ended, self._end_reason = 0, 0, False, False, ""
        self._submitted: Any = None
        self._has_answer = False
        obs = clean_text(self.instruction(task))[:MAX_OBSERVATION_CHARS]
        if not task.get("id"):  # a digest of what the agent sees anyway: it reveals nothing more
            self._task_id = task_id = "sandbox-" + _digest(obs)[:10]
        self._last_obs = obs
        info = {"system_prompt": self.system_prompt, "tools": self.tool_schemas, "task_id": task_id,
                "tool_calls_used": 0, "tool_calls_left": self.max_tool_calls, "turns_used": 0}
        return obs, info

    def _select_task(self, options: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(options) - {"task"}
        if unknown:
            raise InvalidTask(f"unknown reset option(s) {sorted(unknown)}; {type(self).__name__} accepts 'task'")
        from mtrl_gym.datasets import decode_task

        if "task" in options:
            return decode_task(options["task"], required=self.task_fields)
        if self._tasks:
            return dict(self._tasks[int(self.np_random.integers(len(self._tasks)))])
        return decode_task(self.sample_task(self.np_random), required=self.task_fields)

    def _load_tasks(self, tasks: Any) -> list[dict[str, Any]]:
        if tasks is None:
            return []
        from mtrl_gym.datasets import decode_task, read_tasks

        if isinstance(tasks, (str, os.PathLike)):
            return read_tasks(tasks, required=self.task_fields)
        rows = [decode_task(t, required=self.task_fields) for t in tasks]
        if not rows:
            raise ConfigError("`tasks` is empty; give at least one task row or leave it None")
        return rows

    def _cassette_for(self, task: Mapping[str, Any]) -> Cassette | None:
        if self.mode == "live":
            return None
        if task.get("cassette") is not None and self.mode in ("record", "replay_or_record"):
            self._check_row_cassette(task["cassette"], task)
        source = task.get("cassette") or self._cassette_arg or self.default_cassette
        recorded = [t for t in self.tools.values() if t.recorded]
        if source is None:
            if recorded:
                raise CassetteError(f"tool {recorded[0].name!r} is answered from a cassette, but none was given: "
                                    "pass cassette=PATH (or a row field 'cassette'), or mode='live'")
            return None
        if isinstance(source, Cassette):
            cassette = source
        else:
            key = os.path.abspath(os.fspath(source))
            cassette = self._cassettes.get(key)
            if cassette is None:
                cassette = self._cassettes[key] = Cassette(source, mode=self.mode, on_missing=self.on_missing)
        if cassette.mode != "replay":
            cassette.tools = [t.schema for t in recorded]
        return cassette

    def _check_row_cassette(self, source: Any, task: Mapping[str, Any]) -> None:
        """A task row (data, perhaps from anywhere) may record only inside the working directory
        or the folder of the env's own cassette: ``"cassette": "../../x"`` must not write elsewhere."""
        if isinstance(source, Cassette):
            return
        try:
            real = os.path.realpath(os.fspath(source))
        except TypeError:
            raise InvalidTask(f"task {task.get('id', '?')!r}: 'cassette' must be a path, got {source!r}") from None
        bases = [os.path.realpath(os.getcwd())]
        if isinstance(self._cassette_arg, (str, os.PathLike)):
            bases.append(os.path.dirname(os.path.realpath(os.fspath(self._cassette_arg))))
        if not any(real == b or real.startswith(b.rstrip(os.sep) + os.sep) for b in bases):
            raise InvalidTask(f"task {task.get('id', '?')!r}: cassette {os.fspath(source)!r} is outside the working "
                              f"directory and the env's cassette folder; mode={self.mode!r} would write there. Give a "
                              "relative path inside the working directory")

    # -------------------------------------------------------------------------- step

    def step(self, action: str):
        if self._done:
            raise gymnasium.error.ResetNeeded("The episode has ended; call reset() before step().")
        self._turns += 1
        parsed = self.final_answer.parse(self._parser, action)
        calls = parsed.calls
        info = self._base_info(calls)
        results: list[dict[str, str]] = info["tool_results"]
        if not calls:
            info["format_error"], info["error"] = True, "no_tool_call"
            content = self._no_call_help(parsed)
        else:
            for call in calls:
                self._handle(call, info)
            # The tool results, joined, then notes: agent loops send the results as ``tool``
            # messages and only the rest of the observation as a user message.
            content = "\n".join(r["content"] for r in results)
        if parsed.truncated:
            info["message_truncated"] = True
            content += "\nNote: your message was too long; only its beginning was read."
        terminated = self._ended
        truncated = not terminated and self._turns >= self.max_turns
        reward = 0.0
        if terminated or truncated:
            reward = self._finish(info, "turn_limit" if truncated else self._end_reason)
            content += "\n" + self._ending_text(info)
        else:
            left = self.max_tool_calls - self._calls_used
            if left <= 3:
                content += f"\nYou have {left} tool call(s) left."
        info.update(tool_calls_used=self._calls_used, tool_calls_left=self.max_tool_calls - self._calls_used,
                    turns_used=self._turns, submitted=self._has_answer, **self.step_facts())
        obs = clean_text(content)[:MAX_OBSERVATION_CHARS]
        self._last_obs = obs
        if self.render_mode == "human":
            print(obs)
        return obs, reward, terminated, truncated, info

    def _base_info(self, calls: Sequence[ToolCall]) -> dict[str, Any]:
        return {"tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments, "format": c.format}
                               for c in calls],
                "tool_results": [], "tool_outcomes": [], "format_error": False, "message_truncated": False,
                "error": None,
                "num_tool_calls": 0, "num_tool_errors": 0, "num_unknown_tools": 0, "num_bad_arguments": 0,
                "num_refused": 0, "num_not_available": 0}

    def _record(self, info: dict[str, Any], call: ToolCall, status: str, content: str,
                source: str | None = None) -> None:
        name = clean_text(call.name)[:64]
        content = clean_text(content)
        if len(content) > self.max_result_chars:
            cut = len(content) - self.max_result_chars
            content = content[:self.max_result_chars] + f"\n[... {cut} more characters cut]"
        info["tool_results"].append({"tool_call_id": call.id, "name": name, "content": content})
        info["tool_outcomes"].append({"tool_call_id": call.id, "name": name, "status": status, "source": source})
        if status in ERROR_STATUSES:
            info["num_tool_errors"] += 1
            info["error"] = info["error"] or status
        counter = {"unknown_tool": "num_unknown_tools", "bad_arguments": "num_bad_arguments",
                   "refused": "num_refused", "not_available": "num_not_available"}.get(status)
        if counter:
            info[counter] += 1
        if status == "bad_arguments":
            info["format_error"] = True

    def _handle(self, call: ToolCall, info: dict[str, Any]) -> None:
        if self._ended:
            self._record(info, call, "ignored", "Not executed: the episode already ended.")
            return
        if call.name == self.final_answer.call_name:
            self._submit(call, info)
            return
        if self._calls_used >= self.max_tool_calls:
            self._ended, self._end_reason = True, "tool_limit"
            self._record(info, call, "limit", f"Not executed: the limit of {self.max_tool_calls} tool calls "
                                              "was reached.")
            return
        self._calls_used += 1
        info["num_tool_calls"] += 1
        tool = self.tools.get(call.name)
        if tool is None:
            self._record(info, call, "unknown_tool", self._unknown_tool_text(call.name))
            return
        if call.error:
            self._record(info, call, "bad_arguments", f"Invalid call to {tool.name}: {call.error}. "
                                                      f"Expected {tool.signature}.")
            return
        args, problems = tool.validate(call.arguments)
        if problems:
            self._record(info, call, "bad_arguments", f"Invalid arguments for {tool.name}: {'; '.join(problems)}. "
                                                      f"Expected {tool.signature}.")
            return
        status, content, source = self._execute(tool, args)
        self._record(info, call, status, content, source)

    def _execute(self, tool: Tool, args: dict[str, Any]) -> tuple[str, str, str | None]:
        """Run one validated call; ``(status, content, source)``."""
        try:
            if tool.recorded and self._cassette is not None:
                out = self._cassette.call(tool, args, live=lambda: self._invoke(tool, args))
                if out.source == "missing":
                    return "not_available", out.error or "", out.source
                if out.error is not None:
                    return "tool_error", f"Error: {out.error}", out.source
                return "ok", _render(tool, out.value), out.source
            value = self._invoke(tool, args)
        except ToolError as e:
            return "tool_error", f"Error: {e}", "live"
        except _CallFailed as e:
            return e.status, e.content, "live"
        if isinstance(value, ToolResponse):
            value = value.value
        return "ok", _render(tool, value), "live"

    def _invoke(self, tool: Tool, args: dict[str, Any]) -> Any:
        """Call the real function under the guard. A refusal wins over whatever the tool did
        next; :class:`ToolError` passes through (a cassette records it); other exceptions
        propagate or, with ``tool_exceptions="report"``, become an ``exception`` result."""
        ctx = self._ctx
        with sandbox_guard(tool=tool.name, network=tool.network, writes=tool.writes, subprocess=tool.subprocess,
                           write_roots=[lambda: ctx.workdir_if_created]) as report:
            try:
                value = tool.invoke(args, ctx)
            except ToolError:
                if not report.violations:
                    raise
            except Exception as e:
                if not report.violations:
                    if self.tool_exceptions == "raise":
                        raise
                    raise _CallFailed("exception", f"Error: the tool failed ({type(e).__name__}: {e})") from e
        if report.violations:
            raise _CallFailed("refused", str(report.violations[0]))
        return value

    def _submit(self, call: ToolCall, info: dict[str, Any]) -> None:
        if call.error:
            self._record(info, call, "bad_arguments", f"Invalid final answer: {call.error}.")
            return
        extra = sorted(set(call.arguments) - {"answer"})
        if "answer" not in call.arguments or extra:
            why = f"unexpected argument(s) {extra}" if extra else "missing the 'answer' argument"
            self._record(info, call, "bad_arguments", f"Invalid final answer: {why}. Give exactly one argument, "
                                                      "'answer'.")
            return
        answer, problems = self.final_answer.decode(call.arguments["answer"], from_tag=call.format == "tag")
        if problems:
            self._record(info, call, "bad_arguments", f"Invalid final answer: {'; '.join(problems)}.")
            return
        self._submitted, self._has_answer, self._ended, self._end_reason = answer, True, True, "submitted"
        self._record(info, call, "final", "Final answer received.")

    def _finish(self, info: dict[str, Any], reason: str) -> float:
        self._done = True
        if self._has_answer:
            grade = self.grade(self._submitted, self._task, self._ctx.state)
            if not isinstance(grade, Grade):
                raise TypeError(f"{type(self).__name__}.grade must return a Grade, got {type(grade).__name__}")
        else:
            grade = Grade.wrong("no final answer" + (" (tool-call limit reached)" if reason == "tool_limit" else
                                                     " (turn limit reached)"))
        reward = float(grade.score)
        if "answer" in self._task:
            info["answer"] = self._task["answer"]
        info.update(submitted_answer=self._submitted, grade=grade.to_dict(),
                    success=reward >= self.success_threshold, end_reason=reason)
        if self._cassette is not None and self._cassette.dirty and self._cassette.path is not None:
            self._cassette.save()
        return reward

    def _ending_text(self, info: dict[str, Any]) -> str:
        reason = info["end_reason"]
        if reason == "submitted":
            verdict = "correct" if info["success"] else f"not correct (score {info['grade']['score']:.2f})"
            return f"Your answer is {verdict}. The episode is over."
        if reason == "tool_limit":
            return f"The limit of {self.max_tool_calls} tool calls was reached without a final answer. " \
                   "The episode is over."
        return f"The turn limit ({self.max_turns}) was reached without a final answer. The episode is over."

    def _no_call_help(self, parsed: ParseResult) -> str:
        example = next(iter(self.tools), self.final_answer.call_name)
        problem = f" ({clean_text(parsed.errors[0])[:160]})" if parsed.errors else ""
        return (f"No tool call found in your message{problem}. "
                f"{_CALL_HELP.format(name=example)} {self.final_answer.instructions()}")

    def _unknown_tool_text(self, name: str) -> str:
        names = list(self.tools) + ([self.final_answer.tool] if self.final_answer.tool else [])
        close = difflib.get_close_matches(name, names, n=2, cutoff=0.6)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        return f"Unknown tool {clean_text(name)[:64]!r}.{hint} Available tools: {', '.join(names)}."

    # ------------------------------------------------------------------- lifecycle

    def _new_workdir(self) -> Path:
        with suspended():
            path = Path(tempfile.mkdtemp(prefix="mtrl-sandbox-"))
        self._workdirs.append(path)
        return path

    def _remove_workdirs(self) -> None:
        _remove_dirs(self._workdirs)

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Save cassettes that recorded something and remove the episode's work directory."""
        for cassette in {id(c): c for c in [*self._cassettes.values(), self._cassette] if c is not None}.values():
            if cassette.dirty and cassette.path is not None:
                cassette.save()
        self._remove_workdirs()
        super().close()


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"`{name}` must be an int >= {low}, got {value!r}")


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8, key=b"mtrl_gym").hexdigest()


def _jsonable(task: Mapping[str, Any]) -> dict[str, Any]:
    """The row without values whose text is not stable across processes (functions, cassettes)."""
    return {k: v for k, v in task.items() if not callable(v) and not isinstance(v, Cassette)}


def _state_seed(task: Mapping[str, Any], task_id: str) -> int:
    seed = task.get("state_seed")
    if seed is None:
        return int(_digest(task_id)[:8], 16)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidTask(f"task {task_id!r}: 'state_seed' must be an int >= 0, got {seed!r}")
    return seed


def _render(tool: Tool, value: Any) -> str:
    try:
        return render_result(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"tool {tool.name!r} returned a value that is not JSON ({e}); return dicts, lists, "
                        "strings, numbers, booleans or None") from None


class _CallFailed(Exception):
    """A live call that ended in a refusal or a reported exception (never recorded)."""

    def __init__(self, status: str, content: str):
        super().__init__(content)
        self.status, self.content = status, content


def _remove_dirs(dirs: list[Path]) -> None:
    while dirs:
        path = dirs.pop()
        with suspended():
            shutil.rmtree(path, ignore_errors=True)
