"""The token-level record of one episode, shared by the rollout engine, trainer and eval.

A trajectory is token-in/token-out (docs/architecture.md): ``token_ids`` is the whole episode as the
model saw it — first prompt, then each sampled assistant turn exactly as sampled, then each
environment reply rendered through the chat template. ``loss_mask[i] == 1`` exactly for
sampled tokens; ``logprobs[i]`` is the sampling log-probability there and 0.0 elsewhere.

Trajectories are plain data: they serialise to one JSON object per line with
:func:`save_jsonl` and come back unchanged with :func:`load_jsonl`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from mtrl_gym.files import atomic_path
from mtrl_gym.serialization import json_line, json_safe

__all__ = ["Trajectory", "save_jsonl", "load_jsonl", "iter_jsonl", "json_safe", "turn_record", "TURN_KEYS",
           "meta_path", "read_meta"]

#: The ``info`` keys of one step that :func:`turn_record` keeps (the env contract, plus the
#: reward wrappers' computation).
TURN_KEYS = ("tool_calls", "format_error", "error", "reward_components")


@dataclass
class Trajectory:
    """One episode of one task, ready for training and for reading by people."""

    task_id: str
    """Id of the task (dataset row) this episode played."""
    env_id: str = ""
    """Registered id of the environment, e.g. ``"mtrl/Wordle-v0"``."""
    group_id: int = 0
    """Index of the group (task) within the batch that produced this trajectory."""
    sample_index: int = 0
    """Index of this rollout within its group."""
    seed: int | None = None
    """Seed passed to ``env.reset``."""
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    prompt_length: int = 0
    """Number of tokens of the first prompt (system + tools + first observation)."""
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    """``[start, end)`` token positions of each sampled assistant turn."""
    turn_rewards: list[float] = field(default_factory=list)
    """Reward returned by ``env.step`` after each assistant turn."""
    reward: float = 0.0
    """Episode reward: the sum of ``turn_rewards`` (or the env's minimum reward on failure)."""
    terminated: bool = False
    truncated: bool = False
    stop_reason: str = ""
    """Why the episode ended: ``terminated``, ``truncated``, ``max_turns``, ``token_budget``,
    ``time_budget``, ``context_length`` or ``failed``."""
    failed: bool = False
    failure_reason: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The conversation as OpenAI-style chat messages, for people and for reports."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """Tool schemas shown to the model (``info["tools"]`` at reset); with ``messages`` they
    re-render the conversation through the chat template."""
    turn_info: list[dict[str, Any]] = field(default_factory=list)
    """Per assistant turn, the env-contract facts of its step (:func:`turn_record`):
    ``tool_calls`` (the calls parsed from the reply), ``format_error``, ``error`` and
    ``reward_components`` when the env or a reward wrapper gives them. Traces and reports read
    it; trajectories written before it existed load with it empty."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Per-episode numbers: turns, tool calls, format errors, env-specific facts."""
    final_info: dict[str, Any] = field(default_factory=dict)
    """JSON-safe copy of the ``info`` dict of the last step."""
    prefill_tokens: int = 0
    """Prompt tokens the sampler had to compute over the whole episode."""
    cached_tokens: int = 0
    """Prompt tokens the sampler served from its cache over the whole episode."""
    sampled_tokens: int = 0
    """Tokens the model sampled (equals ``sum(loss_mask)`` unless turns were cut)."""
    policy_version: int | None = None
    """The trainer step whose weights sampled this episode (set by the trainer's rollout
    producers; ``None`` outside training). Staleness at train time is step - version."""

    @property
    def trainable_tokens(self) -> int:
        """Tokens that carry loss (``sum(loss_mask)``)."""
        return int(sum(self.loss_mask))

    @property
    def num_turns(self) -> int:
        return len(self.turn_spans)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}  # not asdict: it recurses without a limit
        d["turn_spans"] = [list(s) for s in self.turn_spans]
        d["trainable_tokens"] = self.trainable_tokens
        return json_safe(d)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        names = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names}
        kwargs["turn_spans"] = [tuple(s) for s in kwargs.get("turn_spans", [])]
        return cls(**kwargs)


def turn_record(info: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-safe facts of one step's ``info`` kept in :attr:`Trajectory.turn_info`.

    >>> turn_record({"tool_calls": [], "format_error": True, "error": "no_guess", "guess": None})
    {'tool_calls': [], 'format_error': True, 'error': 'no_guess'}
    """
    return json_safe({k: info[k] for k in TURN_KEYS if k in info})


def save_jsonl(trajectories: Iterable[Trajectory], path: str | os.PathLike, *, append: bool = False) -> Path:
    """Write trajectories to ``path``, one JSON object per line; returns the path.

    A new file is written whole or not at all: into a hidden file beside it, renamed into
    place at the end, so a run stopped while writing leaves the old file (or none), never a
    shorter one that reads as complete. ``append`` adds to the file as it goes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(target: Path, mode: str) -> None:
        with open(target, mode, encoding="utf-8") as f:
            for t in trajectories:
                f.write(json_line(t.to_dict()) + "\n")

    if append:
        write(path, "a")
        return path
    with atomic_path(path) as part:
        write(part, "w")
    return path


def iter_jsonl(path: str | os.PathLike) -> Iterator[Trajectory]:
    """Yield trajectories from a JSONL file written by :func:`save_jsonl`.

    A truncated last line (a run killed while writing) is skipped; any other broken line
    raises :class:`mtrl_gym.error.DatasetError` naming the file and line.
    """
    from mtrl_gym.error import DatasetError
    from mtrl_gym.jsonl import iter_jsonl

    for i, d in iter_jsonl(path):
        try:
            yield Trajectory.from_dict(d)
        except TypeError as e:
            raise DatasetError(f"not a trajectory record ({e})", path=str(path), line=i) from None


def load_jsonl(path: str | os.PathLike) -> list[Trajectory]:
    """Read all trajectories of a JSONL file (see :func:`iter_jsonl`)."""
    return list(iter_jsonl(path))


def meta_path(path: str | os.PathLike) -> Path:
    """The ``<path>.meta.json`` that describes how a trajectory file was made (demonstrations)."""
    return Path(str(path) + ".meta.json")


def read_meta(path: str | os.PathLike) -> dict[str, Any] | None:
    """The :func:`meta_path` file of ``path`` as a mapping, or None when there is none."""
    meta = meta_path(path)
    return json.loads(meta.read_text(encoding="utf-8")) if meta.is_file() else None
