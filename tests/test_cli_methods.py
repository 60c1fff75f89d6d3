"""The published methods through the command line, as a user runs them, on the embedded model:
``hopqa eval`` with GenSco's two variants and Self-DC, ``--scorer-llm``, ``hopqa demos``."""

from __future__ import annotations

import json

import pytest

from tests.test_eval_cli import SMOL, hopqa

pytestmark = pytest.mark.slow


def _records(run) -> list[dict]:
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def test_eval_gensco_max_and_stop(tmp_path, data_dir, hopqa_home):
    # free text: under a schema SmolLM2 copies the reply's example as its first sub-question on
    # this question, which is no sub-question, so the walk would stop before scoring any passage
    r = hopqa("eval", "--dataset", "2wikimultihopqa", "--method", "gensco-max,gensco-stop", "--limit", "1",
              "--llm", SMOL, "--no-progress", "--data-dir", str(data_dir), "--set", "max_levels=2", "--structured", "off",
              "--out", str(tmp_path / "runs"), home=hopqa_home)
    assert r.returncode == 0, r.stderr
    assert "| gensco-max |" in r.stdout and "| gensco-stop |" in r.stdout
    base = tmp_path / "runs" / "2wikimultihopqa-dev-distractor"
    for name in ("gensco-max", "gensco-stop"):
        rec = _records(base / name)[0]
        assert rec["status"] == "ok", rec.get("error")
        assert rec["passages"]  # GenSco selects at least one passage at level 1
        assert {"precision", "recall", "k_precision", "support_precision", "support_recall", "support_f1"} <= set(
            rec["metrics"])
        cfg = json.loads((base / name / "config.json").read_text())
        assert cfg["scorer_llm"] == SMOL and cfg["llm"] == SMOL


def test_eval_self_dc_counts_retrievals(tmp_path, data_dir, hopqa_home, demo_index):
    r = hopqa("eval", "--dataset", "freshqa", "--split", "test", "--method", "self-dc", "--limit", "1", "--llm", SMOL,
              "--no-progress", "--setting", "open", "--data-dir", str(data_dir), "--set", "document_tokens=48",
              "--out", str(tmp_path / "runs"), home=hopqa_home)
    assert r.returncode == 0, r.stderr
    assert "retrievals/q" in r.stdout and "--judge" in r.stderr  # the note about Acc
    rec = _records(tmp_path / "runs" / "freshqa-test-open" / "self-dc")[0]
    assert rec["status"] == "ok" and rec["trace"]["children"][0]["kind"] == "self-dc"
    assert rec["usage"]["retrieval_calls"] == sum(1 for _ in _walk(rec["trace"], "retrieve-then-read"))


def _walk(node, kind):
    if node.get("kind") == kind:
        yield node
    for c in node.get("children", []):
        yield from _walk(c, kind)


def test_scorer_without_loglikelihood_is_a_usage_error(hopqa_home, demo_index):
    r = hopqa("ask", "--method", "gensco-max", "--llm", SMOL, "--scorer-llm", "openai:some-chat-model@http://127.0.0.1:9/v1",
              "Who directed Titanic?", home=hopqa_home)
    assert r.returncode == 2 and "loglikelihood" in r.stderr
    note = hopqa("ask", "--method", "direct", "--llm", SMOL, "--scorer-llm", SMOL, "Who directed Titanic?", home=hopqa_home)
    assert note.returncode == 0 and "--scorer-llm is ignored" in note.stderr


def test_demos_command_bootstraps_and_resumes(tmp_path, hopqa_home, demo_index, data_dir):
    args = ["demos", "--llm", SMOL, "--data-dir", str(data_dir), "--set", "bootstrap_examples=1", "--set", "depth=0",
            "--set", "samples=1", "--set", "citation_quality=false", "--set", "entailment_delta=false",
            "--set", f"demo_cache={tmp_path}"]
    r = hopqa(*args, home=hopqa_home)
    assert r.returncode == 0, r.stderr
    assert "runs:" in r.stdout and "counts: runs=1" in r.stdout
    files = list(tmp_path.glob("hgot-hotpotqa-train-*.jsonl"))
    assert len(files) == 1 and len(files[0].read_text().splitlines()) == 1
    again = hopqa(*args, home=hopqa_home)
    assert again.returncode == 0 and len(files[0].read_text().splitlines()) == 1


def test_eval_hgot(tmp_path, data_dir, hopqa_home):
    r = hopqa("eval", "--dataset", "musique", "--method", "hgot", "--limit", "1", "--llm", SMOL, "--no-progress",
              "--data-dir", str(data_dir), "--set", "depth=1", "--set", "samples=1", "--set", "max_steps=2",
              "--set", "citation_quality=false", "--set", "entailment_delta=false", "--k", "3",
              "--out", str(tmp_path / "runs"), home=hopqa_home)
    assert r.returncode == 0, r.stderr
    rec = _records(tmp_path / "runs" / "musique-dev-distractor" / "hgot")[0]
    assert rec["status"] == "ok", rec.get("error")
    assert rec["trace"]["children"][0]["kind"] == "traverse" and "| hgot |" in r.stdout
