"""Edge cases of the LLM layer (issue 29): replies with lone surrogates, a response cache that
cannot be written or read, a total deadline per request, replies without a message, usage and
log-probabilities that are not numbers, bodies too large to read. Real HTTP against the fake
server (``tests/fault_server.py``) where a server is involved; no model is loaded."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import types
import warnings

import diskcache
import pytest

pytest.register_assert_rewrite("fault_server")  # also loaded as a plugin below
from fault_server import ANSWERED, FAULT_KINDS  # noqa: E402
from test_openai_backend import call_bounded, make  # noqa: E402

from hopqa.llm import CachedLLM, GenerationRequest, LLMError, ResponseCache  # noqa: E402
from hopqa.llm.base import Completion, Generation, request_key  # noqa: E402
from hopqa.llm.scripted import ScriptedLLM  # noqa: E402
from hopqa.trace import Trace, step  # noqa: E402

#: The fault_server fixture (a factory of FaultServer).
pytest_plugins = ["fault_server"]

INVALID = "LLM reply had invalid Unicode"


def notes(st) -> list[dict]:
    return [e for e in st.events if e["message"] == INVALID]


# -- lone surrogates (item 2) --------------------------------------------------------------------
def test_lone_surrogate_from_a_server_becomes_u_fffd(fault_server):
    s = fault_server(script=["lone_surrogate"])
    llm = make(s.url)
    with Trace(question="q").activate(), step("gen") as st:
        gen = llm.generate("Question: is it broken", logprobs=True)
    c = gen.completions[0]
    assert c.text == "broken\ufffd" and c.tokens == ["broken\ufffd"] and c.logprobs == [-0.25]
    json.dumps(gen.to_dict(), ensure_ascii=False).encode("utf-8")  # writable as UTF-8
    assert notes(st) == [{"message": INVALID, "backend": llm.name, "replaced": [1],
                          "detail": "lone surrogates replaced by U+FFFD"}]


def test_lone_surrogates_are_mended_before_the_cache_for_every_backend(tmp_path):
    inner = ScriptedLLM(replies=lambda r: "a\ud800b\udfff")
    llm = CachedLLM(inner, ResponseCache(tmp_path / "c"))
    with Trace(question="q").activate(), step("gen") as st:
        fresh = llm.generate("p", n=2, temperature=0.5)  # split into single calls: each mended
        again = llm.generate("p", n=2, temperature=0.5)
    assert fresh.texts == again.texts == ["a\ufffdb\ufffd"] * 2 and again.cached
    assert [e["replaced"] for e in notes(st)] == [[2], [2]]  # the two fresh samples, nothing cached to mend
    raw = ResponseCache(tmp_path / "c")
    key = request_key(inner.identity(), "generate", GenerationRequest.make("p", n=2, temperature=0.5).key_dict())
    assert raw.get(key)["completions"][0]["text"] == "a\ufffdb\ufffd"  # what was cached is valid


def test_cache_entries_written_with_lone_surrogates_are_mended_on_read(tmp_path):
    cache = ResponseCache(tmp_path / "c")  # as an older hopqa left it: the raw reply cached
    req = GenerationRequest.make("p", logprobs=False)
    key = request_key(ScriptedLLM().identity(), "generate", req.key_dict())
    cache.set(key, Generation(completions=[Completion(text="x\udcff", tokens=["x", "\udcff"])],
                              backend="scripted").to_dict())
    with Trace(question="q").activate(), step("gen") as st:
        gen = CachedLLM(ScriptedLLM(replies=[]), cache).complete(req)
    assert gen.cached and gen.text == "x\ufffd" and gen.completions[0].tokens == ["x", "\ufffd"]
    assert [e["replaced"] for e in notes(st)] == [[1]]


def test_scored_tokens_with_lone_surrogates_are_mended(tmp_path):
    llm = CachedLLM(ScriptedLLM(scorer=lambda c, x: [-1.0, -2.0]), ResponseCache(tmp_path / "c"))
    for _ in range(2):  # fresh, then cached
        ll = llm.loglikelihood("ctx", "a \ud800")
        assert ll.tokens == ["a", "\ufffd"]


def test_hopqa_ask_answers_a_reply_with_a_lone_surrogate(fault_server, tmp_path):
    s = fault_server(faults={"lone_surrogate": 1.0})
    for extra in ([], ["--json"]):  # printed on a terminal (stdout is strict UTF-8) and as JSON
        p = subprocess.run([sys.executable, "-m", "hopqa.cli", "ask", "--method", "direct", "--llm",
                            f"openai:fake@{s.url}", "--home", str(tmp_path / "home"), *extra,
                            "Which word ends this question: zebra"],
                           capture_output=True, timeout=120, check=False)
        assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
        out = p.stdout.decode("utf-8")  # strict: the output is valid UTF-8
        assert "zebra\ufffd" in out and "Traceback" not in p.stderr.decode("utf-8", "replace")
    assert len(s.requests) == 1  # the mended reply was cached and answered the second run


def test_hopqa_eval_records_every_question_when_replies_hold_lone_surrogates(fault_server, tmp_path):
    from test_drills import eval_args, hopqa, result_lines, run_dir, write_questions

    s = fault_server(faults={"lone_surrogate": 0.5}, seed=3)
    questions = write_questions(tmp_path / "q.jsonl", 12)
    args = eval_args(questions, tmp_path / "runs", tmp_path / "home", f"openai:fake@{s.url}", workers=4)
    for run in range(2):  # the first run, then a resume that reads the cache
        p = hopqa(args, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        lines = result_lines(run_dir(tmp_path / "runs", questions) / "results.jsonl")
        assert sorted(r["id"] for r in lines) == [f"q{i:03d}" for i in range(12)], run
        assert all(r["status"] == "ok" for r in lines)
    assert 0 < s.served["lone_surrogate"] < 12 and len(s.requests) == 12  # the resume asked nothing again
    assert sum("\ufffd" in r["prediction"] for r in lines) == s.served["lone_surrogate"]


# -- the response cache cannot be written or read (item 3) -----------------------------------------
def _raise(exc):
    def fail(*args, **kwargs):
        raise exc
    return fail


@pytest.mark.parametrize("exc, cause", [
    (sqlite3.OperationalError("database or disk is full"), "disk full"),
    (OSError(errno.ENOSPC, "No space left on device"), "disk full"),
    (sqlite3.OperationalError("attempt to write a readonly database"), "read-only"),
    (OSError(errno.EACCES, "Permission denied"), "permission denied"),
    (sqlite3.OperationalError("disk I/O error"), "OperationalError: disk I/O error"),
    (diskcache.Timeout(), "the database stayed locked"),
])
def test_a_cache_that_cannot_be_written_answers_uncached_and_warns_once(tmp_path, monkeypatch, exc, cause):
    cache = ResponseCache(tmp_path / "c")
    store = cache._db
    monkeypatch.setattr(store, "set", _raise(exc))
    inner = ScriptedLLM(replies=lambda r: r.prompt.upper(), scorer=lambda c, x: [-1.0])
    llm = CachedLLM(inner, cache)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        texts = [llm.generate(f"p{i % 2}").text for i in range(4)]
        total = llm.loglikelihood("c", "x").total
    assert texts == ["P0", "P1", "P0", "P1"] and total == -1.0
    assert len(inner.requests) == 4  # nothing was cached, every question was answered
    assert [str(w.message) for w in caught] == [
        f"the response cache at {tmp_path / 'c'} cannot be written ({cause}): answering without caching"]


class _FailingConnection:
    """A read connection whose statement fails (a damaged database)."""

    def __init__(self, exc):
        self.exc = exc

    def execute(self, *args):
        raise self.exc

    def close(self):
        pass


@pytest.mark.parametrize("where, exc, cause", [
    ("statement", sqlite3.DatabaseError("database disk image is malformed"),
     "DatabaseError: database disk image is malformed"),
    ("fetch", OSError(errno.EIO, "Input/output error"), "OSError: [Errno 5] Input/output error"),
    ("fetch", EOFError("Ran out of input"), "EOFError: Ran out of input"),  # a damaged pickled value
    ("queued", sqlite3.DatabaseError("database disk image is malformed"),
     "DatabaseError: database disk image is malformed"),  # a read on the worker, after a queued write
])
def test_a_cache_that_cannot_be_read_answers_from_the_model_and_warns_once(tmp_path, monkeypatch, where, exc,
                                                                           cause):
    cache = ResponseCache(tmp_path / "c")
    CachedLLM(ScriptedLLM(replies=["old"]), cache).generate("p")
    cache.close()  # the write done: the reads below run on this thread
    if where == "statement":
        monkeypatch.setattr(cache, "_reader", _FailingConnection(exc))
        monkeypatch.setattr(cache, "_reader_pid", os.getpid())
    elif where == "fetch":
        monkeypatch.setattr(cache._db.disk, "fetch", _raise(exc))
    else:
        monkeypatch.setattr(cache._db, "get", _raise(exc))
        monkeypatch.setattr(cache, "_queued", {k: 1 for k in _keys_of(cache)})  # as if its write were queued
    inner = ScriptedLLM(replies=lambda r: "fresh")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        texts = [CachedLLM(inner, cache).generate("p").text for _ in range(3)]
        cache.close()
    assert texts == ["fresh"] * 3
    assert [str(w.message) for w in caught] == [
        f"the response cache at {tmp_path / 'c'} cannot be read ({cause}): answering without it"]


def _keys_of(cache):
    return list(cache._run(lambda: list(cache._db.iterkeys())))


def test_a_cache_read_runs_on_the_calling_thread_and_sees_every_write(tmp_path, monkeypatch):
    """A read is made on the caller's thread (no hop to the worker); many threads reading and
    writing see each other's finished writes."""
    cache = ResponseCache(tmp_path / "c")
    cache.set("a", {"text": "1"})
    cache.close()
    threads = []
    real_fetch = cache._db.disk.fetch

    def fetch(*args):
        threads.append(threading.current_thread())
        return real_fetch(*args)

    monkeypatch.setattr(cache._db.disk, "fetch", fetch)
    monkeypatch.setattr(cache, "_run", _raise(AssertionError("a read went to the worker")))
    assert cache.get("a") == {"text": "1"} and cache.get("b") is None
    assert threads == [threading.current_thread()]
    monkeypatch.undo()
    errors = []

    def work(i):
        try:
            cache.set(f"k{i}", {"i": i})
            for _ in range(200):  # each thread's own write, once done, is read back
                if cache.get(f"k{i}") == {"i": i}:
                    return
                time.sleep(0.005)
            errors.append(i)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and all(cache.get(f"k{i}") == {"i": i} for i in range(16))
    cache.close()


