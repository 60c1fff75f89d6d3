"""FreshQA: time-sensitive and false-premise questions (a CSV export of the weekly sheet).

The header row (``id, split, question, ...``) may follow banner rows. A split reads the rows
whose ``split`` column is ``TEST`` or ``DEV``. ``id`` is ``freshqa-<id>``; ``answers`` are the
non-empty ``answer_0 .. answer_9`` columns in order; ``extras`` holds ``false_premise`` (a
bool), ``num_hops``, ``fact_type``, ``effective_year``, ``next_review`` and ``source``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hopqa.datasets.records import (
    ReadContext,
    RecordError,
    _answers,
    _as_bool,
    _require,
    _text,
    iter_csv_records,
    parse_each,
)
from hopqa.types import Example

_EXTRAS = ("num_hops", "fact_type", "effective_year", "next_review", "source")
_ANSWER_COLUMN = re.compile(r"answer_(\d+)$")


def parse_freshqa(row: dict[str, str]) -> Example:
    """One FreshQA row (lower-cased column names)."""
    columns = sorted((int(m.group(1)), key) for key in row if (m := _ANSWER_COLUMN.match(key)))
    extras: dict[str, Any] = {key: _text(row.get(key)) for key in _EXTRAS}
    extras["false_premise"] = _as_bool(row.get("false_premise"))
    example = Example(id=f"freshqa-{_require(row, 'id')}", question=_require(row, "question"),
                      answers=_answers(*(row[key] for _, key in columns)), extras=extras)
    if not example.answers:
        raise RecordError("no answer_0..answer_9")
    return example


def read_freshqa(path: Path, ctx: ReadContext) -> Iterator[Example]:
    """The rows whose ``split`` column is the split's ``select`` value (``TEST`` / ``DEV``)."""
    wanted = ctx.select.upper()

    def parse(row: dict[str, str], _where: object, _index: int) -> Example | None:
        if _text(row.get("split")).upper() != wanted:
            return None
        return parse_freshqa(row)

    return parse_each(iter_csv_records(path, ("id", "split", "question")), parse, ctx.stats)
