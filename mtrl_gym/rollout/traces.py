"""Episodes as MLflow traces: what the agent saw, said and got back, turn by turn.

:class:`EpisodeTracer` writes one MLflow trace per :class:`~mtrl_gym.rollout.trajectory.Trajectory`
through MLflow's own tracing API (``mlflow.start_span``, ``mlflow.update_current_trace``,
``mlflow.log_feedback``), so the MLflow UI's *Traces* tab shows it as a span tree:

* the root span ``episode`` (type ``AGENT``): the task's first messages in, the outcome out;
  its status is ``ERROR`` with the failure reason when the episode failed;
* one span ``turn <i>`` per assistant turn (type ``CHAT_MODEL``): the messages the model saw
  before that turn in, its raw reply out, the step's reward and format-error flag as
  attributes; status ``ERROR`` on a format error or where the episode failed;
* under each turn one span per parsed tool call (type ``TOOL``, named after the tool; the
  arguments in, the tool's result out) and one span ``env`` (the env's whole reply out).

Each trace carries the tags ``mtrl_gym.run``, ``mtrl_gym.kind`` (``train``, ``val`` or
``eval``), ``mtrl_gym.step``, ``mtrl_gym.task_id``, ``mtrl_gym.group``, ``mtrl_gym.sample``,
``mtrl_gym.seed``, ``mtrl_gym.env_id`` and ``mtrl_gym.policy_version`` (those that apply), is
linked to its MLflow run, and has assessments (source ``CODE``, id ``mtrl_gym``):
``reward`` (what the trainer optimised), ``outcome_reward`` (the bare env's), ``success``
and ``shaping/<term>`` (each shaping term summed over the turns).

Text is capped per span (:attr:`TraceConfig.max_chars`): a long conversation keeps its first
message and its latest ones with a note of how many were left out, so a trace grows
linearly with the turns, never with their square. Spans are built in memory and exported by
MLflow's background writer; :meth:`EpisodeTracer.flush` waits for it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mtrl_gym.config_base import ConfigBase
from mtrl_gym.error import ConfigError, DependencyNotInstalled
from mtrl_gym.rollout.trajectory import Trajectory
from mtrl_gym.serialization import json_safe

__all__ = ["TraceConfig", "EpisodeTracer", "turn_views", "cap_messages", "TAG_PREFIX"]

#: Prefix of every trace tag this module writes.
TAG_PREFIX = "mtrl_gym."
_ISOLATED_IDS = "MLFLOW_TRACE_USE_ISOLATED_RANDOM_ID_GENERATOR"


@dataclass
class TraceConfig(ConfigBase):
    """How many episodes become MLflow traces, and how much text each span keeps."""

    per_step: int = 4
    """Episodes traced per training step and per validation (one per group first, the same
    sample as the trajectory files); 0 traces none. Evaluation traces every episode."""
    max_chars: int = 20_000
    """Characters of message text kept per span (the first message and the latest ones)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, low in (("per_step", 0), ("max_chars", 200)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"`traces.{name}` must be an integer >= {low}, got {value!r}")


def _cut(text: str, limit: int) -> str:
    """``text`` with its middle replaced by a note when longer than ``limit`` characters."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 20) // 2
    return f"{text[:keep]}\n[... {len(text) - 2 * keep} characters cut ...]\n{text[-keep:]}"


def cap_messages(messages: Sequence[Mapping[str, Any]], max_chars: int) -> list[dict[str, Any]]:
    """The first message and as many of the latest as fit in ``max_chars`` characters of content.

    Left-out messages are replaced by one note; a single message longer than the budget is cut
    in the middle. Linear in the number of messages.

    >>> msgs = [{"role": "system", "content": "s" * 10}] + [{"role": "user", "content": "u" * 100}] * 5
    >>> [m["content"][:10] for m in cap_messages(msgs, 250)]
    ['ssssssssss', '[3 earlier', 'uuuuuuuuuu', 'uuuuuuuuuu']
    """
    if not messages:
        return []
    first = dict(messages[0], content=_cut(str(messages[0].get("content", "")), max_chars // 4))
    budget = max_chars - len(first["content"])
    tail: list[dict[str, Any]] = []
    for m in reversed(messages[1:]):
        text = str(m.get("content", ""))
        if tail and len(text) > budget:
            break
        text = _cut(text, max(budget, 200))
        tail.append(dict(m, content=text))
        budget -= len(text)
    tail.reverse()
    left_out = len(messages) - 1 - len(tail)
    note = [{"role": "user", "content": f"[{left_out} earlier messages left out of this trace]"}] if left_out else []
    return [first, *note, *tail]


def turn_views(traj: Trajectory) -> list[dict[str, Any]]:
    """Per assistant turn: ``seen`` (messages before it), ``reply`` (its text), ``env`` (the
    messages that answered it), ``info`` (its :attr:`Trajectory.turn_info` entry) and ``reward``."""
    messages = traj.messages
    starts = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    views = []
    for k, j in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(messages)
        views.append({"index": j, "reply": str(messages[j].get("content", "")), "env": messages[j + 1:end],
                      "info": traj.turn_info[k] if k < len(traj.turn_info) else {},
                      "reward": traj.turn_rewards[k] if k < len(traj.turn_rewards) else None})
    return views


def _shaping_terms(turn_info: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each shaping term of ``reward_components["terms"]`` summed over the turns."""
    out: dict[str, float] = {}
    for info in turn_info:
        comp = info.get("reward_components")
        terms = comp.get("terms") if isinstance(comp, Mapping) else None
        if isinstance(terms, Mapping):
            for name, value in terms.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[str(name)] = out.get(str(name), 0.0) + float(value)
    return out


