"""A question's own candidate paragraphs as a retriever (the distractor setting).

HotpotQA, 2WikiMultihopQA, MuSiQue and GenSco's Adversarial HotpotQA give each question a
small set of paragraphs (2-4 gold plus distractors). ``CandidatePool`` ranks them with BM25
computed over the pool alone. Choice (documented, and what the distractor setting needs): the
pool always returns ``min(k, len(pool))`` passages — passages that share no term with the
query follow the scored ones in their original order with score 0.0 — because every candidate
is a legitimate answer source in this setting.
"""

from __future__ import annotations

from collections.abc import Sequence

from hopqa.retrieval.base import RetrieverBase
from hopqa.retrieval.bm25 import BM25Retriever
from hopqa.types import Passage


class CandidatePool(RetrieverBase):
    """BM25 within a fixed, small list of passages."""

    name = "pool"

    def __init__(self, passages: Sequence[Passage]) -> None:
        self._passages = list(passages)
        self._bm25 = BM25Retriever.build(self._passages, backend="numpy") if self._passages else None

    @property
    def passages(self) -> list[Passage]:
        return list(self._passages)

    def search(self, query: str, k: int = 5) -> list[Passage]:
        if not self._passages or k <= 0:
            return []
        assert self._bm25 is not None
        scored = self._bm25.search(query, k)
        by_id = {p.id: p for p in self._passages}
        out = [Passage(id=h.id, title=h.title, text=h.text, score=h.score,
                       is_supporting=by_id[h.id].is_supporting) for h in scored]
        taken = {p.id for p in out}
        for p in self._passages:
            if len(out) >= k:
                break
            if p.id not in taken:
                out.append(Passage(id=p.id, title=p.title, text=p.text, score=0.0, is_supporting=p.is_supporting))
        return out[:k]
