"""Any OpenAI-compatible server: vLLM, SGLang, llama.cpp server, Ollama, OpenAI.

Spec on the command line: ``openai:MODEL@http://host:port/v1`` (``openai:MODEL`` alone means
api.openai.com), optionally followed by ``?key=value&...`` options:

- ``concurrency=8`` — requests in flight at once from this process (default 8);
- ``timeout=120`` — seconds per request, all of it: connecting, sending, waiting for the reply
  and reading it (a server that trickles its body is cut off at the deadline, see "Bounded
  requests" below); ``retries=4`` — attempts after the first on connection errors, timeouts,
  HTTP 408, 409, 429 and 5xx, malformed or undecodable JSON and unusable replies (no choices,
  a choice without a message, log-probabilities that are not numbers, a body too large to
  read), with exponential backoff from ``backoff=1``; after the last attempt an ``LLMError``
  names the endpoint (credentials redacted), what went wrong and what to do;
- ``n=native|split`` — whether the server returns ``n`` samples in one call (default
  ``native``; if it returns fewer, the rest are fetched with single calls);
- ``logprobs=1|0`` — the server returns token log-probabilities on chat completions
  (default 1: vLLM, llama.cpp server, OpenAI; Ollama's OpenAI endpoint does not);
- ``loglikelihood=echo`` — the server scores a given continuation through ``/v1/completions``
  with ``echo=True, logprobs=1, max_tokens=0`` (vLLM supports it; OpenAI's chat models and
  Ollama do not; llama.cpp server's echo logprobs are shifted by one token for models
  without BOS, so hopqa does not enable it there by default);
- ``structured=1|0`` — requests with a JSON schema (``generate(..., schema=...)``) send it as
  ``response_format`` (default 1). The standard form ``{"type": "json_schema", ...}`` (OpenAI,
  vLLM, SGLang, llama.cpp's server) is tried first; a server that refuses it (an error whose
  message names the ``response_format`` or the schema, whatever its status: llama-cpp-python's
  server answers HTTP 500 with a validation error) is asked with ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's server,
  Anyscale), and one that refuses both gets the request without ``response_format``: the
  reply is then free text, marked ``schema_ignored`` (the methods parse it with their
  free-text parser). What the server accepted is remembered for the rest of the run.

A malformed spec or option (``timeout=abc``, ``retries=-1``, ``retires=3``) is an
``LLMSpecError`` (a ``ValueError``) naming the bad part and the accepted form.

Bounded requests: each HTTP request (each attempt) has a deadline ``timeout`` seconds after it
starts. Connecting, sending and waiting for the reply's headers are each given at most the time
left; the body is read until the deadline, when a watchdog shuts the connection's socket (a
server sending one byte a second gets nowhere), and the request counts as a timeout. The body
is read up to ``body_limit`` bytes (``max(4 MiB, n * reply_cap(max_tokens) * 64)``: far more
than any reply hopqa would keep, log-probabilities included) and no further: a larger reply (a
declared Content-Length too) is refused unread, as a malformed reply, instead of being held in
memory whole. Replies are asked for uncompressed (``Accept-Encoding: identity``) so that the
bytes counted are the bytes parsed. The one gap: a server that trickles the reply's *headers*
is bounded per read, not in total.

What a reply holds is checked before it is used or cached: a choice whose ``message`` is
missing or null, or whose content is not text, is malformed (retried, never an empty answer);
token log-probabilities (read only when asked for) that are not numbers are malformed;
``usage`` counts that are not whole numbers count as 0 and the reply is kept
(``hopqa.llm.base.token_count``). Text with lone surrogates is mended by ``LLMBase``.

The API key comes from ``OPENAI_API_KEY`` (read by the CLI, passed in here), is never logged,
and is not part of the cache key. Servers that need no key get the placeholder ``EMPTY``.
Credentials in the URL (``http://user:password@host/v1``) are redacted from the backend's name,
its identity (the cache key) and every error message, and no library exception that could
print the URL is chained under its errors.

Which credential is sent: exactly one ``Authorization`` header. An API key, when one is given,
wins, as with the ``openai`` client: it is sent as ``Authorization: Bearer KEY`` and the URL's
``user:password`` is then left out of the requests (``endpoint()``), never sent as ``Basic``.
Without a key, credentials in the URL are sent as ``Authorization: Basic base64(user:password)``
(a reverse proxy with basic authentication) and no Bearer placeholder. Without either, the
placeholder ``Bearer EMPTY``.

What the server says is relayed redacted: a server may echo the request's credentials in its
error message (``Incorrect API key provided: Bearer sk-...``). Every message of an error this
backend raises, and every detail of a reply it quotes, goes through
``hopqa.config.redact_secrets`` first: ``Bearer``/``Basic`` credentials, ``Authorization``
header values, ``sk-...`` keys, ``key=``/``token=``/``password=``-like values, and the literal
API key, URL password and their base64 forms (``hopqa.config.secret_forms``) become ``***``.
The trace and the HTTP service show these messages, never the server's own text.

Cancellation: inside ``hopqa.cancel.cancellable(event)`` a request in flight is aborted within
``CANCEL_POLL_SECONDS`` of the event being set, whether it is waiting for the reply's headers or
reading its body: a watcher shuts the socket of the connection the request is using (every
connection of the client reports its reads and writes to the request using it:
``track_connections``), the server sees the connection closed, and the call raises
``hopqa.cancel.Cancelled`` (not retried, not an ``LLMError``, never cached); a wait between
retries ends at once too. The event is read in the calling thread (``LLMBase.map`` hands it to
its pool with the context).
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import unquote_plus

from hopqa.cancel import Cancelled, check_cancelled, current_cancel_event
from hopqa.config import (
    FALSE_WORDS,
    TRUE_WORDS,
    redact_credentials,
    redact_secrets,
    secret_forms,
    without_url_credentials,
)
from hopqa.llm.base import (
    GENERATE,
    LOGLIKELIHOOD,
    LOGPROBS,
    NATIVE_N,
    STRUCTURED,
    Completion,
    Generation,
    GenerationRequest,
    LLMBase,
    LLMError,
    LLMSpecError,
    LogLikelihood,
    MalformedValue,
    logprob,
    logprob_values,
    mend_text,
    reply_cap,
    token_count,
)
from hopqa.options import OptionError, check_value, convert, unknown_option

#: Every option of an ``openai:`` spec and the form it accepts (the known options and the
#: accepted form in error messages; the checks themselves are the fields' types and ranges).
OPTION_FORMS = {
    "concurrency": "concurrency=N (requests in flight at once, a whole number >= 1)",
    "timeout": "timeout=SECONDS (per request, a number > 0)",
    "retries": "retries=N (attempts after the first, a whole number >= 0)",
    "backoff": "backoff=SECONDS (first wait between attempts, a number >= 0)",
    "n": "n=native|split",
    "logprobs": "logprobs=1|0",
    "loglikelihood": "loglikelihood=echo|0",
    "structured": "structured=1|0 (send JSON schemas as response_format)",
    "context": "context=TOKENS (the model's context window, for methods that fill a prompt to it)",
}
#: Spec options that are not written as their field: option -> (field, {word: the field's value
#: as text}); such an option accepts only its words. The other options are fields of their name.
SPEC_WORDS = {
    "n": ("native_n", {"native": "true", "split": "false"}),
    "loglikelihood": ("loglikelihood", {"echo": "true", **{w: w for w in TRUE_WORDS + FALSE_WORDS}}),
}
SPEC_FORM = "openai:MODEL@http://host:port/v1[?option=value&...]"


@dataclass
class OpenAIConfig:
    """Connection settings of an OpenAI-compatible endpoint, checked when made (types and the
    ranges in the fields' metadata, ``hopqa.options``): a bad value is an ``LLMSpecError``
    naming it, never silently clamped."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = field(default=8, metadata={"range": (1, None)})
    timeout: float = field(default=120.0, metadata={"above": 0})
    retries: int = field(default=4, metadata={"range": (0, None)})
    backoff: float = field(default=1.0, metadata={"range": (0, None)})
    native_n: bool = True
    logprobs: bool = True
    loglikelihood: bool = False
    structured: bool = True
    #: The model's context window in tokens (``?context=N``), for methods that fill a prompt
    #: up to it (Tree of Reviews' reader); None: unknown (such a method then uses its default).
    context: int | None = field(default=None, metadata={"range": (1, None)})

    def __post_init__(self) -> None:
        for f in fields(self):
            try:
                check_value(type(self), f.name, getattr(self, f.name))
            except OptionError as exc:  # the API key is never shown, a URL's credentials are redacted
                message = "option api_key must be text or None" if exc.name == "api_key" else str(exc)
                raise LLMSpecError(redact_credentials(f"OpenAIConfig: {message}")) from None

    @classmethod
    def parse(cls, spec: str, api_key: str | None = None) -> OpenAIConfig:
        """Parse ``MODEL[@URL][?opts]`` (the part after ``openai:``); ``LLMSpecError`` (a
        ``ValueError``) names a missing model, a URL that is not http(s), an unknown option or
        a bad value, with the accepted forms."""
        head, _, query = spec.partition("?")
        model, at, url = head.partition("@")
        if not model.strip():
            raise LLMSpecError(f"an OpenAI-compatible LLM spec needs a model name: {SPEC_FORM}")
        if at and not re.match(r"https?://[^/?#\s]", url):
            raise LLMSpecError(f"the endpoint {redact_credentials(url)!r} after {model + '@'!r} is not an http(s) URL: "
                               f"use {SPEC_FORM}")
        values: dict[str, Any] = {}
        for item in query.split("&") if query else []:
            if not item.strip():
                continue
            key, eq, value = item.partition("=")
            key, value = unquote_plus(key).strip(), unquote_plus(value).strip()
            if key not in OPTION_FORMS:
                raise LLMSpecError(redact_credentials(f"{unknown_option(key, OPTION_FORMS)} (as in {SPEC_FORM})"))
            if not eq or not value:
                raise LLMSpecError(f"the LLM option {key!r} has no value: use {OPTION_FORMS[key]}")
            name, option_value = _option_value(key, value)
            values[name] = option_value
        return cls(model=model, base_url=url or None, api_key=api_key, **values)


def _option_value(key: str, text: str) -> tuple[str, Any]:
    """The field the spec option ``key=text`` sets and its value (``SPEC_WORDS``, then the
    field's type and range); ``LLMSpecError`` naming the text as written and the accepted form."""
    name, words = SPEC_WORDS.get(key, (key, None))
    word = text if words is None else words.get(text.lower())
    if word is not None:
        try:
            return name, convert(OpenAIConfig, name, word)
        except OptionError:
            pass
    raise LLMSpecError(redact_credentials(f"bad value {text!r} for the LLM option {key!r}: use {OPTION_FORMS[key]}"))


class _BadReply(Exception):
    """An HTTP 200 response hopqa cannot use (no choices, not a completion, too large); retried
    like a transient error. ``hint`` replaces the usual advice of the final error."""

    def __init__(self, what: str, detail: str = "", hint: str = "") -> None:
        super().__init__(f"{what}{': ' + detail if detail else ''}")
        self.what = what
        self.detail = detail
        self.hint = hint


# -- bounded requests (module docstring) ----------------------------------------------------------
#: Bytes of a response body always accepted, however small ``max_tokens`` is.
MIN_BODY_BYTES = 4 * 2**20
#: Bytes of a response body accepted per character of ``reply_cap`` (JSON escapes and per-token
#: log-probabilities take far less).
BODY_BYTES_PER_CHAR = 64


def body_limit(n: int, max_tokens: int) -> int:
    """The most bytes of a response body read for ``n`` completions of ``max_tokens``."""
    return max(MIN_BODY_BYTES, max(1, n) * reply_cap(max_tokens) * BODY_BYTES_PER_CHAR)


class _Bound:
    """The deadline (``time.monotonic``) and byte limit of the request being made, and what
    aborting it needs: the connection it is using now (``use``) and whether it was aborted."""

    def __init__(self, seconds: float, max_bytes: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.max_bytes = max_bytes
        #: The network stream the request last read or wrote (``_TrackedBackend``).
        self.stream: Any = None
        #: ``abort`` was called: the request's connection is shut, its reply is not an answer.
        self.aborted = False
        self._lock = threading.Lock()

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def use(self, stream: Any) -> None:
        """The request reads or writes ``stream`` now; shut at once if the request was aborted."""
        with self._lock:
            self.stream = stream
            aborted = self.aborted
        if aborted:
            _shut(stream)

    def abort(self) -> None:
        """Shut the request's connection (the read or write waiting on it fails at once, the
        server sees the connection closed) and every one it uses from now on."""
        with self._lock:
            self.aborted = True
            stream = self.stream
        if stream is not None:
            _shut(stream)


def _shut(stream: Any) -> None:
    """Shut the socket of an httpcore network stream both ways (waking a read blocked on it)."""
    try:
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):  # closed already, or no socket to shut
        pass


#: The bound of the request the current thread is making (the SDK's client is synchronous: the
#: hooks, the network reads and writes and the body reader run in the thread that called it).
_bound = threading.local()
#: How often a request in flight looks at its cancellation signal (seconds).
CANCEL_POLL_SECONDS = 0.05


@contextmanager
def _bounded(seconds: float, max_bytes: int, cancel: threading.Event | None = None) -> Iterator[_Bound]:
    """The bound of one request made in the block; with ``cancel``, the watcher aborts the
    request (``_Bound.abort``) within ``CANCEL_POLL_SECONDS`` of the event being set."""
    bound = _Bound(seconds, max_bytes)
    _bound.value = bound
    token = _WATCHER.add(bound.abort, cancel=cancel) if cancel is not None else None
    try:
        yield bound
    finally:
        if token is not None:
            _WATCHER.remove(token)
        _bound.value = None


class _Watcher:
    """One daemon thread that watches every request in flight — its cancellation signal, or
    the deadline of its body — and calls the request's action (abort it, shut its socket) when
    the signal is set or the deadline passes, within ``CANCEL_POLL_SECONDS``. It sleeps while
    nothing is watched. One thread per process, not one or two started for each request: those
    cost every call of an evaluation with eight workers."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._watched: dict[int, tuple[Callable[[], None], threading.Event | None, float | None]] = {}
        self._next = 0
        self._pid = 0  # the process whose thread runs (a forked child starts its own)

    def add(self, action: Callable[[], None], cancel: threading.Event | None = None,
            deadline: float | None = None) -> int:
        """Watch until ``remove``: ``action()`` once ``cancel`` is set or ``time.monotonic()``
        passes ``deadline``."""
        with self._cond:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="hopqa-request-watch", daemon=True).start()
            self._next += 1
            self._watched[self._next] = (action, cancel, deadline)
            self._cond.notify()
            return self._next

    def remove(self, token: int) -> None:
        with self._cond:
            self._watched.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._watched:
                    self._cond.wait()
                now = time.monotonic()
                fired = [token for token, (_, cancel, deadline) in self._watched.items()
                         if (cancel is not None and cancel.is_set()) or (deadline is not None and now >= deadline)]
                actions = [self._watched.pop(token)[0] for token in fired]
            for action in actions:
                try:
                    action()
                except Exception:  # noqa: BLE001, S110 - one request's socket must not stop the watcher
                    pass
            time.sleep(CANCEL_POLL_SECONDS)


_WATCHER = _Watcher()


def _too_large(limit: int, how: str) -> _BadReply:
    return _BadReply("a reply too large to read", f"{how} more than {limit:,} bytes",
                     hint="the server ignores max_tokens (or does not answer with completions); check its "
                          "settings and the URL")


def _timeouts_within(timeouts: dict[str, Any] | None, left: float) -> dict[str, float]:
    """Each of httpx's timeouts (connect, read, write, pool) at most ``left`` seconds."""
    given = timeouts or {}
    return {k: left if given.get(k) is None else min(given[k], left) for k in ("connect", "read", "write", "pool")}


def bounded_http_client(openai: Any) -> Any:
    """The SDK's default HTTP client (``openai.DefaultHttpxClient``: httpx or httpx2, whichever
    this SDK uses) with event hooks that bound each request made inside ``_bounded``: its
    timeouts cut to the time left, no compression, and a body read through ``BoundedBody``."""
    http: Any = None

    def on_request(request: Any) -> None:
        bound = getattr(_bound, "value", None)
        if bound is None:
            return
        left = bound.left()
        if left <= 0:
            raise http.PoolTimeout("the request's deadline passed before it was sent")
        request.headers["Accept-Encoding"] = "identity"
        request.extensions["timeout"] = _timeouts_within(request.extensions.get("timeout"), left)

    def on_response(response: Any) -> None:  # the headers are in, the body is not read yet
        bound = getattr(_bound, "value", None)
        if bound is None:
            return
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > bound.max_bytes:
            raise _too_large(bound.max_bytes, "declared")
        # httpcore takes the body's read timeout from this dict when the body is first read
        request = response.request
        request.extensions["timeout"] = _timeouts_within(request.extensions.get("timeout"), max(bound.left(), 0.001))
        response.stream = _bounded_body_class(http)(response.stream, bound, response.extensions.get("network_stream"))

    client = openai.DefaultHttpxClient(event_hooks={"request": [on_request], "response": [on_response]})
    http = sys.modules[next(c.__module__ for c in type(client).__mro__ if c.__name__ == "Client").partition(".")[0]]
    track_connections(client)
    return client


def track_connections(client: Any) -> int:
    """Make every connection ``client`` opens report its reads and writes to the bound of the
    request using it (``_Bound.use``), so that a cancelled request can shut its own connection
    whether the reply's headers came or not. httpx keeps its connection pools (httpcore's
    ``ConnectionPool``, one per transport) behind private attributes: the network backend of each
    pool found is wrapped; how many were is returned (0: requests in flight cannot be aborted,
    only the next one is stopped; the tests check that it is not 0)."""
    transports = [getattr(client, "_transport", None), *(getattr(client, "_mounts", None) or {}).values()]
    wrapped = 0
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None or isinstance(backend, _TrackedBackend):
            continue
        core = sys.modules[type(pool).__module__.partition(".")[0]]
        pool._network_backend = _TrackedBackend(backend, _tracked_stream_class(core))
        wrapped += 1
    return wrapped


class _TrackedBackend:
    """An httpcore network backend whose streams report their use (``track_connections``)."""

    def __init__(self, inner: Any, stream_class: type) -> None:
        self._inner = inner
        self._stream_class = stream_class

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return self._stream_class(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        return self._stream_class(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@functools.cache
def _tracked_stream_class(core: Any) -> type:
    """``TrackedStream`` for the connection library ``core`` (httpcore or httpcore2: a stream
    must be its ``NetworkStream``)."""

    class TrackedStream(core.NetworkStream):  # type: ignore[name-defined,misc]
        """A network stream that tells the current request's bound it is in use."""

        def __init__(self, inner: Any) -> None:
            self._inner = inner

        @staticmethod
        def _note(stream: Any) -> None:
            bound = getattr(_bound, "value", None)
            if bound is not None:
                bound.use(stream)

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            self._note(self)
            return self._inner.read(max_bytes, timeout)

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._note(self)
            self._inner.write(buffer, timeout)

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                      timeout: float | None = None) -> Any:
            return TrackedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    return TrackedStream


@functools.cache
def _bounded_body_class(http: Any) -> type:
    """``BoundedBody`` for the HTTP library ``http`` (httpx or httpx2: a response body must be
    its ``SyncByteStream``)."""

    class BoundedBody(http.SyncByteStream):  # type: ignore[name-defined,misc]
        """A response body read up to ``bound.max_bytes`` bytes and until ``bound.deadline``,
        when the watcher shuts the connection's socket (waking a read that waits for a trickle);
        the read then ends in the library's ``ReadTimeout``."""

        def __init__(self, inner: Any, bound: _Bound, network_stream: Any) -> None:
            self._inner = inner
            self._bound = bound
            self._network_stream = network_stream
            self._expired = threading.Event()

        def _expire(self) -> None:
            self._expired.set()
            _shut(self._network_stream)

        def _timeout(self) -> Exception:
            return http.ReadTimeout("the reply was not read whole before the request's deadline")

        def __iter__(self) -> Iterator[bytes]:
            watchdog = _WATCHER.add(self._expire, deadline=self._bound.deadline)
            read = 0
            try:
                for chunk in self._inner:
                    read += len(chunk)
                    if read > self._bound.max_bytes:
                        raise _too_large(self._bound.max_bytes, "read")
                    if self._expired.is_set():
                        raise self._timeout()
                    yield chunk
            except (_BadReply, http.ReadTimeout):
                raise
            except Exception:
                if self._expired.is_set():  # the watchdog's shutdown broke the read
                    raise self._timeout() from None
                raise
            finally:
                _WATCHER.remove(watchdog)
            if self._expired.is_set():  # a body delimited by the end of the connection the watchdog ended
                raise self._timeout()

        def close(self) -> None:
            self._inner.close()

    return BoundedBody


class RequestRefused(LLMError):
    """The server refused a request for good (an HTTP 4xx other than 408, 409 and 429, or an
    error that names the request's ``response_format``)."""

    def __init__(self, message: str, status: int, format_refused: bool = False) -> None:
        super().__init__(message)
        self.status = status
        #: The refusal is of the ``response_format`` (see ``FORMAT_WORDS``).
        self.format_refused = format_refused


#: The ``response_format`` forms tried in order for a request with a JSON schema (see the
#: module docstring), by name; ``None`` is the request without it.
RESPONSE_FORMATS = ("json_schema", "json_object", None)
#: An error of a request with a ``response_format`` whose message names one of these is the
#: server refusing that form (whatever the status: llama-cpp-python's server answers an unknown
#: form with HTTP 500 and a validation error): not retried, the next form is tried. Other errors
#: (a prompt too long, ...) stay errors and leave the form in use.
FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema")


def response_format(form: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` of a request constrained to ``schema``, in the form ``form``."""
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": True}}
    return {"type": "json_object", "schema": schema}


class OpenAICompatibleLLM(LLMBase):
    """A model behind an OpenAI-compatible HTTP API, with retries and bounded concurrency."""

    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        # Credentials in the URL stay out of the name, the cache key and everything recorded.
        self.name = f"openai:{config.model}" + (f"@{redact_credentials(config.base_url)}" if config.base_url else "")
        self.max_concurrency = config.concurrency
        self._url_has_credentials = bool(config.base_url) and redact_credentials(config.base_url) != config.base_url
        #: The literal secrets (and their base64) to redact from what the server says (``_redact``).
        self._secrets = secret_forms(config.base_url, config.api_key)
        caps = {GENERATE}
        if config.native_n:
            caps.add(NATIVE_N)
        if config.logprobs:
            caps.add(LOGPROBS)
        if config.loglikelihood:
            caps.add(LOGLIKELIHOOD)
        if config.structured:
            caps.add(STRUCTURED)
        self.capabilities = frozenset(caps)
        self.context_tokens = config.context
        super().__init__()
        #: Index into ``RESPONSE_FORMATS`` of the first form this server has not refused.
        self._format = 0
        # The OpenAI SDK (~0.3-0.8 s to import) and its client are made on the first request,
        # so a run answered entirely from the response cache never pays for them.
        self._client_lock = threading.Lock()
        self._made: tuple[Any, Any] | None = None  # (the openai module, its client)

    def _sdk(self) -> tuple[Any, Any]:
        """``(openai module, client)``, created once, on first use (thread-safe)."""
        with self._client_lock:
            if self._made is None:
                import openai

                client = openai.OpenAI(
                    base_url=self.endpoint(),
                    api_key=self.config.api_key or "EMPTY",
                    timeout=self.config.timeout,
                    max_retries=0,  # hopqa retries itself, with a clear error at the end
                    # the deadline and the byte limit of each request (module docstring)
                    http_client=bounded_http_client(openai),
                )
                self._made = (openai, client)
            return self._made

    def endpoint(self) -> str | None:
        """The base URL requests go to. One ``Authorization`` is sent (module docstring, "Which
        credential is sent"): with an API key, the URL's credentials are left out of it."""
        url = self.config.base_url
        if url and self.config.api_key and self._url_has_credentials:
            return without_url_credentials(url)
        return url

    def _redact(self, text: str) -> str:
        """``text`` (from the server, or about its reply) without any credential (module docstring)."""
        return redact_secrets(text, self._secrets)

    @property
    def _openai(self) -> Any:
        return self._sdk()[0]

    @property
    def _client(self) -> Any:
        return self._sdk()[1]

    def identity(self) -> dict[str, Any]:
        url = redact_credentials(self.config.base_url) if self.config.base_url else None
        return {"backend": "openai-compatible", "model": self.config.model, "base_url": url}

    def capability_hint(self, capability: str) -> str:
        if capability == LOGLIKELIHOOD:
            return ("add ?loglikelihood=echo to the spec if the server scores prompts with echo=True "
                    "(vLLM does), or use the embedded backend")
        if capability == LOGPROBS:
            return "this endpoint was configured with logprobs=0"
        if capability == STRUCTURED:
            return "this endpoint was configured with structured=0"
        return ""

    # -- retries ---------------------------------------------------------------------------
    def _call(self, fn: Callable[..., Any], read: Callable[[Any], Any], max_bytes: int, **kwargs: Any) -> Any:
        """``read(fn(**kwargs))``: the request (bounded by the timeout and ``max_bytes``, module
        docstring), its response read by ``read`` (which raises ``_BadReply`` on a reply it
        cannot use); retried up to ``retries`` times with exponential backoff on connection
        errors, timeouts, HTTP 408, 409, 429 and 5xx, malformed / undecodable JSON and unusable
        replies. Raises ``LLMError`` naming the endpoint (credentials redacted) and the last cause."""
        o = self._openai
        attempts = self.config.retries + 1
        cancel = current_cancel_event()
        last: Exception | None = None
        what = ""
        for attempt in range(attempts):
            check_cancelled(cancel)
            try:
                resp = self._attempt(fn, max_bytes, cancel, kwargs)
                return read(resp)
            except o.APITimeoutError as exc:
                last, what = exc, f"no reply within {self.config.timeout:g} s"
            except o.APIConnectionError as exc:
                if isinstance(exc.__cause__, _BadReply):  # refused by a hook (an SDK that wraps every error)
                    last, what = exc.__cause__, exc.__cause__.what
                else:
                    last, what = exc, "cannot connect to the server"
            except o.APIStatusError as exc:
                if "response_format" in kwargs and any(word in str(exc).lower() for word in FORMAT_WORDS):
                    raise RequestRefused(self._redact(f"{self.name}: the server refused the response_format (HTTP "
                                                      f"{exc.status_code}): {_short(exc, secrets=self._secrets)}"),
                                         exc.status_code, format_refused=True) from self._cause(exc)
                if not (exc.status_code >= 500 or exc.status_code in (408, 409, 429)):
                    raise RequestRefused(self._redact(f"{self.name}: the server refused the request (HTTP "
                                                      f"{exc.status_code}): {_short(exc, secrets=self._secrets)}"
                                                      f"{_refusal_hint(exc.status_code)}"),
                                         exc.status_code) from self._cause(exc)
                last, what = exc, f"HTTP {exc.status_code}" + (" (rate limited)" if exc.status_code == 429 else "")
            except (json.JSONDecodeError, UnicodeDecodeError, o.APIResponseValidationError) as exc:
                last, what = exc, "malformed JSON response"
            except _BadReply as exc:
                last, what = exc, exc.what
            if attempt + 1 < attempts:
                pause = self.config.backoff * (2**attempt) * (1 + 0.1 * random.random())
                if cancel is None:
                    time.sleep(pause)
                elif cancel.wait(pause):
                    raise Cancelled(f"{self.name}: cancelled while waiting to retry") from None
        if isinstance(last, _BadReply) and last.hint:
            hint = last.hint
        elif isinstance(last, (_BadReply, json.JSONDecodeError, UnicodeDecodeError, o.APIResponseValidationError)):
            hint = ("the endpoint does not answer like an OpenAI-compatible server; check the URL (it usually "
                    "ends in /v1), or raise ?retries= in the LLM spec")
        else:
            hint = "check that the server is running and reachable, or raise ?retries= / ?timeout= in the LLM spec"
        if isinstance(last, _BadReply):
            cause = f" ({last.detail})" if last.detail else ""
        else:
            cause = f" ({type(last).__name__}: {_short(last, secrets=self._secrets)})"
        raise LLMError(self._redact(
            f"{self.name}: {what} after {attempts} attempt{'s' if attempts > 1 else ''}{cause}; {hint}"
        )) from self._cause(last)

    def _attempt(self, fn: Callable[..., Any], max_bytes: int, cancel: threading.Event | None,
                 kwargs: dict[str, Any]) -> Any:
        """``fn(**kwargs)``: one request, bounded (module docstring) and aborted when ``cancel``
        is set while it is in flight: its connection is shut and ``Cancelled`` raised (never an
        ``LLMError``, never retried, never a reply)."""
        with _bounded(self.config.timeout, max_bytes, cancel) as bound:
            try:
                resp = fn(**kwargs)
            except Exception:
                if bound.aborted:
                    raise Cancelled(f"{self.name}: the request in flight was aborted (cancelled)") from None
                raise
        if bound.aborted:  # the reply was read whole, but from a connection shut under it: not trusted
            raise Cancelled(f"{self.name}: the request in flight was aborted (cancelled)")
        return resp

    def _cause(self, exc: BaseException | None) -> BaseException | None:
        """The exception to chain under an ``LLMError``: none when the endpoint URL holds
        credentials (a chained library error could print the URL in a traceback)."""
        return None if self._url_has_credentials else exc

    # -- generation ------------------------------------------------------------------------
    def _complete(self, request: GenerationRequest) -> Generation:
        """One chat request; if the server returns fewer than ``n`` samples, the rest are
        fetched one by one with seeds ``seed + k`` through ``_chat`` directly (never through
        ``complete``/``map``: this runs inside the concurrency slot its caller holds). Each
        top-up either adds a sample or fails with ``LLMError`` after the retries, so a server
        that ignores ``n`` costs at most ``n`` calls and one that returns nothing gives up."""
        t0 = time.perf_counter()
        gen = self._chat(request)
        base = request.seed if request.seed is not None else 0
        while len(gen.completions) < request.n:
            extra = self._chat(replace(request, n=1, seed=base + len(gen.completions)))
            gen.completions.append(extra.completions[0])
            gen.prompt_tokens += extra.prompt_tokens
            gen.prompt_tokens_evaluated = (None if gen.prompt_tokens_evaluated is None or extra.prompt_tokens_evaluated
                                           is None else gen.prompt_tokens_evaluated + extra.prompt_tokens_evaluated)
            gen.completion_tokens += extra.completion_tokens
        del gen.completions[request.n:]
        gen.seconds = time.perf_counter() - t0
        return gen

    def _chat(self, request: GenerationRequest) -> Generation:
        """One ``/chat/completions`` call (with retries): at least one completion. A request
        with a schema goes through the ``response_format`` forms the server has not refused
        (``RESPONSE_FORMATS``, module docstring)."""
        if request.schema is None:
            return self._chat_once(request, None)
        schema = request.schema_dict() or {}
        while True:
            index = self._format
            form = RESPONSE_FORMATS[index]
            try:
                gen = self._chat_once(request, response_format(form, schema) if form else None)
            except RequestRefused as exc:
                if not exc.format_refused:
                    raise
                with self._client_lock:  # another thread may have moved on already
                    self._format = max(self._format, index + 1)
                continue
            gen.schema_ignored = form is None
            return gen

    def _chat_once(self, request: GenerationRequest, response_format: dict[str, Any] | None) -> Generation:
        t0 = time.perf_counter()
        kwargs: dict[str, Any] = dict(
            model=self.config.model,
            messages=request.as_messages(),
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=request.max_tokens,
        )
        if request.n > 1:
            kwargs["n"] = request.n
        if request.stop:
            kwargs["stop"] = list(request.stop)[:4]  # OpenAI accepts at most 4 stop sequences
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.logprobs:
            kwargs["logprobs"] = True
        if response_format is not None:
            kwargs["response_format"] = response_format

        def read(resp: Any) -> Generation:
            usage = _field(resp, "usage")
            prompt_tokens = token_count(_field(usage, "prompt_tokens"))
            return Generation(
                completions=[_read_choice(c, request.logprobs, self._secrets) for c in _choices(resp, self._secrets)],
                prompt_tokens=prompt_tokens,
                completion_tokens=token_count(_field(usage, "completion_tokens")),
                seconds=time.perf_counter() - t0,
                backend=self.name,
                prompt_tokens_evaluated=evaluated_tokens(usage, prompt_tokens),
            )

        return self._call(self._client.chat.completions.create, read, body_limit(request.n, request.max_tokens),
                          **kwargs)

    # -- scoring ---------------------------------------------------------------------------
    def _loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        """Score ``continuation`` through ``/completions`` with ``echo=True``: the echoed prompt
        tokens whose text offset is at or after ``len(context)`` are the continuation's (a
        token straddling the boundary counts as context; its log-probability is left out)."""
        t0 = time.perf_counter()
        prompt = context + continuation

        def read(resp: Any) -> LogLikelihood:
            lp = _field(_choices(resp, self._secrets)[0], "logprobs")
            echoed = [_field(lp, name) for name in ("tokens", "token_logprobs", "text_offset")]
            if any(x is None for x in echoed):  # not malformed: the server does not echo (not retried)
                raise LLMError(f"{self.name}: the server returned no echo logprobs; it cannot score continuations "
                               "(remove ?loglikelihood=echo from the LLM spec)")
            if not all(isinstance(x, list) for x in echoed):
                raise _BadReply("echo logprobs that are not lists", _short(lp, 120, self._secrets))
            tokens, values = [], []
            for tok, val, off in zip(*echoed):
                if not isinstance(tok, str) or isinstance(off, bool) or not isinstance(off, int):
                    raise _BadReply("echo logprobs with a token that is not text or an offset that is not a "
                                    "whole number", _short((tok, off), 120, self._secrets))
                if off >= len(context) and val is not None:
                    tokens.append(tok)
                    values.append(_logprob(val))
            return LogLikelihood(
                token_logprobs=values,
                tokens=tokens,
                prompt_tokens=token_count(_field(_field(resp, "usage"), "prompt_tokens")),
                seconds=time.perf_counter() - t0,
            )

        return self._call(self._client.completions.create, read,
                          max(MIN_BODY_BYTES, (len(prompt) + 1) * BODY_BYTES_PER_CHAR),
                          model=self.config.model, prompt=prompt, max_tokens=0, echo=True, logprobs=1,
                          temperature=0.0)

    def close(self) -> None:
        with self._client_lock:
            made, self._made = self._made, None
        if made is not None:
            made[1].close()


def evaluated_tokens(usage: Any, prompt_tokens: int) -> int | None:
    """The prompt tokens a server evaluated: its prompt tokens less those its prefix cache
    served (``usage.prompt_tokens_details.cached_tokens``: OpenAI, vLLM with
    ``--enable-prompt-tokens-details``, llama.cpp's server); None when it does not say."""
    cached = _field(_field(usage, "prompt_tokens_details"), "cached_tokens")
    if isinstance(cached, bool) or not isinstance(cached, int) or cached < 0:
        return None
    return max(0, prompt_tokens - cached)


def _field(obj: Any, name: str) -> Any:
    """``obj[name]`` of a JSON object, ``obj.name`` of one the SDK made; None when missing (the
    SDK builds its objects without validation, so a field may hold any JSON value)."""
    if isinstance(obj, dict):
        return obj.get(name)
    if obj is None or isinstance(obj, (str, bytes, int, float, list)):
        return None
    return getattr(obj, name, None)


def _choices(resp: Any, secrets: tuple[str, ...] = ()) -> list[Any]:
    """The choices of a completion object; ``_BadReply`` unless there is at least one (its
    detail shows the reply, ``secrets`` redacted: ``_short``)."""
    if isinstance(resp, (str, bytes)):  # the SDK returns the body as text when it is not JSON
        raise _BadReply("a response that is not JSON", _short(resp, 80, secrets))
    choices = _field(resp, "choices")
    if choices is None or not isinstance(choices, list):
        raise _BadReply("a response without choices", _short(resp, 120, secrets))
    if not choices:
        raise _BadReply("empty choices")
    return choices


def _read_choice(choice: Any, want_logprobs: bool, secrets: tuple[str, ...] = ()) -> Completion:
    """A chat choice as a ``Completion``, its token log-probabilities (``logprobs.content``)
    read only when asked for; ``_BadReply`` when the choice has no message (missing, null, not
    an object), content that is neither text nor null, or log-probabilities that are not numbers."""
    message = _field(choice, "message")
    if message is None or isinstance(message, (str, bytes, int, float, list)):
        raise _BadReply("a choice without a message", _short(choice, 120, secrets))
    content = _field(message, "content")
    if content is not None and not isinstance(content, str):
        raise _BadReply("a message whose content is not text", _short(content, 120, secrets))
    tokens = values = None
    entries = _field(_field(choice, "logprobs"), "content") if want_logprobs else None
    if entries is not None:
        if not isinstance(entries, list) or not all(isinstance(_field(c, "token"), str) for c in entries):
            raise _BadReply("token log-probabilities without their tokens", _short(entries, 120, secrets))
        tokens = [_field(c, "token") for c in entries]
        try:
            values = logprob_values([_field(c, "logprob") for c in entries])
        except MalformedValue as exc:
            raise _BadReply(exc.what, exc.detail) from None
    reason = _field(choice, "finish_reason")
    return Completion(text=content or "", finish_reason=reason if isinstance(reason, str) else None, tokens=tokens,
                      logprobs=values)


def _logprob(value: Any) -> float:
    """``hopqa.llm.base.logprob`` with a ``_BadReply`` (retried) instead of its ``MalformedValue``."""
    try:
        return logprob(value)
    except MalformedValue as exc:
        raise _BadReply(exc.what, exc.detail) from None


def _refusal_hint(status: int) -> str:
    if status in (401, 403):
        return "; check OPENAI_API_KEY"
    if status == 404:
        return "; check the model name and the URL (it usually ends in /v1)"
    return ""


def _short(exc: object, limit: int = 300, secrets: tuple[str, ...] = ()) -> str:
    """One line of at most ``limit`` characters, valid Unicode, with every credential redacted
    (``hopqa.config.redact_secrets``: credential-shaped tokens and the literal ``secrets``)
    before it is cut, so no part of a secret is left at the cut."""
    text = mend_text(redact_secrets(" ".join(str(exc).split()), secrets))[0]
    return text if len(text) <= limit else text[:limit] + "..."
