"""Retrieve-then-Read (OneR): retrieve once with the question, answer from the top-k passages.

The baseline every retrieval-augmented paper here compares against (Self-DC uses 3 passages,
IRCoT's OneR tunes K; hopqa's default is 5, ``--k`` sets it).
"""

from __future__ import annotations

from dataclasses import dataclass

from hopqa.methods.base import Method, MethodConfig, Result, register
from hopqa.methods.parsing import extract_answer, render_passages
from hopqa.runtime import TracedRetriever
from hopqa.trace import step

#: Reader prompt over numbered passages ``[i] Title | text``.
READ_PROMPT = (
    "Answer the question using the passages below. Reply with a short answer of a few words, "
    "without explanation.\n\n{passages}\n\nQuestion: {question}\nAnswer:"
)


@dataclass
class RetrieveReadConfig(MethodConfig):
    k: int = 5
    max_passage_words: int = 120
    max_tokens: int = 32
    temperature: float = 0.0


@register("retrieve-then-read")
class RetrieveThenRead(Method):
    """One retrieval with the question, then read."""

    Config = RetrieveReadConfig
    config: RetrieveReadConfig
    needs_retriever = True

    def run(self, question: str, retriever: TracedRetriever | None) -> Result:
        assert retriever is not None
        with step("retrieve", query=question, k=self.config.k) as s:
            passages = retriever.search(question, self.config.k)
            s.output(passages=[p.to_dict() for p in passages])
        with step("read", question=question) as s:
            prompt = READ_PROMPT.format(passages=render_passages(passages, self.config.max_passage_words),
                                        question=question)
            gen = self.llm.generate(prompt, max_tokens=self.config.max_tokens, temperature=self.config.temperature,
                                    stop=["\n\n"])
            answer, how = extract_answer(gen.text)
            s.output(raw=gen.text, answer=answer, parsed_by=how)
            if not passages:
                s.note("the retriever returned no passage; the model answered from its own knowledge")
        return Result(answer=answer, passages=passages)
