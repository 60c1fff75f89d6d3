"""The HTTP service: ``create_app(ServiceSettings) -> FastAPI`` (``hopqa serve`` runs it with uvicorn).

Endpoints (OpenAPI docs at ``/docs``, Swagger UI served from this service, unless
``ServiceSettings.docs`` is off; the schema at ``/openapi.json``; docs/service.md has
examples):

- ``POST /v1/answer`` ``{question, method, options, k, retriever, stream}``: the answer as
  ``hopqa ask --json`` prints it (``Answer.to_dict()``); a method's own failure is the answer's
  ``error``, with status 200. With ``"stream": true``, server-sent events: ``event: step`` with
  each trace record as it happens (``hopqa.trace.observe``: ``{"event": "open", ...}`` /
  ``{"event": "close", ...}``), then one ``event: answer`` with the answer, then the end; a
  timeout or failure after the stream began is an ``event: error`` with ``{"status",
  "detail"}``, then the end.
- ``GET /v1/methods``: every method with its doc line, paper and options
  (``hopqa.server.catalog``).
- ``GET /v1/runs``, ``GET /v1/runs/{run}/{method}``: the evaluation runs under ``--runs``
  (``hopqa.server.runs``).
- ``GET /v1/models``, ``POST /v1/chat/completions``: OpenAI-compatible
  (``hopqa.server.openai_compat``).
- ``GET /v1/jobs``, ``GET /v1/jobs/{id}``, ``DELETE /v1/jobs/{id}``: the answering jobs (running,
  waiting, and the last ones that ended, with their answers and traces, cancelled ones too), and
  cancelling one (``hopqa.server.service``). Every answer names its job in the header
  ``X-Hopqa-Job`` (a stream also in its first event, ``event: job``); a cancelled request gets
  409 (a stream: an ``error`` event with status 409).
- ``GET /healthz``: ``{"status": "ok", "llm", "queue": {"pending", "running", "max"}}``; with a
  key set, a client without it gets ``{"status": "ok"}`` alone.
- ``GET /``: the web page (``hopqa/server/static/index.html``, a placeholder until it exists);
  ``/static/...``: its files.

Safety. With an API key, every ``/v1`` request must carry it, as ``Authorization: Bearer KEY``
or as the cookie ``hopqa_key`` (for the page; a cookie is taken only from a same-origin
request: no ``Origin`` header or one naming this host, and no cross-site ``Sec-Fetch-Site``),
compared in constant time (``hmac.compare_digest``); else 401. The key is never logged or
echoed. ``/healthz`` (its status only), ``/docs`` and the page are open. Every request must name
this service in its ``Host`` (else 400) and every response carries security headers
(``hopqa.server.headers``); connections are capped and timed by ``hopqa serve``
(``hopqa.server.connections``). Limits, each an error naming it: a body
over ``max_body_bytes`` is a 413 (by its ``Content-Length`` and by the bytes actually
received), an empty question or one over ``max_question_chars`` a 422, ``k`` outside
``1..max_k`` a 422, a full queue a 429 with ``Retry-After``, no answer within ``timeout``
seconds a 504. A timeout, a client that disconnects (the answer's or the stream's) and ``DELETE
/v1/jobs/{id}`` cancel the job: it stops at its next LLM or retrieval call, a backend request in
flight is aborted, and its queue slot is freed (``hopqa.server.service``). A body whose text is
not Unicode (a lone surrogate, ``"\\ud800"``) or a number JSON cannot hold (``1e400``) is a 422
before any work. A failure tells its kind, a message and an error id, never a traceback (which
the server logs under that id: ``hopqa.server.errors``); a stream that fails after it began
always ends with an ``error`` event. Errors of hopqa's endpoints are
``{"detail": message}`` (FastAPI's own request checks: ``{"detail": [problems]}``); those of the
OpenAI-compatible ones are OpenAI's ``{"error": {"message", "type", "param", "code"}}``. Model
output is only ever returned inside JSON (``application/json`` bodies, JSON ``data:`` lines of
event streams), never as a page.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sse_starlette.sse import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hopqa.config import VERSION
from hopqa.server.errors import failure, public_record
from hopqa.server.headers import SecurityHeaders, TrustedHosts, trusted_hosts
from hopqa.server.jobs import Done, Job, Plan, RequestError, json_text, prepare
from hopqa.server.runs import Filters, RunNotFound
from hopqa.server.schemas import AnswerOut, AnswerRequest, ErrorOut, HealthOut
from hopqa.server.service import JOB_HEADER, ClientGone, Service, ServiceError
from hopqa.server.settings import ServiceSettings

__all__ = ["ServiceSettings", "create_app"]

#: The web page's files (written by the page's own module of work; served as they are).
STATIC_DIR = Path(__file__).parent / "static"
#: The cookie the page may carry the API key in (module docstring).
KEY_COOKIE = "hopqa_key"
#: The OpenAI-compatible paths: their errors take OpenAI's shape.
OPENAI_PATHS = ("/v1/chat/completions", "/v1/models")

PLACEHOLDER = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hopqa</title></head>
<body><h1>hopqa</h1><p>The web page is not installed. The API is documented at <a href="/docs">/docs</a>.</p>
</body></html>
"""

