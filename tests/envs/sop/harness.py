"""Reusable checks for SOP domains: each domain's test file calls these on its env id.

``SOPHarness(env_id)`` runs, through the real env and real tool-call text:

* :meth:`check_oracle` — the scripted oracle scores 100% exact, changes the world with a
  stateful action (on some tasks at least), and never calls a distractor;
* :meth:`check_no_label_leak` — an agent that submits at once, choosing each field by the
  best rule it can learn from prompt text (majority class, an enum value named in the
  prompt, the conditional majority given any input value), stays near the majority rate;
* :meth:`check_near_misses` — the oracle's episode with one answer field changed (another
  enum value, a number off by one, a list item dropped, ...) is graded wrong on that field;
* :meth:`check_any_actions` — tool calls built from the world's own ids and the oracle's
  calls (perturbed) never raise, are graded 0/1 and keep the final-only keys for the end;
* :meth:`check_difficulty_limits` — every declared knob range is enforced at both ends;
* :meth:`check_contract`, :meth:`label_report`.

What every text env must prove (Gymnasium's checker, hostile text, determinism across
processes, JSON ``info``, the answer never shown) is the kit's job: ``tests/envs/sop/test_sop_kit.py``
runs :func:`mtrl_gym.testing.check_text_env` on every domain with the secret extractor of
``tests/kit_secrets.py``.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium
from hypothesis import strategies as st

import mtrl_gym  # noqa: F401 - registers the ids
from mtrl_gym.envs.sandbox import ToolContext
from mtrl_gym.envs.sop import SOPEnv, canonical, generate_tasks, parse_task_inputs, play_oracle
from mtrl_gym.error import ConfigError

FINAL_ONLY = {"answer", "submitted_answer", "grade", "success", "end_reason", "grade_result", "answer_error"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**20) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


def _strings(value: Any, out: set[str]) -> set[str]:
    """Every string (and dict key) in a JSON value."""
    if isinstance(value, str):
        out.add(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            out.add(str(k))
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    return out


def _ids(value: Any, out: set[str], key: str = "") -> set[str]:
    """Strings under keys that name ids or codes (what tools are looked up by)."""
    if isinstance(value, str) and ("id" in key.lower() or "code" in key.lower()):
        out.add(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _ids(v, out, str(k))
    elif isinstance(value, list):
        for v in value:
            _ids(v, out, key)
    return out


def _flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """``{"a.b[0]": "text"}``: every scalar of a JSON value, as canonical text, by path."""
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list):
        out = {f"{prefix}.len": str(len(value))}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: canonical(value)}


@st.composite
def _value_for(draw, schema: Mapping[str, Any], pools: tuple[list, list]):
    """A value for a JSON-schema parameter: often a real id from the world, sometimes anything."""
    ids, world_strings = pools
    kind = schema.get("type")
    if "enum" in schema and draw(st.booleans()):
        return draw(st.sampled_from(schema["enum"]))
    if kind == "string":
        return draw(st.sampled_from(ids) | st.sampled_from(ids) | st.sampled_from(world_strings) | st.text(max_size=12))
    if kind == "integer":
        return draw(st.integers(-5, 10**6))
    if kind == "number":
        return draw(st.floats(allow_nan=False) | st.integers(-5, 100))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "array":
        return draw(st.lists(_value_for(schema.get("items", {}), pools), max_size=3))
    return draw(json_values)


@st.composite
def _tool_call(draw, schemas: list[dict[str, Any]], oracle_calls: list[dict[str, Any]], pools: tuple[list, list]):
    """One tool call in one of the accepted formats (or truncated), to a real or made-up tool."""
    fn = draw(st.sampled_from(schemas))
    props = fn["parameters"].get("properties", {})
    name = draw(st.sampled_from([fn["name"], fn["name"], fn["name"], draw(st.text(max_size=10))]))
    mode = draw(st.sampled_from(["plausible", "plausible", "any", "partial"]))
    if mode == "any":
        args = draw(st.dictionaries(st.sampled_from(list(props) or ["x"]) | st.text(max_size=5), json_values,
                                    max_size=4))
    else:
        args = {p: draw(_value_for(s, pools)) for p, s in props.items() if mode == "plausible" or draw(st.booleans())}
    if mode == "plausible" and draw(st.booleans()):  # the oracle's call, maybe perturbed
        known = draw(st.sampled_from(oracle_calls))
        name, args = known["name"], dict(known["arguments"])
        schema = next((f for f in schemas if f["name"] == name), fn)["parameters"].get("properties", {})
        if args and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(args)))
            args[key] = draw(_value_for(schema.get(key, {}), pools))
    body = json.dumps({"name": name, "arguments": args}, allow_nan=True)
    fmt = draw(st.sampled_from(["hermes", "hermes", "json", "call", "broken"]))
    if fmt == "hermes":
        return f"<tool_call>{body}</tool_call>"
    if fmt == "json":
        return f"Let me check. {body}"
    if fmt == "call":
        return f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in args.items() if str(k).isidentifier()) + ")"
    return f"<tool_call>{body[:draw(st.integers(0, len(body)))]}"


@dataclass
class LeakReport:
    """What the no-tool agent achieved on held-out tasks, and the majority baselines."""

    field_accuracy: dict[str, float]
    field_majority: dict[str, float]
    rules: dict[str, str]
    exact_rate: float
    answer_majority: float
    env_reward: float


class SOPHarness:
    """The shared checks for one registered SOP env id (see the module docstring)."""

    def __init__(self, env_id: str, *, module: str | None = None):
        """``module``: a module in this directory that registers ``env_id`` on import (for test-only ids)."""
        self.env_id, self.module = env_id, module
        if module is not None:
            __import__(module)
        self._env: SOPEnv | None = None
        self._tasks: dict[str, list[dict[str, Any]]] = {}

    # ------------------------------------------------------------------ basics

    @property
    def env(self) -> SOPEnv:
        """One shared unwrapped env (tests reset it with explicit tasks or seeds)."""
        if self._env is None:
            self._env = gymnasium.make(self.env_id).unwrapped
        return self._env

    @property
    def domain(self):
        return self.env.domain

    def tasks(self, n: int, *, seed: int = 0, split: str = "train", difficulty: Mapping[str, Any] | None = None):
        key = f"{n}|{seed}|{split}|{canonical(dict(difficulty or {}))}"
        if key not in self._tasks:
            self._tasks[key] = generate_tasks(self.domain, n, seed=seed, split=split, difficulty=difficulty)
        return self._tasks[key]

    # ------------------------------------------------------------------ oracle

    def check_oracle(self, n: int = 500, *, difficulty: Mapping[str, Any] | None = None, seed: int = 0
                     ) -> dict[str, float]:
        """The oracle scores 1.0 on ``n`` tasks through the env; returns timing, step statistics and
        ``stateful_rate``, the share of tasks whose world the oracle changed."""
        env = self.env
        distractors = set(self.domain.distractor_tools)
        start = time.perf_counter()
        steps, changed = [], 0
        for task in self.tasks(n, seed=seed, difficulty=difficulty):
            transcript: list[tuple[str, str]] = []
            reward, info, used = play_oracle(env, options={"task": task}, transcript=transcript)
            assert reward == 1.0 and info["grade_result"]["exact"], (task["id"], info["grade"], info["submitted_answer"])
            assert info["answer"] == task["answer"]
            called = {json.loads(a.removeprefix("<tool_call>").removesuffix("</tool_call>"))["name"]
                      for a, _ in transcript[1:]}
            assert not called & distractors, f"{task['id']}: the oracle called distractor(s) {called & distractors}"
            changed += canonical(env.state) != canonical(env.initial_world)
            steps.append(used)
        seconds = time.perf_counter() - start
        # Some SOPs take no action on some tasks (no case when nothing is wrong), but never on none.
        assert changed, "the oracle never took a stateful action (every world is unchanged)"
        return {"tasks": n, "seconds": seconds, "ms_per_task": 1000 * seconds / n,
                "mean_steps": sum(steps) / n, "max_steps": max(steps), "stateful_rate": changed / n}

    # ------------------------------------------------------------------ label leak

    def label_report(self, n: int = 500, *, split: str = "train") -> dict[str, Any]:
        """Majority-class rate of each field and of the whole answer over ``n`` generated tasks."""
        tasks = self.tasks(n, split=split)
        out: dict[str, Any] = {"fields": {}, "classes": {}}
        for name in self.domain.output_schema:
            counts = Counter(canonical(t["answer"][name]) for t in tasks)
            out["fields"][name] = counts.most_common(1)[0][1] / n
            out["classes"][name] = dict(counts.most_common(8))
        out["answer"] = Counter(canonical(t["answer"]) for t in tasks).most_common(1)[0][1] / n
        return out

    def check_no_label_leak(self, n: int = 500, *, margin: float = 0.05) -> LeakReport:
        """Fit per-field prompt rules on train tasks, submit at once on val tasks through the env."""
        fit, test = self.tasks(n, split="train"), self.tasks(n, seed=1, split="val")
        schema = self.domain.output_schema
        rules, predict = {}, {}
        fit_inputs = [_flatten(parse_task_inputs(t["prompt"])) for t in fit]
        for name, spec in schema.items():
            candidates = _rules(name, spec, fit, fit_inputs)
            best = max(candidates, key=lambda r: (sum(r[1](t, x) == canonical(t["answer"][name])
                                                      for t, x in zip(fit, fit_inputs)), r[0] == "majority"))
            rules[name], predict[name] = best[0], best[1]
        test_inputs = [_flatten(parse_task_inputs(t["prompt"])) for t in test]
        accuracy, majority, rewards, exact = {}, {}, [], 0
        hits: dict[str, int] = defaultdict(int)
        for task, inputs in zip(test, test_inputs):
            guess = {name: json.loads(predict[name](task, inputs)) for name in schema}
            for name in schema:
                hits[name] += canonical(guess[name]) == canonical(task["answer"][name])
            exact += canonical(guess) == canonical(task["answer"])
            obs, _ = self.env.reset(options={"task": task})
            assert canonical(task["answer"]) not in obs
            _, reward, terminated, _, info = self.env.step(f"<final_answer>{json.dumps(guess)}</final_answer>")
            assert terminated and info["grade_result"]["exact"] == (reward == 1.0)
            rewards.append(reward)
        for name in schema:
            accuracy[name] = hits[name] / n
            majority[name] = Counter(canonical(t["answer"][name]) for t in test).most_common(1)[0][1] / n
        answer_majority = Counter(canonical(t["answer"]) for t in test).most_common(1)[0][1] / n
        report = LeakReport(accuracy, majority, rules, exact / n, answer_majority, sum(rewards) / n)
        assert report.env_reward == report.exact_rate
        for name in schema:
            assert accuracy[name] <= majority[name] + margin, \
                f"field {name!r} is predictable from the prompt: {accuracy[name]:.3f} with rule {rules[name]} " \
                f"vs majority {majority[name]:.3f}"
        assert report.exact_rate <= answer_majority + margin, report
        return report

    # ------------------------------------------------------------------ near misses

    def check_near_misses(self, n: int = 40, *, seed: int = 0) -> int:
        """Replay the oracle's calls on ``n`` tasks and submit its answer with one field changed
        (field ``i % len(schema)`` on task ``i``): reward 0, that field scores below 1, the
        others score 1. Returns the number of near misses graded."""
        env, schema = self.env, self.domain.output_schema
        names = list(schema)
        for i, task in enumerate(self.tasks(n, seed=seed)):
            transcript: list[tuple[str, str]] = []
            play_oracle(env, options={"task": task}, transcript=transcript)
            name = names[i % len(names)]
            wrong = near_miss(task["answer"][name], schema[name])
            env.reset(options={"task": task})
            for action, _ in transcript[1:-1]:
                env.step(action)
            answer = {**task["answer"], name: wrong}
            _, reward, terminated, _, info = env.step(f"<final_answer>{json.dumps(answer)}</final_answer>")
            fields = info["grade_result"]["fields"]
            assert terminated and reward == 0.0, (task["id"], name, wrong)
            assert fields[name] < 1.0 and all(v == 1.0 for k, v in fields.items() if k != name), \
                (task["id"], name, wrong, fields)
        return n

    # ------------------------------------------------------------------ robustness

    def actions(self, env: SOPEnv, oracle_calls: list[dict[str, Any]] | None = None):
        """A strategy of action lists: any text, tool calls with any or plausible arguments, the
        oracle's own calls for this task with one argument perturbed or not, then maybe a final
        answer (any JSON, any text, or the expected object with one field changed)."""
        oracle_calls = oracle_calls or [{"name": next(iter(env.tools)), "arguments": {}}]
        world_strings = sorted(s for s in _strings(env.state, set()) if 0 < len(s) <= 40) or ["x"]
        ids = sorted(_ids(env.state, set()) | set(_flatten(parse_task_inputs(env.task["prompt"])).values())) or ["x"]
        pools = ([json.loads(i) if i.startswith('"') else i for i in ids], world_strings)
        schemas = [s["function"] for s in env.tool_schemas]
        call = _tool_call(schemas, oracle_calls, pools)
        expected = dict(env.expected_answer)
        near = st.tuples(st.sampled_from(sorted(expected)), json_values | st.sampled_from(world_strings)).map(
            lambda kv: {**expected, kv[0]: kv[1]})
        answer = near | st.dictionaries(st.sampled_from(list(env.output_schema)) | st.text(max_size=6),
                                        json_values | st.sampled_from(world_strings),
                                        max_size=len(env.output_schema) + 1)
        final = st.one_of(answer.map(lambda a: f"<final_answer>{json.dumps(a)}</final_answer>"),
                          st.text(max_size=30).map(lambda t: f"<final_answer>{t}</final_answer>"),
                          json_values.map(lambda v: '<tool_call>{"name": "submit", "arguments": {"answer": '
                                                    + json.dumps(v) + "}}</tool_call>"))
        one = st.one_of(st.text(max_size=60), call, call, call, st.lists(call, min_size=2, max_size=3).map(" ".join))
        return st.tuples(st.lists(one, min_size=1, max_size=10), st.lists(final, max_size=1)).map(lambda p: p[0] + p[1])

    def check_any_actions(self, data, seed: int) -> None:
        """Play drawn actions from ``reset(seed)``: nothing raises, rewards are 0/1, the final-only keys
        and the answer (found by the kit's secret finder with the suite's extractor) stay hidden."""
        from kit_secrets import sop_secret  # tests/ is on pytest's path

        from mtrl_gym.testing.leak import secret_checks

        env = self.env
        transcript: list[tuple[str, str]] = []
        play_oracle(env, seed=seed, transcript=transcript)
        oracle_calls = [json.loads(a.removeprefix("<tool_call>").removesuffix("</tool_call>")) for a, _ in transcript[1:-1]]
        obs, info = env.reset(seed=seed)
        assert not FINAL_ONLY & set(info)
        checks, _ = secret_checks(sop_secret(env))
        shown = checks[0][1]
        for action in data.draw(self.actions(env, oracle_calls)):
            obs, reward, terminated, truncated, info = env.step(action)
            assert reward in (0.0, 1.0)
            assert len(info["tool_results"]) == len(info["tool_outcomes"])
            assert all(o["status"] != "exception" for o in info["tool_outcomes"])
            if terminated or truncated:
                assert FINAL_ONLY <= set(info) and reward == float(info["grade_result"]["exact"])
                assert 0.0 <= info["grade_result"]["score"] <= 1.0
                break
            assert not FINAL_ONLY & set(info) and reward == 0.0
            assert not shown(obs) and not shown(info), "the answer is shown before the end"

    def check_planned(self, planned, n: int = 150, difficulty: Mapping[str, Any] | None = None) -> None:
        """Outcome-first generation: for seeds ``0..n-1`` at noise 0 and 2, the label agrees with
        the outcomes the generator planned (``planned(seed, world) -> {field: value}``)."""
        for seed in range(n):
            for noise in (0, 2):
                world = self.domain.world(seed, {**(difficulty or {}), "noise": noise})
                label, want = self.domain.expected(world), planned(seed, world)
                assert {k: label[k] for k in want} == want, (seed, noise)

    def check_noise_traps(self, traps: Mapping[str, Any], *, n: int = 150, at_least: int = 10,
                          clean: tuple[str, ...] | None = None) -> dict[int, dict[str, int]]:
        """Each trap (``name -> fn(world) -> bool``) is absent from clean worlds (``noise`` 0; only the
        ``clean`` names if given) and present in at least ``at_least`` of ``n`` worlds at ``noise`` 2."""
        counts = {noise: dict.fromkeys(traps, 0) for noise in (0, 2)}
        for noise in (0, 2):
            for seed in range(n):
                world = self.domain.world(seed, {"noise": noise})
                for name, present in traps.items():
                    counts[noise][name] += bool(present(world))
        assert all(counts[0][k] == 0 for k in (clean if clean is not None else traps)), counts[0]
        assert min(counts[2].values()) >= at_least, counts[2]
        return counts

    def check_difficulty_limits(self) -> None:
        """Every range in ``difficulty_limits`` (and ``noise``) is enforced at both ends, with a
        message naming the knob, the range and the value; the ends themselves are accepted."""
        d = self.domain
        limits = {"noise": (0, 2), **d.difficulty_limits}
        for key, (low, high) in limits.items():
            for bad in (low - 1, high + 1):
                try:
                    d.resolve_difficulty({key: bad})
                except ConfigError as e:
                    assert repr(key) in str(e) and str(bad) in str(e), str(e)
                else:
                    raise AssertionError(f"{d.name}: {key}={bad} was accepted")
            for good in (low, high):
                assert d.resolve_difficulty({key: good})[key] == good
        close = next(iter(d.difficulty_limits), "noise")
        try:
            d.resolve_difficulty({close + "s": 1})
        except ConfigError as e:
            assert f"Did you mean {close!r}" in str(e), str(e)
        else:
            raise AssertionError("an unknown knob was accepted")

    def extremes(self) -> list[dict[str, Any]]:
        """The difficulty corners: every knob at its low end, and at its high end without distractors."""
        limits = {"noise": (0, 2), **self.domain.difficulty_limits}
        return [{k: lo for k, (lo, _) in limits.items()},
                {**{k: hi for k, (_, hi) in limits.items()}, "distractors": False}]

    # ------------------------------------------------------------------ contract

    def check_contract(self, *, min_tools: int = 4, max_tools: int = 10) -> None:
        """4-10 tools, 1-3 distractors, the knobs ``noise`` and ``distractors`` plus one more, an SOP document."""
        d = self.domain
        assert min_tools <= len(d.tools) <= max_tools, list(d.tools)
        assert 1 <= len(d.distractor_tools) <= 3, d.distractor_tools
        assert {"noise", "distractors"} < set(d.default_difficulty), d.default_difficulty
        lines = d.sop_text.strip().splitlines()
        assert 80 <= len(lines) <= 260, f"the SOP has {len(lines)} lines"
        assert re.search(r"^\s*1\.", d.sop_text, re.MULTILINE), "the SOP has no numbered steps"
        for name in d.distractor_tools:
            assert name not in d.sop_text, f"the SOP mentions the distractor tool {name!r}"
        env = gymnasium.make(self.env_id, difficulty={"distractors": False}).unwrapped
        _, info = env.reset(seed=0)
        names = {t["function"]["name"] for t in info["tools"]}
        assert not names & set(d.distractor_tools) and set(d.core_tools()) < names


def direct_call(tools: Any, world: dict[str, Any], *, copy_world: bool = True):
    """``(call, ctx)``: ``call(tool, arguments)`` runs ``tools`` in-process on ``world`` (a deep copy
    unless ``copy_world`` is false), validating the arguments and decoding like the env does."""
    ctx = ToolContext(state=copy.deepcopy(world) if copy_world else world)

    def call(name: str, arguments: dict[str, Any]) -> Any:
        args, problems = tools[name].validate(arguments)
        assert not problems, (name, problems)
        return json.loads(json.dumps(tools[name].invoke(args, ctx)))

    return call, ctx


def set_at(path: list[Any], value: Any):
    """An edit of a hand-made world: ``set_at(["a", 0, "b"], 1)(world)`` sets ``world["a"][0]["b"] = 1``."""
    def edit(world: dict[str, Any]) -> None:
        *head, last = path
        node = world
        for key in head:
            node = node[key]
        node[last] = value
    return edit


def check_pinned(domain: Any, world: dict[str, Any], want: Mapping[str, Any], edits=(), *,
                 inputs: Mapping[str, Any] | None = None) -> None:
    """A hand-checked world: after ``edits``, the reference procedure gives ``want``, the oracle
    reaches it through the tools (on a copy) and the tools' writes pass the state checks."""
    for edit in edits:
        edit(world)
    assert domain.expected(world) == want
    call, ctx = direct_call(domain.tools, world)
    assert domain.oracle(domain.task_inputs(world) if inputs is None else inputs, call) == want
    assert domain.state_errors(ctx.state, want) == {}


