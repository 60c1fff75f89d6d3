"""The OpenAI-compatible endpoints, asked through the official ``openai`` package: a live uvicorn
server in a thread with a scripted LLM (plain and streamed chats, models, errors), and one slow
test of ``hopqa serve`` itself on the embedded SmolLM2 model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import openai
import pytest
import uvicorn

from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.base import METHODS
from hopqa.server import ServiceSettings, create_app
from tests.test_server_api import QUESTION, Blocking, client, retriever, retriever_for

KEY = "test-key"


class Live:
    """A uvicorn server running ``create_app(settings)`` in a thread, on a free port of 127.0.0.1."""

    def __init__(self, **settings) -> None:
        llm = settings.pop("llm", None) or ScriptedLLM(replies=lambda request: "Stanley")
        app = create_app(ServiceSettings(llm=llm, retriever_for=retriever_for(retriever()), **settings))
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))  # the port is ours from now on: no race for it
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        end = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < end and self.thread.is_alive(), "the server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()

    def openai(self, key: str = KEY, **kw) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, **kw)


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    with Live(api_key=KEY) as server:
        yield server


def test_models_lists_every_method(live):
    ids = [m.id for m in live.openai().models.list()]
    assert ids == [f"hopqa/{name}" for name in sorted(METHODS)]
    assert live.openai().models.retrieve("hopqa/ircot").id == "hopqa/ircot"


def test_a_chat_answers_the_last_user_message_with_the_method(live):
    reply = live.openai().chat.completions.create(
        model="hopqa/retrieve-then-read",
        messages=[{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Who are you?"},
                  {"role": "assistant", "content": "A method."}, {"role": "user", "content": QUESTION}])
    assert reply.object == "chat.completion" and reply.model == "hopqa/retrieve-then-read"
    assert reply.choices[0].message.content == "Stanley" and reply.choices[0].finish_reason == "stop"
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens == 1
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    extra = reply.model_extra["hopqa"]
    assert set(extra) == {"trace", "usage", "passages", "hops", "error", "method"}
    assert extra["method"] == "retrieve-then-read" and extra["error"] is None
    assert extra["trace"]["inputs"]["question"] == QUESTION and [p["id"] for p in extra["passages"]] == ["a", "b"]


def test_a_bare_method_name_text_parts_and_hopqa_options(live):
    reply = live.openai().chat.completions.create(
        model="retrieve-then-read",
        messages=[{"role": "user", "content": [{"type": "text", "text": "What is the seat of the county"},
                                               {"type": "text", "text": "where Van Hook Township is?"}]}],
        extra_body={"hopqa": {"k": 1, "options": {"max_tokens": 8}}})
    extra = reply.model_extra["hopqa"]
    assert extra["trace"]["inputs"]["question"] == "What is the seat of the county where Van Hook Township is?"
    assert len(extra["passages"]) == 1 and extra["trace"]["inputs"]["config"]["max_tokens"] == 8


def test_a_streamed_chat_sends_the_role_the_answer_then_stop_with_the_extra(live):
    chunks = list(live.openai().chat.completions.create(
        model="hopqa/retrieve-then-read", messages=[{"role": "user", "content": QUESTION}], stream=True))
    assert all(c.object == "chat.completion.chunk" and c.model == "hopqa/retrieve-then-read" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Stanley"
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop" and all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert last.usage.prompt_tokens > 0 and last.model_extra["hopqa"]["trace"]["kind"] == "question"


def test_openai_errors_take_openais_shape(live):
    with pytest.raises(openai.NotFoundError) as missing:
        live.openai().chat.completions.create(model="hopqa/no-such", messages=[{"role": "user", "content": "Q?"}])
    error = missing.value.response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "model_not_found"
    assert "hopqa/ircot" in error["message"]
    with pytest.raises(openai.AuthenticationError):
        live.openai(key="wrong").models.list()
    with pytest.raises(openai.BadRequestError) as empty:
        live.openai().chat.completions.create(model="hopqa/direct", messages=[{"role": "user", "content": "  "}])
    assert "empty" in empty.value.response.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError) as no_user:
        live.openai().chat.completions.create(model="hopqa/direct", messages=[{"role": "system", "content": "Hi"}])
    assert "user message" in no_user.value.response.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError) as bad_option:
        live.openai().chat.completions.create(model="hopqa/direct", messages=[{"role": "user", "content": "Q?"}],
                                              extra_body={"hopqa": {"options": {"temprature": 1}}})
    assert "temprature" in bad_option.value.response.json()["error"]["message"]


def test_the_hopqa_api_answers_on_the_live_server_too(live):
    request = urllib.request.Request(f"{live.url}/v1/answer", method="POST",
                                     data=json.dumps({"question": QUESTION, "method": "direct"}).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.load(response)["answer"] == "Stanley"
    with urllib.request.urlopen(f"{live.url}/healthz", timeout=10) as response:
        assert json.load(response)["status"] == "ok"


def test_a_chat_timeout_is_504_and_in_a_stream_an_error_the_client_raises():
    blocking = Blocking()
    try:
        with Live(llm=blocking.llm, timeout=0.3) as server:
            chat = server.openai()
            with pytest.raises(openai.APIStatusError) as timed_out:
                chat.chat.completions.create(model="hopqa/direct", messages=[{"role": "user", "content": QUESTION}])
            assert timed_out.value.status_code == 504
            assert timed_out.value.response.json()["error"]["type"] == "timeout_error"
            blocking.release()  # the first request's thread ends; its slot frees
            blocking.event.clear()
            time.sleep(0.1)
            with pytest.raises(openai.APIError):
                for _ in chat.chat.completions.create(model="hopqa/direct", stream=True,
                                                      messages=[{"role": "user", "content": QUESTION}]):
                    pass
    finally:
        blocking.release()


def test_a_streamed_chat_over_the_test_client_ends_with_done():
    r = client().post("/v1/chat/completions", json={"model": "hopqa/direct", "stream": True,
                                                    "messages": [{"role": "user", "content": QUESTION}]})
    lines = [line for line in r.text.replace("\r\n", "\n").split("\n") if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]" and json.loads(lines[-2][6:])["choices"][0]["finish_reason"] == "stop"


# -- hopqa serve, for real ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """``hopqa serve ARGS`` in a subprocess on a free port, until its ``/healthz`` answers."""

    def __init__(self, *args: str, cwd, env: dict[str, str], wait: float = 60) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(Path(cwd) / "serve.log", "w+")  # noqa: SIM115 - the server's output, shown if it fails
        self.proc = subprocess.Popen([sys.executable, "-m", "hopqa.cli", "serve", *args, "--port", str(self.port)],
                                     cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.wait = wait

    def output(self) -> str:
        """What the server printed (all of it, once it has stopped)."""
        if self.log.closed:
            return self.printed
        self.log.seek(0)
        return self.log.read()

    def __enter__(self) -> Self:
        end = time.monotonic() + self.wait
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=5) as response:
                    self.health = json.load(response)
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > end:
                    self.__exit__()
                    raise AssertionError(f"hopqa serve did not start:\n{self.output()}") from None
                time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.printed = self.output()
        self.log.close()


def test_hopqa_serve_over_an_openai_compatible_backend(tmp_path):
    """The command itself (no model loaded: a fake OpenAI-compatible server answers the last word
    of the question): its key from $HOPQA_API_KEY, a --corpus indexed at start, the API and the
    OpenAI-compatible chat."""
    from tests.fault_server import FaultServer

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in retriever().passages.values()))
    fake = FaultServer()
    env = {**os.environ, "HOPQA_HOME": str(tmp_path / "home"), "HOPQA_API_KEY": KEY}
    try:
        with Serve("--llm", f"openai:fake@{fake.url}", "--corpus", str(corpus), "--no-cache", cwd=tmp_path,
                   env=env) as served:
            assert served.health == {"status": "ok"}  # a client without the key learns no more
            health = urllib.request.Request(f"{served.url}/healthz", headers={"Authorization": f"Bearer {KEY}"})
            with urllib.request.urlopen(health, timeout=10) as response:
                assert json.load(response)["llm"] == f"openai:fake@{fake.url}"
            chat = openai.OpenAI(base_url=f"{served.url}/v1", api_key=KEY, max_retries=0)
            reply = chat.chat.completions.create(model="hopqa/retrieve-then-read",
                                                 messages=[{"role": "user", "content": "Which is the seat of Mountrail"}])
            assert reply.choices[0].message.content == "Mountrail"
            assert reply.model_extra["hopqa"]["passages"][0]["title"] == "Stanley, North Dakota"  # BM25 over --corpus
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=f"{served.url}/v1", api_key="wrong", max_retries=0).models.list()
            runs = urllib.request.Request(f"{served.url}/v1/runs", headers={"Authorization": f"Bearer {KEY}"})
            with pytest.raises(urllib.error.HTTPError) as no_runs:
                urllib.request.urlopen(runs, timeout=10)
            assert no_runs.value.code == 404 and "--runs" in json.load(no_runs.value)["detail"]
        assert "key: required" in served.output() and KEY not in served.output()
    finally:
        fake.close()


@pytest.mark.slow
def test_hopqa_serve_answers_an_openai_client_with_the_embedded_model(hopqa_home, demo_index, tmp_path):
    env = {**os.environ, "HOPQA_HOME": str(hopqa_home)}
    env.pop("HOPQA_API_KEY", None)
    with Serve("--llm", "embedded:smollm2-135m", "--runs", str(tmp_path), cwd=tmp_path, env=env, wait=180) as served:
        assert served.health["llm"] == "embedded:smollm2-135m" and served.health["queue"]["max"] == 8
        chat = openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0, timeout=600)
        reply = chat.chat.completions.create(model="hopqa/retrieve-then-read",
                                             messages=[{"role": "user", "content": "Which county is Van Hook "
                                                                                   "Township in?"}])
        extra = reply.model_extra["hopqa"]
        assert extra["error"] is None and isinstance(reply.choices[0].message.content, str)
        assert extra["passages"] and reply.usage.prompt_tokens > 0 and extra["usage"]["llm_calls"] == 1
        assert any("Van Hook" in p["title"] for p in extra["passages"])  # the demo corpus's BM25 index
        streamed = list(chat.chat.completions.create(model="hopqa/direct", stream=True,
                                                     messages=[{"role": "user", "content": "Where is Paris?"}]))
        assert streamed[0].choices[0].delta.role == "assistant" and streamed[-1].choices[0].finish_reason == "stop"
        assert streamed[-1].model_extra["hopqa"]["error"] is None
