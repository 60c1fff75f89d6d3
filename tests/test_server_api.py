"""The HTTP service's own API (``hopqa.server``) with FastAPI's TestClient, a scripted LLM and a
scripted retriever: every endpoint, every refusal, the queue, the timeout, the stream's order."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hopqa.evaluation.runner import evaluate
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.base import METHODS
from hopqa.server import ServiceSettings, create_app
from hopqa.server.app import STATIC_DIR
from hopqa.types import Example, Passage
from tests.scripted_retriever import ScriptedRetriever
from tests.server_world import self_ask_llm

PASSAGES = {"a": Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County, North Dakota."),
            "b": Passage("b", "Stanley, North Dakota", "Stanley is a city in and the county seat of Mountrail County.")}
QUESTION = "What is the seat of the county where Van Hook Township is located?"
KEY = "s3cret-key"


class EveryQuery(dict):
    """A ScriptedRetriever table that answers every query with both passages."""

    def get(self, key, default=None):
        return "ab"


def retriever() -> ScriptedRetriever:
    return ScriptedRetriever(EveryQuery(), PASSAGES)


def retriever_for(search: ScriptedRetriever):
    def get(kind):
        if kind in (None, "bm25"):
            return search
        raise ValueError(f"no {kind} index here: build one with hopqa index --kind {kind}")

    return get


def client(llm=None, **settings) -> TestClient:
    llm = llm if llm is not None else ScriptedLLM(replies=lambda request: "Stanley")
    settings.setdefault("allowed_hosts", ("testserver",))  # TestClient's Host
    return TestClient(create_app(ServiceSettings(llm=llm, retriever_for=retriever_for(retriever()), **settings)))


def events(text: str) -> list[tuple[str, object]]:
    """The (event, data) pairs of a text/event-stream body (``data`` parsed as JSON)."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        if "data" in fields:
            out.append((fields.get("event", "message"), json.loads(fields["data"])))
    return out


def wait_until(condition, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


class Blocking:
    """A scripted LLM whose calls wait until ``release`` (a deterministic long request)."""

    def __init__(self, **kw) -> None:
        self.event = threading.Event()
        self.llm = ScriptedLLM(replies=lambda request: "Stanley", gate=lambda: self.event.wait(30), **kw)

    def release(self) -> None:
        self.event.set()


# -- answers --------------------------------------------------------------------------------------
def test_healthz_names_the_model_and_the_queue():
    r = client(max_queue=3).get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "llm": "scripted", "queue": {"pending": 0, "running": 0, "max": 3}}


