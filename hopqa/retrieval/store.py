"""What every index directory has, whatever its kind: the passages by row, ``meta.json``, and
the damage check.

- ``passages.jsonl`` (one passage per line, in index-row order) and ``passages.offsets.npy``
  (the byte offset of every line, plus the file size), so a hit's row is read through a memory
  map without reading the file (``LinePassages``);
- ``meta.json``, written last and atomically: its presence marks a complete index. It records
  the index ``kind`` (``bm25``, ``dense``, ``hybrid``; an index written before kinds existed is
  BM25), the number of passages, the corpus it was built from and its fingerprint, and the size
  and sha256 of every other file (``files``);
- ``verify_files``: a file missing, truncated or changed since it was written is an
  ``IndexDamagedError`` naming the file and the command that rebuilds the index (the size is
  always checked, the sha256 of files up to ``CHECKSUM_MAX_BYTES``);
- ``FileWatch``: the files an index reads through memory maps, as they were when it was
  loaded. A file rewritten in place while in use (``cp`` over it) would crash the process with
  SIGBUS at the next read of a mapped page that is gone, which Python cannot catch; a search
  first compares each file's size and modification time with the loaded ones (a ``stat``, a few
  microseconds) and raises ``IndexChangedError`` instead. A file *replaced* (a new file renamed
  over it, as ``hopqa index`` does) is a new inode: the old mapping stays valid and the search
  goes on with the index it loaded. The check narrows the window, it cannot close it: a copy
  that starts between the check and the read still crashes. Replace indexes with
  ``hopqa index``.
"""

from __future__ import annotations

import hashlib
import json
import mmap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hopqa.config import write_atomic
from hopqa.console import progress_bar
from hopqa.corpus import CorpusStats, corpus_fingerprint, dedupe, file_stat, read_corpus
from hopqa.types import Passage

#: Files up to this size have their sha256 verified on every load; larger ones their size only.
CHECKSUM_MAX_BYTES = 64 * 2**20
#: The passage files of an index directory.
PASSAGE_FILES = ("passages.jsonl", "passages.offsets.npy")
#: Index kinds (``meta["kind"]``; absent means BM25, the only kind before there were others).
KINDS = ("bm25", "dense", "hybrid")


class RetrievalIndexError(ValueError):
    """An index directory that cannot be used as it is; the message says how to rebuild it."""


class IndexDamagedError(RetrievalIndexError):
    """A file of an index is missing, truncated, changed or unreadable."""

    def __init__(self, directory: Path, detail: str, corpus: str | None = None, kind: str = "bm25") -> None:
        self.directory, self.detail = directory, detail
        super().__init__(f"index at {directory} is damaged ({detail}): rebuild it with: "
                         f"{rebuild_command(directory, corpus, kind)}")


class IndexChangedError(RetrievalIndexError):
    """A file of an index in use was rewritten in place (``FileWatch``)."""


class FileWatch:
    """The (inode, size, modification time) of files when an index loaded them (module docstring)."""

    def __init__(self, directory: Path, names: Iterable[str]) -> None:
        self.directory = directory
        self._seen = {name: _signature(directory / name) for name in names}

    def check(self) -> None:
        """``IndexChangedError`` if a watched file was rewritten in place since the load."""
        for name, (inode, size, mtime) in self._seen.items():
            now = _signature(self.directory / name)
            if now[0] == inode and now[1:] != (size, mtime):
                raise IndexChangedError(
                    f"the index at {self.directory} was changed on disk while in use ({name} was rewritten in "
                    "place): replace an index with hopqa index, which writes new files and renames them; run "
                    "again to use the new index (hopqa eval --retry-failed re-runs the questions it failed)")


