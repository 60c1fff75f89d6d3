"""Your own questions: ``load_dataset("path/to/my_questions.jsonl")``.

``load_dataset`` reads a file of your own questions when its ``name`` is not a registered
dataset and is a path to an existing file, or ends in ``.jsonl``, ``.json`` or ``.csv``
(optionally followed by ``.gz``, then the file is read through gzip); a path with one of those
suffixes that does not exist is a ``DatasetFileNotFoundError`` naming it. ``split`` and
``data_dir`` do not apply to such a file and are ignored.

File layouts
    ``.jsonl``: one JSON object per line (blank lines ignored). ``.json``: a list of objects,
    or ``{"data": [...]}``. ``.csv``: a header row naming the fields (case-insensitive; banner
    rows above it are ignored), one question per row; list fields are written as JSON in their
    cell (``["Paris", "Paris, France"]``). Text is utf-8.

Fields of a record
    ``question``
        Required, non-empty text.
    ``answer`` / ``answers``
        ``answer``: the gold answer (text). ``answers``: a list of accepted answers, the first
        the gold one (in a CSV cell: a JSON list, or a single value). Both may be given
        (``answer`` first). At least one non-empty answer is required; answers are stripped,
        empty ones and repeats dropped.
    ``id``
        Optional. Default ``<file stem>-<n>``, ``n`` being the 1-based line number in a
        ``.jsonl`` or ``.csv`` file (the header is line 1) or the 1-based record number in a
        ``.json`` list (``my_questions-7``). A repeated id is skipped like a bad record.
    ``paragraphs``
        Optional candidate paragraphs for the distractor setting: a list whose items are
        ``{"title": ..., "text": ..., "is_supporting": true/false}`` (``title`` and
        ``is_supporting`` optional) or plain strings (text only, no title). In a CSV cell: the
        list as JSON. Paragraph ids are ``<id>#<index>`` (0-based).
    ``supporting_titles``
        Optional list of the titles of the gold supporting paragraphs (a single title is
        accepted too). Paragraphs whose title matches one (case and spacing ignored) are
        marked supporting; the titles are also kept in ``extras["supporting_titles"]`` so
        that support metrics can match retrieved passages by title when there are no
        paragraphs (the open setting).
    anything else
        Kept in ``extras`` under its own name (CSV: non-empty cells only).

Examples get ``dataset`` = the file stem (``my_questions`` for ``my_questions.jsonl.gz``) and
``split`` = ``"file"``.

Bad records
    A bad line or record (malformed JSON, not an object, no ``question``, no answer,
    ``paragraphs`` not a list, a paragraph without text, a repeated id) is skipped with a
    ``DataWarning`` naming the file, the line (``file:12``) or record (``file record 7``) and
    the missing or bad field, and counted in ``LoadStats``; one bad line never stops the load.
    A file without a single valid record is a ``DatasetError`` naming the file and its first
    problems.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hopqa.datasets.records import (
    DatasetError,
    DatasetFileNotFoundError,
    LoadStats,
    RecordError,
    Where,
    _answers,
    _as_bool,
    _literal,
    _text,
    base_stem,
    base_suffix,
    iter_csv_records,
    iter_json_records,
    parse_each,
)
from hopqa.types import Example, Passage

#: The suffixes of a question file (each optionally followed by ``.gz``).
SUFFIXES = (".jsonl", ".json", ".csv")
#: The ``split`` of every example read from a question file.
FILE_SPLIT = "file"
#: The fields the format defines (all others go to ``extras``).
FIELDS = ("id", "question", "answer", "answers", "paragraphs", "supporting_titles")


def has_question_suffix(name: str | Path) -> bool:
    """Whether ``name`` ends in ``.jsonl``, ``.json`` or ``.csv`` (optionally ``.gz``)."""
    return base_suffix(Path(str(name).strip())) in SUFFIXES


def is_question_file(name: str | Path) -> bool:
    """Whether ``name`` should be read as a question file: it has a question-file suffix, or
    it is the path of an existing file."""
    if isinstance(name, Path):
        return True
    text = str(name).strip()
    return bool(text) and (has_question_suffix(text) or Path(text).expanduser().is_file())


def _field(rec: dict[str, Any], name: str) -> Any:
    """A defined field, its name matched case-insensitively."""
    if name in rec:
        return rec[name]
    for key, value in rec.items():
        if isinstance(key, str) and key.strip().lower() == name:
            return value
    return None


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())


def _as_literal_list(value: Any) -> Any:
    """A string that starts like a list, parsed (JSON, then a Python literal); else unchanged."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        return _literal(value)
    return value


def _list_field(value: Any, name: str) -> list[Any]:
    """A list field: a list, a string holding a JSON / Python list, or one value."""
    if not _given(value):
        return []
    value = _as_literal_list(value)
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict):
        raise RecordError(f"{name!r} is not a list (an object)")
    return [value]


