"""Corpus files: read (jsonl or tsv), write, deduplicate, fingerprint.

A corpus is JSON lines ``{"id", "title", "text"}`` (``id`` and ``title`` optional;
``contents`` / ``body`` accepted for ``text``) or a DPR-style ``.tsv`` (``id <TAB> text <TAB>
title``, header optional). Malformed lines are skipped with a warning naming ``file:line``
and counted in ``CorpusStats``: one bad line never stops an index build.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hopqa.types import Passage


@dataclass
class CorpusStats:
    """What reading a corpus file found."""

    read: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)

    def skip(self, where: str, why: str) -> None:
        self.skipped += 1
        message = f"{where}: skipped ({why})"
        if len(self.problems) < 100:
            self.problems.append(message)
        warnings.warn(message, stacklevel=3)


def read_corpus(path: str | Path, stats: CorpusStats | None = None) -> Iterator[Passage]:
    """Passages of a corpus file; bad lines are skipped and counted in ``stats``."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no corpus file at {p}")
    stats = stats if stats is not None else CorpusStats()
    if p.suffix.lower() == ".tsv":
        yield from _read_tsv(p, stats)
    else:
        yield from _read_jsonl(p, stats)


def _read_jsonl(p: Path, stats: CorpusStats) -> Iterator[Passage]:
    with open(p, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                stats.skip(f"{p}:{n}", f"not JSON: {exc.msg}")
                continue
            if not isinstance(row, dict):
                stats.skip(f"{p}:{n}", "not a JSON object")
                continue
            text = row.get("text") or row.get("contents") or row.get("body") or ""
            if not isinstance(text, str) or not text.strip():
                stats.skip(f"{p}:{n}", "no text")
                continue
            stats.read += 1
            yield Passage(id=str(row.get("id", n)), title=str(row.get("title") or ""), text=text.strip())


def _read_tsv(p: Path, stats: CorpusStats) -> Iterator[Passage]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with open(p, encoding="utf-8", errors="replace", newline="") as f:
        for n, row in enumerate(csv.reader(f, delimiter="\t"), 1):
            if n == 1 and row and row[0].strip().lower() == "id":
                continue
            if len(row) < 2 or not row[1].strip():
                stats.skip(f"{p}:{n}", "expected id<TAB>text<TAB>title")
                continue
            stats.read += 1
            yield Passage(id=row[0], title=row[2] if len(row) > 2 else "", text=row[1].strip())


def write_corpus(passages: Iterable[Passage], path: str | Path) -> int:
    """Write passages as JSON lines; returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for p in passages:
            f.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n")
            n += 1
    return n


def dedupe(passages: Iterable[Passage]) -> list[Passage]:
    """Drop repeated (title, text) pairs, keeping the first; make ids unique (``id~2`` ...)."""
    seen: set[tuple[str, str]] = set()
    ids: dict[str, int] = {}
    out: list[Passage] = []
    for p in passages:
        key = (" ".join(p.title.split()), " ".join(p.text.split()))
        if key in seen:
            continue
        seen.add(key)
        pid = p.id
        if pid in ids:
            ids[pid] += 1
            pid = f"{p.id}~{ids[p.id]}"
        ids.setdefault(pid, 1)
        out.append(Passage(id=pid, title=p.title, text=p.text))
    return out


def corpus_fingerprint(path: str | Path) -> str:
    """sha256 of the file's full content (streamed): tells whether an index is stale."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
