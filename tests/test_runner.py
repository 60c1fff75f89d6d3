"""The evaluation runner: durable lines, resume after kill -9, failure isolation, config guard,
atomic config, compaction to one line per id, one run per directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from hopqa.build import build_method
from hopqa.evaluation.runner import (
    RunConfigDamaged,
    RunConfigMismatch,
    RunDirectoryBusy,
    check_config,
    compact_results,
    evaluate,
    read_results,
)
from hopqa.llm.scripted import ScriptedLLM
from hopqa.types import Example, Passage


def examples(n: int) -> list[Example]:
    return [Example(id=f"q{i}", question=f"What is item k{i}z?", answers=[f"item k{i}z"], dataset="toy", split="dev",
                    paragraphs=[Passage(f"q{i}#0", f"Item k{i}z", f"Item k{i}z is item k{i}z.", is_supporting=True),
                                Passage(f"q{i}#1", "Other", "Something else.", is_supporting=False)])
            for i in range(n)]


def echo_llm(**kw) -> ScriptedLLM:
    return ScriptedLLM(replies=lambda r: "item " + r.text().split("What is item ")[-1].split("?")[0], **kw)


def test_results_metrics_and_summary(tmp_path):
    method = build_method("retrieve-then-read", echo_llm(), k=2)
    s = evaluate(method, examples(5), tmp_path / "run", workers=2, progress=False, config={"m": 1})
    recs = read_results(tmp_path / "run" / "results.jsonl")
    assert set(recs) == {f"q{i}" for i in range(5)}
    r = recs["q3"]
    assert r["prediction"] == "item k3z" and r["metrics"]["em"] == 1.0 and r["status"] == "ok"
    assert r["metrics"]["support_recall"] == 1.0 and r["usage"]["llm_calls"] == 1 and r["trace"]["children"]
    assert s.metrics["em"] == 1.0 and s.failed == 0 and s.cost["llm_calls_per_q"] == 1.0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["metrics"]["em"] == 1.0


def test_failure_isolation(tmp_path):
    def flaky(request):
        if "item k2z?" in request.text():
            raise RuntimeError("model exploded on q2")
        return "item " + request.text().split("What is item ")[-1].split("?")[0]

    method = build_method("direct", ScriptedLLM(replies=flaky))
    s = evaluate(method, examples(4), tmp_path / "run", progress=False)
    recs = read_results(tmp_path / "run" / "results.jsonl")
    assert recs["q2"]["status"] == "failed" and "model exploded" in recs["q2"]["error"]
    assert recs["q2"]["trace"]["error"]
    assert [recs[f"q{i}"]["status"] for i in (0, 1, 3)] == ["ok"] * 3
    assert s.failed == 1 and s.metrics["em"] == pytest.approx(0.75)
    # a re-run skips everything; --retry-failed re-runs only the failed one
    again = build_method("direct", echo_llm())
    evaluate(again, examples(4), tmp_path / "run", progress=False)
    assert len(again.llm.inner.requests) == 0
    evaluate(again, examples(4), tmp_path / "run", progress=False, retry_failed=True)
    assert len(again.llm.inner.requests) == 1
    assert read_results(tmp_path / "run" / "results.jsonl")["q2"]["status"] == "ok"


def test_torn_last_line_is_repaired(tmp_path):
    run = tmp_path / "run"
    evaluate(build_method("direct", echo_llm()), examples(2), run, progress=False)
    path = run / "results.jsonl"
    with open(path, "a") as f:
        f.write('{"id": "q9", "prediction": "half writ')
    assert set(read_results(path)) == {"q0", "q1"}
    evaluate(build_method("direct", echo_llm()), examples(3), run, progress=False)
    lines = path.read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["q0", "q1", "q2"]


def test_config_mismatch_is_refused(tmp_path):
    evaluate(build_method("direct", echo_llm()), examples(1), tmp_path / "run", progress=False, config={"llm": "a"})
    with pytest.raises(RunConfigMismatch, match="llm"):
        evaluate(build_method("direct", echo_llm()), examples(1), tmp_path / "run", progress=False,
                 config={"llm": "b"})



def test_a_run_recorded_before_a_method_option_existed_continues_when_it_is_at_its_default(tmp_path):
    """A run recorded by an earlier hopqa, whose method had fewer options, is continued when the
    new options are at their defaults; not when one is set otherwise, an old one is gone or one
    recorded changed."""
    import dataclasses

    from hopqa.methods.base import method_config

    options = dataclasses.asdict(method_config("gensco-stop", shots=3))
    older = {k: v for k, v in options.items() if k not in ("restated_retries", "answer")}
    recorded = {"dataset": "musique", "method": "gensco-stop", "options": older, "llm": "a"}
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(recorded))
    check_config(run, {**recorded, "options": options})  # both new options at their defaults
    cases = {"restated_retries": dict(options, restated_retries=1), "shots": dict(options, shots=2)}
    for name, changed in cases.items():
        with pytest.raises(RunConfigMismatch, match="options"):
            check_config(run, {**recorded, "options": changed})
    gone = {k: v for k, v in options.items() if k != "seed"}
    with pytest.raises(RunConfigMismatch, match="options"):
        check_config(run, {**recorded, "options": gone})
    with pytest.raises(RunConfigMismatch, match="llm, options"):  # another key differs too: strict
        check_config(run, {**recorded, "options": options, "llm": "b"})
    for method in ("no-such-method", None):  # defaults unknown: strict
        (run / "config.json").write_text(json.dumps({**recorded, "method": method}))
        with pytest.raises(RunConfigMismatch, match="options"):
            check_config(run, {**recorded, "method": method, "options": options})
    assert json.loads((run / "config.json").read_text())["options"] == older  # never rewritten

def test_open_setting_uses_shared_retriever(tmp_path):
    from hopqa.retrieval.bm25 import BM25Retriever

    corpus = [p for e in examples(6) for p in e.paragraphs]
    method = build_method("retrieve-then-read", echo_llm(), BM25Retriever.build(corpus), k=1)
    evaluate(method, examples(3), tmp_path / "run", setting="open", progress=False)
    recs = read_results(tmp_path / "run" / "results.jsonl")
    assert recs["q1"]["passages"][0]["title"] == "Item k1z" and recs["q1"]["setting"] == "open"


def test_concurrent_workers_write_every_line_once(tmp_path):
    method = build_method("direct", echo_llm(max_concurrency=4, delay=0.02))
    evaluate(method, examples(30), tmp_path / "run", workers=6, progress=False)
    ids = [json.loads(x)["id"] for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"q{i}" for i in range(30))


SCRIPT = textwrap.dedent('''
    import sys
    import threading
    sys.path.insert(0, {tests!r})
    from test_runner import examples, echo_llm
    from hopqa.evaluation.runner import evaluate
    from hopqa.build import build_method
    written = []

    def on_record(rec):
        written.append(rec["id"])
        if len(written) == {stop_after}:  # tell the test, then hold until killed (workers go on)
            print("written", len(written), flush=True)
            threading.Event().wait()

    method = build_method("direct", echo_llm(max_concurrency=2, delay=0.02))
    evaluate(method, examples(40), {run!r}, workers=2, progress=False, config={{"k": 1}}, on_record=on_record)
''')


def test_resume_after_kill_minus_9(tmp_path):
    """Killed with questions in flight right after the 8th line (the child says when: no timing),
    then resumed: every question once, nothing answered before lost."""
    run = tmp_path / "run"
    tests = os.path.dirname(__file__)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(tests=tests, run=str(run), stop_after=8)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "written 8\n"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    results = run / "results.jsonl"
    done_before = set(read_results(results))
    assert len(done_before) == 8 and len(results.read_text().splitlines()) == 8
    with open(results, "a") as f:  # as if the kill had landed mid-write
        f.write('{"id": "q39", "predic')
    subprocess.run([sys.executable, "-c", SCRIPT.format(tests=tests, run=str(run), stop_after=0)], check=True)
    ids = [json.loads(x)["id"] for x in results.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 40  # no duplicate, no missing
    assert done_before <= set(ids)


# -- config.json: atomic, damage reported --------------------------------------------------------
def test_config_is_written_atomically(tmp_path, monkeypatch):
    """A kill between writing and renaming leaves no config.json (not an empty or partial one)."""
    import hopqa.config

    def killed(src, dst):
        raise KeyboardInterrupt  # the process dies here

    monkeypatch.setattr(hopqa.config.os, "replace", killed)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        evaluate(build_method("direct", echo_llm()), examples(1), run, progress=False, config={"llm": "a"})
    assert not (run / "config.json").exists()
    assert [p.name for p in run.iterdir() if p.name != ".lock"] == []  # no temporary file left behind
    monkeypatch.undo()
    evaluate(build_method("direct", echo_llm()), examples(1), run, progress=False, config={"llm": "a"})
    assert json.loads((run / "config.json").read_text()) == {"llm": "a"}


@pytest.mark.parametrize("content,problem", [
    ("", "it is empty"),
    ('{"dataset": "mus', "not valid JSON"),
    ("[1, 2]", "holds a JSON list, not an object"),
    (b"\xff\xfe{}", "not valid JSON"),
])
def test_damaged_config_is_a_clear_error(tmp_path, content, problem):
    run = tmp_path / "run"
    run.mkdir()
    path = run / "config.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    method = build_method("direct", echo_llm())
    with pytest.raises(RunConfigDamaged) as e:
        evaluate(method, examples(1), run, progress=False, config={"llm": "a"})
    message = str(e.value)
    assert str(path) in message and problem in message and "\n" not in message
    assert "delete it" in message and "--out" in message
    with pytest.raises(RunConfigDamaged):
        check_config(run, {"llm": "a"})  # the CLI asks before loading a model
    assert not (run / "results.jsonl").exists()  # nothing was run
    path.unlink()  # what the message says: the current configuration is adopted
    evaluate(method, examples(1), run, progress=False, config={"llm": "a"})
    assert json.loads(path.read_text()) == {"llm": "a"} and len(read_results(run / "results.jsonl")) == 1


def test_check_config_writes_nothing(tmp_path):
    check_config(tmp_path / "run", {"llm": "a"})
    assert not (tmp_path / "run").exists()
    evaluate(build_method("direct", echo_llm()), examples(1), tmp_path / "run", progress=False, config={"llm": "a"})
    check_config(tmp_path / "run", {"llm": "a"})
    with pytest.raises(RunConfigMismatch, match="llm"):
        check_config(tmp_path / "run", {"llm": "b"})


# -- one line per id once a run completes ---------------------------------------------------------
def test_retry_failed_leaves_one_line_per_id(tmp_path):
    def flaky(request):
        if "item k1z?" in request.text():
            raise RuntimeError("boom")
        return "item " + request.text().split("What is item ")[-1].split("?")[0]

    run = tmp_path / "run"
    evaluate(build_method("direct", ScriptedLLM(replies=flaky)), examples(3), run, progress=False)
    evaluate(build_method("direct", echo_llm()), examples(3), run, progress=False, retry_failed=True)
    lines = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines] == ["q0", "q1", "q2"]  # first positions kept
    assert [x["status"] for x in lines] == ["ok", "ok", "ok"]  # the newest line won


def test_compaction_keeps_newest_and_drops_bad_lines(tmp_path):
    path = tmp_path / "results.jsonl"
    ok = {"status": "ok", "prediction": "x"}
    rows = [{"id": "a", "v": 1, **ok}, {"id": "b", "v": 1, **ok}, {"id": "a", "v": 2, **ok}]
    path.write_text(json.dumps(rows[0]) + "\nnot json\n" + json.dumps(rows[1]) + "\n" + json.dumps(rows[2]) + "\n"
                    + '{"id": "c", "v"')
    records = compact_results(path)
    assert records == {"a": rows[2], "b": rows[1]}
    assert path.read_text() == json.dumps(rows[2]) + "\n" + json.dumps(rows[1]) + "\n"
    before = path.stat().st_mtime_ns, path.stat().st_ino
    assert compact_results(path) == records
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == before  # already compact: not rewritten


def test_compaction_interrupted_keeps_the_log(tmp_path, monkeypatch):
    """A kill during compaction leaves the append-only log as it was (the rename never happened)."""
    import hopqa.config

    path = tmp_path / "results.jsonl"
    log = "".join(json.dumps({"id": i, "v": v, "status": "ok", "prediction": ""}) + "\n" for i, v in [("a", 1), ("a", 2)])
    path.write_text(log)

    def killed(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(hopqa.config.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        compact_results(path)
    assert path.read_text() == log and [p.name for p in tmp_path.iterdir()] == ["results.jsonl"]


def test_every_completed_run_is_compacted(tmp_path):
    run = tmp_path / "run"
    evaluate(build_method("direct", echo_llm()), examples(2), run, progress=False)
    with open(run / "results.jsonl", "a") as f:  # e.g. left by an older hopqa's --retry-failed
        f.write(json.dumps({**read_results(run / "results.jsonl")["q0"], "prediction": "newer"}) + "\n")
    evaluate(build_method("direct", echo_llm()), examples(2), run, progress=False)  # nothing to answer
    lines = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert [(x["id"], x["prediction"]) for x in lines] == [("q0", "newer"), ("q1", "item k1z")]


def test_one_run_per_directory(tmp_path):
    run = tmp_path / "run"
    inner: list[Exception] = []

    def meanwhile(rec):  # a second run on the same directory while the first one writes
        try:
            evaluate(build_method("direct", echo_llm()), examples(1), run, progress=False)
        except RunDirectoryBusy as exc:
            inner.append(exc)

    evaluate(build_method("direct", echo_llm()), examples(1), run, progress=False, on_record=meanwhile)
    assert len(inner) == 1 and "another run is writing" in str(inner[0]) and str(run) in str(inner[0])
    evaluate(build_method("direct", echo_llm()), examples(2), run, progress=False)  # released afterwards
    assert len(read_results(run / "results.jsonl")) == 2


@pytest.mark.parametrize("workers", [0, -3, 1.5, True])
def test_bad_workers_are_refused(tmp_path, workers):
    with pytest.raises(ValueError, match="workers must be a whole number of at least 1"):
        evaluate(build_method("direct", echo_llm()), examples(1), tmp_path / "run", progress=False, workers=workers)


def test_a_question_whose_scoring_failed_has_the_fields_of_every_line(tmp_path, monkeypatch):
    from hopqa.evaluation import runner

    score = runner.score_answer

    def flaky(prediction, *args, **kwargs):
        if prediction == "item k1z":
            raise ZeroDivisionError("bad gold")
        return score(prediction, *args, **kwargs)

    monkeypatch.setattr(runner, "score_answer", flaky)
    summary = evaluate(build_method("direct", echo_llm()), examples(2), tmp_path / "run", progress=False)
    recs = read_results(tmp_path / "run" / "results.jsonl")
    assert summary.failed == 1 and list(recs["q1"]) == list(recs["q0"])  # same fields, same order
    failed = recs["q1"]
    assert (failed["status"], failed["error"], failed["prediction"], failed["metrics"], failed["passages"],
            failed["trace"], failed["judge"]) == ("failed", "ZeroDivisionError: bad gold", "", {}, [], None, None)
    assert failed["method"] == "direct" and failed["setting"] == "distractor" and failed["usage"]["llm_calls"] == 0
    assert failed["question_words"] == 4 and failed["gold"] == ["item k1z"]


def _trace_with(*statuses: str) -> dict:
    from hopqa.trace import Trace

    trace = Trace(question="q")
    with trace.activate():
        for i, status in enumerate(statuses):
            with trace.step("step") as step:
                step.record_parse(f"field{i}", status)
    return trace.to_dict()


def test_parse_rate_is_pooled_over_structured_outputs(tmp_path):
    from hopqa.evaluation.report import markdown_table, collect_rows
    from hopqa.evaluation.runner import parse_rates, summarize

    records = [
        {"id": "a", "status": "ok", "metrics": {"em": 1.0}, "trace": _trace_with("direct", "direct", "direct")},
        {"id": "b", "status": "ok", "metrics": {"em": 0.0}, "parse": {"direct": 0, "fallback": 1, "failed": 0},
         "trace": None},  # the counts a line carries win over its trace
        {"id": "c", "status": "ok", "metrics": {"em": 0.0}, "trace": _trace_with("failed")},
        {"id": "d", "status": "ok", "metrics": {"em": 0.0}, "trace": _trace_with()},
    ]
    assert parse_rates(records) == {"parse_rate": 0.6, "parse_fallback_rate": 0.2}
    assert parse_rates(records[3:]) == {}  # no structured output: no rate, not 0%
    summary = summarize(records, tmp_path)
    assert summary.metrics["parse_rate"] == 0.6 and summary.metrics["em"] == 0.25

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(
        json.dumps({**r, "dataset": "toy", "split": "dev", "setting": "open", "method": "m"}) + "\n" for r in records))
    table = markdown_table(collect_rows([run]))
    header, _, row = table.splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["parsed"].startswith("60.0% ±") and cells["parse fallback"].startswith("20.0% ±")


def test_results_lines_carry_parse_counts(tmp_path):
    method = build_method("self-ask", ScriptedLLM(replies=["No.\nSo the final answer is: item k0z"]), k=2, shots=0)
    evaluate(method, examples(1), tmp_path / "run", progress=False)
    record = read_results(tmp_path / "run" / "results.jsonl")["q0"]
    assert record["parse"] == {"direct": 1, "fallback": 0, "failed": 0}


def test_the_report_names_a_chosen_search(tmp_path):
    """A run whose config.json records --retriever / --rerank shows them in the setting column;
    a run without (BM25, the default) or with an unreadable config shows the setting alone."""
    from hopqa.evaluation.report import collect_rows

    line = json.dumps({"id": "a", "status": "ok", "metrics": {"em": 1.0}, "dataset": "toy", "split": "dev",
                       "setting": "open", "method": "m"}) + "\n"
    settings = {}
    for name, config in [("hybrid", {"search": {"retriever": "hybrid", "rerank": "bi-encoder", "rerank_depth": 8}}),
                         ("rerank-only", {"search": {"rerank": "llm", "rerank_depth": 20}}),
                         ("plain", {"method": "m"}), ("damaged", None)]:
        run = tmp_path / name
        run.mkdir()
        (run / "results.jsonl").write_text(line)
        (run / "config.json").write_text(json.dumps(config) if config is not None else "{torn")
        settings[name] = collect_rows([run])[0].setting
    assert settings == {"hybrid": "open (hybrid, rerank bi-encoder)", "rerank-only": "open (bm25, rerank llm)",
                        "plain": "open", "damaged": "open"}


def test_bertscore_scorer_adds_its_metric_to_every_record(tmp_path):
    class Scorer:
        def __init__(self):
            self.calls = []

        def score(self, prediction, golds):
            self.calls.append((prediction, list(golds)))
            return 0.75

    scorer = Scorer()
    s = evaluate(build_method("direct", echo_llm()), examples(3), tmp_path / "run", progress=False, bertscore=scorer)
    lines = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert all(r["metrics"]["bertscore"] == 0.75 and "rouge_l" in r["metrics"] for r in lines)
    assert len(scorer.calls) == 3 and s.metrics["bertscore"] == 0.75


def test_metric_dependencies_are_loaded_before_the_first_question(tmp_path, monkeypatch):
    """No worker waits on rouge-score's import (with nltk and scipy) in the middle of a run: it is
    loaded before the first LLM call (issue 32: it stalled all 8 workers for 1.2 s)."""
    from hopqa.evaluation import metrics

    monkeypatch.setattr(metrics, "_rouge", None)
    seen = []

    def reply(r):
        seen.append(metrics._rouge is not None)
        return "item " + r.text().split("What is item ")[-1].split("?")[0]

    evaluate(build_method("retrieve-then-read", ScriptedLLM(replies=reply), k=2), examples(3), tmp_path / "run",
             workers=2, progress=False)
    assert seen and all(seen)


@pytest.mark.parametrize("with_scorer", [False, True])
def test_answers_are_scored_off_the_workers_unless_a_model_scores(tmp_path, monkeypatch, with_scorer):
    """Without a judge or BERTScore the main thread scores each answer while the worker goes on
    to the next question (issue 32); a model-backed scorer still runs on the workers."""
    import threading

    from hopqa.evaluation import runner

    score, threads = runner.score_answer, []

    def spy(*args, **kwargs):
        threads.append(threading.current_thread() is threading.main_thread())
        return score(*args, **kwargs)

    class Scorer:
        def score(self, prediction, golds):
            return 0.5

    monkeypatch.setattr(runner, "score_answer", spy)
    evaluate(build_method("direct", echo_llm()), examples(4), tmp_path / "run", workers=2, progress=False,
             bertscore=Scorer() if with_scorer else None)
    recs = read_results(tmp_path / "run" / "results.jsonl")
    assert len(recs) == 4 and all(r["metrics"]["em"] == 1.0 for r in recs.values())
    assert threads == [not with_scorer] * 4