def _norm_title(title: Any) -> str:
    return " ".join(str(title).split()).lower()


def _paragraphs(value: Any, eid: str, gold_titles: set[str]) -> list[Passage]:
    if not _given(value):
        return []
    value = _as_literal_list(value)
    if not isinstance(value, (list, tuple)):
        raise RecordError(f"'paragraphs' is not a list (a {type(value).__name__})")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            title, text, supporting = "", item.strip(), False
        elif isinstance(item, dict):
            title, text = _text(_field(item, "title")), _text(_field(item, "text"))
            supporting = _as_bool(_field(item, "is_supporting"))
        else:
            raise RecordError(f"paragraphs[{i}] is not an object or a string (a {type(item).__name__})")
        if not text:
            raise RecordError(f"paragraphs[{i}] has no 'text'")
        supporting = supporting or (bool(title) and _norm_title(title) in gold_titles)
        out.append(Passage(id=f"{eid}#{i}", title=title, text=text, is_supporting=supporting))
    return out


def parse_record(rec: dict[str, Any], where: Where, stem: str, drop_empty: bool = False) -> Example:
    """One record of a question file (see the module docstring); ``drop_empty`` leaves empty
    text fields out of ``extras`` (CSV cells)."""
    question = _text(_field(rec, "question"))
    if not question:
        raise RecordError("no 'question'")
    answer = _field(rec, "answer")
    answer = list(answer) if isinstance(answer, (list, tuple)) else [answer]
    answers = _answers(*answer, *_list_field(_field(rec, "answers"), "answers"))
    if not answers:
        raise RecordError("no answer (give 'answer' or a non-empty 'answers' list)")
    eid = _text(_field(rec, "id")) or f"{stem}-{where.number}"
    titles = [_text(t) for t in _list_field(_field(rec, "supporting_titles"), "supporting_titles") if _text(t)]
    paragraphs = _paragraphs(_field(rec, "paragraphs"), eid, {_norm_title(t) for t in titles})
    known = set(FIELDS)
    extras: dict[str, Any] = {}
    for key, value in rec.items():
        name = key.strip().lower() if isinstance(key, str) else key
        if name in known or name == "":
            continue
        if drop_empty and isinstance(value, str) and not value.strip():
            continue
        extras[key] = value
    if titles:
        extras["supporting_titles"] = titles
    return Example(id=eid, question=question, answers=answers, dataset=stem, split=FILE_SPLIT,
                   paragraphs=paragraphs, extras=extras)


def _records(path: Path, stats: LoadStats) -> Iterator[tuple[Where, Any]]:
    if base_suffix(path) == ".csv":
        return iter_csv_records(path, ("question",))
    return iter_json_records(path, stats)


def load_question_file(name: str | Path, limit: int | None = None, stats: LoadStats | None = None) -> list[Example]:
    """The examples of a question file (see the module docstring); ``limit`` keeps the first."""
    return list(iter_question_file(name, limit, stats))


def iter_question_file(name: str | Path, limit: int | None = None,
                       stats: LoadStats | None = None) -> Iterator[Example]:
    """``load_question_file`` as a stream (one example at a time, as the file is read). A
    missing file is an error at once; a file without one valid question when the stream ends."""
    path = Path(str(name).strip()).expanduser()
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "no such file"
        raise DatasetFileNotFoundError(
            f"{path}: {what}. A question file is .jsonl, .json or .csv (optionally .gz) with a 'question' and "
            "an 'answer' (or 'answers') per record; registered datasets are named without a suffix (see "
            "hopqa datasets)"
        )
    return _iter_question_file(path, limit, stats if stats is not None else LoadStats())


def _iter_question_file(path: Path, limit: int | None, stats: LoadStats) -> Iterator[Example]:
    stem = base_stem(path)
    is_csv = base_suffix(path) == ".csv"
    seen: dict[str, Where] = {}  # id -> where it was first

    def parse(rec: dict[str, Any], where: Where, _index: int) -> Example:
        example = parse_record(rec, where, stem, drop_empty=is_csv)
        if example.id in seen:
            raise RecordError(f"repeated 'id' {example.id!r} (first at {seen[example.id]})")
        seen[example.id] = where
        return example

    count = 0
    for count, example in enumerate(itertools.islice(parse_each(_records(path, stats), parse, stats), limit), 1):
        yield example
    stats.warn_total(str(path))
    if not count and limit != 0:
        problems = "; ".join(stats.problems[:3]) if stats.problems else "the file holds no record"
        raise DatasetError(
            f"{path}: no valid question in the file ({problems}). Each record needs a 'question' and an 'answer' "
            "(or a non-empty 'answers' list); see hopqa.datasets.generic for the format"
        )
