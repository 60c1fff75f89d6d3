"""A fake OpenAI-compatible server that misbehaves on purpose (for the reliability drills).

``FaultServer(...)`` serves ``/v1/chat/completions`` and ``/v1/completions`` on 127.0.0.1 (a
free port, a background thread; stdlib ``http.server`` only, so it runs anywhere the tests
run). ``server.url`` is the base URL to put in an LLM spec:
``openai:fake@{server.url}?retries=1&timeout=2``.

Healthy replies are deterministic functions of the prompt: by default the last word of the
prompt's last ``Question:`` line (``answer_for``), ``n`` identical choices (at most ``max_n``).
Token log-probabilities are known in advance so tests can check exact values: the reply (or, for
``echo=True``, the prompt followed by the reply) is cut into tokens by ``tokenize`` (each run of
non-space characters with the whitespace before it) and token ``i`` gets ``token_logprob(i)``
= ``-0.25 * (i + 1)`` (exact in binary floating point); an echoed prompt's first token has
``None``, like vLLM's.

Faults (``FAULT_KINDS``), chosen per request:

- ``http500`` / ``http429`` / ``http400`` — that status with an OpenAI-style error body;
- ``hang`` — no answer for ``hang_seconds`` (meant to exceed the client's timeout), then a
  healthy reply to nobody; the wait ends early on ``release_hangs()`` and at shutdown;
- ``malformed_json`` — HTTP 200, ``application/json``, a body cut off mid-string;
- ``empty_choices`` — HTTP 200, a valid completion object with ``"choices": []``;
- ``garbage`` — HTTP 200, a ``text/html`` body that is not JSON (a proxy's error page);
- ``nonsense`` — HTTP 200, a valid completion whose text is random junk;
- ``long`` — a healthy answer followed by filler up to ``long_chars`` characters, ignoring
  ``max_tokens``;
- ``null_message`` — HTTP 200, a completion whose choice has ``"message": null`` (or, on
  ``/completions``, ``"text": null``);
- ``bad_usage`` — a healthy answer whose ``usage`` counts are not numbers (``"n/a"``, a list);
- ``bad_logprobs`` — a healthy answer whose token log-probabilities are not numbers (sent
  whether asked for or not);
- ``lone_surrogate`` — a healthy answer followed by the JSON escape ``\\ud800`` (a lone
  surrogate: what some servers send for a token that is not whole UTF-8), in the text and its
  last token;
- ``trickle`` — a healthy reply whose body is sent one byte every ``trickle_seconds`` (each read
  of the client gets data, so only a total deadline stops it);
- ``huge`` — HTTP 200, a valid completion of ``huge_bytes`` bytes (50 MB by default) sent in
  64 KB chunks without a Content-Length; ``bytes_sent`` counts what was written before the
  client hung up.

``script`` is a list of kinds (or ``"ok"``) served to the first requests in arrival order. After
it, ``faults`` (kind -> probability, the rest healthy) decide: the draw for a request is seeded
by ``(seed, prompt, how many times this prompt was seen before)``, so which attempt of which
question fails is the same on every run, whatever order concurrent requests arrive in.

The server records every request (``requests``), the kind it served (``served``), requests in
flight now and at most (``max_in_flight``). ``delay`` slows every healthy reply; ``gate`` (a
``threading.Barrier``) holds each healthy request until that many are in flight together.

``fault_server`` is a pytest fixture: a factory ``fault_server(**options) -> FaultServer`` whose
servers are shut down at the end of the test. Import it into a test module to use it.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Collection, Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

FAULT_KINDS = ("http500", "http429", "hang", "malformed_json", "empty_choices", "garbage", "nonsense", "long",
               "http400", "null_message", "bad_usage", "bad_logprobs", "lone_surrogate", "trickle", "huge")
#: The kinds of the mixed-fault drills: every kind a real server shows now and then (not
#: ``http400``, a refusal of the request itself, which is never retried, nor the edge cases
#: after it, which have tests of their own).
MIXED = FAULT_KINDS[:8]
#: The kinds whose reply still answers a request without log-probabilities.
ANSWERED = ("nonsense", "long", "bad_usage", "bad_logprobs", "lone_surrogate")


def tokenize(text: str) -> list[str]:
    """The fake tokenizer: runs of non-space characters with the whitespace before them (and
    trailing whitespace as a last token), so ``"".join(tokenize(t)) == t``."""
    return re.findall(r"\s*\S+|\s+$", text)


def token_logprob(i: int) -> float:
    """The log-probability the fake server gives the ``i``-th token (0-based) of a sequence."""
    return -0.25 * (i + 1)


def answer_for(prompt: str) -> str:
    """The healthy reply to ``prompt``: the last word of its last ``Question:`` line (of its
    last non-empty line if there is none), or ``unknown``."""
    lines = [ln for ln in prompt.splitlines() if ln.strip()]
    questions = [ln for ln in lines if "Question:" in ln]
    line = questions[-1].split("Question:", 1)[1] if questions else (lines[-1] if lines else "")
    words = re.findall(r"[\w'-]+", line)
    return words[-1] if words else "unknown"


class FaultServer:
    """The fake server; see the module docstring."""

    def __init__(
        self,
        faults: dict[str, float] | None = None,
        seed: int = 0,
        script: Sequence[str] = (),
        delay: float = 0.0,
        hang_seconds: float = 3.0,
        long_chars: int = 100_000,
        max_n: int | None = None,
        gate: threading.Barrier | None = None,
        reply: Callable[[str], str] = answer_for,
        response_formats: Collection[str] | None = None,
        trickle_seconds: float = 0.2,
        huge_bytes: int = 50_000_000,
    ) -> None:
        faults = dict(faults or {})
        unknown = set(faults) - set(FAULT_KINDS)
        if unknown or sum(faults.values()) > 1.0 + 1e-9:
            raise ValueError(f"faults must map kinds of {FAULT_KINDS} to probabilities summing to <= 1, got {faults}")
        for kind in script:
            if kind != "ok" and kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault kind {kind!r} in script")
        self.faults = faults
        self.seed = seed
        self.script = list(script)
        self.delay = delay
        self.hang_seconds = hang_seconds
        self.long_chars = long_chars
        self.max_n = max_n
        self.gate = gate
        self.reply = reply
        #: The ``response_format`` types this server takes (None: any); others get HTTP 400.
        self.response_formats = response_formats
        self.trickle_seconds = trickle_seconds
        self.huge_bytes = huge_bytes
        #: Bytes of ``huge`` bodies written so far (what the clients did not refuse in time).
        self.bytes_sent = 0
        self.requests: list[dict[str, Any]] = []
        self.served: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._unhang = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.httpd.daemon_threads = True  # a hanging handler never blocks shutdown
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), name=f"fault-server-{self.port}", daemon=True)
        self._thread.start()

    # -- choosing what to serve ---------------------------------------------------------------
    def pick(self, prompt: str) -> str:
        """The kind to serve for this request (``ok`` or a fault kind), recorded in ``served``."""
        with self._lock:
            if self.script:
                kind = self.script.pop(0)
            else:
                k = self._seen[prompt]
                self._seen[prompt] += 1
                x = random.Random(f"{self.seed}|{prompt}|{k}").random()
                kind, acc = "ok", 0.0
                for name in FAULT_KINDS:
                    acc += self.faults.get(name, 0.0)
                    if x < acc:
                        kind = name
                        break
            self.served[kind] += 1
            return kind

    def set_faults(self, faults: dict[str, float]) -> None:
        """Change the fault mix (e.g. heal the server: ``set_faults({})``)."""
        with self._lock:
            self.faults = dict(faults)

    def wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``; returns at once when the server shuts down."""
        if seconds > 0:
            self._stop.wait(seconds)

    def hang(self) -> None:
        """Hold a ``hang`` request for ``hang_seconds`` or until ``release_hangs``/shutdown."""
        self._unhang.wait(self.hang_seconds)

    def release_hangs(self) -> None:
        """Let every hanging request (now and later) go on at once."""
        self._unhang.set()

    def enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def record(self, path: str, body: dict[str, Any], headers: Any, kind: str) -> None:
        with self._lock:
            self.requests.append({"path": path, "body": body, "auth": headers.get("Authorization"), "kind": kind})

    def close(self) -> None:
        """Stop serving; wakes hanging handlers. Safe to call twice."""
        self._stop.set()
        self._unhang.set()
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- replies ------------------------------------------------------------------------------------
def _usage(prompt: str, texts: list[str]) -> dict[str, int]:
    p = len(tokenize(prompt))
    c = sum(len(tokenize(t)) for t in texts)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _chat_logprobs(text: str) -> dict[str, Any]:
    return {"content": [{"token": t, "logprob": token_logprob(i), "bytes": list(t.encode("utf-8", "surrogatepass")),
                         "top_logprobs": []} for i, t in enumerate(tokenize(text))]}


