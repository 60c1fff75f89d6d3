"""BM25 over a corpus with bm25s (English stopwords, Snowball stemmer), saved to disk.

Index directory layout:

- bm25s's files: the sparse score matrix (``*.csc.index.npy``), ``vocab.index.json``,
  ``params.index.json``;
- ``passages.jsonl``: one passage per line in index-row order, plus ``passages.offsets.npy``
  (the byte offset of every line), so a hit's row is looked up without reading the file
  (``hopqa.retrieval.store``, shared by every index kind);
- ``meta.json`` (written last and atomically: its presence marks a complete index): kind, format,
  hopqa and bm25s versions, k1, b, stemmer, stopwords, number of docs, the backend, the size
  and sha256 of every other file (``files``), and for indexes built from a file the corpus
  path, its fingerprint and stat, skipped and duplicate lines.

Damage: ``load`` checks every file against ``files`` first — its size always (a stat), its
sha256 when the file is at most ``CHECKSUM_MAX_BYTES`` (64 MiB; sha256 runs at about 1 GB/s:
14 ms for the demo index's 12.5 MB, whose load takes 23 ms) — and a file that is missing,
truncated or changed raises ``IndexDamagedError`` ("index at DIR is damaged (FILE: what):
rebuild it with: hopqa index CORPUS --out DIR"), as does anything that fails to parse while
loading. ``load_or_build`` (the demo index, ``--corpus`` indexes) rebuilds a damaged index from
its corpus with a warning instead. Indexes written before ``files`` existed are loaded
without the file check. ``save`` writes new files and renames them into place, so a process
that has the older index memory-mapped keeps reading the older files while it is replaced.

Tokens: lower-cased ``\\w\\w+`` words minus bm25s's English stopwords, stemmed with PyStemmer's
English stemmer; title and text both count. Queries go through the same function; query words
the index has never seen are dropped, and a query left with no known word returns ``[]``
(bm25s would score every passage 0 and return arbitrary rows). Hits scoring 0 are never
returned, so ``search`` gives at most ``min(k, number of passages)`` results, often fewer.

Backend (``backend="auto"``): bm25s's numba backend when numba is importable *and* the corpus
has at least ``NUMBA_MIN_DOCS`` passages, else numpy. Measured here: numba's JIT costs 9-12 s
on the first query of every process (bm25s does not cache compiled code), while numpy answers
in 0.2 ms (5k passages) to 0.8 ms (50k); numba wins only on large corpora (0.4 vs 33 ms at
200k, RETRIEVAL.md). Pass ``backend="numba"`` or ``"numpy"`` to force one.

Threads: ``search`` and ``batch_search`` may be called from several threads at once. Query
tokenizing uses one PyStemmer object per thread (PyStemmer objects must not be shared). bm25s
scoring only reads the index arrays, and both its numpy path and its serial numba kernel
(``n_threads`` 0 or 1, ``nogil``) are safe to run concurrently, so they run without a lock;
a batch with ``n_threads > 1`` on the numba backend launches a parallel numba kernel and
changes numba's thread count, which is not safe concurrently, so those calls hold a lock.

Imports: bm25s (with scipy and numba, ~0.6 s) is imported when an index is built or loaded,
not with this module, so ``tokenize`` (shared with the per-question ``CandidatePool``, which
scores small pools without bm25s) costs nothing more than PyStemmer. ``STOPWORDS_EN`` is a copy
of bm25s's English list (tests/test_pool.py checks it is the same).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hopqa.config import VERSION
from hopqa.console import progress_bar
from hopqa.corpus import corpus_fingerprint, file_stat
from hopqa.retrieval.base import RetrieverBase
from hopqa.retrieval.store import (
    CHECKSUM_MAX_BYTES,
    PASSAGE_FILES,
    FileWatch,
    IndexDamagedError,
    RetrievalIndexError,
    StoredPassages,
    file_records,
    load_passages,
    meta_corpus,
    read_corpus_file,
    read_meta,
    rebuild_command,
    verify_files,
    write_meta,
    write_passages,
)
from hopqa.types import Passage

if TYPE_CHECKING:
    import bm25s

FORMAT = 1
NUMBA_MIN_DOCS = 200_000
#: bm25s's own files in an index directory (besides ``store.PASSAGE_FILES`` and ``meta.json``).
BM25S_PATTERNS = ("*.index.npy", "*.index.json")
TOKEN_PATTERN = r"(?u)\b\w\w+\b"
#: The words ``TOKEN_PATTERN`` finds (bm25s's and scikit-learn's pattern), found by the pattern
#: that finds the same ones a third faster: a run of two or more word characters is matched
#: whole from its start, where ``\b`` holds on both sides; a single one never is.
_split = re.compile(r"\w{2,}").findall
#: bm25s's ``bm25s.stopwords.STOPWORDS_EN`` (0.3.x), copied so tokenizing does not import bm25s.
STOPWORDS_EN = ("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
                "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
                "they", "this", "to", "was", "will", "with")
_STOPWORDS = frozenset(STOPWORDS_EN)
_local = threading.local()
_parallel_lock = threading.Lock()


#: An index directory that cannot be used as it is (the name BM25 indexes had first).
BM25IndexError = RetrievalIndexError
__all__ = ["CHECKSUM_MAX_BYTES", "BM25IndexError", "BM25Retriever", "IndexDamagedError", "NothingToIndexError",
           "build_index", "load_or_build", "read_meta", "tokenize", "verify_files"]


class NothingToIndexError(ValueError):
    """The passages given to ``build`` have no indexable word (none at all, or only stopwords)."""


def _stemmer() -> Any:
    """This thread's English PyStemmer (its objects are not thread-safe)."""
    st = getattr(_local, "stemmer", None)
    if st is None:
        import Stemmer

        st = _local.stemmer = Stemmer.Stemmer("english")
    return st


