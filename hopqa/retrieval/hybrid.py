"""Hybrid retrieval: reciprocal rank fusion (RRF; Cormack et al., 2009) of BM25 and dense search.

Each part retrieves ``depth`` passages (default ``max(DEPTH, 2k)``); a passage's fused score is

    score(p) = sum over parts i of  w_i / (rrf_k + rank_i(p))

with ``rank_i`` its 1-based rank in part ``i`` (a part that did not return it adds nothing),
``rrf_k`` = 60 (the paper's constant) and weights ``w`` = (1, 1) by default. Passages are the
same when their ids are; ties go to the passage with the better single rank, then to the first
part's order. The top ``k`` are returned with the fused score as ``score``. The parts' own
scores (BM25's and the cosine) are on different scales, which is why ranks are fused rather
than scores.

Index directory (``kind: hybrid``): ``meta.json`` with ``rrf_k``, ``weights`` and the corpus,
and the two parts as indexes of their own in ``bm25/`` (bm25s or tantivy) and ``dense/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hopqa.retrieval.base import Retriever, RetrieverBase
from hopqa.types import Passage

#: RRF's constant (Cormack, Clarke and Buettcher, 2009).
RRF_K = 60
#: Passages each part retrieves at least (``depth``).
DEPTH = 20
FORMAT = 1
PARTS = ("bm25", "dense")


def rrf_fuse(rankings: Sequence[Sequence[Passage]], k: int, rrf_k: int = RRF_K,
             weights: Sequence[float] | None = None) -> list[Passage]:
    """The top ``k`` passages of the fused ``rankings`` (module docstring), fused score as
    ``score``."""
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    fused: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}  # id -> (its best rank, the part that gave it): ties
    first: dict[str, Passage] = {}
    for part, (ranking, w) in enumerate(zip(rankings, weights)):
        for rank, p in enumerate(ranking, start=1):
            fused[p.id] = fused.get(p.id, 0.0) + w / (rrf_k + rank)
            first.setdefault(p.id, p)
            key = (rank, part)
            if p.id not in best or key < best[p.id]:
                best[p.id] = key
    order = sorted(fused, key=lambda pid: (-fused[pid], best[pid]))
    return [replace(first[pid], score=fused[pid]) for pid in order[:k]]


class HybridRetriever(RetrieverBase):
    """RRF of a sparse and a dense retriever (or any retrievers) over the same passages."""

    def __init__(self, parts: Sequence[Retriever], rrf_k: int = RRF_K, weights: Sequence[float] | None = None,
                 depth: int = DEPTH, meta: dict[str, Any] | None = None) -> None:
        if len(parts) < 2:
            raise ValueError("a hybrid retriever fuses two retrievers at least")
        if rrf_k < 0 or depth < 1:
            raise ValueError("rrf_k must be >= 0 and depth >= 1")
        self.parts = list(parts)
        self.rrf_k = rrf_k
        self.weights = list(weights) if weights is not None else [1.0] * len(self.parts)
        if len(self.weights) != len(self.parts) or any(w < 0 for w in self.weights):
            raise ValueError("one non-negative weight per part")
        self.depth = depth
        self.meta = meta or {"kind": "hybrid", "rrf_k": rrf_k, "weights": self.weights}
        self.name = "hybrid(" + "+".join(getattr(p, "name", type(p).__name__) for p in self.parts) + ")"

    @property
    def size(self) -> int:
        return int(getattr(self.parts[0], "size", 0))

    def search(self, query: str, k: int = 5) -> list[Passage]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: list[str], k: int = 5) -> list[list[Passage]]:
        depth = max(self.depth, 2 * k)
        per_part = [part.batch_search(queries, depth) for part in self.parts]
        return [rrf_fuse([ranked[i] for ranked in per_part], k, self.rrf_k, self.weights)
                for i in range(len(queries))]

    # -- persistence -----------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """``bm25/`` and ``dense/`` (each part's own ``save``), then ``meta.json``."""
        from hopqa.retrieval.store import write_meta

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, part in zip(PARTS, self.parts):
            part.save(d / name)  # type: ignore[attr-defined]
        write_meta(d, {**self.meta, "kind": "hybrid", "format": FORMAT, "parts": list(PARTS),
                       "rrf_k": self.rrf_k, "weights": self.weights, "depth": self.depth})

    @classmethod
    def load(cls, directory: str | Path, embedder: Any = None) -> HybridRetriever:
        """Open a saved hybrid index (its BM25 and dense parts)."""
        from hopqa.retrieval.dense import DenseRetriever
        from hopqa.retrieval.indexes import open_index
        from hopqa.retrieval.store import (
            RetrievalIndexError,
            meta_corpus,
            read_meta_of,
            rebuild_command,
        )

        d = Path(directory)
        meta = read_meta_of(d, "hybrid", FORMAT)
        sparse = open_index(d / "bm25")  # bm25s or tantivy
        dense = DenseRetriever.load(d / "dense", embedder=embedder)
        if getattr(sparse, "size", None) != dense.size:
            raise RetrievalIndexError(f"the parts of the hybrid index in {d} have {sparse.size} and {dense.size} "
                                      f"passages: rebuild it with: {rebuild_command(d, meta_corpus(meta), 'hybrid')}")
        return cls([sparse, dense], rrf_k=int(meta.get("rrf_k", RRF_K)), weights=meta.get("weights"),
                   depth=int(meta.get("depth", DEPTH)), meta=meta)
