"""Few-shot demonstrations built from the shipped *train* files (never from dev).

A ``Demo`` is a multi-hop question with its gold decomposition: the sub-questions in
order, each with its answer and the supporting paragraph, and the final answer. Sources:
MuSiQue train (``question_decomposition`` with ``paragraph_support_idx``; relation-style steps
such as ``"Hello Love >> performer"`` become ``"What is the performer of Hello Love?"`` and
``#1`` references are replaced by the earlier answers) and 2WikiMultihopQA train
(``qa_pairs``, with the gold paragraphs of ``supporting_facts``). Demonstrations alternate
between the sources and are chosen deterministically (the first ones of 2-3 hops whose steps
are all natural questions after conversion), so a prompt is the same on every run.

Each method formats demos in its own way (Self-Ask's follow-ups, ReAct's Thought/Action/
Observation, IRCoT's and ITER-RETGEN's chains of thought): see ``chain_of_thought``.
Without a data directory there are no demos and methods fall back to zero-shot prompts,
recording that in the trace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from hopqa.datasets import DatasetError, default_data_dir, load_dataset
from hopqa.types import Example, Passage


@dataclass(frozen=True)
class Step:
    question: str
    answer: str
    passage: Passage | None = None


@dataclass(frozen=True)
class Demo:
    question: str
    answer: str
    steps: tuple[Step, ...]
    source: str = ""
    passages: tuple[Passage, ...] = field(default_factory=tuple)


_REF = re.compile(r"#(\d+)")


def _natural(question: str) -> str:
    """'Entity >> relation' -> 'What is the relation of Entity?'; other text tidied."""
    if ">>" in question:
        entity, _, relation = (x.strip() for x in question.partition(">>"))
        return f"What is the {relation} of {entity}?"
    q = " ".join(question.split()).replace(" ?", "?")
    q = q[0].upper() + q[1:] if q else q
    return q if q.endswith("?") else q + "?"


def _resolve(text: str, answers: list[str]) -> str:
    return _REF.sub(lambda m: answers[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(answers) else m.group(0), text)


def demo_from_musique(ex: Example) -> Demo | None:
    if not ex.decomposition:
        return None
    answers: list[str] = []
    steps = []
    for d in ex.decomposition:
        q = _natural(_resolve(d["question"], answers))
        idx = d.get("paragraph_support_idx")
        passage = ex.paragraphs[idx] if isinstance(idx, int) and 0 <= idx < len(ex.paragraphs) else None
        steps.append(Step(q, d["answer"], passage))
        answers.append(d["answer"])
    return Demo(ex.question, ex.answer, tuple(steps), f"musique:{ex.id}", tuple(s.passage for s in steps if s.passage))


def demo_from_2wiki(ex: Example) -> Demo | None:
    if not ex.decomposition:
        return None
    by_title = {p.title: p for p in ex.supporting}
    ordered = [by_title[t] for t in dict.fromkeys(f[0] for f in ex.extras.get("supporting_facts", [])) if t in by_title]
    support = ordered or ex.supporting
    steps = []
    for i, d in enumerate(ex.decomposition):
        passage = support[i] if i < len(support) else None
        steps.append(Step(_natural(d["question"]), d["answer"].strip(), passage))
    return Demo(ex.question, ex.answer, tuple(steps), f"2wikimultihopqa:{ex.id}", tuple(support))


def _usable(demo: Demo | None) -> bool:
    return (demo is not None and 2 <= len(demo.steps) <= 3 and all("#" not in s.question for s in demo.steps)
            and all(s.passage is not None for s in demo.steps) and len(demo.question) < 200)


@lru_cache(maxsize=16)
def _all_demos(data_dir: str | None) -> tuple[tuple[Demo, ...], tuple[Demo, ...]]:
    root = default_data_dir(data_dir)
    if root is None:
        return (), ()
    try:
        musique = [demo_from_musique(e) for e in load_dataset("musique", "train", data_dir=root)]
        wiki = [demo_from_2wiki(e) for e in load_dataset("2wikimultihopqa", "train", data_dir=root)]
    except DatasetError:
        return (), ()
    return tuple(d for d in musique if _usable(d)), tuple(d for d in wiki if _usable(d))  # type: ignore[misc]


def load_demos(n: int, data_dir: str | Path | None = None) -> list[Demo]:
    """``n`` demonstrations alternating MuSiQue and 2Wiki train (empty without data)."""
    musique, wiki = _all_demos(str(data_dir) if data_dir else None)
    out: list[Demo] = []
    for i in range(max(len(musique), len(wiki))):
        for pool in (musique, wiki):
            if i < len(pool) and len(out) < n:
                out.append(pool[i])
    return out


def chain_of_thought(demo: Demo) -> str:
    """A chain of thought written from the gold steps, ending with 'So the answer is: ...'."""
    parts = []
    for s in demo.steps:
        ans = s.answer.strip().rstrip(".")
        sentence = len(ans.split()) > 4 and re.search(r"\b(is|was|are|were|has|had)\b", ans)
        parts.append(f"{ans}." if sentence else f"{s.question} {ans}.")
    return " ".join(parts) + f" So the answer is: {demo.answer}."
