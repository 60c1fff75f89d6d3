"""What the HTTP service runs with: ``ServiceSettings``, and ``RetrieverCache``, the retrievers by kind.

``ServiceSettings`` holds everything ``create_app`` needs, already built: the loaded LLM, a
function giving the retriever of a kind (``bm25``, ``dense``, ``hybrid``; ``None``: the one the
service started with), where the evaluation runs are, the API key and the limits. ``hopqa
serve`` fills it from its options; tests fill it with a scripted LLM and retriever.

What a client may ask of a method is bounded here too: ``allowed_names``, the only values a
resource option (a dataset, a model; ``hopqa.options``) takes over HTTP, names and never paths
(``default_allowed_names``: the registered datasets, the built-in rerankers), and
``option_caps``, service-wide caps on numeric options by name (``DEFAULT_OPTION_CAPS``);
``hopqa.server.jobs.prepare`` enforces both.

``RetrieverCache`` is that function for the command: the default retriever, built at start, and
the other kinds built on first use (an index of the demo corpus or of ``--corpus``; building a
dense index embeds the corpus once: minutes), then kept. A kind that cannot be built (an
``--index`` of another kind, no sentence-transformers) raises ``ValueError`` with the reason,
which the service returns as a 422.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hopqa.config import DEFAULT_METHOD, MAX_QUESTION_CHARS
from hopqa.llm.base import LLMBase
from hopqa.retrieval.base import Retriever

#: The retriever kinds a request may name.
RETRIEVER_KINDS = ("bm25", "dense", "hybrid")
#: Service-wide caps on numeric method options, by option name, for every method that has the
#: option (``ServiceSettings.option_caps``, ``hopqa serve --cap NAME=N``): tighter than the
#: methods' own ranges (``hopqa.methods.base.OPTION_RANGES``), at least every built-in default.
#: A list option (ToR's ``widths``) is capped item by item.
DEFAULT_OPTION_CAPS: dict[str, int] = {
    "max_tokens": 1024, "document_tokens": 1024, "review_tokens": 1024, "mpc_tokens": 1024, "gap_tokens": 1024,
    "context_tokens": 32768, "samples": 8, "votes": 8, "n_documents": 8, "max_steps": 16, "max_iter": 8,
    "iterations": 8, "max_turns": 8, "max_levels": 8, "max_subquestions": 5, "depth": 4, "widths": 5,
    "probe_k": 20, "l": 20, "recall_k": 50, "max_paragraphs": 50, "bootstrap_examples": 20, "repeat_retries": 3, "restated_retries": 3,
    "concurrency": 8, "num_demos": 8,
}


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
    #: The address the service is bound to (``--host``): the ``Host`` names it answers to follow
    #: from it (``hopqa.server.headers``; a loopback address: localhost, 127.0.0.1, [::1]).
    host: str = "127.0.0.1"
    #: More ``Host`` names to answer to (``--allowed-host``): ``api.example.org``, ``*.example.org``, ``*``.
    allowed_hosts: tuple[str, ...] = ()
    #: Serve ``/docs`` (Swagger UI, its assets from this service, never a CDN).
    docs: bool = True
    #: Requests admitted at once (running + waiting); one more is refused with 429.
    max_queue: int = 8
    #: Seconds a request may take from its admission to its answer (then 504).
    timeout: float = 600.0
    max_question_chars: int = MAX_QUESTION_CHARS
    #: Largest request body, in bytes (larger: 413).
    max_body_bytes: int = 65536
    #: Largest ``k`` (passages per retrieval) a request may ask for.
    max_k: int = 50
    #: The values a client may give a resource option (a dataset, a model: ``hopqa.options``), by
    #: option name: names, never paths (``--allow-option NAME=VALUE``; ``default_allowed_names``).
    #: A directory option (HGOT's ``demo_cache``) takes none: the service keeps its files in its home.
    allowed_names: dict[str, tuple[str, ...]] = field(default_factory=lambda: default_allowed_names())
    #: Caps on numeric method options by option name (``--cap NAME=N``; ``DEFAULT_OPTION_CAPS``).
    option_caps: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_OPTION_CAPS))
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
        if isinstance(self.allowed_hosts, str):
            self.allowed_hosts = (self.allowed_hosts,)
        self.allowed_hosts = tuple(self.allowed_hosts)
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


@functools.cache
def _default_names() -> tuple[tuple[str, tuple[str, ...]], ...]:
    from hopqa.datasets.registry import REGISTRY
    from hopqa.retrieval.rerank import CROSS_ENCODERS, KEYWORDS

    datasets = [f"{name}:{split}" for name, spec in REGISTRY.items() for split in spec.splits]
    datasets += [name for name, spec in REGISTRY.items() if "train" in spec.splits]  # NAME: its train split
    return ("bootstrap_dataset", tuple(datasets)), ("rerank", (*KEYWORDS, *CROSS_ENCODERS))


def default_allowed_names() -> dict[str, tuple[str, ...]]:
    """The names a client may give each resource option unless the operator says otherwise:
    HGOT's ``bootstrap_dataset``, every registered dataset as ``NAME:SPLIT`` (and ``NAME`` alone,
    its ``train`` split, where it has one); LeapQuery's ``rerank``, the built-in rerankers
    (``auto``, ``bi-encoder``, ``hybrid``, ``llm``) and the cross-encoders hopqa knows
    (``hopqa.retrieval.rerank.CROSS_ENCODERS``, loaded only from the local Hugging Face cache).
    No path, and nothing for a directory option."""
    return dict(_default_names())
