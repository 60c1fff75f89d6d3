"""BM25 over a corpus with bm25s (English stopwords, Snowball stemmer), saved to disk.

An index directory holds bm25s's sparse score matrix and vocabulary, ``passages.jsonl`` (one
passage per row, so a hit's row is its passage) and ``meta.json`` (parameters, size and the
corpus fingerprint that tells ``load_or_build`` when to rebuild). Loading memory-maps the
matrix.

Backend: bm25s's numpy backend below ``NUMBA_MIN_DOCS`` passages (no JIT warm-up: the numba
backend's first query of a process costs ~6-11 s here), numba above it (~100x faster per
query on 200k passages, RETRIEVAL.md). Hits with a zero score (no query term in the passage)
are not returned. Searches are serialized by a lock (bm25s objects are not documented as
thread-safe); ``batch_search`` runs a whole batch in one bm25s call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from hopqa.corpus import CorpusStats, corpus_fingerprint, dedupe, read_corpus
from hopqa.retrieval.base import RetrieverBase
from hopqa.types import Passage

FORMAT = 1
NUMBA_MIN_DOCS = 200_000
_stemmer_lock = threading.Lock()
_stemmer: Any = None


def _get_stemmer() -> Any:
    global _stemmer
    with _stemmer_lock:
        if _stemmer is None:
            import Stemmer

            _stemmer = Stemmer.Stemmer("english")
        return _stemmer


def tokenize(texts: list[str], progress: bool = False) -> list[list[str]]:
    """Lower-cased, stopword-filtered, stemmed tokens (as strings) of each text."""
    out = bm25s.tokenize(texts, stopwords="en", stemmer=_get_stemmer(), return_ids=False, show_progress=progress)
    return [list(t) for t in out]


class BM25Retriever(RetrieverBase):
    """BM25 ranking over a fixed list of passages."""

    name = "bm25"

    def __init__(self, model: bm25s.BM25, passages: list[Passage], meta: dict[str, Any]) -> None:
        self._model = model
        self.passages = passages
        self.meta = meta
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return len(self.passages)

    # -- building and persistence ----------------------------------------------------------
    @classmethod
    def build(cls, passages: Iterable[Passage], k1: float = 1.5, b: float = 0.75, progress: bool = False,
              backend: str = "auto") -> BM25Retriever:
        """Index passages (title and text both count)."""
        plist = list(passages)
        if not plist:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        chosen = backend if backend != "auto" else ("numba" if len(plist) >= NUMBA_MIN_DOCS else "numpy")
        model = bm25s.BM25(k1=k1, b=b, backend=chosen)
        tokens = tokenize([f"{p.title} {p.text}" for p in plist], progress=progress)
        model.index(tokens, show_progress=progress)
        meta = {"format": FORMAT, "k1": k1, "b": b, "backend": chosen, "stemmer": "english", "stopwords": "en",
                "size": len(plist)}
        return cls(model, [Passage(id=p.id, title=p.title, text=p.text) for p in plist], meta)

    def save(self, directory: str | Path) -> None:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self._model.save(str(d), show_progress=False)
        with open(d / "passages.jsonl", "w", encoding="utf-8") as f:
            for p in self.passages:
                f.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n")
        (d / "meta.json").write_text(json.dumps(self.meta, indent=1))

    @classmethod
    def load(cls, directory: str | Path, mmap: bool = True) -> BM25Retriever:
        d = Path(directory)
        if not (d / "meta.json").is_file():
            raise FileNotFoundError(f"no BM25 index in {d} (build one with: hopqa index CORPUS --out {d})")
        meta = json.loads((d / "meta.json").read_text())
        model = bm25s.BM25.load(str(d), mmap=mmap)
        model.backend = meta.get("backend", "numpy")
        with open(d / "passages.jsonl", encoding="utf-8") as f:
            passages = [Passage.from_dict(json.loads(line)) for line in f if line.strip()]
        return cls(model, passages, meta)

    # -- search ----------------------------------------------------------------------------
    def search(self, query: str, k: int = 5) -> list[Passage]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: list[str], k: int = 5, n_threads: int = 0) -> list[list[Passage]]:
        if not queries:
            return []
        k = max(0, min(k, self.size))
        toks = tokenize(list(queries))
        results: list[list[Passage]] = [[] for _ in queries]
        live = [i for i, t in enumerate(toks) if t]
        if k == 0 or not live:
            return results
        with self._lock:
            docs, scores = self._model.retrieve([toks[i] for i in live], k=k, show_progress=False,
                                                n_threads=n_threads)
        for row, i in enumerate(live):
            results[i] = [
                self._hit(int(doc), float(score))
                for doc, score in zip(np.asarray(docs[row]), np.asarray(scores[row]))
                if score > 0
            ]
        return results

    def _hit(self, row: int, score: float) -> Passage:
        p = self.passages[row]
        return Passage(id=p.id, title=p.title, text=p.text, score=score)


def build_index(corpus_path: str | Path, out_dir: str | Path, progress: bool = True, k1: float = 1.5,
                b: float = 0.75) -> BM25Retriever:
    """Read a corpus file (skipping bad lines), dedupe, index, save to ``out_dir``."""
    from tqdm import tqdm

    stats = CorpusStats()
    passages = list(tqdm(read_corpus(corpus_path, stats), desc="reading corpus", unit=" passages",
                         disable=not progress))
    retriever = BM25Retriever.build(dedupe(passages), k1=k1, b=b, progress=progress)
    retriever.meta.update({"corpus": str(Path(corpus_path).resolve()), "fingerprint": corpus_fingerprint(corpus_path),
                           "skipped_lines": stats.skipped})
    retriever.save(out_dir)
    return retriever


def load_or_build(corpus_path: str | Path, index_dir: str | Path, progress: bool = True) -> BM25Retriever:
    """Load the index of a corpus, (re)building it if missing or built from other content."""
    d = Path(index_dir)
    meta_file = d / "meta.json"
    if meta_file.is_file():
        meta = json.loads(meta_file.read_text())
        if meta.get("format") == FORMAT and meta.get("fingerprint") == corpus_fingerprint(corpus_path):
            return BM25Retriever.load(d)
    return build_index(corpus_path, d, progress=progress)