def episode_scores(traj: Trajectory) -> dict[str, Any]:
    """``reward`` (the trained-on reward), ``outcome_reward`` and ``success`` (where known).

    The outcome is ``EpisodeStats``' ``episode/outcome_reward``, else the ``outcome`` parts of
    the reward wrappers' ``reward_components`` summed over the turns, else (no wrapper changed
    the reward) the step rewards' sum; a failed episode has none.
    """
    scores: dict[str, Any] = {"reward": float(traj.reward)}
    outcome = traj.final_info.get("episode/outcome_reward")
    if not isinstance(outcome, (int, float)) or isinstance(outcome, bool):
        parts = [i["reward_components"].get("outcome") for i in traj.turn_info
                 if isinstance(i.get("reward_components"), Mapping)]
        # No reward wrapper reported its computation: the step rewards are the env's own.
        outcome = sum(float(p) for p in parts if isinstance(p, (int, float))) if parts else sum(traj.turn_rewards)
    if outcome is not None and not traj.failed:
        scores["outcome_reward"] = float(outcome)
    if "success" in traj.metrics:
        scores["success"] = bool(traj.metrics["success"])
    return scores


_RELEASE_REGISTERED = False


def _release_at_exit(mlflow) -> None:
    """Store the last traces and drop MLflow's tracer before the interpreter tears modules
    down (its id generator's finaliser fails on a half-dismantled interpreter, and says so)."""
    global _RELEASE_REGISTERED
    if _RELEASE_REGISTERED:
        return
    import atexit

    def release() -> None:
        try:
            mlflow.flush_trace_async_logging()
            mlflow.tracing.reset()
        except Exception:  # noqa: BLE001, S110 - best effort at exit
            pass

    atexit.register(release)
    _RELEASE_REGISTERED = True


