"""Corpus files: read (jsonl or tsv), write, deduplicate, fingerprint.

A corpus is JSON lines ``{"id", "title", "text"}`` (``id`` optional: the 1-based line number
is used; ``title`` optional; ``contents`` / ``body`` accepted for ``text``) or a DPR-style
``.tsv`` (``id <TAB> text <TAB> title``, header line optional, csv quoting as DPR writes it).
A malformed line (bad JSON, not an object, no text) is skipped with a warning naming
``file:line`` and counted in ``CorpusStats``: one bad line never stops an index build. Only
the first ``MAX_WARNINGS`` skips of a file are warned about one by one; all are counted.
Bytes that are not UTF-8 are read as U+FFFD (the replacement character); the first line of a
file that has some is warned about (``file:line``), every such line is counted
(``CorpusStats.invalid_utf8``).

Warnings go through Python's ``warnings`` module (category ``UserWarning``); the ``hopqa``
command prints each as one ``hopqa: warning: ...`` line above its progress bars.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hopqa.config import valid_text
from hopqa.jsonl import loads
from hopqa.types import Passage

MAX_WARNINGS = 20
TEXT_KEYS = ("text", "contents", "body")
#: What ``errors="surrogateescape"`` makes of bytes that are not UTF-8 (one per byte).
_ESCAPED = re.compile("[\udc80-\udcff]")


@dataclass
class CorpusStats:
    """What reading a corpus file found: passages read, lines skipped and why (first 100)."""

    read: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)
    #: Lines (tsv: rows) that held bytes that are not UTF-8, read as U+FFFD.
    invalid_utf8: int = 0
    _utf8_warned: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    #: Warning class, how many skips are warned about, and the stack level the warning names.
    category: ClassVar[type[Warning]] = UserWarning
    max_warnings: ClassVar[int | None] = MAX_WARNINGS
    stacklevel: ClassVar[int] = 4

    def skip(self, where: str, why: str) -> None:
        """Count one skipped line; warn about it while fewer than ``max_warnings`` were."""
        self.skipped += 1
        message = f"{where}: skipped ({why})"
        if len(self.problems) < 100:
            self.problems.append(message)
        if self.max_warnings is None or self.skipped <= self.max_warnings:
            warnings.warn(message, self.category, stacklevel=self.stacklevel)
        elif self.skipped == self.max_warnings + 1:
            warnings.warn(f"{where}: more malformed lines; counting them without further warnings",
                          self.category, stacklevel=self.stacklevel)

    def warn_total(self, where: str) -> None:
        """At the end of a read: one warning with the count of skipped lines, when there were
        more than were warned about one by one."""
        if self.max_warnings is not None and self.skipped > self.max_warnings:
            warnings.warn(f"{where}: {self.skipped} malformed lines skipped in all "
                          f"({self.skipped - self.max_warnings} not shown one by one)", self.category,
                          stacklevel=self.stacklevel)

    def mend(self, text: str, path: Path, line: int) -> str:
        """``text`` read with ``errors="surrogateescape"``, with each byte that was not UTF-8 as
        U+FFFD; the first such line of each file is warned about, every one counted."""
        if not _ESCAPED.search(text):
            return text
        self.invalid_utf8 += 1
        if str(path) not in self._utf8_warned:
            self._utf8_warned.add(str(path))
            warnings.warn(f"{path}:{line}: invalid UTF-8, read as U+FFFD; later invalid lines of this file "
                          "are read the same way without a warning", self.category, stacklevel=self.stacklevel)
        return _ESCAPED.sub("\ufffd", text)


def read_corpus(path: str | Path, stats: CorpusStats | None = None) -> Iterator[Passage]:
    """The passages of a corpus file (``.tsv`` by suffix, else JSON lines), lazily.

    Bad lines are skipped with a warning and counted in ``stats`` (pass your own to read the
    counts afterwards). Raises ``FileNotFoundError`` when ``path`` is not a file.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"no corpus file at {p} (expected JSON lines {{\"id\", \"title\", \"text\"}} or a .tsv "
            "with id<TAB>text<TAB>title)"
        )
    stats = stats if stats is not None else CorpusStats()
    reader = _read_tsv if p.suffix.lower() == ".tsv" else _read_jsonl
    return reader(p, stats)


