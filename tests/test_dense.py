"""Dense and hybrid retrieval, index kinds and the corpus check.

Fast tests embed with ``LexicalEmbedder`` (hashed words: deterministic, no model) so that
orders are exact; the ``slow`` tests use the real all-MiniLM-L6-v2 on a few hundred passages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hopqa.corpus import write_corpus
from hopqa.embed import LexicalEmbedder
from hopqa.retrieval.bm25 import BM25Retriever
from hopqa.retrieval.dense import DenseRetriever, EmbeddingCache, embed_passages, passage_text
from hopqa.retrieval.hybrid import HybridRetriever, rrf_fuse
from hopqa.retrieval.indexes import build_corpus_index, load_or_build_kind, open_index
from hopqa.retrieval.store import CorpusMismatchError, IndexDamagedError, RetrievalIndexError, passages_fingerprint
from hopqa.types import Passage

PASSAGES = [
    Passage("p1", "Paris", "Paris is the capital and largest city of France."),
    Passage("p2", "Banana", "The banana is an elongated edible fruit produced by plants of the genus Musa."),
    Passage("p3", "Berlin", "Berlin is the capital of Germany and its largest city."),
    Passage("p4", "Everest", "Mount Everest is Earth's highest mountain above sea level."),
    Passage("p5", "Seine", "The Seine is a river that flows through Paris in northern France."),
    Passage("p6", "Nile", "The Nile is a major river in northeastern Africa."),
    Passage("p7", "Apple", "An apple is a round edible fruit of the apple tree."),
]


class CountingEmbedder(LexicalEmbedder):
    """The lexical embedder counting its passage batches; ``fail_after`` batches it raises."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__(dim=512)
        self.batches = 0
        self.fail_after = fail_after

    def encode_uncached(self, texts):  # type: ignore[override]
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise KeyboardInterrupt("interrupted")
        self.batches += 1
        return super().encode_uncached(texts)


def ids(hits):
    return [p.id for p in hits]


def test_dense_search_ranks_by_cosine_and_survives_a_reload(tmp_path):
    emb = LexicalEmbedder(dim=512)
    r = DenseRetriever.build(PASSAGES, emb, progress=False)
    assert r.name == "dense:lexical" and r.faiss_kind == "flat" and r.meta["dim"] == 512
    hits = r.search("capital of France Paris", k=3)
    assert hits[0].id == "p1"
    scores = [p.score for p in hits]
    assert scores == sorted(scores, reverse=True)
    expected = float(np.dot(emb.encode(["capital of France Paris"])[0], emb.encode([passage_text(PASSAGES[0])])[0]))
    assert scores[0] == pytest.approx(expected, abs=1e-5)
    r.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert meta["kind"] == "dense" and meta["model"] == "lexical" and set(meta["files"]) == {
        "passages.jsonl", "passages.offsets.npy", "vectors.faiss"}
    again = DenseRetriever.load(tmp_path / "idx", embedder=LexicalEmbedder(dim=512))
    assert [(p.id, round(p.score, 5)) for p in again.search("capital of France Paris", k=3)] == [
        (p.id, round(p.score, 5)) for p in hits]
    assert again.search("", k=3) == [] and again.search("   ", k=3) == []
    assert len(again.search("river", k=50)) == len(PASSAGES)  # k beyond the corpus: every passage once


def test_hnsw_and_flat_agree_on_a_small_corpus():
    emb = LexicalEmbedder(dim=512)
    flat = DenseRetriever.build(PASSAGES, emb, faiss_kind="flat", progress=False)
    hnsw = DenseRetriever.build(PASSAGES, emb, faiss_kind="hnsw", progress=False)
    assert hnsw.faiss_kind == "hnsw" and hnsw.meta["ef_search"] == 128
    for q in ["capital of Germany", "edible fruit", "river in Africa"]:
        assert ids(flat.search(q, 2)) == ids(hnsw.search(q, 2))
    with pytest.raises(ValueError, match="unknown faiss"):
        DenseRetriever.build(PASSAGES, emb, faiss_kind="ivf", progress=False)


def test_batch_search_equals_search():
    r = DenseRetriever.build(PASSAGES, LexicalEmbedder(dim=512), progress=False)
    queries = ["capital of Germany", "", "edible fruit"]
    assert [ids(h) for h in r.batch_search(queries, 2)] == [ids(r.search(q, 2)) for q in queries]