def near_miss(value: Any, spec: Any) -> Any:
    """A value of the field's type that grading must not accept for ``value``."""
    if value is None:
        return {"enum": (spec.values or ("x",))[0], "int": 0, "float": 0.0, "bool": False,
                "list": [], "str": "X"}.get(spec.type, "X")
    if spec.type == "enum":
        others = [v for v in spec.values if v.strip().lower() != str(value).strip().lower()]
        return others[0] if others else None
    if spec.type == "bool":
        return not value
    if spec.type == "int":
        return value + 1
    if spec.type == "float":
        return value + 1.0 + 10 * (spec.tolerance or 0.0)
    if spec.type == "list":
        if value:
            return value[:-1]
        return [(spec.values or ("X",))[0] if spec.item_type in ("enum", "str") else 0]
    return f"{value}X"


def _rules(name, spec, tasks, inputs):
    """Candidate no-tool rules for one field: ``(description, fn(task, flat_inputs) -> canonical JSON)``."""
    counts = Counter(canonical(t["answer"][name]) for t in tasks)
    majority = counts.most_common(1)[0][0]
    rules = [("majority", lambda t, x, m=majority: m)]
    values = spec.values if spec.type == "enum" else ()
    if values:
        patterns = [(v, re.compile(rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])", re.IGNORECASE)) for v in values]

        def named(t, x, m=majority):
            found = [v for v, rx in patterns if rx.search(t["prompt"])]
            return canonical(found[0]) if len(found) == 1 else m

        rules.append(("enum value named in the prompt", named))
    for key in sorted({k for x in inputs for k in x}):
        table: dict[str, Counter] = defaultdict(Counter)
        for t, x in zip(tasks, inputs):
            table[x.get(key, "<absent>")][canonical(t["answer"][name])] += 1
        if len(table) < 2 or len(table) > len(tasks) // 4:
            continue  # constant, or (nearly) unique per task: cannot generalise
        best = {value: c.most_common(1)[0][0] for value, c in table.items()}
        rules.append((f"conditional majority given input {key}",
                      lambda t, x, b=best, k=key, m=majority: b.get(x.get(k, "<absent>"), m)))
    return rules
