"""The policy service: chat and completion requests in, sampled turns recorded per session.

:class:`PolicyService` is the server without HTTP: it checks a request
(:mod:`~mtrl_gym.serve.protocol`), finds its session, renders the prompt token-exactly
(:mod:`~mtrl_gym.serve.sessions`), hands the sample request to the batching
:class:`~mtrl_gym.serve.worker.SamplerWorker`, and when the tokens come back records the
turn and builds the OpenAI response. Requests are split in two calls,
:meth:`PolicyService.start_chat` (returns a :class:`Pending` whose ``future`` the caller
awaits) and :meth:`PolicyService.finish_chat`, so an asyncio web app never blocks on the
sampler.

Sampling settings. By default a request's ``temperature``, ``top_p``, ``top_k``,
``max_tokens``, ``stop`` and ``seed`` are used (defaults: 1.0, 1.0, off,
``ServeConfig.max_new_tokens``). A trainer sets ``ServeConfig.sampling``: its
temperature, top-p and top-k then replace the request's (the update computes log-probs
with the same temperature), its ``max_new_tokens`` caps the request's and its stop
strings are added. ``ServeConfig.stop`` is added to every chat request's stop strings, and
``ServeConfig.assistant_prefix`` starts every chat turn (a format prefill: see
:mod:`~mtrl_gym.serve.sessions`); ``mtrl-gym serve --adapter`` sets both from the adapter's
training run. A request without a seed gets one derived from the server seed, the
session's creation number and seed and the turn number, so a rerun that creates its
sessions in the same order samples the same tokens.

Access. Every request carries a bearer token (the OpenAI clients' ``api_key``): the
server's key (:attr:`PolicyService.api_key`) reaches every route; a session's own key
(:attr:`~mtrl_gym.serve.sessions.Session.key`, returned when the session is created)
reaches that session's routes and nothing else. Session ids and keys are drawn by the
server with :mod:`secrets`; a caller cannot choose them. :meth:`PolicyService.authorize`
holds the rules (docs/agents.md, "Security").
"""

from __future__ import annotations

import dataclasses
import hmac
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mtrl_gym.error import ConfigError
from mtrl_gym.serve import protocol
from mtrl_gym.serve.protocol import ApiError, ChatRequest, CompletionRequest
from mtrl_gym.serve.sessions import (
    ChatCapture,
    PreparedTurn,
    Segment,
    Session,
    assistant_reply,
)
from mtrl_gym.serve.worker import SamplerWorker
from mtrl_gym.rollout.template import ChatRenderer
from mtrl_gym.rollout.samplers.base import (
    Sampler,
    SampleRequest,
    SampleResult,
    SamplingParams,
)

__all__ = ["SERVER", "Pending", "PolicyService", "ServeConfig"]

#: Who a request is: the server's key holder, or the holder of one session's key.
SERVER = "server"