def chat_completion(prompt: str, texts: list[str], logprobs: bool, model: str = "fake") -> dict[str, Any]:
    """A chat.completion object with one choice per text."""
    choices = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop",
                "logprobs": _chat_logprobs(t) if logprobs else None} for i, t in enumerate(texts)]
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": choices, "usage": _usage(prompt, texts)}


def _legacy_logprobs(prompt: str, text: str, echo: bool) -> dict[str, Any]:
    tokens = tokenize(prompt + text) if echo else tokenize(text)
    offsets, pos = [], 0
    for t in tokens:
        offsets.append(pos)
        pos += len(t)
    values: list[float | None] = [token_logprob(i) for i in range(len(tokens))]
    if echo and values:
        values[0] = None  # nothing before the first prompt token to condition on
    return {"tokens": tokens, "token_logprobs": values, "text_offset": offsets,
            "top_logprobs": [None if v is None else {t: v} for t, v in zip(tokens, values)]}


def text_completion(prompt: str, texts: list[str], logprobs: int | None, echo: bool,
                    model: str = "fake") -> dict[str, Any]:
    """A text_completion object (the legacy ``/v1/completions`` format)."""
    choices = []
    for i, t in enumerate(texts):
        choices.append({"index": i, "text": (prompt + t) if echo else t, "finish_reason": "length",
                        "logprobs": _legacy_logprobs(prompt, t, echo) if logprobs is not None else None})
    return {"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": model,
            "choices": choices, "usage": _usage(prompt, texts)}


