"""Sampling with a transformers causal LM (CPU or GPU), batched, with per-episode KV reuse.

:class:`HFSampler` samples every request of a call in one batch (left padding, explicit
position ids), token by token, with its own decoding loop: per-request temperature,
top-k, top-p, seed, stop strings and stop tokens, and the log-probability of every sampled
token (see :mod:`mtrl_gym.rollout.samplers.base` for the conventions).

KV reuse. A multi-turn episode's next prompt is its previous prompt, the sampled turn and
the environment reply. When a request carries a ``session_id``, the sampler keeps that
episode's key/value tensors after the call; the next request of the session whose prompt
extends the cached tokens exactly only prefills the new tokens, so each context token is
computed once per episode (prefill work linear in episode length, not quadratic).

Episodes of a batch have different cached lengths. The batch cache is built by placing
each episode's cached keys/values at the right end of a common past (zeros on the left),
the new tokens are left-padded, and the 2-D attention mask marks the holes; position ids
are given explicitly, so every token keeps the position it had when it was computed. Keys
in a transformers cache are stored after the rotary embedding, so moving them to another
slot does not change attention. Results equal sampling from scratch up to float rounding
(``tests/rollout/samplers/test_samplers_hf.py`` checks greedy tokens and log-probs).

Shared prompts. Requests without a cached past whose prompts are identical (the episodes
of one GRPO group on their first turn) are prefilled once and the keys/values copied to
every row; the copies report their prompt as cached.

Reuse is on for models whose cache is a plain :class:`transformers.DynamicCache` of full
attention layers (Llama, Qwen2/3, Mistral without sliding window, SmolLM, Phi-3, ...).
Sliding-window, hybrid or recurrent caches fall back to a full prefill each call.
Memory: ``2 * layers * kv_heads * head_dim * bytes`` per cached token (SmolLM2-135M in
fp32: 46 KB), freed by :meth:`HFSampler.end_session` (the rollout engine calls it when an
episode ends) and bounded by ``max_sessions``.
"""

from __future__ import annotations

import inspect
import random
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mtrl_gym.error import ConfigError, DependencyNotInstalled
from mtrl_gym.rollout.samplers.base import SampleRequest, SampleResult, Sampler, SamplingParams

__all__ = ["HFSampler", "filter_logits", "sample_next"]


def _torch():
    try:
        import torch
    except ImportError:
        raise DependencyNotInstalled("torch", hint='pip install torch "mtrl-gym[train]"') from None
    return torch


def filter_logits(logits, *, top_k: int = 0, top_p: float = 1.0):
    """Set logits outside the top-k / nucleus (top-p) set to ``-inf``.

    ``logits``: ``[..., vocab]``. top-p keeps the smallest set of most likely tokens whose
    probability sums to at least ``top_p`` (always at least one token).
    """
    torch = _torch()
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass of strictly more likely tokens
        drop_sorted = before >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_next(logits, params: SamplingParams, generator=None, allowed: Sequence[int] | None = None
                ) -> tuple[int, float]:
    """Draw one token from ``logits`` (``[vocab]``, float32); return ``(token, logprob)``.

    The log-prob is under ``log_softmax(logits / temperature)`` before top-k/top-p (under
    the raw logits when ``temperature == 0``, which picks the argmax). ``allowed`` (a
    constraint's next token ids) masks every other token first: the log-prob is then under
    the masked, renormalised distribution.
    """
    torch = _torch()
    if allowed is not None:
        keep = torch.full_like(logits, float("-inf"))
        index = torch.tensor(list(allowed), dtype=torch.long, device=logits.device)
        logits = keep.index_copy(0, index, logits.index_select(0, index))
    if params.temperature == 0:
        token = int(torch.argmax(logits))
        return token, float(torch.log_softmax(logits, dim=-1)[token])
    scaled = logits / params.temperature
    logp = torch.log_softmax(scaled, dim=-1)
    probs = torch.softmax(filter_logits(scaled, top_k=params.top_k, top_p=params.top_p), dim=-1)
    token = int(torch.multinomial(probs, 1, generator=generator))
    return token, float(logp[token])


@dataclass
class _Session:
    """Cached state of one episode: ``token_ids`` and their keys/values per layer
    (``[kv_heads, len(token_ids), head_dim]`` each)."""

    token_ids: list[int]
    keys: list[Any]
    values: list[Any]


