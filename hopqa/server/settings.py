"""What the HTTP service runs with: ``ServiceSettings``, and ``RetrieverCache``, the retrievers by kind.

``ServiceSettings`` holds everything ``create_app`` needs, already built: the loaded LLM, a
function giving the retriever of a kind (``bm25``, ``dense``, ``hybrid``; ``None``: the one the
service started with), where the evaluation runs are, the API key and the limits. ``hopqa
serve`` fills it from its options; tests fill it with a scripted LLM and retriever.

``RetrieverCache`` is that function for the command: the default retriever, built at start, and
the other kinds built on first use (an index of the demo corpus or of ``--corpus``; building a
dense index embeds the corpus once: minutes), then kept. A kind that cannot be built (an
``--index`` of another kind, no sentence-transformers) raises ``ValueError`` with the reason,
which the service returns as a 422.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hopqa.config import DEFAULT_METHOD, MAX_QUESTION_CHARS
from hopqa.llm.base import LLMBase
from hopqa.retrieval.base import Retriever

#: The retriever kinds a request may name.
RETRIEVER_KINDS = ("bm25", "dense", "hybrid")


@dataclass
class ServiceSettings:
    """The service's model, retrievers, runs directory, key and limits (module docstring)."""

    #: The loaded model every method runs on.
    llm: LLMBase
    #: The retriever of a kind (``None``: the default one); ``ValueError`` when it cannot be had.
    retriever_for: Callable[[str | None], Retriever]
    #: Where ``GET /v1/runs`` looks for evaluation runs (None: the runs endpoints answer 404).
    runs_dir: Path | None = None
    #: With a key, every ``/v1`` request needs ``Authorization: Bearer KEY`` (or the cookie).
    api_key: str | None = None
    #: Requests admitted at once (running + waiting); one more is refused with 429.
    max_queue: int = 8
    #: Seconds a request may take from its admission to its answer (then 504).
    timeout: float = 600.0
    max_question_chars: int = MAX_QUESTION_CHARS
    #: Largest request body, in bytes (larger: 413).
    max_body_bytes: int = 65536
    #: Largest ``k`` (passages per retrieval) a request may ask for.
    max_k: int = 50
    #: The method of a request that names none.
    default_method: str = DEFAULT_METHOD
    #: How ``/healthz`` names the model (default: ``llm.name``).
    llm_name: str = ""
    #: hopqa's home (``--home``) for what ``hopqa.build`` reads or caches there.
    home: Path | None = None
    #: Seconds an SSE stream may stay silent before a keep-alive comment is sent.
    ping_seconds: float = 15.0
    #: Requests running at once (default: as many as the model serves at once, ``llm.max_concurrency``).
    concurrency: int = field(default=0)

    def __post_init__(self) -> None:
        if not self.llm_name:
            self.llm_name = getattr(self.llm, "name", "llm")
        if self.runs_dir is not None:
            self.runs_dir = Path(self.runs_dir)
        if self.concurrency < 1:
            self.concurrency = max(1, int(getattr(self.llm, "max_concurrency", 1) or 1))
        for name in ("max_queue", "max_question_chars", "max_body_bytes", "max_k"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)!r}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be above 0, not {self.timeout!r}")


class RetrieverCache:
    """``retriever_for`` of ``hopqa serve``: ``default`` for ``None`` or its own kind, any other
    kind from ``build(kind)`` on first use, kept (built once even when asked concurrently)."""

    def __init__(self, default: Retriever, build: Callable[[str], Retriever]) -> None:
        self.default = default
        self.default_kind = kind_of(default)
        self._build = build
        self._built: dict[str, Retriever] = {}
        self._lock = threading.Lock()

    def __call__(self, kind: str | None) -> Retriever:
        if kind is None or kind == self.default_kind:
            return self.default
        if kind not in RETRIEVER_KINDS:
            raise ValueError(f"unknown retriever {kind!r}; use one of {', '.join(RETRIEVER_KINDS)}")
        with self._lock:
            if kind not in self._built:
                self._built[kind] = self._build(kind)
            return self._built[kind]


def kind_of(retriever: Retriever) -> str | None:
    """The kind of a retriever (its ``name`` starts with it: ``bm25``, ``dense-...``), else None."""
    name = str(getattr(retriever, "name", ""))
    return next((kind for kind in RETRIEVER_KINDS if name.startswith(kind)), None)
