"""BM25 on tantivy (the streaming engine for large corpora) against bm25s, and the engine choice."""

from __future__ import annotations

import json

import pytest

from hopqa.corpus import write_corpus
from hopqa.retrieval import indexes
from hopqa.retrieval.bm25 import BM25Retriever, NothingToIndexError
from hopqa.retrieval.indexes import build_corpus_index, open_index
from hopqa.retrieval.store import IndexDamagedError
from hopqa.retrieval.tantivy_bm25 import TantivyRetriever
from hopqa.types import Passage
from tests.test_dense import PASSAGES

pytest.importorskip("tantivy")

QUERIES = ["capital of France", "edible fruit of the apple tree", "highest mountain", "river in Africa",
           "Berlin Germany", "The banana genus Musa"]


def test_tantivy_and_bm25s_agree_on_the_top_passage(tmp_path):
    ours = BM25Retriever.build(PASSAGES, progress=False)
    tantivy = TantivyRetriever.build(PASSAGES, tmp_path / "t", progress=False)
    assert tantivy.size == len(PASSAGES) and tantivy.name == "bm25:tantivy"
    for q in QUERIES:
        assert tantivy.search(q, 1)[0].id == ours.search(q, 1)[0].id, q
    hits = tantivy.search("capital of France", 3)
    assert [p.score for p in hits] == sorted((p.score for p in hits), reverse=True) and hits[0].score > 0
    assert tantivy.search("the of", 3) == [] and tantivy.search("", 3) == [] and tantivy.search("zzzz", 3) == []
    assert tantivy.tokens("The Running capitals") == ["run", "capit"]  # bm25s's stopwords and stemmer


def test_the_streaming_build_dedupes_and_reloads(tmp_path):
    twice = [*PASSAGES, PASSAGES[0], Passage("dup", PASSAGES[1].title, "  " + PASSAGES[1].text)]
    r = TantivyRetriever.build(iter(twice), tmp_path / "t", progress=False)
    assert r.size == len(PASSAGES) and r.meta["duplicates_removed"] == 2
    again = TantivyRetriever.load(tmp_path / "t")
    assert [(p.id, p.title, p.text) for p in again.search("capital of Germany", 2)] == [
        (p.id, p.title, p.text) for p in r.search("capital of Germany", 2)]
    with pytest.raises(NothingToIndexError):
        TantivyRetriever.build([Passage("e", "", "  ")], tmp_path / "empty", progress=False)


def test_a_damaged_tantivy_index_is_refused(tmp_path):
    TantivyRetriever.build(PASSAGES, tmp_path / "t", progress=False)
    meta = json.loads((tmp_path / "t" / "meta.json").read_text())
    assert meta["engine"] == "tantivy" and meta["files"] and all(n.startswith("tantivy/") for n in meta["files"])
    victim = tmp_path / "t" / max(meta["files"], key=lambda n: meta["files"][n]["bytes"])
    victim.write_bytes(victim.read_bytes()[:-5])
    with pytest.raises(IndexDamagedError, match=r"\(truncated\).*--engine tantivy|truncated"):
        open_index(tmp_path / "t")


def test_engine_auto_switches_to_tantivy_above_the_threshold(tmp_path, monkeypatch):
    corpus = tmp_path / "c.jsonl"
    write_corpus(PASSAGES, corpus)
    with corpus.open("a") as f:
        f.write("{broken\n")
    small = build_corpus_index(corpus, tmp_path / "small", "bm25", progress=False)
    assert isinstance(small, BM25Retriever) and small.meta["engine"] == "bm25s" and small.meta["skipped_lines"] == 1
    monkeypatch.setattr(indexes, "TANTIVY_MIN_DOCS", 3)
    big = build_corpus_index(corpus, tmp_path / "big", "bm25", progress=False)
    assert isinstance(big, TantivyRetriever) and big.size == len(PASSAGES)
    assert big.meta["skipped_lines"] == 1 and big.meta["fingerprint"] == small.meta["fingerprint"]
    opened = open_index(tmp_path / "big", corpus=corpus)
    assert isinstance(opened, TantivyRetriever)
    assert [p.id for p in opened.search("capital of France", 2)] == [p.id for p in small.search("capital of France", 2)]
    forced = build_corpus_index(corpus, tmp_path / "forced", "bm25", engine="tantivy", progress=False)
    assert isinstance(forced, TantivyRetriever)
    with pytest.raises(ValueError, match="unknown BM25 engine"):
        build_corpus_index(corpus, tmp_path / "x", "bm25", engine="lucene", progress=False)


def test_a_hybrid_index_can_use_tantivy(tmp_path):
    from hopqa.embed import LexicalEmbedder

    corpus = tmp_path / "c.jsonl"
    write_corpus(PASSAGES, corpus)
    built = build_corpus_index(corpus, tmp_path / "h", "hybrid", engine="tantivy", embedder=LexicalEmbedder(dim=512),
                               progress=False)
    assert built.name == "hybrid(bm25:tantivy+dense:lexical)"
    opened = open_index(tmp_path / "h", embedder=LexicalEmbedder(dim=512))
    assert opened.name == built.name
    assert [p.id for p in opened.search("capital of Germany", 2)] == [p.id for p in built.search("capital of Germany", 2)]


def test_a_large_corpus_given_at_run_time_is_kept_on_tantivy(tmp_path, monkeypatch):
    """--corpus with BM25: a corpus past the threshold is indexed on tantivy once, then opened
    as it is (no numba, no rebuild) until the file changes."""
    from hopqa.retrieval.indexes import load_or_build_kind

    monkeypatch.setattr(indexes, "TANTIVY_MIN_DOCS", 3)
    corpus = tmp_path / "c.jsonl"
    write_corpus(PASSAGES, corpus)
    first = load_or_build_kind(corpus, tmp_path / "idx", "bm25", progress=False)
    assert isinstance(first, TantivyRetriever)
    stamp = (tmp_path / "idx" / "meta.json").stat().st_mtime_ns
    again = load_or_build_kind(corpus, tmp_path / "idx", "bm25", progress=False)
    assert isinstance(again, TantivyRetriever) and (tmp_path / "idx" / "meta.json").stat().st_mtime_ns == stamp
    write_corpus(PASSAGES[:2], corpus)  # under the threshold now: bm25s
    assert isinstance(load_or_build_kind(corpus, tmp_path / "idx", "bm25", progress=False), BM25Retriever)
    assert not (tmp_path / "idx" / "tantivy").exists()  # the other engine's files are gone