def tokenize(text: str) -> list[str]:
    """Lower-cased, stopword-filtered, stemmed tokens of one text (used for passages and queries)."""
    words = [w for w in _split(text.lower()) if w not in _STOPWORDS]
    return _stemmer().stemWords(words) if words else []


def numba_available() -> bool:
    """Whether bm25s can use its numba backend in this environment."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def choose_backend(backend: str, n_docs: int) -> str:
    """``numba`` / ``numpy`` as asked, or for ``auto`` numba only for large corpora (module doc)."""
    if backend == "auto":
        return "numba" if n_docs >= NUMBA_MIN_DOCS and numba_available() else "numpy"
    if backend not in ("numba", "numpy"):
        raise ValueError(f"unknown BM25 backend {backend!r}; use auto, numba or numpy")
    return backend


class BM25Retriever(StoredPassages, RetrieverBase):
    """BM25 ranking over a fixed list of passages (see the module docstring)."""

    name = "bm25"

    def __init__(self, model: bm25s.BM25, passages: Sequence[Passage], meta: dict[str, Any],
                 source: Path | None = None) -> None:
        self._model = model
        self._passages = passages
        self.meta = meta
        self._source = source  # directory this index was loaded from, if any
        self._watch: FileWatch | None = None  # its memory-mapped files (store.FileWatch)

    @property
    def backend(self) -> str:
        return str(self._model.backend)

    # -- building and persistence ----------------------------------------------------------
    @classmethod
    def build(cls, passages: Iterable[Passage], k1: float = 1.5, b: float = 0.75, progress: bool = True,
              backend: str = "auto") -> BM25Retriever:
        """Index passages (title and text). Raises ``NothingToIndexError`` (a ``ValueError``) if
        none has an indexable word."""
        plist = [Passage(id=p.id, title=p.title, text=p.text) for p in passages]
        if not plist:
            raise NothingToIndexError("cannot build a BM25 index over an empty corpus (no passage with text)")
        vocab: dict[str, int] = {}
        ids: list[list[int]] = []
        for p in progress_bar(desc="tokenizing", enabled=progress, iterable=plist, unit=" passages", mininterval=0.5):
            ids.append([vocab.setdefault(t, len(vocab)) for t in tokenize(f"{p.title} {p.text}")])
        if not vocab:
            raise NothingToIndexError("no passage has an indexable word (all empty or stopwords)")
        import bm25s

        chosen = choose_backend(backend, len(plist))
        model = bm25s.BM25(k1=k1, b=b, backend=chosen)
        model.index((ids, vocab), create_empty_token=False, show_progress=progress)
        meta = {"format": FORMAT, "hopqa_version": VERSION, "bm25s_version": bm25s.__version__,
                "k1": k1, "b": b, "method": model.method, "stemmer": "english", "stopwords": "en",
                "token_pattern": TOKEN_PATTERN, "num_docs": len(plist), "backend": chosen, "kind": "bm25"}
        return cls(model, plist, meta)

    def save(self, directory: str | Path) -> None:
        """Write the index to ``directory`` (created; an older index there is replaced).

        The files are written into a temporary folder inside ``directory``, then renamed into
        place (new files, not rewritten ones: a process still reading the older index through
        its memory maps keeps reading the older files); ``meta.json``, removed first, comes
        back last."""
        d = Path(directory)
        if self._source is not None and d.resolve() == self._source:
            write_meta(d, self.meta)  # its files are in use (memory-mapped); they are unchanged
            return
        d.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=d, prefix=".saving-"))
        try:
            self._model.save(str(staging), show_progress=False)
            write_passages(staging, self._passages)
            names = sorted([*PASSAGE_FILES, *(p.name for p in _bm25s_files(staging))])
            files = file_records(staging, names)
            (d / "meta.json").unlink(missing_ok=True)  # incomplete until meta.json is back
            for stale in _bm25s_files(d):  # an older index's files that this one does not have
                if stale.name not in files:
                    stale.unlink()
            for name in names:
                os.replace(staging / name, d / name)
            shutil.rmtree(d / "tantivy", ignore_errors=True)  # a tantivy index there before
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.meta["files"] = files
        write_meta(d, self.meta)

    @classmethod
    def load(cls, directory: str | Path, mmap: bool = True, backend: str = "auto") -> BM25Retriever:
        """Open a saved index; ``mmap`` maps the score matrix and passages instead of reading them.

        Raises ``FileNotFoundError`` if ``directory`` holds no index, ``IndexDamagedError`` if a
        file is missing, truncated, changed or unreadable, ``BM25IndexError`` for an index of
        another format (the messages say how to rebuild it)."""
        d = Path(directory)
        meta = read_meta(d)
        corpus = meta_corpus(meta)
        if meta.get("format") != FORMAT:
            raise BM25IndexError(f"the BM25 index in {d} has format {meta.get('format')}, this hopqa reads "
                                 f"{FORMAT}: rebuild it with: {rebuild_command(d, corpus)}")
        verify_files(d, meta)
        import bm25s

        try:
            num_docs = int(meta["num_docs"])
            chosen = choose_backend(backend, num_docs)
            model = bm25s.BM25.load(str(d), mmap=mmap, show_progress=False, backend=chosen)
            passages = load_passages(d, use_mmap=mmap)
            consistent = len(passages) == num_docs == model.scores["num_docs"]
        except (ValueError, KeyError, TypeError, EOFError) as exc:  # JSONDecodeError, UnicodeDecodeError too
            raise IndexDamagedError(d, f"unreadable: {type(exc).__name__}: {exc}", corpus) from exc
        if not consistent:
            raise IndexDamagedError(d, "its files disagree on the passages (count or size)", corpus)
        retriever = cls(model, passages, {**meta, "backend": chosen}, source=d.resolve())
        if mmap:  # the score matrix is read through memory maps: a file rewritten in place is caught
            retriever._watch = FileWatch(d, [p.name for p in _bm25s_files(d)])
        return retriever

    # -- search ----------------------------------------------------------------------------
    def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages with a positive score, best first (ties: lower row first)."""
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: list[str], k: int = 5, n_threads: int = 0) -> list[list[Passage]]:
        """``search`` for each query in one bm25s call; ``n_threads`` as bm25s (0: serial, -1: all)."""
        return [[self._hit(row, score) for row, score in hits] for hits in self.rank(queries, k, n_threads)]

    def rank(self, queries: list[str], k: int = 5, n_threads: int = 0) -> list[list[tuple[int, float]]]:
        """(row, score) of the top ``k`` positively scored passages of each query."""
        results: list[list[tuple[int, float]]] = [[] for _ in queries]
        k = min(k, self.size)
        if k <= 0:
            return results
        if self._watch is not None:
            self._watch.check()
        vocab = self._model.vocab_dict
        toks = [[t for t in tokenize(q) if t in vocab] if q else [] for q in queries]
        live = [i for i, t in enumerate(toks) if t]
        if not live:
            return results
        args: dict[str, Any] = {"k": k, "show_progress": False, "n_threads": n_threads,
                                "backend_selection": "numba" if self.backend == "numba" else "numpy"}
        batch = [toks[i] for i in live]
        if self.backend == "numba" and (n_threads > 1 or n_threads == -1):
            with _parallel_lock:
                docs, scores = self._model.retrieve(batch, **args)
        else:
            docs, scores = self._model.retrieve(batch, **args)
        for row, i in enumerate(live):
            pairs = [(int(d), float(s)) for d, s in zip(np.asarray(docs[row]), np.asarray(scores[row])) if s > 0]
            results[i] = sorted(pairs, key=lambda x: (-x[1], x[0]))
        return results

    def _hit(self, row: int, score: float) -> Passage:
        p = self._passages[row]
        return Passage(id=p.id, title=p.title, text=p.text, score=score)


