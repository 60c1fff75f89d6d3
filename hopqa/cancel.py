"""The cancellation signal of the work running in the current context.

Inside ``with cancellable(event):`` (a ``threading.Event``: the evaluation runner sets it on
Ctrl-C, the HTTP service on a timeout, a client that went away or ``DELETE /v1/jobs/{id}``)
``check_cancelled()`` raises ``Cancelled`` once the event is set, and ``current_cancel_event()``
gives the event itself to code that must notice it while it waits:

- ``hopqa.runtime``'s traced LLM and retriever check it before every call (nothing new starts);
- the OpenAI-compatible backend (``hopqa.llm.openai``) watches it while a request is in flight
  and shuts the request's connection when it is set (the server sees the connection closed),
  raising ``Cancelled`` within a fraction of a second;
- the embedded backend (``hopqa.llm.llamacpp``) checks it between generated tokens.

The signal is a context variable, so it follows the work into the pools it is handed to through
``hopqa.trace.submit``; code that starts threads of its own must pass the event along (or run
them in a copy of the context). It lives at the bottom of the layers so that backends can read
it; ``hopqa.runtime`` re-exports these names. A cancelled call is never an answer: it is not
cached, and ``Method.answer`` returns the answer marked ``cancelled=True``.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_cancel: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("hopqa_cancel", default=None)


class Cancelled(Exception):
    """The work was cancelled (module docstring): raised by the next LLM or retrieval call, or
    by the backend call in flight."""


@contextmanager
def cancellable(event: threading.Event) -> Iterator[threading.Event]:
    """Make ``event`` the cancellation signal of the calls made inside the block (and of the
    work they hand to pools through ``hopqa.trace.submit``)."""
    token = _cancel.set(event)
    try:
        yield event
    finally:
        _cancel.reset(token)


def current_cancel_event() -> threading.Event | None:
    """The cancellation signal of the current context, or None outside ``cancellable``."""
    return _cancel.get()


def check_cancelled(event: threading.Event | None = None) -> None:
    """Raise ``Cancelled`` if ``event`` (default: the current cancellation signal) is set."""
    event = event if event is not None else _cancel.get()
    if event is not None and event.is_set():
        raise Cancelled("stopped before this call")
