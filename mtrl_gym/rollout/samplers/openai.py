"""Sampling from any OpenAI-compatible ``/v1/completions`` endpoint that returns token ids.

:class:`OpenAISampler` sends each request's prompt as a list of token ids and reads back
the sampled token ids and their log-probs, so trajectories stay token-in/token-out. It
targets ``vllm serve`` (and servers that copy its extensions: SGLang, TGI's OpenAI
layer); the request asks for::

    {"prompt": [token ids], "logprobs": 1, "return_tokens_as_token_ids": true,
     "return_token_ids": true, "include_stop_str_in_output": true, "skip_special_tokens": false, ...}

Token ids are read from ``choices[i].token_ids`` when present, else from the
``"token_id:N"`` strings of ``logprobs.tokens``. Log-probs are whatever the server reports
(vLLM: ``--logprobs-mode``, raw log-probs of the model by default; they match
:mod:`mtrl_gym.rollout.samplers.base`'s convention at temperature 1).

Only the standard library is used. Requests run in a thread pool bounded by
``max_concurrency``; each has a timeout, and connection errors, timeouts, HTTP 408/409/429
and 5xx are retried with exponential backoff and jitter. A request that still fails gets
a result with ``finish_reason == "error"`` and the reason, and the other requests of the
batch are unaffected.
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mtrl_gym.error import ConfigError, SamplerError
from mtrl_gym.rollout.samplers.base import SampleRequest, SampleResult, Sampler

__all__ = ["OpenAISampler", "RETRY_STATUS"]

#: HTTP statuses worth retrying: timeouts, conflicts, rate limits and server errors.
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class _Retryable(Exception):
    pass


class OpenAISampler(Sampler):
    """Token-in/token-out sampling through an OpenAI-compatible completions endpoint.

    Args:
        base_url: server root, with or without ``/v1`` (``http://127.0.0.1:8000``).
        model: model name to send; ``None`` asks ``GET /v1/models`` once and uses the first.
        api_key: sent as a bearer token; default ``$MTRL_GYM_API_KEY`` (the key of
            ``mtrl-gym serve``), else ``$OPENAI_API_KEY``, if set.
        timeout_s: seconds to wait for one HTTP response.
        max_retries: further attempts after a retryable failure (0 disables retries).
        backoff_s: first retry delay; doubles each retry, with up to 25% random jitter.
        max_concurrency: most requests in flight at once.
        extra_body: more JSON fields for every request (e.g. ``{"min_p": 0.05}``).
        reload_dir: a folder the server can read too (the same machine or a shared file
            system). With it, :meth:`update_policy` saves the trainer's LoRA adapter there
            (``v000012/``) and asks the server to load it (``POST /admin/reload``, which
            ``mtrl-gym serve`` has). Without it the endpoint's weights are left alone.
    """

    name = "openai"

    def __init__(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
                 timeout_s: float = 120.0, max_retries: int = 3, backoff_s: float = 0.5,
                 max_concurrency: int = 32, extra_body: dict[str, Any] | None = None,
                 reload_dir: str | None = None):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"`base_url` must start with http:// or https://, got {base_url!r}")
        if timeout_s <= 0:
            raise ConfigError(f"`timeout_s` must be > 0, got {timeout_s!r}")
        if max_retries < 0:
            raise ConfigError(f"`max_retries` must be >= 0, got {max_retries!r}")
        if max_concurrency < 1:
            raise ConfigError(f"`max_concurrency` must be >= 1, got {max_concurrency!r}")
        root = base_url.rstrip("/")
        self.api_root = root if root.endswith("/v1") else root + "/v1"
        self.model = model
        self.api_key = api_key if api_key is not None else (os.environ.get("MTRL_GYM_API_KEY")
                                                            or os.environ.get("OPENAI_API_KEY"))
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_concurrency = int(max_concurrency)
        self.extra_body = dict(extra_body or {})
        self.reload_dir = reload_dir
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._jitter = random.Random()

    # ------------------------------------------------------------------ public

    def sample(self, requests: Sequence[SampleRequest]) -> list[SampleResult]:
        if not requests:
            return []
        self.check_constraints(requests)
        model = self._model_name()
        pool = self._executor()
        futures = [pool.submit(self._sample_one, req, model) for req in requests]
        return [f.result() for f in futures]

    def update_policy(self, model=None, *, adapter_path: str | None = None, version: int | None = None) -> None:
        """Have the server load the new policy (needs ``reload_dir``, or an ``adapter_path`` it can read).

        ``model`` (a peft model) is saved under ``reload_dir`` first. The server pauses its
        sampling, loads the adapter and answers; later requests use the new weights.
        """
        if adapter_path is None:
            if self.reload_dir is None or model is None:
                return
            if not hasattr(model, "peft_config"):
                raise ConfigError("OpenAISampler(reload_dir=...) pushes LoRA adapters: the trained model has none "
                                  "(full_finetune); reload a full checkpoint on the server instead")
            folder = os.path.join(os.path.abspath(self.reload_dir), f"v{int(version or 0):06d}")
            model.save_pretrained(folder)
            adapter_path = folder
        body = {"adapter_path": str(adapter_path), "version": version}
        self._with_retries(lambda: self._http("POST", "/admin/reload", body, root=self.api_root[:-len("/v1")]))

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None

    # ------------------------------------------------------------------ internals

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="mtrl-openai")
            return self._pool

    def _model_name(self) -> str:
        if self.model is None:
            try:
                data = self._with_retries(lambda: self._http("GET", "/models", None))
            except Exception as e:  # noqa: BLE001
                raise SamplerError(f"cannot list models at {self.api_root}/models ({e}); "
                                   "pass model= explicitly") from None
            models = [m.get("id") for m in data.get("data", []) if m.get("id")]
            if not models:
                raise SamplerError(f"{self.api_root}/models lists no model; pass model= explicitly")
            self.model = str(models[0])
        return self.model

    def _body(self, req: SampleRequest, model: str) -> dict[str, Any]:
        p = req.params
        body: dict[str, Any] = {
            "model": model, "prompt": list(req.prompt_ids), "max_tokens": p.max_new_tokens,
            "temperature": p.temperature, "top_p": p.top_p, "n": 1, "logprobs": 1, "echo": False,
            "return_tokens_as_token_ids": True, "return_token_ids": True,
            "include_stop_str_in_output": True, "skip_special_tokens": False,
        }
        if p.top_k:
            body["top_k"] = p.top_k
        if p.seed is not None:
            body["seed"] = p.seed
        if p.stop:
            body["stop"] = list(p.stop)
        if p.stop_token_ids:
            body["stop_token_ids"] = list(p.stop_token_ids)
        body.update(self.extra_body)
        return body

    def _sample_one(self, req: SampleRequest, model: str) -> SampleResult:
        n_prompt = len(req.prompt_ids)
        try:
            data = self._with_retries(lambda: self._http("POST", "/completions", self._body(req, model)))
            return _parse_choice(data, n_prompt)
        except Exception as e:  # noqa: BLE001 - one failed request is a result, not a crash
            return SampleResult([], [], "error", prompt_tokens=n_prompt, error=f"{type(e).__name__}: {e}")

    def _with_retries(self, call):
        delay = self.backoff_s
        for attempt in range(self.max_retries + 1):
            try:
                return call()
            except _Retryable:
                if attempt == self.max_retries:
                    raise
                time.sleep(delay * (1 + 0.25 * self._jitter.random()))
                delay *= 2
        raise AssertionError("unreachable")

    def _http(self, method: str, path: str, body: dict[str, Any] | None, root: str | None = None) -> dict[str, Any]:
        url = (self.api_root if root is None else root) + path
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:500].decode("utf-8", "replace")
            err = SamplerError(f"HTTP {e.code} from {url}: {detail}")
            if e.code in RETRY_STATUS:
                raise _Retryable(str(err)) from None
            raise err from None
        except (urllib.error.URLError, TimeoutError, socket.timeout, ConnectionError) as e:
            reason = getattr(e, "reason", e)
            raise _Retryable(f"cannot reach {url}: {reason}") from None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise SamplerError(f"{url} returned invalid JSON: {raw[:200]!r}") from None


def _token_id(token: Any) -> int:
    if isinstance(token, int):
        return token
    text = str(token)
    if not text.startswith("token_id:"):
        raise SamplerError(f"the server returned token {text!r} instead of 'token_id:N'; start vLLM with a "
                           "version that supports return_tokens_as_token_ids or return_token_ids")
    return int(text.removeprefix("token_id:"))


def _parse_choice(data: dict[str, Any], n_prompt: int) -> SampleResult:
    """Token ids, log-probs and finish reason of the first choice of a completions response."""
    choices = data.get("choices") or []
    if not choices:
        raise SamplerError(f"response has no choices: {json.dumps(data)[:200]}")
    choice = choices[0]
    logprobs = choice.get("logprobs") or {}
    token_logprobs = logprobs.get("token_logprobs")
    ids = choice.get("token_ids")
    if ids is None:
        tokens = logprobs.get("tokens")
        if tokens is None:
            raise SamplerError("response has neither choices[0].token_ids nor logprobs.tokens; the endpoint "
                               "must return token ids (vLLM: return_token_ids / return_tokens_as_token_ids)")
        ids = [_token_id(t) for t in tokens]
    ids = [int(t) for t in ids]
    if token_logprobs is None:
        raise SamplerError("response has no logprobs.token_logprobs; the endpoint must honour logprobs=1")
    if len(token_logprobs) != len(ids):
        raise SamplerError(f"response has {len(ids)} token ids but {len(token_logprobs)} log-probs")
    values = [float(x) if x is not None else float("nan") for x in token_logprobs]
    reason = choice.get("finish_reason")
    if reason not in ("stop", "length"):  # "abort", null, ...: the completion is not usable
        return SampleResult([], [], "error", prompt_tokens=n_prompt,
                            error=f"the server ended the completion with finish_reason {reason!r}")
    usage = data.get("usage") or {}
    cached = int(((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
    return SampleResult(ids, values, reason, prompt_tokens=n_prompt, cached_tokens=min(cached, n_prompt))
