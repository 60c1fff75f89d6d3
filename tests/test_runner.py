"""The evaluation runner: durable lines, resume after kill -9, failure isolation, config guard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from hopqa.evaluation.runner import RunConfigMismatch, evaluate, read_results
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods import build_method
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


def test_open_setting_uses_shared_retriever(tmp_path):
    from hopqa.retrieval.bm25 import BM25Retriever

    corpus = [p for e in examples(6) for p in e.paragraphs]
    method = build_method("retrieve-then-read", echo_llm(), k=1)
    evaluate(method, examples(3), tmp_path / "run", setting="open", retriever=BM25Retriever.build(corpus),
             progress=False)
    recs = read_results(tmp_path / "run" / "results.jsonl")
    assert recs["q1"]["passages"][0]["title"] == "Item k1z" and recs["q1"]["setting"] == "open"


def test_concurrent_workers_write_every_line_once(tmp_path):
    method = build_method("direct", echo_llm(max_concurrency=4, delay=0.02))
    evaluate(method, examples(30), tmp_path / "run", workers=6, progress=False)
    ids = [json.loads(x)["id"] for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"q{i}" for i in range(30))


SCRIPT = textwrap.dedent('''
    import sys
    sys.path.insert(0, {tests!r})
    from test_runner import examples, echo_llm
    from hopqa.evaluation.runner import evaluate
    from hopqa.methods import build_method
    method = build_method("direct", echo_llm(max_concurrency=2, delay=0.15))
    evaluate(method, examples(40), {run!r}, workers=2, progress=False, config={{"k": 1}})
''')


def test_resume_after_kill_minus_9(tmp_path):
    run = tmp_path / "run"
    script = SCRIPT.format(tests=os.path.dirname(__file__), run=str(run))
    proc = subprocess.Popen([sys.executable, "-c", script])
    results = run / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 8:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = set(read_results(results))
    assert 8 <= len(done_before) < 40
    with open(results, "a") as f:  # as if the kill had landed mid-write
        f.write('{"id": "q39", "predic')
    subprocess.run([sys.executable, "-c", script], check=True)
    ids = [json.loads(x)["id"] for x in results.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 40  # no duplicate, no missing
    assert done_before <= set(ids)
