"""BM25 and the candidate pool: ranking, persistence, edge cases, threads, real data."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hopqa.datasets import shipped_data_dir
from hopqa.retrieval.base import Retriever
from hopqa.retrieval.bm25 import BM25Retriever, build_index, load_or_build, tokenize
from hopqa.retrieval.pool import CandidatePool
from hopqa.types import Passage

MUSIQUE = shipped_data_dir() / "musique" / "dev_200.jsonl.gz"

DOCS = [
    Passage("p1", "Titanic (1997 film)", "Titanic is a 1997 film directed by James Cameron."),
    Passage("p2", "James Cameron", "James Cameron is a Canadian filmmaker born in Kapuskasing."),
    Passage("p3", "Paris", "Paris is the capital and largest city of France."),
    Passage("p4", "Stanley, North Dakota", "Stanley is the county seat of Mountrail County, North Dakota."),
    Passage("p5", "Van Hook Township", "Van Hook Township is a township in Mountrail County, North Dakota."),
    Passage("p6", "Mount Everest", "Mount Everest is Earth's highest mountain above sea level."),
]


def write_jsonl(path: Path, passages: list[Passage]) -> None:
    path.write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in passages))


@pytest.fixture(scope="module")
def bm25() -> BM25Retriever:
    return BM25Retriever.build(DOCS, progress=False)


def test_tokenize_stems_and_drops_stopwords():
    assert tokenize("The Directors of the films are directing!") == ["director", "film", "direct"]
    assert tokenize("the of and is") == [] and tokenize("") == []


@pytest.mark.parametrize("query,first", [
    ("Who directed Titanic?", "p1"),
    ("capital of France", "p3"),
    ("county seat of Mountrail County", "p4"),
    ("Van Hook Township", "p5"),
    ("Where was James Cameron born?", "p2"),
    ("highest mountains", "p6"),  # stemming: mountains -> mountain
])
def test_ranking(bm25, query, first):
    hits = bm25.search(query, 3)
    assert hits[0].id == first
    assert all(isinstance(h.score, float) and h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_is_a_retriever(bm25):
    assert isinstance(bm25, Retriever) and bm25.name == "bm25" and bm25.size == len(DOCS)
    assert isinstance(CandidatePool(DOCS), Retriever)


def test_edge_queries(bm25):
    assert bm25.search("", 3) == []
    assert bm25.search("   ", 3) == []
    assert bm25.search("the of and is", 3) == []  # stopwords only
    assert bm25.search("zebra quokka", 3) == []  # no word of the corpus: no zero-score junk
    assert [h.id for h in bm25.search("zebra Paris", 3)] == ["p3"]  # unknown words are ignored
    assert bm25.search("Paris", 0) == [] and bm25.search("Paris", -1) == []


def test_k_larger_than_corpus(bm25):
    assert {h.id for h in bm25.search("Mountrail County North Dakota", 50)} == {"p4", "p5"}
    many = bm25.search("Titanic Cameron Paris Stanley Township Everest", 1000)
    assert len(many) == len(DOCS)


def test_build_rejects_empty_corpus():
    with pytest.raises(ValueError):
        BM25Retriever.build([], progress=False)
    with pytest.raises(ValueError):
        BM25Retriever.build([Passage("x", "", "the of a")], progress=False)


def test_batch_equals_single(bm25):
    queries = ["Titanic", "France", "", "the of", "Mountrail", "Cameron born Kapuskasing"]
    single = [bm25.search(q, 2) for q in queries]
    assert bm25.batch_search(queries, 2) == single
    assert bm25.batch_search(queries, 2, n_threads=2) == single
    assert bm25.batch_search([], 2) == []


def test_save_load_round_trip(bm25, tmp_path):
    bm25.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert meta["num_docs"] == len(DOCS) and meta["k1"] == 1.5 and meta["b"] == 0.75
    assert meta["stemmer"] == "english" and meta["format"] == 1
    queries = ["Titanic director", "France", "county seat", "township", "nothing here"]
    for mmap in (True, False):
        again = BM25Retriever.load(tmp_path / "idx", mmap=mmap)
        assert again.size == len(DOCS)
        assert [again.search(q, 3) for q in queries] == [bm25.search(q, 3) for q in queries]
        assert list(again.passages) == [Passage(p.id, p.title, p.text) for p in DOCS]
    mapped = BM25Retriever.load(tmp_path / "idx", mmap=True)
    assert type(mapped._model.scores["data"]).__name__ == "memmap"
    assert mapped.passages[-1].id == "p6" and mapped.passages[1:3][0].id == "p2"
    mapped.save(tmp_path / "idx")  # saving onto its own (mapped) files leaves them intact
    assert BM25Retriever.load(tmp_path / "idx").search("France", 1)[0].id == "p3"


def test_unicode_passages_survive_mmap(tmp_path):
    docs = [Passage("u1", "Zürich", "Zürich is the largest city in Switzerland — on Lake Zürich."),
            Passage("u2", "Kraków", "Kraków is a city in southern Poland.")]
    BM25Retriever.build(docs, progress=False).save(tmp_path / "idx")
    hit = BM25Retriever.load(tmp_path / "idx", mmap=True).search("Kraków Poland", 1)[0]
    assert (hit.id, hit.title, hit.text) == ("u2", "Kraków", docs[1].text)


def test_load_missing_index_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        BM25Retriever.load(tmp_path / "nothing")
    assert "hopqa index" in str(e.value)


def test_threads_agree_with_sequential(bm25):
    queries = ["Titanic", "France", "Mountrail", "Cameron born", "highest mountain", "the"] * 20
    expected = [bm25.search(q, 3) for q in queries]
    barrier = threading.Barrier(4)

    def work(offset: int) -> list[tuple[int, list[Passage]]]:
        barrier.wait()  # start together
        return [(i, bm25.search(queries[i], 3)) for i in range(offset, len(queries), 4)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(work, o) for o in range(4)]
        got = dict(pair for f in futures for pair in f.result())  # re-raises any thread's error
    assert [got[i] for i in range(len(queries))] == expected


def test_build_index_skips_bad_lines_and_dedupes(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "alpha beta"}\nnot json\n{"id": "b"}\n{"id": "c", "text": "gamma"}\n'
                      '{"id": "d", "text": "alpha  beta"}\n')
    with pytest.warns(UserWarning) as record:
        r = build_index(corpus, tmp_path / "idx", progress=False)
    assert {str(w.message).split(": ")[0].rsplit("/", 1)[-1] for w in record} == {"c.jsonl:2", "c.jsonl:3"}
    assert r.size == 2 and r.meta["skipped_lines"] == 2 and r.meta["duplicates_removed"] == 1
    assert BM25Retriever.load(tmp_path / "idx").search("gamma", 5)[0].id == "c"


def test_build_index_from_tsv(tmp_path):
    corpus = tmp_path / "c.tsv"
    corpus.write_text("id\ttext\ttitle\n" + "".join(f"{p.id}\t{p.text}\t{p.title}\n" for p in DOCS))
    r = build_index(corpus, tmp_path / "idx", progress=False)
    assert r.search("capital of France", 1)[0].id == "p3"


def test_load_or_build_rebuilds_when_corpus_changes(tmp_path):
    corpus, idx = tmp_path / "c.jsonl", tmp_path / "idx"
    write_jsonl(corpus, DOCS[:2])
    assert load_or_build(corpus, idx, progress=False).size == 2
    built_at = (idx / "meta.json").stat().st_mtime_ns
    assert load_or_build(corpus, idx, progress=False).size == 2
    assert (idx / "meta.json").stat().st_mtime_ns == built_at  # loaded, not rebuilt
    time.sleep(0.01)
    write_jsonl(corpus, DOCS[:3])
    again = load_or_build(corpus, idx, progress=False)
    assert again.size == 3 and again.search("France", 1)[0].id == "p3"
    assert load_or_build(corpus, idx, progress=False, k1=1.2).meta["k1"] == 1.2  # other parameters: rebuilt


def test_load_or_build_touched_but_same_content_is_not_rebuilt(tmp_path):
    corpus, idx = tmp_path / "c.jsonl", tmp_path / "idx"
    write_jsonl(corpus, DOCS)
    load_or_build(corpus, idx, progress=False)
    offsets_written = (idx / "passages.jsonl").stat().st_mtime_ns
    os.utime(corpus, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert load_or_build(corpus, idx, progress=False).size == len(DOCS)
    assert (idx / "passages.jsonl").stat().st_mtime_ns == offsets_written


def test_pool_ranks_within_itself_and_returns_k():
    pool = CandidatePool([Passage(p.id, p.title, p.text, is_supporting=p.id == "p4") for p in DOCS[:4]])
    assert pool.name == "pool" and len(pool.passages) == 4
    hits = pool.search("county seat Mountrail", 10)
    assert hits[0].id == "p4" and hits[0].is_supporting is True and hits[0].score > 0
    assert len(hits) == 4 and [h.id for h in hits[1:]] == ["p1", "p2", "p3"]  # unscored: pool order
    assert all(h.score == 0.0 and h.is_supporting is False for h in hits[1:])
    assert len(pool.search("county seat", 2)) == 2
    assert [h.id for h in pool.search("", 3)] == ["p1", "p2", "p3"]  # nothing to rank: pool order
    assert [h.id for h in pool.search("the of and", 10)] == ["p1", "p2", "p3", "p4"]
    assert pool.search("Paris", 0) == []
    assert pool.batch_search(["France", "Titanic"], 1) == [pool.search("France", 1), pool.search("Titanic", 1)]
    assert pool.passages[3].score is None  # the pool itself is never modified


def test_pool_small_and_degenerate():
    assert CandidatePool([]).search("x", 3) == []
    two = CandidatePool(DOCS[2:4])
    assert [h.id for h in two.search("Dakota", 5)] == ["p4", "p3"]
    one = CandidatePool([DOCS[0]])
    assert [h.id for h in one.search("Titanic", 5)] == ["p1"] and one.search("Titanic", 5)[0].score > 0
    same_ids = CandidatePool([Passage("x", "A", "apples"), Passage("x", "B", "bananas")])
    assert [h.title for h in same_ids.search("bananas", 2)] == ["B", "A"]
    stop = CandidatePool([Passage("s1", "", "the of"), Passage("s2", "", "and it")])  # nothing indexable
    assert [h.id for h in stop.search("anything", 5)] == ["s1", "s2"]


def test_real_musique_paragraphs_find_support():
    with gzip.open(MUSIQUE, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    docs: list[Passage] = []
    gold_first: set[str] = set()
    for qi, rec in enumerate(records):
        for pi, p in enumerate(rec["paragraphs"]):
            pid = f"{qi}-{pi}"
            docs.append(Passage(pid, p["title"], p["paragraph_text"]))
            if qi == 0 and p["is_supporting"]:
                gold_first.add(pid)
    t0 = time.perf_counter()
    index = BM25Retriever.build(docs, progress=False)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    hits = index.search(records[0]["question"], 10)
    query_ms = (time.perf_counter() - t0) * 1000
    print(f"\nmusique dev_200: {len(docs)} paragraphs, build {build_s:.2f} s, first query {query_ms:.1f} ms")
    assert gold_first & {h.id for h in hits}
    assert len(hits) == 10
    # and in the distractor setting, its own pool
    first = records[0]["paragraphs"]
    pool = CandidatePool([Passage(str(i), p["title"], p["paragraph_text"], is_supporting=p["is_supporting"])
                          for i, p in enumerate(first)])
    assert any(h.is_supporting for h in pool.search(records[0]["question"], 3))


@pytest.mark.slow
def test_numba_backend_matches_numpy(tmp_path):
    """The backend ``auto`` picks for large corpora (~25 s: numba JIT-compiles its serial, parallel
    and read-only-memmap kernels)."""
    pytest.importorskip("numba")
    queries = ["Titanic", "France", "Mountrail", "Cameron born", "highest mountain", "the", "zebra"] * 4
    numpy_hits = [BM25Retriever.build(DOCS, progress=False, backend="numpy").search(q, 3) for q in queries]
    fast = BM25Retriever.build(DOCS, progress=False, backend="numba")
    assert fast.backend == "numba"
    assert [fast.search(q, 3) for q in queries] == numpy_hits
    assert fast.batch_search(queries, 3, n_threads=2) == numpy_hits
    fast.save(tmp_path / "idx")
    loaded = BM25Retriever.load(tmp_path / "idx", backend="numba")
    got: dict[int, list] = {}

    def work(offset: int) -> None:
        for i in range(offset, len(queries), 4):
            got[i] = loaded.search(queries[i], 3) if i % 2 else loaded.batch_search([queries[i]], 3, n_threads=2)[0]

    threads = [threading.Thread(target=work, args=(o,)) for o in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(queries))] == numpy_hits


# -- damage: every file recorded with its size and sha256, checked on load ----------------------
def _index_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.fixture
def saved_index(tmp_path) -> Path:
    corpus = tmp_path / "c.jsonl"
    write_jsonl(corpus, DOCS)
    build_index(corpus, tmp_path / "idx", progress=False)
    return tmp_path / "idx"


def test_meta_records_every_file_with_size_and_sha256(saved_index):
    import hashlib

    files = json.loads((saved_index / "meta.json").read_text())["files"]
    assert sorted(files) == [n for n in _index_files(saved_index) if n != "meta.json"]
    assert {"passages.jsonl", "passages.offsets.npy", "vocab.index.json", "params.index.json"} <= set(files)
    for name, rec in files.items():
        data = (saved_index / name).read_bytes()
        assert rec == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize("name", ["data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy",
                                  "vocab.index.json", "params.index.json", "passages.jsonl",
                                  "passages.offsets.npy", "meta.json"])
@pytest.mark.parametrize("keep", [0.0, 0.5, 0.95])
def test_truncated_file_is_reported_as_damage(saved_index, name, keep):
    from hopqa.retrieval.bm25 import IndexDamagedError

    assert name in _index_files(saved_index)
    path = saved_index / name
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])
    for mmap in (True, False):
        with pytest.raises(IndexDamagedError) as e:
            BM25Retriever.load(saved_index, mmap=mmap)
        message = str(e.value)
        assert message.startswith(f"index at {saved_index} is damaged ({name}") and "\n" not in message
        corpus = "CORPUS" if name == "meta.json" else str(saved_index.parent / "c.jsonl")
        assert message.endswith(f"rebuild it with: hopqa index {corpus} --out {saved_index}")


def test_changed_or_missing_file_is_reported(saved_index):
    from hopqa.retrieval.bm25 import IndexDamagedError

    path = saved_index / "passages.jsonl"
    original = path.read_bytes()
    data = bytearray(original)
    data[10] ^= 0x01  # same size, one bit flipped
    path.write_bytes(bytes(data))
    with pytest.raises(IndexDamagedError, match=r"\(passages\.jsonl: content changed since it was written"):
        BM25Retriever.load(saved_index)
    path.write_bytes(original)
    assert BM25Retriever.load(saved_index).size == len(DOCS)
    (saved_index / "vocab.index.json").unlink()
    with pytest.raises(IndexDamagedError, match=r"\(vocab\.index\.json: missing\)"):
        BM25Retriever.load(saved_index)


@pytest.mark.parametrize("name", ["data.csc.index.npy", "vocab.index.json", "params.index.json", "passages.jsonl",
                                  "passages.offsets.npy"])
def test_index_without_recorded_files_still_fails_clearly(saved_index, name):
    """Indexes written before sizes were recorded: a truncated file still gives IndexDamagedError."""
    from hopqa.retrieval.bm25 import IndexDamagedError

    meta = json.loads((saved_index / "meta.json").read_text())
    del meta["files"]
    (saved_index / "meta.json").write_text(json.dumps(meta))
    assert BM25Retriever.load(saved_index).search("France", 1)[0].id == "p3"  # loads as before
    path = saved_index / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    for mmap in (True, False):
        with pytest.raises(IndexDamagedError, match=f"index at {saved_index} is damaged"):
            BM25Retriever.load(saved_index, mmap=mmap)


@pytest.mark.parametrize("name", ["passages.offsets.npy", "vocab.index.json", "meta.json"])
def test_load_or_build_rebuilds_a_damaged_index_with_a_warning(tmp_path, name):
    corpus, idx = tmp_path / "c.jsonl", tmp_path / "idx"
    write_jsonl(corpus, DOCS)
    load_or_build(corpus, idx, progress=False)
    (idx / name).write_bytes((idx / name).read_bytes()[:7])
    with pytest.warns(UserWarning, match=f"the index at {idx} is damaged \\({name}.*\\): rebuilding it"):
        again = load_or_build(corpus, idx, progress=False)
    assert again.size == len(DOCS) and again.search("France", 1)[0].id == "p3"
    assert BM25Retriever.load(idx).size == len(DOCS)  # whole again on disk


def test_resaving_replaces_an_older_index_files(tmp_path):
    idx = tmp_path / "idx"
    BM25Retriever.build(DOCS, progress=False).save(idx)
    (idx / "stale.index.npy").write_bytes(b"left by another bm25s version")
    BM25Retriever.build(DOCS[:2], progress=False).save(idx)
    assert not (idx / "stale.index.npy").exists()
    assert BM25Retriever.load(idx).size == 2


def test_rebuilding_in_place_leaves_a_loaded_index_readable(tmp_path):
    """A process reading an index through its memory maps while another rebuilds it keeps its
    (older) files: they are replaced by new files, never rewritten (a rewrite would truncate
    them under the maps: garbage or SIGBUS). Run in a subprocess, where a SIGBUS cannot take
    pytest down."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_retrieval import DOCS
        from hopqa.retrieval.bm25 import BM25Retriever
        from hopqa.types import Passage
        BM25Retriever.build(DOCS, progress=False).save({str(tmp_path / 'idx')!r})
        old = BM25Retriever.load({str(tmp_path / 'idx')!r}, mmap=True)
        other = [Passage(f"n{{i}}", "New", "x" * 10 + f" word{{i}}") for i in range(2)]
        BM25Retriever.build(other, progress=False).save({str(tmp_path / 'idx')!r})
        assert [p.id for p in old.passages] == [p.id for p in DOCS], "the loaded index changed under it"
        assert old.search("capital of France", 1)[0].id == "p3"
        assert BM25Retriever.load({str(tmp_path / 'idx')!r}).size == 2
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert not [p for p in (tmp_path / "idx").iterdir() if p.name.startswith(".")]  # no staging folder left
