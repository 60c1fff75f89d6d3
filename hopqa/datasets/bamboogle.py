"""Bamboogle (Self-Ask): 125 two-hop open-domain questions, no paragraphs.

``test`` reads the CSV: no header, question in column 1, answer in column 5, later non-empty
columns alternative answers; a ``Question,Answer`` header row (the official
ofirpress/self-ask file) is also understood, and then only those two columns are read.
``test-decomposed`` reads a third party's JSON (``Question, Answer, Q1, A1, Q2, A2``): the
steps become the ``decomposition`` (``question``, ``answer``, ``answers``), flagged in
``extras["decomposition_source"]``. Ids are positional, ``bamboogle-<n>`` (0-based, counting
the examples read), so both splits share them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hopqa.datasets.records import (
    ReadContext,
    RecordError,
    Where,
    _answers,
    _literal,
    _require,
    _text,
    iter_csv_rows,
    iter_json_records,
    parse_each,
)
from hopqa.types import Example


def _csv_cells(path: Path) -> Iterator[tuple[Where, dict[str, Any]]]:
    """The data rows of the Bamboogle CSV as ``{"cells", "q_col", "a_col", "header"}``.

    A row holding ``question`` and ``answer`` cells before the first usable row is the header
    and sets the columns; blank rows are passed over.
    """
    q_col, a_col, header, seen_data = 0, 4, False, False
    for where, row in iter_csv_rows(path):
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        lowered = [c.lower() for c in cells]
        if not seen_data and not header and "question" in lowered and "answer" in lowered:
            q_col, a_col, header = lowered.index("question"), lowered.index("answer"), True
            continue
        usable = len(cells) > max(q_col, a_col) and bool(cells[q_col]) and bool(cells[a_col])
        seen_data = seen_data or usable
        yield where, {"cells": cells, "q_col": q_col, "a_col": a_col, "header": header}


def _csv_example(row: dict[str, Any], index: int) -> Example:
    cells, q_col, a_col = row["cells"], row["q_col"], row["a_col"]
    if len(cells) <= max(q_col, a_col) or not cells[q_col] or not cells[a_col]:
        raise RecordError(f"expected a question in column {q_col + 1} and an answer in column {a_col + 1}")
    aliases = [] if row["header"] else cells[a_col + 1:]
    return Example(id=f"bamboogle-{index}", question=cells[q_col], answers=_answers(cells[a_col], *aliases))


def read_bamboogle_csv(path: Path, ctx: ReadContext) -> Iterator[Example]:
    return parse_each(_csv_cells(path), lambda row, _where, i: _csv_example(row, i), ctx.stats)


def _first(value: Any) -> str:
    value = _literal(value)
    if isinstance(value, (list, tuple)):
        return _text(value[0]) if value else ""
    return _text(value)


def parse_bamboogle_decomposed(rec: dict[str, Any], index: int) -> Example:
    """One ``Question, Answer, Q1, A1, Q2, A2`` record."""
    steps = []
    k = 1
    while f"Q{k}" in rec:
        answers = _literal(rec.get(f"A{k}"))
        answers = list(answers) if isinstance(answers, (list, tuple)) else [answers]
        steps.append({"question": _text(rec[f"Q{k}"]), "answer": _first(answers), "answers": _answers(*answers)})
        k += 1
    return Example(id=f"bamboogle-{index}", question=_require(rec, "Question"), answers=_answers(rec.get("Answer")),
                   decomposition=steps or None, extras={"decomposition_source": "third party (not official)"})


def read_bamboogle_json(path: Path, ctx: ReadContext) -> Iterator[Example]:
    return parse_each(iter_json_records(path, ctx.stats),
                      lambda rec, _where, i: parse_bamboogle_decomposed(rec, i), ctx.stats)
