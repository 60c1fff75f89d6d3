"""Resumable JSON-lines files: one record per line, keyed by a field, that survive ``kill -9``,
a full disk and damaged lines; and JSON read with bounded nesting.

Used by the evaluation runner (``results.jsonl``) and HGOT's bootstrap (the recorded runs).

- ``Appender`` adds one record per line, each with one ``write`` of the whole encoded line
  (text made valid UTF-8 first: a lone surrogate becomes U+FFFD), then ``fsync``, from many
  threads: a process killed at any moment loses at most the line being written, which is then
  a torn last line (no newline, or not JSON). A write that fails (a full disk) is undone — the
  file is cut back to where the line began — and raises ``AppendError`` naming the file and the
  cause, so the lines written before stay whole and nothing half-written is left. A Ctrl-C that
  arrives once the whole line is written (during ``fsync``) keeps it: it is a finished record.
  It starts on a fresh line: a torn last line left in the file (not repaired) is ended with a newline, so it
  stays a bad line of its own that readers skip, and the new records are whole.
- ``scan`` reads a file as a stream, line by line (never the whole file in memory; a line
  longer than ``MAX_LINE_BYTES`` is a bad line): the records by key (the newest good line of a
  key wins, at the position of the key's first line), or just what ``keep`` takes of each. A
  line that does not parse, nests deeper than ``MAX_DEPTH``, has no key, or that ``check``
  refuses (wrong field types) is a *bad line*: skipped as if it were not there, counted, and
  warned about (``RecordWarning``, naming ``file:line`` and why; the first ``MAX_WARNINGS``,
  then one count). A last line without its newline, or that does not parse, is torn: not read,
  not warned about, and with ``repair=True`` cut off the file, so that the next append starts on
  a fresh line.
- ``read`` returns ``scan``'s records; ``compact`` rewrites the file with one line per key (the
  newest good one, at the position of the key's first line), dropping bad lines, in two
  streaming passes; the rewrite goes to a temporary file that replaces the original atomically,
  so a kill during compaction leaves the old file or the compact one, never a mix.
- ``loads`` is ``json.loads`` for text from outside (model replies, data files, run files):
  nesting deeper than ``max_depth`` (default ``MAX_DEPTH``) is a ``ValueError`` before
  anything is decoded, so a kilobyte of ``[[[[`` can neither exhaust the interpreter's stack
  nor hand deeply nested values to code that walks them.
"""

from __future__ import annotations

import json
import os
import re
import threading
import warnings
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Self

from hopqa.config import atomic_file, valid_text

#: The deepest nesting of arrays and objects ``loads`` accepts (hopqa's own records nest a few
#: dozen levels: a trace's steps; a model's JSON reply two or three).
MAX_DEPTH = 200
#: The longest line ``scan`` reads (a question's record with its whole trace is ~0.1-1 MB).
MAX_LINE_BYTES = 256 * 2**20
#: Bad lines warned about one by one per scan; the rest are counted in one last warning.
MAX_WARNINGS = 20

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")
#: A JSON string escape of a surrogate code point (lone or half of a pair).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


class RecordWarning(UserWarning):
    """A bad line of a JSON-lines file was skipped (the message names ``file:line`` and why)."""


class AppendError(OSError):
    """A line could not be appended (the disk is full, the file went away): the file is left
    as it was before the line."""


def too_deep(text: str | bytes, max_depth: int = MAX_DEPTH) -> bool:
    """Whether the JSON ``text`` nests arrays / objects more than ``max_depth`` levels deep.
    Linear in the text per level, in regular-expression passes (no Python loop per character):
    strings are set aside, then the innermost bracket pairs are removed one level a pass. A text
    with no more opening brackets than ``max_depth`` (most records) is answered by counting them."""
    if isinstance(text, bytes):
        if text.count(b"[") + text.count(b"{") <= max_depth:
            return False
        text = text.decode("utf-8", "replace")
    elif text.count("[") + text.count("{") <= max_depth:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if len(brackets) <= 2 * max_depth:
        return False
    for _ in range(max_depth):
        reduced = _INNERMOST.sub("", brackets)
        if reduced == brackets or not reduced:
            return False
        brackets = reduced
    return _INNERMOST.search(brackets) is not None


