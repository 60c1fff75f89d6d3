"""A question's own candidate paragraphs as a retriever (the distractor setting).

HotpotQA, 2WikiMultihopQA, MuSiQue and Adversarial HotpotQA give each question a small set
of paragraphs (gold plus distractors). ``CandidatePool`` ranks them with BM25 computed over the
pool alone (bm25s, numpy backend, built in memory when the pool is made: ~1 ms for 20
paragraphs).

Choice (what the distractor setting needs): ``search`` always returns ``min(k, len(pool))``
passages. Passages that share no word with the query follow the scored ones in their original
order with ``score=0.0``, because every candidate is a legitimate answer source here. The same
simple ordering (original order, all scores 0.0) is the fallback when BM25 has nothing to work
with: an empty or all-stopword query, or a pool in which no passage has an indexable word.
Returned passages are copies carrying the pool's fields (``id``, ``is_supporting``) and a score.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hopqa.retrieval.base import RetrieverBase
from hopqa.retrieval.bm25 import BM25Retriever
from hopqa.types import Passage


class CandidatePool(RetrieverBase):
    """BM25 within a fixed, small list of passages; always returns ``min(k, len(pool))`` of them."""

    name = "pool"

    def __init__(self, passages: Sequence[Passage]) -> None:
        self._passages = list(passages)
        self._bm25: BM25Retriever | None = None
        if self._passages:
            try:
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
        """``search`` for each query (one bm25s call for the batch)."""
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
