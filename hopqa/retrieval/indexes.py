"""Every index kind behind one door: build an index of a corpus file, open an index directory
whatever its kind, and keep the index of a corpus used at run time.

- ``build_corpus_index(corpus, out, kind)``: read the corpus file (bad lines skipped and
  counted, duplicates removed: ``hopqa.corpus``), build a ``bm25``, ``dense`` or ``hybrid``
  index and save it; ``meta.json`` records the corpus, its fingerprint and the kind (and, for
  dense search, the embedder). BM25 runs on ``engine``: ``bm25s`` (in memory, k1 / b
  tunable), ``tantivy`` (streamed: flat memory, instant open, k1 1.2 / b 0.75 fixed) or
  ``auto``: bm25s when the corpus has fewer than ``TANTIVY_MIN_DOCS`` passages (it reads that
  many first) or k1 / b are set, tantivy otherwise.
- ``open_index(dir)``: the retriever of whatever kind ``meta.json`` records; with ``corpus``
  the index must have been built from a corpus with that content (``CorpusMismatchError``
  otherwise).
- ``load_or_build_kind(corpus, dir, kind)``: the run-time index of a corpus file (``--corpus``
  with ``--retriever``), rebuilt when missing, of another kind or embedder, damaged or stale.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any

from hopqa.corpus import (
    CorpusStats,
    corpus_fingerprint,
    dedupe,
    file_stat,
    iter_dedupe,
    read_corpus,
)
from hopqa.retrieval.base import Retriever
from hopqa.retrieval.store import (
    KINDS,
    CorpusMismatchError,
    IndexDamagedError,
    RetrievalIndexError,
    index_kind,
    passages_fingerprint,
    read_corpus_file,
    read_meta,
    write_meta,
)
from hopqa.types import Passage

#: The engines (``hopqa index --engine``): BM25 on bm25s or tantivy, or a Milvus collection.
ENGINES = ("auto", "bm25s", "tantivy", "milvus")
#: ``engine="auto"``: bm25s below this many passages, tantivy from it on (module docstring).
TANTIVY_MIN_DOCS = 50_000


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown index kind {kind!r}; use one of {', '.join(KINDS)}")
    return kind


def build_corpus_index(corpus_path: str | Path, out_dir: str | Path, kind: str = "bm25", *,
                       embedder: Any = None, model: str | None = None, faiss_kind: str = "auto",
                       engine: str = "auto", cache_dir: str | Path | None = None, progress: bool = True,
                       k1: float = 1.5, b: float = 0.75, overwrite: bool = False) -> Retriever:
    """Index a corpus file as ``kind`` into ``out_dir`` (module docstring). BM25 runs on
    ``engine``; dense search embeds with ``embedder`` (default: ``model`` loaded offline,
    all-MiniLM-L6-v2 when None), its vectors cached in chunks under ``cache_dir``."""
    from hopqa.retrieval.bm25 import BM25Retriever, NothingToIndexError

    check_kind(kind)
    if engine not in ENGINES:
        raise ValueError(f"unknown BM25 engine {engine!r}; use one of {', '.join(ENGINES)}")
    path, out = Path(corpus_path), Path(out_dir)
    if engine == "auto" and (k1, b) != (1.5, 0.75):
        engine = "bm25s"  # tantivy's k1 and b are fixed: a chosen k1 / b means bm25s
    if engine == "milvus":
        return _load_milvus(path, str(out_dir), kind, embedder=embedder, model=model, cache_dir=cache_dir,
                            progress=progress, overwrite=overwrite)
    if kind == "bm25":
        return _build_bm25(path, out, engine, progress=progress, k1=k1, b=b)
    passages, corpus_meta = read_corpus_file(path, progress)
    if not passages:
        raise NothingToIndexError("cannot build an index over an empty corpus (no passage with text)")
    from hopqa.retrieval.dense import DenseRetriever

    if embedder is None:
        from hopqa.embed import load_embedder

        embedder = load_embedder(model)
    if kind == "dense":
        dense = DenseRetriever.build(passages, embedder, faiss_kind=faiss_kind, cache_dir=cache_dir, progress=progress)
        dense.meta.update(corpus_meta)
        dense.save(out)
        return dense
    from hopqa.retrieval.hybrid import HybridRetriever

    (out / "meta.json").unlink(missing_ok=True)
    sparse: Any
    if engine == "tantivy":
        from hopqa.retrieval.tantivy_bm25 import TantivyRetriever

        sparse = TantivyRetriever.build(passages, out / "bm25", progress=progress, extra_meta=corpus_meta)
    else:
        sparse = BM25Retriever.build(passages, k1=k1, b=b, progress=progress)
        sparse.meta.update({**corpus_meta, "engine": "bm25s"})
    dense = DenseRetriever.build(passages, embedder, faiss_kind=faiss_kind, cache_dir=cache_dir, progress=progress)
    dense.meta.update(corpus_meta)
    hybrid = HybridRetriever([sparse, dense], meta={"kind": "hybrid", **corpus_meta, "model": embedder.name})
    hybrid.save(out)
    return hybrid


def _build_bm25(path: Path, out: Path, engine: str, *, progress: bool, k1: float, b: float) -> Retriever:
    """A BM25 index of a corpus file on ``engine``; ``auto`` reads up to ``TANTIVY_MIN_DOCS``
    passages and goes on with tantivy, streaming, only when the corpus has more."""
    from hopqa.retrieval.tantivy_bm25 import TantivyRetriever

    if engine == "bm25s":
        passages, corpus_meta = read_corpus_file(path, progress)
        return _save_bm25s(passages, corpus_meta, out, progress, k1, b)
    stat, fingerprint = file_stat(path), corpus_fingerprint(path)
    stats = CorpusStats()
    stream = read_corpus(path, stats)
    first: list[Passage] = []
    if engine == "auto":
        first = list(itertools.islice(stream, TANTIVY_MIN_DOCS))
        if len(first) < TANTIVY_MIN_DOCS:  # the whole corpus: small enough for bm25s
            corpus_meta = {"corpus": str(path.resolve()), "fingerprint": fingerprint, "corpus_stat": stat,
                           "skipped_lines": stats.skipped}
            passages = dedupe(first)
            corpus_meta["duplicates_removed"] = len(first) - len(passages)
            return _save_bm25s(passages, corpus_meta, out, progress, k1, b)
    corpus_meta = {"corpus": str(path.resolve()), "fingerprint": fingerprint, "corpus_stat": stat}
    retriever = TantivyRetriever.build(itertools.chain(first, stream), out, progress=progress, extra_meta=corpus_meta)
    retriever.meta["skipped_lines"] = stats.skipped
    write_meta(out, retriever.meta)
    return retriever


def _load_milvus(path: Path, uri: str, kind: str, *, embedder: Any, model: str | None, cache_dir: Any,
                 progress: bool, overwrite: bool) -> Retriever:
    """Stream a corpus file into the Milvus collection ``uri`` names: BM25 only for ``bm25``,
    BM25 and dense vectors for ``dense`` and ``hybrid`` (searchable in every mode)."""
    from hopqa.retrieval.milvus import MilvusRetriever, is_milvus_uri

    if not is_milvus_uri(uri):
        raise RetrievalIndexError(f"--engine milvus loads a collection: --out must be milvus://HOST:PORT/COLLECTION, "
                                  f"not {uri}")
    if kind != "bm25" and embedder is None:
        from hopqa.embed import load_embedder

        embedder = load_embedder(model)
    stat, fingerprint = file_stat(path), corpus_fingerprint(path)
    cache_key = None
    if kind != "bm25":  # the passages' fingerprint (a first, quiet pass): dense indexes share the vectors
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cache_key = passages_fingerprint(iter_dedupe(read_corpus(path, CorpusStats())))
    stats = CorpusStats()
    retriever = MilvusRetriever.build(
        uri, iter_dedupe(read_corpus(path, stats)), embedder=embedder if kind != "bm25" else None,
        fingerprint=fingerprint, cache_key=cache_key, cache_dir=cache_dir, progress=progress, overwrite=overwrite,
        extra_meta={"corpus": str(path.resolve()), "corpus_stat": stat})
    return retriever


def _save_bm25s(passages: list[Passage], corpus_meta: dict[str, Any], out: Path, progress: bool, k1: float,
                b: float) -> Retriever:
    from hopqa.retrieval.bm25 import BM25Retriever

    retriever = BM25Retriever.build(passages, k1=k1, b=b, progress=progress)
    retriever.meta.update({**corpus_meta, "engine": "bm25s"})
    retriever.save(out)
    return retriever


def open_index(directory: str | Path, embedder: Any = None, corpus: str | Path | None = None,
               mode: str | None = None) -> Retriever:
    """The retriever of the index in ``directory``, whatever its kind (module docstring); a
    Milvus collection URI opens the collection, searched as ``mode`` (default: its kind)."""
    from hopqa.retrieval.milvus import MilvusRetriever, is_milvus_uri

    if is_milvus_uri(directory):
        retriever = MilvusRetriever(str(directory), mode=mode, embedder=embedder)
        if corpus is not None:
            check_corpus(Path(str(directory)), retriever.meta, Path(corpus))
        return retriever
    d = Path(directory)
    meta = read_meta(d)
    if corpus is not None:
        check_corpus(d, meta, Path(corpus))
    kind = index_kind(meta)
    if kind == "bm25" and meta.get("engine") == "tantivy":
        from hopqa.retrieval.tantivy_bm25 import TantivyRetriever

        return TantivyRetriever.load(d)
    if kind == "bm25":
        from hopqa.retrieval.bm25 import BM25Retriever

        return BM25Retriever.load(d)
    if kind == "dense":
        from hopqa.retrieval.dense import DenseRetriever

        return DenseRetriever.load(d, embedder=embedder)
    if kind == "hybrid":
        from hopqa.retrieval.hybrid import HybridRetriever

        return HybridRetriever.load(d, embedder=embedder)
    raise RetrievalIndexError(f"{d} holds an index of kind {kind!r}, which this hopqa does not know "
                              f"(kinds: {', '.join(KINDS)})")


def check_corpus(directory: Path, meta: dict[str, Any], corpus: Path) -> None:
    """``CorpusMismatchError`` unless the index in ``directory`` was built from a corpus with the
    content of ``corpus`` (an index that records no corpus fingerprint cannot be checked: error)."""
    recorded = meta.get("fingerprint")
    if not corpus.is_file():
        raise FileNotFoundError(f"no corpus file at {corpus}")
    if recorded is None:
        raise CorpusMismatchError(f"the index in {directory} records no corpus fingerprint, so it cannot be "
                                  f"checked against {corpus}: rebuild it with: hopqa index {corpus} --out {directory}")
    if recorded != corpus_fingerprint(corpus):
        built_from = meta.get("corpus") or "another corpus"
        raise CorpusMismatchError(f"the index in {directory} was built from {built_from}, not from the content of "
                                  f"{corpus}: rebuild it with: hopqa index {corpus} --out {directory} "
                                  f"--kind {index_kind(meta)}")


def load_or_build_kind(corpus_path: str | Path, index_dir: str | Path, kind: str = "bm25", *,
                       embedder: Any = None, model: str | None = None, cache_dir: str | Path | None = None,
                       progress: bool = True) -> Retriever:
    """The ``kind`` index of a corpus file in ``index_dir``, (re)built when it is missing, of
    another kind, format or embedder, damaged (with a warning), or stale (the corpus content
    changed; the file is re-hashed only when its size or modification time changed). BM25 is
    built on ``engine="auto"``: bm25s, or tantivy for a corpus of ``TANTIVY_MIN_DOCS``
    passages or more."""
    from hopqa.retrieval.bm25 import FORMAT as BM25S_FORMAT

    check_kind(kind)
    path, d = Path(corpus_path), Path(index_dir)
    if not path.is_file():
        raise FileNotFoundError(f"no corpus file at {path}")
    want_model = None if kind == "bm25" else embedder.name if embedder is not None else (model or _default_model())
    if (d / "meta.json").is_file():
        try:
            meta = read_meta(d)
            untouched = meta.get("corpus_stat") == file_stat(path)
            same = index_kind(meta) == kind and meta.get("model") == want_model
            if kind == "bm25" and meta.get("engine") != "tantivy":  # bm25s: its format and parameters too
                same = same and meta.get("format") == BM25S_FORMAT and (meta.get("k1"), meta.get("b")) == (1.5, 0.75)
            if same and (untouched or meta.get("fingerprint") == corpus_fingerprint(path)):
                retriever = open_index(d, embedder=embedder)
                if not untouched:  # same content, new mtime: remember it to skip hashing next time
                    meta["corpus_stat"] = file_stat(path)
                    write_meta(d, meta)
                return retriever
        except IndexDamagedError as exc:
            warnings.warn(f"the index at {exc.directory} is damaged ({exc.detail}): rebuilding it", UserWarning,
                          stacklevel=2)
        except (OSError, RetrievalIndexError, KeyError):
            pass  # unusable otherwise: rebuilt below
    return build_corpus_index(path, d, kind, embedder=embedder, model=model, cache_dir=cache_dir, progress=progress)


def _default_model() -> str:
    from hopqa.embed import DEFAULT_EMBEDDER

    return DEFAULT_EMBEDDER