@dataclass
class _Row:
    """One request in flight."""

    index: int
    request: SampleRequest
    max_new: int
    stop_ids: frozenset[int]
    generator: Any
    past: _Session | None = None
    new_ids: list[int] = field(default_factory=list)
    out: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str | None = None
    error: str | None = None
    shared: bool = False
    """The prompt was prefilled once for an identical prompt of the same batch (a GRPO group)."""

    @property
    def past_len(self) -> int:
        return len(self.past.token_ids) if self.past is not None else 0


class HFSampler(Sampler):
    """Batched sampling from a transformers causal LM, with KV reuse across an episode's turns.

    Args:
        model: a ``transformers`` causal LM (or a peft model around one). It is put in eval
            mode while sampling and restored afterwards, so the trainer can share it.
        tokenizer: its tokenizer (EOS ids, stop strings).
        kv_reuse: keep each session's KV cache between calls. ``None`` (default) enables it
            when the model's cache allows (see module docstring); ``True`` requires it.
        max_batch_size: most requests per forward batch; ``None`` samples all at once.
        max_sessions: most cached sessions (least recently used dropped first); ``None``
            keeps them until :meth:`end_session`.
        seed: seeds the draws of requests whose ``params.seed`` is ``None``.

    ``stats`` counts, over the sampler's life, ``prompt_tokens``, ``cached_tokens`` (prompt
    tokens not recomputed thanks to KV reuse), ``prefill_tokens``, ``sampled_tokens``,
    ``forward_calls`` and ``padded_tokens`` (token slots computed for padding).
    """

    name = "hf"
    supports_constraints = True

    def __init__(self, model, tokenizer, *, kv_reuse: bool | None = None, max_batch_size: int | None = None,
                 max_sessions: int | None = None, seed: int | None = None):
        torch = _torch()
        if max_batch_size is not None and max_batch_size < 1:
            raise ConfigError(f"`max_batch_size` must be >= 1 or None, got {max_batch_size!r}")
        if max_sessions is not None and max_sessions < 0:
            raise ConfigError(f"`max_sessions` must be >= 0 or None, got {max_sessions!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.max_sessions = max_sessions
        self._rng = random.Random(seed)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self._config = base.config.get_text_config(decoder=True) if hasattr(base.config, "get_text_config") \
            else base.config
        params = inspect.signature(base.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._logits_kw = "logits_to_keep" in params
        self._plain_cache = self._has_plain_cache(base)
        if kv_reuse and not self._plain_cache:
            raise ConfigError(f"kv_reuse=True needs a model with a plain full-attention DynamicCache; "
                              f"{type(base).__name__} uses another cache. Pass kv_reuse=None or False.")
        self.kv_reuse = self._plain_cache if kv_reuse is None else bool(kv_reuse)
        self.eos_token_ids = self._eos_ids(base, tokenizer)
        self.max_context_length: int | None = getattr(self._config, "max_position_embeddings", None)
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self.stats = dict.fromkeys(("prompt_tokens", "cached_tokens", "prefill_tokens", "sampled_tokens",
                                    "forward_calls", "padded_tokens"), 0)
        self._device = next(base.parameters()).device
        self._torch = torch
        self.on_tokens: Callable[[int], None] | None = None
        """Called with the number of tokens sampled at each decoding step (progress bars)."""
        self.bucket_cost_tokens = 80
        """What one more decoding forward pass costs, in prefill tokens: the requests of a call are
        split into batches of similar new-token counts (:func:`prefill_buckets`) when the padding
        this saves outweighs the extra passes; 0 never splits."""

    @staticmethod
    def _has_plain_cache(base) -> bool:
        try:
            from transformers import DynamicCache
            from transformers.cache_utils import DynamicLayer

            cache = DynamicCache(config=base.config)
        except Exception:  # noqa: BLE001 - any failure means "not a plain cache"
            return False
        layers = getattr(cache, "layers", None)
        return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)

    @staticmethod
    def _eos_ids(base, tokenizer) -> frozenset[int]:
        ids: set[int] = set()
        gen = getattr(getattr(base, "generation_config", None), "eos_token_id", None)
        for value in (gen, getattr(tokenizer, "eos_token_id", None)):
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(int(v) for v in value)
        return frozenset(ids)

    # ------------------------------------------------------------------ public

    def sample(self, requests: Sequence[SampleRequest]) -> list[SampleResult]:
        results: list[SampleResult | None] = [None] * len(requests)
        rows: list[_Row] = []
        claimed: set[str] = set()
        for i, req in enumerate(requests):
            row_or_error = self._make_row(i, req, claimed)
            if isinstance(row_or_error, SampleResult):
                results[i] = row_or_error
            else:
                rows.append(row_or_error)
        size = self.max_batch_size or max(len(rows), 1)
        chunks = [bucket for start in range(0, len(rows), size)
                  for bucket in prefill_buckets(rows[start:start + size], self.bucket_cost_tokens)]
        for chunk in chunks:
            try:
                self._run(chunk)
            except Exception as e:  # noqa: BLE001 - a failing batch becomes error results
                for row in chunk:
                    row.finish, row.error, row.out, row.logprobs = "error", f"{type(e).__name__}: {e}", [], []
                    self.end_session(row.request.session_id or "")
            for row in chunk:
                results[row.index] = self._result(row)
        return results  # type: ignore[return-value]

    def end_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def update_policy(self, model=None, *, adapter_path: str | None = None, version: int | None = None) -> None:
        """The weights changed: cached keys/values are stale, drop them all.

        ``model`` replaces the sampled model. ``adapter_path`` (a folder written by peft's
        ``save_pretrained``) is copied into the model's LoRA adapter, which must have the
        same rank and target modules; a model without a LoRA adapter, a folder without
        ``adapter_model.safetensors`` or tensors that do not fit raise :class:`ConfigError`
        and leave the weights as they were.
        """
        if model is not None:
            self.model = model
        if adapter_path is not None:
            _load_lora_tensors(self.model, adapter_path)
        self._sessions.clear()

    def close(self) -> None:
        self._sessions.clear()

    @property
    def num_sessions(self) -> int:
        """Sessions whose KV cache is held."""
        return len(self._sessions)

    # ------------------------------------------------------------------ rows

    def _make_row(self, index: int, req: SampleRequest, claimed: set[str]) -> _Row | SampleResult:
        prompt = list(req.prompt_ids)
        if not prompt:
            return SampleResult([], [], "error", error="the prompt is empty")
        vocab = getattr(self._config, "vocab_size", None)
        if vocab is not None and (min(prompt) < 0 or max(prompt) >= vocab):
            bad = next(t for t in prompt if t < 0 or t >= vocab)
            return SampleResult([], [], "error", prompt_tokens=len(prompt),
                                error=f"token id {bad} is outside the model's vocabulary (0..{vocab - 1})")
        max_new = req.params.max_new_tokens
        if self.max_context_length is not None:
            room = self.max_context_length - len(prompt)
            if room < 1:
                return SampleResult([], [], "error", prompt_tokens=len(prompt),
                                    error=f"the prompt has {len(prompt)} tokens; the model's context is "
                                          f"{self.max_context_length} positions")
            max_new = min(max_new, room)
        seed = req.params.seed if req.params.seed is not None else self._rng.getrandbits(63)
        gen = self._torch.Generator(device=self._device).manual_seed(int(seed))
        row = _Row(index, req, max_new, self.eos_token_ids | set(req.params.stop_token_ids), gen)
        sid = req.session_id
        session = self._sessions.pop(sid, None) if (sid and self.kv_reuse and sid not in claimed) else None
        if sid:
            claimed.add(sid)
        if session is not None:
            n = len(session.token_ids)
            # Re-use only an exact prefix, and leave at least one token to compute the logits from.
            if n < len(prompt) and prompt[:n] == session.token_ids:
                row.past = session
        row.new_ids = prompt[row.past_len:]
        return row

    def _result(self, row: _Row) -> SampleResult:
        prompt_tokens = len(row.request.prompt_ids)
        if row.finish == "error":
            return SampleResult([], [], "error", prompt_tokens=prompt_tokens, error=row.error)
        cached = prompt_tokens if row.shared else row.past_len
        return SampleResult(list(row.out), list(row.logprobs), row.finish or "length",
                            prompt_tokens=prompt_tokens, cached_tokens=cached)

    # ------------------------------------------------------------------ decoding loop

    def _run(self, rows: list[_Row]) -> None:
        torch = self._torch
        with torch.inference_mode(), _eval_mode(self.model), _contiguous_head_input(self.model):
            unique, index = self._share_prompts(rows)
            cache, attn, ids, pos = self._prefill_inputs(unique)
            logits = self._forward(ids, attn, pos, cache)
            if len(unique) < len(rows):  # copy the shared prompts' keys/values to every row
                select = torch.tensor(index, device=self._device)
                cache.batch_select_indices(select)
                attn, logits = attn[select], logits[select]
            active = list(rows)
            while True:
                for b, row in enumerate(active):
                    constraint = row.request.params.constraint
                    allowed = constraint.allowed_next(row.out) if constraint is not None else None
                    token, logprob = sample_next(logits[b], row.request.params, row.generator, allowed)
                    row.out.append(token)
                    row.logprobs.append(logprob)
                    row.finish = self._finish_reason(row)
                self.stats["sampled_tokens"] += len(active)
                if self.on_tokens is not None:
                    self.on_tokens(len(active))
                done = [b for b, row in enumerate(active) if row.finish is not None]
                for b in done:
                    self._store(active[b], cache, b, attn[b])
                if len(done) == len(active):
                    return
                if done:
                    keep = [b for b in range(len(active)) if b not in set(done)]
                    active = [active[b] for b in keep]
                    attn = self._select_rows(cache, attn, keep)
                ids = torch.tensor([[row.out[-1]] for row in active], device=self._device)
                pos = torch.tensor([[row.past_len + len(row.new_ids) + len(row.out) - 1] for row in active],
                                   device=self._device)
                attn = torch.cat([attn, attn.new_ones((len(active), 1))], dim=1)
                logits = self._forward(ids, attn, pos, cache)

    def _share_prompts(self, rows: list[_Row]) -> tuple[list[_Row], list[int]]:
        """Rows to prefill, and for every row the index of the prefilled row it copies.

        Rows without a cached past whose prompts are identical (the episodes of one GRPO
        group on their first turn) are computed once; the copies count their prompt as
        cached. Rows with a past are never shared (their sessions differ).
        """
        unique: list[_Row] = []
        index: list[int] = []
        first: dict[tuple[int, ...], int] = {}
        for row in rows:
            key = tuple(row.new_ids) if row.past is None else None
            if key is not None and key in first:
                row.shared = True
                index.append(first[key])
                continue
            if key is not None:
                first[key] = len(unique)
            index.append(len(unique))
            unique.append(row)
        for row in rows:
            if row.shared:
                self.stats["prompt_tokens"] += len(row.new_ids)
                self.stats["cached_tokens"] += len(row.new_ids)
        return unique, index

    def _finish_reason(self, row: _Row) -> str | None:
        if row.out[-1] in row.stop_ids:
            return "stop"
        constraint = row.request.params.constraint
        if constraint is not None and constraint.is_complete(row.out):
            return "stop"
        stops = row.request.params.stop
        if stops:
            window = 4 * max(len(s) for s in stops) + 4
            tail = self.tokenizer.decode(row.out[-window:], skip_special_tokens=False,
                                         clean_up_tokenization_spaces=False)
            if any(s in tail for s in stops):
                return "stop"
        if len(row.out) >= row.max_new:
            return "length"
        return None

    def _prefill_inputs(self, rows: list[_Row]):
        """Batch cache (each row's past right-aligned), left-padded new tokens, mask, positions."""
        from transformers import DynamicCache

        torch = self._torch
        B = len(rows)
        past_max = max(row.past_len for row in rows)
        new_max = max(len(row.new_ids) for row in rows)
        attn = torch.zeros((B, past_max + new_max), dtype=torch.long, device=self._device)
        ids = torch.zeros((B, new_max), dtype=torch.long, device=self._device)
        pos = torch.zeros((B, new_max), dtype=torch.long, device=self._device)
        for b, row in enumerate(rows):
            n, p = len(row.new_ids), row.past_len
            attn[b, past_max - p:past_max] = 1
            attn[b, past_max + new_max - n:] = 1
            ids[b, new_max - n:] = torch.tensor(row.new_ids, device=self._device)
            pos[b, new_max - n:] = torch.arange(p, p + n, device=self._device)
        data = None
        if past_max:
            data = []
            ref = next(row.past for row in rows if row.past is not None)
            for layer in range(len(ref.keys)):
                shape = (B, ref.keys[layer].shape[0], past_max, ref.keys[layer].shape[-1])
                k = ref.keys[layer].new_zeros(shape)
                v = ref.values[layer].new_zeros(shape[:3] + ref.values[layer].shape[-1:])
                for b, row in enumerate(rows):
                    if row.past is not None:
                        k[b, :, past_max - row.past_len:] = row.past.keys[layer]
                        v[b, :, past_max - row.past_len:] = row.past.values[layer]
                        # the batch cache holds them now: free the session's copy layer by layer, so the
                        # cached keys/values of a turn are never held twice (the row keeps its token ids)
                        row.past.keys[layer] = row.past.values[layer] = None
                data.append((k, v))
        cache = DynamicCache(ddp_cache_data=data, config=self.model.config) if data else \
            DynamicCache(config=self.model.config)
        for row in rows:
            self.stats["prompt_tokens"] += row.past_len + len(row.new_ids)
            self.stats["cached_tokens"] += row.past_len
            self.stats["prefill_tokens"] += len(row.new_ids)
        self.stats["padded_tokens"] += B * new_max - sum(len(r.new_ids) for r in rows)
        return cache, attn, ids, pos

    def _forward(self, ids, attn, pos, cache):
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True}
        if self._logits_kw:
            kwargs["logits_to_keep"] = 1
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, **kwargs)
        self.stats["forward_calls"] += 1
        return out.logits[:, -1, :].float()

    def _select_rows(self, cache, attn, keep: list[int]):
        """Drop finished rows from the batch, and left columns no remaining row attends to."""
        torch = self._torch
        index = torch.tensor(keep, device=self._device)
        cache.batch_select_indices(index)
        attn = attn[index]
        if self._plain_cache:
            used = attn.any(dim=0).nonzero()
            first = int(used[0]) if len(used) else 0
            if first > 0:
                for layer in cache.layers:
                    layer.keys = layer.keys[:, :, first:]
                    layer.values = layer.values[:, :, first:]
                attn = attn[:, first:]
        return attn

    def _store(self, row: _Row, cache, b: int, attn_row) -> None:
        """Keep the row's keys/values (all its tokens but the last sampled one) for its session."""
        sid = row.request.session_id
        if not sid or not self.kv_reuse or self.max_sessions == 0:
            return
        valid = attn_row.bool()
        token_ids = list(row.request.prompt_ids) + row.out[:-1]
        keys = [layer.keys[b][:, valid] for layer in cache.layers]
        values = [layer.values[b][:, valid] for layer in cache.layers]
        if keys[0].shape[1] != len(token_ids):  # never expected; a wrong cache must not be reused
            return
        self._sessions[sid] = _Session(token_ids, keys, values)
        self._sessions.move_to_end(sid)
        while self.max_sessions is not None and len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)


