"""How ``hopqa serve`` holds its connections: a cap, a deadline for each request, quiet logs.

uvicorn alone accepts every connection and waits for ever for a request's headers: a few
thousand clients sending one byte a second filled the process's file descriptors, ``/healthz``
stopped answering, and asyncio's "Too many open files" tracebacks grew the log by megabytes a
second. ``uvicorn_options(max_connections, read_timeout)`` gives ``uvicorn.run`` /
``uvicorn.Config`` what stops that:

- ``GuardedH11Protocol`` (uvicorn's h11 protocol, the one used without httptools) closes a
  connection beyond ``max_connections`` at once with a 503, and gives each request
  ``read_timeout`` seconds from its first byte (from the connection's start for the first one)
  until it has been received whole, headers and body; then it answers 408 and closes. A request
  received whole may take as long as its answer takes (``--timeout``); an idle kept-alive
  connection is closed after ``KEEP_ALIVE`` seconds (uvicorn's ``timeout_keep_alive``).
- uvicorn's ``limit_concurrency`` is the same cap: a request arriving while it is reached is a
  503, without reaching the app.
- ``RepeatFilter`` on every log handler lets the same message through ``burst`` times per
  ``interval`` seconds, then counts it, and says how many were suppressed when it is next let
  through. uvicorn's, asyncio's (the "Too many open files" tracebacks) and hopqa's loggers go
  through it. Access lines of successful requests are the record of use and are never held back;
  those of errors (4xx, 5xx) are, by method, path and status.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
import time
from typing import Any

import h11
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Seconds an idle kept-alive connection is kept open (uvicorn's ``timeout_keep_alive``).
KEEP_ALIVE = 5
#: Default seconds a client has to send a whole request (``hopqa serve --read-timeout``).
READ_TIMEOUT = 10.0


def default_max_connections(max_queue: int) -> int:
    """Connections held at once by default: four per admitted request (a page, its stream, polls)
    and sixteen more for ``/healthz``, the run list and the docs."""
    return max_queue * 4 + 16


def uvicorn_options(max_connections: int, read_timeout: float = READ_TIMEOUT) -> dict[str, Any]:
    """Keyword arguments of ``uvicorn.run`` / ``uvicorn.Config`` (module docstring)."""
    if max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, not {max_connections!r}")
    if not read_timeout > 0:
        raise ValueError(f"read_timeout must be above 0, not {read_timeout!r}")
    return {"http": guarded_protocol(max_connections, read_timeout), "limit_concurrency": max_connections,
            "timeout_keep_alive": KEEP_ALIVE, "log_config": logging_config()}


def guarded_protocol(max_connections: int, read_timeout: float) -> type[H11Protocol]:
    """``GuardedH11Protocol`` with these limits (uvicorn builds its protocol from the class alone)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,),
                {"max_connections": max_connections, "read_timeout": read_timeout})


def _plain(status: int, reason: str, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection cap and a deadline to receive each request."""

    max_connections: int = 1000
    read_timeout: float = READ_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        if len(self.connections) > self.max_connections:
            self.logger.warning("Refused a connection: %d are open, the limit (--max-connections)",
                                self.max_connections)
            transport.write(_plain(503, "Service Unavailable", "too many connections; retry later\n"))
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY):  # a request is on its way
            self._arm()
        else:  # received whole (or the connection is over): its answer may take as long as it takes
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if getattr(self, "_deadline", None) is None and not self.transport.is_closing():
            self._deadline = self.loop.call_later(self.read_timeout, self._expire)

    def _disarm(self) -> None:
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        """The request was not received whole within ``read_timeout``: 408 and close."""
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            return
        self.logger.warning("Closed a connection: no whole request within %s s (--read-timeout)",
                            f"{self.read_timeout:g}")
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(_plain(408, "Request Timeout",
                                        f"the request was not received within {self.read_timeout:g} s\n"))
        self.transport.close()


# -- logs -------------------------------------------------------------------------------------------
class RepeatFilter(logging.Filter):
    """Lets a message through ``burst`` times per ``interval`` seconds; the rest are counted and
    reported ("... N more suppressed") when the message is next let through (module docstring).
    Messages are told apart by logger, level, text template and exception type; at most
    ``max_keys`` are followed at once (beyond that, the new ones share one budget)."""

    def __init__(self, burst: int = 5, interval: float = 10.0, max_keys: int = 1000) -> None:
        super().__init__()
        self.burst = burst
        self.interval = interval
        self.max_keys = max_keys
        self._lock = threading.Lock()
        self._windows: dict[tuple[Any, ...], list[float]] = {}  # key -> [window start, passed, suppressed]

    def filter(self, record: logging.LogRecord) -> bool:
        key = self._key(record)
        if key is None:
            return True
        now = time.monotonic()
        with self._lock:
            if len(self._windows) >= self.max_keys and key not in self._windows:
                self._windows = {k: w for k, w in self._windows.items() if now - w[0] < self.interval}
                if len(self._windows) >= self.max_keys:
                    key = ("overflow",)
            window = self._windows.get(key)
            if window is None or now - window[0] >= self.interval:
                suppressed = int(window[2]) if window is not None else 0
                self._windows[key] = [now, 1, 0]
            elif window[1] < self.burst:
                window[1] += 1
                return True
            else:
                window[2] += 1
                return False
        if suppressed:
            note = f"[{suppressed} more like this were suppressed in the last {self.interval:g} s]"
            if record.name == "uvicorn.access":  # its formatter reads the arguments, not the message
                client, *rest = record.args  # type: ignore[misc]
                record.args = (f"{client} {note}", *rest)
            else:
                record.msg = f"{record.msg} {note}"
        return True

    @staticmethod
    def _key(record: logging.LogRecord) -> tuple[Any, ...] | None:
        """What makes two records "the same message"; None: never held back."""
        if record.name == "uvicorn.access":
            args = record.args
            if not isinstance(args, tuple) or len(args) != 5:
                return None
            _, method, path, _, status = args
            if not isinstance(status, int) or status < 400:
                return None
            return (record.name, method, path, status)
        exc = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else None
        return (record.name, record.levelno, str(record.msg), exc)


def logging_config() -> dict[str, Any]:
    """uvicorn's logging configuration with ``RepeatFilter`` on its handlers, and asyncio's and
    hopqa's loggers sent to the same (filtered) standard error."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"repeats": {"()": RepeatFilter}}
    for handler in config["handlers"].values():
        handler["filters"] = ["repeats"]
    config["loggers"]["asyncio"] = {"handlers": ["default"], "level": "WARNING", "propagate": False}
    config["loggers"]["hopqa"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config
