"""MuSiQue-Ans (official format, JSON lines or a JSON list).

``id`` is the record's ``id``; ``answers`` are ``answer`` then ``answer_aliases``; the 20
``paragraphs`` keep ``is_supporting`` and get ids ``"<id>#<idx>"``; ``decomposition`` is
``question_decomposition`` (``question``, ``answer``, ``paragraph_support_idx``); ``extras`` holds
``answerable``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hopqa.datasets.records import (
    ReadContext,
    _answers,
    _as_bool,
    _as_list,
    _require,
    _text,
    iter_json_records,
    parse_each,
)
from hopqa.types import Example, Passage


def parse_musique(rec: dict[str, Any]) -> Example:
    """One MuSiQue record (official format)."""
    eid = _require(rec, "id")
    paragraphs = [
        Passage(id=f"{eid}#{p.get('idx', i)}", title=_text(p.get("title")),
                text=_text(p.get("paragraph_text")), is_supporting=_as_bool(p.get("is_supporting")))
        for i, p in enumerate(_as_list(rec.get("paragraphs"), "paragraphs"))
    ]
    decomposition = [
        {"question": _text(d.get("question")), "answer": _text(d.get("answer")),
         "paragraph_support_idx": d.get("paragraph_support_idx")}
        for d in _as_list(rec.get("question_decomposition"), "question_decomposition")
    ]
    aliases = _as_list(rec.get("answer_aliases"), "answer_aliases")
    return Example(id=eid, question=_require(rec, "question"), answers=_answers(rec.get("answer"), *aliases),
                   paragraphs=paragraphs, decomposition=decomposition or None,
                   extras={"answerable": _as_bool(rec.get("answerable"), default=True)})


def read_musique(path: Path, ctx: ReadContext) -> Iterator[Example]:
    return parse_each(iter_json_records(path, ctx.stats), lambda rec, _where, _i: parse_musique(rec), ctx.stats)
