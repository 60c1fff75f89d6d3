"""The OpenAI-compatible backend against local HTTP servers that misbehave on purpose."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hopqa.llm.base import LLMError, UnsupportedCapability
from hopqa.llm.openai import OpenAICompatibleLLM, OpenAIConfig


def chat_response(text: str, n: int = 1) -> dict:
    return {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": i, "message": {"role": "assistant", "content": f"{text}{i if n > 1 else ''}"},
                     "finish_reason": "stop"} for i in range(n)],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    }


class Server:
    """A local server whose behaviour is a list of actions, one per request."""

    def __init__(self, actions):
        self.actions = list(actions)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                action = outer.actions.pop(0) if outer.actions else ("ok", "fine")
                kind = action[0]
                if kind == "sleep":
                    time.sleep(action[1])
                    kind, action = "ok", ("ok", "late")
                if kind == "status":
                    payload = json.dumps({"error": {"message": "boom"}}).encode()
                    self.send_response(action[1])
                else:
                    payload = json.dumps(chat_response(action[1], body.get("n", 1))).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(request):
    s = Server(request.param)
    yield s
    s.close()


def make(url: str, **opts) -> OpenAICompatibleLLM:
    cfg = OpenAIConfig(model="m", base_url=url, api_key="sk-secret-key", backoff=0.01, **opts)
    return OpenAICompatibleLLM(cfg)


@pytest.mark.parametrize("server", [[("status", 500), ("status", 503), ("ok", "hello")]], indirect=True)
def test_retries_transient_errors_then_succeeds(server):
    llm = make(server.url, retries=3)
    gen = llm.generate("q")
    assert gen.text == "hello" and gen.prompt_tokens == 7 and gen.completion_tokens == 2
    assert len(server.requests) == 3
    assert server.requests[0]["auth"] == "Bearer sk-secret-key"


@pytest.mark.parametrize("server", [[("status", 500)] * 10], indirect=True)
def test_clear_error_after_last_retry(server):
    llm = make(server.url, retries=2)
    with pytest.raises(LLMError) as e:
        llm.generate("q")
    msg = str(e.value)
    assert "failed 3 times" in msg and "openai:m@" in msg and "sk-secret-key" not in msg
    assert len(server.requests) == 3


@pytest.mark.parametrize("server", [[("status", 400)]], indirect=True)
def test_client_errors_are_not_retried(server):
    llm = make(server.url, retries=3)
    with pytest.raises(LLMError) as e:
        llm.generate("q")
    assert "HTTP 400" in str(e.value) and len(server.requests) == 1


@pytest.mark.parametrize("server", [[("sleep", 1.5), ("ok", "quick")]], indirect=True)
def test_timeout_is_retried(server):
    llm = make(server.url, retries=1, timeout=0.3)
    assert llm.generate("q").text == "quick"


@pytest.mark.parametrize("server", [[]], indirect=True)
def test_native_n_and_request_fields(server):
    llm = make(server.url)
    gen = llm.generate("q", n=3, temperature=0.7, stop=["\n"], max_tokens=9, seed=4)
    assert gen.texts == ["fine0", "fine1", "fine2"]
    body = server.requests[0]["body"]
    assert body["n"] == 3 and body["temperature"] == 0.7 and body["stop"] == ["\n"] and body["max_tokens"] == 9


@pytest.mark.parametrize("server", [[]], indirect=True)
def test_loglikelihood_needs_to_be_enabled(server):
    llm = make(server.url)
    with pytest.raises(UnsupportedCapability) as e:
        llm.loglikelihood("a", "b")
    assert "loglikelihood=echo" in str(e.value)


def test_spec_parsing():
    cfg = OpenAIConfig.parse("qwen@http://localhost:8000/v1?concurrency=3&retries=1&loglikelihood=echo&n=split")
    assert (cfg.model, cfg.base_url, cfg.concurrency, cfg.retries, cfg.loglikelihood, cfg.native_n) == (
        "qwen", "http://localhost:8000/v1", 3, 1, True, False)
    with pytest.raises(ValueError):
        OpenAIConfig.parse("m@http://x?bogus=1")
    with pytest.raises(ValueError):
        OpenAIConfig.parse("@http://x")


def test_unreachable_server_gives_clear_error():
    llm = make("http://127.0.0.1:9/v1", retries=1, timeout=1)
    with pytest.raises(LLMError) as e:
        llm.generate("q")
    assert "check that it is running" in str(e.value)