def prefill_buckets(rows: list[_Row], pass_cost: int) -> list[list[_Row]]:
    """``rows`` split into batches that pad their prefill less (rows keep their order within a batch).

    A batch prefills every row to its longest new-token count; rows whose counts differ a lot
    (a long tool reply beside short ones) waste most of that work. The rows are sorted by
    their count and cut where the padding saved exceeds the cost of the extra batch, about
    ``pass_cost`` prefill tokens for each decoding step it adds (its largest ``max_new``). Rows
    with the same prompt and no past (a group's first turn, computed once) stay together and
    count once. At most four batches; ``pass_cost = 0`` keeps one.

    >>> from types import SimpleNamespace as R
    >>> rows = [R(index=i, new_ids=[1] * n, past=None, max_new=6) for i, n in enumerate([10, 300, 12, 310])]
    >>> [[r.index for r in b] for b in prefill_buckets(rows, 80)]
    [[0, 2], [1, 3]]
    >>> [[r.index for r in b] for b in prefill_buckets(rows, 0)]
    [[0, 1, 2, 3]]
    """
    if pass_cost <= 0 or len(rows) < 2:
        return [rows]
    order = sorted(rows, key=lambda r: (len(r.new_ids), r.past is None, tuple(r.new_ids) if r.past is None else (),
                                        r.index))
    weight = [1] * len(order)  # a row whose prompt the previous row already computes costs nothing
    for i in range(1, len(order)):
        a, b = order[i - 1], order[i]
        if a.past is None and b.past is None and a.new_ids == b.new_ids:
            weight[i] = 0
    prefix = [0]
    for w in weight:
        prefix.append(prefix[-1] + w)
    lengths = [len(r.new_ids) for r in order]
    penalty = pass_cost * max(r.max_new for r in order)
    # cut only where the count changes, and at most at 64 candidate places
    cuts = [i for i in range(1, len(order)) if lengths[i] != lengths[i - 1]]
    if len(cuts) > 64:
        cuts = [cuts[round(k * (len(cuts) - 1) / 63)] for k in range(64)]
    points = [0, *cuts, len(order)]

    def cost(i: int, j: int) -> int:  # batch order[points[i]:points[j]]
        return (prefix[points[j]] - prefix[points[i]]) * lengths[points[j] - 1]

    n, most = len(points) - 1, 4
    best = {(0, 0): (0, -1)}  # (end point, batches) -> (cost, previous end point)
    for k in range(1, most + 1):
        for j in range(1, n + 1):
            options = [(best[(i, k - 1)][0] + cost(i, j), i) for i in range(j) if (i, k - 1) in best]
            if options:
                best[(j, k)] = min(options)
    k = min((best[(n, k)][0] + (k - 1) * penalty, k) for k in range(1, most + 1) if (n, k) in best)[1]
    bounds, j = [], n
    while k > 0:
        i = best[(j, k)][1]
        bounds.append((points[i], points[j]))
        j, k = i, k - 1
    batches = [sorted(order[a:b], key=lambda r: r.index) for a, b in reversed(bounds)]
    return [b for b in batches if b]