@dataclass
class ServeConfig:
    """How the policy endpoint serves and records requests."""

    model_name: str = "policy"
    """The model id clients send (``GET /v1/models`` lists it); any other id is a 404."""
    max_new_tokens: int = 256
    """Default ``max_tokens`` of a request that sets none."""
    assistant_prefix: str = ""
    """Text every chat turn starts with (a format prefill, as the model was trained): written
    after the generation prompt, its tokens are context, and the reply's text starts with it
    (a prefill that opens a tool call comes back as ``tool_calls`` when the request offers
    that tool; with ``tool_choice: "none"`` or no tools, as text). Its tokens are in the
    response's ``prompt_token_ids``, not in ``token_ids`` or ``logprobs``, which cover the
    sampled tokens. ``/v1/completions`` prompts are the client's own and get none."""
    stop: tuple[str, ...] = ()
    """Stop strings added to every chat request's (the completing token is kept); like the
    prefill, not to ``/v1/completions``."""
    tool_schemas: bool = True
    """``False``: a chat request's ``tools`` are not shown to the model (its prompt is
    rendered without their schemas, as for a model trained with ``SystemPrompt(tools=False)``),
    while its replies are still parsed into ``tool_calls`` of those tools."""
    max_context_tokens: int | None = None
    """Most tokens of a session's context (prompt + sampled); ``None``: the sampler's
    context length. A request whose prompt leaves no room is a 400 ``context_length_exceeded``."""
    sampling: SamplingParams | None = None
    """Sampling settings that override the request's (see the module docstring); ``None``
    serves what the request asks."""
    seed: int = 0
    """Base of the seeds of requests that set none."""
    gather_s: float = 0.05
    """Longest gap between other sessions' arriving requests the batcher waits for before
    sampling (never more than ``10 * gather_s`` in all)."""
    max_batch_size: int | None = None
    """Most requests per sampler call; ``None``: every waiting request."""
    max_open_sessions: int = 4096
    """Open sessions allowed at once; creating more is a 429."""
    tools_in_template: bool | None = None
    """Pass tools to the chat template (True), into the system prompt (False), or detect (None)."""
    api_key: str | None = None
    """The server's key: every request sends it (or a session's own key) as
    ``Authorization: Bearer <key>``, the OpenAI clients' ``api_key``. None: a random key is
    drawn at start (read it from ``PolicyService.api_key``)."""
    require_api_key: bool = True
    """False serves every request without a key; :class:`~mtrl_gym.serve.app.PolicyServer`
    then refuses to listen on anything but a loopback address."""
    closed_session_ttl_s: float | None = 600.0
    """Seconds a closed session's record stays readable (``GET /sessions/<id>``) before it
    is removed; at most ``max_open_sessions`` closed records are kept, the oldest removed
    first. None: closed records stay until deleted (the trainer pops every session itself)."""

    def __post_init__(self) -> None:
        if not isinstance(self.model_name, str) or not self.model_name:
            raise ConfigError(f"`model_name` must be a non-empty string, got {self.model_name!r}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"`max_new_tokens` must be >= 1, got {self.max_new_tokens!r}")
        if not isinstance(self.assistant_prefix, str):
            raise ConfigError(f"`assistant_prefix` must be a string, got {type(self.assistant_prefix).__name__}")
        if not isinstance(self.tool_schemas, bool):
            raise ConfigError(f"`tool_schemas` must be true or false, got {self.tool_schemas!r}")
        self.stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        if any(not isinstance(x, str) or not x for x in self.stop):
            raise ConfigError(f"`stop` must be non-empty strings, got {list(self.stop)!r}")
        if self.max_context_tokens is not None and self.max_context_tokens < 2:
            raise ConfigError(f"`max_context_tokens` must be >= 2 or None, got {self.max_context_tokens!r}")
        if not (self.gather_s >= 0 and math.isfinite(self.gather_s)):
            raise ConfigError(f"`gather_s` must be a finite number >= 0, got {self.gather_s!r}")
        if self.max_open_sessions < 1:
            raise ConfigError(f"`max_open_sessions` must be >= 1, got {self.max_open_sessions!r}")
        if self.sampling is not None and not isinstance(self.sampling, SamplingParams):
            raise ConfigError(f"`sampling` must be a SamplingParams or None, got {type(self.sampling).__name__}")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key
                                         or not self.api_key.isprintable() or any(c.isspace() for c in self.api_key)):
            kind = type(self.api_key).__name__ if not isinstance(self.api_key, str) else \
                "an empty string" if not self.api_key else "a string with spaces or control characters"
            raise ConfigError(f"`api_key` must be a non-empty string without spaces (or None to draw one), got {kind} "
                              "(the value is not shown)")
        if self.closed_session_ttl_s is not None and not (self.closed_session_ttl_s > 0
                                                           and math.isfinite(self.closed_session_ttl_s)):
            raise ConfigError(f"`closed_session_ttl_s` must be a finite number > 0 or None, got "
                              f"{self.closed_session_ttl_s!r}")