def test_an_interrupted_embedding_run_resumes_without_recomputing(tmp_path):
    """Chunks of 2 passages: the first run is interrupted after 2 chunks; the second embeds only
    the 2 chunks left, and the vectors equal an uninterrupted run's."""
    cache = EmbeddingCache(tmp_path / "cache", "lexical", passages_fingerprint(PASSAGES))
    first = CountingEmbedder(fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        embed_passages(PASSAGES, first, cache, progress=False, chunk_size=2)
    assert first.batches == 2 and sorted(p.name for p in cache.dir.iterdir()) == ["chunk-000000.npy", "chunk-000001.npy"]
    second = CountingEmbedder()
    resumed = embed_passages(PASSAGES, second, cache, progress=False, chunk_size=2)
    assert second.batches == 2  # chunks 2 and 3 (7 passages: 2+2+2+1)
    fresh = embed_passages(PASSAGES, CountingEmbedder(), None, progress=False, chunk_size=2)
    np.testing.assert_array_equal(resumed, fresh)
    third = CountingEmbedder()
    embed_passages(PASSAGES, third, cache, progress=False, chunk_size=2)
    assert third.batches == 0


def test_a_torn_chunk_is_embedded_again(tmp_path):
    cache = EmbeddingCache(tmp_path, "lexical", "f" * 64)
    embed_passages(PASSAGES, CountingEmbedder(), cache, progress=False, chunk_size=4)
    cache.chunk_path(1).write_bytes(b"not numpy")
    again = CountingEmbedder()
    embed_passages(PASSAGES, again, cache, progress=False, chunk_size=4)
    assert again.batches == 1


def test_damaged_and_mismatched_dense_indexes_are_refused(tmp_path):
    d = tmp_path / "idx"
    DenseRetriever.build(PASSAGES, LexicalEmbedder(dim=512), progress=False).save(d)
    with pytest.raises(RetrievalIndexError, match="built with the embedder 'lexical', not 'other'"):
        other = LexicalEmbedder(dim=512)
        other.name = "other"
        DenseRetriever.load(d, embedder=other)
    with pytest.raises(RetrievalIndexError, match="bm25 index|not a dense index"):
        BM25Retriever.build(PASSAGES, progress=False).save(tmp_path / "sparse")
        DenseRetriever.load(tmp_path / "sparse", embedder=LexicalEmbedder(dim=512))
    vectors = d / "vectors.faiss"
    vectors.write_bytes(vectors.read_bytes()[:-10])
    with pytest.raises(IndexDamagedError, match=r"vectors.faiss: .* \(truncated\).*--kind dense"):
        DenseRetriever.load(d, embedder=LexicalEmbedder(dim=512))


def test_rrf_fusion_order_on_a_hand_made_case():
    """a and c both rank 1st once and 3rd once: a tie broken by the part that gave the 1st rank
    (the first part); b and d rank 2nd once each: the same."""
    a, b, c, d = (Passage(x, x.upper(), x) for x in "abcd")
    fused = rrf_fuse([[a, b, c], [c, d, a]], k=4)
    assert ids(fused) == ["a", "c", "b", "d"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 63) and fused[2].score == pytest.approx(1 / 62)
    weighted = rrf_fuse([[a, b, c], [c, d, a]], k=2, weights=[1.0, 2.0])
    assert ids(weighted) == ["c", "a"] and weighted[0].score == pytest.approx(1 / 63 + 2 / 61)
    assert ids(rrf_fuse([[a, b], []], k=5, rrf_k=0)) == ["a", "b"]
    with pytest.raises(ValueError):
        rrf_fuse([[a]], k=1, weights=[1.0, 1.0])


def test_hybrid_fuses_bm25_and_dense_and_round_trips(tmp_path):
    emb = LexicalEmbedder(dim=512)
    sparse = BM25Retriever.build(PASSAGES, progress=False)
    dense = DenseRetriever.build(PASSAGES, emb, progress=False)
    hybrid = HybridRetriever([sparse, dense])
    assert hybrid.name == "hybrid(bm25+dense:lexical)"
    q = "Which river flows through the capital of France?"
    expected = rrf_fuse([sparse.search(q, 20), dense.search(q, 20)], 3)
    got = hybrid.search(q, 3)
    assert [(p.id, p.score) for p in got] == [(p.id, p.score) for p in expected]
    hybrid.save(tmp_path / "h")
    again = HybridRetriever.load(tmp_path / "h", embedder=LexicalEmbedder(dim=512))
    assert ids(again.search(q, 3)) == ids(got)
    with pytest.raises(ValueError):
        HybridRetriever([sparse])


def _corpus(path: Path, passages=PASSAGES) -> Path:
    write_corpus(passages, path)
    return path


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_open_index_reads_the_kind_and_refuses_another_corpus(tmp_path, kind):
    corpus = _corpus(tmp_path / "corpus.jsonl")
    built = build_corpus_index(corpus, tmp_path / kind, kind, embedder=LexicalEmbedder(dim=512), progress=False)
    opened = open_index(tmp_path / kind, embedder=LexicalEmbedder(dim=512), corpus=corpus)
    assert opened.name == built.name and opened.name.startswith(kind)
    assert ids(opened.search("capital of Germany", 1)) == ["p3"]
    other = _corpus(tmp_path / "other.jsonl", PASSAGES[:3])
    with pytest.raises(CorpusMismatchError, match=f"was built from .*corpus.jsonl, not from the content of .*other.jsonl.*--kind {kind}"):
        open_index(tmp_path / kind, embedder=LexicalEmbedder(dim=512), corpus=other)


def test_load_or_build_kind_reuses_and_rebuilds_when_the_corpus_changes(tmp_path):
    corpus = _corpus(tmp_path / "corpus.jsonl")
    first = CountingEmbedder()
    r = load_or_build_kind(corpus, tmp_path / "idx", "dense", embedder=first, cache_dir=tmp_path / "cache",
                           progress=False)
    assert first.batches == 1 and r.size == len(PASSAGES)
    again = CountingEmbedder()
    load_or_build_kind(corpus, tmp_path / "idx", "dense", embedder=again, cache_dir=tmp_path / "cache", progress=False)
    assert again.batches == 0  # loaded, not rebuilt
    _corpus(corpus, PASSAGES[:4])
    changed = CountingEmbedder()
    r = load_or_build_kind(corpus, tmp_path / "idx", "dense", embedder=changed, cache_dir=tmp_path / "cache",
                           progress=False)
    assert changed.batches == 1 and r.size == 4
    hybrid = load_or_build_kind(corpus, tmp_path / "idx", "hybrid", embedder=CountingEmbedder(),
                                cache_dir=tmp_path / "cache", progress=False)
    assert hybrid.name.startswith("hybrid")  # another kind asked: rebuilt as that kind


# -- the real embedder -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("sentence_transformers")
    from hopqa.embed import load_embedder

    return load_embedder()


@pytest.fixture(scope="module")
def demo_passages():
    from hopqa.demo import demo_paragraphs

    return demo_paragraphs()[:300]


@pytest.mark.slow
def test_minilm_dense_index_build_search_reload(tmp_path, minilm, demo_passages):
    """300 demo paragraphs with all-MiniLM-L6-v2: a paragraph's title and first sentence find it
    first, and the reloaded index (embedder loaded from meta.json) answers the same."""
    r = DenseRetriever.build(demo_passages, minilm, cache_dir=tmp_path / "cache", progress=False)
    assert r.meta["model"] == "all-MiniLM-L6-v2" and r.meta["dim"] == 384
    found = 0
    probes = demo_passages[::30]
    for p in probes:
        query = f"{p.title}: {p.text.split('.')[0]}"
        found += r.search(query, 1)[0].id == p.id
    assert found >= len(probes) - 1
    r.save(tmp_path / "idx")
    again = open_index(tmp_path / "idx")  # the embedder named in meta.json, loaded offline
    q = f"{probes[0].title}: {probes[0].text.split('.')[0]}"
    assert [(p.id, round(p.score, 4)) for p in again.search(q, 5)] == [(p.id, round(p.score, 4)) for p in r.search(q, 5)]
    assert all(-1.0001 <= p.score <= 1.0001 for p in again.search(q, 5))


@pytest.mark.slow
def test_pipeline_searches_a_corpus_densely_with_a_real_model(tmp_path, minilm, demo_passages):
    """hopqa.pipeline(search="dense") over a corpus file: SmolLM2 reads what MiniLM found, and
    the trace names the dense retriever."""
    import hopqa

    corpus = _corpus(tmp_path / "c.jsonl", demo_passages[:60])
    target = demo_passages[10]
    qa = hopqa.pipeline("retrieve-then-read", llm="embedded:smollm2-135m", corpus=corpus, search="dense",
                        home=tmp_path, k=2)
    answer = qa.answer(f"{target.title}: {target.text.split('.')[0]}?")
    assert answer.error is None and answer.passages[0].id == target.id
    assert {r["retriever"] for s in answer.trace.root.walk() for r in s.retrievals} == {"dense:all-MiniLM-L6-v2"}


def test_the_embedders_cache_is_bounded():
    emb = LexicalEmbedder(dim=64)
    emb.max_cached = 3
    first = emb.encode(["a b", "c d", "e f"])
    assert len(emb._cache) == 3
    both = emb.encode(["e f", "g h"])  # over the bound: the cache starts over with this batch
    assert len(emb._cache) == 2 and np.array_equal(both[0], first[2])


def test_without_onnxruntime_queries_stay_on_torch(monkeypatch):
    import sys
    from types import SimpleNamespace

    from hopqa.embed import OnnxEncoder

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    embedder = SimpleNamespace(onnx_note="")
    assert OnnxEncoder.create(embedder) is None and embedder.onnx_note == "onnxruntime is not installed"


@pytest.mark.slow
def test_queries_through_onnx_equal_the_torch_vectors(tmp_path, monkeypatch):
    """load_embedder() exports MiniLM's transformer once into <home>/cache/onnx and encodes
    queries with it: the vectors equal the torch path's; a second load reuses the export."""
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("HOPQA_HOME", str(tmp_path))
    from hopqa.embed import load_embedder

    emb = load_embedder()
    texts = ["Who directed Titanic?", "Which river flows through Paris, the capital of France?"]
    fast = emb.encode(texts)
    assert emb.query_backend == "onnx", emb.onnx_note
    np.testing.assert_allclose(fast, emb.encode_uncached(texts), atol=1e-5)
    export = next((tmp_path / "cache" / "onnx").glob("*/model.onnx"))
    stamp = export.stat().st_mtime_ns
    again = load_embedder()
    again.encode(["another query"])
    assert again.query_backend == "onnx" and export.stat().st_mtime_ns == stamp
