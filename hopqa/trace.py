"""The reasoning trace: a tree of steps, each with inputs, outputs, model calls and passages.

A method opens steps with ``trace.step(kind, **inputs)`` (a context manager); the step that is
open in the current thread / task is the *current step*, and the traced LLM and retriever
(``hopqa.runtime``) attach their calls to it. Work handed to a thread pool keeps its parent
step when submitted through ``submit`` (which copies the context: the context-keeping pool
lives here, below the LLM layer, so that layer can use it too). A step can also be made first
and entered later, from any thread: ``child_step`` makes it, ``within(step)`` makes it current
(a tree search reviews sibling nodes concurrently, each node's calls on its own step).

Parse records: a step that reads a structured output (a plan, a confidence, an action) records
how it parsed with ``Step.record_parse(field, status, how)``: ``direct`` (the format the prompt
asked for: the JSON of a schema-constrained call, or the paper's free-text format), ``fallback``
(a forgiving rule recovered it) or ``failed`` (nothing usable; the method's documented default
was taken). They are events with the message ``parse``; ``Trace.parse_counts`` (and
``parse_counts`` on a serialised trace) count them, the evaluation's parse rate.

Live observation: inside ``with observe(callback):`` every trace created (a method's
``answer``) reports its steps as they happen, to stream a trace while the method runs (the
HTTP service): ``{"event": "open", "id", "parent", "kind", "inputs"}`` when a step is made and
``{"event": "close", "id", "parent", ...the step's own record (``Step.record``)}`` each time a
block inside it ends (a step entered more than once, e.g. a tree node reviewed and later
visited, closes more than once: the last close is its final record). Events of one step come
in that order and a child's open comes after its parent's; callbacks run in the method's
threads and must be quick and thread-safe (a queue's ``put``); an exception in one is ignored.

Everything serialises to plain JSON (``to_dict`` / ``from_dict``) so a trace can be written
with an evaluation result, read back, and rendered by the CLI or a web page.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


def submit(pool: Executor, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """``pool.submit`` that runs ``fn`` in a copy of the caller's context (trace step, usage)."""
    ctx = contextvars.copy_context()
    return pool.submit(ctx.run, fn, *args, **kwargs)


#: How a structured output was read (see the module docstring).
PARSE_DIRECT, PARSE_FALLBACK, PARSE_FAILED = "direct", "fallback", "failed"
PARSE_STATUSES = (PARSE_DIRECT, PARSE_FALLBACK, PARSE_FAILED)
#: The event message of a parse record.
PARSE_EVENT = "parse"


def parse_counts(trace: dict[str, Any] | None) -> dict[str, int]:
    """``{"direct": a, "fallback": b, "failed": c}`` over the parse records of a serialised
    trace (``Trace.to_dict``): every step, depth first."""
    counts = dict.fromkeys(PARSE_STATUSES, 0)
    stack = [trace] if trace else []
    while stack:
        step = stack.pop()
        for event in step.get("events") or ():
            if event.get("message") == PARSE_EVENT and event.get("status") in counts:
                counts[event["status"]] += 1
        stack.extend(step.get("children") or ())
    return counts


_current: contextvars.ContextVar[Step | None] = contextvars.ContextVar("hopqa_step", default=None)
#: A trace observer: called with each step event (module docstring).
Observer = Callable[[dict[str, Any]], None]
_observer: contextvars.ContextVar[Observer | None] = contextvars.ContextVar("hopqa_observer", default=None)


@contextmanager
def observe(callback: Observer) -> Iterator[None]:
    """Report the steps of every trace created inside the block to ``callback`` (module docstring)."""
    token = _observer.set(callback)
    try:
        yield
    finally:
        _observer.reset(token)


def _emit(s: Step, event: str, parent: Step | None = None) -> None:
    callback = getattr(s, "_observer", None)
    if callback is None:
        return
    if event == "open":
        record = {"event": "open", "id": s.id, "parent": parent.id if parent is not None else None,
                  "kind": s.kind, "inputs": s.inputs}
    else:
        record = {"event": "close", "parent": getattr(s, "_parent_id", None), **s.record()}
    try:
        callback(record)
    except Exception:  # an observer never breaks the method it watches
        pass
_ids = itertools.count(1)


