"""HGOT's length-stratified samples: FEVER claims, Open-SQuAD and HotpotQA questions.

CSV files ``<folder>/hgot/{dev,test}_{long,medium,short}.csv`` with the columns
``Question, Answer, [Level,] Question Length``. Ids are positional,
``<dataset>-<split>-<n>`` (0-based over the examples read). Open-SQuAD's ``Answer`` is a
Python-literal list of accepted answers (kept raw when it does not parse); elsewhere it is one
answer (FEVER: the label). ``extras``: ``question_length``, ``level`` where present; FEVER
adds ``label`` and ``claim`` (the question without HGOT's answer instruction).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hopqa.datasets.records import (
    ReadContext,
    RecordError,
    _answers,
    _as_int,
    _require,
    _text,
    iter_csv_records,
    parse_each,
)
from hopqa.types import Example

_FEVER_INSTRUCTION = re.compile(r"\s*Kindly answer with .*$", re.DOTALL)


def _hgot_answers(name: str, raw: str) -> list[str]:
    """HGOT's Answer column: a Python-literal list for Open-SQuAD, plain text elsewhere."""
    if name != "open_squad":
        return _answers(raw)
    try:
        parsed = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _answers(raw)
    if isinstance(parsed, (list, tuple)):
        return _answers(*parsed)
    return _answers(parsed)


def parse_hgot(row: dict[str, str], name: str, split: str, index: int) -> Example:
    """One row of an HGOT sample of dataset ``name`` (lower-cased column names)."""
    question = _require(row, "question")
    extras: dict[str, Any] = {"question_length": _as_int(row.get("question length"))}
    if _text(row.get("level")):
        extras["level"] = _text(row.get("level"))
    if name == "fever":
        extras["label"] = _text(row.get("answer"))
        extras["claim"] = _FEVER_INSTRUCTION.sub("", question)
    answers = _hgot_answers(name, row.get("answer") or "")
    if not answers:
        raise RecordError("empty Answer")
    return Example(id=f"{name}-{split}-{index}", question=question, answers=answers, extras=extras)


def read_hgot(path: Path, ctx: ReadContext) -> Iterator[Example]:
    return parse_each(iter_csv_records(path, ("question", "answer")),
                      lambda row, _where, i: parse_hgot(row, ctx.name, ctx.split, i), ctx.stats)
