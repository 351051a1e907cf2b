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
strings are added. A request without a seed gets one derived from the server seed, the
session id and the turn number, so reruns with the same sessions sample the same tokens.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import uuid
import zlib
from collections.abc import Mapping
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

__all__ = ["Pending", "PolicyService", "ServeConfig"]

_SESSION_ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


@dataclass
class ServeConfig:
    """How the policy endpoint serves and records requests."""

    model_name: str = "policy"
    """The model id clients send (``GET /v1/models`` lists it); any other id is a 404."""
    max_new_tokens: int = 256
    """Default ``max_tokens`` of a request that sets none."""
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

    def __post_init__(self) -> None:
        if not isinstance(self.model_name, str) or not self.model_name:
            raise ConfigError(f"`model_name` must be a non-empty string, got {self.model_name!r}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"`max_new_tokens` must be >= 1, got {self.max_new_tokens!r}")
        if self.max_context_tokens is not None and self.max_context_tokens < 2:
            raise ConfigError(f"`max_context_tokens` must be >= 2 or None, got {self.max_context_tokens!r}")
        if not (self.gather_s >= 0 and math.isfinite(self.gather_s)):
            raise ConfigError(f"`gather_s` must be a finite number >= 0, got {self.gather_s!r}")
        if self.max_open_sessions < 1:
            raise ConfigError(f"`max_open_sessions` must be >= 1, got {self.max_open_sessions!r}")
        if self.sampling is not None and not isinstance(self.sampling, SamplingParams):
            raise ConfigError(f"`sampling` must be a SamplingParams or None, got {type(self.sampling).__name__}")


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
        self.capture = ChatCapture(self.renderer)
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._vocab = len(tokenizer)
        self.policy_version: int | None = None
        """Version of the last :meth:`reload_policy` (None: the weights it started with)."""
        self.worker = SamplerWorker(sampler, live=self.live_sessions, gather_s=self.config.gather_s,
                                    max_batch_size=self.config.max_batch_size)

    # ------------------------------------------------------------------ sessions

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.config.model_name, "object": "model", "created": 0,
                                            "owned_by": "mtrl-gym"}]}

    def create_session(self, session_id: str | None = None, *, seed: int | None = None,
                       meta: Mapping[str, Any] | None = None) -> Session:
        """A new open session (id: ``session_id`` or a random one)."""
        sid = session_id if session_id is not None else uuid.uuid4().hex
        if not isinstance(sid, str) or not sid or len(sid) > 128 or not set(sid) <= _SESSION_ID_CHARS:
            raise ApiError(f"a session id must be 1-128 characters of A-Z a-z 0-9 - _ ., got {sid!r}",
                           param="id")
        with self._lock:
            if sid in self._sessions:
                raise ApiError(f"session {sid!r} already exists", status=409, code="session_exists")
            if sum(s.state == "open" for s in self._sessions.values()) >= self.config.max_open_sessions:
                raise ApiError(f"{self.config.max_open_sessions} sessions are open; report rewards or close "
                               "sessions first", status=429, code="too_many_sessions")
            base = seed if seed is not None else zlib.crc32(sid.encode())
            session = Session(id=sid, seed=int(base), meta=dict(meta or {}))
            self._sessions[sid] = session
        return session

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
            for seg in session.segments:
                self.worker.end_session(_sampler_session(session, seg))
            self.worker.wake()
        return session

    def pop_session(self, session_id: str) -> Session:
        session = self.close_session(session_id)
        with self._lock:
            self._sessions.pop(session_id, None)
        return session

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

    def _params(self, req: ChatRequest | CompletionRequest, session: Session | None, prompt_len: int) -> SamplingParams:
        room = self._limit() - prompt_len
        if room < 1:
            raise ApiError(f"the prompt has {prompt_len} tokens; this model's context is {self._limit()} tokens, "
                           "so no token can be sampled. Shorten the conversation.", param="messages",
                           code="context_length_exceeded")
        forced = self.config.sampling
        seed = req.seed
        if seed is None and session is not None:
            seed = int(np.random.SeedSequence([self.config.seed, zlib.crc32(session.id.encode()), session.seed,
                                               session.num_turns]).generate_state(1)[0])
        if forced is not None:
            cap = min(req.max_tokens or forced.max_new_tokens, forced.max_new_tokens, room)
            return dataclasses.replace(forced, max_new_tokens=cap, stop=tuple(forced.stop) + tuple(req.stop),
                                       seed=seed)
        try:
            return SamplingParams(temperature=1.0 if req.temperature is None else req.temperature,
                                  top_p=1.0 if req.top_p is None else req.top_p, top_k=max(req.top_k or 0, 0),
                                  max_new_tokens=min(req.max_tokens or self.config.max_new_tokens, room),
                                  stop=req.stop, seed=seed)
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
            params = self._params(req, session, len(prompt))
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
            content, _ = self.renderer.split_assistant(result.token_ids)
            turn_no = session.num_turns if session is not None else 0
            reply, key, calls = assistant_reply(content, req.tools, req.tool_choice, f"call_{turn_no}_")
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
            params = self._params(req, session, len(ids))
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
        (requests arriving meanwhile get 503 and are retried by clients). An HF sampler over
        a peft model gets the folder's LoRA tensors copied into its adapter; any other
        sampler gets ``update_policy(adapter_path=...)`` (vLLM with ``sync="lora"``).
        """
        path, version = body.get("adapter_path"), body.get("version")
        if not isinstance(path, str) or not path:
            raise ApiError(f"`adapter_path` must be a LoRA adapter folder, got {path!r}", param="adapter_path")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise ApiError(f"`version` must be an integer or null, got {version!r}", param="version")
        self.worker.pause()
        try:
            model = getattr(self.sampler, "model", None)
            if model is not None and hasattr(model, "peft_config"):
                _load_adapter_tensors(model, path)
                self.sampler.update_policy(model, version=version)
            else:
                self.sampler.update_policy(adapter_path=path, version=version)
        except ApiError:
            raise
        except Exception as e:  # noqa: BLE001 - reported to the client, the server keeps its weights
            raise ApiError(f"reloading {path!r} failed: {type(e).__name__}: {e}", status=500,
                           code="reload_failed") from None
        finally:
            self.worker.resume()
        self.policy_version = version
        return {"adapter_path": path, "version": version}

    def close(self) -> None:
        self.worker.close()


def _load_adapter_tensors(model: Any, folder: str) -> None:
    """Copy the LoRA tensors of a peft adapter folder into ``model``'s (same rank and modules)."""
    import os

    from peft import set_peft_model_state_dict

    file = os.path.join(folder, "adapter_model.safetensors")
    if not os.path.isfile(file):
        raise ApiError(f"{folder!r} has no adapter_model.safetensors (save it with peft's save_pretrained)",
                       param="adapter_path")
    from safetensors.torch import load_file

    result = set_peft_model_state_dict(model, load_file(file))
    unexpected = list(getattr(result, "unexpected_keys", None) or [])
    if unexpected:
        raise ApiError(f"the adapter in {folder!r} does not fit the served model: unexpected tensors "
                       f"{unexpected[:3]}", param="adapter_path")


def _sampler_session(session: Session, seg: Segment) -> str:
    return f"{session.id}#{seg.index}"


def _check_result(result: SampleResult) -> None:
    if result.finish_reason == "error":
        raise ApiError(f"the sampler failed: {result.error}", status=500, code="sampler_error")
    if not result.token_ids:
        raise ApiError("the sampler returned no tokens", status=500, code="sampler_error")