_ERRORS: dict[int, Any] = {status: {"model": ErrorOut} for status in (401, 404, 409, 413, 422, 429, 504)}


def create_app(settings: ServiceSettings) -> FastAPI:
    """The service's FastAPI application (module docstring)."""
    from hopqa.server.openai_compat import router as openai_router

    service = Service(settings)
    app = FastAPI(title="hopqa", version=VERSION, docs_url=None, redoc_url=None,
                  description="Retrieval-augmented multi-hop question answering: answers with their reasoning "
                              "traces, the methods, evaluation runs, and an OpenAI-compatible chat endpoint.")
    app.state.service = service
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(TrustedHosts, allowed=trusted_hosts(settings.host, settings.allowed_hosts))
    app.add_middleware(SecurityHeaders)  # the outermost: on every response, the refusals too
    _add_error_handlers(app)
    check_key = key_checker(settings.api_key)

    v1 = APIRouter(prefix="/v1", dependencies=[Depends(check_key)], responses={401: {"model": ErrorOut}})

    @v1.post("/answer", response_model=None, responses={200: {"model": AnswerOut, "description": "the answer; "
                                                              "with stream: text/event-stream"}, **_ERRORS},
             summary="Answer a question (hopqa ask --json)")
    async def answer(body: AnswerRequest, request: Request) -> Response:
        plan = _plan(service, body.question, body.method, body.options, body.k, body.retriever)
        job = service.start(plan, stream=body.stream)
        try:
            await service.built(job, request)
            if not body.stream:
                done = await service.finish(job, request)
                return Response(done.text, media_type="application/json", headers={JOB_HEADER: job.id})
        except ClientGone:
            return Response(status_code=499)  # nobody reads it: the job is cancelled
        except BaseException:
            job.abandon()
            raise
        return EventSourceResponse(_answer_events(service, job), ping=settings.ping_seconds,
                                   headers={JOB_HEADER: job.id})

    @v1.get("/jobs", summary="The jobs running or waiting, and the last ones that ended")
    async def jobs() -> Response:
        return JSONResponse({"jobs": service.jobs()})

    @v1.get("/jobs/{job_id}", summary="One job: its state and, once it ended, its answer and trace",
            responses={404: {"model": ErrorOut}})
    async def job_of(job_id: str) -> Response:
        job = service.job(job_id)
        found = {**job.summary(), "answer": job.result}
        return Response(await run_in_threadpool(json_text, found), media_type="application/json")

    @v1.delete("/jobs/{job_id}", summary="Cancel a job: it stops at its next LLM or retrieval call",
               responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}})
    async def cancel_job(job_id: str) -> Response:
        job = service.cancel(job_id)
        return JSONResponse({**job.summary(), "state": "cancelling" if not job.finished.is_set() else job.state},
                            status_code=202)

    @v1.get("/methods", summary="The methods, their papers and options")
    async def methods() -> Response:
        return JSONResponse(await run_in_threadpool(service.catalog))

    @v1.get("/runs", summary="The evaluation runs under --runs", responses={404: {"model": ErrorOut}})
    async def runs() -> Response:
        return JSONResponse({"runs": await run_in_threadpool(service.runs.runs)})

    async def run_records(run: str, method: str, wrong: bool, failed: bool, metric: str | None,
                          below: float | None, above: float | None, offset: int, limit: int,
                          id: str | None) -> Response:
        if id is not None:
            record = public_record(await run_in_threadpool(service.runs.record, run, method, id))
            return Response(await run_in_threadpool(json_text, {"record": record}), media_type="application/json")
        if (below is not None or above is not None) and not metric:
            raise ServiceError(422, "below= and above= need metric=NAME (e.g. metric=f1&below=0.5)")
        filters = Filters(wrong=wrong, failed=failed, metric=metric, below=below, above=above)
        found = await run_in_threadpool(service.runs.records, run, method, filters, offset, limit)
        return Response(json_text(found), media_type="application/json")

    records_doc = {"summary": "One run's summary and records (filtered), or one record with its trace (?id=)",
                   "responses": {404: {"model": ErrorOut}}}

    @v1.get("/runs/{run:path}/{method}", **records_doc)
    async def run_of(run: str, method: str, wrong: bool = False, failed: bool = False, metric: str | None = None,
                     below: float | None = None, above: float | None = None, offset: int = Query(0, ge=0),
                     limit: int = Query(200, ge=1, le=1000), id: str | None = None) -> Response:
        return await run_records(run, method, wrong, failed, metric, below, above, offset, limit, id)

    @v1.get("/runs/{method}", **records_doc)
    async def top_run_of(method: str, wrong: bool = False, failed: bool = False, metric: str | None = None,
                         below: float | None = None, above: float | None = None, offset: int = Query(0, ge=0),
                         limit: int = Query(200, ge=1, le=1000), id: str | None = None) -> Response:
        return await run_records("", method, wrong, failed, metric, below, above, offset, limit, id)

    app.include_router(v1)
    app.include_router(openai_router(service), prefix="/v1", dependencies=[Depends(check_key)])

    @app.get("/healthz", response_model=HealthOut, response_model_exclude_none=True,
             summary="Liveness; the model and the queue for a client with the key (or without a key set)")
    async def healthz(request: Request) -> dict[str, Any]:
        if not carries_key(request, settings.api_key):
            return {"status": "ok"}
        return service.health()

    if settings.docs:
        _add_docs(app)

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        index = STATIC_DIR / "index.html"
        if index.is_file():
            return FileResponse(index, media_type="text/html")
        return HTMLResponse(PLACEHOLDER)

    app.mount("/static", _StaticFiles(directory=STATIC_DIR, check_dir=False), name="static")
    return app


