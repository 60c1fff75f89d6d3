"""BM25 with tantivy: the engine for corpora too large for bm25s's in-memory build.

tantivy (a Rust Lucene-like library, ``tantivy`` on PyPI) builds its index by streaming —
passages are read, deduplicated and added one by one, so memory stays flat whatever the corpus
size (RETRIEVAL.md: 1M passages in 53 s and 123 MB on disk, where bm25s peaks at 4.3 GB) — and
opens instantly (no JIT warm-up: bm25s's numba backend compiles for 7-12 s on the first query
of every process).

Tokens are bm25s's (``hopqa.retrieval.bm25``): ``\\w\\w+`` words, lower-cased, minus the same
English stopwords, Snowball-stemmed; title and text are indexed as one field with term
frequencies but no positions (BM25 needs none). Scores are tantivy's BM25 (k1 1.2, b 0.75,
fixed by tantivy), so they differ from bm25s's (k1 1.5) in scale, and rarely in order. A query
is tokenized by the same analyzer and searched as the disjunction of its terms; a query with
no indexed term finds nothing. Ties go to the passage indexed first.

Index directory: hopqa's ``meta.json`` (``kind: bm25``, ``engine: tantivy``, the corpus and its
fingerprint, the number of passages, and the size and sha256 of each tantivy file) and
tantivy's own files in ``tantivy/``. Each passage is stored in tantivy's document store as
JSON, so there is no ``passages.jsonl``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hopqa.config import VERSION
from hopqa.console import progress_bar
from hopqa.corpus import (
    CorpusStats,
    corpus_fingerprint,
    file_stat,
    iter_dedupe,
    read_corpus,
)
from hopqa.retrieval.base import RetrieverBase
from hopqa.retrieval.bm25 import STOPWORDS_EN, TOKEN_PATTERN, NothingToIndexError
from hopqa.retrieval.store import (
    PASSAGE_FILES,
    IndexDamagedError,
    RetrievalIndexError,
    file_records,
    meta_corpus,
    read_meta,
    rebuild_command,
    verify_files,
    write_meta,
)
from hopqa.types import Passage

FORMAT = 1
ENGINE = "tantivy"
SUBDIR = "tantivy"
ANALYZER = "hopqa_en"
#: The writer's memory budget (tantivy flushes a segment when it is reached).
WRITER_HEAP_BYTES = 256 * 2**20


def _import_tantivy() -> Any:
    try:
        import tantivy
    except ImportError as exc:
        raise RetrievalIndexError("the tantivy engine needs the tantivy package: pip install tantivy") from exc
    return tantivy


def analyzer() -> Any:
    """tantivy's analyzer for hopqa's BM25 tokens (module docstring)."""
    t = _import_tantivy()
    return (t.TextAnalyzerBuilder(t.Tokenizer.regex(TOKEN_PATTERN.replace("(?u)", "")))
            .filter(t.Filter.lowercase())
            .filter(t.Filter.custom_stopword(list(STOPWORDS_EN)))
            .filter(t.Filter.stemmer("english"))
            .build())


def _schema() -> Any:
    t = _import_tantivy()
    sb = t.SchemaBuilder()
    sb.add_text_field("body", stored=False, tokenizer_name=ANALYZER, index_option="freq")
    sb.add_bytes_field("doc", stored=True, indexed=False)
    sb.add_unsigned_field("row", stored=True, indexed=False)
    return sb.build()


class TantivyRetriever(RetrieverBase):
    """BM25 over a tantivy index (module docstring)."""

    name = "bm25:tantivy"

    def __init__(self, index: Any, meta: dict[str, Any], source: Path | None = None) -> None:
        self._index = index
        self._schema = index.schema
        self._analyzer = analyzer()
        self._lock = threading.Lock()
        self.meta = meta
        self._source = source

    @property
    def size(self) -> int:
        return int(self.meta.get("num_docs", 0))

    @property
    def engine(self) -> str:
        return ENGINE

    # -- building --------------------------------------------------------------------------
    @classmethod
    def build(cls, passages: Iterable[Passage], directory: str | Path, *, progress: bool = True,
              total: int | None = None, extra_meta: dict[str, Any] | None = None) -> TantivyRetriever:
        """Stream ``passages`` (deduplicated as ``hopqa.corpus.dedupe`` does, as they come) into
        a new index in ``directory`` (replacing one there); ``NothingToIndexError`` when none
        has text."""
        t = _import_tantivy()
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=d, prefix=".building-"))
        dropped = [0]
        rows = 0
        try:
            index = t.Index(_schema(), path=str(staging))
            index.register_tokenizer(ANALYZER, analyzer())
            writer = index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=0)
            bar = progress_bar(total=total, desc="indexing (tantivy)", enabled=progress, unit=" passages",
                               mininterval=0.5)
            try:
                for p in iter_dedupe(passages, dropped):
                    bar.update(1)
                    if not (p.title.strip() or p.text.strip()):
                        continue
                    doc = json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False)
                    writer.add_document(t.Document(body=f"{p.title} {p.text}", doc=doc.encode("utf-8"), row=rows))
                    rows += 1
                writer.commit()
                writer.wait_merging_threads()
            finally:
                bar.close()
            if rows == 0:
                raise NothingToIndexError("cannot build an index over an empty corpus (no passage with text)")
            (d / "meta.json").unlink(missing_ok=True)
            shutil.rmtree(d / SUBDIR, ignore_errors=True)
            os.replace(staging, d / SUBDIR)
            for stale in [*d.glob("*.index.*"), *(d / name for name in PASSAGE_FILES)]:  # a bm25s index there before
                stale.unlink(missing_ok=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        meta: dict[str, Any] = {"kind": "bm25", "engine": ENGINE, "format": FORMAT, "hopqa_version": VERSION,
                                "tantivy_version": getattr(t, "__version__", ""), "num_docs": rows,
                                "duplicates_removed": dropped[0], "token_pattern": TOKEN_PATTERN,
                                "stemmer": "english", "stopwords": "en", **(extra_meta or {})}
        meta["files"] = file_records(d, _tantivy_files(d))
        write_meta(d, meta)
        return cls.load(d)

    # -- loading ---------------------------------------------------------------------------
    @classmethod
    def load(cls, directory: str | Path) -> TantivyRetriever:
        """Open a tantivy BM25 index (``RetrievalIndexError`` for another kind or format, a
        damaged one)."""
        t = _import_tantivy()
        d = Path(directory)
        meta = read_meta(d)
        corpus = meta_corpus(meta)
        if meta.get("engine") != ENGINE or meta.get("format") != FORMAT:
            raise RetrievalIndexError(f"{d} holds no tantivy index of format {FORMAT}: rebuild it with: "
                                      f"{rebuild_command(d, corpus)} --engine tantivy")
        verify_files(d, meta)
        try:
            index = t.Index.open(str(d / SUBDIR))
            index.register_tokenizer(ANALYZER, analyzer())
            index.reload()
            count = index.searcher().num_docs
        except (ValueError, OSError) as exc:
            raise IndexDamagedError(d, f"unreadable: {type(exc).__name__}: {exc}", corpus) from exc
        if count != int(meta.get("num_docs", -1)):
            raise IndexDamagedError(d, f"tantivy holds {count} passages, meta.json says {meta.get('num_docs')}", corpus)
        return cls(index, meta, source=d.resolve())

    def save(self, directory: str | Path) -> None:
        """A tantivy index is written where it is built; saving it elsewhere copies it."""
        d = Path(directory)
        if self._source is not None and d.resolve() == self._source:
            write_meta(d, self.meta)
            return
        if self._source is None:
            raise RetrievalIndexError("this tantivy index has no directory to copy")
        d.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(d / SUBDIR, ignore_errors=True)
        shutil.copytree(self._source / SUBDIR, d / SUBDIR)
        write_meta(d, self.meta)

    # -- search ----------------------------------------------------------------------------
    def tokens(self, text: str) -> list[str]:
        return list(self._analyzer.analyze(text)) if text else []

    def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages with a positive score, best first (ties: indexed first)."""
        t = _import_tantivy()
        terms = self.tokens(query)
        if not terms or k <= 0:
            return []
        q = t.Query.boolean_query([(t.Occur.Should, t.Query.term_query(self._schema, "body", term)) for term in terms])
        searcher = self._index.searcher()
        hits = []
        for score, address in searcher.search(q, k).hits:
            doc = searcher.doc(address)
            hits.append((float(score), int(doc["row"][0]), json.loads(bytes(doc["doc"][0]))))
        hits.sort(key=lambda h: (-h[0], h[1]))
        return [Passage(id=str(d["id"]), title=str(d.get("title") or ""), text=str(d.get("text") or ""), score=s)
                for s, _, d in hits if s > 0]


def _tantivy_files(d: Path) -> list[str]:
    """The tantivy files of an index directory (relative names), lock and hidden files aside."""
    return sorted(f"{SUBDIR}/{p.name}" for p in (d / SUBDIR).iterdir() if p.is_file() and not p.name.startswith("."))


def build_tantivy_index(corpus_path: str | Path, out_dir: str | Path, progress: bool = True) -> TantivyRetriever:
    """Stream a corpus file (bad lines skipped and counted) into a tantivy index in ``out_dir``."""
    path = Path(corpus_path)
    stat, fingerprint = file_stat(path), corpus_fingerprint(path)
    stats = CorpusStats()
    retriever = TantivyRetriever.build(read_corpus(path, stats), out_dir, progress=progress,
                                       extra_meta={"corpus": str(path.resolve()), "fingerprint": fingerprint,
                                                   "corpus_stat": stat})
    retriever.meta["skipped_lines"] = stats.skipped
    write_meta(Path(out_dir), retriever.meta)
    return retriever
