"""The HTTP layer: a FastAPI app over a :class:`~mtrl_gym.serve.service.PolicyService`,
and :class:`PolicyServer`, which runs it with uvicorn in a background thread.

Routes (every ``/v1/...`` route also exists under ``/sessions/<id>/v1/...``, so an
unmodified OpenAI client records into a session by its base URL alone; the header
``X-Session-Id`` works too). Every request sends ``Authorization: Bearer <key>``: the
server's key reaches every route, a session's key (returned by ``POST /sessions``) only
that session's routes, except ``DELETE`` (see :meth:`PolicyService.authorize`).

=====================================  ==============================================
``GET  /v1/models``                    the served model id
``POST /v1/chat/completions``          chat, tool calls, ``stream: true`` (SSE)
``POST /v1/completions``               text or token-id prompts (vLLM's token-id extensions)
``POST /sessions``                     create a session (server key): ``{"seed"?: int}`` ->
                                       ``{"id", "base_url", "api_key"}`` (the server draws id and key)
``GET  /sessions/<id>``                its record: segments as trajectories, reward, state
``POST /sessions/<id>/reward``         ``{"reward": float, "metrics": {...}}``
``DELETE /sessions/<id>``              forget it (server key)
``POST /admin/reload``                 ``{"adapter_path": folder, "version"?: int}`` (server key): new
                                       LoRA weights between sampler calls (the trainer's
                                       ``OpenAISampler(reload_dir=)``)
=====================================  ==============================================

Every error is an OpenAI-shaped JSON body with a 4xx status (a sampler failure is a 500):
a missing or wrong key, bad JSON, unknown routes, wrong field types and unknown sessions
never reach the sampler and never stop the server. An unexpected exception in a handler
is answered as a 500 of the same shape and the connection stays open.
"""


import asyncio
import ipaddress
import json
import threading
import time
from collections.abc import Callable

from mtrl_gym.error import ConfigError, DependencyNotInstalled, Error
from mtrl_gym.serve.protocol import ApiError, parse_json_body, stream_chunks
from mtrl_gym.serve.service import SERVER, PolicyService

__all__ = ["PolicyServer", "create_app", "is_loopback"]


