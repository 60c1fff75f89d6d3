"""Answering one request: checked before any work (``prepare``), then run in a thread (``Job``).

``prepare`` turns a request's fields into a ``Plan`` or raises ``RequestError`` (a 422 whose
message names what was wrong): an empty or too long question, ``k`` outside ``1..max_k``, an
unknown method (the message lists the known ones), an option the method does not have (the
message names it and the known ones) or a value that does not suit it (named, with what it
takes). Option values come as JSON values (``{"k": 3, "structured": "off"}``) or, as with the
CLI's ``--set``, as text converted to the field's type (``{"k": "3"}``). ``k`` is set only on a
method whose config has a ``k`` (the CLI's ``--k`` likewise; others ignore it).

A ``Job`` runs a plan in its own thread, through its admission ``Ticket``: it waits for its
turn, gets the retriever (``ServiceSettings.retriever_for``) and builds the method
(``hopqa.build.build_method``), then answers, inside ``hopqa.trace.observe`` when the request
streams (the observer is a context variable: it is set in the thread that calls ``answer``).
What happens is reported to the event loop as ``(kind, payload)`` events on an
``asyncio.Queue`` (``loop.call_soon_threadsafe``, the thread-safe way in): ``built`` (the method
is ready), ``build-error`` (a ``ValueError`` building it: a retriever kind that cannot be had, a
bad component), ``step`` (a trace record, as JSON text, in the order the steps happen),
``answer`` (a ``Done``: the ``Answer`` as ``Answer.to_dict()`` and as JSON text, both made in
the worker thread so that a large trace does not hold up the event loop), ``failed`` (an
unexpected exception). The request waits on these with a deadline (``next_event``); a thread
cannot be stopped, so a request that gives up only ``abandon``s its job: work not yet started
is skipped, running work goes on to its end (its events dropped) and keeps its queue slot
until then.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hopqa.methods.base import (
    MethodError,
    get_method_class,
    method_config,
    normalize_name,
    parse_option,
)
from hopqa.options import OptionError, field_kind
from hopqa.server.admission import Cancelled, Ticket
from hopqa.server.settings import ServiceSettings
from hopqa.types import Answer


class RequestError(ValueError):
    """Bad input in a request: the service answers ``status`` with the message."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


class JobTimeout(Exception):
    """The request's deadline passed before the job reported what it waited for."""


@dataclass
class Plan:
    """A checked request: what to answer, with which method and options, over which retriever."""

    question: str
    method: str
    options: dict[str, Any] = field(default_factory=dict)
    retriever: str | None = None


def check_question(question: Any, limit: int) -> str:
    """``question`` with whitespace collapsed; ``RequestError`` if empty or over ``limit`` characters."""
    if not isinstance(question, str) or not question.strip():
        raise RequestError("the question is empty")
    text = " ".join(question.split())
    if len(text) > limit:
        raise RequestError(f"the question is {len(text)} characters long; the limit is {limit} characters")
    return text


def check_options(method: str, options: dict[str, Any], k: int | None, max_k: int) -> dict[str, Any]:
    """``options`` of ``method`` converted and checked (module docstring), with ``k`` when the
    method takes one; ``RequestError`` naming the first bad one."""
    config_cls = get_method_class(method).Config
    out: dict[str, Any] = {}
    for key, value in options.items():
        try:
            kind = field_kind(config_cls, key)
        except OptionError as exc:
            raise RequestError(f"method {method!r}: {exc}") from None
        if isinstance(value, str) and kind not in ("str", "any"):
            try:
                value = parse_option(config_cls, key, value)
            except MethodError as exc:
                raise RequestError(f"method {method!r}: {exc}") from None
        out[key] = value
    if k is not None and "k" in {f.name for f in dataclasses.fields(config_cls)}:
        out["k"] = k
    passages = out.get("k")
    if isinstance(passages, int) and not isinstance(passages, bool) and not 1 <= passages <= max_k:
        raise RequestError(f"k must be between 1 and {max_k}, not {passages}")
    try:
        method_config(method, **out)
    except MethodError as exc:
        raise RequestError(f"method {method!r}: {exc}") from None
    return out


