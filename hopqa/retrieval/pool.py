"""A question's own candidate paragraphs as a retriever (the distractor setting).

HotpotQA, 2WikiMultihopQA, MuSiQue and Adversarial HotpotQA give each question a small set
of paragraphs (gold plus distractors). ``CandidatePool`` ranks them with BM25 computed over the
pool alone, built when the pool is made.

Choice (what the distractor setting needs): ``search`` always returns ``min(k, len(pool))``
passages. Passages that share no word with the query follow the scored ones in their original
order with ``score=0.0``, because every candidate is a legitimate answer source here. The same
simple ordering (original order, all scores 0.0) is the fallback when BM25 has nothing to work
with: an empty or all-stopword query, or a pool in which no passage has an indexable word.
Returned passages are copies carrying the pool's fields (``id``, ``is_supporting``) and a score.

Small pools (up to ``SMALL_POOL`` = 20 paragraphs: every dataset's distractor setting) are
scored by ``SmallBM25``, a few numpy operations that compute exactly what bm25s computes (its
default "lucene" variant, float32 scores, the same tokens through ``bm25.tokenize``, k1=1.5,
b=0.75, and the same ``argpartition`` choice among passages tied at the k-th place), so the
ranking and the scores are bit for bit those of ``BM25Retriever`` (tests/test_pool.py checks
them on the shipped pools). Why: importing bm25s pulls numba and scipy.sparse (~0.6 s of
``hopqa eval``'s start-up), and a bm25s index is machinery a pool of 10-20 paragraphs does not
need: measured per question (build and one query, GIL-holding Python), bm25s 1.1 ms (HotpotQA,
10 paragraphs) and 1.9 ms (MuSiQue, 20), ``SmallBM25`` 0.7 and 1.3 ms, of which tokenizing
(the same for both) is 0.5 and 0.9 ms. Larger pools use ``BM25Retriever`` (bm25s, numpy
backend, imported then).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from hopqa.retrieval.base import RetrieverBase
from hopqa.retrieval.bm25 import tokenize
from hopqa.types import Passage

if TYPE_CHECKING:
    from hopqa.retrieval.bm25 import BM25Retriever

#: Pools of at most this many passages are scored by ``SmallBM25``, larger ones by bm25s.
SMALL_POOL = 20


class SmallBM25:
    """BM25 over a few passages, computed as bm25s 0.3 computes it (numpy backend, method and
    idf "lucene", float32), without an index: per passage ``row`` and token ``t`` the weight

        w(t, row) = float32(idf(t) * tf / (k1 * (1 - b + b * len(row) / avg_len) + tf))
        idf(t) = float32(log(1 + (N - df(t) + 0.5) / (df(t) + 0.5)))

    and a query's score of a passage is the float32 sum of ``w`` over the query's tokens in
    order (repeats count again), as bm25s's ``np.add.at`` adds them. The top ``k`` are chosen
    with ``np.argpartition`` on the same float32 array as bm25s's ``_topk_numpy``, so ties at
    the k-th place fall the same way. Raises ``ValueError`` if no passage has an indexable word
    (like ``BM25Retriever.build``)."""

    def __init__(self, passages: Sequence[Passage], k1: float = 1.5, b: float = 0.75) -> None:
        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        tfs: list[int] = []
        lengths: list[int] = []
        for row, p in enumerate(passages):
            tokens = tokenize(f"{p.title} {p.text}")
            counts = Counter(tokens)  # in the order of first occurrence: ids as bm25s gives them
            lengths.append(len(tokens))
            rows.extend([row] * len(counts))
            cols.extend([vocab.setdefault(t, len(vocab)) for t in counts])
            tfs.extend(counts.values())
        if not vocab:
            raise ValueError("no passage has an indexable word (all empty or stopwords)")
        n = len(lengths)
        self.size = n
        self.vocab = vocab
        col = np.asarray(cols, dtype=np.int64)
        df = np.bincount(col, minlength=len(vocab))
        idf_of_df = np.zeros(n + 1, dtype=np.float32)  # idf by document frequency (math.log, as bm25s)
        for f in range(1, n + 1):
            idf_of_df[f] = math.log(1 + (n - f + 0.5) / (f + 0.5))
        idf = idf_of_df[df]
        avg_len = np.array(lengths).mean()  # float64, as bm25s
        l_d = np.asarray(lengths, dtype=np.int64)[np.asarray(rows, dtype=np.int64)]
        tf = np.asarray(tfs, dtype=np.float32)
        tfc = tf / (k1 * ((1 - b) + b * l_d / avg_len) + tf)  # float64, as bm25s's _score_tfc_lucene
        weights = (idf[col] * tfc).astype(np.float32)
        order = np.argsort(col, kind="stable")  # postings by token
        self._docs = np.asarray(rows, dtype=np.int64)[order]
        self._weights = weights[order]
        self._indptr = np.concatenate(([0], np.cumsum(df)))

    def scores(self, tokens: list[str]) -> np.ndarray:
        """float32 score of every passage for the (tokenized) query."""
        out = np.zeros(self.size, dtype=np.float32)
        for t in tokens:
            i = self.vocab.get(t)
            if i is not None:
                s, e = self._indptr[i], self._indptr[i + 1]
                out[self._docs[s:e]] += self._weights[s:e]
        return out

    def rank(self, queries: list[str], k: int = 5) -> list[list[tuple[int, float]]]:
        """(row, score) of the top ``k`` positively scored passages of each query, best first
        (ties by row), as ``BM25Retriever.rank``."""
        k = min(k, self.size)
        results: list[list[tuple[int, float]]] = []
        for q in queries:
            tokens = [t for t in tokenize(q) if t in self.vocab] if q and k > 0 else []
            if not tokens:
                results.append([])
                continue
            scores = self.scores(tokens)
            top = np.argpartition(scores, -k)[-k:]  # bm25s's choice of the top k
            pairs = [(int(row), float(scores[row])) for row in top if scores[row] > 0]
            results.append(sorted(pairs, key=lambda x: (-x[1], x[0])))
        return results


class CandidatePool(RetrieverBase):
    """BM25 within a fixed, small list of passages; always returns ``min(k, len(pool))`` of them."""

    name = "pool"

    def __init__(self, passages: Sequence[Passage]) -> None:
        self._passages = list(passages)
        self._bm25: SmallBM25 | BM25Retriever | None = None
        if self._passages:
            try:
                if len(self._passages) <= SMALL_POOL:
                    self._bm25 = SmallBM25(self._passages)
                else:
                    from hopqa.retrieval.bm25 import BM25Retriever

                    self._bm25 = BM25Retriever.build(self._passages, progress=False, backend="numpy")
            except ValueError:  # no indexable word anywhere: original order only
                self._bm25 = None

    @property
    def passages(self) -> list[Passage]:
        """The whole pool, in its original order."""
        return list(self._passages)

    def search(self, query: str, k: int = 5) -> list[Passage]:
        """Scored passages best first, then unscored ones in pool order; ``min(k, len(pool))`` in all."""
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: list[str], k: int = 5) -> list[list[Passage]]:
        """``search`` for each query."""
        k = min(k, len(self._passages))
        if k <= 0:
            return [[] for _ in queries]
        ranked = self._bm25.rank(queries, k) if self._bm25 is not None else [[] for _ in queries]
        out = []
        for hits in ranked:
            taken = {row for row, _ in hits}
            rest = [(row, 0.0) for row in range(len(self._passages)) if row not in taken]
            out.append([dataclasses.replace(self._passages[row], score=score)
                        for row, score in (hits + rest)[:k]])
        return out


class UnboundPool(RetrieverBase):
    """The retriever of a method built for the distractor setting, before any question: each
    question's own paragraphs take its place (``hopqa.evaluation.runner`` binds a
    ``CandidatePool`` per question with ``method.with_retriever``). Searching it is an error
    naming what to do, never an empty result."""

    name = "own paragraphs (unbound)"

    def search(self, query: str, k: int = 5) -> list[Passage]:
        raise LookupError("this method was built without a retriever: give it one (a corpus, an index or a "
                          "CandidatePool of the question's paragraphs), or evaluate it in the distractor setting, "
                          "which binds each question's own paragraphs")