def _fastapi():
    try:
        import fastapi
        import uvicorn  # noqa: F401
    except ImportError:
        raise DependencyNotInstalled("fastapi", extra="serve") from None
    return fastapi


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.1``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bearer(request) -> str | None:
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def create_app(service: PolicyService, *, public_url: str | Callable[[], str]):
    """The FastAPI application serving ``service``.

    ``public_url`` (or a function returning it, for a port picked at start) is the
    address clients reach the server at; ``POST /sessions`` builds each session's
    ``base_url`` from it, never from the request's ``Host`` header.
    """
    fastapi = _fastapi()
    from fastapi import Request
    from fastapi.responses import JSONResponse, StreamingResponse
    from fastapi.routing import APIRoute
    from starlette.exceptions import HTTPException

    def error(e: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
        return JSONResponse(e.body(), status_code=e.status, headers=headers)

    def unexpected(e: Exception) -> JSONResponse:  # a bug, reported in the same shape
        return error(ApiError(f"internal error: {type(e).__name__}: {e}", status=500, code="internal_error"))

    class GuardedRoute(APIRoute):
        """Answers an unexpected exception here: past this point starlette re-raises it
        after the 500, and uvicorn then drops the kept-alive connection."""

        def get_route_handler(self):
            handler = super().get_route_handler()

            async def guarded(request):
                try:
                    return await handler(request)
                except (ApiError, HTTPException):
                    raise
                except Exception as e:  # noqa: BLE001
                    return unexpected(e)

            return guarded

    app = fastapi.FastAPI(title="mtrl-gym policy endpoint", docs_url=None, redoc_url=None, openapi_url=None)
    app.router.route_class = GuardedRoute

    @app.exception_handler(ApiError)
    async def _api_error(request, e: ApiError):
        return error(e)

    @app.exception_handler(HTTPException)
    async def _http_error(request, e: HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code)
        return error(ApiError(f"{request.method} {request.url.path}: {e.detail}", status=e.status_code, code=code))

    @app.exception_handler(Exception)
    async def _unexpected(request, e: Exception):
        return unexpected(e)

    def allow(request: Request, sid: str | None) -> str:
        return service.authorize(_bearer(request), sid)

    def server_only(request: Request, sid: str | None = None) -> None:
        if allow(request, sid) != SERVER:
            raise ApiError(f"{request.method} {request.url.path} needs the server's key, not a session's",
                           status=403, code="permission_denied")

    async def run(request: Request, sid: str | None, start, finish):
        sid = sid if sid is not None else request.headers.get("x-session-id")
        allow(request, sid)
        body = parse_json_body(await request.body())
        pending = start(body, sid)
        try:
            result = await asyncio.wrap_future(pending.future)
            return pending.request, finish(pending, result)
        finally:
            service.abandon(pending)

    async def chat(request: Request, sid: str | None):
        req, response = await run(request, sid, service.start_chat, service.finish_chat)
        if not req.stream:
            return JSONResponse(response)
        chunks = stream_chunks(response, include_usage=req.include_usage)

        async def events():
            for c in chunks:
                yield f"data: {json.dumps(c, ensure_ascii=False)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def completions(request: Request, sid: str | None):
        return JSONResponse((await run(request, sid, service.start_completion, service.finish_completion))[1])

    @app.get("/v1/models")
    async def models(request: Request):
        allow(request, request.headers.get("x-session-id"))
        return service.models()

    @app.get("/sessions/{sid}/v1/models")
    async def session_models(request: Request, sid: str):
        allow(request, sid)
        service.get_session(sid)
        return service.models()

    @app.post("/v1/chat/completions")
    async def chat_plain(request: Request):
        return await chat(request, None)

    @app.post("/sessions/{sid}/v1/chat/completions")
    async def chat_session(request: Request, sid: str):
        return await chat(request, sid)

    @app.post("/v1/completions")
    async def completions_plain(request: Request):
        return await completions(request, None)

    @app.post("/sessions/{sid}/v1/completions")
    async def completions_session(request: Request, sid: str):
        return await completions(request, sid)

    @app.post("/sessions")
    async def create_session(request: Request):
        server_only(request)
        raw = await request.body()
        body = parse_json_body(raw) if raw.strip() else {}
        if "id" in body:
            raise ApiError("session ids are drawn by the server; leave out `id` (the answer holds the new "
                           "session's id, base_url and api_key)", param="id")
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ApiError(f"`seed` must be an integer >= 0, got {seed!r}", param="seed")
        session = service.create_session(seed=seed)
        root = (public_url() if callable(public_url) else public_url).rstrip("/")
        return JSONResponse({"id": session.id, "base_url": f"{root}/sessions/{session.id}/v1",
                             "api_key": session.key}, status_code=201)

    @app.get("/sessions/{sid}")
    async def get_session(request: Request, sid: str):
        allow(request, sid)
        return service.get_session(sid).summary()

    @app.post("/sessions/{sid}/reward")
    async def reward(request: Request, sid: str):
        allow(request, sid)
        return service.report_reward(sid, parse_json_body(await request.body()))

    @app.post("/admin/reload")
    async def reload(request: Request):  # the weights change off the event loop: sampling pauses for it
        server_only(request)
        body = parse_json_body(await request.body())
        return await asyncio.get_running_loop().run_in_executor(None, service.reload_policy, body)

    @app.delete("/sessions/{sid}")
    async def delete_session(request: Request, sid: str):
        server_only(request, sid)
        service.pop_session(sid)
        return {"id": sid, "deleted": True}

    return app


class PolicyServer:
    """A :class:`PolicyService` behind uvicorn on ``host:port`` in a daemon thread.

    ``port=0`` picks a free port; :attr:`url` is the address once :meth:`start` returns.
    Use as a context manager, or call :meth:`start` and :meth:`stop`::

        with PolicyServer(PolicyService(sampler, tokenizer, model_name="policy")) as server:
            session = server.service.create_session()
            client = openai.OpenAI(base_url=server.session_url(session.id), api_key=session.key)
    """

    def __init__(self, service: PolicyService, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning",
                 public_url: str | None = None):
        self.service = service
        self.host = host
        self.port = port
        self.log_level = log_level
        self._public_url = public_url.rstrip("/") if public_url else None
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Where this process reaches the server: ``http://host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def public_url(self) -> str:
        """Where clients reach the server (``public_url`` if given, else :attr:`url`);
        the ``base_url`` of every session created over HTTP starts with it."""
        return self._public_url or self.url

    @property
    def api_key(self) -> str | None:
        """The server's key (None when the service serves without one)."""
        return self.service.api_key

    def session_url(self, session_id: str) -> str:
        """The OpenAI base URL of a session: ``<public_url>/sessions/<id>/v1``."""
        return f"{self.public_url}/sessions/{session_id}/v1"

    def start(self, timeout_s: float = 30.0) -> "PolicyServer":
        _fastapi()
        import uvicorn

        if self.service.api_key is None and not is_loopback(self.host):
            raise ConfigError(f"refusing to serve on {self.host} without an API key: anyone who reaches the port "
                              "could sample, read sessions and reload weights. Keep require_api_key on (the default "
                              "draws a key) or bind 127.0.0.1")
        app = create_app(self.service, public_url=lambda: self.public_url)
        config = uvicorn.Config(app, host=self.host, port=self.port, log_level=self.log_level,
                                lifespan="off", access_log=False, timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="mtrl-serve-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise Error(f"the policy server did not start on {self.host}:{self.port} within {timeout_s:g} s")
            time.sleep(0.01)
        self.port = int(self._server.servers[0].sockets[0].getsockname()[1])
        return self

    def wait(self) -> None:
        """Block until the server stops (a Ctrl-C raises ``KeyboardInterrupt`` here)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.5)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def close(self) -> None:
        """Stop the HTTP server and the sampler worker (not the sampler itself)."""
        self.stop()
        self.service.close()

    def __enter__(self):
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()