def _spoil(reply: dict[str, Any], kind: str) -> None:
    """Make a healthy ``reply`` (chat or text completion) into the fault ``kind``, in place."""
    if kind == "null_message":
        for choice in reply["choices"]:
            choice["message" if "message" in choice else "text"] = None
    elif kind == "bad_usage":
        reply["usage"] = {"prompt_tokens": "n/a", "completion_tokens": [3], "total_tokens": None}
    elif kind == "bad_logprobs":
        for choice in reply["choices"]:
            lp = choice["logprobs"]
            if "content" in lp:
                for i, entry in enumerate(lp["content"]):
                    entry["logprob"] = "abc" if i == 0 else None
            else:
                lp["token_logprobs"] = ["abc" for _ in lp["token_logprobs"]]


def _prompt_of(path: str, body: dict[str, Any]) -> str:
    if path.endswith("/chat/completions"):
        return "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])
    prompt = body.get("prompt") or ""
    return prompt if isinstance(prompt, str) else "".join(map(str, prompt))


def _handler_for(server: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                pass

        def _json(self, status: int, obj: Any) -> None:
            self._send(status, json.dumps(obj).encode())

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            server.enter()
            try:
                self._post()
            finally:
                server.leave()

        def _post(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._json(400, {"error": {"message": "the request body is not JSON"}})
                return
            path = self.path.rstrip("/")
            if not (path.endswith("/chat/completions") or path.endswith("/completions")):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            prompt = _prompt_of(path, body)
            form = (body.get("response_format") or {}).get("type")
            if form is not None and server.response_formats is not None and form not in server.response_formats:
                server.record(path, body, self.headers, "refused")
                self._json(400, {"error": {"message": f"response_format {form!r} is not supported",
                                           "type": "invalid_request_error"}})
                return
            kind = server.pick(prompt)
            server.record(path, body, self.headers, kind)
            if kind == "http500":
                self._json(500, {"error": {"message": "internal error (injected)", "type": "server_error"}})
                return
            if kind == "http429":
                self._json(429, {"error": {"message": "rate limited (injected)", "type": "rate_limit"}})
                return
            if kind == "http400":
                self._json(400, {"error": {"message": "bad request (injected)", "type": "invalid_request_error"}})
                return
            if kind == "hang":
                server.hang()
                kind = "ok"
            if kind == "malformed_json":
                self._send(200, b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, '
                                b'"message": {"role": "assistant", "content": "unterminated')
                return
            if kind == "garbage":
                self._send(200, b"<html><body><h1>502 Bad Gateway</h1>\x00\xff\xfe garbage</body></html>",
                           content_type="text/html")
                return
            if kind == "huge":
                self._huge()
                return
            if kind == "ok":
                if server.gate is not None:
                    try:
                        server.gate.wait(timeout=10)
                    except threading.BrokenBarrierError:
                        pass
                server.wait(server.delay)
            n = max(1, int(body.get("n") or 1))
            if server.max_n is not None:
                n = min(n, server.max_n)
            if kind == "empty_choices":
                n = 0
            text = server.reply(prompt)
            if kind == "nonsense":
                rng = random.Random(prompt)
                text = "".join(rng.choice("qxzj#@%& ") for _ in range(40))
            elif kind == "long":
                filler = " lorem ipsum dolor sit amet"
                text = (text + filler * (server.long_chars // len(filler) + 1))[: server.long_chars]
            elif kind == "lone_surrogate":
                text += "\ud800"
            if path.endswith("/chat/completions"):
                reply = chat_completion(prompt, [text] * n, bool(body.get("logprobs")) or kind == "bad_logprobs")
            else:
                echo = bool(body.get("echo"))
                generated = "" if body.get("max_tokens") == 0 else text
                logprobs = body.get("logprobs") if kind != "bad_logprobs" else 1
                reply = text_completion(prompt, [generated] * n, logprobs, echo)
            _spoil(reply, kind)
            if kind == "trickle":
                self._trickle(json.dumps(reply).encode())
            else:
                self._json(200, reply)

        def _trickle(self, payload: bytes) -> None:
            """``payload`` one byte every ``trickle_seconds`` (until the client hangs up)."""
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                for i in range(len(payload)):
                    self.wfile.write(payload[i:i + 1])
                    self.wfile.flush()
                    server.wait(server.trickle_seconds)
                    if server._stop.is_set():
                        return
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _huge(self) -> None:
            """A valid completion of ``huge_bytes`` bytes in 64 KB chunks, no Content-Length."""
            head = (b'{"id": "x", "object": "chat.completion", "created": 0, "model": "fake", '
                    b'"choices": [{"index": 0, "message": {"role": "assistant", "content": "')
            tail = b'"}, "finish_reason": "stop", "logprobs": null}]}'
            chunk = b"a" * 65536
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(head)
                left = server.huge_bytes - len(head) - len(tail)
                while left > 0 and not server._stop.is_set():
                    part = chunk[:left]
                    self.wfile.write(part)
                    with server._lock:
                        server.bytes_sent += len(part)
                    left -= len(part)
                self.wfile.write(tail)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


@pytest.fixture
def fault_server() -> Iterator[Callable[..., FaultServer]]:
    """A factory of ``FaultServer``s (keyword options as in its constructor), all closed after
    the test."""
    started: list[FaultServer] = []

    def start(**options: Any) -> FaultServer:
        s = FaultServer(**options)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds passed; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
