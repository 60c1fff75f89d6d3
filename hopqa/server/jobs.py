"""Answering one request: checked before any work (``prepare``), then run in a thread (``Job``).

``prepare`` turns a request's fields into a ``Plan`` or raises ``RequestError`` (a 422 whose
message names what was wrong): an empty or too long question, ``k`` outside ``1..max_k``, an
unknown method (the message lists the known ones), an option the method does not have (the
message names it and the known ones) or a value that does not suit it (named, with what it
takes). Option values come as JSON values (``{"k": 3, "structured": "off"}``) or, as with the
CLI's ``--set``, as text converted to the field's type (``{"k": "3"}``); ``"preset"`` names one of
the method's presets (``{"preset": "small-model"}``), whose options the others override. ``k`` is set only on a
method whose config has a ``k`` (the CLI's ``--k`` likewise; others ignore it). A resource
option (a dataset, a directory, a model, a URL: ``hopqa.options``) takes only a name of
``ServiceSettings.allowed_names`` (or the method's default), never a path, a directory option
nothing: refused from the text alone, before anything reads a file. A numeric option over its
service cap (``ServiceSettings.option_caps``, the method's default included) is refused with the
cap and the ``hopqa serve --cap`` that raises it.

A ``Job`` runs a plan in its own thread, through its admission ``Ticket``: it waits for its
turn, gets the retriever (``ServiceSettings.retriever_for``) and builds the method
(``hopqa.build.assemble``, as the command line and ``hopqa.pipeline`` do), then answers, inside ``hopqa.trace.observe`` when the request
streams (the observer is a context variable: it is set in the thread that calls ``answer``).
What happens is reported to the event loop as ``(kind, payload)`` events on an
``asyncio.Queue`` (``loop.call_soon_threadsafe``, the thread-safe way in): ``built`` (the method
is ready), ``build-error`` (a ``ValueError`` building it: a retriever kind that cannot be had, a
bad component), ``step`` (a trace record, as JSON text, in the order the steps happen),
``answer`` (a ``Done``: the ``Answer`` as ``Answer.to_dict()`` and as JSON text, both made in
the worker thread so that a large trace does not hold up the event loop; its traceback events
replaced by an error id: ``hopqa.server.errors``), ``cancelled`` (the job was cancelled: its
``reason``), ``failed`` (an unexpected exception: its kind, message and error id). The request
waits on these with a deadline (``next_event``). ``Job.cancel(reason)`` sets the job's
``cancel_event``, under which the method answers (``hopqa.runtime.cancellable``): work not
started is skipped and running work stops at its next LLM or retrieval call; ``abandon`` (the
request gave up) also drops later events.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import secrets
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from hopqa.config import valid_text
from hopqa.methods.base import (
    METHODS,
    MethodError,
    get_method_class,
    method_config,
    normalize_name,
    parse_option,
    preset_options,
)
from hopqa.options import (
    OptionError,
    field_kind,
    numbers_of,
    path_reason,
    resource_fields,
)
from hopqa.runtime import cancellable
from hopqa.server.admission import Cancelled, Ticket
from hopqa.server.errors import failure, log, public_answer, public_step
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


def check_resource(method: str, name: str, value: Any, what: str, allowed: Collection[str]) -> None:
    """``RequestError`` unless ``value`` is a name the service allows for the resource option
    ``name`` (``what`` it names: ``hopqa.options.RESOURCE_KINDS``): a directory never, anything
    path-like never (even if listed), else one of ``allowed``. Looks at the text only: the
    message is the same whether or not such a file exists."""
    where = f"method {method!r}: option {name}"
    if not isinstance(value, str):
        raise RequestError(f"{where} must be text, not {type(value).__name__}")
    if what == "directory":
        raise RequestError(f"{where} names a directory on the server, which a client cannot set (the service "
                           "keeps its files in its home)")
    shown = repr(value) if len(value) <= 80 else repr(value[:80]) + "..."
    reason = path_reason(value, what)
    names = ", ".join(allowed) if allowed else "none"
    if reason is not None or value not in allowed:
        why = f"{reason}: a {what} is given by name, never as a path or URL" if reason else "not allowed"
        raise RequestError(f"{where}={shown}: {why}; this service allows: {names} (the operator allows more "
                           f"with `hopqa serve --allow-option {name}=NAME`)")


def check_caps(method: str, config: Any, caps: Mapping[str, int], sent: Collection[str] = ()) -> None:
    """``RequestError`` naming the first option of ``config`` (in field order) over its service
    cap (``caps`` by option name; each number of a list option counts); ``sent``: the options the
    client set (the others are the method's defaults, said so)."""
    config_cls = type(config)
    for f in dataclasses.fields(config_cls):
        cap = caps.get(f.name)
        if cap is None:
            continue
        over = [n for n in numbers_of(config_cls, f.name, getattr(config, f.name)) if n > cap]
        if over:
            whose = "" if f.name in sent else " (the method's default: set a lower value)"
            raise RequestError(f"method {method!r}: option {f.name} is {getattr(config, f.name)!r}{whose}; this "
                               f"service caps it at {cap} (the operator raises the cap with `hopqa serve --cap "
                               f"{f.name}=N`)")


def check_options(method: str, options: dict[str, Any], k: int | None, max_k: int, *,
                  allowed_names: Mapping[str, Collection[str]] | None = None,
                  caps: Mapping[str, int] | None = None) -> dict[str, Any]:
    """``options`` of ``method`` converted and checked (module docstring), with ``k`` when the
    method takes one; ``RequestError`` naming the first bad one. A resource option takes a name
    of ``allowed_names`` (none when not given) or the method's own default (``check_resource``),
    checked before anything else looks at its value; every option keeps under ``caps``
    (``check_caps``)."""
    config_cls = get_method_class(method).Config
    resources = resource_fields(config_cls)
    defaults = {f.name: f.default for f in dataclasses.fields(config_cls)} | METHODS.preset(method)
    out: dict[str, Any] = {}
    options = dict(options)
    preset = options.pop("preset", None)
    if preset is not None:  # a name among the method's presets, as any option checked before the rest
        if not isinstance(preset, str):
            raise RequestError(f"method {method!r}: option preset must be text, not {type(preset).__name__}")
        try:
            defaults |= preset_options(method, preset)
        except MethodError as exc:
            raise RequestError(str(exc)) from None
        out["preset"] = normalize_name(preset)
    for key, value in options.items():
        try:
            kind = field_kind(config_cls, key)
        except OptionError as exc:
            raise RequestError(f"method {method!r}: {exc}") from None
        if key in resources and not (isinstance(value, str) and value == defaults.get(key)):
            check_resource(method, key, value, resources[key], tuple((allowed_names or {}).get(key, ())))
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
        config = method_config(method, **out)
    except MethodError as exc:
        raise RequestError(f"method {method!r}: {exc}") from None
    check_caps(method, config, caps or {}, out)
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
    checked = check_options(name, dict(options or {}), k, settings.max_k, allowed_names=settings.allowed_names,
                            caps=settings.option_caps)
    return Plan(question=text, method=name, options=checked, retriever=retriever)


def build(settings: ServiceSettings, plan: Plan) -> Any:
    """The method of ``plan`` on the service's model and the retriever it asks for (a
    ``ValueError`` when that cannot be had: ``hopqa.build``'s errors are ``ValueError``s)."""
    from hopqa.build import Recipe, assemble, takes

    retriever = settings.retriever_for(plan.retriever) if takes(plan.method, "retriever") else None
    return assemble(Recipe(plan.method, llm=settings.llm, retriever=retriever, own_paragraphs=retriever is None,
                           options=plan.options, home=settings.home, progress=False))


def json_text(value: Any) -> str:
    """``value`` as JSON text, non-finite numbers as ``null`` (JSON has none) and a lone
    surrogate (a model's broken Unicode) as U+FFFD, so that it always encodes as UTF-8."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), ensure_ascii=False, allow_nan=False)
    return valid_text(text)


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
                 builder: Callable[[ServiceSettings, Plan], Any] = build,
                 on_end: Callable[[Job], None] | None = None) -> None:
        self.settings, self.plan, self.ticket, self.stream = settings, plan, ticket, stream
        self._builder = builder
        self._on_end = on_end
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._abandoned = threading.Event()
        #: Set to stop the work at its next LLM or retrieval call (``hopqa.runtime.cancellable``).
        self.cancel_event = threading.Event()
        #: Why the job was cancelled (``timeout``, ``client disconnected``, ``DELETE``), else None.
        self.reason: str | None = None
        #: ``waiting`` (for its turn), ``running``, then ``done``, ``failed`` or ``cancelled``.
        self.state = "waiting"
        #: The id a client names the job by (``DELETE /v1/jobs/{id}``), unguessable.
        self.id = f"job-{secrets.token_urlsafe(12)}"
        self.created = time.time()
        self.ended: float | None = None
        #: The answer as a client may see it (``hopqa.server.errors.public_answer``), once there is one.
        self.result: dict[str, Any] | None = None
        self.deadline = time.monotonic() + settings.timeout
        self.finished = threading.Event()

    def start(self) -> None:
        thread = threading.Thread(target=self._work, name=f"hopqa-{self.plan.method}", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: the slot was never used
            self.ticket.release_unused()
            raise

    def cancel(self, reason: str) -> bool:
        """Stop the job (module docstring): work not started is skipped, running work stops at
        its next LLM or retrieval call (a backend request in flight is aborted); False when it
        had already ended."""
        if self.finished.is_set():
            return False
        if self.reason is None:
            self.reason = reason
        self.cancel_event.set()
        self.ticket.cancel()
        return True

    def abandon(self, reason: str = "the request ended") -> None:
        """The request gave up (answered, timed out, its client gone): drop later events and
        cancel the work if it is still going."""
        self._abandoned.set()
        self.cancel(reason)

    def summary(self) -> dict[str, Any]:
        """The job for ``GET /v1/jobs``: id, method, question (cut), state, reason, times."""
        question = self.plan.question if len(self.plan.question) <= 200 else self.plan.question[:200] + "..."
        end = self.ended if self.ended is not None else time.time()
        return {"id": self.id, "method": self.plan.method, "question": question, "state": self.state,
                "reason": self.reason, "created": round(self.created, 3), "seconds": round(end - self.created, 3)}

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
        self._report("step", json_text(public_step(record)))  # serialised now: the step changes later

    def _work(self) -> None:
        try:
            self.ticket.run(self._run)
        except Cancelled:  # cancelled while waiting for its turn: nothing ran
            self.state = "cancelled"
            self._report("cancelled", self.reason)
        except Exception as exc:  # noqa: BLE001 - reported, never lost in a thread
            self.state = "failed"
            self._report("failed", failure(exc, f"{self.id} ({self.plan.method}): "))
        finally:
            self.ended = time.time()
            self.finished.set()
            if self.reason is not None and self.state == "cancelled":
                log.info("%s (%s) cancelled: %s", self.id, self.plan.method, self.reason)
            if self._on_end is not None:
                self._on_end(self)

    def _run(self) -> None:
        self.state = "running"
        try:
            method = self._builder(self.settings, self.plan)
        except ValueError as exc:
            self.state = "failed"
            self._report("build-error", str(exc))
            return
        if self.cancel_event.is_set():
            self.state = "cancelled"
            self._report("cancelled", self.reason)
            return
        self._report("built")
        with cancellable(self.cancel_event):
            if self.stream:
                from hopqa.trace import observe

                with observe(self._observe):
                    answer: Answer = method.answer(self.plan.question)
            else:
                answer = method.answer(self.plan.question)
        data = public_answer(answer.to_dict(), f"{self.id} ({self.plan.method}): ", logged=not answer.cancelled)
        if answer.cancelled:
            data["cancelled"] = True
            self.state, self.result = "cancelled", data
            self._report("cancelled", self.reason)
            return
        self.state, self.result = ("failed" if answer.error else "done"), data
        self._report("answer", Done(data, json_text(data)))
