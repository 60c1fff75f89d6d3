"""An answer held to the candidates a "which of A or B" question names (issue 33).

A comparison question names its candidates and asks for one of them: "Which film came out
first, Blind Shaft or The Mask of Fu Manchu?", "Who was born first out of Martin Hodge and
Ivania Martinich?". A small model reading the passages of such a question often answers with
the entity the comparison goes through instead — the director where the film is asked, a date
where the person is asked — which scores 0 whatever the comparison found.

``candidates`` reads the two candidates off the question's wording (a wh-question whose last
clause, after its first comma, is ``A or B``; or ``... out of A and B`` / ``... between A and
B``; a clause going on after the second candidate, "Which band, A or B, had more members?", ends at
its comma); anything else (a yes / no question, a question with no such clause, a clause with more
than one "or") has none, and its answer is left alone. ``hold_to_choice`` then keeps an answer
that names exactly one candidate — as the candidate, in the question's own words — and asks the
model once more, with the passages the answer was read from, to answer with one of the two
(``CHOICE_PROMPT``) when it names neither or both; a reply naming neither keeps the first answer
(noted). Recorded as a ``choice`` step: the candidates, the answer, the reply, what was kept.

Not in any paper: a method offers it as an option (``choice``, off by default), in its
``small-model`` preset. Every parser here is linear in its input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hopqa.llm.base import LLMBase
from hopqa.methods.parsing import clean_answer, first_line_after
from hopqa.text import normalize_answer, render_passages
from hopqa.trace import step
from hopqa.types import Passage

#: Tokens of the reply naming one candidate.
CHOICE_TOKENS = 24
#: Passages the choice call reads at most (the first ones given: ~1,300 tokens at 120 words each,
#: within any context window a method runs in).
CHOICE_PASSAGES = 8
CHOICE_PROMPT = (
    "{passages}\n\n"
    "Question: {question}\n"
    "The answer is one of these two: {first} / {second}. Using the passages, answer with one of them, "
    "exactly as written, nothing else.\n"
    "Answer:"
)
#: A question word that opens a choice question's head ("Which film ...", "Who was born ...").
_WH = re.compile(r"\b(?:which|who|whom|whose|what)\b", re.IGNORECASE)
_OR = re.compile(r"\s+or\s+", re.IGNORECASE)
_AMONG = re.compile(r"\b(?:out of|between)\s+", re.IGNORECASE)
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)


def _pair(parts: list[str]) -> tuple[str, str] | None:
    """The two candidates of a clause split at its one conjunction (None unless two non-empty)."""
    if len(parts) != 2:
        return None
    first, second = parts[0], parts[1].split(", ")[0]  # "Which band, A or B, had more members?"
    first, second = first.strip(" ,;:"), second.strip(" ,;:")
    return (first, second) if normalize_answer(first) and normalize_answer(second) else None


def candidates(question: str) -> tuple[str, str] | None:
    """The two candidates ``question`` asks to choose between, in its own words, or None
    (module docstring: "..., A or B?" after a wh-head, or "... out of / between A and B?")."""
    body = " ".join(question.split()).rstrip("?").strip()
    comma = body.find(", ")
    if comma > 0 and _WH.search(body[:comma]):
        pair = _pair(_OR.split(body[comma + 2:]))
        if pair:
            return pair
    among = _AMONG.search(body)
    if among and _WH.search(body[:among.start()]):
        return _pair(_AND.split(body[among.end():]))
    return None


def _contains(words: list[str], part: list[str]) -> bool:
    n = len(part)
    return bool(part) and any(words[i:i + n] == part for i in range(len(words) - n + 1))


def named(answer: str, pair: tuple[str, str]) -> str | None:
    """The one candidate of ``pair`` that ``answer`` names (its normalised words are the
    candidate's, in it, or hold it), or None when it names neither or both."""
    words = normalize_answer(answer).split()
    if not words:
        return None
    hits = [c for c in pair if _contains(words, normalize_answer(c).split()) or
            _contains(normalize_answer(c).split(), words)]
    return hits[0] if len(hits) == 1 else None


def hold_to_choice(llm: LLMBase, question: str, answer: str, passages: Sequence[Passage],
                   max_words: int | None = None) -> str:
    """``answer`` held to the candidates of ``question`` (module docstring): unchanged when the
    question names none; the candidate it names; else the candidate the model picks reading the
    first ``CHOICE_PASSAGES`` of ``passages`` (each cut to ``max_words``; one call), or ``answer``
    when its reply names neither. A ``choice`` step records it whenever the question names
    candidates."""
    pair = candidates(question)
    if pair is None:
        return answer
    with step("choice", candidates=list(pair), answer=answer) as s:
        hit = named(answer, pair)
        if hit is not None:
            s.output(kept=hit, asked=False)
            return hit
        shown = list(passages)[:CHOICE_PASSAGES]
        s.output(passages=[p.id for p in shown])
        gen = llm.generate(CHOICE_PROMPT.format(passages=render_passages(shown, max_words=max_words),
                                                question=question, first=pair[0], second=pair[1]),
                           max_tokens=CHOICE_TOKENS, temperature=0.0, stop=["\n"])
        reply = clean_answer(first_line_after(gen.text, 0))
        hit = named(reply, pair)
        s.output(reply=reply, kept=hit or answer, asked=True)
        if hit is None:
            s.note("the reply names neither candidate: the answer is kept")
            return answer
        return hit
