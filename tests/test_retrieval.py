"""BM25 and the candidate pool: ranking, persistence, edge cases, threads, real data."""

from __future__ import annotations

import json
import threading

import pytest

from hopqa.retrieval.bm25 import BM25Retriever, build_index, load_or_build
from hopqa.retrieval.pool import CandidatePool
from hopqa.types import Passage

DOCS = [
    Passage("p1", "Titanic (1997 film)", "Titanic is a 1997 film directed by James Cameron."),
    Passage("p2", "James Cameron", "James Cameron is a Canadian filmmaker born in Kapuskasing."),
    Passage("p3", "Paris", "Paris is the capital and largest city of France."),
    Passage("p4", "Stanley, North Dakota", "Stanley is the county seat of Mountrail County, North Dakota."),
    Passage("p5", "Van Hook Township", "Van Hook Township is a township in Mountrail County, North Dakota."),
]


@pytest.fixture(scope="module")
def bm25():
    return BM25Retriever.build(DOCS)


@pytest.mark.parametrize("query,first", [
    ("Who directed Titanic?", "p1"),
    ("capital of France", "p3"),
    ("county seat of Mountrail County", "p4"),
    ("Van Hook Township", "p5"),
    ("Where was James Cameron born?", "p2"),
])
def test_ranking(bm25, query, first):
    hits = bm25.search(query, 3)
    assert hits[0].id == first
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_edge_queries(bm25):
    assert bm25.search("", 3) == []
    assert bm25.search("the of and is", 3) == []  # stopwords only
    assert bm25.search("zebra", 3) == []  # no term in the corpus: no zero-score junk
    assert len(bm25.search("Mountrail County North Dakota", 50)) == 2  # k beyond the corpus
    assert bm25.search("Paris", 0) == []


def test_batch_equals_single(bm25):
    queries = ["Titanic", "France", "", "Mountrail"]
    assert bm25.batch_search(queries, 2) == [bm25.search(q, 2) for q in queries]


def test_save_load_round_trip(bm25, tmp_path):
    bm25.save(tmp_path / "idx")
    again = BM25Retriever.load(tmp_path / "idx")
    for q in ["Titanic director", "France", "county seat"]:
        assert again.search(q, 3) == bm25.search(q, 3)
    assert again.size == 5


def test_load_missing_index_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        BM25Retriever.load(tmp_path / "nothing")
    assert "hopqa index" in str(e.value)


def test_threads_agree_with_sequential(bm25):
    queries = ["Titanic", "France", "Mountrail", "Cameron born"] * 10
    expected = [bm25.search(q, 3) for q in queries]
    got: dict[int, list] = {}

    def work(offset):
        for i in range(offset, len(queries), 4):
            got[i] = bm25.search(queries[i], 3)

    threads = [threading.Thread(target=work, args=(o,)) for o in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert [got[i] for i in range(len(queries))] == expected


def test_load_or_build_rebuilds_when_corpus_changes(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) for p in DOCS[:2]))
    first = load_or_build(corpus, tmp_path / "idx", progress=False)
    assert first.size == 2
    assert load_or_build(corpus, tmp_path / "idx", progress=False).size == 2
    corpus.write_text(corpus.read_text() + "\n" + json.dumps({"id": "p3", "title": "Paris", "text": DOCS[2].text}))
    assert load_or_build(corpus, tmp_path / "idx", progress=False).search("France", 1)[0].id == "p3"


def test_build_index_skips_bad_lines(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "alpha beta"}\nnot json\n{"id": "b"}\n{"id": "c", "text": "gamma"}\n')
    with pytest.warns(UserWarning, match=r"c.jsonl:2"):
        r = build_index(corpus, tmp_path / "idx", progress=False)
    assert r.size == 2 and r.meta["skipped_lines"] == 2


def test_pool_ranks_within_itself_and_returns_k():
    pool = CandidatePool([Passage(p.id, p.title, p.text, is_supporting=p.id == "p4") for p in DOCS[:4]])
    hits = pool.search("county seat Mountrail", 10)
    assert [h.id for h in hits][0] == "p4" and hits[0].is_supporting is True
    assert len(hits) == 4 and hits[-1].score == 0.0
    assert len(pool.search("county seat", 2)) == 2
    assert len(pool.search("", 3)) == 3  # nothing matches: original order
    assert CandidatePool([]).search("x", 3) == []


def test_real_musique_question_finds_support(data_dir):
    rec = json.loads((data_dir / "musique" / "dev_200.jsonl").read_text().splitlines()[0])
    paras = rec["paragraphs"] if isinstance(rec["paragraphs"], list) else json.loads(rec["paragraphs"])
    docs = [Passage(f"{i}", p["title"], p["paragraph_text"], is_supporting=p["is_supporting"]) for i, p in enumerate(paras)]
    hits = BM25Retriever.build(docs).search(rec["question"], 10)
    gold = {d.id for d in docs if d.is_supporting}
    assert gold & {h.id for h in hits}


def test_demo_index_finds_supporting_paragraph(demo_index, data_dir):
    from hopqa.datasets import load_dataset

    assert demo_index.size > 10000
    found = 0
    examples = load_dataset("musique", "dev", data_dir=data_dir, limit=20)
    for ex in examples:
        gold = {(p.title, p.text) for p in ex.supporting}
        found += bool(gold & {(h.title, h.text) for h in demo_index.search(ex.question, 10)})
    assert found >= 10  # recall@10 of at least one supporting paragraph in the pooled corpus
