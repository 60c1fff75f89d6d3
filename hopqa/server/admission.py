"""The admission queue in front of the model: bounded, one turn at a time, slots held to the real end.

``Admission(max_pending, concurrency)`` admits a request when fewer than ``max_pending`` are
pending (running or waiting for their turn) and refuses it otherwise: the service answers 429
with ``Retry-After`` (``retry_after``: when a slot should free up, the mean run time of the last
20 requests divided by the requests running at once; 30 s before any has finished). An
admitted request holds a ``Ticket``; its work runs in a thread of its own through
``Ticket.run``, which waits for one of ``concurrency`` turns (1 on a model that serves one call
at a time, as the embedded llama.cpp model does: requests then run one after the other instead
of interleaving their calls and all finishing late), runs, and frees the slot when the work
really ends: the queue never admits more work than the machine is doing. A request that gave
up while still waiting (``Ticket.cancel``) is skipped when its turn comes; running work is
stopped by its job (``hopqa.server.jobs.Job.cancel``) and frees its slot when it returns.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Seconds a request is guessed to take before any has finished (for ``Retry-After``).
FIRST_GUESS_SECONDS = 30.0


class Cancelled(Exception):
    """The request gave up before its turn came: its work was skipped."""


class Admission:
    """At most ``max_pending`` requests admitted, ``concurrency`` of them running (module docstring)."""

    def __init__(self, max_pending: int, concurrency: int = 1) -> None:
        if max_pending < 1 or concurrency < 1:
            raise ValueError("max_pending and concurrency must be at least 1")
        self.max_pending = max_pending
        self.concurrency = concurrency
        self._lock = threading.Lock()
        self._turns = threading.Semaphore(concurrency)
        self._pending = 0
        self._running = 0
        self._durations: deque[float] = deque(maxlen=20)

    @property
    def pending(self) -> int:
        """Requests admitted and not finished (running or waiting)."""
        return self._pending

    @property
    def running(self) -> int:
        return self._running

    def try_admit(self) -> Ticket | None:
        """A ticket for a new request, or None when ``max_pending`` are pending."""
        with self._lock:
            if self._pending >= self.max_pending:
                return None
            self._pending += 1
        return Ticket(self)

    def retry_after(self) -> int:
        """Whole seconds after which a refused request may find a free slot (an estimate)."""
        with self._lock:
            mean = sum(self._durations) / len(self._durations) if self._durations else FIRST_GUESS_SECONDS
        return max(1, math.ceil(mean / self.concurrency))

    def _finish(self, seconds: float | None) -> None:
        with self._lock:
            self._pending -= 1
            if seconds is not None:
                self._durations.append(seconds)


class Ticket:
    """One admitted request's slot: ``run`` its work once (in the request's worker thread)."""

    def __init__(self, admission: Admission) -> None:
        self._admission = admission
        self._cancelled = threading.Event()
        self._used = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """The request gave up: work that has not started will not start."""
        self._cancelled.set()

    def run(self, work: Callable[[], T]) -> T:
        """Wait for a turn, run ``work``, free the slot when it returns or raises; ``Cancelled``
        (without running it) if the request gave up first."""
        if self._used:
            raise RuntimeError("a ticket runs one piece of work")
        self._used = True
        admission = self._admission
        seconds: float | None = None
        try:
            with admission._turns:
                if self.cancelled:
                    raise Cancelled()
                with admission._lock:
                    admission._running += 1
                t0 = time.perf_counter()
                try:
                    return work()
                finally:
                    seconds = time.perf_counter() - t0
                    with admission._lock:
                        admission._running -= 1
        finally:
            admission._finish(seconds)

    def release_unused(self) -> None:
        """Free the slot of a ticket whose work never ran (its thread could not start)."""
        if not self._used:
            self._used = True
            self._admission._finish(None)
