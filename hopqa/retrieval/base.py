"""The Retriever protocol every retrieval backend implements.

``search(query, k)`` returns up to ``k`` passages ranked best first, each with its ``score``;
``batch_search(queries, k)`` does the same for many queries (backends override it when they
can do better than a loop). Dense and hybrid retrievers plug in behind the same protocol.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from hopqa.types import Passage


@runtime_checkable
class Retriever(Protocol):
    """Anything that ranks passages for a query."""

    name: str

    def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages for ``query``, best first, with scores."""
        ...

    def batch_search(self, queries: list[str], k: int = 5) -> list[list[Passage]]:
        """``search`` for each query, in order."""
        ...


class RetrieverBase:
    """Default ``batch_search`` as a loop over ``search``; subclasses override either."""

    name: str = "retriever"

    def search(self, query: str, k: int = 5) -> list[Passage]:  # pragma: no cover - abstract
        raise NotImplementedError

    def batch_search(self, queries: list[str], k: int = 5) -> list[list[Passage]]:
        return [self.search(q, k) for q in queries]