def iter_json_lines(path: Path, stats: CorpusStats) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line of a JSON-lines file; a malformed line is
    skipped and counted in ``stats``, bytes that are not UTF-8 read as U+FFFD (module docstring)."""
    with open(path, encoding="utf-8-sig", errors="surrogateescape") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            line = stats.mend(line, path, n)
            try:
                yield n, loads(line)
            except json.JSONDecodeError as exc:
                stats.skip(f"{path}:{n}", f"malformed JSON line (not JSON: {exc.msg})")


def _read_jsonl(p: Path, stats: CorpusStats) -> Iterator[Passage]:
    for n, row in iter_json_lines(p, stats):
        if not isinstance(row, dict):
            stats.skip(f"{p}:{n}", "not a JSON object")
            continue
        text = next((row[k] for k in TEXT_KEYS if row.get(k) is not None), None)
        if not isinstance(text, str) or not text.strip():
            stats.skip(f"{p}:{n}", "no text")
            continue
        pid = row.get("id")
        stats.read += 1
        yield Passage(id=valid_text(str(n if pid is None or pid == "" else pid)),
                      title=valid_text(str(row.get("title") or "")), text=valid_text(text.strip()))
    stats.warn_total(str(p))


def _read_tsv(p: Path, stats: CorpusStats) -> Iterator[Passage]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with open(p, encoding="utf-8", errors="surrogateescape", newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        first = True
        for row in reader:
            n = reader.line_num
            row = [stats.mend(cell, p, n) for cell in row]
            if first:
                first = False
                if row and row[0].strip().lower() == "id":
                    continue  # header
            if not row or not any(c.strip() for c in row):
                continue
            if len(row) < 2 or not row[1].strip():
                stats.skip(f"{p}:{n}", "expected id<TAB>text<TAB>title")
                continue
            stats.read += 1
            yield Passage(id=row[0].strip() or str(n), title=row[2].strip() if len(row) > 2 else "",
                          text=row[1].strip())
    stats.warn_total(str(p))


def write_corpus(passages: Iterable[Passage], path: str | Path) -> int:
    """Write passages as JSON lines ``{"id", "title", "text"}``; returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for p in passages:
            f.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n")
            n += 1
    return n


def dedupe(passages: Iterable[Passage]) -> list[Passage]:
    """Drop repeated (title, text) pairs (whitespace-normalised), keeping the first occurrence.

    Ids stay unique: a kept passage whose id was already used gets ``id~2``, ``id~3`` ... (the
    first unused). Other fields (``is_supporting``, ``score``) are kept as they were.
    """
    return list(iter_dedupe(passages))


def iter_dedupe(passages: Iterable[Passage], dropped: list[int] | None = None) -> Iterator[Passage]:
    """``dedupe`` as a stream (a corpus too large to hold): each (title, text) is remembered by
    a 16-byte digest. ``dropped[0]`` counts the duplicates dropped, when given."""
    seen: set[bytes] = set()
    used: set[str] = set()
    for p in passages:
        key = hashlib.blake2b(" ".join(p.title.split()).encode() + b"\x00" + " ".join(p.text.split()).encode(),
                              digest_size=16).digest()
        if key in seen:
            if dropped is not None:
                dropped[0] += 1
            continue
        seen.add(key)
        pid, n = p.id, 1
        while pid in used:
            n += 1
            pid = f"{p.id}~{n}"
        used.add(pid)
        yield p if pid == p.id else dataclasses.replace(p, id=pid)


def corpus_fingerprint(path: str | Path) -> str:
    """sha256 of the file's full content (streamed in 1 MiB chunks): tells whether an index is stale.

    The whole content is hashed (not size/mtime) so that a copied or touched but unchanged file
    does not force a rebuild and an edited one always does; ~1-2 s per GB. ``file_stat`` is
    the cheap check callers use to skip hashing when the file is untouched.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def file_stat(path: str | Path) -> list[int]:
    """``[size, mtime_ns]`` of a file: equal stats mean the fingerprint need not be recomputed."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]