def _signature(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except OSError:  # gone: replaced or removed, the mapping of the old file stays valid
        return (-1, -1, -1)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class CorpusMismatchError(RetrievalIndexError):
    """An index used with a corpus other than the one it was built from."""


def rebuild_command(directory: Path, corpus: str | None = None, kind: str = "bm25") -> str:
    """The ``hopqa index`` command that rebuilds the index in ``directory``."""
    return f"hopqa index {corpus or 'CORPUS'} --out {directory}" + (f" --kind {kind}" if kind != "bm25" else "")


def index_kind(meta: dict[str, Any]) -> str:
    """The kind an index's ``meta.json`` records (BM25 when it records none)."""
    return str(meta.get("kind") or "bm25")


def write_meta(d: Path, meta: dict[str, Any]) -> None:
    """Write ``meta.json`` atomically (it marks the index complete)."""
    write_atomic(d / "meta.json", json.dumps(meta, indent=1))


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_records(d: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"bytes", "sha256"}}`` of files in ``d`` (``meta["files"]``)."""
    return {name: {"bytes": (d / name).stat().st_size, "sha256": sha256_file(d / name)} for name in sorted(names)}


def read_meta(d: Path) -> dict[str, Any]:
    """``meta.json`` of the index in ``d``: ``FileNotFoundError`` if there is none,
    ``IndexDamagedError`` if it is not a readable JSON object."""
    path = d / "meta.json"
    if not path.is_file():
        raise FileNotFoundError(f"no index in {d} (build one with: {rebuild_command(d)})")
    raw = path.read_bytes()
    try:
        meta = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexDamagedError(d, "meta.json: empty" if not raw.strip() else "meta.json: not valid JSON") from exc
    if not isinstance(meta, dict):
        raise IndexDamagedError(d, "meta.json: not a JSON object")
    return meta


def read_meta_of(d: Path, kind: str, fmt: int) -> dict[str, Any]:
    """``read_meta``, with ``RetrievalIndexError`` (naming the rebuild command) unless the index
    is of ``kind`` and format ``fmt``."""
    meta = read_meta(d)
    if index_kind(meta) != kind or meta.get("format") != fmt:
        raise RetrievalIndexError(f"{d} holds a {index_kind(meta)} index of format {meta.get('format')}, not a "
                                  f"{kind} index of format {fmt}: rebuild it with: "
                                  f"{rebuild_command(d, meta_corpus(meta), kind)}")
    return meta


class StoredPassages:
    """The passages of an index by row (``passages``, ``size``) and its ``meta``."""

    _passages: Sequence[Passage]
    meta: dict[str, Any]

    @property
    def size(self) -> int:
        """Number of indexed passages."""
        return len(self._passages)

    @property
    def passages(self) -> Sequence[Passage]:
        """The indexed passages by row (lazily read from disk for an mmap-loaded index)."""
        return self._passages


def meta_corpus(meta: dict[str, Any]) -> str | None:
    """The corpus path an index records, if any."""
    return meta.get("corpus") if isinstance(meta.get("corpus"), str) else None


def verify_files(d: Path, meta: dict[str, Any], checksums: bool = True) -> None:
    """Check each file ``meta["files"]`` records: present, of its size and (``checksums``, files
    up to ``CHECKSUM_MAX_BYTES``) of its sha256; ``IndexDamagedError`` names the first that is
    not. Nothing to check for an index written before files were recorded."""
    files = meta.get("files")
    if files is None:
        return
    corpus, kind = meta_corpus(meta), index_kind(meta)
    if not isinstance(files, dict):
        raise IndexDamagedError(d, "meta.json: 'files' is not an object", corpus, kind)
    for name, want in sorted(files.items()):
        path = d / name
        try:
            size = path.stat().st_size
            expected, digest = int(want["bytes"]), str(want["sha256"])
        except FileNotFoundError:
            raise IndexDamagedError(d, f"{name}: missing", corpus, kind) from None
        except (KeyError, TypeError, ValueError):
            raise IndexDamagedError(d, f"meta.json: bad record of {name}", corpus, kind) from None
        if size != expected:
            how = " (truncated)" if size < expected else ""
            raise IndexDamagedError(d, f"{name}: {size} bytes instead of {expected}{how}", corpus, kind)
        if checksums and size <= CHECKSUM_MAX_BYTES and sha256_file(path) != digest:
            raise IndexDamagedError(d, f"{name}: content changed since it was written (sha256)", corpus, kind)


def write_passages(d: Path, passages: Iterable[Passage]) -> int:
    """Write ``passages.jsonl`` and ``passages.offsets.npy`` into ``d``; the number written."""
    offsets = [0]
    with open(d / "passages.jsonl", "wb") as f:
        for p in passages:
            line = json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n"
            offsets.append(offsets[-1] + f.write(line.encode("utf-8")))
    np.save(d / "passages.offsets.npy", np.asarray(offsets, dtype=np.int64))
    return len(offsets) - 1


def load_passages(d: Path, use_mmap: bool = True) -> Sequence[Passage]:
    """The passages of the index in ``d`` by row: read through a memory map (``use_mmap``) or
    all into memory. ``ValueError`` (or ``KeyError``) when the files do not parse or disagree."""
    offsets = np.load(d / "passages.offsets.npy", mmap_mode="r" if use_mmap else None)
    if int(offsets[-1]) != (d / "passages.jsonl").stat().st_size:
        raise ValueError("passages.offsets.npy and passages.jsonl disagree on the size")
    if use_mmap:
        return LinePassages(d / "passages.jsonl", offsets)
    with open(d / "passages.jsonl", encoding="utf-8") as f:
        return [Passage.from_dict(json.loads(line)) for line in f if line.strip()]


class LinePassages(Sequence[Passage]):
    """Passages of a ``passages.jsonl`` read by row through a memory map (thread-safe reads)."""

    def __init__(self, path: Path, offsets: np.ndarray) -> None:
        with open(path, "rb") as f:
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._offsets = offsets  # n + 1 entries: line starts plus the file size
        self._watch = FileWatch(path.parent, [path.name, "passages.offsets.npy"])

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, row: Any) -> Any:
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(row)
        self._watch.check()
        line = self._mm[int(self._offsets[row]) : int(self._offsets[row + 1])]
        return Passage.from_dict(json.loads(line))


def passages_fingerprint(passages: Iterable[Passage]) -> str:
    """sha256 over the passages' ids, titles and texts in order (an embedding cache's key)."""
    h = hashlib.sha256()
    for p in passages:
        h.update(json.dumps([p.id, p.title, p.text], ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def read_corpus_file(path: Path, progress: bool = True) -> tuple[list[Passage], dict[str, Any]]:
    """The deduplicated passages of a corpus file and what the index records of it."""
    stat, fingerprint = file_stat(path), corpus_fingerprint(path)
    stats = CorpusStats()
    raw = list(progress_bar(desc="reading corpus", enabled=progress, iterable=read_corpus(path, stats),
                            unit=" passages", mininterval=0.5, leave=False))
    passages = dedupe(raw)
    return passages, {"corpus": str(path.resolve()), "fingerprint": fingerprint, "corpus_stat": stat,
                      "skipped_lines": stats.skipped, "duplicates_removed": len(raw) - len(passages)}
