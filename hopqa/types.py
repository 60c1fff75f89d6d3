"""The value types every layer shares: Passage, Example, Demo, Usage and Answer.

A ``Passage`` is what a retriever returns and what a method cites; an ``Example`` is one
benchmark item normalised from any dataset; a ``Demo`` is a few-shot demonstration (a
multi-hop question with its gold decomposition), an input of the methods that show some;
``Usage`` is the cost of some work (LLM calls,
tokens, retrieval calls, wall time); an ``Answer`` is what a method returns for one question:
the answer text, the passages behind it, the reasoning trace and the usage.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from hopqa.trace import Trace


@dataclass
class Passage:
    """One retrievable unit of text (a paragraph): ``[i] Title | text`` when shown to an LLM."""

    id: str
    title: str
    text: str
    score: float | None = None
    is_supporting: bool | None = None

    def preview(self, n_words: int = 12) -> str:
        """Title plus the first words, for terminal output."""
        words = self.text.split()
        first = " ".join(words[:n_words]) + (" ..." if len(words) > n_words else "")
        return f"{self.title}: {first}" if self.title else first

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Passage:
        return cls(
            id=str(d["id"]),
            title=str(d.get("title") or ""),
            text=str(d.get("text") or ""),
            score=d.get("score"),
            is_supporting=d.get("is_supporting"),
        )


@dataclass
class Example:
    """One benchmark item, whatever dataset it came from.

    ``answers`` holds the gold answer first, then its accepted aliases. ``paragraphs`` are the
    question's own candidate paragraphs (the distractor setting) with ``is_supporting`` set
    where the dataset marks gold support; empty for open-domain datasets. ``decomposition`` is
    the gold list of sub-questions (``{"question", "answer", "paragraph_support_idx"?}``) where
    the dataset has one. ``extras`` keeps dataset-specific fields (type, level, label, ...).
    """

    id: str
    question: str
    answers: list[str]
    dataset: str = ""
    split: str = ""
    paragraphs: list[Passage] = field(default_factory=list)
    decomposition: list[dict[str, Any]] | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> str:
        return self.answers[0] if self.answers else ""

    @property
    def supporting(self) -> list[Passage]:
        return [p for p in self.paragraphs if p.is_supporting]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["paragraphs"] = [p.to_dict() for p in self.paragraphs]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Example:
        return cls(
            id=str(d["id"]),
            question=d["question"],
            answers=list(d.get("answers") or []),
            dataset=d.get("dataset", ""),
            split=d.get("split", ""),
            paragraphs=[Passage.from_dict(p) for p in d.get("paragraphs") or []],
            decomposition=d.get("decomposition"),
            extras=dict(d.get("extras") or {}),
        )


@dataclass(frozen=True)
class DemoStep:
    """One hop of a demonstration: a sub-question, its answer and its supporting paragraph."""

    question: str
    answer: str
    passage: Passage | None = None


@dataclass(frozen=True)
class Demo:
    """A few-shot demonstration: a multi-hop question, its final answer and its gold steps in
    order (built from training data by ``hopqa.datasets.few_shot_demos``; each method formats
    it its own way)."""

    question: str
    answer: str
    steps: tuple[DemoStep, ...]
    source: str = ""
    passages: tuple[Passage, ...] = field(default_factory=tuple)


@dataclass
class Usage:
    """What some work cost. Cached LLM calls count in ``cache_hits`` and add zero tokens.
    ``prompt_tokens_evaluated``: of ``prompt_tokens``, those the model evaluated (the rest came
    from its KV or prefix cache); a backend that does not say counts its whole prompt."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    retrieval_calls: int = 0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, other: Usage) -> None:
        """Add another usage into this one (thread-safe)."""
        with self._lock:
            for f in fields(self):
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def record_llm(self, prompt_tokens: int, completion_tokens: int, cached: bool,
                   evaluated: int | None = None) -> None:
        with self._lock:
            self.llm_calls += 1
            if cached:
                self.cache_hits += 1
            else:
                self.prompt_tokens += prompt_tokens
                self.prompt_tokens_evaluated += prompt_tokens if evaluated is None else evaluated
                self.completion_tokens += completion_tokens

    def record_retrieval(self, n: int = 1) -> None:
        with self._lock:
            self.retrieval_calls += n

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["seconds"] = round(d["seconds"], 3)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Usage:
        known = {f.name: d.get(f.name, 0) for f in fields(cls)}
        if "prompt_tokens_evaluated" not in d:  # recorded before it was counted: every token
            known["prompt_tokens_evaluated"] = known["prompt_tokens"]
        return cls(**known)

    def summary(self) -> str:
        evaluated = (f" ({self.prompt_tokens_evaluated} evaluated)"
                     if self.prompt_tokens_evaluated != self.prompt_tokens else "")
        return (
            f"{self.llm_calls} LLM calls ({self.cache_hits} cached), "
            f"{self.prompt_tokens} prompt{evaluated} + {self.completion_tokens} completion tokens, "
            f"{self.retrieval_calls} retrieval calls, {self.seconds:.1f} s"
        )


@dataclass
class Answer:
    """A method's result for one question: the answer, its passages, trace and cost."""

    question: str
    answer: str
    method: str
    passages: list[Passage] = field(default_factory=list)
    trace: Trace | None = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    #: Per-question figures a method reports about its own work (Tree of Reviews:
    #: ``docs_reviewed``, ``evidence``); the evaluation adds them to the question's metrics.
    metrics: dict[str, float] = field(default_factory=dict)
    #: The method was stopped before it finished (``hopqa.runtime.cancellable``): not an answer
    #: to record; ``error`` says so and the trace shows where it stopped.
    cancelled: bool = False

    @property
    def hops(self) -> list[Any]:
        """The reasoning hops (sub-questions with their answers and passages) read from the
        trace (``hopqa.trace.Hop``); empty for single-step methods."""
        return self.trace.hops() if self.trace is not None else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "method": self.method,
            "hops": [h.to_dict() for h in self.hops],
            "passages": [p.to_dict() for p in self.passages],
            "usage": self.usage.to_dict(),
            "error": self.error,
            "metrics": dict(self.metrics),
            "trace": self.trace.to_dict() if self.trace is not None else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Answer:
        from hopqa.trace import Trace

        return cls(
            question=d["question"],
            answer=d["answer"],
            method=d["method"],
            passages=[Passage.from_dict(p) for p in d.get("passages") or []],
            trace=Trace.from_dict(d["trace"]) if d.get("trace") else None,
            usage=Usage.from_dict(d.get("usage") or {}),
            error=d.get("error"),
            metrics={str(k): float(v) for k, v in (d.get("metrics") or {}).items()},
        )
