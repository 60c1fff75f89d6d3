"""Resumable JSON-lines files: one record per line, keyed by a field, that survive ``kill -9``.

Used by the evaluation runner (``results.jsonl``) and HGOT's bootstrap (the recorded runs).

- ``Appender`` adds one record per line, each with one ``write``, flushed and ``fsync``-ed, from
  many threads: a process killed at any moment loses at most the line being written, which is
  then a torn last line (no newline, or not JSON). It starts on a fresh line: a torn last line
  left in the file (not repaired) is ended with a newline, so it stays a bad line of its own
  that readers skip, and the new records are whole.
- ``read`` returns the records by key (the newest line of a key wins, at the position of the
  key's first line). A line in the middle that does not parse, or has no key, is skipped; a
  last line without its newline, or that does not parse, is torn: not read, and with
  ``repair=True`` cut off the file, so that the next append starts on a fresh line.
- ``compact`` rewrites the file with one line per key (the newest, at the position of the
  key's first line), dropping lines that do not parse; the rewrite goes to a temporary file
  that replaces the original atomically (``config.write_atomic``), so a kill during compaction
  leaves the old file or the compact one, never a mix.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from hopqa.config import write_atomic


@dataclass
class Scan:
    """What one pass over a JSON-lines file found."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # by key, newest line wins
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> bytes of its newest line
    lines: int = 0  # lines in the file, a torn last one included
    good_end: int = 0  # the file up to here is whole lines (a torn or bad last line is cut here)


def scan(data: bytes, key: str = "id") -> Scan:
    """Parse every line; keys keep the position of their first line and the newest record."""
    found = Scan()
    pos = 0
    while pos < len(data):
        found.lines += 1
        nl = data.find(b"\n", pos)
        if nl == -1:  # a last line without its newline: torn
            break
        try:
            rec = json.loads(data[pos:nl])
            name = str(rec[key])
            found.records[name] = rec
            found.spans[name] = (pos, nl + 1)
            found.good_end = nl + 1
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            if nl + 1 < len(data):  # a bad line in the middle: skip it, keep the rest
                found.good_end = nl + 1
            else:
                break
        pos = nl + 1
    return found


def read(path: Path, key: str = "id", repair: bool = False) -> dict[str, dict[str, Any]]:
    """Records by ``key`` (the last line of a key wins). With ``repair``, a torn or malformed
    last line (a kill mid-write) is cut off the file."""
    if not path.is_file():
        return {}
    data = path.read_bytes()
    found = scan(data, key)
    if repair and found.good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(found.good_end)
    return found.records


def compact(path: Path, key: str = "id") -> dict[str, dict[str, Any]]:
    """Rewrite ``path`` atomically with one line per key, the newest, at the position of the
    key's first line (lines that do not parse are dropped); return the records by key. A file
    that is already compact is left untouched. Call it only when nothing appends to the file."""
    if not path.is_file():
        return {}
    data = path.read_bytes()
    found = scan(data, key)
    if found.lines != len(found.records) or found.good_end != len(data):
        write_atomic(path, b"".join(data[start:end] for start, end in found.spans.values()))
    return found.records


def _ends_torn(path: Path) -> bool:
    """Whether ``path`` is a non-empty file whose last byte is not a newline."""
    try:
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


class Appender:
    """Appends one JSON line per record, durably (one ``write``, flush, ``fsync``), from many
    threads. ``default`` is ``json.dumps``'s (``str``: values JSON cannot hold are written as
    text; ``None``: they raise ``TypeError``)."""

    def __init__(self, path: Path, default: Callable[[Any], Any] | None = str) -> None:
        self.path = path
        self._default = default
        self._lock = threading.Lock()
        torn = _ends_torn(path)
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open until close()
        if torn:
            self._f.write("\n")
            self._f.flush()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=self._default) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
