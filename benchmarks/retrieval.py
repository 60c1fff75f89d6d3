"""Retrieval figures: the BM25 engines and faiss by corpus size, and recall of the gold
supporting paragraphs on the demo corpus for every retriever (issue 17).

    .venv/bin/python benchmarks/retrieval.py [--part engines] [--part recall]
        [--sizes 10000,25000,50000,100000] [--home DIR] [--limit 100] [--figures FILE]

``engines``: synthetic corpora (~100-word passages over a Zipfian vocabulary, 300 queries of
8-15 words) at each size: bm25s (hopqa's backend choice: numpy below 200k passages) and
tantivy — build seconds, index MB, open seconds, the first query of a process (numba's JIT
shows there) and query p50 / p95 ms; faiss exact and HNSW over random unit vectors (384
dimensions, no embedding) — build seconds and p50 / p95 ms. These figures set
``hopqa.retrieval.indexes.TANTIVY_MIN_DOCS``.

``hnsw``: HNSW's recall@10 against exact search on the demo corpus's real MiniLM vectors
(after ``recall``, which builds them) at efSearch 32-256.

``milvus``: the demo corpus in milvus-lite (started here) searched in each mode (recall and
query times; milvus-lite's speed is not a Milvus server's).

``recall``: the demo corpus (13,529 passages) in the open setting; for the dev questions of
MuSiQue, HotpotQA and 2WikiMultihopQA shipped with hopqa, Recall@5 / @10 / @20 (the share of a
question's gold supporting paragraphs among the top k, averaged over questions) of BM25
(bm25s), BM25 (tantivy), dense (all-MiniLM-L6-v2, faiss flat), hybrid (RRF) and hybrid reranked
by the MiniLM bi-encoder (depth 30), with each retriever's query p50 / p95 ms, on the first
100 dev questions of each (``--limit``). The first run
embeds the demo corpus (168 s on 2 cores; cached in <home>/cache/embeddings).

``--figures FILE`` also writes every part's rows as JSON with the date, the machine and its
load average, and the command (``docs/results/retrieval.json`` is such a file, from which
``benchmarks/doc_tables.py`` renders the retrieval tables of docs/benchmarks/speed.md).

Run nothing else meanwhile (the embedded LLM busy-waits on both cores).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

# benchmarks/figures.py (the script's folder is on sys.path)
from figures import about, write_figures

#: Every part's rows as it measures them (``--figures``): part -> rows of numbers.
ROWS: dict[str, list[dict[str, Any]]] = {}
#: What a part measured once, beside its rows (``--figures``): part -> fields.
NOTES: dict[str, dict[str, Any]] = {}


def row(part: str, **fields: Any) -> dict[str, Any]:
    """Keep one row of ``part`` for ``--figures``; the row."""
    ROWS.setdefault(part, []).append(fields)
    return fields


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def synthetic(n: int, seed: int = 0) -> tuple[list[Any], list[str]]:
    from hopqa.types import Passage

    rng = random.Random(seed)
    vocab = [f"w{i}x" for i in range(30_000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    words = rng.choices(vocab, weights, k=n * 100)
    passages = [Passage(str(i), f"t{i}", " ".join(words[i * 100:(i + 1) * 100])) for i in range(n)]
    queries = [" ".join(rng.choices(vocab[:5000], k=rng.randint(8, 15))) for _ in range(300)]
    return passages, queries


def timed_queries(search: Any, queries: list[str], k: int = 10) -> tuple[float, float, float]:
    """(first query ms, p50 ms, p95 ms)."""
    t0 = time.perf_counter()
    search(queries[0], k)
    first = (time.perf_counter() - t0) * 1000
    lat = []
    for q in queries[1:]:
        t0 = time.perf_counter()
        search(q, k)
        lat.append((time.perf_counter() - t0) * 1000)
    return first, statistics.median(lat), pct(lat, 0.95)


def bench_engines(sizes: list[int]) -> None:
    import numpy as np

    from hopqa.retrieval.bm25 import BM25Retriever
    from hopqa.retrieval.tantivy_bm25 import TantivyRetriever

    print("\n## BM25 engines by corpus size (synthetic ~100-word passages, 300 queries, k=10)")
    print("| passages | engine | build s | index MB | open s | first query ms | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        passages, queries = synthetic(n)
        engines = {
            "bm25s": (lambda d: BM25Retriever.build(passages, progress=False).save(d), BM25Retriever.load),
            "tantivy": (lambda d: TantivyRetriever.build(passages, d, progress=False), TantivyRetriever.load),
        }
        with tempfile.TemporaryDirectory() as tmp:
            for engine, (build, load) in engines.items():
                d = Path(tmp) / engine
                t0 = time.perf_counter()
                build(d)
                built = time.perf_counter() - t0
                t0 = time.perf_counter()
                r = load(d)
                opened = time.perf_counter() - t0
                first, p50, p95 = timed_queries(r.search, queries)
                label = f"bm25s ({r.backend})" if engine == "bm25s" else engine
                mb = du_mb(d)
                row("engines", passages=n, engine=label, build_s=built, index_mb=mb, open_s=opened,
                    first_ms=first, p50_ms=p50, p95_ms=p95)
                print(f"| {n:,} | {label} | {built:.1f} | {mb:.0f} | {opened:.2f} | {first:.1f} | {p50:.2f} "
                      f"| {p95:.2f} |", flush=True)
    import faiss

    print("\n## faiss over random unit vectors (384 dimensions, k=10, 300 queries)")
    print("| vectors | index | build s | p50 ms | p95 ms | recall@10 vs exact |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for n in sizes:
        centers = rng.normal(size=(64, 384)).astype("float32")
        x = centers[rng.integers(0, 64, n)] + 0.5 * rng.normal(size=(n, 384)).astype("float32")
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        q = x[rng.integers(0, n, 300)] + 0.1 * rng.normal(size=(300, 384)).astype("float32")
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        exact = None
        for kind in ("flat", "hnsw"):
            t0 = time.perf_counter()
            if kind == "flat":
                index = faiss.IndexFlatIP(384)
            else:
                index = faiss.IndexHNSWFlat(384, 32, faiss.METRIC_INNER_PRODUCT)
                index.hnsw.efConstruction = 40
            index.add(x)
            if kind == "hnsw":
                index.hnsw.efSearch = 64
            build = time.perf_counter() - t0
            lat, rows = [], []
            for v in q:
                t0 = time.perf_counter()
                _, found = index.search(v[None, :], 10)
                lat.append((time.perf_counter() - t0) * 1000)
                rows.append(set(found[0].tolist()))
            if exact is None:
                exact = rows
            recall = statistics.mean(len(a & b) / 10 for a, b in zip(rows, exact))
            row("faiss", vectors=n, index=kind, build_s=build, p50_ms=statistics.median(lat), p95_ms=pct(lat, 0.95),
                recall_at_10=recall)
            print(f"| {n:,} | {kind} | {build:.1f} | {statistics.median(lat):.2f} | {pct(lat, 0.95):.2f} | {recall:.3f} |",
                  flush=True)


def _key(p: Any) -> tuple[str, str]:
    return (" ".join(p.title.split()), " ".join(p.text.split()))


def recall_figures(retriever: Any, examples: list[Any]) -> dict[str, float]:
    """Recall@5 / @10 / @20 of the gold supporting paragraphs (``r5``, ``r10``, ``r20``), then
    query ``p50_ms`` / ``p95_ms``."""
    recalls: dict[int, list[float]] = {5: [], 10: [], 20: []}
    lat = []
    for ex in examples:
        t0 = time.perf_counter()
        hits = retriever.search(ex.question, 20)
        lat.append((time.perf_counter() - t0) * 1000)
        gold = {_key(p) for p in ex.supporting}
        for k in recalls:
            recalls[k].append(len(gold & {_key(p) for p in hits[:k]}) / len(gold))
    return {**{f"r{k}": statistics.mean(v) for k, v in recalls.items()},
            "p50_ms": statistics.median(lat), "p95_ms": pct(lat, 0.95)}


def recall_cells(figures: dict[str, float]) -> str:
    """R@5 | R@10 | R@20 | p50 ms | p95 ms of ``recall_figures``."""
    return (" | ".join(f"{figures[k]:.3f}" for k in ("r5", "r10", "r20"))
            + f" | {figures['p50_ms']:.1f} | {figures['p95_ms']:.1f}")


def bench_recall(home: Path, limit: int | None) -> None:
    from hopqa.datasets import load_dataset
    from hopqa.demo import build_demo_corpus
    from hopqa.embed import load_embedder
    from hopqa.retrieval.hybrid import HybridRetriever
    from hopqa.retrieval.indexes import build_corpus_index
    from hopqa.retrieval.rerank import BiEncoderReranker, RerankingRetriever

    corpus = build_demo_corpus(home)
    embedder = load_embedder()
    out = home / "bench-retrieval"
    shutil.rmtree(out, ignore_errors=True)
    built: dict[str, Any] = {}
    print("\n## Indexes of the demo corpus")
    print("| retriever | build s | index MB |")
    print("|---|---|---|")
    for name, kind, engine in [("bm25 (bm25s)", "bm25", "bm25s"), ("bm25 (tantivy)", "bm25", "tantivy"),
                               ("dense (MiniLM, faiss flat)", "dense", "auto")]:
        t0 = time.perf_counter()
        built[name] = build_corpus_index(corpus, out / name.split()[0] / engine, kind, engine=engine,
                                         embedder=embedder, cache_dir=home / "cache" / "embeddings", progress=True)
        seconds, mb = time.perf_counter() - t0, du_mb(out / name.split()[0] / engine)
        row("indexes", retriever=name, build_s=seconds, index_mb=mb)
        print(f"| {name} | {seconds:.1f} | {mb:.0f} |", flush=True)
    hybrid = HybridRetriever([built["bm25 (bm25s)"], built["dense (MiniLM, faiss flat)"]])
    built["hybrid (RRF)"] = hybrid
    built["hybrid + bi-encoder rerank (depth 30)"] = RerankingRetriever(hybrid, BiEncoderReranker(embedder), depth=30)
    print("\n## Recall of the gold supporting paragraphs, demo corpus (open setting)")
    print("| dataset | questions | retriever | R@5 | R@10 | R@20 | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for dataset in ("musique", "hotpotqa", "2wikimultihopqa"):
        examples = [ex for ex in load_dataset(dataset, "dev", limit=limit) if ex.supporting]
        for name, retriever in built.items():
            retriever.search("warm-up query (ONNX export, numba, caches)", 20)
            embedder._cache.clear()  # every retriever encodes its own queries and passages: no reuse across rows
            figures = row("recall", dataset=dataset, questions=len(examples), retriever=name,
                          **recall_figures(retriever, examples))
            print(f"| {dataset} | {len(examples)} | {name} | {recall_cells(figures)} |", flush=True)


def bench_hnsw(home: Path, limit: int | None) -> None:
    """HNSW against exact search on real vectors: the demo corpus's MiniLM vectors (from the
    dense index the recall part built) and the dev questions as queries, at several efSearch."""
    import faiss
    import numpy as np

    from hopqa.datasets import load_dataset
    from hopqa.embed import load_embedder

    flat = faiss.read_index(str(home / "bench-retrieval" / "dense" / "auto" / "vectors.faiss"))
    x = flat.reconstruct_n(0, flat.ntotal)
    questions = [ex.question for d in ("musique", "hotpotqa", "2wikimultihopqa") for ex in load_dataset(d, "dev", limit=limit)]
    q = np.ascontiguousarray(load_embedder().encode(questions), dtype=np.float32)
    _, exact = flat.search(q, 10)
    t0 = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(x.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 40
    hnsw.add(x)
    build = time.perf_counter() - t0
    NOTES["hnsw"] = {"vectors": int(flat.ntotal), "questions": len(questions), "build_s": build}
    print(f"\n## HNSW (M 32, efConstruction 40) on the demo corpus's MiniLM vectors ({flat.ntotal:,}), "
          f"{len(questions)} dev questions, k=10; built in {build:.1f} s")
    print("| efSearch | recall@10 vs exact | p50 ms | p95 ms |")
    print("|---|---|---|---|")
    for ef in (32, 64, 128, 256):
        hnsw.hnsw.efSearch = ef
        lat, found = [], []
        for v in q:
            t0 = time.perf_counter()
            _, rows = hnsw.search(v[None, :], 10)
            lat.append((time.perf_counter() - t0) * 1000)
            found.append(rows[0])
        recall = statistics.mean(len(set(a.tolist()) & set(b.tolist())) / 10 for a, b in zip(found, exact))
        row("hnsw", ef_search=ef, recall_at_10=recall, p50_ms=statistics.median(lat), p95_ms=pct(lat, 0.95))
        print(f"| {ef} | {recall:.3f} | {statistics.median(lat):.2f} | {pct(lat, 0.95):.2f} |", flush=True)


def bench_milvus(home: Path, limit: int | None) -> None:
    """The demo corpus loaded into milvus-lite (started here on 127.0.0.1; the vectors come from
    the embedding cache the recall part filled): load seconds, then each search mode's recall
    and query times. milvus-lite is a reimplementation for testing client code: its speed is
    not a Milvus server's."""
    import socket
    import subprocess
    import sys

    from hopqa.datasets import load_dataset
    from hopqa.demo import build_demo_corpus
    from hopqa.embed import load_embedder
    from hopqa.retrieval.indexes import build_corpus_index, open_index

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = Path(tempfile.mkdtemp())
    server = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data), "--host",
                               "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        uri = f"milvus://127.0.0.1:{port}/demo"
        embedder = load_embedder()
        t0 = time.perf_counter()
        build_corpus_index(build_demo_corpus(home), uri, "hybrid", engine="milvus", embedder=embedder,
                           cache_dir=home / "cache" / "embeddings", progress=False, overwrite=True)
        NOTES["milvus"] = {"load_s": time.perf_counter() - t0}
        print(f"\n## milvus-lite (demo corpus loaded in {NOTES['milvus']['load_s']:.1f} s, vectors from the cache)")
        print("| dataset | mode | R@5 | R@10 | R@20 | p50 ms | p95 ms |")
        print("|---|---|---|---|---|---|---|")
        for dataset in ("musique", "hotpotqa", "2wikimultihopqa"):
            examples = [ex for ex in load_dataset(dataset, "dev", limit=limit) if ex.supporting]
            for mode in ("bm25", "dense", "hybrid"):
                retriever = open_index(uri, embedder=embedder, mode=mode)
                retriever.search("warm-up query", 20)
                figures = row("milvus", dataset=dataset, questions=len(examples), mode=mode,
                              **recall_figures(retriever, examples))
                print(f"| {dataset} | {mode} | {recall_cells(figures)} |", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", action="append", choices=("engines", "recall", "hnsw", "milvus"))
    ap.add_argument("--sizes", default="10000,25000,50000,100000")
    ap.add_argument("--home", help="hopqa home (default: ~/.cache/hopqa)")
    ap.add_argument("--limit", type=int, default=100, help="first N dev questions per dataset (default 100)")
    ap.add_argument("--figures", help="also write every part's rows as JSON to this file")
    args = ap.parse_args()
    from hopqa.config import default_home

    parts = args.part or ["engines", "recall", "hnsw", "milvus"]
    if "engines" in parts:
        bench_engines([int(s) for s in args.sizes.split(",")])
    if "recall" in parts:
        bench_recall(default_home(args.home), args.limit)
    if "hnsw" in parts:
        bench_hnsw(default_home(args.home), args.limit)
    if "milvus" in parts:
        bench_milvus(default_home(args.home), args.limit)
    if args.figures:
        target = write_figures(args.figures, about(limit=args.limit, parts=parts), rows=ROWS, notes=NOTES)
        print(f"figures: {target}")


if __name__ == "__main__":
    main()
