"""The LLM layer under the HTTP service (issue 30): descriptors and memory stay flat however many
threads call it (item 5), what a backend says is relayed without credentials and exactly one
credential is sent (item 8), and cancelling aborts the backend request in flight (item 4).

Real HTTP against local fake servers (``tests/fault_server.py`` and the small ones below); no
model is loaded except in the test marked ``slow``."""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from hopqa import cancel as cancel_module
from hopqa.cancel import Cancelled, cancellable, current_cancel_event
from hopqa.config import redact_secrets, secret_forms
from hopqa.llm import CachedLLM, LLMError, ResponseCache
from hopqa.llm.openai import (
    OpenAICompatibleLLM,
    OpenAIConfig,
    bounded_http_client,
    track_connections,
)
from hopqa.llm.scripted import ScriptedLLM
from hopqa.runtime import TracedLLM
from hopqa.trace import Trace, step

#: The fault_server fixture (a factory of FaultServer).
pytest_plugins = ["fault_server"]

KEY = "sk-live-0123456789abcdefXYZ"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def in_new_threads(n: int, work: Callable[[int], None], group: int = 8) -> None:
    """``work(i)`` for i < n, each on a thread of its own, ``group`` threads at a time."""
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    for start in range(0, n, group):
        threads = [threading.Thread(target=run, args=(i,)) for i in range(start, min(n, start + group))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[:3]


def make(url: str, api_key: str | None = KEY, **opts: Any) -> OpenAICompatibleLLM:
    opts.setdefault("backoff", 0.01)
    return OpenAICompatibleLLM(OpenAIConfig(model="m", base_url=url, api_key=api_key, **opts))


# -- item 5: a descriptor per request --------------------------------------------------------------
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_the_cache_keeps_descriptors_and_memory_flat_over_10000_threads(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    llm = CachedLLM(ScriptedLLM(replies=lambda r: r.prompt.upper()), cache)
    llm.generate("warm up")
    in_new_threads(200, lambda i: llm.generate(f"p{i}"))  # the store's files and pages are open
    fds, rss = open_fds(), rss_kb()
    # each thread: a hit or a miss (a write), as the service's requests do
    in_new_threads(10_000, lambda i: llm.generate(f"p{i % 300}" if i % 3 else f"new {i}"))
    assert open_fds() - fds < 10, f"{fds} -> {open_fds()} open descriptors"
    assert rss_kb() - rss < 40_000, f"RSS {rss} -> {rss_kb()} kB"
    assert llm.generate("p7").cached and len(cache) > 3000
    cache.close()
    assert open_fds() < fds


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_the_cached_openai_backend_keeps_descriptors_flat_over_threads(tmp_path, fault_server):
    s = fault_server()
    llm = CachedLLM(make(s.url), ResponseCache(tmp_path / "c"))
    in_new_threads(50, lambda i: llm.generate(f"Question: warm {i}"))
    fds = open_fds()
    in_new_threads(1000, lambda i: llm.generate(f"Question: word{i % 400}"))
    assert open_fds() - fds < 10, f"{fds} -> {open_fds()} open descriptors"
    assert len(s.requests) == 50 + 400
    llm.close()


def test_a_closed_cache_opens_again_when_used(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    cache.set("k", {"a": 1})
    cache.close()
    assert cache.get("k") == {"a": 1} and len(cache) == 1
    cache.close()


# -- item 8: relayed backend text -----------------------------------------------------------------
@pytest.mark.parametrize("text, gone", [
    ("Incorrect API key provided: Bearer sk-abc123def456ghi", ["sk-abc", "abc123"]),
    ("Incorrect API key provided: Basic dXNlcjpwYXNzd29yZA==", ["dXNl"]),
    ("header Authorization: Token abcdef123456 was refused", ["abcdef123456"]),
    ("your key sk-proj-AbCdEf0123456789 is not valid", ["AbCdEf"]),
    ('{"api_key": "zz-secret-9", "model": "m"}', ["zz-secret-9"]),
    ("GET /v1/models?key=abc123&x=1 failed; token=t0k3n, password: hunter22", ["abc123", "t0k3n", "hunter22"]),
    ("cannot reach http://user:pa55@host/v1", ["pa55"]),
])
def test_redact_secrets_removes_every_credential_shape(text, gone):
    out = redact_secrets(text)
    assert "***" in out and not any(g in out for g in gone), out


def test_redact_secrets_keeps_ordinary_text():
    text = "This model's maximum context length is 4096 tokens; max_tokens: 5000 is too many (model: m)"
    assert redact_secrets(text) == text


def test_redact_secrets_removes_the_configured_secrets_in_any_form():
    url = "http://alice:s3cr%40t-pw@host/v1"
    basic = base64.b64encode(b"alice:s3cr@t-pw").decode()
    forms = secret_forms(url, "plainkey42")
    text = f"echo {basic} / {basic.rstrip('=')} / s3cr@t-pw / s3cr%40t-pw / plainkey42 / {base64.b64encode(b'plainkey42').decode()}"
    out = redact_secrets(text, forms)
    assert all(part.strip() == "***" for part in out.removeprefix("echo ").split("/")), out


class EchoAuth(BaseHTTPRequestHandler):
    """A server that refuses every request and echoes its ``Authorization`` header (and the raw
    credential after the scheme) in the error, as some servers do; ``status`` on the class."""

    status = 401

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization") or ""
        raw = auth.partition(" ")[2]
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {auth}. You sent {raw}.",
                                     "type": "invalid_request_error"}}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo_server():
    servers = []

    def start(status: int = 401) -> str:
        handler = type("Handler", (EchoAuth,), {"status": status})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(httpd)
        return f"127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("status", [401, 500])  # refused at once / retried, then an LLMError
def test_a_backend_echoing_the_bearer_key_is_relayed_redacted(echo_server, status):
    llm = make(f"http://{echo_server(status)}/v1", retries=1)
    with Trace(question="q").activate() as trace, step("gen"), pytest.raises(LLMError) as e:
        TracedLLM(llm).generate("Question: q")
    message = str(e.value)
    assert "Incorrect API key provided" in message and "Bearer ***" in message, message
    assert KEY not in message and KEY[3:12] not in message
    recorded = json.dumps(trace.to_dict())
    assert "Bearer ***" in recorded and KEY not in recorded  # the trace's error record too


def test_a_backend_echoing_url_credentials_is_relayed_redacted(echo_server):
    llm = make(f"http://alice:wonder-land-77@{echo_server()}/v1", api_key=None)
    with pytest.raises(LLMError) as e:
        llm.generate("Question: q")
    message = str(e.value)
    basic = base64.b64encode(b"alice:wonder-land-77").decode()
    assert "Basic ***" in message, message
    assert basic not in message and basic[:8] not in message and "wonder-land-77" not in message


def _with_credentials(url: str, userinfo: str) -> str:
    return url.replace("http://", f"http://{userinfo}@", 1)


def test_an_api_key_wins_over_url_credentials(fault_server):
    s = fault_server()
    assert make(_with_credentials(s.url, "alice:pw"), api_key=KEY).generate("Question: one").text == "one"
    assert [r["auth"] for r in s.requests] == [f"Bearer {KEY}"]


def test_url_credentials_are_sent_as_basic_without_a_key(fault_server):
    s = fault_server()
    make(_with_credentials(s.url, "alice:pw"), api_key=None).generate("Question: one")
    make(s.url, api_key=None).generate("Question: two")
    assert [r["auth"] for r in s.requests] == [f"Basic {base64.b64encode(b'alice:pw').decode()}", "Bearer EMPTY"]


# -- item 4: cancelling aborts the backend request in flight ----------------------------------------
class SilentServer:
    """Accepts HTTP requests, reads them and never answers: records when each connection was
    closed by the client (``closed``: seconds after the request arrived), for ``seconds`` at most."""

    def __init__(self, seconds: float = 10.0) -> None:
        self.seconds = seconds
        self.requests = 0
        self.closed: list[float] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self._sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        conn.settimeout(0.05)
        data, start = b"", None
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                chunk = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                chunk = b""
            if not chunk:  # the client closed the connection
                if start is not None:
                    self.closed.append(time.monotonic() - start)
                break
            data += chunk
            if start is None and b"\r\n\r\n" in data:
                start = time.monotonic()
                self.requests += 1
        conn.close()

    def close(self) -> None:
        self._stop.set()
        self._sock.close()


@pytest.fixture
def silent_server():
    servers: list[SilentServer] = []

    def start(**kw: Any) -> SilentServer:
        servers.append(SilentServer(**kw))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def cancel_after(seconds: float, fn: Callable[[], Any], event: threading.Event | None = None) -> tuple[Any, float]:
    """Run ``fn`` inside ``cancellable(event)`` in a thread, set the event after ``seconds``:
    (what it returned or raised, seconds from the event to its end)."""
    event = event or threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        with cancellable(event):
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                box["value"] = exc
        box["end"] = time.monotonic()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(seconds)
    set_at = time.monotonic()
    event.set()
    t.join(timeout=15)
    assert not t.is_alive(), "the call did not stop within 15 s of the cancellation"
    return box["value"], box["end"] - set_at


def test_cancelling_aborts_the_request_in_flight(silent_server):
    s = silent_server(seconds=10)
    llm = make(s.url, retries=3, timeout=30)
    result, took = cancel_after(0.3, lambda: llm.generate("Question: slow"))
    assert isinstance(result, Cancelled), result
    assert took < 1.0, took
    time.sleep(0.3)
    assert s.requests == 1 and len(s.closed) == 1 and s.closed[0] < 1.5, (s.requests, s.closed)  # not retried


def test_a_cancelled_call_is_not_cached(silent_server, fault_server, tmp_path):
    s = silent_server(seconds=10)
    cache = ResponseCache(tmp_path / "c")
    result, _ = cancel_after(0.3, lambda: CachedLLM(make(s.url, timeout=30), cache).generate("Question: slow"))
    assert isinstance(result, Cancelled) and len(cache) == 0
    healthy = fault_server()
    assert CachedLLM(make(healthy.url), cache).generate("Question: slow").text == "slow"  # a fresh call


def test_cancelling_aborts_a_reply_read_in_flight(fault_server):
    s = fault_server(faults={"trickle": 1.0}, trickle_seconds=0.2)  # headers at once, the body for a minute
    llm = make(s.url, retries=2, timeout=60)
    result, took = cancel_after(0.5, lambda: llm.generate("Question: trickle"))
    assert isinstance(result, Cancelled) and took < 1.0, (result, took)
    assert len(s.requests) == 1


def test_cancelling_ends_the_wait_between_retries(fault_server):
    s = fault_server(faults={"http500": 1.0})
    llm = make(s.url, retries=3, backoff=30)
    result, took = cancel_after(0.3, lambda: llm.generate("Question: q"))
    assert isinstance(result, Cancelled) and took < 1.0, (result, took)
    assert len(s.requests) == 1


def test_a_call_made_after_the_cancellation_sends_nothing(fault_server):
    s = fault_server()
    event = threading.Event()
    event.set()
    with cancellable(event), pytest.raises(Cancelled):
        make(s.url).generate("Question: q")
    assert s.requests == []


def test_cancelling_aborts_the_samples_sent_to_a_pool(silent_server):
    s = silent_server(seconds=10)
    llm = make(s.url, timeout=30, native_n=False, concurrency=3)  # n samples as 3 calls in a pool
    result, took = cancel_after(0.5, lambda: llm.generate("Question: q", n=3, temperature=1.0))
    assert isinstance(result, Cancelled) and took < 1.0, (result, took)
    time.sleep(0.3)
    assert s.requests == 3 and len(s.closed) == 3, (s.requests, s.closed)


def test_every_connection_of_the_client_is_tracked():
    import openai

    client = bounded_http_client(openai)
    assert track_connections(client) == 0  # already done by bounded_http_client, once
    pool = client._transport._pool
    assert type(pool._network_backend).__name__ == "_TrackedBackend"
    client.close()


def test_the_cancellation_signal_lives_below_the_backends_and_runtime_reexports_it():
    from hopqa import runtime

    assert runtime.Cancelled is Cancelled and runtime.cancellable is cancellable
    assert runtime.check_cancelled is cancel_module.check_cancelled
    assert runtime.current_cancel_event is current_cancel_event
    event = threading.Event()
    assert current_cancel_event() is None
    with cancellable(event):
        assert current_cancel_event() is event


# -- the embedded backend stops between tokens ----------------------------------------------------
def test_until_cancelled_stops_between_tokens():
    from hopqa.llm.llamacpp import until_cancelled

    event = threading.Event()
    produced: list[int] = []
    closed = []

    def tokens():
        try:
            for i in range(100):
                produced.append(i)
                yield i
        finally:
            closed.append(True)

    got = []
    with pytest.raises(Cancelled):
        for tok in until_cancelled(tokens(), event):
            got.append(tok)
            if tok == 4:
                event.set()
    assert got == [0, 1, 2, 3, 4] and produced == [0, 1, 2, 3, 4] and closed == [True]
    assert list(until_cancelled(iter(range(3)), None)) == [0, 1, 2]
    assert list(until_cancelled(iter(range(3)), threading.Event())) == [0, 1, 2]
    with pytest.raises(Cancelled):  # set before: not even the prompt is evaluated
        next(until_cancelled(tokens(), event))


@pytest.mark.slow
def test_cancelling_stops_the_embedded_model_between_tokens(smollm2):
    prompt = "Write a very long story, at least 3000 words, about a dragon who learns to bake bread."
    smollm2.generate(prompt, max_tokens=1)  # a cold model's first evaluation sets itself up: not a token
    result, took = cancel_after(0.5, lambda: smollm2.generate(prompt, max_tokens=3000))  # seconds of tokens uncancelled
    assert isinstance(result, Cancelled) and took < 1.0, (result, took)
    short = smollm2.generate(prompt, max_tokens=8)  # the model is usable and unchanged after it
    assert short.text and smollm2.generate(prompt, max_tokens=8).text == short.text


@pytest.mark.slow
def test_under_a_cancellation_signal_the_embedded_model_gives_the_same_numbers(smollm2):
    """The prompt evaluated block by block (to stop between blocks) gives what one evaluation gives."""
    prompt = "Passage: " + "The Pittsburgh Pirates play baseball in Pittsburgh. " * 30 + "\nQuestion: Where?\nAnswer:"
    other = "An unrelated prompt that fills the cache with something else entirely. " * 12
    plain = smollm2.generate(prompt, max_tokens=24)
    smollm2.generate(other, max_tokens=4)
    with cancellable(threading.Event()):
        signalled = smollm2.generate(prompt, max_tokens=24)
        scored = smollm2.loglikelihood(prompt, " Pittsburgh")
    smollm2.generate(other, max_tokens=4)
    assert signalled.text == plain.text
    assert scored.token_logprobs == smollm2.loglikelihood(prompt, " Pittsburgh").token_logprobs


def test_the_cache_still_answers_while_the_interpreter_exits(tmp_path):
    import subprocess
    import sys

    script = f"""
import threading, time
from hopqa.llm import CachedLLM, ResponseCache
from hopqa.llm.scripted import ScriptedLLM
llm = CachedLLM(ScriptedLLM(replies=lambda r: r.prompt.upper()), ResponseCache({str(tmp_path / 'c')!r}))
llm.generate("warm")
def late():  # a worker still answering after the main thread returned
    time.sleep(0.5)
    print(llm.generate("late").text, llm.generate("late").cached, flush=True)
threading.Thread(target=late).start()
"""
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["LATE", "True"], out.stderr[-2000:]
