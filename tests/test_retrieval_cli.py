"""Dense, hybrid and reranked search from the command line: hopqa index --kind, --index of any
kind, --retriever, --rerank (subprocesses, a private HOPQA_HOME; the slow tests load the real
all-MiniLM-L6-v2 and SmolLM2)."""

from __future__ import annotations

import json

import pytest

from hopqa.corpus import write_corpus
from tests.test_cli import SMOL, corpus, hopqa  # noqa: F401 (corpus: the fixture)

QUESTION = "Who directed the film that won Best Picture at the 1998 Oscars?"


def _retrievers(answer: dict) -> set[str]:
    """The retriever names of every search in a serialised trace."""
    names: set[str] = set()
    stack = [answer["trace"]]
    while stack:
        step = stack.pop()
        names.update(r["retriever"] for r in step.get("retrievals") or ())
        stack.extend(step.get("children") or ())
    return names


def test_search_options_are_checked_before_anything_loads(tmp_path, corpus):
    r = hopqa("index", str(corpus), "--out", str(tmp_path / "i"), "--embedder", "x", home=tmp_path)
    assert r.returncode == 2 and "--embedder and --faiss are for --kind dense or hybrid" in r.stderr
    r = hopqa("index", str(corpus), "--out", str(tmp_path / "i"), "--kind", "sparse", home=tmp_path)
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = hopqa("eval", "--dataset", "musique", "--limit", "1", "--method", "retrieve-then-read", "--retriever", "dense",
              "--llm", SMOL, "--out", str(tmp_path / "runs"), home=tmp_path)
    assert r.returncode == 2 and "distractor setting searches each question's own paragraphs" in r.stderr
    r = hopqa("ask", QUESTION, "--index", str(tmp_path), "--method", "retrieve-then-read", "--llm", SMOL, home=tmp_path)
    assert r.returncode == 2 and f"no index in {tmp_path}" in r.stderr


@pytest.mark.slow
def test_dense_index_from_the_cli_answers_and_refuses_another_corpus(tmp_path, corpus):
    out = tmp_path / "dense"
    r = hopqa("index", str(corpus), "--out", str(out), "--kind", "dense", home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "indexed 3 passages" in r.stdout and "dense:all-MiniLM-L6-v2" in r.stdout
    assert "corpus.jsonl:4" in r.stderr  # the broken corpus line is reported, not fatal
    meta = json.loads((out / "meta.json").read_text())
    assert meta["kind"] == "dense" and meta["faiss"] == "flat" and meta["fingerprint"]
    assert list((tmp_path / "cache" / "embeddings").glob("all-MiniLM-L6-v2-*/chunk-000000.npy"))
    r = hopqa("ask", QUESTION, "--index", str(out), "--method", "retrieve-then-read", "--k", "2", "--llm", SMOL,
              "--json", home=tmp_path)
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert _retrievers(answer) == {"dense:all-MiniLM-L6-v2"}
    assert answer["passages"][0]["title"] == "Titanic (1997 film)"
    assert answer["passages"][0]["score"] > answer["passages"][1]["score"]
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "9", "title": "Oslo", "text": "Oslo is the capital of Norway."}\n')
    r = hopqa("ask", QUESTION, "--index", str(out), "--corpus", str(other), "--llm", SMOL, home=tmp_path)
    assert r.returncode == 2 and "not from the content of" in r.stderr and "--kind dense" in r.stderr
    r = hopqa("ask", QUESTION, "--index", str(out), "--retriever", "bm25", "--llm", SMOL, home=tmp_path)
    assert r.returncode == 2 and "an index decides its own kind" in r.stderr


@pytest.mark.slow
def test_eval_open_setting_with_a_hybrid_retriever_and_a_reranker(tmp_path):
    """MuSiQue's first two dev questions in the open setting over their own paragraphs as a
    corpus, searched by RRF of BM25 and MiniLM, then reranked by MiniLM cosine (bi-encoder):
    every search of the trace names both, and the run's config records the choice."""
    from hopqa.datasets import load_dataset

    examples = load_dataset("musique", "dev", limit=2)
    corpus = tmp_path / "two.jsonl"
    write_corpus([p for ex in examples for p in ex.paragraphs], corpus)
    runs = tmp_path / "runs"
    r = hopqa("eval", "--dataset", "musique", "--limit", "2", "--setting", "open", "--corpus", str(corpus),
              "--retriever", "hybrid", "--rerank", "bi-encoder", "--rerank-depth", "8", "--method",
              "retrieve-then-read", "--llm", SMOL, "--out", str(runs), "--no-progress", home=tmp_path)
    assert r.returncode == 0, r.stderr
    run = runs / "musique-dev-open" / "retrieve-then-read"
    config = json.loads((run / "config.json").read_text())
    assert config["search"] == {"retriever": "hybrid", "rerank": "bi-encoder", "rerank_depth": 8}
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and not any(row.get("error") for row in rows)
    name = "hybrid(bm25+dense:all-MiniLM-L6-v2)+rerank(bi-encoder:all-MiniLM-L6-v2)"
    assert all(_retrievers(row) == {name} for row in rows)
    assert all(len(row["passages"]) == 5 for row in rows)
    report = hopqa("report", str(run), "--no-plots", "--out", str(tmp_path / "report"), home=tmp_path)
    assert report.returncode == 0 and "open (hybrid, rerank bi-encoder)" in report.stdout, report.stderr
    # the same run again with another search is refused, not mixed into these results
    r = hopqa("eval", "--dataset", "musique", "--limit", "2", "--setting", "open", "--corpus", str(corpus),
              "--retriever", "dense", "--method", "retrieve-then-read", "--llm", SMOL, "--out", str(runs),
              "--no-progress", home=tmp_path)
    assert r.returncode == 2 and "differs in: search" in r.stderr