def test_a_value_whose_file_went_is_a_miss_without_a_warning(tmp_path):
    """A large value lives in a file of its own; one removed after the statement (evicted
    meanwhile) is a miss, as ``diskcache.Cache.get`` has it."""
    cache = ResponseCache(tmp_path / "c")
    cache.set("big", {"text": "x" * 100_000})
    cache.close()
    files = [p for p in (tmp_path / "c").rglob("*.val")]
    assert len(files) == 1
    files[0].unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get("big") is None
    assert caught == []
    cache.close()


def test_a_cache_write_is_queued_seen_by_the_next_read_and_kept_at_exit(tmp_path, monkeypatch):
    """The caller does not wait for a write; a read after it sees it; ``close_all`` (at exit)
    finishes what is queued."""
    from hopqa.llm import cache as cache_module

    cache = ResponseCache(tmp_path / "c")
    store = cache._db
    release = threading.Event()
    real_set = store.set

    def slow_set(key, value):
        release.wait(10)
        return real_set(key, value)

    monkeypatch.setattr(store, "set", slow_set)
    t0 = time.monotonic()
    cache.set("a", {"text": "1"})
    cache.set("b", {"text": "2"})
    assert time.monotonic() - t0 < 1  # queued, not waited for
    threading.Timer(0.2, release.set).start()
    assert cache.get("a") == {"text": "1"}  # the read waited for the write before it
    release.clear()
    threading.Timer(0.2, release.set).start()
    cache.set("c", {"text": "3"})
    cache_module.close_all()
    assert cache._worker is None and ResponseCache(tmp_path / "c").get("c") == {"text": "3"}


