"""The service's jobs (issue 30, items 4, 7, 9, 12): a timeout, a client that leaves or
``DELETE /v1/jobs/{id}`` stops the work and frees its slot; a failure tells its kind, message and
an id, never a traceback; text that is not Unicode and non-finite numbers are 422 before any
work; an evaluation run killed before its end is shown as interrupted."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient

from hopqa.llm.scripted import ScriptedLLM
from hopqa.server import ServiceSettings, create_app
from tests.test_server_api import QUESTION, client, events, retriever, retriever_for, wait_until


class Counting:
    """A scripted LLM that never finishes Self-Ask by itself: every call is slow and asks one
    more follow-up, so only a cancellation ends a request early."""

    def __init__(self, delay: float = 0.15) -> None:
        self.llm = ScriptedLLM(replies=self._reply, delay=delay)
        self._asked = 0

    def _reply(self, request) -> str:
        if request.text().startswith("Answer the question using the passages"):
            return "Mountrail County"
        self._asked += 1  # a new follow-up each time: Self-Ask stops on a repeated one
        return f"Yes.\nFollow up: Which county is Van Hook Township number {self._asked} in?"

    @property
    def calls(self) -> int:
        return len(self.llm.requests)


SLOW = {"question": QUESTION, "method": "self-ask", "options": {"max_steps": 16}}


def pending(c: TestClient) -> int:
    return c.app.state.service.admission.pending


def settled(counting: Counting, seconds: float = 0.6) -> int:
    """The number of calls once no new one has started for ``seconds``."""
    before = -1
    while before != counting.calls:
        before = counting.calls
        time.sleep(seconds)
    return before


# -- item 4: timeout, DELETE, disconnect ----------------------------------------------------------
def test_a_timeout_cancels_the_work_frees_the_slot_and_records_the_job_as_cancelled():
    counting = Counting(delay=0.3)
    c = client(counting.llm, timeout=1.0, max_queue=2)
    r = c.post("/v1/answer", json=SLOW)
    assert r.status_code == 504 and "cancelled" in r.json()["detail"]
    at_timeout = counting.calls
    wait_until(lambda: pending(c) == 0, timeout=2)  # freed at the next call, not after 16 steps
    assert settled(counting) <= at_timeout + 1  # the call in flight at most
    jobs = c.get("/v1/jobs").json()["jobs"]
    assert jobs[0]["state"] == "cancelled" and jobs[0]["reason"] == "timeout"
    record = c.get(f"/v1/jobs/{jobs[0]['id']}").json()
    assert record["answer"]["cancelled"] is True and "Cancelled" in record["answer"]["trace"]["error"]
    again = c.post("/v1/answer", json={"question": QUESTION, "method": "direct"})  # the queue is free
    assert again.status_code == 200 and again.json()["answer"]


def test_a_chat_completion_that_times_out_is_cancelled_too():
    counting = Counting(delay=0.3)
    c = client(counting.llm, timeout=1.0)
    r = c.post("/v1/chat/completions", json={"model": "hopqa/self-ask", "messages": [{"role": "user", "content": QUESTION}],
                                             "hopqa": {"options": {"max_steps": 16}}})
    assert r.status_code == 504 and r.json()["error"]["type"] == "timeout_error"
    wait_until(lambda: pending(c) == 0, timeout=2)
    assert settled(counting) < 8


def test_delete_cancels_a_running_job_and_its_waiting_request_gets_409():
    counting = Counting()
    c = client(counting.llm, timeout=30)
    got: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: got.setdefault("r", c.post("/v1/answer", json=SLOW)))
    thread.start()
    wait_until(lambda: c.get("/v1/jobs").json()["jobs"] and counting.calls >= 1)
    job = c.get("/v1/jobs").json()["jobs"][0]
    assert job["state"] == "running" and job["method"] == "self-ask"
    r = c.delete(f"/v1/jobs/{job['id']}")
    assert r.status_code == 202 and r.json()["id"] == job["id"]
    thread.join(5)
    assert got["r"].status_code == 409 and "DELETE" in got["r"].json()["detail"]
    assert settled(counting) < 8 and pending(c) == 0
    assert c.get(f"/v1/jobs/{job['id']}").json()["state"] == "cancelled"
    assert c.delete(f"/v1/jobs/{job['id']}").status_code == 409  # it has ended
    assert c.delete("/v1/jobs/job-nope").status_code == 404


def test_delete_ends_a_stream_with_an_error_event():
    counting = Counting()
    c = client(counting.llm, timeout=30)
    with c.stream("POST", "/v1/answer", json={**SLOW, "stream": True}) as r:
        job_id = r.headers["x-hopqa-job"]
        lines = r.iter_lines()
        assert next(lines) == "event: job"
        assert c.delete(f"/v1/jobs/{job_id}").status_code == 202
        got = events("\n".join([*lines]))
    assert got[-1][0] == "error" and got[-1][1]["status"] == 409 and "answer" not in [n for n, _ in got]
    wait_until(lambda: pending(c) == 0, timeout=2)


def test_a_job_waiting_for_its_turn_is_skipped_when_deleted():
    counting = Counting()
    c = client(counting.llm, timeout=30, max_queue=3)
    first = threading.Thread(target=lambda: c.post("/v1/answer", json=SLOW))
    first.start()
    wait_until(lambda: counting.calls >= 1)
    got: dict[str, Any] = {}
    second = threading.Thread(target=lambda: got.setdefault("r", c.post("/v1/answer", json=SLOW)))
    second.start()
    wait_until(lambda: any(j["state"] == "waiting" for j in c.get("/v1/jobs").json()["jobs"]))
    jobs = {j["state"]: j["id"] for j in c.get("/v1/jobs").json()["jobs"]}
    assert c.delete(f"/v1/jobs/{jobs['waiting']}").status_code == 202
    assert c.delete(f"/v1/jobs/{jobs['running']}").status_code == 202
    second.join(5)
    first.join(5)
    assert got["r"].status_code == 409
    wait_until(lambda: pending(c) == 0, timeout=2)


@pytest.fixture
def live():
    """The service on a real uvicorn server on a free port (a client can really leave)."""
    counting = Counting()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    app = create_app(ServiceSettings(llm=counting.llm, retriever_for=retriever_for(retriever()), timeout=30))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started)
    yield counting, app, f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def _raw_post(base: str, body: dict) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /v1/answer HTTP/1.1\r\nHost: " + f"{host}:{port}".encode() + b"\r\nContent-Type: "
                 b"application/json\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return sock


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_leaves_cancels_its_job(live, stream):
    counting, app, base = live
    sock = _raw_post(base, {**SLOW, "stream": stream})
    wait_until(lambda: counting.calls >= 2)
    sock.close()
    admission = app.state.service.admission
    wait_until(lambda: admission.pending == 0, timeout=3)
    assert settled(counting) < 8
    with urllib.request.urlopen(f"{base}/v1/jobs", timeout=10) as r:
        jobs = json.load(r)["jobs"]
    assert jobs[0]["state"] == "cancelled"


# -- item 7: errors without tracebacks --------------------------------------------------------
def _boom(request):
    raise RuntimeError("the backend fell over in /srv/hopqa/secret.py")


def test_a_method_failure_tells_kind_message_and_id_and_logs_the_traceback(caplog):
    c = client(ScriptedLLM(replies=_boom))
    with caplog.at_level(logging.ERROR, logger="hopqa.server"):
        r = c.post("/v1/answer", json={"question": QUESTION, "method": "direct"})
        streamed = c.post("/v1/answer", json={"question": QUESTION, "method": "direct", "stream": True})
    assert r.status_code == 200
    body = r.json()
    assert "Traceback" not in r.text and 'File "' not in r.text and "Traceback" not in streamed.text
    detail = body["error_detail"]
    assert detail["kind"] == "RuntimeError" and "fell over" in detail["message"] and detail["id"].startswith("err-")
    events_ = [e for e in body["trace"]["events"] if e["message"] == "traceback"]
    assert events_ and events_[0] == {"message": "traceback", "error_id": detail["id"]}
    logged = [rec for rec in caplog.records if detail["id"] in rec.getMessage()]
    assert logged and "Traceback" in logged[0].getMessage()


def test_an_unexpected_failure_is_a_500_with_an_id_not_a_traceback(caplog):
    def broken(kind):
        raise RuntimeError("cannot open /srv/hopqa/index")

    c = TestClient(create_app(ServiceSettings(llm=ScriptedLLM(replies=["x"]), retriever_for=broken,
                                              allowed_hosts=("testserver",))))
    with caplog.at_level(logging.ERROR, logger="hopqa.server"):
        r = c.post("/v1/answer", json={"question": QUESTION, "method": "retrieve-then-read"})
    assert r.status_code == 500 and "Traceback" not in r.text
    assert "RuntimeError" in r.json()["detail"] and "error id err-" in r.json()["detail"]
    eid = r.json()["detail"].split("error id ")[1].split(";")[0]
    assert any(eid in rec.getMessage() and rec.exc_info for rec in caplog.records)


def test_a_stream_that_fails_anywhere_ends_with_an_error_event(monkeypatch):
    c = client()
    service = c.app.state.service

    async def steps(job):
        yield '{"event": "open"}'
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(service, "steps", steps)
    got = events(c.post("/v1/answer", json={"question": QUESTION, "method": "direct", "stream": True}).text)
    assert got[-1][0] == "error" and got[-1][1]["status"] == 500 and got[-1][1]["id"].startswith("err-")


# -- item 9: odd input ------------------------------------------------------------------------------
BROKEN = [
    '{"question": "Who \\ud800 wrote it?", "method": "direct"}',
    '{"question": "Who wrote it?", "method": "direct", "options": {"max_tokens\\udfff": 3}}',
    '{"question": "Who wrote it?", "k": 1e400}',
    '{"question": "Who wrote it?", "method": "retrieve-then-read", "options": {"k": 1e400}}',
]


@pytest.mark.parametrize("body", BROKEN)
@pytest.mark.parametrize("stream", [False, True])
def test_text_that_is_not_unicode_and_infinite_numbers_are_422_before_any_work(body, stream):
    llm = ScriptedLLM(replies=lambda request: "Stanley")
    c = client(llm)
    if stream:
        body = body[:-1] + ', "stream": true}'
    r = c.post("/v1/answer", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and llm.requests == []
    json.loads(r.text)  # valid JSON, whatever it quotes back


def test_the_chat_endpoint_refuses_a_lone_surrogate_with_400():
    llm = ScriptedLLM(replies=lambda request: "Stanley")
    body = '{"model": "hopqa/direct", "messages": [{"role": "user", "content": "Who \\udc00?"}]}'
    r = client(llm).post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error" and llm.requests == []


def test_a_model_reply_with_broken_unicode_is_answered_as_valid_json():
    r = client(ScriptedLLM(replies=lambda request: "Stan\ud800ley")).post(
        "/v1/answer", json={"question": QUESTION, "method": "direct"})
    assert r.status_code == 200 and r.json()["answer"] == "Stan\ufffdley"


# -- item 12: a killed evaluation run --------------------------------------------------------------
def test_a_run_killed_before_its_end_is_shown_as_interrupted(tmp_path):
    import fcntl

    from hopqa.build import build_method
    from hopqa.evaluation.runner import evaluate
    from tests.test_server_api import EXAMPLES, _eval_llm

    run = tmp_path / "runs" / "musique-dev" / "direct"
    evaluate(build_method("direct", _eval_llm()), EXAMPLES[:2], run, progress=False)
    c = client(runs_dir=tmp_path / "runs")

    def state() -> str:
        listed = c.get("/v1/runs").json()["runs"][0]
        assert c.get("/v1/runs/musique-dev/direct").json()["summary"]["state"] == listed["state"]
        return listed["state"]

    assert state() == "complete"
    with open(run / ".lock", "a") as lock:  # a run going on holds the lock
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        assert state() == "running"
    (run / "summary.json").unlink()  # killed before its end: no end marker
    assert state() == "interrupted"
    evaluate(build_method("direct", _eval_llm()), EXAMPLES[:2], run, progress=False)
    assert state() == "complete"
    later = (run / "summary.json").stat().st_mtime_ns + 10**9
    with open(run / "results.jsonl", "a") as f:  # resumed with more questions, then killed
        f.write(json.dumps(json.loads(Path(run / "results.jsonl").read_text().splitlines()[0])) + "\n")
    os.utime(run / "results.jsonl", ns=(later, later))
    assert state() == "interrupted"


def test_a_run_records_traceback_stays_on_the_server(tmp_path):
    from hopqa.build import build_method
    from hopqa.evaluation.runner import evaluate
    from tests.test_server_api import EXAMPLES

    run = tmp_path / "runs" / "musique-dev" / "direct"
    evaluate(build_method("direct", ScriptedLLM(replies=_boom)), EXAMPLES[:1], run, progress=False)
    assert "Traceback" in (run / "results.jsonl").read_text()  # the operator keeps it
    r = client(runs_dir=tmp_path / "runs").get(f"/v1/runs/musique-dev/direct?id={EXAMPLES[0].id}")
    assert r.status_code == 200 and "Traceback" not in r.text and "results.jsonl on the server" in r.text


# -- on the real embedded model and the demo corpus -------------------------------------------------
@pytest.mark.slow
def test_a_timeout_stops_the_embedded_model_mid_answer_and_frees_the_slot(smollm2, demo_index, hopqa_home):
    def search(kind):
        if kind in (None, "bm25"):
            return demo_index
        raise ValueError(f"no {kind} index in this test")

    settings = ServiceSettings(llm=smollm2, retriever_for=search, home=hopqa_home, timeout=1.0,
                               allowed_hosts=("testserver",))
    c = TestClient(create_app(settings))
    question = "What team was Anna Benson's husband on, and in which city does that team play?"
    r = c.post("/v1/answer", json={"question": question, "method": "ircot", "k": 4, "options": {"max_steps": 8}})
    assert r.status_code == 504
    stopped = time.monotonic()
    wait_until(lambda: pending(c) == 0, timeout=5)
    took = time.monotonic() - stopped  # IRCoT's 8 steps on SmolLM2 take far longer than this
    job = c.get("/v1/jobs").json()["jobs"][0]
    assert job["state"] == "cancelled" and job["reason"] == "timeout" and took < 3.0
    answer = c.get(f"/v1/jobs/{job['id']}").json()["answer"]
    assert answer is None or (answer["cancelled"] and answer["usage"]["llm_calls"] < 8)
    settings.timeout = 120.0
    ok = c.post("/v1/answer", json={"question": "Who is Anna Benson's husband?", "method": "direct"})
    assert ok.status_code == 200 and ok.json()["answer"]  # the model is usable after the abort


# -- item 5: resources stay flat -----------------------------------------------------------------------
def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
def test_descriptors_stay_flat_and_jobs_bounded_over_a_thousand_requests(tmp_path):
    from hopqa.llm import CachedLLM, ResponseCache

    llm = CachedLLM(ScriptedLLM(replies=lambda request: "Stanley"), ResponseCache(tmp_path / "cache"))
    c = client(llm)
    for i in range(50):  # warm: the app, the cache's connection, the event loop's threads
        c.post("/v1/answer", json={"question": f"Warm question {i}?", "method": "direct"})
    before = _open_files()
    for i in range(1000):  # each a job on a new thread, each a new cache entry
        r = c.post("/v1/answer", json={"question": f"Which county is place {i} in?", "method": "direct"})
        assert r.status_code == 200
    assert _open_files() - before < 10
    assert len(c.get("/v1/jobs").json()["jobs"]) <= 64  # the last ones only
    assert len(c.app.state.service._active) == 0