def _ask_reranked(home, corpus, rerank):
    """``hopqa ask --json`` on SmolLM2 over ``corpus``, BM25's 3 best reranked by ``rerank``, 2 kept."""
    r = hopqa("ask", QUESTION, "--corpus", str(corpus), "--rerank", rerank, "--rerank-depth", "3", "--k", "2",
              "--method", "retrieve-then-read", "--llm", SMOL, "--json", home=home)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _llm_calls(trace):
    """Every LLM call recorded anywhere in ``trace``."""
    stack = [trace]
    while stack:
        step = stack.pop()
        yield from step.get("llm_calls") or ()
        stack.extend(step.get("children") or ())


@pytest.mark.slow
def test_the_llm_reranker_judges_with_the_model_and_its_calls_are_traced(tmp_path, corpus):
    """--rerank llm with SmolLM2: every passage BM25 found is rated by the model in the trace
    (the calls count in the cost), and the search is named after the reranker."""
    answer = _ask_reranked(tmp_path, corpus, "llm")
    (name,) = _retrievers(answer)
    assert name.startswith("bm25+rerank(llm:") and "smollm2" in name
    prompts = [c["prompt"] for c in _llm_calls(answer["trace"]) if "How useful is this passage" in c.get("prompt", "")]
    assert 1 <= len(prompts) <= 3 and answer["usage"]["llm_calls"] >= len(prompts) + 1
    assert len(answer["passages"]) <= 2


def test_setup_builds_the_demo_corpus_index_of_each_retriever_asked(tmp_path, monkeypatch, capsys):
    """hopqa setup builds the dense and hybrid demo indexes (or those --retriever names, or
    none with --bm25-only) through corpus_retriever (the real build embeds 13,529 passages:
    stubbed here; benchmarks/retrieval.py times it)."""
    import hopqa.build
    import hopqa.demo
    from hopqa.cli import main

    asked = []

    class Built:
        def __init__(self, kind):
            self.name, self.size = f"{kind}:stub", 1

    monkeypatch.setattr(hopqa.demo, "demo_retriever", lambda home: Built("bm25"))
    monkeypatch.setattr(hopqa.build, "corpus_retriever", lambda home, kind: asked.append(kind) or Built(kind))
    assert main(["setup", "--home", str(tmp_path)]) == 0  # by default: dense and hybrid
    assert asked == ["dense", "hybrid"]
    out = capsys.readouterr().out
    assert "dense index (dense:stub)" in out and "hybrid index (hybrid:stub)" in out
    assert main(["setup", "--home", str(tmp_path), "--retriever", "hybrid"]) == 0 and asked[2:] == ["hybrid"]
    assert main(["setup", "--home", str(tmp_path), "--bm25-only"]) == 0 and len(asked) == 3

    def unavailable(home, kind):
        raise hopqa.build.BuildError("dense retrieval needs sentence-transformers")

    monkeypatch.setattr(hopqa.build, "corpus_retriever", unavailable)
    assert main(["setup", "--home", str(tmp_path)]) == 0  # by default a note, not a failure
    assert "no dense index of the demo corpus: dense retrieval needs" in capsys.readouterr().err
    assert main(["setup", "--home", str(tmp_path), "--retriever", "dense"]) == 2


@pytest.mark.slow
def test_the_expected_score_llm_reranker_weighs_each_rating_with_the_model(tmp_path, corpus):
    """--rerank llm-expected with SmolLM2: each passage's score is the rating expected under the
    model's probabilities of the replies 0-10 (one traced loglikelihood call a passage, 11
    continuations through the chat turn's end), between 0 and 10, and nothing is generated for it."""
    answer = _ask_reranked(tmp_path, corpus, "llm-expected")
    (name,) = _retrievers(answer)
    assert name.startswith("bm25+rerank(llm-expected:") and "smollm2" in name
    calls = list(_llm_calls(answer["trace"]))
    judged = [c for c in calls if "How useful is this passage" in c.get("context", "")]
    assert 1 <= len(judged) <= 3 and not any("How useful is this passage" in c.get("prompt", "") for c in calls)
    for call in judged:
        assert call["type"] == "loglikelihood" and call["context"].endswith("<|im_start|>assistant\n")
        assert call["continuations"] == [f"{r}<|im_end|>\n" for r in range(11)] and len(call["totals"]) == 11
    scores = [p["score"] for p in answer["passages"]]
    assert len(scores) <= 2 and all(0.0 <= s <= 10.0 for s in scores) and scores == sorted(scores, reverse=True)
