"""Evaluation runs that keep every finished answer (issue 29, items 1-6 and 12): Ctrl-C, a full
disk, a million-question file, damaged run files, deeply nested JSON, an index rewritten in
place. In-process runs use the scripted LLM; the command-line drills use the fake
OpenAI-compatible server of ``tests/fault_server.py``. No model is loaded."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hopqa import jsonl
from hopqa.build import build_method
from hopqa.datasets import count_examples, iter_dataset, load_dataset
from hopqa.evaluation.report import build_report
from hopqa.evaluation.runner import (
    RunConfigDamaged,
    RunDirectoryError,
    RunInterrupted,
    RunWriteError,
    evaluate,
    read_results,
)
from hopqa.llm.scripted import ScriptedLLM
from hopqa.types import Example, Passage

pytest.register_assert_rewrite("fault_server")
from fault_server import wait_until  # noqa: E402

pytest_plugins = ["fault_server"]

TIMEOUT = 120


def example(i: int) -> Example:
    return Example(id=f"q{i}", question=f"What is item k{i}z?", answers=[f"item k{i}z"], dataset="toy", split="dev",
                   paragraphs=[Passage(f"q{i}#0", f"Item k{i}z", f"Item k{i}z is item k{i}z.", is_supporting=True)])


def echo(**kw) -> ScriptedLLM:
    return ScriptedLLM(replies=lambda r: "item " + r.text().split("What is item ")[-1].split("?")[0], **kw)


def lines(path: Path) -> list[dict]:
    """Every line of a JSON-lines file; each must be a whole JSON object."""
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


# -- 1. Ctrl-C -----------------------------------------------------------------------------------------
def test_ctrl_c_stops_taking_questions_and_keeps_those_finished(tmp_path):
    llm = echo(delay=0.01, max_concurrency=4)
    method = build_method("direct", llm)
    seen = []

    def interrupt(record):
        seen.append(record["id"])
        if len(seen) == 10:
            raise KeyboardInterrupt

    with pytest.raises(RunInterrupted) as info:
        evaluate(method, [example(i) for i in range(200)], tmp_path / "run", workers=4, progress=False,
                 on_record=interrupt)
    assert "run the same command again to resume" in str(info.value) and isinstance(info.value, KeyboardInterrupt)
    recorded = lines(tmp_path / "run" / "results.jsonl")
    # everything finished is on disk (the 10th, and those that finished meanwhile), nothing more
    assert [r["id"] for r in recorded] == seen and len(seen) == info.value.recorded
    # at most the questions in flight (2 per worker) ran past the interrupt, not the 190 queued
    assert 10 <= info.value.recorded <= len(llm.requests) <= 10 + 2 * 4
    summary = evaluate(build_method("direct", echo()), [example(i) for i in range(200)], tmp_path / "run",
                       progress=False)
    assert summary.n == 200 and len(lines(tmp_path / "run" / "results.jsonl")) == 200


def test_ctrl_c_while_a_finished_answer_is_written_keeps_it(tmp_path, monkeypatch):
    """The interrupt lands in the middle of writing the 5th answer: the handler writes it (and
    every other answer that had finished), once."""
    from hopqa import jsonl

    real, calls = jsonl.dumps_line, []

    def interrupted_fifth(record, default=str):
        calls.append(record["id"])
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(record, default)

    monkeypatch.setattr(jsonl, "dumps_line", interrupted_fifth)
    with pytest.raises(RunInterrupted) as info:
        evaluate(build_method("direct", echo(delay=0.01, max_concurrency=2)), [example(i) for i in range(50)],
                 tmp_path / "run", workers=2, progress=False)
    recorded = [r["id"] for r in lines(tmp_path / "run" / "results.jsonl")]
    assert calls[4] in recorded  # the answer being written when Ctrl-C came
    assert len(recorded) == len(set(recorded)) == info.value.recorded >= 5


def test_a_ctrl_c_another_exception_replaced_still_ends_the_run_as_a_ctrl_c(tmp_path):
    """A clean-up that fails because Ctrl-C cut its own set-up short (tqdm's first ``write`` did:
    an AttributeError in place of the KeyboardInterrupt) still ends the run as a Ctrl-C: the
    finished answers kept, ``RunInterrupted``; the same exception without a Ctrl-C is an error, as
    before; and Python's own SIGINT handler is back afterwards."""
    import signal

    # Python's handler, as a shell in the foreground leaves it (a suite started in the background
    # inherits SIGINT ignored, and Python then installs no handler at all)
    original = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _masked_ctrl_c_run(tmp_path)
    finally:
        signal.signal(signal.SIGINT, original)