def test_answer_is_hopqa_ask_json():
    r = client().post("/v1/answer", json={"question": QUESTION, "method": "retrieve-then-read"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert set(body) == {"question", "answer", "method", "hops", "passages", "usage", "error", "metrics", "trace"}
    assert body["answer"] == "Stanley" and body["error"] is None and body["method"] == "retrieve-then-read"
    assert [p["id"] for p in body["passages"]] == ["a", "b"]
    assert body["usage"]["llm_calls"] == 1 and body["usage"]["retrieval_calls"] == 1
    assert body["trace"]["kind"] == "question"


def test_default_method_k_and_options_given_as_text_or_json():
    c = client(default_method="retrieve-then-read")
    assert c.post("/v1/answer", json={"question": QUESTION}).json()["method"] == "retrieve-then-read"
    assert len(c.post("/v1/answer", json={"question": QUESTION, "k": 1}).json()["passages"]) == 1
    as_text = c.post("/v1/answer", json={"question": QUESTION, "options": {"k": "1", "max_tokens": "8"}}).json()
    assert len(as_text["passages"]) == 1 and as_text["trace"]["inputs"]["config"]["max_tokens"] == 8
    as_json = c.post("/v1/answer", json={"question": QUESTION, "options": {"k": 1, "temperature": 0.5}}).json()
    assert as_json["trace"]["inputs"]["config"]["temperature"] == 0.5
    # k is ignored by a method that retrieves nothing, as hopqa ask --k is
    r = c.post("/v1/answer", json={"question": QUESTION, "method": "direct", "k": 3})
    assert r.status_code == 200 and r.json()["method"] == "direct"


def test_a_method_failure_is_the_answers_error_with_status_200():
    def broken(request):
        raise RuntimeError("the model fell over")

    r = client(ScriptedLLM(replies=broken)).post("/v1/answer", json={"question": QUESTION,
                                                                     "method": "retrieve-then-read"})
    assert r.status_code == 200
    body = r.json()
    assert "the model fell over" in body["error"] and body["answer"] == "" and body["trace"] is not None


# -- refusals ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("payload, words", [
    ({"question": ""}, ["question is empty"]),
    ({"question": "   "}, ["question is empty"]),
    ({"question": "x" * 101}, ["101 characters", "limit is 100"]),
    ({"question": QUESTION, "k": 0}, ["k must be between 1 and 5"]),
    ({"question": QUESTION, "k": 6}, ["k must be between 1 and 5"]),
    ({"question": QUESTION, "options": {"k": 9}}, ["k must be between 1 and 5"]),
    ({"question": QUESTION, "method": "no-such"}, ["unknown method 'no-such'", "ircot", "hgot", "tor"]),
    ({"question": QUESTION, "options": {"kk": 3}}, ["'kk'", "did you mean 'k'"]),
    ({"question": QUESTION, "options": {"k": "many"}}, ["option k", "whole number", "'many'"]),
    ({"question": QUESTION, "options": {"k": 2.5}}, ["option k", "whole number"]),
    ({"question": QUESTION, "options": {"temperature": 9}}, ["option temperature", "between 0.0 and 2.0"]),
    ({"question": QUESTION, "method": "ircot", "options": {"structured": "sometimes"}}, ["option structured", "'sometimes'"]),
    ({"question": QUESTION, "retriever": "dense"}, ["no dense index here"]),
])
def test_bad_input_is_a_422_naming_what_was_wrong(payload, words):
    r = client(max_question_chars=100, max_k=5, default_method="retrieve-then-read").post("/v1/answer", json=payload)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and all(w in detail for w in words), detail


def test_schema_errors_are_422_too():
    c = client()
    assert c.post("/v1/answer", json={"question": QUESTION, "retriever": "sparse"}).status_code == 422
    assert c.post("/v1/answer", json={"question": QUESTION, "optoins": {}}).status_code == 422  # a typo is refused
    assert c.post("/v1/answer", content=b"{not json", headers={"content-type": "application/json"}).status_code == 422


def test_a_stream_refused_before_it_starts_is_an_ordinary_error():
    r = client().post("/v1/answer", json={"question": "", "stream": True})
    assert r.status_code == 422 and r.headers["content-type"] == "application/json"


