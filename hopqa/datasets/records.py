"""Records out of data files, and the one loop that turns records into examples.

Readers
    ``iter_json_records`` yields ``(where, record)`` from a JSON-lines file (``.jsonl``: one
    value per line, malformed lines skipped) or a JSON file (a list, ``{"data": [...]}`` or one
    object; read as JSON lines if it does not parse whole and does not start with ``[``).
    ``iter_csv_records`` yields ``(where, row dict)`` from a CSV file with a header row
    (banner rows above it ignored; column names lower-cased); ``iter_csv_rows`` yields the raw
    cells. A file whose name ends in ``.gz`` is read through gzip, as utf-8 (a BOM is dropped),
    whatever the reader.

``parse_each``
    The skip-and-count loop, written once: each record is checked to be of the expected type
    (a JSON object by default) and parsed; a record the parser cannot read (``RecordError`` or
    the usual ``KeyError`` / ``TypeError`` / ``ValueError`` ...) is skipped with a
    ``DataWarning`` naming ``file:line`` (or ``file record N``) and the reason, and counted in
    ``LoadStats``. One bad record never stops a load.

Field helpers
    ``_literal`` (a structured field stored as a JSON or Python literal string: ``json.loads``,
    then ``ast.literal_eval``; never ``eval``), ``_as_list``, ``_as_bool``, ``_as_int``,
    ``_answers`` (gold then aliases: stripped, no empties, no repeats), ``_text``, ``_require``
    and ``_join_sentences``.
"""

from __future__ import annotations

import ast
import csv
import gzip
import io
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar, TypeVar

from hopqa.corpus import CorpusStats
from hopqa.jsonl import loads
from hopqa.types import Example, Passage

T = TypeVar("T")


class DatasetError(ValueError):
    """Unknown dataset or split, no data where the loader looked, or an unreadable data file."""


class DatasetFileNotFoundError(DatasetError, FileNotFoundError):
    """A split's data file (or a user's question file) is not where the loader looked."""


class DataWarning(UserWarning):
    """A malformed line or record was skipped while loading a dataset."""


class RecordError(ValueError):
    """A record lacks a field a parser needs; the message is the reason shown when skipping."""


@dataclass
class LoadStats(CorpusStats):
    """What one load read and skipped (pass one to ``load_dataset`` to see the counts); skips
    are warned about as ``DataWarning`` (the first ``corpus.MAX_WARNINGS``, then counted)."""

    category: ClassVar[type[Warning]] = DataWarning
    stacklevel: ClassVar[int] = 3


@dataclass
class ReadContext:
    """What a split reader knows about the split it reads: the dataset and split names, the
    split's reader option (``select``: FreshQA's split value) and the stats to count into."""

    name: str
    split: str
    stats: LoadStats
    select: str = ""


#: A split reader: the split's file -> its examples (lazily).
Reader = Callable[[Path, ReadContext], Iterator[Example]]


# -- where a record came from ---------------------------------------------------------------------
@dataclass(frozen=True)
class Where:
    """The place of a record: ``file:line`` (JSON lines, CSV), ``file record N`` (a JSON list,
    1-based) or ``file:line item N`` (a JSON list written on one line, 1-based)."""

    path: Path
    line: int | None = None
    record: int | None = None

    def __str__(self) -> str:
        if self.line is not None and self.record is not None:
            return f"{self.path}:{self.line} item {self.record}"
        if self.line is not None:
            return f"{self.path}:{self.line}"
        return f"{self.path} record {self.record}"

    @property
    def number(self) -> str:
        """The line or record number as an id suffix (``12``, ``12-3`` for an item of a line)."""
        if self.line is not None and self.record is not None:
            return f"{self.line}-{self.record}"
        return str(self.line if self.line is not None else self.record)


# -- opening files --------------------------------------------------------------------------------
def is_gzip(path: Path) -> bool:
    return path.name.lower().endswith(".gz")


def base_suffix(path: Path) -> str:
    """The suffix that says the format, ``.gz`` set aside (``dev.jsonl.gz`` -> ``.jsonl``)."""
    return Path(path.name[:-3]).suffix.lower() if is_gzip(path) else path.suffix.lower()


