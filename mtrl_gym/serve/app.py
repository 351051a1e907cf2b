"""The HTTP layer: a FastAPI app over a :class:`~mtrl_gym.serve.service.PolicyService`,
and :class:`PolicyServer`, which runs it with uvicorn in a background thread.

Routes (every ``/v1/...`` route also exists under ``/sessions/<id>/v1/...``, so an
unmodified OpenAI client records into a session by its base URL alone; the header
``X-Session-Id`` works too):

=====================================  ==============================================
``GET  /v1/models``                    the served model id
``POST /v1/chat/completions``          chat, tool calls, ``stream: true`` (SSE)
``POST /v1/completions``               text or token-id prompts (vLLM's token-id extensions)
``POST /sessions``                     create a session: ``{"id"?: str}`` -> ``{"id", "base_url"}``
``GET  /sessions/<id>``                its record: segments as trajectories, reward, state
``POST /sessions/<id>/reward``         ``{"reward": float, "metrics": {...}}``
``DELETE /sessions/<id>``              forget it
``POST /admin/reload``                 ``{"adapter_path": folder, "version"?: int}``: new LoRA weights
                                       between sampler calls (the trainer's ``OpenAISampler(reload_dir=)``)
=====================================  ==============================================

Every error is an OpenAI-shaped JSON body with a 4xx status (a sampler failure is a 500):
bad JSON, unknown routes, wrong field types and unknown sessions never reach the sampler
and never stop the server.
"""



import asyncio
import json
import threading
import time

from mtrl_gym.error import DependencyNotInstalled, Error
from mtrl_gym.serve.protocol import ApiError, parse_json_body, stream_chunks
from mtrl_gym.serve.service import PolicyService

__all__ = ["PolicyServer", "create_app"]


def _fastapi():
    try:
        import fastapi
        import uvicorn  # noqa: F401
    except ImportError:
        raise DependencyNotInstalled("fastapi", extra="serve") from None
    return fastapi


def create_app(service: PolicyService):
    """The FastAPI application serving ``service``."""
    fastapi = _fastapi()
    from fastapi import Request
    from fastapi.responses import JSONResponse, StreamingResponse
    from starlette.exceptions import HTTPException

    app = fastapi.FastAPI(title="mtrl-gym policy endpoint", docs_url=None, redoc_url=None, openapi_url=None)

    def error(e: ApiError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status)

    @app.exception_handler(ApiError)
    async def _api_error(request, e: ApiError):
        return error(e)

    @app.exception_handler(HTTPException)
    async def _http_error(request, e: HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code)
        return error(ApiError(f"{request.method} {request.url.path}: {e.detail}", status=e.status_code, code=code))

    @app.exception_handler(Exception)
    async def _unexpected(request, e: Exception):  # a bug, reported in the same shape
        return error(ApiError(f"internal error: {type(e).__name__}: {e}", status=500, code="internal_error"))

    def session_of(request: Request, sid: str | None) -> str | None:
        return sid if sid is not None else request.headers.get("x-session-id")

    async def run(request: Request, sid: str | None, start, finish):
        body = parse_json_body(await request.body())
        pending = start(body, session_of(request, sid))
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
    async def models():
        return service.models()

    @app.get("/sessions/{sid}/v1/models")
    async def session_models(sid: str):
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
        raw = await request.body()
        body = parse_json_body(raw) if raw.strip() else {}
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ApiError(f"`seed` must be an integer >= 0, got {seed!r}", param="seed")
        session = service.create_session(body.get("id"), seed=seed)
        base = str(request.base_url).rstrip("/")
        return JSONResponse({"id": session.id, "base_url": f"{base}/sessions/{session.id}/v1"}, status_code=201)

    @app.get("/sessions/{sid}")
    async def get_session(sid: str):
        return service.get_session(sid).summary()

    @app.post("/sessions/{sid}/reward")
    async def reward(request: Request, sid: str):
        return service.report_reward(sid, parse_json_body(await request.body()))

    @app.post("/admin/reload")
    async def reload(request: Request):  # the weights change off the event loop: sampling pauses for it
        body = parse_json_body(await request.body())
        return await asyncio.get_running_loop().run_in_executor(None, service.reload_policy, body)

    @app.delete("/sessions/{sid}")
    async def delete_session(sid: str):
        service.pop_session(sid)
        return {"id": sid, "deleted": True}

    return app


class PolicyServer:
    """A :class:`PolicyService` behind uvicorn on ``host:port`` in a daemon thread.

    ``port=0`` picks a free port; :attr:`url` is the address once :meth:`start` returns.
    Use as a context manager, or call :meth:`start` and :meth:`stop`::

        with PolicyServer(PolicyService(sampler, tokenizer, model_name="policy")) as server:
            sid = server.service.create_session().id
            client = openai.OpenAI(base_url=server.session_url(sid), api_key="none")
    """

    def __init__(self, service: PolicyService, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"):
        self.service = service
        self.host = host
        self.port = port
        self.log_level = log_level
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def session_url(self, session_id: str) -> str:
        """The OpenAI base URL of a session: ``http://host:port/sessions/<id>/v1``."""
        return f"{self.url}/sessions/{session_id}/v1"

    def start(self, timeout_s: float = 30.0) -> "PolicyServer":
        _fastapi()
        import uvicorn

        config = uvicorn.Config(create_app(self.service), host=self.host, port=self.port, log_level=self.log_level,
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
