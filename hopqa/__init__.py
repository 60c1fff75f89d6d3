"""hopqa: retrieval-augmented multi-hop question answering by question decomposition.

Three lines::

    import hopqa
    qa = hopqa.pipeline("retrieve-then-read", llm="embedded:smollm2-135m")
    print(qa.answer("Who directed the film that won Best Picture in 1998?").answer)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hopqa.config import DEFAULT_METHOD, VERSION
from hopqa.types import Answer, Example, Passage, Usage

__version__ = VERSION
__all__ = ["Answer", "Example", "Passage", "Usage", "pipeline", "__version__"]


def pipeline(
    method: str = DEFAULT_METHOD,
    llm: Any = None,
    corpus: str | Path | None = None,
    index: str | Path | None = None,
    retriever: Any = None,
    home: str | Path | None = None,
    cache: bool = True,
    search: str | None = None,
    rerank: str | None = None,
    preset: str | None = None,
    method_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> Any:
    """A ready method: ``llm`` is a spec string or an LLM object (default: the embedded Qwen);
    the retriever is ``retriever``, else an index directory of any kind (``index``), else an
    index of the ``search`` kind (``bm25`` by default, ``dense``, ``hybrid``) built over
    ``corpus``, else over the demo corpus; ``rerank`` (a cross-encoder, ``auto``, ``hybrid``,
    ``bi-encoder`` or ``llm``) puts a reranker behind it. ``options`` set fields of the method's
    config, over the options of ``preset`` (e.g. ``small-model``: the method's departures from
    its paper for a small model; ``hopqa methods`` lists each method's presets).
    ``method_options`` gives options as a mapping too (under ``options``): the way to set an
    option named like one of this function's keywords, e.g. LeapQuery's own reranker
    (``method_options={"rerank": "hybrid"}``; ``rerank=`` is the retriever's). The one way
    every entry point assembles a method: ``hopqa.build.assemble`` of a ``hopqa.build.Recipe``."""
    from hopqa.build import Recipe, assemble

    return assemble(Recipe(method, llm=llm, index=index, corpus=corpus, retriever=retriever, search=search,
                           rerank=rerank, preset=preset, options={**(method_options or {}), **options}, home=home,
                           cache=cache))