def base_stem(path: Path) -> str:
    """The file name without its format suffix and ``.gz`` (``my_q.jsonl.gz`` -> ``my_q``)."""
    name = path.name[:-3] if is_gzip(path) else path.name
    return Path(name).stem


def open_text(path: Path, newline: str | None = None) -> IO[str]:
    """A text handle on a data file: gzip-decompressed when the name ends in ``.gz``; utf-8
    with an optional BOM; undecodable bytes replaced rather than fatal."""
    if is_gzip(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", errors="replace", newline=newline)
    return open(path, encoding="utf-8-sig", errors="replace", newline=newline)


def read_text(path: Path) -> str:
    try:
        with open_text(path) as f:
            return f.read()
    except (OSError, EOFError) as exc:  # a truncated or corrupt .gz file
        raise DatasetError(f"{path}: cannot read the file ({exc})") from exc


# -- raw records ----------------------------------------------------------------------------------
def iter_json_lines(path: Path, stats: LoadStats) -> Iterator[tuple[Where, Any]]:
    """``(where, value)`` of each non-blank line of a JSON-lines file (a list on one line gives
    its items); malformed lines are skipped and counted."""
    try:
        with open_text(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    value = loads(line)
                except json.JSONDecodeError as exc:
                    stats.skip(str(Where(path, n)), f"malformed JSON line (not JSON: {exc.msg})")
                    continue
                if isinstance(value, list):
                    for i, item in enumerate(value, 1):
                        yield Where(path, n, i), item
                else:
                    yield Where(path, n), value
    except (OSError, EOFError) as exc:
        raise DatasetError(f"{path}: cannot read the file ({exc})") from exc


def iter_json_records(path: Path, stats: LoadStats) -> Iterator[tuple[Where, Any]]:
    """``(where, record)`` of a JSON list file or a JSON-lines file.

    A ``.jsonl`` file is read line by line. Any other file is parsed whole (a list, or
    ``{"data": [...]}``, or one object) and read as JSON lines if that fails; a file that
    starts like a JSON list but does not parse is an error.
    """
    if base_suffix(path) != ".jsonl":
        text = read_text(path)
        try:
            data = loads(text)
        except json.JSONDecodeError as exc:
            if text.lstrip().startswith("["):
                raise DatasetError(f"{path}: not valid JSON ({exc})") from exc
        else:
            if isinstance(data, dict):
                data = data["data"] if isinstance(data.get("data"), list) else [data]
            if not isinstance(data, list):
                raise DatasetError(f"{path}: expected a JSON list of records (or {{\"data\": [...]}})")
            for i, rec in enumerate(data, 1):
                yield Where(path, record=i), rec
            return
    yield from iter_json_lines(path, stats)


def iter_csv_rows(path: Path) -> Iterator[tuple[Where, list[str]]]:
    """``(where, cells)`` of a CSV file; quoted fields may span lines (``where`` names the
    row's first line)."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        with open_text(path, newline="") as f:
            reader = csv.reader(f)
            start = 1
            for row in reader:
                yield Where(path, start), row
                start = reader.line_num + 1
    except (OSError, EOFError, csv.Error) as exc:
        raise DatasetError(f"{path}: cannot read the CSV file ({exc})") from exc


def iter_csv_records(path: Path, required: Iterable[str]) -> Iterator[tuple[Where, dict[str, str]]]:
    """``(where, row)`` of a CSV file with a header row holding the ``required`` columns.

    Rows before that header (a title banner, as in spreadsheet exports) are ignored, and so
    are blank rows; column names are matched case-insensitively and returned lower-cased.
    """
    need = {c.lower() for c in required}
    header: list[str] | None = None
    for where, row in iter_csv_rows(path):
        cells = [c.strip().lower() for c in row]
        if header is None:
            if need <= set(cells):
                header = cells
            continue
        if not any(c.strip() for c in row):
            continue
        yield where, {h: (row[i] if i < len(row) else "") for i, h in enumerate(header) if h}
    if header is None:
        raise DatasetError(f"{path}: no header row with the columns {', '.join(sorted(need))}")


# -- the one parse loop ---------------------------------------------------------------------------
_RECORD_ERRORS = (RecordError, KeyError, TypeError, ValueError, AttributeError, IndexError)
_KIND = {dict: "a JSON object", list: "a list of cells"}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecordError):
        return str(exc)
    detail = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    return f"unreadable record: {detail}"


def parse_each(records: Iterable[tuple[Where, Any]], parse: Callable[[Any, Where, int], T], stats: LoadStats,
               expect: type = dict, count: bool = True) -> Iterator[T]:
    """Parse every record, skipping (warned, counted) those the parser cannot read.

    ``parse(record, where, index)`` gets the number of records parsed so far as ``index`` (for
    positional ids) and may return None to pass over a record silently (a row of another
    split). A record that is not an ``expect`` instance is skipped. ``count`` adds the parsed
    records to ``stats.read`` (off for side files such as Adversarial HotpotQA's alternative
    answers, whose records are not examples).
    """
    index = 0
    for where, rec in records:
        try:
            if not isinstance(rec, expect):
                raise RecordError(f"not {_KIND.get(expect, expect.__name__)} (a {type(rec).__name__})")
            item = parse(rec, where, index)
        except _RECORD_ERRORS as exc:
            stats.skip(str(where), _reason(exc))
            continue
        if item is None:
            continue
        index += 1
        if count:
            stats.read += 1
        yield item


# -- field helpers --------------------------------------------------------------------------------
def _literal(value: Any) -> Any:
    """A structured field that may be stored as a string holding a JSON / Python literal."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{(\"'":
        return value
    try:
        return loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


def _as_list(value: Any, what: str) -> list[Any]:
    """A list field (parsed from a literal string if needed); None is an empty list."""
    value = _literal(value)
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError(f"{what} is not a list: {str(value)[:60]!r}")


def _as_bool(value: Any, default: bool = False) -> bool:
    """``True``, ``"TRUE"``, ``"yes"``, ``1`` ... as a bool."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in {"true", "t", "yes", "y", "1"}:
            return True
        if text in {"false", "f", "no", "n", "0"}:
            return False
    return default


def _as_int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _answers(*candidates: Any) -> list[str]:
    """Gold answer then aliases: strings, stripped, no empties, no repeats (order kept)."""
    out: list[str] = []
    for candidate in candidates:
        text = str(candidate).strip() if candidate is not None else ""
        if text and text not in out:
            out.append(text)
    return out


def _text(value: Any) -> str:
    return str(value).strip() if value is not None else ""


def _require(rec: dict[str, Any], key: str) -> str:
    """A required non-empty text field of a record."""
    text = _text(rec.get(key))
    if not text:
        raise RecordError(f"no {key!r}")
    return text


_SENTENCE_END = (".", "!", "?", ";", ":")


def _join_sentences(sentences: Any) -> str:
    """One paragraph text from a list of sentences.

    HotpotQA sentences carry their own leading spaces (joined as they are, which restores the
    original text); 2Wiki sentences do not (joined with a space). Where a HotpotQA sentence
    lacks its space after a full stop (list items), a space is put back.
    """
    if isinstance(sentences, str):
        return " ".join(sentences.split())
    parts = [str(s) for s in sentences if s is not None and str(s).strip()]
    if not parts:
        return ""
    own_spacing = any(s[:1].isspace() for s in parts[1:])
    text = parts[0]
    for sentence in parts[1:]:
        if not own_spacing or (text.endswith(_SENTENCE_END) and sentence[:1].isalnum()):
            text += " "
        text += sentence
    return " ".join(text.split())


def iter_paragraphs(examples: Iterable[Example]) -> Iterator[Passage]:
    """Every candidate paragraph of the examples, as plain passages (no gold flag, no score)."""
    for example in examples:
        for p in example.paragraphs:
            yield Passage(id=p.id, title=p.title, text=p.text)
