"""Building things, one way: LLM specs -> models, corpus / index -> retriever, name -> method.

Every entry point assembles a method the same way: ``assemble(Recipe(...))``. ``hopqa.pipeline``
is a ``Recipe`` of its keywords; ``hopqa ask`` makes one of its options, ``hopqa eval`` one per
method (the model and the retriever loaded once and handed to each), the HTTP service one per
request (its model and retrievers loaded at start). So an option added to ``Recipe`` reaches
the command line, the service and the Python API alike. ::

    from hopqa.build import Recipe, assemble
    method = assemble(Recipe("ircot", llm="embedded:smollm2-135m", options={"k": 3}))  # the demo corpus
    print(method.answer("Who ...?").answer)

``assemble`` makes, in this order (the cheap checks and the retriever before the model, which
takes longest to load): the method's class and options (checked), the retriever a retrieving
method searches, the model (with what the method needs of it: ``spec_with``), an LLM reranker,
GenSco's scorer model, then the method. The pieces, for a caller that shares them:

- ``load_model(spec)``: a backend from a spec string (``hopqa.llm.load_llm``), with the API key
  of OpenAI-compatible servers from ``hopqa.config`` (the one module that reads the environment).
- ``corpus_retriever(index=, corpus=)``: a BM25 index directory, else an index built (once,
  cached under ``<home>/indexes``) over a corpus file, else the demo corpus.
- ``build_method(name, llm, retriever, **options)``: the method's config (defaults, the name's
  preset, ``options``), then the components it declares (``Method.components``) made or
  checked: ``retriever`` (a retrieving method built without one searches each question's own
  paragraphs, bound per question by the evaluation's distractor setting: ``UnboundPool``),
  ``demos`` (``few_shot_demos(config.shots)`` from the shipped train subsets), ``scorer``,
  ``judge``, ``embedder`` (given, or the method's default), and HGOT's ``demo_set`` (with
  ``demo_source=bootstrap``: ``hopqa.bootstrap.bootstrap_hgot``, cached on disk).

Bad input (a malformed spec, a missing corpus file, a damaged index, an unknown method or
option, a component the method does not take) raises ``BuildError`` (a ``ValueError``) or the
component's own ``ValueError`` (``LLMSpecError``, ``MethodError``), with a one-line message;
the CLI reports them as usage errors.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hopqa.config import default_home, openai_api_key
from hopqa.llm.base import LLMBase
from hopqa.methods.base import Method, get_method_class, instantiate, method_config
from hopqa.retrieval.base import Retriever
from hopqa.types import Demo


class BuildError(ValueError):
    """Bad input for building a component (a missing corpus file, a damaged index, ...)."""


def spec_with(spec: str, needs: Collection[str]) -> str:
    """``spec`` able to serve ``needs`` (capabilities a method needs, ``Method.needs``) where a
    spec option gives it: an embedded model is loaded with ``logits_all=1`` for ``logprobs``
    (token log-probabilities of generated text). Any other spec is returned as it is (a server
    either returns log-probabilities or the method says it cannot run)."""
    from hopqa.llm.base import LOGPROBS

    if LOGPROBS not in needs or not spec.startswith("embedded:") or "logits_all" in spec:
        return spec
    return spec + ("&" if "?" in spec else "?") + "logits_all=1"


def needs_of(methods: dict[str, dict[str, Any]]) -> set[str]:
    """What the methods (their options by name, a preset among them) need of the model beyond
    text (``Method.needs``), for ``spec_with``."""
    from hopqa.methods.base import get_method_class, method_config

    return {need for name, options in methods.items() for need in get_method_class(name).needs(
        method_config(name, **options))}


def load_model(spec: str, *, home: str | Path | None = None, cache: bool = True) -> LLMBase:
    """The LLM a spec names (see ``hopqa.llm``), its responses cached unless ``cache=False``;
    ``LLMSpecError`` for a malformed spec."""
    from hopqa.llm import load_llm

    return load_llm(spec, home=default_home(home), cache=cache, api_key=openai_api_key())


def corpus_retriever(index: str | Path | None = None, corpus: str | Path | None = None,
                     home: str | Path | None = None, kind: str | None = None, rerank: str | None = None,
                     rerank_depth: int = 20, llm: LLMBase | None = None, progress: bool = True) -> Retriever:
    """The retriever over ``index`` (a directory built by ``hopqa index``, of whatever kind it
    records, or a Milvus collection URI searched as ``kind``), else over ``corpus`` (a JSON-lines ``{id, title, text}`` or TSV file, indexed once
    as ``kind``: ``bm25`` by default, ``dense`` or ``hybrid``), else over the demo corpus
    (indexed as ``kind`` too). With both ``index`` and ``corpus`` the index must have been built
    from that corpus. ``rerank`` puts a reranker behind it (``hopqa.retrieval.rerank.make_reranker``:
    a cross-encoder model, ``auto``, ``hybrid``, ``bi-encoder`` or ``llm``, the last judging with ``llm``): it
    retrieves ``rerank_depth`` passages and keeps the best ``k`` of them."""
    from hopqa.demo import build_demo_corpus, index_dir_for
    from hopqa.embed import EmbedderUnavailable
    from hopqa.retrieval.bm25 import NothingToIndexError
    from hopqa.retrieval.indexes import check_kind, load_or_build_kind, open_index
    from hopqa.retrieval.milvus import is_milvus_uri
    from hopqa.retrieval.store import RetrievalIndexError

    home_dir = default_home(home)
    try:
        if kind is not None:
            check_kind(kind)
        if index and is_milvus_uri(index):
            if corpus is not None and not Path(corpus).is_file():
                raise BuildError(f"no corpus file at {corpus}")
            retriever = open_index(index, corpus=corpus, mode=kind)
        elif index:
            if not Path(index).is_dir():
                raise BuildError(f"no index directory at {index} (build one with: hopqa index CORPUS --out DIR)")
            if not (Path(index) / "meta.json").is_file():
                raise BuildError(f"no index in {index} (build one with: hopqa index CORPUS --out {index})")
            if corpus is not None and not Path(corpus).is_file():
                raise BuildError(f"no corpus file at {corpus}")
            retriever: Retriever = open_index(index, corpus=corpus)
            if kind is not None and not retriever.name.startswith(_KIND_NAMES[kind]):
                raise BuildError(f"the index in {index} is {retriever.name}, not {kind}: drop --retriever (an index "
                                 f"decides its own kind) or build a {kind} index")
        else:
            path = Path(corpus) if corpus else None
            if path is not None and not path.is_file():
                raise BuildError(f"no corpus file at {path} (expected jsonl lines {{\"id\", \"title\", \"text\"}} or tsv)")
            kind = kind or "bm25"
            if path is None:
                path = build_demo_corpus(home_dir)
                where = home_dir / "demo" / kind
            else:
                where = index_dir_for(path, home_dir)
                if kind != "bm25":
                    where = where.with_name(f"{where.name}-{kind}")
            try:
                retriever = load_or_build_kind(path, where, kind, cache_dir=home_dir / "cache" / "embeddings",
                                               progress=progress)
            except NothingToIndexError as exc:
                raise BuildError(f"{path}: {exc}") from exc
    except (RetrievalIndexError, EmbedderUnavailable, FileNotFoundError) as exc:
        raise BuildError(str(exc)) from exc
    return with_reranker(retriever, rerank, llm=llm, depth=rerank_depth) if rerank else retriever


def with_reranker(retriever: Retriever, rerank: str, llm: LLMBase | None = None, depth: int = 20) -> Retriever:
    """``retriever`` behind the reranker ``rerank`` names (``corpus_retriever``); ``BuildError``
    when it cannot be made (``llm`` without a model, a cross-encoder not on this machine)."""
    from hopqa.embed import EmbedderUnavailable
    from hopqa.retrieval.rerank import RerankingRetriever, make_reranker

    try:
        return RerankingRetriever(retriever, make_reranker(rerank, llm=_traced(llm)), depth=depth)
    except (ValueError, ImportError, OSError, EmbedderUnavailable) as exc:
        raise BuildError(f"--rerank {rerank}: {exc}") from exc


#: How the retriever of each index kind names itself (its ``name`` starts so).
_KIND_NAMES = {"bm25": "bm25", "dense": "dense", "hybrid": "hybrid"}


def _traced(llm: LLMBase | None) -> LLMBase | None:
    """The reranker's LLM, traced so that its calls count in each question's cost."""
    if llm is None:
        return None
    from hopqa.runtime import traced_llm

    return traced_llm(llm)


def takes(name: str, component: str) -> bool:
    """Whether the method registered as ``name`` takes ``component`` (e.g. GenSco's ``scorer``)."""
    return component in get_method_class(name).components


def resolve_options(name: str, options: dict[str, Any], dataset: str | None = None) -> dict[str, Any]:
    """``options`` with what the method's paper sets for the evaluated ``dataset`` when the user
    did not: GenSco's ``shots`` per dataset (``shots_by_dataset``)."""
    per_dataset: dict[str, int] = getattr(get_method_class(name), "shots_by_dataset", {})
    if dataset in per_dataset and options.get("shots") is None:
        return {**options, "shots": per_dataset[dataset]}
    return dict(options)


def build_method(name: str, llm: LLMBase, retriever: Retriever | None = None, *,
                 scorer: LLMBase | None = None, judge: Any = None, embedder: Any = None, reranker: Any = None,
                 demos: list[Demo] | None = None, demo_set: Any = None, dataset: str | None = None,
                 corpus: Callable[[], Retriever] | None = None, home: str | Path | None = None,
                 data_dir: str | Path | None = None, progress: bool = True, preset: str | None = None,
                 **options: Any) -> Method:
    """The method registered as ``name`` on ``llm``, ready to answer (see the module docstring).

    ``options`` set fields of its config (checked), over the options of ``preset`` (one of
    the method's presets, e.g. ``small-model``: ``hopqa.methods.base.method_presets``). Components it does not declare are an
    error when given, except ``retriever``, which a method that does not retrieve (Direct, CoT,
    GenRead) ignores, so that one call builds any method. ``dataset`` names the evaluated
    dataset: a method whose paper takes its demonstrations from that dataset's training data
    (GenSco's answer prompt) gets them from its shipped train subset (``resolve_options``).
    ``corpus``, ``home``, ``data_dir`` and ``progress`` serve HGOT's bootstrap
    (the retriever for training examples without paragraphs, where runs are cached, where the
    training split is read from, a progress bar)."""
    from hopqa.retrieval.pool import UnboundPool

    cls = get_method_class(name)
    config = method_config(name, preset=preset, **resolve_options(name, options, dataset))
    parts: dict[str, Any] = {"scorer": scorer, "judge": judge, "embedder": embedder, "reranker": reranker,
                             "demo_set": demo_set}
    if "retriever" in cls.components:  # (a method that does not retrieve ignores one: any method builds the same way)
        parts["retriever"] = retriever if retriever is not None else UnboundPool()
    if "demos" in cls.components:
        shots = getattr(config, "shots", 0)
        if demos is None and shots > 0:
            from hopqa.datasets import (
                ANSWER_DEMO_DATASETS,
                answer_demos,
                few_shot_demos,
            )

            own = dataset in getattr(cls, "shots_by_dataset", {}) and dataset in ANSWER_DEMO_DATASETS
            demos = answer_demos(dataset, shots) if own else few_shot_demos(shots)  # type: ignore[arg-type]
        parts["demos"] = demos
    elif demos is not None:
        parts["demos"] = demos
    if "demo_set" in cls.components and demo_set is None and getattr(config, "demo_source", "") == "bootstrap":
        from hopqa.bootstrap import bootstrap_hgot

        def training_corpus() -> Retriever:
            if corpus is not None:
                return corpus()
            if retriever is not None and not isinstance(retriever, UnboundPool):
                return retriever
            return corpus_retriever(home=home)

        parts["demo_set"] = bootstrap_hgot(llm, config, corpus=training_corpus, judge=judge, embedder=embedder,
                                           home=home, data_dir=data_dir, progress=progress).demo_set
    return instantiate(name, llm, config, **parts)


@dataclass(frozen=True)
class Recipe:
    """Everything that makes a ready method (``assemble``): what ``hopqa ask``'s options, a
    service request and ``hopqa.pipeline``'s keywords say.

    - ``method``: a registered name (``hopqa methods``); ``preset`` one of its presets and
      ``options`` fields of its config, over the preset's.
    - ``llm``: a spec string (default: ``$HOPQA_LLM``, else the embedded Qwen) or a loaded model;
      ``scorer_llm`` likewise, for GenSco's scorer (default: ``llm``); ``cache``: responses
      cached on disk (a spec's model only).
    - The retriever of a retrieving method: ``retriever`` (a ready one), else an index directory
      of any kind (``index``), else an index of the ``search`` kind (``bm25`` by default,
      ``dense``, ``hybrid``) over ``corpus``, else over the demo corpus; ``rerank`` (a
      cross-encoder, ``auto``, ``hybrid``, ``bi-encoder`` or ``llm``) puts a reranker behind
      it, reranking ``rerank_depth`` passages. ``own_paragraphs=True`` builds none: the method
      searches each question's own paragraphs, which the evaluation's distractor setting binds.
    - ``dataset``: the evaluated dataset (GenSco's demonstrations from its training data);
      ``home``, ``data_dir``: where hopqa's files and the datasets are; ``progress``: progress
      bars (HGOT's bootstrap)."""

    method: str | None = None
    llm: str | LLMBase | None = None
    scorer_llm: str | LLMBase | None = None
    preset: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    retriever: Retriever | None = None
    index: str | Path | None = None
    corpus: str | Path | None = None
    search: str | None = None
    rerank: str | None = None
    rerank_depth: int = 20
    own_paragraphs: bool = False
    dataset: str | None = None
    home: str | Path | None = None
    data_dir: str | Path | None = None
    cache: bool = True
    progress: bool = True

    @property
    def name(self) -> str:
        """The method's name (the default method when none is given)."""
        from hopqa.config import DEFAULT_METHOD

        return self.method or DEFAULT_METHOD

    def method_options(self) -> dict[str, Any]:
        """The method's options with the preset among them, as ``needs_of`` reads them."""
        return {**({"preset": self.preset} if self.preset else {}), **self.options}

    def llm_spec(self) -> str | None:
        """The spec the model is loaded from, with what the method needs of it (``spec_with``);
        None when ``llm`` is a loaded model."""
        from hopqa.config import default_llm

        if isinstance(self.llm, LLMBase):
            return None
        return spec_with(default_llm(self.llm), needs_of({self.name: self.method_options()}))

    def corpus_retriever(self) -> Retriever:
        """The retriever ``index``, ``corpus`` and ``search`` name, behind the ``rerank``
        reranker unless that is the LLM judge, which needs the model (``assemble`` adds it)."""
        from hopqa.retrieval.rerank import LLM_JUDGES

        return corpus_retriever(index=self.index, corpus=self.corpus, home=self.home, kind=self.search,
                                rerank=None if self.rerank in LLM_JUDGES else self.rerank,
                                rerank_depth=self.rerank_depth, progress=self.progress)

    def llm_reranked(self, retriever: Retriever | None, model: LLMBase) -> Retriever | None:
        """``retriever`` behind the LLM relevance judge on ``model`` when ``rerank`` is ``llm`` or
        ``llm-expected`` (the reranker ``corpus_retriever`` leaves out: it needs the loaded model)."""
        from hopqa.retrieval.rerank import LLM_JUDGES

        if retriever is None or self.rerank not in LLM_JUDGES:
            return retriever
        return with_reranker(retriever, self.rerank, llm=model, depth=self.rerank_depth)


def assemble(recipe: Recipe, note: Callable[[str], None] | None = None) -> Method:
    """The method ``recipe`` describes, ready to answer (see the module docstring). ``note``
    hears what is worth telling a user (a scorer model no chosen method takes is ignored).
    Raises ``MethodError`` (an unknown method, a bad option), ``BuildError`` (a missing corpus,
    a damaged index, ...) or ``LLMSpecError`` (a malformed spec) — ``ValueError``s, before the
    model is loaded wherever the check does not need it."""
    name = recipe.name
    cls = get_method_class(name)
    method_config(name, **resolve_options(name, recipe.method_options(), recipe.dataset))  # checked first
    retriever = recipe.retriever
    built_here = retriever is None and "retriever" in cls.components and not recipe.own_paragraphs
    if built_here:
        retriever = recipe.corpus_retriever()
    model = recipe.llm if isinstance(recipe.llm, LLMBase) else _load(recipe.llm_spec() or "", "llm", recipe)
    if built_here:
        retriever = recipe.llm_reranked(retriever, model)
    scorer = None
    if recipe.scorer_llm is not None:
        if "scorer" not in cls.components:
            if note is not None:
                note(f"the method {name!r} takes no scorer; the scorer model is ignored")
        elif isinstance(recipe.scorer_llm, LLMBase):
            scorer = recipe.scorer_llm
        else:
            scorer = _load(recipe.scorer_llm, "scorer_llm", recipe)
    return build_method(name, model, retriever, scorer=scorer, dataset=recipe.dataset,
                        corpus=recipe.corpus_retriever if recipe.retriever is None else None,
                        home=recipe.home, data_dir=recipe.data_dir, progress=recipe.progress,
                        **recipe.method_options())


def _load(spec: str, role: str, recipe: Recipe) -> LLMBase:
    """``load_model(spec)``; its ``LLMSpecError`` says which of the recipe's models failed
    (``role``: ``llm`` or ``scorer_llm``, as the exception's ``role`` attribute)."""
    from hopqa.llm import LLMSpecError

    try:
        return load_model(spec, home=recipe.home, cache=recipe.cache)
    except LLMSpecError as exc:
        exc.role = role  # type: ignore[attr-defined]
        raise
