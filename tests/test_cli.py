"""The hopqa command as a user runs it (subprocesses, a private HOPQA_HOME)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SMOL = "embedded:smollm2-135m"
QUESTION = "Who is the director of the film that won Best Picture at the 1998 Oscars?"


def hopqa(*args: str, home: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOPQA_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "hopqa.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def corpus(tmp_path) -> Path:
    p = tmp_path / "corpus.jsonl"
    rows = [
        {"id": "1", "title": "Titanic (1997 film)", "text": "Titanic is a 1997 American film directed by James Cameron. "
         "It won the Academy Award for Best Picture at the 70th Academy Awards in 1998."},
        {"id": "2", "title": "James Cameron", "text": "James Cameron is a Canadian filmmaker."},
        {"id": "3", "title": "Paris", "text": "Paris is the capital of France."},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken line\n")
    return p


def test_usage_errors_exit_2(tmp_path):
    r = hopqa("ask", "", home=tmp_path)
    assert r.returncode == 2 and "question is empty" in r.stderr
    r = hopqa("ask", "hi", "--method", "nope", home=tmp_path)
    assert r.returncode == 2 and "unknown method" in r.stderr and "retrieve-then-read" in r.stderr
    r = hopqa("ask", "hi", "--corpus", str(tmp_path / "missing.jsonl"), home=tmp_path)
    assert r.returncode == 2 and "no corpus file" in r.stderr
    r = hopqa("ask", "hi", "--set", "bogus=1", home=tmp_path)
    assert r.returncode == 2 and "--set expects" in r.stderr
    r = hopqa("ask", "hi", "--llm", "embedded:no-such-model", "--method", "direct", home=tmp_path)
    assert r.returncode == 2 and "unknown embedded model" in r.stderr


def test_datasets_lists_every_dataset(tmp_path, data_dir):
    r = hopqa("datasets", "--data-dir", str(data_dir), home=tmp_path)
    assert r.returncode == 0, r.stderr
    for name in ["musique", "hotpotqa", "2wikimultihopqa", "adversarial_hotpotqa", "bamboogle", "freshqa",
                 "fever", "open_squad"]:
        assert name in r.stdout
    assert "200" in r.stdout


def test_methods_lists_options(tmp_path):
    r = hopqa("methods", home=tmp_path)
    assert r.returncode == 0 and "retrieve-then-read" in r.stdout and "k=5" in r.stdout


def test_index_command(tmp_path, corpus):
    r = hopqa("index", str(corpus), "--out", str(tmp_path / "idx"), home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "indexed 3 passages" in r.stdout
    assert "corpus.jsonl:4" in r.stderr  # the malformed line is reported, not fatal


@pytest.mark.slow
def test_ask_prints_answer_passages_and_cost(tmp_path, corpus):
    r = hopqa("ask", QUESTION, "--llm", SMOL, "--corpus", str(corpus), "--k", "2", home=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("Answer: ")
    assert "Passages:\n  [1] Titanic (1997 film): Titanic is a 1997" in out
    assert "Cost: 1 LLM calls (0 cached)" in out and "1 retrieval calls" in out
    # the second run is answered from the cache
    again = hopqa("ask", QUESTION, "--llm", SMOL, "--corpus", str(corpus), "--k", "2", home=tmp_path)
    assert "Cost: 1 LLM calls (1 cached), 0 prompt + 0 completion tokens" in again.stdout
    assert again.stdout.splitlines()[0] == out.splitlines()[0]
    fresh = hopqa("ask", QUESTION, "--llm", SMOL, "--corpus", str(corpus), "--k", "2", "--no-cache", home=tmp_path)
    assert "(0 cached)" in fresh.stdout


@pytest.mark.slow
def test_ask_json_has_trace_and_usage(tmp_path, corpus):
    r = hopqa("ask", QUESTION, "--llm", SMOL, "--corpus", str(corpus), "--method", "genread", "--json",
              home=tmp_path)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["method"] == "genread" and d["answer"] and d["error"] is None
    assert d["usage"]["llm_calls"] == 2 and d["usage"]["prompt_tokens"] > 0
    kinds = [c["kind"] for c in d["trace"]["children"]]
    assert kinds == ["generate_documents", "read"]
    assert d["trace"]["children"][0]["llm_calls"][0]["prompt"].startswith("Generate a background document")


@pytest.mark.slow
def test_ask_on_demo_corpus_with_trace(hopqa_home, demo_index):
    r = hopqa("ask", QUESTION, "--llm", SMOL, "--trace", home=hopqa_home)
    assert r.returncode == 0, r.stderr
    assert "Passages:" in r.stdout and "Trace:" in r.stdout and "- retrieve" in r.stdout


@pytest.mark.qwen
def test_default_ask_uses_qwen_and_demo_corpus(hopqa_home, demo_index):
    """`hopqa ask QUESTION` with no options: the README's main job."""
    r = hopqa("ask", QUESTION, home=hopqa_home, timeout=1200)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Answer: ") and "Passages:" in r.stdout and "LLM calls" in r.stdout