def _plan(service: Service, question: Any, method: str | None, options: dict[str, Any] | None, k: int | None,
          retriever: str | None) -> Plan:
    """``jobs.prepare`` with its ``RequestError`` as a ``ServiceError``."""
    try:
        return prepare(service.settings, question, method, options, k, retriever)
    except RequestError as exc:
        raise ServiceError(exc.status, str(exc), code="invalid_value") from None


async def _answer_events(service: Service, job: Job) -> AsyncIterator[dict[str, str]]:
    """The events of a streamed ``/v1/answer`` (module docstring): ``job`` (its id) first; a
    failure of any kind ends the stream with an ``error`` event."""
    try:
        yield {"event": "job", "data": json_text({"id": job.id})}
        async for item in service.steps(job):
            if isinstance(item, Done):
                yield {"event": "answer", "data": item.text}
            else:
                yield {"event": "step", "data": item}
    except ServiceError as exc:
        yield {"event": "error", "data": json_text({"status": exc.status, "detail": exc.message, "code": exc.code})}
    except Exception as exc:  # noqa: BLE001 - the stream has begun: the client is told, the log has the rest
        detail = failure(exc, f"{job.id} stream: ")
        yield {"event": "error", "data": json_text({"status": 500, "detail": f"{detail['kind']}: {detail['message']}",
                                                    "code": "internal_error", "id": detail["id"]})}
    finally:
        job.abandon()


# -- the API key ---------------------------------------------------------------------------------
_bearer = HTTPBearer(auto_error=False, description="the service's API key (hopqa serve --api-key or $HOPQA_API_KEY)")


