"""The service's guards around the app (issue 30, items 2, 6, 10, 11): the ``Host`` it answers to,
slow and too many clients (a real uvicorn on a free port, raw sockets), repeated log lines,
security headers, the local ``/docs``, the API key's length, what ``/healthz`` tells a stranger."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient

from hopqa.llm.scripted import ScriptedLLM
from hopqa.server import ServiceSettings, create_app
from hopqa.server.app import STATIC_DIR
from hopqa.server.connections import (
    GuardedH11Protocol,
    RepeatFilter,
    logging_config,
    uvicorn_options,
)
from hopqa.server.headers import PAGE_CSP, host_name, trusted_hosts
from hopqa.types import Passage
from tests.scripted_retriever import ScriptedRetriever
from tests.server_world import self_ask_llm
from tests.test_server_page import browser  # noqa: F401 - the fixture: headless Chromium (skipped without one)

KEY = "k" * 32
QUESTION = "What is the seat of the county where Van Hook Township is located?"


def settings(llm=None, **kw) -> ServiceSettings:
    retriever = ScriptedRetriever({}, {"a": Passage("a", "Stanley", "Stanley is a city.")})
    return ServiceSettings(llm=llm if llm is not None else ScriptedLLM(replies=lambda request: "Stanley"),
                           retriever_for=lambda kind: retriever, **kw)


def client(base_url: str = "http://127.0.0.1:8000", **kw) -> TestClient:
    return TestClient(create_app(settings(**kw)), base_url=base_url)


# -- item 2: the Host header ---------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1", "127.0.0.1:8000", "[::1]",
                                  "[::1]:8000", "LOCALHOST:80"])
def test_a_loopback_service_answers_to_its_loopback_names(host):
    c = client()
    assert c.get("/healthz", headers={"Host": host}).status_code == 200
    assert c.get("/v1/runs", headers={"Host": host}).status_code != 400


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "localhost.evil.example", "127.0.0.1.nip.io",
                                  "localhost@evil.example", "127.0.0.1:x", "", "[::1", "testserver"])
def test_another_host_is_refused_everywhere_before_any_work(host):
    asked: list[str] = []
    llm = ScriptedLLM(replies=lambda request: asked.append(request.text()) or "Stanley")
    c = client(llm=llm)
    h = {"Host": host}
    for r in (c.get("/healthz", headers=h), c.get("/", headers=h), c.get("/static/app.js", headers=h),
              c.get("/docs", headers=h), c.get("/openapi.json", headers=h), c.get("/v1/runs", headers=h),
              c.post("/v1/answer", json={"question": QUESTION, "method": "direct"}, headers=h)):
        assert r.status_code == 400, (host, r.request.url)
        assert "--allowed-host" in r.json()["detail"]
        assert r.headers["x-frame-options"] == "DENY"
    chat = c.post("/v1/chat/completions", json={"model": "direct", "messages": [{"role": "user", "content": "hi"}]},
                  headers=h)
    assert chat.status_code == 400 and chat.json()["error"]["code"] == "invalid_host"
    assert asked == []


def test_allowed_hosts_add_names_and_subdomains():
    c = client(allowed_hosts=("hopqa.example.org", "*.lab.example"))
    for host in ("hopqa.example.org", "HOPQA.example.org:443", "gpu1.lab.example", "127.0.0.1"):
        assert c.get("/healthz", headers={"Host": host}).status_code == 200, host
    for host in ("example.org", "lab.example.evil", "evil.example", "xlab.example"):
        assert c.get("/healthz", headers={"Host": host}).status_code == 400, host
    assert client(allowed_hosts=("*",)).get("/healthz", headers={"Host": "any.example"}).status_code == 200


def test_the_hosts_follow_the_bound_address():
    assert set(trusted_hosts("127.0.0.1")) == {"localhost", "127.0.0.1", "::1"}
    assert "127.0.0.2" in trusted_hosts("127.0.0.2") and "::1" in trusted_hosts("[::1]")
    assert trusted_hosts("192.168.1.5") == ("192.168.1.5",)
    wildcard = client(host="0.0.0.0", api_key=KEY)  # every address: any address, names only when listed
    for host in ("192.168.1.5:8000", "[fe80::1]:8000", "10.0.0.7", "localhost"):
        assert wildcard.get("/healthz", headers={"Host": host}).status_code == 200, host
    assert wildcard.get("/healthz", headers={"Host": "rebind.evil.example"}).status_code == 400
    with pytest.raises(ValueError, match="wildcard"):
        trusted_hosts("127.0.0.1", ["evil.*"])
    assert host_name("[::1]:80") == "::1" and host_name("a.example:99999") is None and host_name(None) is None


# -- item 10: security headers, the docs -----------------------------------------------------------------
def test_every_response_carries_the_security_headers():
    c = client(api_key=KEY)
    for r in (c.get("/"), c.get("/static/app.js"), c.get("/healthz"), c.get("/v1/methods"), c.get("/nope"),
              c.get("/v1/methods", headers={"Authorization": f"Bearer {KEY}"}), c.get("/docs")):
        assert r.headers["x-content-type-options"] == "nosniff", r.request.url
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert c.get("/healthz").headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"


def test_the_page_policy_is_its_meta_policy_as_a_header_with_frame_ancestors():
    meta = re.search(r'http-equiv="Content-Security-Policy"\s+content="([^"]+)"',
                     (STATIC_DIR / "index.html").read_text()).group(1)
    header = client().get("/").headers["content-security-policy"]
    assert header == PAGE_CSP
    directives = {d.strip() for d in header.split(";")}
    assert {d.strip() for d in meta.split(";")} <= directives and "frame-ancestors 'none'" in directives


def test_the_docs_load_nothing_from_another_site():
    c = client()
    page = c.get("/docs")
    assert page.status_code == 200 and "https://" not in page.text and "http://" not in page.text
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert len(assets) == 3 and all(a.startswith("/docs/assets/") for a in assets)
    for src in assets:
        assert c.get(src).status_code == 200, src
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert c.get("/redoc").status_code == 404  # ReDoc's bundle fetches its logo from a CDN
    off = client(docs=False)
    assert off.get("/docs").status_code == 404 and off.get("/docs/assets/swagger-ui.css").status_code == 404
    assert "/v1/answer" in off.get("/openapi.json").json()["paths"]


# -- item 11: /healthz, the key's length ----------------------------------------------------------------
def test_healthz_tells_a_client_without_the_key_only_that_it_is_up():
    c = client(api_key=KEY, llm_name="openai:gpt@http://10.1.2.3:8080/v1", max_queue=3)
    assert c.get("/healthz").json() == {"status": "ok"}
    assert c.get("/healthz", headers={"Authorization": "Bearer wrong"}).json() == {"status": "ok"}
    full = c.get("/healthz", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert full == {"status": "ok", "llm": "openai:gpt@http://10.1.2.3:8080/v1",
                    "queue": {"pending": 0, "running": 0, "max": 3}}
    c.cookies.set("hopqa_key", KEY)
    assert c.get("/healthz").json()["llm"] == full["llm"]
    assert c.get("/healthz", headers={"Sec-Fetch-Site": "cross-site"}).json() == {"status": "ok"}
    assert client().get("/healthz").json()["llm"] == "scripted"  # no key set: all of it


@pytest.fixture
def fake_serve(monkeypatch, tmp_path):
    """``hopqa serve`` up to ``uvicorn.run``, which records its arguments instead of serving."""
    import uvicorn

    from hopqa import cli

    calls: list[tuple[object, dict]] = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOPQA_API_KEY", raising=False)
    monkeypatch.setattr(cli, "_load_llm", lambda *a, **k: ScriptedLLM(replies=lambda request: "x"))
    monkeypatch.setattr(cli, "_retriever", lambda args: ScriptedRetriever({}, {}))
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))

    def serve(*args: str) -> int:
        return cli.main(["serve", "--llm", "openai:m@http://127.0.0.1:9/v1", "--home", str(tmp_path), *args])

    serve.calls = calls  # type: ignore[attr-defined]
    return serve


def test_a_short_api_key_draws_a_warning(fake_serve, capsys, monkeypatch):
    assert fake_serve("--api-key", "x") == 0
    err = capsys.readouterr().err
    assert "1 characters, under 16" in err and "secrets.token_urlsafe(32)" in err and " x " not in err
    monkeypatch.setenv("HOPQA_API_KEY", "short-key")
    assert fake_serve() == 0
    assert "9 characters, under 16" in capsys.readouterr().err
    assert fake_serve("--api-key", KEY) == 0
    assert "warning" not in capsys.readouterr().err


def test_serve_runs_uvicorn_with_a_connection_cap_and_timeouts(fake_serve, capsys):
    assert fake_serve("--max-queue", "3", "--allowed-host", "hopqa.example.org", "--no-docs") == 0
    app, kw = fake_serve.calls[-1]
    assert kw["limit_concurrency"] == 3 * 4 + 16 and kw["timeout_keep_alive"] == 5
    assert issubclass(kw["http"], GuardedH11Protocol) and kw["http"].max_connections == 28
    assert kw["http"].read_timeout == 10
    assert "repeats" in kw["log_config"]["filters"]
    c = TestClient(app, base_url="http://hopqa.example.org")
    assert c.get("/healthz").status_code == 200 and c.get("/docs").status_code == 404
    assert c.get("/healthz", headers={"Host": "evil.example"}).status_code == 400
    assert fake_serve("--max-connections", "7", "--read-timeout", "2.5") == 0
    _, kw = fake_serve.calls[-1]
    assert kw["limit_concurrency"] == 7 and kw["http"].max_connections == 7 and kw["http"].read_timeout == 2.5
    assert fake_serve("--allowed-host", "evil.*") == 2
    assert "--allowed-host" in capsys.readouterr().err


# -- item 6: slow and too many clients, on a real server ---------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def live(app_settings: ServiceSettings, max_connections: int, read_timeout: float) -> Iterator[tuple[int, threading.Thread]]:
    """``create_app`` on uvicorn with ``uvicorn_options`` (the test keeps its own logging)."""
    import uvicorn

    port = _free_port()
    options = {**uvicorn_options(max_connections, read_timeout), "log_config": None}
    server = uvicorn.Server(uvicorn.Config(create_app(app_settings), host="127.0.0.1", port=port,
                                           log_level="critical", lifespan="off", **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < end and thread.is_alive(), "the test server did not start"
        time.sleep(0.02)
    try:
        yield port, thread
    finally:
        server.should_exit = True
        thread.join(10)


def _connect(port: int, data: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if data:
        s.sendall(data)
    return s


def _read_all(s: socket.socket, timeout: float) -> bytes:
    """What the server sends until it closes the connection (or ``timeout`` passes)."""
    s.settimeout(timeout)
    got = b""
    try:
        while chunk := s.recv(65536):
            got += chunk
    except TimeoutError:
        return got + b"<still open>"
    except ConnectionResetError:
        pass
    return got


def _get(port: int, path: str = "/healthz") -> bytes:
    with _connect(port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()) as s:
        return _read_all(s, 10)


def test_too_many_slow_connections_get_503_and_the_service_recovers():
    with live(settings(), max_connections=6, read_timeout=1.5) as (port, thread):
        slow = [_connect(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ") for _ in range(20)]
        time.sleep(0.3)
        refused = 0
        for s in slow:
            s.settimeout(0.05)
            try:
                if s.recv(4096).startswith(b"HTTP/1.1 503"):
                    refused += 1
            except TimeoutError:
                pass
        assert refused >= 20 - 6  # beyond the cap: 503 at once, the descriptor freed
        assert _get(port).startswith(b"HTTP/1.1 503")  # the cap holds for everyone, the process lives
        time.sleep(2.0)  # the slow ones are closed after read_timeout
        assert _get(port).startswith(b"HTTP/1.1 200") and thread.is_alive()
        for s in slow:
            s.close()


def test_a_half_sent_request_is_closed_after_the_read_timeout():
    with live(settings(), max_connections=50, read_timeout=1.0) as (port, _):
        idle = _connect(port)  # says nothing at all
        drip = _connect(port)
        body = _connect(port, b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 100\r\n\r\n{\"question\": ")
        start = time.monotonic()
        for byte in b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Drip: abcdefghijklmnop":  # a byte at a time
            try:
                drip.send(bytes([byte]))
            except OSError:
                break
            if time.monotonic() - start > 4:
                break
            time.sleep(0.1)
        assert time.monotonic() - start < 3, "the dripping client was never cut off"
        for s in (idle, drip, body):
            got = _read_all(s, 5)
            assert b"<still open>" not in got and (got == b"" or got.startswith(b"HTTP/1.1 408")), got
            s.close()
        assert _get(port).startswith(b"HTTP/1.1 200")


def test_a_request_received_whole_may_take_longer_than_the_read_timeout():
    with live(settings(llm=self_ask_llm(delay=0.4)), max_connections=50, read_timeout=0.5) as (port, _):
        body = f'{{"question": "{QUESTION}", "method": "self-ask"}}'.encode()
        with _connect(port, b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body) as s:
            start = time.monotonic()
            got = _read_all(s, 30)
        assert got.startswith(b"HTTP/1.1 200") and b"Stanley" in got and time.monotonic() - start > 0.5


# -- item 6: repeated log lines ----------------------------------------------------------------------
class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _logger(name: str, repeat: RepeatFilter) -> tuple[logging.Logger, _Collect]:
    handler = _Collect()
    handler.addFilter(repeat)
    logger = logging.getLogger(f"test-hardening.{name}")
    logger.propagate = False
    logger.handlers = [handler]
    logger.setLevel(logging.INFO)
    return logger, handler


def test_repeated_log_lines_are_suppressed_and_counted():
    repeat = RepeatFilter(burst=3, interval=0.5)
    logger, out = _logger("errors", repeat)
    for _ in range(1000):
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            logger.exception("socket.accept() out of system resource")
        logger.warning("Exceeded concurrency limit.")
    logger.warning("something else")
    assert out.lines.count("socket.accept() out of system resource") == 3
    assert out.lines.count("Exceeded concurrency limit.") == 3 and "something else" in out.lines
    time.sleep(0.6)
    logger.warning("Exceeded concurrency limit.")
    assert out.lines[-1] == "Exceeded concurrency limit. [997 more like this were suppressed in the last 0.5 s]"


def test_access_lines_of_errors_are_suppressed_those_of_answers_never():
    repeat = RepeatFilter(burst=2, interval=60)
    access = logging.getLogger("uvicorn.access")
    handler = _Collect()
    handler.addFilter(repeat)
    for i in range(50):
        for status in (200, 503):
            record = access.makeRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                                       (f"127.0.0.1:{40000 + i}", "GET", "/healthz", "1.1", status), None)
            handler.handle(record)
    assert sum(line.endswith(" 200") for line in handler.lines) == 50
    assert sum(line.endswith(" 503") for line in handler.lines) == 2


def test_serve_logging_filters_uvicorn_asyncio_and_hopqa():
    config = logging_config()
    assert all(h["filters"] == ["repeats"] for h in config["handlers"].values())
    for name in ("asyncio", "hopqa"):
        assert config["loggers"][name]["handlers"] == ["default"]
    assert config["loggers"]["uvicorn"]["handlers"] == ["default"]


# -- item 10: the docs in a browser, under their policy ------------------------------------------------
def test_the_docs_render_offline_under_their_policy(browser):  # noqa: F811 - the imported fixture
    from tests.test_server_page import css, page_errors, serve, wait

    with serve(settings()) as url:
        browser.get(url + "docs")
        wait(browser, lambda d: any("/v1/answer" in e.text for e in css(d, ".opblock-summary-path")),
             message="/docs did not render")
        assert page_errors(browser) == []