class EpisodeTracer:
    """Writes trajectories as MLflow traces into one experiment, linked to one run.

    Args:
        tracking_uri: the MLflow store (it becomes MLflow's process-wide tracking URI, which
            is where MLflow's trace writer sends spans).
        experiment_id: the experiment the traces go to.
        run_id: the MLflow run each trace is linked to (its *Traces* tab lists them).
        config: the text cap; ``per_step`` is the caller's to apply.
    """

    def __init__(self, tracking_uri: str, experiment_id: str, run_id: str | None = None,
                 config: TraceConfig | None = None):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        try:
            import mlflow
        except ImportError:
            raise DependencyNotInstalled("mlflow", extra="train") from None
        from mlflow.entities.trace_location import MlflowExperimentLocation

        self._mlflow = mlflow
        self.config = config or TraceConfig()
        self.experiment_id = str(experiment_id)
        self.run_id = run_id
        self._location = MlflowExperimentLocation(experiment_id=self.experiment_id)
        # Trace ids from a generator of MLflow's own: OTel's default draws them from Python's
        # global ``random``, which the trainer seeds, so two runs with one seed would write the
        # same trace ids (and tracing would shift the run's random stream).
        isolated = os.environ.get(_ISOLATED_IDS)
        os.environ.setdefault(_ISOLATED_IDS, "true")
        if mlflow.get_tracking_uri() != tracking_uri or isolated is None:
            saved = os.environ.get("MLFLOW_TRACKING_URI")
            mlflow.set_tracking_uri(tracking_uri)  # also exports it to the environment: undo that
            if saved is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = saved
            # Set MLflow's tracer up for this store now: left to the first span, that span
            # would still go to the previous store.
            mlflow.tracing.reset()
            mlflow.tracing.enable()
            _release_at_exit(mlflow)

    def log(self, trajectories: Sequence[Trajectory], tags: Mapping[str, Any],
            scores: Sequence[Mapping[str, Any]] | None = None, run_id: str | None = None) -> list[str]:
        """One trace per trajectory; ``tags`` go on every trace (keys get the ``mtrl_gym.`` prefix;
        the trajectory's own task id, group, sample, seed and policy version win over a tag's).

        ``scores[i]`` overrides the assessments of trajectory ``i`` (evaluation's bare-env
        outcome); ``run_id`` links these traces to another run than the tracer's. Returns
        the trace ids.
        """
        ids = []
        for i, traj in enumerate(trajectories):
            try:
                ids.append(self._trace(traj, tags, scores[i] if scores is not None else None, run_id or self.run_id))
            except Exception as e:  # noqa: BLE001 - a trace is a view of the run: never the reason it stops
                warnings.warn(f"episode {traj.task_id!r} (group {traj.group_id}, sample {traj.sample_index}) was not "
                              f"traced: {type(e).__name__}: {e}", stacklevel=2)
        return ids

    def flush(self) -> None:
        """Wait until MLflow's background writer has stored every trace."""
        self._mlflow.flush_trace_async_logging()

    # ------------------------------------------------------------------ one trace

    def _trace(self, traj: Trajectory, tags: Mapping[str, Any], scores: Mapping[str, Any] | None,
               run_id: str | None) -> str:
        mlflow = self._mlflow
        cap = self.config.max_chars
        views = turn_views(traj)
        first = traj.messages[:views[0]["index"]] if views else traj.messages
        own = {"task_id": traj.task_id, "group": traj.group_id, "sample": traj.sample_index,
               "env_id": traj.env_id, "seed": traj.seed, "policy_version": traj.policy_version}
        all_tags = {**tags, **{k: v for k, v in own.items() if v is not None}}
        with mlflow.start_span("episode", span_type="AGENT", trace_destination=self._location,
                               run_id=run_id) as root:
            trace_id = root.trace_id
            mlflow.update_current_trace(tags={TAG_PREFIX + k: str(v)[:250] for k, v in all_tags.items()
                                              if v is not None})
            root.set_inputs(json_safe({"task_id": traj.task_id, "seed": traj.seed, "messages": cap_messages(first, cap)}))
            root.set_attributes(json_safe({"env_id": traj.env_id, "group_id": traj.group_id,
                                           "sample_index": traj.sample_index, "stop_reason": traj.stop_reason,
                                           "metrics": dict(traj.metrics)}))
            for k, view in enumerate(views):
                failed_here = traj.failed and k == len(views) - 1 and not view["env"]
                self._turn(traj, k, view, cap, failed_here)
            root.set_outputs(json_safe({"reward": traj.reward, "stop_reason": traj.stop_reason, "turns": len(views),
                                        "final_message": cap_messages(traj.messages[-1:], cap)}))
            if traj.failed:
                root.set_status(self._status("ERROR", traj.failure_reason))
            self._assess(trace_id, traj, scores)
        return trace_id

    def _turn(self, traj: Trajectory, k: int, view: Mapping[str, Any], cap: int, failed_here: bool) -> None:
        mlflow = self._mlflow
        info = view["info"]
        with mlflow.start_span(f"turn {k + 1}", span_type="CHAT_MODEL") as span:
            span.set_inputs(json_safe({"messages": cap_messages(traj.messages[:view["index"]], cap)}))
            span.set_outputs(json_safe({"role": "assistant", "content": _cut(view["reply"], cap)}))
            span.set_attributes(json_safe({"turn": k + 1, "reward": view["reward"],
                                           "format_error": bool(info.get("format_error", False)),
                                           "error": info.get("error"),
                                           "reward_components": info.get("reward_components")}))
            results = {str(m.get("tool_call_id", "")): m for m in view["env"] if m.get("role") == "tool"}
            for call in info.get("tool_calls") or []:
                if not isinstance(call, Mapping):
                    continue
                with mlflow.start_span(json_safe(str(call.get("name") or "tool"))[:100], span_type="TOOL") as tool:
                    tool.set_inputs(json_safe(call.get("arguments")))
                    result = results.get(str(call.get("id", "")))
                    tool.set_outputs(json_safe(_cut(str(result.get("content", "")), cap)) if result else None)
                    tool.set_attributes(json_safe({"tool_call_id": call.get("id"), "format": call.get("format")}))
            if view["env"]:
                with mlflow.start_span("env", span_type="UNKNOWN") as env:
                    env.set_inputs(json_safe({"action": _cut(view["reply"], cap)}))
                    env.set_outputs(json_safe({"messages": cap_messages(view["env"], cap)}))
                    env.set_attributes({"reward": view["reward"]})
            if failed_here:
                span.set_status(self._status("ERROR", traj.failure_reason))
            elif info.get("format_error"):
                span.set_status(self._status("ERROR", f"format error: {info.get('error') or 'no valid tool call'}"))

    def _status(self, code: str, description: Any):
        from mlflow.entities import SpanStatus

        return SpanStatus(code, str(description or "")[:1000])

    def _assess(self, trace_id: str, traj: Trajectory, scores: Mapping[str, Any] | None) -> None:
        from mlflow.entities import AssessmentSource

        source = AssessmentSource(source_type="CODE", source_id="mtrl_gym")
        values = {**episode_scores(traj), **(scores or {})}
        values.update({f"shaping/{k}": v for k, v in _shaping_terms(traj.turn_info).items()})
        for name, value in values.items():
            self._mlflow.log_feedback(trace_id=trace_id, name=name, value=value, source=source)