@dataclass
class Pending:
    """A request being sampled: await ``future``, then call :meth:`PolicyService.finish_chat`."""

    request: ChatRequest | CompletionRequest
    session: Session | None
    turn: PreparedTurn
    prompt_ids: list[int]
    future: Future
    done: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class PolicyService:
    """OpenAI-compatible chat/completions over a sampler, with token-exact session capture.

    Args:
        sampler: any :class:`~mtrl_gym.rollout.samplers.base.Sampler` (HF, vLLM, OpenAI).
        tokenizer: the policy's tokenizer (its chat template renders the messages).
        config: a :class:`ServeConfig`; keyword arguments override its fields.
    """

    def __init__(self, sampler: Sampler, tokenizer, config: ServeConfig | None = None, **overrides: Any):
        config = config or ServeConfig()
        self.config = dataclasses.replace(config, **overrides) if overrides else config
        self.sampler = sampler
        self.tokenizer = tokenizer
        ends = set(getattr(sampler, "eos_token_ids", ()) or ())
        if tokenizer.eos_token_id is not None:
            ends.add(int(tokenizer.eos_token_id))
        self.renderer = ChatRenderer(tokenizer, tools_in_template=self.config.tools_in_template,
                                     end_token_ids=sorted(ends))
        self.capture = ChatCapture(self.renderer, self.config.assistant_prefix, self.config.tool_schemas)
        self.reload_warnings: Callable[[str], list[str]] | None = None
        """``adapter_path -> [difference, ...]``: how this server's settings differ from those the
        adapter was trained with, for :meth:`reload_policy`'s response (None: not checked)."""
        self._sessions: dict[str, Session] = {}
        self._keys: dict[str, str] = {}  # session key -> session id
        self._closed: OrderedDict[str, float] = OrderedDict()  # closed session id -> when, oldest first
        self._open = 0
        self._created = 0
        self._lock = threading.Lock()
        self.api_key: str | None = (self.config.api_key or f"mtrl-key-{secrets.token_urlsafe(24)}") \
            if self.config.require_api_key else None
        """The server's key (None when ``require_api_key`` is off)."""
        self._vocab = len(tokenizer)
        self.policy_version: int | None = None
        """Version of the last :meth:`reload_policy` (None: the weights it started with)."""
        self.worker = SamplerWorker(sampler, live=self.live_sessions, gather_s=self.config.gather_s,
                                    max_batch_size=self.config.max_batch_size)

    # ------------------------------------------------------------------ sessions

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.config.model_name, "object": "model", "created": 0,
                                            "owned_by": "mtrl-gym"}]}

    def create_session(self, *, seed: int | None = None, meta: Mapping[str, Any] | None = None) -> Session:
        """A new open session; the server draws its id and its key (``session.key``)."""
        with self._lock:
            self._reap(time.monotonic())
            if self._open >= self.config.max_open_sessions:
                raise ApiError(f"{self.config.max_open_sessions} sessions are open; report rewards or close "
                               "sessions first", status=429, code="too_many_sessions")
            sid = secrets.token_urlsafe(18)
            while sid in self._sessions:  # pragma: no cover - 144 random bits
                sid = secrets.token_urlsafe(18)
            self._created += 1
            session = Session(id=sid, seed=int(seed) if seed is not None else self._created, meta=dict(meta or {}),
                              key=f"mtrl-sess-{secrets.token_urlsafe(24)}", number=self._created)
            self._sessions[sid] = session
            self._keys[session.key] = sid
            self._open += 1
        return session

    def authorize(self, token: str | None, session_id: str | None = None) -> str:
        """Who sends ``token`` (a request's bearer token) to a route of ``session_id`` (None:
        a route of no session): :data:`SERVER` or the session's id.

        Raises :class:`ApiError`: 401 without a token or with one this server never issued;
        404 for a session's key sent to another session (as for an unknown one, so a key
        tells nothing about other sessions); 403 for a session's key on a route of no
        session (creating sessions, reloading weights, unrecorded sampling).
        """
        if self.api_key is None:
            return SERVER
        if not token:
            raise ApiError("this server needs an API key: send `Authorization: Bearer <key>` (the OpenAI client's "
                           "`api_key`); `mtrl-gym serve` prints the key, POST /sessions returns a session's key",
                           status=401, code="missing_api_key")
        if hmac.compare_digest(token.encode("utf-8", "replace"), self.api_key.encode()):
            return SERVER
        with self._lock:
            owner = self._keys.get(token)
        if owner is None:
            raise ApiError("the API key is not valid for this server (keys of deleted or expired sessions stop "
                           "working)", status=401, code="invalid_api_key")
        if session_id is None:
            raise ApiError("a session's key reaches only its own session's routes (/sessions/<id>/...); this route "
                           "needs the server's key", status=403, code="permission_denied")
        if owner != session_id:
            raise ApiError(f"unknown session {session_id!r}; create one with POST /sessions", status=404,
                           param="session", code="session_not_found")
        return owner

    def get_session(self, session_id: str) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise ApiError(f"unknown session {session_id!r}; create one with POST /sessions", status=404,
                           param="session", code="session_not_found")
        return session

    def close_session(self, session_id: str, *, failed: bool = False, reason: str | None = None) -> Session:
        """Stop a session taking requests and free its sampler state; the record stays
        until :meth:`pop_session`."""
        session = self.get_session(session_id)
        with self._lock:
            first = session.state == "open"
            session.state = "closed"
            if failed and not session.failed:
                session.failed, session.failure_reason = True, reason
            if first:
                self._open -= 1
                session.closed_at = time.monotonic()
                if session_id in self._sessions:
                    self._closed[session_id] = session.closed_at
                self._reap(session.closed_at)
        if first:
            for seg in session.segments:
                self.worker.end_session(_sampler_session(session, seg))
            self.worker.wake()
        return session

    def pop_session(self, session_id: str) -> Session:
        session = self.close_session(session_id)
        with self._lock:
            self._forget(session_id)
        return session

    def _forget(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        self._closed.pop(session_id, None)
        if session is not None:
            self._keys.pop(session.key, None)

    def _reap(self, now: float) -> None:
        """Remove the records of closed sessions past ``closed_session_ttl_s``, and the
        oldest beyond ``max_open_sessions`` closed ones (the caller holds the lock)."""
        ttl = self.config.closed_session_ttl_s
        if ttl is None:
            return
        while self._closed:
            sid, when = next(iter(self._closed.items()))
            if now - when < ttl and len(self._closed) <= self.config.max_open_sessions:
                break
            self._forget(sid)

    def num_sessions(self) -> tuple[int, int]:
        """``(open, closed)`` sessions held."""
        with self._lock:
            return self._open, len(self._sessions) - self._open

    def live_sessions(self) -> int:
        """Open sessions without a reward: the worker's batch target."""
        with self._lock:
            return sum(1 for s in self._sessions.values() if s.state == "open" and s.reward is None)

    def report_reward(self, session_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Record ``{"reward": float, "metrics": {name: number}}`` (or ``{"failed": true,
        "reason": "..."}``) and close the session."""
        session = self.get_session(session_id)
        failed = body.get("failed", False)
        if not isinstance(failed, bool):
            raise ApiError(f"`failed` must be true or false, got {failed!r}", param="failed")
        reward = body.get("reward")
        if not failed and (isinstance(reward, bool) or not isinstance(reward, (int, float))
                           or not math.isfinite(reward)):
            raise ApiError(f"`reward` must be a finite number, got {reward!r}", param="reward")
        metrics = body.get("metrics") or {}
        if not isinstance(metrics, Mapping) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                for k, v in metrics.items()):
            raise ApiError("`metrics` must be an object of finite numbers, e.g. {\"turns\": 3}", param="metrics")
        reason = body.get("reason")
        with self._lock:
            if session.reward is not None or session.failed:
                raise ApiError(f"session {session_id!r} already has its reward", status=409,
                               code="reward_already_reported")
            if failed:
                session.failed = True
                session.failure_reason = f"the agent reported a failure: {reason}" if reason else \
                    "the agent reported a failure"
            else:
                session.reward = float(reward)
            session.reward_metrics = {k: float(v) for k, v in metrics.items()}
        self.close_session(session_id)
        return {"id": session_id, "reward": session.reward, "failed": session.failed}

    def _acquire(self, session_id: str | None) -> Session | None:
        if session_id is None:
            return None
        session = self.get_session(session_id)
        with self._lock:
            if session.state != "open":
                raise ApiError(f"session {session_id!r} is closed (its reward was reported or its time ran out)",
                               status=409, code="session_closed")
            if session.busy:
                raise ApiError(f"session {session_id!r} already has a request in flight; send one at a time",
                               status=409, code="session_busy")
            session.busy = True
        return session

    @staticmethod
    def _release(session: Session | None) -> None:
        if session is not None:
            session.busy = False

    # ------------------------------------------------------------------ sampling settings

    def _check_model(self, model: str) -> None:
        if model != self.config.model_name:
            raise ApiError(f"the model {model!r} does not exist; this server serves {self.config.model_name!r}",
                           status=404, param="model", code="model_not_found")

    def _limit(self) -> int:
        limits = [x for x in (self.config.max_context_tokens, getattr(self.sampler, "max_context_length", None))
                  if x is not None]
        return int(min(limits)) if limits else 1 << 30

    def _params(self, req: ChatRequest | CompletionRequest, session: Session | None, prompt_len: int, *,
                chat: bool) -> SamplingParams:
        room = self._limit() - prompt_len
        if room < 1:
            raise ApiError(f"the prompt has {prompt_len} tokens; this model's context is {self._limit()} tokens, "
                           "so no token can be sampled. Shorten the conversation.", param="messages",
                           code="context_length_exceeded")
        forced = self.config.sampling
        served = self.config.stop if chat else ()  # a raw completion prompt is the client's own, stops included
        stop = tuple(dict.fromkeys((*served, *(forced.stop if forced is not None else ()), *req.stop)))
        seed = req.seed
        if seed is None and session is not None:
            seed = int(np.random.SeedSequence([self.config.seed, session.number, session.seed,
                                               session.num_turns]).generate_state(1)[0])
        if forced is not None:
            cap = min(req.max_tokens or forced.max_new_tokens, forced.max_new_tokens, room)
            return dataclasses.replace(forced, max_new_tokens=cap, stop=stop, seed=seed)
        try:
            return SamplingParams(temperature=1.0 if req.temperature is None else req.temperature,
                                  top_p=1.0 if req.top_p is None else req.top_p, top_k=max(req.top_k or 0, 0),
                                  max_new_tokens=min(req.max_tokens or self.config.max_new_tokens, room),
                                  stop=stop, seed=seed)
        except ConfigError as e:
            raise ApiError(str(e)) from None

    # ------------------------------------------------------------------ chat

    def start_chat(self, body: Mapping[str, Any], session_id: str | None = None) -> Pending:
        """Check, render and queue a chat request; raises :class:`ApiError`."""
        req = protocol.parse_chat_request(body)
        self._check_model(req.model)
        session = self._acquire(session_id)
        try:
            last = session.segments[-1] if session is not None and session.segments else None
            index = len(session.segments) if session is not None else 0
            turn = self.capture.prepare(last, req.messages, req.tools, index)
            prompt = turn.prompt_ids
            params = self._params(req, session, len(prompt), chat=True)
            if turn.new_segment and last is not None:
                self.worker.end_session(_sampler_session(session, last))
            sid = _sampler_session(session, turn.segment) if session is not None else None
            future = self.worker.submit(SampleRequest(prompt, params, session_id=sid))
        except BaseException:
            self._release(session)
            raise
        return Pending(req, session, turn, prompt, future)

    def finish_chat(self, pending: Pending, result: SampleResult) -> dict[str, Any]:
        """Record the sampled turn and return the ``chat.completion`` response."""
        req, session, turn = pending.request, pending.session, pending.turn
        try:
            _check_result(result)
            content, _ = self.capture.turn_text(result.token_ids)
            # call ids unique within a conversation (the i-th assistant turn's calls are call_<i>_<k>), so a
            # client that pairs calls and results by id across turns never sees one twice
            turn_no = session.num_turns if session is not None else sum(m["role"] == "assistant" for m in req.messages)
            # A turn cut off by max_tokens returns no tool calls: a call in it may be cut too.
            choice = "none" if result.finish_reason == "length" else req.tool_choice
            reply, key, calls = assistant_reply(content, req.tools, choice, f"call_{turn_no}_")
            if session is not None:
                with self._lock:
                    if session.state != "open":
                        raise ApiError(f"session {session.id!r} was closed while this request was sampled",
                                       status=409, code="session_closed")
                    self.capture.commit(turn, result.token_ids, result.logprobs, result.finish_reason, reply=reply,
                                        key=key, calls=calls, prompt_tokens=result.prompt_tokens,
                                        cached_tokens=result.cached_tokens)
                    if turn.new_segment:
                        session.segments.append(turn.segment)
                    session.requests += 1
            finish = "tool_calls" if calls else result.finish_reason
            use = protocol.usage(len(pending.prompt_ids), len(result.token_ids), result.cached_tokens)
            logprobs = self._chat_logprobs(result) if req.logprobs else None
            extra = {"token_ids": list(result.token_ids)} if req.return_token_ids else {}
            response = protocol.chat_response(self.config.model_name, reply, finish, use, logprobs=logprobs,
                                              extra=extra)
            if req.return_token_ids:
                response["prompt_token_ids"] = list(pending.prompt_ids)
            return response
        finally:
            pending.done = True
            self._release(session)

    def abandon(self, pending: Pending) -> None:
        """The client went away before its turn was recorded: free the session."""
        if not pending.done:
            pending.done = True
            self._release(pending.session)

    def _chat_logprobs(self, result: SampleResult) -> list[dict[str, Any]]:
        out = []
        for tid, lp in zip(result.token_ids, result.logprobs):
            piece = self.renderer.decode([tid])
            out.append({"token": piece, "logprob": float(lp), "bytes": list(piece.encode("utf-8", "replace")),
                        "top_logprobs": []})
        return out

    # ------------------------------------------------------------------ completions

    def start_completion(self, body: Mapping[str, Any], session_id: str | None = None) -> Pending:
        """Check and queue a completions request (token-level prefix match per session)."""
        req = protocol.parse_completion_request(body)
        self._check_model(req.model)
        ids = list(req.prompt) if isinstance(req.prompt, list) else self.renderer.encode(req.prompt)
        bad = next((t for t in ids if t >= self._vocab), None)
        if bad is not None:
            raise ApiError(f"token id {bad} is outside the vocabulary (0..{self._vocab - 1})", param="prompt")
        if not ids:
            raise ApiError("`prompt` encodes to no tokens", param="prompt")
        session = self._acquire(session_id)
        try:
            last = session.segments[-1] if session is not None and session.segments else None
            if last is not None and last.mode == "completion" and len(last.token_ids) < len(ids) \
                    and ids[:len(last.token_ids)] == last.token_ids:
                turn = PreparedTurn(last, False, ids[len(last.token_ids):], [], [])
            else:
                index = len(session.segments) if session is not None else 0
                turn = PreparedTurn(Segment(index=index, mode="completion"), True, ids, [], [])
            params = self._params(req, session, len(ids), chat=False)
            if turn.new_segment and last is not None:
                self.worker.end_session(_sampler_session(session, last))
            sid = _sampler_session(session, turn.segment) if session is not None else None
            future = self.worker.submit(SampleRequest(ids, params, session_id=sid))
        except BaseException:
            self._release(session)
            raise
        skip = body.get("skip_special_tokens", True)
        return Pending(req, session, turn, ids, future, extra={"skip_special_tokens": skip is not False})

    def finish_completion(self, pending: Pending, result: SampleResult) -> dict[str, Any]:
        req, session, turn = pending.request, pending.session, pending.turn
        try:
            _check_result(result)
            if session is not None:
                with self._lock:
                    if session.state != "open":
                        raise ApiError(f"session {session.id!r} was closed while this request was sampled",
                                       status=409, code="session_closed")
                    self.capture.commit(turn, result.token_ids, result.logprobs, result.finish_reason,
                                        reply={}, key=(), calls=0, prompt_tokens=result.prompt_tokens,
                                        cached_tokens=result.cached_tokens)
                    if turn.new_segment:
                        session.segments.append(turn.segment)
                    session.requests += 1
            skip = pending.extra["skip_special_tokens"]
            text = self.tokenizer.decode(result.token_ids, skip_special_tokens=skip,
                                         clean_up_tokenization_spaces=False)
            logprobs = None
            if req.logprobs is not None:
                pieces = [self.renderer.decode([t]) for t in result.token_ids]
                tokens = [f"token_id:{t}" for t in result.token_ids] if req.tokens_as_token_ids else pieces
                offsets, at = [], 0
                for p in pieces:
                    offsets.append(at)
                    at += len(p)
                logprobs = {"tokens": tokens, "token_logprobs": [float(x) for x in result.logprobs],
                            "top_logprobs": None, "text_offset": offsets}
            extra = {"token_ids": list(result.token_ids), "prompt_token_ids": list(pending.prompt_ids)} \
                if req.return_token_ids else {}
            use = protocol.usage(len(pending.prompt_ids), len(result.token_ids), result.cached_tokens)
            return protocol.completion_response(self.config.model_name, text, result.finish_reason, use,
                                                logprobs=logprobs, extra=extra)
        finally:
            pending.done = True
            self._release(session)

    def reload_policy(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Load new weights between sampler calls: ``{"adapter_path": folder, "version": n}``.

        The worker finishes the batch in flight and takes no other until the weights are in
        (requests arriving meanwhile get 503 and are retried by clients). The sampler loads
        the folder itself (``update_policy(adapter_path=...)``: an HF sampler copies the LoRA
        tensors into its peft model, vLLM loads the adapter, the OpenAI sampler asks its
        upstream). A path or sampler that cannot be loaded is a 400 and the server keeps
        its weights; a failure while loading is a 500. The server keeps the settings it
        started with; when :attr:`reload_warnings` says the adapter was trained with others
        (``mtrl-gym serve`` reads its training run), the response's ``warnings`` say which.
        """
        path, version = body.get("adapter_path"), body.get("version")
        if not isinstance(path, str) or not path:
            raise ApiError(f"`adapter_path` must be a LoRA adapter folder, got {path!r}", param="adapter_path")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise ApiError(f"`version` must be an integer or null, got {version!r}", param="version")
        self.worker.pause()
        try:
            self.sampler.update_policy(adapter_path=path, version=version)
        except ConfigError as e:
            raise ApiError(f"cannot reload {path!r}: {e}", param="adapter_path", code="reload_refused") from None
        except Exception as e:  # noqa: BLE001 - reported to the client, the server keeps serving
            raise ApiError(f"reloading {path!r} failed: {type(e).__name__}: {e}", status=500,
                           code="reload_failed") from None
        finally:
            self.worker.resume()
        self.policy_version = version
        out: dict[str, Any] = {"adapter_path": path, "version": version}
        unlike = self.reload_warnings(path) if self.reload_warnings is not None else []
        if unlike:
            out["warnings"] = [f"served unlike its training run: {'; '.join(unlike)}. The server keeps the settings "
                               "it started with; restart it with --adapter to serve these weights as trained"]
        return out

    def close(self) -> None:
        self.worker.close()


def _sampler_session(session: Session, seg: Segment) -> str:
    return f"{session.id}#{seg.index}"


def _check_result(result: SampleResult) -> None:
    if result.finish_reason == "error":
        raise ApiError(f"the sampler failed: {result.error}", status=500, code="sampler_error")
    if not result.token_ids:
        raise ApiError("the sampler returned no tokens", status=500, code="sampler_error")