def loads(text: str | bytes, max_depth: int = MAX_DEPTH, strict: bool = True) -> Any:
    """``json.loads(text)`` for text from outside; ``ValueError`` (``json.JSONDecodeError``)
    for nesting deeper than ``max_depth`` as for any text that is not JSON. A string escape of
    a lone surrogate (``"\\ud800"``) reads as U+FFFD, so every string is valid Unicode.
    ``strict=False`` lets a string hold raw control characters (``json.loads``'s own option)."""
    if too_deep(text, max_depth):
        raise json.JSONDecodeError(f"nested more than {max_depth} levels deep", "", 0)
    try:
        value = json.loads(text, strict=strict)
    except RecursionError as exc:  # pragma: no cover - guarded above; the interpreter's own limit
        raise json.JSONDecodeError("nested too deeply", "", 0) from exc
    escape = _SURROGATE_ESCAPE_BYTES if isinstance(text, bytes) else _SURROGATE_ESCAPE
    return valid_value(value) if escape.search(text) else value


def valid_value(value: Any) -> Any:
    """``value`` (decoded JSON) with every string, keys included, made valid Unicode
    (``config.valid_text``)."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [valid_value(v) for v in value]
    if isinstance(value, dict):
        return {valid_text(k): valid_value(v) for k, v in value.items()}
    return value


def raw_decode(text: str, start: int = 0, max_depth: int = MAX_DEPTH, strict: bool = True) -> tuple[Any, int]:
    """``json.JSONDecoder(strict=strict).raw_decode(text, start)`` with ``loads``'s nesting
    bound (on the text from ``start``)."""
    if too_deep(text[start:], max_depth):
        raise json.JSONDecodeError(f"nested more than {max_depth} levels deep", text, start)
    try:
        return json.JSONDecoder(strict=strict).raw_decode(text, start)
    except RecursionError as exc:  # pragma: no cover
        raise json.JSONDecodeError("nested too deeply", text, start) from exc


#: ``check(record) -> None`` for a good record, else why it is bad (shown in the warning).
Check = Callable[[dict[str, Any]], str | None]


@dataclass
class Scan:
    """What one pass over a JSON-lines file found."""

    records: dict[str, Any] = field(default_factory=dict)  # by key, newest good line wins
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> bytes of its newest good line
    lines: int = 0  # lines in the file, a torn last one included
    good_end: int = 0  # the file up to here is whole lines (a torn last line is cut here)
    bad: int = 0  # bad lines skipped (torn last line not included)
    size: int = 0  # bytes in the file


def _lines(f: IO[bytes]) -> Iterator[tuple[int, bytes, bool]]:
    """``(start offset, line without its newline, has newline)`` of each line; a line longer
    than ``MAX_LINE_BYTES`` is skipped unread (its offsets still add up) and comes back as a
    placeholder that is not JSON, so it reads as a bad line."""
    pos = 0
    while True:
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):  # skip the rest of the long line
            length = len(line)
            while chunk := f.readline(2**20):
                length += len(chunk)
                if chunk.endswith(b"\n"):
                    break
            yield pos, b"\x00too long", True
            pos += length
            continue
        has_newline = line.endswith(b"\n")
        yield pos, line[:-1] if has_newline else line, has_newline
        pos += len(line)


def scan(path: Path, key: str = "id", check: Check | None = None,
         keep: Callable[[dict[str, Any]], Any] | None = None, warn: bool = True) -> Scan:
    """One streaming pass over ``path`` (module docstring): the good records by ``key`` (what
    ``keep`` makes of each, when given), where each key's newest good line is, and how many
    lines were bad. A missing file is an empty scan."""
    found = Scan()
    if not path.is_file():
        return found
    warned = 0
    with open(path, "rb") as f:
        for start, line, has_newline in _lines(f):
            found.lines += 1
            end = start + len(line) + has_newline
            found.size = end
            why = None
            try:
                rec = loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                rec, why = None, f"not JSON: {getattr(exc, 'msg', exc)}"
            if not has_newline or (rec is None and f.peek(1) == b""):  # a torn last line
                break
            found.good_end = end
            if why is None:
                why = _why_bad(rec, key, check)
            if why is not None:
                found.bad += 1
                if warn and warned < MAX_WARNINGS:
                    warned += 1
                    warnings.warn(f"{path}:{found.lines}: skipped ({why})", RecordWarning, stacklevel=2)
                continue
            name = str(rec[key])
            found.records[name] = keep(rec) if keep is not None else rec
            found.spans[name] = (start, end)
    if warn and found.bad > warned:
        warnings.warn(f"{path}: {found.bad} bad lines skipped in all ({found.bad - warned} not shown)",
                      RecordWarning, stacklevel=2)
    return found


def _why_bad(rec: Any, key: str, check: Check | None) -> str | None:
    """Why a parsed line is not a good record (None when it is)."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    value = rec.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        return f"no {key!r}" if value is None else f"{key!r} is not a text or a number"
    return check(rec) if check is not None else None


