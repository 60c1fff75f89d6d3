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
  raises ``ServiceError`` 504 / 409 / 500 in the stream's place when it times out, is cancelled
  or fails.

Given the request, ``built`` and ``finish`` also watch its connection: a client that disconnects
while waiting (``ClientGone``) cancels its job. Whatever way a request ends (answered, timed
out, cancelled, its client gone), its job is cancelled if it is still going: work not started is
skipped, running work stops at its next LLM or retrieval call (``hopqa.runtime.cancellable``;
a backend request in flight is aborted), and the queue slot is free as soon as it stops.

Jobs: every job has an unguessable id (``X-Hopqa-Job``); ``jobs()`` lists those running or
waiting and the last ``KEPT_JOBS`` that ended (memory stays bounded whatever the number of
requests), ``job(id)`` gives one with its answer and trace (a cancelled job's too, marked
``cancelled``), and ``cancel(id)`` (``DELETE /v1/jobs/{id}``) stops one: its waiting request
then gets a 409.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.requests import Request

from hopqa.server.admission import Admission
from hopqa.server.jobs import Done, Event, Job, JobTimeout, Plan
from hopqa.server.runs import RunStore
from hopqa.server.settings import ServiceSettings

#: The response header that names a request's job (``DELETE /v1/jobs/{id}`` cancels it).
JOB_HEADER = "X-Hopqa-Job"
#: Jobs kept after they end, for ``GET /v1/jobs/{id}`` (their answers and traces, cancelled ones too).
KEPT_JOBS = 64


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
        self._jobs_lock = threading.Lock()
        self._active: dict[str, Job] = {}
        self._ended: OrderedDict[str, Job] = OrderedDict()

    def catalog(self) -> dict[str, Any]:
        """``GET /v1/methods`` (``hopqa.server.catalog``), made on first use."""
        if self._catalog is None:
            from hopqa.server.catalog import catalog

            self._catalog = catalog(self.settings.default_method, settings=self.settings)
        return self._catalog

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "llm": self.settings.llm_name,
                "queue": {"pending": self.admission.pending, "running": self.admission.running,
                          "max": self.admission.max_pending}}

    # -- the jobs ---------------------------------------------------------------------------
    def _ended_job(self, job: Job) -> None:
        """A job's thread ended: keep it among the last ``KEPT_JOBS`` (module docstring)."""
        with self._jobs_lock:
            self._active.pop(job.id, None)
            self._ended[job.id] = job
            while len(self._ended) > KEPT_JOBS:
                self._ended.popitem(last=False)

    def jobs(self) -> list[dict[str, Any]]:
        """``GET /v1/jobs``: the jobs running or waiting, then the last ones that ended, newest first."""
        with self._jobs_lock:
            active, ended = list(self._active.values()), list(self._ended.values())
        return [job.summary() for job in sorted(active, key=lambda j: -j.created)] + \
            [job.summary() for job in reversed(ended)]

    def job(self, job_id: str) -> Job:
        """A job by its id; ``ServiceError`` 404 if there is none (or it ended long ago)."""
        with self._jobs_lock:
            job = self._active.get(job_id) or self._ended.get(job_id)
        if job is None:
            raise ServiceError(404, f"no job {job_id!r} (GET /v1/jobs lists the running ones and the last "
                                    f"{KEPT_JOBS} that ended)", code="not_found")
        return job

    def cancel(self, job_id: str) -> Job:
        """``DELETE /v1/jobs/{id}``: cancel a job (``ServiceError`` 404 when unknown, 409 when it
        had already ended)."""
        job = self.job(job_id)
        if not job.cancel("cancelled by DELETE /v1/jobs"):
            raise ServiceError(409, f"job {job_id} has already ended ({job.state})", code="job_ended")
        return job

    # -- answering -------------------------------------------------------------------------
    def start(self, plan: Plan, stream: bool = False) -> Job:
        """Admit ``plan`` and start its job; ``ServiceError`` 429 when the queue is full."""
        ticket = self.admission.try_admit()
        if ticket is None:
            wait = self.admission.retry_after()
            raise ServiceError(429, f"busy: {self.admission.max_pending} requests are pending (running or waiting); "
                                    f"retry in about {wait} s", headers={"Retry-After": str(wait)},
                               code="rate_limit_exceeded")
        job = Job(self.settings, plan, ticket, stream=stream, on_end=self._ended_job)
        with self._jobs_lock:
            self._active[job.id] = job
        try:
            job.start()
        except BaseException:
            with self._jobs_lock:
                self._active.pop(job.id, None)
            raise
        return job

    def _timeout(self) -> ServiceError:
        return ServiceError(504, f"no answer within the service's timeout of {self.settings.timeout:g} s: the work "
                                 "was cancelled", code="timeout")

    @staticmethod
    def _cancelled(job: Job) -> ServiceError:
        return ServiceError(409, f"job {job.id} was cancelled ({job.reason or 'cancelled'})", code="cancelled")

    async def built(self, job: Job, request: Request | None = None) -> None:
        """Wait until ``job``'s method is built; its failure, its cancellation, the client
        leaving or the deadline as a ``ServiceError`` (the job then cancelled)."""
        try:
            kind, payload = await self._event(job, request)
        except JobTimeout:
            job.abandon("timeout")
            raise self._timeout() from None
        if kind == "built":
            return
        job.abandon()
        if kind == "build-error":
            raise ServiceError(422, str(payload), code="invalid_value")
        if kind == "cancelled":
            raise self._cancelled(job)
        raise self._failed(payload)

    async def finish(self, job: Job, request: Request | None = None) -> Done:
        """Wait for ``job``'s answer (after ``built``); the deadline, a cancellation, the client
        leaving or a failure as a ``ServiceError``; the job is cancelled unless it answered."""
        try:
            while True:
                item = await self._next(job, request)
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

    async def _next(self, job: Job, request: Request | None = None) -> str | Done:
        """The next trace record or the answer of a running job."""
        try:
            kind, payload = await self._event(job, request)
        except JobTimeout:
            job.abandon("timeout")
            raise self._timeout() from None
        if kind in ("step", "answer"):
            return payload
        if kind == "cancelled":
            raise self._cancelled(job)
        raise self._failed(payload)

    @staticmethod
    def _failed(payload: Any) -> ServiceError:
        if isinstance(payload, dict):  # hopqa.server.errors.failure
            return ServiceError(500, f"the method could not run: {payload['kind']}: {payload['message']} (error id "
                                     f"{payload['id']}; the details are in the server's log)", code="internal_error")
        return ServiceError(500, f"the method could not run: {payload}", code="internal_error")

    async def _event(self, job: Job, request: Request | None) -> Event:
        """``job.next_event()``; when ``request`` is given, ``ClientGone`` as soon as its client
        disconnects (the job is then cancelled)."""
        if request is None:
            return await job.next_event()
        waiting = asyncio.ensure_future(job.next_event())
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait((waiting, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiting, gone):
                if not task.done():
                    task.cancel()
        if waiting.done():
            return waiting.result()
        job.abandon("client disconnected")
        raise ClientGone()


class ClientGone(Exception):
    """The client closed its connection while waiting: nobody is left to answer."""


async def _disconnected(request: Request) -> None:
    """Return when the client of ``request`` (whose body has been read) disconnects."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return
