"""The evidence pool, its fusion into the reader's prompt (§3.3, Tables 10-12) and Recall@15.

- ``Evidence``: one accepted path's paragraphs and its brief analysis.
- ``fuse``: the reader's prompt for a fusion strategy, filled with as much evidence as fits the
  model's context: pieces are added in the order they entered the pool, and a piece that does
  not fit is left out (a later, smaller one may still fit) — "we set the maximum length to 4096
  and added as much evidence from the pool without exceeding this limit" (§4.4). Tokens are
  counted with the model's tokenizer where the backend has one (``LLMBase.count_tokens``; an
  upper estimate elsewhere); the limit is the method's ``context_tokens`` option, else the
  model's context window, else the paper's 4096; the reply's ``max_tokens`` and
  ``TEMPLATE_TOKENS`` for a chat template are kept free.
- ``reader="short"`` (not in the paper): the same pieces under a zero-shot short-answer prompt.
- ``read_answer``: the reader's "The answer is xxx." (``hopqa.methods.parsing.extract_answer``:
  the last "answer is", case-insensitive; the first line when the sentence is missing).
- ``top_by_similarity``: Recall@15 as the paper computes it (§4.2, footnote): when more than 15
  paragraphs were gathered, rank them by similarity to the final response and keep 15.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hopqa.llm.base import LLMBase
from hopqa.methods.parsing import extract_answer
from hopqa.methods.tor.prompts import EVIDENCE_FORMAT, FUSIONS, SHORT_FUSIONS, fusion_demos
from hopqa.text import render_passages
from hopqa.types import Passage

#: The paper's reader limit (§4.4) when neither the option nor the model gives one.
PAPER_CONTEXT_TOKENS = 4096
#: Tokens kept free for a chat template's wrapping of the prompt.
TEMPLATE_TOKENS = 64
#: The documents of one piece of evidence: ``[i] Title | text``, one per line.
DOCUMENTS_FORMAT: dict[str, Any] = {"numbered": True, "separator": "\n"}


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence: the accepted path's paragraphs (root first) and its brief analysis."""

    passages: tuple[Passage, ...]
    analysis: str

    def to_dict(self) -> dict[str, Any]:
        return {"passages": [p.id for p in self.passages], "analysis": self.analysis}


def distinct_passages(pool: Sequence[Evidence]) -> list[Passage]:
    """The pool's paragraphs, each once, in the order they entered it."""
    seen: dict[str, Passage] = {}
    for ev in pool:
        for p in ev.passages:
            seen.setdefault(p.id, p)
    return list(seen.values())


@dataclass(frozen=True)
class Fused:
    """The reader's prompt and what went into it."""

    prompt: str
    shown: int  # pieces (evidence, paragraphs or analyses) in the prompt
    available: int  # pieces there were
    budget: int  # tokens the prompt could take
    tokens: int  # tokens it takes (as counted)


def context_limit(llm: LLMBase, option: int | None) -> int:
    """The reader's context limit: the option, else the model's window, else the paper's 4096."""
    return option or llm.context_tokens or PAPER_CONTEXT_TOKENS


def _pieces(fusion: str, pool: Sequence[Evidence], max_words: int) -> list[str]:
    if fusion == "paragraph":
        return [render_passages([p], start=1, max_words=max_words, **DOCUMENTS_FORMAT) for p in distinct_passages(pool)]
    if fusion == "analysis":
        return [ev.analysis for ev in pool if ev.analysis]
    return [
        EVIDENCE_FORMAT.format(
            analysis=ev.analysis,
            documents=render_passages(ev.passages, max_words=max_words, **DOCUMENTS_FORMAT),
        )
        for ev in pool
    ]


def _renumber(fusion: str, parts: list[str]) -> str:
    """Join the chosen pieces: paragraphs numbered [1].. in order, analyses one per line."""
    if fusion == "paragraph":
        return "\n".join(f"[{i}]" + part.split("]", 1)[1] for i, part in enumerate(parts, 1))
    return ("\n\n" if fusion == "evidence" else "\n").join(parts)


def fuse(
    llm: LLMBase,
    fusion: str,
    question: str,
    pool: Sequence[Evidence],
    *,
    shots: int,
    max_words: int,
    limit: int,
    reply_tokens: int,
    reader: str = "paper",
) -> Fused:
    """The reader's prompt (Table 10, 11 or 12) with as much of the pool as fits (module
    docstring); ``reader="short"``: the same context under the zero-shot short-answer prompt
    (``SHORT_FUSIONS``, no demonstrations)."""
    instruction, form = (SHORT_FUSIONS if reader == "short" else FUSIONS)[fusion]
    demos = "" if reader == "short" else fusion_demos(shots, fusion)
    empty = form.format(instruction=instruction, demos=demos, context="", question=question)
    budget = limit - reply_tokens - TEMPLATE_TOKENS
    used = llm.count_tokens(empty)
    pieces = _pieces(fusion, pool, max_words)
    chosen: list[str] = []
    for piece in pieces:
        cost = llm.count_tokens(piece) + 2  # its separator, and a token's slack where pieces meet
        if used + cost <= budget:
            chosen.append(piece)
            used += cost
    prompt = form.format(
        instruction=instruction,
        demos=demos,
        context=_renumber(fusion, chosen),
        question=question,
    )
    return Fused(
        prompt=prompt,
        shown=len(chosen),
        available=len(pieces),
        budget=budget,
        tokens=llm.count_tokens(prompt),
    )


def read_answer(text: str) -> tuple[str, str]:
    """(answer, how) from the reader's response: after its last "The answer is"."""
    return extract_answer(text)


def top_by_similarity(passages: Sequence[Passage], response: str, k: int, embedder: Any) -> list[Passage]:
    """``passages`` as they are when there are at most ``k``; else the ``k`` most similar to the
    final ``response`` (cosine of ``embedder`` vectors; ties keep pool order)."""
    if len(passages) <= k:
        return list(passages)
    vectors = embedder.encode([response] + [f"{p.title} {p.text}" for p in passages])
    query, docs = vectors[0], vectors[1:]
    scores = [float(d @ query) for d in docs]
    order = sorted(range(len(passages)), key=lambda i: (-scores[i], i))[:k]
    return [passages[i] for i in order]
