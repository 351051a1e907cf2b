"""Demonstrations in, train sequences out, in a seeded epoch order that resumes exactly.

:func:`load_demonstrations` reads trajectory JSONL files (``mtrl-gym demos``) and turns
every trajectory with assistant tokens into a
:class:`~mtrl_gym.trainers.grpo.batching.TrainSequence` (the GRPO trainer's record: the
tokens up to the last target, the positions that predict a target, the targets).
:class:`DemoStream` hands out batches: each epoch is a permutation seeded by
``(seed, epoch)``, and its state (epoch, position) is saved in checkpoints.
:func:`distill_targets` gives, for the games of a constrained policy (``SFTConfig.distill``),
the tokens its constraint allows at each target.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from mtrl_gym.envs.external import refuse_training
from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.grpo.batching import TrainSequence, build_sequence
from mtrl_gym.rollout.trajectory import Trajectory, iter_jsonl

__all__ = ["load_demonstrations", "demo_sequences", "distill_targets", "DemoStream"]


def load_demonstrations(paths: Sequence[str | os.PathLike]) -> list[Trajectory]:
    """All trajectories of the files, in order; failed ones are skipped. Trajectories of an
    evaluation-only benchmark raise :class:`ConfigError` with its licence."""
    if not paths:
        raise ConfigError("no demonstration files given; make some with `mtrl-gym demos ... --out demos.jsonl`")
    out: list[Trajectory] = []
    for path in paths:
        if not os.path.isfile(path):
            raise ConfigError(f"demonstration file {str(path)!r} does not exist")
        out.extend(t for t in iter_jsonl(path) if not t.failed)
        refuse_training(trajectories=out, what=f"{path}: demonstration")
    return out


def demo_sequences(trajectories: Sequence[Trajectory], *, vocab_size: int | None = None,
                   start: int = 0) -> list[TrainSequence]:
    """One train sequence per trajectory with assistant tokens (targets = ``loss_mask == 1``),
    each indexed by its trajectory's position (plus ``start``)."""
    seqs = []
    for i, t in enumerate(trajectories, start):
        if vocab_size is not None and t.token_ids and max(t.token_ids) >= vocab_size:
            raise ConfigError(f"demonstration {i} ({t.task_id!r}) has token id {max(t.token_ids)} >= the model's "
                              f"vocabulary size {vocab_size}: it was made with another tokenizer")
        seq = build_sequence(t.token_ids, t.loss_mask, [0.0] * len(t.token_ids), 1.0, index=i)
        if seq is not None:
            seqs.append(seq)
    if not seqs:
        raise ConfigError("the demonstration files hold no assistant tokens to train on")
    return seqs


def distill_targets(trajectory: Trajectory, constraint: Any,
                    fitting: Sequence[Any | None] | None = None) -> list[list[int]]:
    """For each target of ``trajectory``'s train sequence (its ``loss_mask == 1`` tokens after
    the first), the token ids ``constraint`` (a
    :class:`~mtrl_gym.rollout.constraint.CompletionConstraint`) allows there, given the turn's
    tokens before it. ConfigError when a turn is not one of the constraint's completions (a
    game not played under it, or in another serving format): distillation trains toward the
    constrained policy, so every target must be a state that policy could reach.

    ``fitting``: one narrower constraint (or ``None``) per assistant turn, the actions that fit
    the board there. Where the turn's tokens so far still begin a fitting action, the target's
    allowed ids are those that continue one; past the point where the played action leaves
    them (or for a ``None`` turn), they are ``constraint``'s."""
    spans = sorted(trajectory.turn_spans)
    out: list[list[int]] = []
    turn = 0
    for p, m in enumerate(trajectory.loss_mask):
        if not m or p == 0:
            continue
        while turn < len(spans) and spans[turn][1] <= p:
            turn += 1
        if turn == len(spans) or p < spans[turn][0]:
            raise ConfigError(f"distillation game {trajectory.task_id!r}: token {p} is a target outside every "
                              "assistant turn; distil only games made by `learner_demos` or `mtrl-gym demos`")
        start = spans[turn][0]
        allowed = constraint.allowed_next(trajectory.token_ids[start:p])
        if allowed is None or trajectory.token_ids[p] not in allowed:
            raise ConfigError(f"distillation game {trajectory.task_id!r}: its turn {turn + 1} is not an action the "
                              f"constraint ({constraint!r}) allows: distil only games played with dictionary decoding "
                              "(serving.constrained), in the serving format of this run")
        narrow = fitting[turn] if fitting is not None and turn < len(fitting) else None
        fits = narrow.allowed_next(trajectory.token_ids[start:p]) if narrow is not None else None
        out.append(fits or allowed)
    return out


class DemoStream:
    """Batches of ``batch_size`` sequences, epoch after epoch, each epoch in its own seeded order."""

    def __init__(self, sequences: Sequence[TrainSequence], batch_size: int, seed: int):
        self.sequences = list(sequences)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.epoch = 0
        self.position = 0

    def __len__(self) -> int:
        return len(self.sequences)

    @property
    def epochs_done(self) -> float:
        return self.epoch + self.position / max(len(self.sequences), 1)

    def _order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.sequences))

    def next_batch(self) -> list[TrainSequence]:
        out: list[TrainSequence] = []
        while len(out) < self.batch_size:
            order = self._order(self.epoch)
            take = order[self.position:self.position + self.batch_size - len(out)]
            out.extend(self.sequences[i] for i in take)
            self.position += len(take)
            if self.position >= len(order):
                self.epoch, self.position = self.epoch + 1, 0
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