def prepare(settings: ServiceSettings, question: Any, method: str | None = None,
            options: dict[str, Any] | None = None, k: int | None = None, retriever: str | None = None) -> Plan:
    """The checked plan of a request, or ``RequestError`` (module docstring)."""
    text = check_question(question, settings.max_question_chars)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= settings.max_k):
        raise RequestError(f"k must be between 1 and {settings.max_k}, not {k!r}")
    name = normalize_name(method or settings.default_method)
    try:
        get_method_class(name)
    except MethodError as exc:
        raise RequestError(str(exc)) from None
    return Plan(question=text, method=name, options=check_options(name, dict(options or {}), k, settings.max_k),
                retriever=retriever)


def build(settings: ServiceSettings, plan: Plan) -> Any:
    """The method of ``plan`` on the service's model and the retriever it asks for (a
    ``ValueError`` when that cannot be had: ``hopqa.build``'s errors are ``ValueError``s)."""
    from hopqa.build import build_method, takes

    retriever = settings.retriever_for(plan.retriever) if takes(plan.method, "retriever") else None
    return build_method(plan.method, settings.llm, retriever, home=settings.home, progress=False, **plan.options)


def json_text(value: Any) -> str:
    """``value`` as JSON text, non-finite numbers as ``null`` (JSON has none)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


Event = tuple[str, Any]


@dataclass
class Done:
    """A finished answer: ``Answer.to_dict()`` and the same as JSON text."""

    data: dict[str, Any]
    text: str


class Job:
    """One request's work in a thread of its own (module docstring)."""

    def __init__(self, settings: ServiceSettings, plan: Plan, ticket: Ticket, *, stream: bool = False,
                 builder: Callable[[ServiceSettings, Plan], Any] = build) -> None:
        self.settings, self.plan, self.ticket, self.stream = settings, plan, ticket, stream
        self._builder = builder
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._abandoned = threading.Event()
        self.deadline = time.monotonic() + settings.timeout
        self.finished = threading.Event()

    def start(self) -> None:
        thread = threading.Thread(target=self._work, name=f"hopqa-{self.plan.method}", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: the slot was never used
            self.ticket.release_unused()
            raise

    def abandon(self) -> None:
        """The request gave up: skip what has not started, drop later events (module docstring)."""
        self._abandoned.set()
        self.ticket.cancel()

    async def next_event(self) -> Event:
        """The next event, or ``JobTimeout`` when the request's deadline passes first."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise JobTimeout()
        try:
            return await asyncio.wait_for(self._events.get(), timeout=remaining)
        except TimeoutError:
            raise JobTimeout() from None

    # -- in the worker thread ---------------------------------------------------------------
    def _report(self, kind: str, payload: Any = None) -> None:
        if self._abandoned.is_set():
            return
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, (kind, payload))
        except RuntimeError:  # the event loop is closed (the service stopped)
            pass

    def _observe(self, record: dict[str, Any]) -> None:
        self._report("step", json_text(record))  # serialised now: the step changes later

    def _work(self) -> None:
        try:
            self.ticket.run(self._run)
        except Cancelled:
            pass
        except Exception as exc:  # noqa: BLE001 - reported, never lost in a thread
            self._report("failed", f"{type(exc).__name__}: {exc}")
        finally:
            self.finished.set()

    def _run(self) -> None:
        try:
            method = self._builder(self.settings, self.plan)
        except ValueError as exc:
            self._report("build-error", str(exc))
            return
        if self._abandoned.is_set():
            return
        self._report("built")
        if self.stream:
            from hopqa.trace import observe

            with observe(self._observe):
                answer: Answer = method.answer(self.plan.question)
        else:
            answer = method.answer(self.plan.question)
        data = answer.to_dict()
        self._report("answer", Done(data, json_text(data)))