def test_a_body_over_the_limit_is_413_by_length_and_by_bytes_received():
    c = client(max_body_bytes=300)
    big = {"question": QUESTION, "options": {"padding": "x" * 400}}
    r = c.post("/v1/answer", json=big)
    assert r.status_code == 413 and "300 bytes" in r.json()["detail"]

    def chunks():  # no Content-Length: the body is counted as it arrives
        yield b'{"question": "' + b"y" * 200
        yield b"y" * 200 + b'"}'

    r = c.post("/v1/answer", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert c.post("/v1/answer", json={"question": QUESTION, "method": "direct"}).status_code == 200


def test_the_api_key_guards_every_v1_endpoint_and_nothing_else():
    c = client(api_key=KEY)
    for method, path in [("get", "/v1/methods"), ("get", "/v1/runs"), ("get", "/v1/models"),
                         ("post", "/v1/answer"), ("post", "/v1/chat/completions")]:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEY}"}):
            r = getattr(c, method)(path, headers=headers, **({"json": {}} if method == "post" else {}))
            assert r.status_code == 401, (path, headers)
            assert KEY not in r.text and r.headers["www-authenticate"] == "Bearer"
    ok = c.post("/v1/answer", json={"question": QUESTION, "method": "direct"}, headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200
    assert c.get("/healthz").status_code == 200 and c.get("/").status_code == 200
    assert c.get("/docs").status_code == 200 and "/v1/answer" in c.get("/openapi.json").json()["paths"]


def test_the_key_as_a_cookie_counts_from_the_services_own_origin_only():
    c = client(api_key=KEY)
    c.cookies.set("hopqa_key", KEY)
    assert c.get("/v1/methods").status_code == 200
    assert c.get("/v1/methods", headers={"Origin": "http://testserver"}).status_code == 200
    assert c.get("/v1/methods", headers={"Origin": "http://evil.example"}).status_code == 401
    assert c.get("/v1/methods", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 401
    c.cookies.set("hopqa_key", "wrong")
    assert c.get("/v1/methods").status_code == 401


# -- the queue and the timeout ------------------------------------------------------------------------
def test_a_full_queue_is_429_with_retry_after():
    blocking = Blocking()
    c = client(blocking.llm, max_queue=1)
    results = {}
    first = threading.Thread(target=lambda: results.setdefault("first", c.post(
        "/v1/answer", json={"question": QUESTION, "method": "direct"})))
    first.start()
    try:
        wait_until(lambda: c.get("/healthz").json()["queue"] == {"pending": 1, "running": 1, "max": 1})
        r = c.post("/v1/answer", json={"question": QUESTION, "method": "direct"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "busy" in r.json()["detail"]
        chat = c.post("/v1/chat/completions", json={"model": "hopqa/direct", "messages": [{"role": "user",
                                                                                          "content": QUESTION}]})
        assert chat.status_code == 429 and chat.json()["error"]["code"] == "rate_limit_exceeded"
    finally:
        blocking.release()
        first.join(10)
    assert results["first"].status_code == 200
    wait_until(lambda: c.get("/healthz").json()["queue"]["pending"] == 0)
    assert c.post("/v1/answer", json={"question": QUESTION, "method": "direct"}).status_code == 200


def test_one_request_runs_at_a_time_on_a_model_that_serves_one_call_at_a_time():
    llm = ScriptedLLM(replies=lambda request: "Stanley", delay=0.05)
    c = client(llm, max_queue=4)
    codes = []
    threads = [threading.Thread(target=lambda: codes.append(c.post(
        "/v1/answer", json={"question": QUESTION, "method": "cot"}).status_code)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert codes == [200, 200, 200] and llm.max_in_flight == 1


def test_requests_run_together_on_a_model_that_serves_several_calls():
    barrier = threading.Barrier(2, timeout=10)  # both calls must be in flight at once, or it breaks
    llm = ScriptedLLM(replies=lambda request: "Stanley", max_concurrency=2, gate=barrier.wait)
    c = client(llm, max_queue=2)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(c.post(
        "/v1/answer", json={"question": QUESTION, "method": "direct"}).json())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert [a["error"] for a in answers] == [None, None] and llm.max_in_flight == 2


def test_a_timeout_is_504_and_the_slot_is_held_until_the_call_in_flight_ends():
    blocking = Blocking()
    c = client(blocking.llm, timeout=0.3, max_queue=2)
    try:
        r = c.post("/v1/answer", json={"question": QUESTION, "method": "direct"})
        assert r.status_code == 504 and "0.3 s" in r.json()["detail"]
        assert c.get("/healthz").json()["queue"]["pending"] == 1  # the thread still runs the method
    finally:
        blocking.release()
    wait_until(lambda: c.get("/healthz").json()["queue"]["pending"] == 0)


def test_a_stream_that_times_out_ends_with_an_error_event():
    blocking = Blocking()
    c = client(blocking.llm, timeout=0.3)
    try:
        r = c.post("/v1/answer", json={"question": QUESTION, "method": "retrieve-then-read", "stream": True})
    finally:
        blocking.release()
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    got = events(r.text)
    assert got[0][0] == "job" and got[0][1]["id"] == r.headers["x-hopqa-job"]
    assert got[1][0] == "step" and got[-1][0] == "error" and got[-1][1]["status"] == 504
    assert "answer" not in [name for name, _ in got]


# -- streaming -----------------------------------------------------------------------------------------
def test_a_stream_reports_each_step_as_it_happens_then_the_answer():
    c = client(self_ask_llm())
    question = QUESTION.replace("located", "located, and which county is it")
    r = c.post("/v1/answer", json={"question": question, "method": "self-ask", "k": 2, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    got = events(r.text)
    names = [name for name, _ in got]
    assert names[0] == "job" and names[-1] == "answer" and names.count("answer") == 1
    assert set(names[1:-1]) == {"step"}
    answer = got[-1][1]
    assert answer["answer"] == "Stanley" and answer["error"] is None
    steps = [data for name, data in got if name == "step"]

    opened: dict[int, int | None] = {}
    for record in steps:  # opens precede closes; a child opens after its parent
        if record["event"] == "open":
            assert record["id"] not in opened
            assert record["parent"] is None or record["parent"] in opened
            opened[record["id"]] = record["parent"]
        else:
            assert record["event"] == "close" and record["id"] in opened and record["parent"] == opened[record["id"]]

    final: dict[int, int | None] = {}

    def walk(step, parent):
        final[step["id"]] = parent
        for child in step.get("children") or ():
            walk(child, step["id"])

    walk(answer["trace"], None)
    assert final == opened  # every step announced, and the parents rebuild the tree exactly
    assert len(final) >= 5 and sum(1 for p in final.values() if p is not None and final[p] is not None) >= 2
    kinds = {record["id"]: record["kind"] for record in steps if record["event"] == "open"}
    assert [kinds[i] for i in final if final[i] == answer["trace"]["id"]][:2] == ["follow_up", "follow_up"]


def test_a_plain_request_and_a_stream_give_the_same_answer():
    c = client()
    plain = c.post("/v1/answer", json={"question": QUESTION, "method": "retrieve-then-read"}).json()
    streamed = events(c.post("/v1/answer", json={"question": QUESTION, "method": "retrieve-then-read",
                                                 "stream": True}).text)[-1][1]
    for key in ("answer", "passages", "hops", "error", "method"):
        assert plain[key] == streamed[key]


# -- methods ----------------------------------------------------------------------------------------------
def test_methods_lists_every_method_with_its_paper_and_options():
    body = client().get("/v1/methods").json()
    by_name = {m["name"]: m for m in body["methods"]}
    assert set(by_name) == set(METHODS) and body["default"] == "ircot"
    assert by_name["hgot"]["paper"]["title"].startswith("HGOT: Hierarchical Graph of Thoughts")
    assert by_name["gensco-stop"]["paper"]["title"].startswith("GenSco")
    assert by_name["cor"]["paper"] == by_name["tor"]["paper"] and by_name["tor"]["paper"]["year"] == 2024
    assert by_name["self-dc"]["paper"]["title"].startswith("Self-DC")
    assert by_name["leapquery"]["paper"]["title"].startswith("LeapQuery")
    assert by_name["ircot"]["paper"]["authors"] == "Trivedi et al."
    assert by_name["direct"]["paper"] is None and by_name["retrieve-then-read"]["paper"] is None
    assert by_name["direct"]["retrieves"] is False and by_name["ircot"]["retrieves"] is True
    assert all(m["doc"] for m in body["methods"])
    tor = {o["name"]: o for o in by_name["tor"]["options"]}
    assert tor["widths"] == {"name": "widths", "type": "str", "kind": "str", "default": "5,3,3", "optional": False,
                             "range": [1, 100], "items": "int", "cap": 5}  # the service's cap on each width
    assert tor["expansion"]["choices"] == ["direct", "cot", "mpc"] and tor["expansion"]["kind"] == "choice"
    assert tor["shots"]["range"] == [0, 3] and tor["context_tokens"]["type"] == "int | None"
    assert tor["context_tokens"]["optional"] is True
    assert {o["name"]: o for o in by_name["ircot"]["options"]}["k"]["range"] == [1, 1000]
    self_dc = {o["name"]: o for o in by_name["self-dc"]["options"]}
    assert self_dc["shots"]["needs"] == "chain" and self_dc["brackets"]["needs"] == "chain" and "needs" not in self_dc["k"]
    gensco = {o["name"]: o for o in by_name["gensco-stop"]["options"]}
    assert gensco["variant"]["default"] == "stop"  # the preset's default


# -- runs --------------------------------------------------------------------------------------------------
EXAMPLES = [
    Example("q1", "Where is the seat of Mountrail County?", ["Stanley"], "musique", "dev", list(PASSAGES.values())),
    Example("q2", "Which city is the capital of France?", ["Paris"], "musique", "dev", list(PASSAGES.values())),
    Example("q3", "Please fail on this question?", ["Minot"], "musique", "dev", list(PASSAGES.values())),
]


def _eval_llm() -> ScriptedLLM:
    def reply(request):
        if "fail on this" in request.text():
            raise RuntimeError("scripted failure")
        return "Stanley"

    return ScriptedLLM(replies=reply)


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    """Runs written by the real runner (``evaluate``) at several depths, plus things to skip."""
    from hopqa.build import build_method

    root = tmp_path_factory.mktemp("runs")
    method = build_method("retrieve-then-read", _eval_llm(), None)
    evaluate(method, EXAMPLES, root / "musique-dev-distractor" / "retrieve-then-read", progress=False)
    evaluate(build_method("direct", _eval_llm()), EXAMPLES[:2], root / "a" / "b" / "c" / "direct", progress=False)
    evaluate(build_method("direct", _eval_llm()), EXAMPLES[:1], root / "a" / "b" / "c" / "d" / "cot",
             progress=False)  # 5 levels down: not listed
    (root / "junk" / "damaged").mkdir(parents=True)
    (root / "junk" / "damaged" / "results.jsonl").write_bytes(b"\xff\xfe not json\n{\"torn")
    outside = tmp_path_factory.mktemp("outside")
    evaluate(build_method("direct", _eval_llm()), EXAMPLES[:1], outside / "secret" / "direct", progress=False)
    (root / "escape").symlink_to(outside / "secret", target_is_directory=True)
    (root / "linked" / "direct").mkdir(parents=True)
    (root / "linked" / "direct" / "results.jsonl").symlink_to(outside / "secret" / "direct" / "results.jsonl")
    return root


def test_runs_lists_every_run_with_its_summary(runs_dir):
    runs = client(runs_dir=runs_dir).get("/v1/runs").json()["runs"]
    by_key = {(r["run"], r["method"]): r for r in runs}
    assert set(by_key) == {("musique-dev-distractor", "retrieve-then-read"), ("a/b/c", "direct"),
                           ("junk", "damaged")}
    rtr = by_key[("musique-dev-distractor", "retrieve-then-read")]
    assert rtr["n"] == 3 and rtr["failed"] == 1 and rtr["metrics"]["em"] == pytest.approx(1 / 3)
    assert rtr["cost"]["llm_calls"] == 3
    assert by_key[("junk", "damaged")]["n"] == 0  # nothing readable in it: empty, not an error


def test_a_runs_records_without_traces_and_their_filters(runs_dir):
    c = client(runs_dir=runs_dir)
    url = "/v1/runs/musique-dev-distractor/retrieve-then-read"
    body = c.get(url).json()
    assert body["run"] == "musique-dev-distractor" and body["method"] == "retrieve-then-read"
    assert body["summary"]["n"] == 3 and body["total"] == 3 and body["offset"] == 0 and body["limit"] == 200
    assert [r["id"] for r in body["records"]] == ["q1", "q2", "q3"]
    assert set(body["records"][0]) == {"id", "question", "gold", "prediction", "status", "error", "metrics", "usage"}

    def ids(query):
        r = c.get(f"{url}?{query}")
        assert r.status_code == 200, r.text
        return [rec["id"] for rec in r.json()["records"]]

    assert ids("wrong=true") == ["q2", "q3"]
    assert ids("failed=true") == ["q3"]
    assert ids("metric=em&below=0.5") == ["q2", "q3"]
    assert ids("metric=f1&above=0.5") == ["q1"] and ids("metric=f1&above=1") == []
    assert ids("metric=k_precision&above=0.5") == ["q1", "q2"]  # a record without the metric is left out
    assert ids("wrong=true&failed=true") == ["q3"]
    assert ids("offset=1&limit=1") == ["q2"]
    assert c.get(f"{url}?limit=1001").status_code == 422 and c.get(f"{url}?offset=-1").status_code == 422
    assert c.get(f"{url}?below=0.5").status_code == 422
    nested = c.get("/v1/runs/a/b/c/direct").json()
    assert nested["run"] == "a/b/c" and nested["summary"]["n"] == 2


def test_one_record_comes_whole_with_its_trace(runs_dir):
    c = client(runs_dir=runs_dir)
    r = c.get("/v1/runs/musique-dev-distractor/retrieve-then-read?id=q1")
    record = r.json()["record"]
    assert record["id"] == "q1" and record["prediction"] == "Stanley" and record["trace"]["kind"] == "question"
    assert c.get("/v1/runs/musique-dev-distractor/retrieve-then-read?id=nope").status_code == 404


def test_a_method_directory_right_in_the_runs_directory(runs_dir):
    c = client(runs_dir=runs_dir / "musique-dev-distractor")
    assert [(r["run"], r["method"]) for r in c.get("/v1/runs").json()["runs"]] == [("", "retrieve-then-read")]
    assert c.get("/v1/runs/retrieve-then-read").json()["summary"]["n"] == 3


@pytest.mark.parametrize("path", [
    "/v1/runs/%2E%2E/%2E%2E/direct",
    "/v1/runs/musique-dev-distractor/%2E%2E",
    "/v1/runs/a/%2E%2E/%2E%2E/musique-dev-distractor/retrieve-then-read",
    "/v1/runs/%2Fetc/passwd",
    "/v1/runs//etc/direct",
    "/v1/runs/escape/direct",  # a symbolic link to a directory outside
    "/v1/runs/linked/direct",  # a results.jsonl linking outside
    "/v1/runs/linked/direct?id=q1",
    "/v1/runs/nothing/here",
])
def test_nothing_outside_the_runs_directory_is_found(runs_dir, path):
    r = client(runs_dir=runs_dir).get(path)
    assert r.status_code == 404, r.text
    assert "secret" not in r.text and str(runs_dir) not in r.text


def test_a_run_that_exists_outside_is_not_found_by_any_path(runs_dir):
    c = client(runs_dir=runs_dir)
    outside = Path(os.path.relpath((runs_dir / "escape").resolve(), runs_dir))  # ../outsideN/secret
    assert (runs_dir / outside / "direct" / "results.jsonl").is_file()  # it is there, one level up
    dotted = outside.as_posix().replace("..", "%2E%2E")
    for path in (f"/v1/runs/{dotted}/direct", f"/v1/runs/{dotted}/direct?id=q1",
                 f"/v1/runs/{(runs_dir / outside).resolve().as_posix()}/direct"):
        r = c.get(path)
        assert r.status_code == 404, (path, r.text)


def test_without_a_runs_directory_the_runs_endpoints_say_to_start_with_runs():
    c = client()
    for path in ("/v1/runs", "/v1/runs/x/y"):
        r = c.get(path)
        assert r.status_code == 404 and "--runs" in r.json()["detail"]


# -- the page ----------------------------------------------------------------------------------------------
def test_the_page_is_served_at_the_root():
    c = client()
    r = c.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    index = STATIC_DIR / "index.html"
    if index.is_file():
        assert r.text == index.read_text(encoding="utf-8")
    else:
        assert "/docs" in r.text
    assert c.get("/static/no-such-file.js").status_code == 404


# -- the command ----------------------------------------------------------------------------------------------
def test_serve_refuses_another_host_without_a_key(monkeypatch, capsys):
    from hopqa.cli import _loopback, main

    monkeypatch.delenv("HOPQA_API_KEY", raising=False)
    for host in ("0.0.0.0", "192.168.1.20", "example.org"):
        assert main(["serve", "--host", host]) == 2
        err = capsys.readouterr().err
        assert err.startswith("hopqa: error: --host") and "API key" in err
    assert main(["serve", "--runs", os.devnull + "-missing"]) == 2
    assert "no runs directory" in capsys.readouterr().err
    assert all(_loopback(h) for h in ("127.0.0.1", "127.0.1.1", "::1", "[::1]", "localhost"))
    assert not any(_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "host.example"))


def test_the_page_is_es_modules_that_import_only_each_other():
    """``index.html`` loads ``app.js`` as a module; every module imports only sibling modules that
    exist and are served as JavaScript (no build step, nothing from elsewhere)."""
    import re
    from pathlib import Path

    import hopqa.server

    static = Path(hopqa.server.__file__).parent / "static"
    assert '<script type="module" src="static/app.js"></script>' in (static / "index.html").read_text()
    modules = sorted(p.name for p in static.glob("*.js"))
    assert {"app.js", "ask.js", "runs.js", "trace.js", "common.js"} <= set(modules)
    c = TestClient(create_app(ServiceSettings(llm=ScriptedLLM(), retriever_for=lambda k: None)),
                   base_url="http://127.0.0.1")
    for name in modules:
        text = (static / name).read_text(encoding="utf-8")
        for target in re.findall(r'^import .* from "([^"]+)";$', text, flags=re.M):
            assert re.fullmatch(r"\./[a-z-]+\.js", target) and (static / target[2:]).is_file(), (name, target)
        assert ".innerHTML" not in text and "import(" not in text  # text only; no module fetched later
        r = c.get(f"/static/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
