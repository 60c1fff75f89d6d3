"""The service's state and its one way to answer: admit, build, answer, each with the request's deadline.

``Service`` holds the settings, the admission queue (``hopqa.server.admission``), the runs store
(``hopqa.server.runs``) and the method catalog (made once, on first use). Both answering APIs,
hopqa's ``/v1/answer`` and the OpenAI-compatible ``/v1/chat/completions``, go through it:

- ``start(plan, stream)`` admits the request (``ServiceError`` 429 with ``Retry-After`` when
  the queue is full) and starts its ``Job``;
- ``built(job)`` waits until the method is built: a ``ValueError`` building it (a retriever
  kind that cannot be had) is a 422, anything else a 500, the deadline a 504 — all before a
  stream starts, so they are ordinary error responses;
- ``finish(job)`` waits for the answer (a 504 when the deadline passes first);
- ``steps(job)`` yields the trace records of a streaming job, then its answer (``Done``), and
  raises ``ServiceError`` 504 / 500 in the stream's place when it times out or fails.

Whatever way a request ends (answered, timed out, its client gone), its job is abandoned: work
not started is skipped; work running keeps its queue slot until it really ends (a thread
cannot be killed).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from hopqa.server.admission import Admission
from hopqa.server.jobs import Done, Job, JobTimeout, Plan
from hopqa.server.runs import RunStore
from hopqa.server.settings import ServiceSettings


class ServiceError(Exception):
    """An error answer: HTTP ``status``, a one-line ``message``, extra ``headers``, a short ``code``."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})
        self.code = code


class Service:
    """What the app's routes share (module docstring)."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.admission = Admission(settings.max_queue, settings.concurrency)
        self.runs = RunStore(settings.runs_dir)
        self._catalog: dict[str, Any] | None = None

    def catalog(self) -> dict[str, Any]:
        """``GET /v1/methods`` (``hopqa.server.catalog``), made on first use."""
        if self._catalog is None:
            from hopqa.server.catalog import catalog

            self._catalog = catalog(self.settings.default_method)
        return self._catalog

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "llm": self.settings.llm_name,
                "queue": {"pending": self.admission.pending, "running": self.admission.running,
                          "max": self.admission.max_pending}}

    # -- answering -------------------------------------------------------------------------
    def start(self, plan: Plan, stream: bool = False) -> Job:
        """Admit ``plan`` and start its job; ``ServiceError`` 429 when the queue is full."""
        ticket = self.admission.try_admit()
        if ticket is None:
            wait = self.admission.retry_after()
            raise ServiceError(429, f"busy: {self.admission.max_pending} requests are pending (running or waiting); "
                                    f"retry in about {wait} s", headers={"Retry-After": str(wait)},
                               code="rate_limit_exceeded")
        job = Job(self.settings, plan, ticket, stream=stream)
        job.start()
        return job

    def _timeout(self) -> ServiceError:
        return ServiceError(504, f"no answer within the service's timeout of {self.settings.timeout:g} s (the work "
                                 "goes on until it ends and holds its place in the queue until then)", code="timeout")

    async def built(self, job: Job) -> None:
        """Wait until ``job``'s method is built; its failure or the deadline as a ``ServiceError``."""
        try:
            kind, payload = await job.next_event()
        except JobTimeout:
            job.abandon()
            raise self._timeout() from None
        if kind == "built":
            return
        job.abandon()
        if kind == "build-error":
            raise ServiceError(422, str(payload), code="invalid_value")
        raise ServiceError(500, f"the method could not run: {payload}", code="internal_error")

    async def finish(self, job: Job) -> Done:
        """Wait for ``job``'s answer (after ``built``); the deadline or a failure as a ``ServiceError``."""
        try:
            while True:
                item = await self._next(job)
                if isinstance(item, Done):
                    return item
        finally:
            job.abandon()

    async def steps(self, job: Job) -> AsyncIterator[str | Done]:
        """The trace records of ``job`` (JSON text) as they happen, then its ``Done``."""
        while True:
            item = await self._next(job)
            yield item
            if isinstance(item, Done):
                return

    async def _next(self, job: Job) -> str | Done:
        """The next trace record or the answer of a running job."""
        try:
            kind, payload = await job.next_event()
        except JobTimeout:
            raise self._timeout() from None
        if kind in ("step", "answer"):
            return payload
        raise ServiceError(500, f"the method could not run: {payload}", code="internal_error")