def read(path: Path, key: str = "id", repair: bool = False, check: Check | None = None,
         warn: bool = True) -> dict[str, dict[str, Any]]:
    """Records by ``key`` (the newest good line of a key wins). With ``repair``, a torn last
    line (a kill mid-write) is cut off the file."""
    found = scan(path, key, check, warn=warn)
    if repair:
        truncate_torn(path, found)
    return found.records


def truncate_torn(path: Path, found: Scan) -> None:
    """Cut a torn last line off ``path`` (``found`` is its scan)."""
    if found.good_end < found.size:
        with open(path, "r+b") as f:
            f.truncate(found.good_end)


def compact(path: Path, key: str = "id", check: Check | None = None,
            keep: Callable[[dict[str, Any]], Any] | None = None) -> Scan:
    """Rewrite ``path`` atomically with one line per key, the newest good one, at the position
    of the key's first line (bad and torn lines dropped), in two streaming passes; return the
    compact file's scan (``keep`` as ``scan``'s). A file that is already compact is left
    untouched. Call it only when nothing appends to the file."""
    found = scan(path, key, check, keep, warn=False)
    if not path.is_file() or (found.lines == len(found.records) and found.good_end == found.size):
        return found
    spans = {}
    with open(path, "rb") as src, atomic_file(path) as out:
        for name, (start, end) in found.spans.items():
            src.seek(start)
            spans[name] = (out.tell(), out.tell() + end - start)
            out.write(src.read(end - start))
    found.spans, found.lines, found.bad = spans, len(spans), 0
    found.good_end = found.size = max((end for _, end in spans.values()), default=0)
    return found


def records_at(path: Path, spans: dict[str, tuple[int, int]], keys: Container[str] | None = None,
               ) -> Iterator[dict[str, Any]]:
    """The records at ``spans`` (a scan's) of ``path``, in order, one at a time (those of
    ``keys`` only, when given); a span that no longer parses is passed over."""
    with open(path, "rb") as f:
        for name, (start, end) in spans.items():
            if keys is not None and name not in keys:
                continue
            f.seek(start)
            try:
                rec = loads(f.read(end - start))
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(rec, dict):
                yield rec


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


def dumps_line(record: dict[str, Any], default: Callable[[Any], Any] | None = str) -> bytes:
    """One record as a JSON line in valid UTF-8 (``ensure_ascii=False``; lone surrogates as U+FFFD)."""
    return (valid_text(json.dumps(record, ensure_ascii=False, default=default)) + "\n").encode("utf-8")


class Appender:
    """Appends one JSON line per record, durably (one ``write``, ``fsync``), from many threads;
    a failed write is undone and raises ``AppendError`` (module docstring). ``default`` is
    ``json.dumps``'s (``str``: values JSON cannot hold are written as text; ``None``: they raise
    ``TypeError``)."""

    def __init__(self, path: Path, default: Callable[[Any], Any] | None = str) -> None:
        self.path = path
        self._default = default
        self._lock = threading.Lock()
        torn = _ends_torn(path)
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            raise AppendError(exc.errno, f"cannot open {path} to append ({exc.strerror or exc})") from exc
        if torn:
            self._append(b"\n")

    def write(self, record: dict[str, Any]) -> None:
        line = dumps_line(record, self._default)
        with self._lock:
            self._append(line)

    def _append(self, data: bytes) -> None:
        """Write ``data`` whole and sync it, or leave the file as it was and raise ``AppendError``."""
        before = os.fstat(self._fd).st_size
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        except BaseException as exc:  # a full disk, or Ctrl-C between two writes: no half line stays
            if not view and not isinstance(exc, OSError):
                # Ctrl-C during fsync, after the whole line was written: the line is a finished
                # record, so it stays (synced) and the interrupt goes on.
                try:
                    os.fsync(self._fd)
                except OSError:
                    pass
                raise
            try:
                os.ftruncate(self._fd, before)  # cutting frees space: works on a full disk
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise AppendError(exc.errno, f"cannot write to {self.path}: {exc.strerror or exc}") from exc
            raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
