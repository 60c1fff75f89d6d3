"""HotpotQA, 2WikiMultihopQA and Adversarial HotpotQA: the distractor-setting families.

HotpotQA / 2WikiMultihopQA (``parse_hotpot``): ``id`` is ``_id`` (or ``id``); ``context`` is
``[[title, [sentences]], ...]`` (or the Hugging Face ``{"title": [...], "sentences": [...]}``;
a string holding either literal is parsed), each entry one paragraph whose sentences are joined
(HotpotQA sentences carry their own leading spaces); a paragraph is supporting when its title
is among the ``supporting_facts`` titles. ``extras``: ``supporting_facts``, ``type``,
``level``, 2Wiki's ``evidences``, ``qa_pairs`` and ``explanation``; 2Wiki train's ``qa_pairs``
are also the ``decomposition``.

Adversarial HotpotQA (``parse_adversarial``, Ye & Durrett's ``sim_*.json``): ``id`` is
``qas_id``; 4 paragraphs (``title``, ``context``, ``is_supp``); ``extras["rationale"]``; the
accepted alternative answers of ``alt_answers.jsonl`` (or ``.jsonl.gz``) beside the split's
file are added to ``answers``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hopqa.datasets.records import (
    LoadStats,
    ReadContext,
    RecordError,
    _answers,
    _as_bool,
    _as_int,
    _as_list,
    _join_sentences,
    _literal,
    _require,
    _text,
    iter_json_records,
    parse_each,
)
from hopqa.types import Example, Passage


def _title_sentences(context: Any) -> list[tuple[str, Any]]:
    """HotpotQA ``context`` as (title, sentences): ``[[title, [...]], ...]`` or the
    Hugging Face layout ``{"title": [...], "sentences": [[...], ...]}``."""
    context = _literal(context)
    if isinstance(context, dict):
        return list(zip(context.get("title") or [], context.get("sentences") or [], strict=False))
    return [(_text(item[0]), item[1]) for item in _as_list(context, "context")]


def _supporting_facts(value: Any) -> list[list[Any]]:
    """``[[title, sentence index], ...]`` (also from the Hugging Face dict layout)."""
    value = _literal(value)
    if isinstance(value, dict):
        value = list(zip(value.get("title") or [], value.get("sent_id") or [], strict=False))
    return [[_text(f[0]), _as_int(f[1]) if len(f) > 1 else None]
            for f in _as_list(value, "supporting_facts")]


def parse_hotpot(rec: dict[str, Any]) -> Example:
    """One HotpotQA or 2WikiMultihopQA record (``context`` = [[title, [sentences]], ...])."""
    eid = _text(rec.get("_id")) or _require(rec, "id")
    facts = _supporting_facts(rec.get("supporting_facts"))
    gold = {f[0] for f in facts}
    paragraphs = [
        Passage(id=f"{eid}#{i}", title=title, text=_join_sentences(sentences), is_supporting=title in gold)
        for i, (title, sentences) in enumerate(_title_sentences(rec.get("context")))
    ]
    extras: dict[str, Any] = {"supporting_facts": facts}
    for key in ("type", "level"):
        if rec.get(key) is not None:
            extras[key] = rec[key]
    if "evidences" in rec:
        extras["evidences"] = _as_list(rec["evidences"], "evidences")
    decomposition = None
    if rec.get("qa_pairs"):
        pairs = _as_list(rec["qa_pairs"], "qa_pairs")
        extras["qa_pairs"] = pairs
        decomposition = [{"question": _text(q.get("question")), "answer": _text(q.get("answer"))} for q in pairs]
    if rec.get("explanation"):
        extras["explanation"] = rec["explanation"]
    return Example(id=eid, question=_require(rec, "question"), answers=_answers(rec.get("answer")),
                   paragraphs=paragraphs, decomposition=decomposition or None, extras=extras)


def parse_adversarial(rec: dict[str, Any]) -> Example:
    """One Adversarial HotpotQA record (Ye & Durrett's ``sim_*.json`` layout)."""
    eid = _require(rec, "qas_id")
    paragraphs = [
        Passage(id=f"{eid}#{i}", title=_text(p.get("title")), text=_text(p.get("context")),
                is_supporting=_as_bool(p.get("is_supp")))
        for i, p in enumerate(_as_list(rec.get("paragraphs"), "paragraphs"))
    ]
    return Example(id=eid, question=_require(rec, "question"), answers=_answers(rec.get("answer")),
                   paragraphs=paragraphs, extras={"rationale": _as_list(rec.get("rationale"), "rationale")})


def read_hotpot(path: Path, ctx: ReadContext) -> Iterator[Example]:
    return parse_each(iter_json_records(path, ctx.stats), lambda rec, _where, _i: parse_hotpot(rec), ctx.stats)


ALT_ANSWERS = "alt_answers.jsonl"


def _alt_answer(rec: dict[str, Any]) -> tuple[str, list[str]]:
    if not rec.get("qas_id"):
        raise RecordError("no qas_id")
    qas_id = str(rec["qas_id"])
    answer = _literal(rec.get("answer"))
    answers = answer if isinstance(answer, list) else [answer]
    return qas_id, [str(a) for a in answers if a]


def alt_answers(folder: Path, stats: LoadStats) -> dict[str, list[str]]:
    """Adversarial HotpotQA's accepted alternative answers by ``qas_id`` (from
    ``alt_answers.jsonl`` or ``alt_answers.jsonl.gz`` in ``folder``, if there is one)."""
    alt: dict[str, list[str]] = {}
    path = next((p for p in (folder / ALT_ANSWERS, folder / f"{ALT_ANSWERS}.gz") if p.is_file()), None)
    if path is None:
        return alt
    records = parse_each(iter_json_records(path, stats), lambda rec, _where, _i: _alt_answer(rec), stats,
                         count=False)
    for qas_id, answers in records:
        alt.setdefault(qas_id, []).extend(answers)
    return alt


def read_adversarial(path: Path, ctx: ReadContext) -> Iterator[Example]:
    alt = alt_answers(path.parent, ctx.stats)
    records = iter_json_records(path, ctx.stats)
    for example in parse_each(records, lambda rec, _where, _i: parse_adversarial(rec), ctx.stats):
        example.answers = _answers(*example.answers, *alt.get(example.id, []))
        yield example
