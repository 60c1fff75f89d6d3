"""Entailment judges: does a premise entail a hypothesis?

HGOT's citation recall / precision (ALCE, Gao et al. 2023) and its passage scoring need an
NLI judge; the paper used TRUE (T5-11B), which does not run here. hopqa's judges share one
small interface, ``entails(premise, hypothesis) -> bool`` (and ``entails_many``):

- ``LLMJudge`` — a yes/no prompt to any LLM backend (greedy, so the response cache makes a
  repeated judgement free), with an in-memory memo on top;
- ``CrossEncoderJudge`` — a sentence-transformers ``CrossEncoder`` NLI model for users who
  have one (none ships its weights on PyPI, see RETRIEVAL.md);
- ``ScriptedJudge`` — a function, for unit tests.

Unparseable judge output counts as "not entailed" and is remembered in ``failures``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from hopqa.text import cap_words

#: Yes/no entailment prompt for an LLM judge.
NLI_PROMPT = (
    "Premise: {premise}\n\nHypothesis: {hypothesis}\n\n"
    "Does the premise entail the hypothesis, i.e. is the hypothesis true given only the premise? "
    "Answer with one word: yes or no."
)


class EntailmentJudge(Protocol):
    name: str

    def entails(self, premise: str, hypothesis: str) -> bool: ...

    def entails_many(self, pairs: Sequence[tuple[str, str]]) -> list[bool]: ...


class _Memo:
    """Thread-safe memo of judgements (each pair is asked once per judge)."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str], bool] = {}
        self._lock = threading.Lock()
        self.calls = 0
        self.failures = 0

    def get(self, key: tuple[str, str]) -> bool | None:
        with self._lock:
            return self._memo.get(key)

    def put(self, key: tuple[str, str], value: bool) -> None:
        with self._lock:
            self._memo[key] = value


class LLMJudge:
    """Entailment by prompting an LLM (any backend; cached by the LLM's response cache)."""

    name = "llm-judge"

    def __init__(self, llm: Any, max_premise_words: int | None = None) -> None:
        self.llm = llm
        #: None (default): the premise as given, which is what the method showed its model. A
        #: number caps *each line* of the premise (one passage per line when a statement cites
        #: several), so a long first passage never pushes the later ones out.
        self.max_premise_words = max_premise_words
        self.memo = _Memo()

    def entails(self, premise: str, hypothesis: str) -> bool:
        if self.max_premise_words is not None:
            premise = "\n".join(cap_words(line, self.max_premise_words) for line in premise.split("\n"))
        key = (premise, hypothesis)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        reply = self.llm.generate(NLI_PROMPT.format(premise=premise, hypothesis=hypothesis), max_tokens=3,
                                  temperature=0.0).text.strip().lower()
        self.memo.calls += 1
        if not reply.startswith(("yes", "no")):
            self.memo.failures += 1
        value = reply.startswith("yes")
        self.memo.put(key, value)
        return value

    def entails_many(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        return [self.entails(p, h) for p, h in pairs]


class CrossEncoderJudge:
    """A sentence-transformers NLI cross-encoder (label order given by ``entail_index``)."""

    name = "cross-encoder"

    def __init__(self, model_name_or_path: str, entail_index: int = 1, device: str = "cpu") -> None:
        from sentence_transformers import CrossEncoder

        self.model = CrossEncoder(model_name_or_path, device=device)
        self.entail_index = entail_index
        self.memo = _Memo()

    def entails(self, premise: str, hypothesis: str) -> bool:
        return self.entails_many([(premise, hypothesis)])[0]

    def entails_many(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        todo = [p for p in pairs if self.memo.get(p) is None]
        if todo:
            scores = self.model.predict(list(todo))
            for pair, row in zip(todo, scores):
                row = list(row) if hasattr(row, "__len__") else [row]
                self.memo.put(pair, int(max(range(len(row)), key=lambda i: row[i])) == self.entail_index)
            self.memo.calls += len(todo)
        return [bool(self.memo.get(p)) for p in pairs]


class ScriptedJudge:
    """Entailment by a Python function (unit tests)."""

    name = "scripted"

    def __init__(self, fn: Callable[[str, str], bool]) -> None:
        self.fn = fn
        self.calls: list[tuple[str, str]] = []

    def entails(self, premise: str, hypothesis: str) -> bool:
        self.calls.append((premise, hypothesis))
        return bool(self.fn(premise, hypothesis))

    def entails_many(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        return [self.entails(p, h) for p, h in pairs]