def key_checker(key: str | None) -> Any:
    """The dependency that lets a ``/v1`` request through only with ``key`` (module docstring)."""
    async def check(request: Request,
                    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
        # ``credentials`` declares the Bearer scheme in the OpenAPI schema; ``carries_key`` reads it.
        if carries_key(request, key):
            return
        raise ServiceError(401, "this service needs its API key: send the header Authorization: Bearer KEY",
                           headers={"WWW-Authenticate": "Bearer"}, code="invalid_api_key")

    return check


def carries_key(request: Request, key: str | None) -> bool:
    """Whether ``request`` carries ``key`` (always, without a key): as ``Authorization: Bearer KEY``
    or, from the service's own origin, the cookie (module docstring). ``key_checker`` lets a
    ``/v1`` request through on it; ``/healthz`` shows the model and the queue only then."""
    if not key:
        return True
    secret = key.encode()
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), secret):
        return True
    cookie = request.cookies.get(KEY_COOKIE)
    return cookie is not None and hmac.compare_digest(cookie.encode(), secret) and _same_origin(request)


def _same_origin(request: Request) -> bool:
    """Whether a browser sent ``request`` from this service's own page (module docstring)."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == request.headers.get("host")


# -- errors ---------------------------------------------------------------------------------------
#: OpenAI's error ``type`` by status.
_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                 413: "invalid_request_error", 429: "rate_limit_error", 504: "timeout_error"}


def is_openai_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in OPENAI_PATHS)


def error_response(path: str, status: int, message: str, headers: dict[str, str] | None = None,
                   code: str | None = None) -> JSONResponse:
    """hopqa's ``{"detail": ...}``, or OpenAI's error shape on the OpenAI-compatible paths, where
    bad input is a 400 as in OpenAI's API."""
    if not is_openai_path(path):
        return JSONResponse({"detail": message}, status_code=status, headers=headers)
    status = 400 if status == 422 else status
    kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}},
                        status_code=status, headers=headers)


def _add_error_handlers(app: FastAPI) -> None:
    async def service_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ServiceError)
        return error_response(request.url.path, exc.status, exc.message, exc.headers, exc.code)

    async def run_not_found(request: Request, exc: Exception) -> Response:
        return error_response(request.url.path, 404, str(exc), code="not_found")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        return error_response(request.url.path, exc.status_code, str(exc.detail), dict(exc.headers or {}))

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if not is_openai_path(request.url.path):  # FastAPI's shape, its inputs made JSON-safe (k: 1e400 is inf)
            return Response(json_text({"detail": jsonable_encoder(exc.errors())}), status_code=422,
                            media_type="application/json")
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'body'}: {e.get('msg')}"
                             for e in exc.errors())
        return error_response(request.url.path, 400, f"invalid request: {problems}", code="invalid_value")

    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(RunNotFound, run_not_found)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)


# -- the API documentation ------------------------------------------------------------------------
def _add_docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) with its script and style served from ``/docs/assets`` (the copies
    the ``fastapi-offline`` package ships), never from a CDN: it works offline and loads nothing
    from a third party. No ``/redoc``: ReDoc's bundle fetches its logo from its CDN. Without that
    package, no docs page (the schema stays at ``/openapi.json``)."""
    try:
        import fastapi_offline
    except ImportError:
        return
    from fastapi.openapi.docs import get_swagger_ui_html

    assets = "/docs/assets"
    app.mount(assets, StaticFiles(directory=Path(fastapi_offline.__file__).parent / "static"), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(openapi_url=root + openapi_url, title=f"{app.title} - Swagger UI",
                                   swagger_js_url=f"{root}{assets}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{assets}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{assets}/favicon.png",
                                   swagger_ui_parameters={"validatorUrl": None})


# -- request bodies ---------------------------------------------------------------------------------
class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is refused with 413 before the app
    sees it, by its ``Content-Length`` or, without one (chunked), by the bytes received; the
    body (at most ``max_bytes``) is then handed to the app as received."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(scope.get("path", ""), 413,
                                  f"the request body is larger than the limit of {self.max_bytes} bytes",
                                  code="request_too_large")
        await response(scope, receive, send)


class _StaticFiles(StaticFiles):
    """The page's files; until their directory exists, every path is simply not found."""

    async def check_config(self) -> None:
        if self.directory is not None and Path(self.directory).is_dir():
            await super().check_config()