def _masked_ctrl_c_run(tmp_path):
    import signal

    seen = []

    def masked(record):
        seen.append(record["id"])
        if len(seen) == 3:
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                raise AttributeError("'tqdm' has no attribute '_lock'") from None

    with pytest.raises(RunInterrupted) as info:
        evaluate(build_method("direct", echo()), [example(i) for i in range(100)], tmp_path / "run", workers=2,
                 progress=False, on_record=masked)
    assert isinstance(info.value.__cause__, AttributeError)
    assert [r["id"] for r in lines(tmp_path / "run" / "results.jsonl")] == seen and info.value.recorded == len(seen)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def broken(record):
        raise AttributeError("a bug, no Ctrl-C")

    with pytest.raises(AttributeError, match="a bug"):
        evaluate(build_method("direct", echo()), [example(i) for i in range(5)], tmp_path / "run2", progress=False,
                 on_record=broken)


def test_cancelled_answers_are_not_recorded(tmp_path):
    """A question stopped mid-way (its next LLM call raised Cancelled) is no answer: not recorded."""
    from hopqa.runtime import Cancelled, cancellable

    import threading

    stop = threading.Event()
    stop.set()
    with cancellable(stop):
        ans = build_method("direct", echo()).answer("What is item k1z?")
    assert ans.cancelled and ans.error.startswith("cancelled") and ans.trace.root.error
    with pytest.raises(Cancelled), cancellable(stop):
        from hopqa.runtime import check_cancelled

        check_cancelled()


