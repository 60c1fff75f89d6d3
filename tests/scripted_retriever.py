"""A retriever for unit tests of control flow: each query answers a fixed list of passages."""

from __future__ import annotations

from hopqa.retrieval.base import RetrieverBase
from hopqa.types import Passage


class ScriptedRetriever(RetrieverBase):
    """Queries -> passage ids (a string of one-letter ids) in ``passages``; records every query."""

    name = "scripted"

    def __init__(self, table: dict[str, str], passages: dict[str, Passage]) -> None:
        self.table, self.passages, self.queries = table, passages, []

    def search(self, query: str, k: int = 5) -> list[Passage]:
        self.queries.append(query)
        return [self.passages[i] for i in self.table.get(query, "")][:k]
