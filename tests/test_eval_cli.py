"""hopqa eval and hopqa report as a user runs them, on the real embedded model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
SMOL = "embedded:smollm2-135m"


def hopqa(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOPQA_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "hopqa.cli", *args], capture_output=True, text=True, env=env,
                          timeout=900)


def test_eval_then_report_then_deterministic_rerun(tmp_path, data_dir):
    home = tmp_path / "home"
    args = ["eval", "--dataset", "musique", "--method", "direct,retrieve-then-read", "--limit", "2",
            "--llm", SMOL, "--no-progress", "--data-dir", str(data_dir)]
    r = hopqa(*args, "--out", str(tmp_path / "runs"), home=home)
    assert r.returncode == 0, r.stderr
    assert "| musique/dev | distractor | direct |" in r.stdout and "retrieve-then-read" in r.stdout
    run = tmp_path / "runs" / "musique-dev-distractor" / "retrieve-then-read"
    lines = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(x["status"] == "ok" and x["trace"] for x in lines)
    assert "support_recall" in lines[0]["metrics"]
    first = json.loads((run / "summary.json").read_text())

    rep = hopqa("report", str(tmp_path / "runs"), "--out", str(tmp_path / "report"), "--stratify-length",
                "--baseline", "direct", "--by", "hops", home=home)
    assert rep.returncode == 0, rep.stderr
    assert (tmp_path / "report" / "report.md").read_text().count("| musique/dev |") >= 2
    assert " ±" in rep.stdout and "| hops=" in rep.stdout  # intervals, and the breakdown by hop count
    compared = json.loads((tmp_path / "report" / "report.json").read_text())["comparisons"]
    f1 = [c for c in compared if c["metric"] == "f1" and c["stratum"] == "all"]
    assert [(c["method"], c["baseline"], c["n"]) for c in f1] == [("retrieve-then-read", "direct", 2)]
    assert f1[0]["low"] <= f1[0]["diff"] <= f1[0]["high"] and 0 <= f1[0]["p_value"] <= 1
    html = (tmp_path / "report" / "report.html").read_text()
    assert "<table>" in html and "data:image/png;base64," in html
    assert (tmp_path / "report" / "score_vs_cost.png").stat().st_size > 1000

    # same command, fresh output directory: every call comes from the cache, same numbers
    again = hopqa(*args, "--out", str(tmp_path / "runs2"), home=home)
    assert again.returncode == 0, again.stderr
    second = json.loads((tmp_path / "runs2" / "musique-dev-distractor" / "retrieve-then-read" / "summary.json").read_text())
    assert second["metrics"] == first["metrics"]
    assert second["cost"]["cache_hit_rate"] == 1.0 and second["cost"]["prompt_tokens"] == 0

    # resuming the finished run makes no call at all
    rerun = hopqa(*args, "--out", str(tmp_path / "runs"), home=home)
    assert rerun.returncode == 0
    assert len((run / "results.jsonl").read_text().splitlines()) == 2


def test_eval_open_setting_and_usage_errors(tmp_path, data_dir, hopqa_home, demo_index):
    r = hopqa("eval", "--dataset", "bamboogle", "--split", "test", "--setting", "open", "--method", "retrieve-then-read",
              "--limit", "1", "--llm", SMOL, "--no-progress", "--out", str(tmp_path / "runs"), home=hopqa_home)
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "runs" / "bamboogle-test-open" / "retrieve-then-read" / "results.jsonl").read_text())
    assert rec["setting"] == "open" and len(rec["passages"]) == 5
    bad = hopqa("eval", "--dataset", "musique", "--method", "nope", home=hopqa_home)
    assert bad.returncode == 2 and "unknown method" in bad.stderr
    bad = hopqa("eval", "--dataset", "nope", "--method", "direct", home=hopqa_home)
    assert bad.returncode == 2 and "unknown dataset" in bad.stderr


def test_eval_on_the_users_own_question_file(tmp_path, hopqa_home, demo_index):
    with_paragraphs = tmp_path / "my_questions.jsonl"
    rows = [
        {"id": "q1", "question": "Who directed Titanic?", "answer": "James Cameron",
         "paragraphs": [{"title": "Titanic (1997 film)", "text": "Titanic is a 1997 film directed by James Cameron.",
                         "is_supporting": True},
                        {"title": "Paris", "text": "Paris is the capital of France."}]},
        {"question": "What is the capital of France?", "answers": ["Paris", "Paris, France"],
         "paragraphs": [{"title": "Paris", "text": "Paris is the capital of France."}],
         "supporting_titles": ["Paris"]},
    ]
    with_paragraphs.write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[1]) + "\n"
                               + json.dumps({"answer": "no question here"}) + "\n")
    out = tmp_path / "runs"
    r = hopqa("eval", "--dataset", str(with_paragraphs), "--method", "retrieve-then-read", "--llm", SMOL,
              "--no-progress", "--k", "2", "--out", str(out), home=hopqa_home)
    assert r.returncode == 0, r.stderr
    assert f"{with_paragraphs}:3" in r.stderr and "question" in r.stderr  # the bad line, named and skipped
    (run,) = [p for p in out.glob("*/retrieve-then-read")]
    recs = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert [x["id"] for x in recs][0] == "q1" and len(recs) == 2
    assert all(x["status"] == "ok" for x in recs)
    assert recs[0]["gold"] == ["James Cameron"] and recs[1]["gold"] == ["Paris", "Paris, France"]
    assert recs[1]["metrics"]["support_recall"] == 1.0  # by title: the pool is that one paragraph

    no_paragraphs = tmp_path / "open.csv"
    no_paragraphs.write_text("question,answer\nWho directed Titanic?,James Cameron\n")
    bad = hopqa("eval", "--dataset", str(no_paragraphs), "--method", "retrieve-then-read", "--llm", SMOL,
                "--no-progress", "--out", str(out), home=hopqa_home)
    assert bad.returncode == 2 and "--setting open" in bad.stderr
    ok = hopqa("eval", "--dataset", str(no_paragraphs), "--setting", "open", "--method", "retrieve-then-read",
               "--llm", SMOL, "--no-progress", "--out", str(out), home=hopqa_home)
    assert ok.returncode == 0, ok.stderr
    missing = hopqa("eval", "--dataset", str(tmp_path / "nope.jsonl"), "--method", "direct", home=hopqa_home)
    assert missing.returncode == 2 and "nope.jsonl" in missing.stderr
