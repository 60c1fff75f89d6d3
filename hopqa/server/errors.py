"""What a client is told of a failure: its kind, a message and an id; the traceback stays in the log.

A method's failure comes back in its ``Answer`` (``error``, and a ``traceback`` event on the
trace's root, which ``hopqa ask`` and ``hopqa eval`` keep for whoever runs them). Over HTTP a
traceback would tell any client the server's file paths and code, so ``public_answer`` and
``public_step`` give a client the same answer and trace records with every ``traceback`` event
replaced by ``{"message": "traceback", "error_id": ID}`` and, on a failed answer, an
``error_detail`` of ``{"kind", "message", "id"}``; the traceback itself is logged (logger
``hopqa.server``, level ERROR) under that id, so an operator finds it with ``grep ID``. An
unexpected exception of the service itself is told the same way (``failure``). A record of an
evaluation run (``GET /v1/runs/...?id=``) is shown with its traceback events reduced to where
the full text is: the run's ``results.jsonl`` on the server (``public_record``).
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

#: The service's logger (uvicorn's handlers print it beside the access log).
log = logging.getLogger("hopqa.server")
#: The trace event that holds a traceback (``hopqa.trace.Trace.activate``).
TRACEBACK_EVENT = "traceback"


def error_id() -> str:
    """A new id to find an error by in the server log (``err-`` and 12 hex digits)."""
    return f"err-{secrets.token_hex(6)}"


def split_error(error: str) -> tuple[str, str]:
    """``("ValueError", "bad input")`` from ``"ValueError: bad input"`` (``Answer.error``'s form);
    an error without a kind is ``("Error", error)``."""
    kind, sep, message = error.partition(": ")
    if sep and kind.replace(".", "").replace("_", "").isalnum() and " " not in kind:
        return kind, message
    return "Error", error


def _scrub(step: Any, replacement: dict[str, Any], tracebacks: list[str]) -> Any:
    """``step`` (a trace step as a dict, its children too) with every traceback event replaced
    by ``replacement``, the tracebacks' texts appended to ``tracebacks``."""
    if not isinstance(step, dict):
        return step
    out = dict(step)
    if isinstance(out.get("events"), list):
        events = []
        for event in out["events"]:
            if isinstance(event, dict) and event.get("message") == TRACEBACK_EVENT:
                tracebacks.append(str(event.get("text", "")))
                event = replacement
            events.append(event)
        out["events"] = events
    if isinstance(out.get("children"), list):
        out["children"] = [_scrub(child, replacement, tracebacks) for child in out["children"]]
    return out


def _log(eid: str, what: str, tracebacks: list[str]) -> None:
    for text in tracebacks or [""]:
        log.error("%s: %s%s", eid, what, f"\n{text.rstrip()}" if text else "")


def public_answer(data: dict[str, Any], context: str = "", logged: bool = True) -> dict[str, Any]:
    """``Answer.to_dict()`` as a client may see it (module docstring); logs what it takes out
    (``logged=False``: nothing, for a cancelled answer, which the job logs in one line)."""
    eid = error_id()
    tracebacks: list[str] = []
    out = dict(data)
    if isinstance(out.get("trace"), dict):
        out["trace"] = _scrub(out["trace"], {"message": TRACEBACK_EVENT, "error_id": eid}, tracebacks)
    error = out.get("error")
    if isinstance(error, str) and error:
        kind, message = split_error(error)
        out["error_detail"] = {"kind": kind, "message": message, "id": eid}
        if logged:
            _log(eid, f"{context}{error}", tracebacks)
    elif tracebacks and logged:
        _log(eid, f"{context}a step failed", tracebacks)
    return out


def public_step(record: dict[str, Any]) -> dict[str, Any]:
    """A streamed trace record (``hopqa.trace.observe``) as a client may see it: its traceback
    events replaced by an id, logged."""
    if not any(isinstance(e, dict) and e.get("message") == TRACEBACK_EVENT for e in record.get("events") or ()):
        return record
    eid = error_id()
    tracebacks: list[str] = []
    out = _scrub(record, {"message": TRACEBACK_EVENT, "error_id": eid}, tracebacks)
    _log(eid, f"step {record.get('kind', '?')} failed: {record.get('error')}", tracebacks)
    return out


def failure(exc: BaseException, context: str = "") -> dict[str, str]:
    """``{"kind", "message", "id"}`` of an unexpected exception, its traceback logged under the id."""
    eid = error_id()
    log.error("%s: %s%s: %s", eid, context, type(exc).__name__, exc, exc_info=exc)
    return {"kind": type(exc).__name__, "message": str(exc), "id": eid}


#: What a run record's traceback event says instead of the traceback (``public_record``).
RUN_TRACEBACK = {"message": TRACEBACK_EVENT, "text": "kept in the run's results.jsonl on the server"}


def public_record(record: dict[str, Any]) -> dict[str, Any]:
    """A record of an evaluation run as a client may see it (module docstring)."""
    if not isinstance(record.get("trace"), dict):
        return record
    return {**record, "trace": _scrub(record["trace"], RUN_TRACEBACK, [])}