def test_a_cache_entry_of_another_shape_is_a_miss(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    req = GenerationRequest.make("p")
    key = request_key(ScriptedLLM().identity(), "generate", req.key_dict())
    cache.set(key, {"completions": [{"txt": "renamed field"}]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gen = CachedLLM(ScriptedLLM(replies=["fresh"]), cache).complete(req)
    assert gen.text == "fresh" and not gen.cached
    assert len(caught) == 1 and "cannot be read (TypeError: " in str(caught[0].message)
    assert CachedLLM(ScriptedLLM(replies=[]), cache).complete(req).text == "fresh"  # replaced


def test_a_cache_that_cannot_be_opened_answers_uncached(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = ResponseCache(blocker / "c")
        llm = CachedLLM(ScriptedLLM(replies=["a", "b"]), cache)
        assert [llm.generate("p").text for _ in range(2)] == ["a", "b"]
    assert len(cache) == 0
    assert [str(w.message) for w in caught] == [
        f"the response cache at {blocker / 'c'} cannot be opened (NotADirectoryError: [Errno 20] Not a directory: "
        f"'{blocker / 'c'}'): answering without caching"]


def test_cache_warning_is_one_hopqa_line(tmp_path, monkeypatch, capsys):
    from hopqa.console import show_warning

    cache = ResponseCache(tmp_path / "c")
    monkeypatch.setattr(cache._db, "set", _raise(sqlite3.OperationalError("database or disk is full")))
    with warnings.catch_warnings():  # as the CLI shows warnings
        warnings.simplefilter("default")
        warnings.showwarning = show_warning
        llm = CachedLLM(ScriptedLLM(replies=lambda r: "x"), cache)
        for i in range(3):
            llm.generate(f"p{i}")
        cache.close()  # the queued writes done (a read no longer waits for them: it runs on its own thread)
    assert capsys.readouterr().err == (f"hopqa: warning: the response cache at {tmp_path / 'c'} cannot be written "
                                       "(disk full): answering without caching\n")


# -- a total deadline per request (item 7) ---------------------------------------------------------
def test_a_trickling_reply_is_cut_off_at_the_timeout_and_retried(fault_server):
    s = fault_server(script=["trickle", "ok"], trickle_seconds=0.2)  # ~60 s for the whole body
    llm = make(s.url, retries=1, timeout=1.5)
    t0 = time.monotonic()
    gen = call_bounded(lambda: llm.generate("Question: is it slow"), timeout=20)
    took = time.monotonic() - t0
    assert gen.text == "slow" and [r["kind"] for r in s.requests] == ["trickle", "ok"]
    assert 1.4 < took < 1.5 + 1.5, took


def test_a_trickling_reply_fails_as_a_timeout(fault_server):
    s = fault_server(faults={"trickle": 1.0}, trickle_seconds=0.1)
    llm = make(s.url, retries=1, timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(LLMError) as e:
        call_bounded(lambda: llm.generate("Question: q"), timeout=20)
    took = time.monotonic() - t0
    assert str(e.value).startswith(f"openai:m@{s.url}: no reply within 1 s after 2 attempts"), str(e.value)
    assert took < 2 * 1.0 + 1.5, took


def test_a_reply_that_stalls_mid_body_ends_at_the_deadline(fault_server):
    # One byte, then nothing for 30 s: the read waits for the time left, not a new full timeout.
    s = fault_server(faults={"trickle": 1.0}, trickle_seconds=30)
    llm = make(s.url, retries=0, timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(LLMError):
        call_bounded(lambda: llm.generate("Question: q"), timeout=20)
    assert time.monotonic() - t0 < 1.0 + 1.0


def test_a_slow_healthy_reply_within_the_timeout_is_kept(fault_server):
    s = fault_server(delay=0.5)
    llm = make(s.url, retries=0, timeout=3)
    assert [llm.generate(f"Question: number {i}").text for i in range(3)] == ["0", "1", "2"]


# -- a choice without a message (item 8) -----------------------------------------------------------
def test_a_null_message_is_retried(fault_server):
    s = fault_server(script=["null_message", "ok"])
    llm = make(s.url, retries=1)
    assert llm.generate("Question: what now").text == "now" and len(s.requests) == 2


def test_a_null_message_is_never_an_answer_nor_cached(fault_server, tmp_path):
    s = fault_server(faults={"null_message": 1.0})
    cache = ResponseCache(tmp_path / "c")
    llm = CachedLLM(make(s.url, retries=1), cache)
    with pytest.raises(LLMError) as e:
        llm.generate("Question: what now")
    assert str(e.value).startswith(f"openai:m@{s.url}: a choice without a message after 2 attempts ("), str(e.value)
    assert "check the URL" in str(e.value) and len(cache) == 0
    s.set_faults({})
    assert llm.generate("Question: what now").text == "now"


@pytest.mark.parametrize("choice, what", [
    ({"index": 0, "finish_reason": "stop"}, "a choice without a message"),
    ({"index": 0, "message": "now", "finish_reason": "stop"}, "a choice without a message"),
    ({"index": 0, "message": {"role": "assistant", "content": 42}}, "a message whose content is not text"),
    ({"index": 0, "message": {"role": "assistant", "content": ["now"]}}, "a message whose content is not text"),
])
def test_other_choices_without_a_text_message_are_malformed(choice, what):
    with tiny_server({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}) as url:
        with pytest.raises(LLMError) as e:
            make(url, retries=0).generate("q")
    assert str(e.value).startswith(f"openai:m@{url}: {what} after 1 attempt"), str(e.value)


# -- usage and log-probabilities that are not numbers (item 9) ---------------------------------------
def test_usage_that_is_not_numbers_counts_as_zero(fault_server):
    s = fault_server(faults={"bad_usage": 1.0})
    gen = make(s.url).generate("Question: counted")
    assert gen.text == "counted" and (gen.prompt_tokens, gen.completion_tokens) == (0, 0) and len(s.requests) == 1


@pytest.mark.parametrize("usage", [{"prompt_tokens": 3.5, "completion_tokens": -2}, {"prompt_tokens": True},
                                   "n/a", [1, 2], {"prompt_tokens": float("nan")}])
def test_odd_usage_values_count_as_zero(usage):
    reply = {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "usage": usage,
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
    with tiny_server(reply) as url:
        gen = make(url, retries=0).generate("q")
    assert gen.text == "ok" and (gen.prompt_tokens, gen.completion_tokens) == (0, 0)


def test_logprobs_that_are_not_numbers_are_retried(fault_server):
    s = fault_server(script=["bad_logprobs", "ok"])
    gen = make(s.url, retries=1).generate("Question: retried", logprobs=True)
    assert gen.completions[0].logprobs == [-0.25] and len(s.requests) == 2


def test_logprobs_that_are_not_numbers_fail_naming_the_server(fault_server):
    s = fault_server(faults={"bad_logprobs": 1.0})
    with pytest.raises(LLMError) as e:
        make(s.url, retries=2).generate("Question: q", logprobs=True)
    assert str(e.value).startswith(f"openai:m@{s.url}: token log-probabilities that are not numbers after 3 attempts "
                                   "('abc')"), str(e.value)
    assert len(s.requests) == 3


def test_logprobs_not_asked_for_are_not_read(fault_server):
    s = fault_server(faults={"bad_logprobs": 1.0})
    c = make(s.url).generate("Question: unasked").completions[0]
    assert c.text == "unasked" and c.logprobs is None and c.tokens is None and len(s.requests) == 1


def test_echo_logprobs_that_are_not_numbers_are_retried_then_named(fault_server):
    s = fault_server(script=["bad_logprobs", "ok"])
    llm = make(s.url, loglikelihood=True, retries=1)
    assert llm.loglikelihood("The capital of France is", " Paris").total == -1.5
    s.set_faults({"bad_logprobs": 1.0})
    with pytest.raises(LLMError) as e:
        llm.loglikelihood("The capital of France is", " Paris")
    assert str(e.value).startswith(f"openai:m@{s.url}: token log-probabilities that are not numbers after 2 attempts")


def _embedded(out: dict, logits_all: bool = True):
    """A ``LlamaCppLLM`` whose model is a stand-in returning ``out`` (no model is loaded)."""
    from hopqa.llm.base import LLMBase
    from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM

    llm = LlamaCppLLM.__new__(LlamaCppLLM)
    llm.config = EmbeddedConfig(logits_all=logits_all)
    llm.name = "embedded:stand-in"
    llm.capabilities = frozenset({"generate", "logprobs"})
    LLMBase.__init__(llm)
    llm._lock = threading.Lock()
    llm._grammars = {}
    llm.prefix_cache, llm.evaluated_tokens, llm._prompt_evaluated, llm._canonical = None, 0, None, 0
    llm._llm = types.SimpleNamespace(create_chat_completion=lambda **kw: out)
    return llm


def test_embedded_usage_that_is_not_numbers_counts_as_zero():
    out = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": None, "completion_tokens": "3"}}
    gen = _embedded(out).generate("q")
    assert gen.text == "hi" and (gen.prompt_tokens, gen.completion_tokens) == (0, 0)


def test_embedded_logprobs_that_are_not_numbers_name_the_backend():
    out = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop",
                        "logprobs": {"content": [{"token": "hi", "logprob": None}]}}]}
    with pytest.raises(LLMError) as e:
        _embedded(out).generate("q", logprobs=True)
    assert str(e.value).startswith("embedded:stand-in: the model returned token log-probabilities that are not "
                                   "numbers (None)")


def test_embedded_text_with_lone_surrogates_is_mended():
    out = {"choices": [{"message": {"content": "caf\udce9"}, "finish_reason": "stop"}], "usage": {}}
    assert _embedded(out).generate("q").text == "caf\ufffd"


# -- a body too large to read (item 10) ------------------------------------------------------------
def test_a_50_mb_reply_is_refused_without_reading_it_all(fault_server):
    s = fault_server(faults={"huge": 1.0}, huge_bytes=50_000_000)
    llm = make(s.url, retries=0, timeout=60)
    with pytest.raises(LLMError) as e:
        call_bounded(lambda: llm.generate("Question: q", max_tokens=32), timeout=60)
    assert str(e.value).startswith(f"openai:m@{s.url}: a reply too large to read after 1 attempt "
                                   "(read more than 4,194,304 bytes); the server ignores max_tokens"), str(e.value)
    assert s.bytes_sent < 25_000_000, s.bytes_sent  # the limit and what the socket buffers took: not 50 MB


def test_a_declared_length_over_the_limit_is_refused_unread():
    body = {"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "a" * 5_000_000}, "finish_reason": "stop"}]}
    with tiny_server(body) as url:
        with pytest.raises(LLMError) as e:
            make(url, retries=0).generate("q", max_tokens=32)
    assert "a reply too large to read after 1 attempt (declared more than 4,194,304 bytes)" in str(e.value)


def test_a_long_reply_within_the_limit_is_still_read_and_cut(fault_server):
    s = fault_server(faults={"long": 1.0}, long_chars=200_000)
    gen = make(s.url).generate("Question: how long", max_tokens=32, logprobs=True)
    assert len(gen.text) == 2000 and gen.completions[0].truncated


# -- every new fault kind gives an answer or a clear error -------------------------------------------
@pytest.mark.parametrize("kind", FAULT_KINDS[FAULT_KINDS.index("null_message"):])
def test_new_fault_kinds_answer_or_fail_cleanly(fault_server, kind):
    s = fault_server(faults={kind: 1.0}, trickle_seconds=0.1)
    llm = make(s.url, retries=1, timeout=1.0)
    if kind in ANSWERED:
        assert call_bounded(lambda: llm.generate("Question: fine")).text.startswith("fine")
    else:
        with pytest.raises(LLMError):
            call_bounded(lambda: llm.generate("Question: fine"))


# -- a tiny server for replies the fault server does not make ---------------------------------------
class tiny_server:  # noqa: N801 - used as a context manager
    """An HTTP server on 127.0.0.1 answering every POST with ``reply`` (JSON, with its length)."""

    def __init__(self, reply: dict) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        payload = json.dumps(reply).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# -- an API key in the URL's query (item 11) -------------------------------------------------------
def test_an_api_key_in_the_llm_url_never_reaches_the_error_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "hopqa.cli", "ask", "--method", "direct", "--llm",
                        "openai:m@http://127.0.0.1:9/v1?retries=0&api_key=sk-SECRET123", "--home", str(tmp_path), "q"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 2
    assert p.stderr.startswith("hopqa: error: --llm openai:m@http://127.0.0.1:9/v1?retries=0&api_key=***: ")
    assert "SECRET" not in p.stdout + p.stderr


def test_numpy_numbers_are_numbers():
    """The embedded backend reports numpy floats (llama-cpp-python's logprobs): they are numbers
    (a first version of the check refused np.float32 and failed Self-DC's prob confidence)."""
    import numpy as np

    from hopqa.llm.base import MalformedValue, logprob, token_count

    assert logprob(np.float32(-0.5)) == -0.5 and isinstance(logprob(np.float32(-0.5)), float)
    assert token_count(np.int64(7)) == 7 and token_count(np.float64(3.0)) == 3
    with pytest.raises(MalformedValue):
        logprob(np.float32("nan"))