# -- 3. a full disk --------------------------------------------------------------------------------
def test_full_disk_stops_the_run_and_keeps_what_was_written(tmp_path, monkeypatch):
    llm = echo(max_concurrency=4)
    real_write = os.write
    writes = {"n": 0}

    def write(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("results.jsonl"):
            writes["n"] += 1
            if writes["n"] > 5:  # the 6th line half-written, then the disk is full
                real_write(fd, bytes(data)[:7])
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(jsonl.os, "write", write)
    with pytest.raises(RunWriteError) as info:
        evaluate(build_method("direct", llm), [example(i) for i in range(100)], tmp_path / "run", workers=4,
                 progress=False)
    assert "the disk is full" in str(info.value) and "results.jsonl" in str(info.value)
    assert "resume" in str(info.value)
    monkeypatch.undo()
    text = (tmp_path / "run" / "results.jsonl").read_text(encoding="utf-8")
    assert text.endswith("\n") and len(lines(tmp_path / "run" / "results.jsonl")) == 5  # whole, nothing torn
    assert len(llm.requests) <= 6 + 2 * 4  # the pool stopped; it did not answer the 100
    evaluate(build_method("direct", echo()), [example(i) for i in range(100)], tmp_path / "run", progress=False)
    assert len({r["id"] for r in lines(tmp_path / "run" / "results.jsonl")}) == 100


# -- 4. a stream of questions ---------------------------------------------------------------------
def test_questions_are_read_as_the_run_goes(tmp_path):
    pulled = []

    def stream():
        for i in range(1_000_000):
            pulled.append(i)
            yield example(i)

    first = {}

    def stop_after_three(record):
        first.setdefault("pulled", len(pulled))
        if len(first) and record["id"] == "q2":
            raise KeyboardInterrupt

    with pytest.raises(RunInterrupted):
        evaluate(build_method("direct", echo()), stream(), tmp_path / "run", workers=2, progress=False,
                 on_record=stop_after_three)
    assert first["pulled"] <= 2 * 2 + 1  # the first answer came after reading a handful, not a million
    assert len(pulled) < 20


def _question_file(path: Path, good: int, bad: int) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(max(good, bad)):
            if i < good:
                f.write(json.dumps({"id": f"q{i}", "question": f"Which word ends question {i}: w{i}",
                                    "answers": [f"w{i}"]}) + "\n")
            if i < bad:
                f.write("{not json\n")
    return path


def test_bad_lines_of_a_question_file_warn_a_bounded_number_of_times(tmp_path):
    path = _question_file(tmp_path / "q.jsonl", good=3, bad=5000)
    with pytest.warns(UserWarning) as record:
        examples = list(iter_dataset(path))
    assert len(examples) == 3
    messages = [str(w.message) for w in record]
    assert len(messages) <= 22 and any("5000 malformed lines skipped in all" in m for m in messages)
    assert count_examples(path) == 3


def test_deeply_nested_lines_and_configs_are_refused_not_crashed(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "Who?", "answer": "x", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
                    + json.dumps({"question": "Where?", "answer": "y"}) + "\n")
    with pytest.warns(UserWarning, match="nested more than"):
        examples = load_dataset(path)
    assert [e.question for e in examples] == ["Where?"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RunConfigDamaged, match="nested more than"):
        evaluate(build_method("direct", echo()), [example(0)], run, progress=False)


# -- 5. damaged run files ----------------------------------------------------------------------------
def test_damaged_results_lines_are_skipped_and_their_ids_rerun(tmp_path):
    run = tmp_path / "run"
    evaluate(build_method("direct", echo()), [example(i) for i in range(6)], run, progress=False)
    path = run / "results.jsonl"
    recs = lines(path)
    recs[0]["metrics"] = "not a dict"  # wrong field types
    recs[1]["usage"] = {"llm_calls": "many"}
    deep = '{"id": "q2", "trace": ' + "[" * 100_000 + "]" * 100_000 + "}"
    text = "".join(json.dumps(r) + "\n" for r in recs[:2]) + deep + "\n" + '{"id": "q3"}\n'
    text += "".join(json.dumps(r) + "\n" for r in recs[4:])
    path.write_text(text)
    with pytest.warns(jsonl.RecordWarning) as record:
        assert set(read_results(path)) == {"q4", "q5"}
    messages = [str(w.message) for w in record]
    assert any(f"{path}:1: skipped" in m and "metrics" in m for m in messages)
    assert any(f"{path}:3: skipped" in m and "nested" in m for m in messages)
    assert any(f"{path}:4: skipped" in m and "status" in m for m in messages)
    rows_md, _ = build_report([run], tmp_path / "report", plots=False)  # the report reads what is good
    assert "| toy/dev |" in rows_md
    llm = echo()
    with pytest.warns(jsonl.RecordWarning):
        summary = evaluate(build_method("direct", llm), [example(i) for i in range(6)], run, progress=False)
    assert len(llm.requests) == 4 and summary.n == 6  # q0-q3 re-run, q4-q5 kept
    assert {r["id"] for r in lines(path)} == {f"q{i}" for i in range(6)} and len(lines(path)) == 6


@pytest.mark.parametrize("name", ["results.jsonl", "config.json", ".lock", "summary.json"])
def test_a_run_file_that_is_a_directory_is_a_clear_error(tmp_path, name):
    run = tmp_path / "run"
    (run / name).mkdir(parents=True)
    with pytest.raises(RunDirectoryError, match="is a directory"):
        evaluate(build_method("direct", echo()), [example(0)], run, progress=False)


# -- 12. an index rewritten in place ------------------------------------------------------------------
def test_an_index_rewritten_in_place_is_an_error_not_a_crash(tmp_path):
    import shutil

    from hopqa.corpus import write_corpus
    from hopqa.retrieval.bm25 import BM25Retriever, build_index
    from hopqa.retrieval.store import IndexChangedError

    corpus = tmp_path / "c.jsonl"
    write_corpus([Passage(str(i), f"T{i}", f"passage number {i} about topic{i % 3}") for i in range(30)], corpus)
    build_index(corpus, tmp_path / "a", progress=False)
    build_index(corpus, tmp_path / "b", progress=False)
    live = BM25Retriever.load(tmp_path / "a")
    assert live.search("topic1", 3)
    # replaced the way hopqa index does it (a new file renamed over the old one): goes on
    for f in (tmp_path / "b").glob("*.npy"):
        shutil.copy(f, tmp_path / "a" / (f.name + ".new"))
        os.replace(tmp_path / "a" / (f.name + ".new"), tmp_path / "a" / f.name)
    assert live.search("topic1", 3)
    live = BM25Retriever.load(tmp_path / "a")
    victim = next((tmp_path / "a").glob("*.index.npy"))
    time.sleep(0.01)
    with open(victim, "r+b") as f:  # cp over it: the same file rewritten
        f.write(f.read())
    with pytest.raises(IndexChangedError, match="hopqa index"):
        live.search("topic1", 3)


# -- the command line --------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    drop = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HOPQA_HOME", "HOPQA_LLM", "HOPQA_JUDGE", "HOPQA_DATA_DIR")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _interruptible() -> None:
    """In the child before it runs: Ctrl-C as in a terminal. A test run started in the background
    by a shell without job control (``make test &``) ignores SIGINT, and a child inherits that:
    Python then installs no KeyboardInterrupt handler, so the tests' Ctrl-C would be lost."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _eval_args(questions: Path, out: Path, home: Path, url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", str(questions), "--method", "direct",
            "--setting", "open", "--no-progress", "--out", str(out), "--home", str(home),
            "--llm", f"openai:fake@{url}?retries=1&timeout=10", *extra]


def _results(out: Path, questions: Path) -> Path:
    return out / f"{questions.name.split('.')[0]}-file-open" / "direct" / "results.jsonl"


def test_cli_ctrl_c_exits_promptly_saying_how_to_resume(fault_server, tmp_path):
    s = fault_server(delay=0.2)
    questions = _question_file(tmp_path / "q.jsonl", good=200, bad=0)
    args = _eval_args(questions, tmp_path / "runs", tmp_path / "home", s.url, "--workers", "8")
    results = _results(tmp_path / "runs", questions)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=_interruptible)
    try:
        assert wait_until(lambda: results.exists() and len(results.read_text().splitlines()) >= 5, timeout=60)
        proc.send_signal(signal.SIGINT)
        sent = len(s.requests)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "run the same command again to resume" in err and "Traceback" not in err
    assert took < 10, f"{took:.1f} s to stop"
    time.sleep(0.5)
    assert len(s.requests) - sent <= 2 * 8  # no new question started after Ctrl-C
    recorded = lines(results)
    assert 5 <= len(recorded) < 200
    again = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr
    assert sorted(r["id"] for r in lines(results)) == sorted(f"q{i}" for i in range(200))


def test_cli_lone_surrogates_from_the_server_are_recorded_as_valid_utf8(fault_server, tmp_path):
    s = fault_server(faults={"lone_surrogate": 1.0})
    questions = _question_file(tmp_path / "q.jsonl", good=20, bad=0)
    args = _eval_args(questions, tmp_path / "runs", tmp_path / "home", s.url, "--workers", "4")
    first = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    assert first.returncode == 0, first.stderr
    results = _results(tmp_path / "runs", questions)
    raw = results.read_bytes()
    raw.decode("utf-8")  # valid UTF-8
    recorded = lines(results)
    assert len(recorded) == 20 and all(r["status"] == "ok" for r in recorded)
    assert all("\ufffd" in r["prediction"] for r in recorded)
    # again from the response cache, into a new directory: the cached replies are fine too
    again = subprocess.run(_eval_args(questions, tmp_path / "runs2", tmp_path / "home", s.url), capture_output=True,
                           text=True, env=_env(), timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr
    assert len(lines(_results(tmp_path / "runs2", questions))) == 20
    ask = subprocess.run([sys.executable, "-m", "hopqa.cli", "ask", "Which word ends this: w7", "--method", "direct",
                          "--home", str(tmp_path / "home"), "--llm", f"openai:fake@{s.url}?retries=1"],
                         capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    assert ask.returncode == 0, ask.stderr
    assert "w7" in ask.stdout


def test_cli_skip_splits_an_evaluation_into_parts_that_add_up(fault_server, tmp_path):
    """``--skip S --limit N`` answers questions S+1 to S+N; the parts of one evaluation, run into
    the same run directory one after another (or on two machines), hold every question once."""
    s = fault_server()
    questions = _question_file(tmp_path / "q.jsonl", good=10, bad=0)
    results = _results(tmp_path / "runs", questions)
    second = subprocess.run(_eval_args(questions, tmp_path / "runs", tmp_path / "home", s.url, "--skip", "4",
                                       "--limit", "3"), capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    assert second.returncode == 0, second.stderr
    assert [r["id"] for r in lines(results)] == ["q4", "q5", "q6"]
    run = results.parent
    assert json.loads((run / "questions.json").read_text()) == {"asked": 3}
    assert json.loads((run / "summary.json").read_text())["n"] == 3
    rest = subprocess.run(_eval_args(questions, tmp_path / "runs", tmp_path / "home", s.url, "--skip", "7"),
                          capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    first = subprocess.run(_eval_args(questions, tmp_path / "runs", tmp_path / "home", s.url, "--limit", "4"),
                           capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    assert rest.returncode == 0 and first.returncode == 0, rest.stderr + first.stderr
    assert sorted(r["id"] for r in lines(results)) == sorted(f"q{i}" for i in range(10))
    past = subprocess.run(_eval_args(questions, tmp_path / "runs", tmp_path / "home", s.url, "--skip", "10"),
                          capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    assert past.returncode == 2 and "no questions to evaluate" in past.stderr and "after the first 10 (--skip)" in past.stderr


@pytest.mark.slow  # no model, but 100 questions twice through the fake server
def test_cli_full_disk_is_one_line_and_keeps_the_written_lines(fault_server, tmp_path):
    s = fault_server()
    questions = _question_file(tmp_path / "q.jsonl", good=100, bad=0)
    args = _eval_args(questions, tmp_path / "runs", tmp_path / "home", s.url, "--workers", "4", "--no-cache")
    limit = 60_000  # bytes any file of the process may grow to: a few results lines

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=TIMEOUT, preexec_fn=small_files)
    assert r.returncode == 1, r.stderr
    errors = [x for x in r.stderr.splitlines() if x.startswith("hopqa: error:")]
    assert len(errors) == 1 and "cannot write" in errors[0] and "results.jsonl" in errors[0], r.stderr
    assert "Traceback" not in r.stderr
    results = _results(tmp_path / "runs", questions)
    recorded = lines(results)
    assert 0 < len(recorded) < 100 and results.read_bytes().endswith(b"\n")
    assert len(s.requests) <= len(recorded) + 1 + 2 * 4  # stopped at once, not after all 100
    again = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr
    assert len({r["id"] for r in lines(results)}) == 100


@pytest.mark.slow  # no model, but a 70 MB file
def test_cli_million_question_file_starts_at_once_in_bounded_memory(fault_server, tmp_path):
    s = fault_server(delay=0.05)
    path = tmp_path / "million.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        row = '{"id": "q%d", "question": "Which word ends question %d: w%d", "answers": ["w%d"]}\n'
        f.writelines(row % (i, i, i, i) + ("{broken\n" if i % 2 else "") for i in range(700_000))
    assert path.stat().st_size > 64 * 2**20  # not counted first: a stream of unknown length
    args = _eval_args(path, tmp_path / "runs", tmp_path / "home", s.url, "--workers", "2")
    results = _results(tmp_path / "runs", path)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=_interruptible)
    try:
        assert wait_until(lambda: results.exists() and len(results.read_text().splitlines()) >= 10, timeout=60)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        rss_mb = int(next(x for x in status.splitlines() if x.startswith("VmRSS:")).split()[1]) / 1024
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rss_mb < 400, f"{rss_mb:.0f} MB after 10 questions"
    assert proc.returncode == 130
    warnings = [x for x in err.splitlines() if x.startswith("hopqa: warning:")]
    assert len(warnings) <= 21, len(warnings)  # 20 bad lines named, then one "counting them" line


@pytest.mark.slow
def test_ctrl_c_on_the_real_model_keeps_finished_answers_and_resumes(smollm2, demo_index, tmp_path):
    """The same guarantee with the embedded SmolLM2 and real retrieval (BM25 over the demo
    corpus, open setting): Ctrl-C after the first answer cancels the question in flight at its
    next call, records none of it, and the resumed run answers the rest, once each."""
    examples = load_dataset("musique", "dev", limit=4)
    method = build_method("ircot", smollm2, demo_index, max_steps=2)  # always retrieves, then reasons: 2+ calls

    def interrupt(record):
        raise KeyboardInterrupt

    with pytest.raises(RunInterrupted) as info:
        evaluate(method, examples, tmp_path / "run", setting="open", workers=2, progress=False, on_record=interrupt)
    first = lines(tmp_path / "run" / "results.jsonl")
    assert len(first) == info.value.recorded >= 1 and all(r["status"] == "ok" for r in first)
    assert all(r["trace"] and r["usage"]["retrieval_calls"] >= 1 for r in first)
    summary = evaluate(method, examples, tmp_path / "run", setting="open", workers=2, progress=False)
    final = lines(tmp_path / "run" / "results.jsonl")
    assert summary.n == 4 and sorted(r["id"] for r in final) == sorted(e.id for e in examples)
    assert {r["id"]: r["prediction"] for r in first}.items() <= {r["id"]: r["prediction"] for r in final}.items()