def _jsonable(value: Any) -> Any:
    """Make a value JSON-friendly (dataclasses with to_dict, lists, dicts, fallbacks to str)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    return str(value)


@dataclass
class Step:
    """One node of the trace tree."""

    kind: str
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    children: list[Step] = field(default_factory=list)
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    retrievals: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    started: float = 0.0
    seconds: float = 0.0
    id: int = field(default_factory=lambda: next(_ids))
    hop: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    # -- recording -------------------------------------------------------------------------
    def output(self, **outputs: Any) -> None:
        """Record outputs of this step (merged into ``outputs``)."""
        with self._lock:
            self.outputs.update({k: _jsonable(v) for k, v in outputs.items()})

    def note(self, message: str, **data: Any) -> None:
        """Record an event: a fallback taken, a parse failure, a warning."""
        with self._lock:
            self.events.append({"message": message, **{k: _jsonable(v) for k, v in data.items()}})

    def record_parse(self, field: str, status: str, how: str = "", **data: Any) -> None:
        """Record how the structured output ``field`` of this step was read: ``status`` is
        ``direct``, ``fallback`` or ``failed`` (module docstring), ``how`` the rule that read it."""
        if status not in PARSE_STATUSES:
            raise ValueError(f"parse status must be one of {', '.join(PARSE_STATUSES)}, not {status!r}")
        self.note(PARSE_EVENT, field=field, status=status, how=how, **data)

    def mark_hop(self, question: str, answer: str | None = None, label: str = "",
                 passages: list[Any] | None = None) -> None:
        """Mark this step as one hop of the reasoning: a sub-question (or query, or reasoning
        sentence) and its answer. ``Trace.hops`` lists the hops in order, nested hops with their
        depth; a hop's passages are ``passages`` if given, else what was retrieved inside it.
        Calling it again updates the hop (e.g. once the answer is known)."""
        with self._lock:
            hop = dict(self.hop or {})
            hop["question"] = str(question)
            if answer is not None:
                hop["answer"] = str(answer)
            if label:
                hop["label"] = label
            if passages is not None:
                hop["passages"] = [_passage_ref(p) for p in passages]
            self.hop = hop

    def add_child(self, child: Step) -> None:
        with self._lock:
            self.children.append(child)

    def add_llm_call(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.llm_calls.append(record)

    def add_retrieval(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.retrievals.append(record)

    # -- reading ---------------------------------------------------------------------------
    def walk(self) -> Iterator[Step]:
        """This step and all its descendants, depth first."""
        yield self
        for c in self.children:
            yield from c.walk()

    def find(self, kind: str) -> list[Step]:
        return [s for s in self.walk() if s.kind == kind]

    def record(self) -> dict[str, Any]:
        """This step's own record: ``to_dict`` without the children (a copy, taken under the lock)."""
        with self._lock:
            return json.loads(json.dumps(self.to_dict(children=False)))

    def to_dict(self, children: bool = True) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "llm_calls": self.llm_calls,
            "retrievals": self.retrievals,
            "events": self.events,
            "error": self.error,
            "seconds": round(self.seconds, 4),
            **({"hop": self.hop} if self.hop is not None else {}),
            **({"children": [c.to_dict() for c in self.children]} if children else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        return cls(
            kind=d["kind"],
            inputs=d.get("inputs") or {},
            outputs=d.get("outputs") or {},
            children=[cls.from_dict(c) for c in d.get("children") or []],
            llm_calls=d.get("llm_calls") or [],
            retrievals=d.get("retrievals") or [],
            events=d.get("events") or [],
            error=d.get("error"),
            seconds=d.get("seconds", 0.0),
            id=d.get("id", 0),
            hop=d.get("hop"),
        )


class Trace:
    """The trace of one question: a root step and the means to open nested steps."""

    def __init__(self, root: Step | None = None, **inputs: Any) -> None:
        self.root = root or Step(kind="question", inputs={k: _jsonable(v) for k, v in inputs.items()})
        observer = _observer.get()
        for s in self.root.walk():
            s._trace_key = id(self)
            s._observer = observer

    @contextmanager
    def step(self, kind: str, **inputs: Any) -> Iterator[Step]:
        """Open a child of this trace's current step (or of its root); see ``step``."""
        parent = _current.get()
        if parent is None or not self._owns(parent):
            parent = self.root
        with _open(parent, kind, inputs) as s:
            yield s

    @contextmanager
    def activate(self) -> Iterator[Step]:
        """Make the root the current step (used by a method's ``answer`` around its body)."""
        token = _current.set(self.root)
        if not self.root.started:
            _emit(self.root, "open")
        self.root.started = self.root.started or time.time()
        t0 = time.perf_counter()
        try:
            yield self.root
        except BaseException as exc:
            self.root.error = f"{type(exc).__name__}: {exc}"
            self.root.note("traceback", text=traceback.format_exc(limit=8))
            raise
        finally:
            self.root.seconds += time.perf_counter() - t0
            _current.reset(token)
            _emit(self.root, "close")

    def _owns(self, step: Step) -> bool:
        return getattr(step, "_trace_key", None) == id(self)

    def current(self) -> Step:
        """The open step of this trace in the current context (the root if none)."""
        s = _current.get()
        return s if s is not None and self._owns(s) else self.root

    # -- serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return self.root.to_dict()

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        return cls(root=Step.from_dict(d))

    @classmethod
    def from_json(cls, text: str) -> Trace:
        return cls.from_dict(json.loads(text))

    def steps(self) -> list[Step]:
        return list(self.root.walk())

    def hops(self) -> list[Hop]:
        """The reasoning as a flat list of hops, in order (see ``Step.mark_hop``)."""
        out: list[Hop] = []

        def visit(s: Step, depth: int) -> None:
            if s.hop is not None:
                out.append(_hop_of(s, depth))
                depth += 1
            for c in s.children:
                visit(c, depth)

        visit(self.root, 0)
        return out

    def llm_calls(self) -> list[dict[str, Any]]:
        return [c for s in self.root.walk() for c in s.llm_calls]

    def parse_counts(self) -> dict[str, int]:
        """How this trace's structured outputs parsed (see ``parse_counts``)."""
        return parse_counts(self.to_dict())

    def render(self, max_chars: int = 160) -> str:
        """A compact indented text view of the tree for terminals."""
        lines: list[str] = []

        def short(v: Any) -> str:
            t = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            t = " ".join(t.split())
            return t if len(t) <= max_chars else t[: max_chars - 3] + "..."

        def visit(s: Step, depth: int) -> None:
            pad = "  " * depth
            extra = []
            if s.llm_calls:
                extra.append(f"{len(s.llm_calls)} LLM")
            if s.retrievals:
                extra.append(f"{len(s.retrievals)} retrieval")
            lines.append(f"{pad}- {s.kind} ({s.seconds:.2f}s{', ' + ', '.join(extra) if extra else ''})")
            for k, v in s.inputs.items():
                lines.append(f"{pad}    in  {k}: {short(v)}")
            for k, v in s.outputs.items():
                lines.append(f"{pad}    out {k}: {short(v)}")
            for e in s.events:
                lines.append(f"{pad}    ! {short(e.get('message', ''))}")
            if s.error:
                lines.append(f"{pad}    ERROR {short(s.error)}")
            for c in s.children:
                visit(c, depth + 1)

        visit(self.root, 0)
        return "\n".join(lines)


@dataclass
class Hop:
    """One hop of a method's reasoning, for display: the sub-question (or query, or reasoning
    sentence), its answer, the passages it used (``{"id", "title", "score"}``), its nesting depth
    and a label saying what kind of step it is (``follow-up``, ``sub-question``, ``search`` ...)."""

    question: str
    answer: str = ""
    label: str = ""
    depth: int = 0
    passages: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer, "label": self.label, "depth": self.depth,
                "passages": self.passages}