@contextmanager
def _eval_mode(model):
    was_training = getattr(model, "training", False)
    if was_training:
        model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train()


def _output_projection(model):
    """The vocabulary projection of ``model`` (of its base model under a peft wrapper), or None."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None


@contextmanager
def _contiguous_head_input(model):
    """Give the output projection a contiguous input while sampling.

    With ``logits_to_keep=1`` a prefill hands the vocabulary projection the view
    ``hidden[:, -1:, :]`` of a multi-row batch, strided by the whole prompt. CPU matmul
    kernels can take a slow path on such a view: on a 2-core Intel Xeon with AMX the SmolLM2
    projection (49,152 x 576) took 1.2 s for 16 rows in bfloat16 against 4 ms on a
    contiguous copy (6x slower in float32), a third or more of a held-out Wordle game's
    bfloat16 time. The copy is 16 x 576 values; the logits are the same bit for bit in
    bfloat16 (float32 kernels may round the last bit differently).
    ``benchmarks/sampler_head_cpu.py`` measures it.
    """
    head = _output_projection(model)
    if head is None:
        yield
        return
    handle = head.register_forward_pre_hook(
        lambda _module, args: tuple(a.contiguous() if hasattr(a, "contiguous") else a for a in args))
    try:
        yield
    finally:
        handle.remove()


def _load_lora_tensors(model: Any, folder: str) -> None:
    """Copy the LoRA tensors of a peft adapter folder into ``model``'s adapter, all or none."""
    import os

    if not hasattr(model, "peft_config"):
        raise ConfigError(f"the sampled model has no LoRA adapter to load {folder!r} into; serve a peft model "
                          "(mtrl-gym serve --adapter <folder>) or restart with the new weights")
    file = os.path.join(folder, "adapter_model.safetensors")
    if not os.path.isfile(file):
        raise ConfigError(f"{folder!r} has no adapter_model.safetensors (save it with peft's save_pretrained)")
    from safetensors.torch import load_file

    try:
        tensors = load_file(file)
    except Exception as e:  # noqa: BLE001 - a truncated or foreign file
        raise ConfigError(f"cannot read {file!r}: {type(e).__name__}: {e}") from None
    current = {n: p for n, p in model.named_parameters() if "lora_" in n}
    before = {n: p.detach().clone() for n, p in current.items()}
    from peft import set_peft_model_state_dict

    try:
        result = set_peft_model_state_dict(model, tensors)
    except RuntimeError as e:  # shapes that do not fit (another rank)
        problem = f"{str(e).splitlines()[0][:300]}"
    else:
        unexpected = list(getattr(result, "unexpected_keys", None) or [])
        missing = [k for k in getattr(result, "missing_keys", None) or [] if "lora_" in k]
        problem = f"unexpected tensors {unexpected[:3]}" if unexpected else \
            f"tensors missing for {missing[:3]}" if missing else None
    if problem is not None:
        import torch

        with torch.no_grad():
            for n, p in current.items():
                p.copy_(before[n])
        raise ConfigError(f"the adapter in {folder!r} does not fit the sampled model: {problem}")