def _bm25s_files(d: Path) -> list[Path]:
    """The files bm25s keeps in an index directory."""
    return sorted(p for pattern in BM25S_PATTERNS for p in d.glob(pattern) if p.is_file())


def build_index(corpus_path: str | Path, out_dir: str | Path, progress: bool = True, k1: float = 1.5,
                b: float = 0.75, backend: str = "auto") -> BM25Retriever:
    """Read a corpus file (skipping bad lines), dedupe it, index it and save it to ``out_dir``."""
    passages, corpus_meta = read_corpus_file(Path(corpus_path), progress)
    retriever = BM25Retriever.build(passages, k1=k1, b=b, progress=progress, backend=backend)
    retriever.meta.update(corpus_meta)
    retriever.save(out_dir)
    return retriever


def load_or_build(corpus_path: str | Path, index_dir: str | Path, progress: bool = True, k1: float = 1.5,
                  b: float = 0.75) -> BM25Retriever:
    """Load the index of a corpus, (re)building it if missing, of another format or k1/b, or stale.

    Stale means the corpus content changed (``corpus_fingerprint``); the file is re-hashed only
    when its size or mtime differ from those recorded at build time. A damaged index (see the
    module docstring) is rebuilt too, with a warning naming what was damaged.
    """
    path, d = Path(corpus_path), Path(index_dir)
    if not path.is_file():
        raise FileNotFoundError(f"no corpus file at {path}")
    if (d / "meta.json").is_file():
        try:
            meta = read_meta(d)
        except IndexDamagedError as exc:
            _warn_rebuild(exc)
            meta = {}
        same_params = meta.get("format") == FORMAT and meta.get("k1") == k1 and meta.get("b") == b
        untouched = meta.get("corpus_stat") == file_stat(path)
        if same_params and (untouched or meta.get("fingerprint") == corpus_fingerprint(path)):
            try:
                retriever = BM25Retriever.load(d)
            except IndexDamagedError as exc:
                _warn_rebuild(exc)
                retriever = None
            except (OSError, ValueError, KeyError):
                retriever = None  # unusable otherwise: rebuild below
            if retriever is not None:
                if not untouched:  # same content, new mtime: remember it to skip hashing next time
                    retriever.meta["corpus_stat"] = file_stat(path)
                    write_meta(d, retriever.meta)
                return retriever
    return build_index(path, d, progress=progress, k1=k1, b=b)


def _warn_rebuild(exc: IndexDamagedError) -> None:
    warnings.warn(f"the index at {exc.directory} is damaged ({exc.detail}): rebuilding it", UserWarning,
                  stacklevel=3)