def _passage_ref(p: Any) -> dict[str, Any]:
    if isinstance(p, dict):
        return {k: p.get(k) for k in ("id", "title", "score") if k in p}
    return {"id": getattr(p, "id", ""), "title": getattr(p, "title", ""), "score": getattr(p, "score", None)}


def _hop_of(s: Step, depth: int) -> Hop:
    """A hop of a marked step: its passages are the given ones, else every passage retrieved
    inside the step but outside the hops nested in it (first occurrence, in order)."""
    info = s.hop or {}
    passages = info.get("passages")
    if passages is None:
        seen: dict[str, dict[str, Any]] = {}

        def collect(t: Step) -> None:
            for r in t.retrievals:
                for p in r.get("passages") or []:
                    seen.setdefault(str(p.get("id")), _passage_ref(p))
            for c in t.children:
                if c.hop is None:
                    collect(c)

        collect(s)
        passages = list(seen.values())
    return Hop(question=str(info.get("question", "")), answer=str(info.get("answer", "")),
               label=str(info.get("label", "")), depth=depth, passages=list(passages))


def _new_child(parent: Step, kind: str, inputs: dict[str, Any]) -> Step:
    s = Step(kind=kind, inputs={k: _jsonable(v) for k, v in inputs.items()})
    s._trace_key = getattr(parent, "_trace_key", None)
    s._observer = getattr(parent, "_observer", None)
    s._parent_id = parent.id
    parent.add_child(s)
    _emit(s, "open", parent)
    return s


@contextmanager
def _open(parent: Step, kind: str, inputs: dict[str, Any]) -> Iterator[Step]:
    with within(_new_child(parent, kind, inputs)) as s:
        yield s


@contextmanager
def step(kind: str, **inputs: Any) -> Iterator[Step]:
    """Open a child of the current step; it is the current step inside the block.

    Methods use this (``with step("retrieve", query=q) as s: ... s.output(...)``). Outside any
    trace the step is recorded on a detached root, so method code runs the same either way.
    An exception escaping the block is recorded on the step and re-raised.
    """
    parent = _current.get()
    if parent is None:
        parent = Step(kind="detached")
    with _open(parent, kind, inputs) as s:
        yield s


def current_step() -> Step | None:
    """The step open in the current context, whichever trace it belongs to."""
    return _current.get()


def child_step(kind: str, **inputs: Any) -> Step:
    """A new child of the current step, not entered: work for it runs later, possibly in
    another thread, inside ``within(step)`` (a tree search reviews sibling nodes concurrently
    and then visits them in order, each node's calls landing on its own step)."""
    parent = _current.get()
    return _new_child(parent if parent is not None else Step(kind="detached"), kind, inputs)


@contextmanager
def within(s: Step) -> Iterator[Step]:
    """Make ``s`` (from ``child_step``) the current step for the block: calls and steps opened
    inside attach to it; the block's time is added to its ``seconds``, an escaping exception
    is recorded on it and re-raised."""
    if not s.started:
        s.started = time.time()
    token = _current.set(s)
    t0 = time.perf_counter()
    try:
        yield s
    except BaseException as exc:
        s.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        with s._lock:
            s.seconds += time.perf_counter() - t0
        _current.reset(token)
        _emit(s, "close")
