"""Retrieve-then-Read (OneR): retrieve once with the question, answer from the top-k passages.

The baseline every retrieval-augmented paper here compares against (Self-DC uses 3 passages,
IRCoT's OneR tunes K; hopqa's default is 5, ``--k`` sets it).

Its "read" is an object, ``Reader``: a template over a passage block and a question, one
generation, the forgiving answer parser. Methods that read passages hold a ``Reader`` with
their own template (IRCoT, Self-Ask) or GenRead's (``genread.GenReadReader``, which Self-DC
reuses), so editing ``READ_PROMPT`` changes Retrieve-then-Read and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from hopqa.llm.base import LLMBase
from hopqa.methods.base import MethodConfig, Result, RetrievingMethod, register
from hopqa.methods.parsing import extract_answer
from hopqa.text import render_passages
from hopqa.trace import step

#: Reader prompt over numbered passages ``[i] Title | text`` (hopqa's own wording; the Self-DC
#: paper's Retrieve-then-read, its Table 16, reads with GenRead's prompt instead).
READ_PROMPT = (
    "Answer the question using the passages below. Reply with a short answer of a few words, "
    "without explanation.\n\n{passages}\n\nQuestion: {question}\nAnswer:"
)


class Reading(NamedTuple):
    """What a ``Reader`` read: the short answer, the model's raw reply, how the answer was parsed."""

    answer: str
    raw: str
    parsed_by: str


@dataclass(frozen=True)
class Reader:
    """Read a passage block and answer a question: ``template`` (with ``{passages}`` and
    ``{question}``), one generation, ``extract_answer``. ``answer_prefix`` is the end of a
    template that leads into the answer ("The answer is"): it is put back in front of the
    reply so that the parser sees the marker (not in front of an empty reply, which is an empty
    answer, ``parsed_by="empty"``). The caller renders the passages
    (``hopqa.text.render_passages``) and records the step; a reader opens no step of its own."""

    template: str
    max_tokens: int = 32
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ("\n\n",)
    answer_prefix: str = ""

    def prompt(self, question: str, passages: str) -> str:
        return self.template.format(passages=passages, question=question)

    def read(self, llm: LLMBase, question: str, passages: str) -> Reading:
        raw = llm.generate(self.prompt(question, passages), max_tokens=self.max_tokens, temperature=self.temperature,
                           top_p=self.top_p, stop=list(self.stop)).text
        # the prefix goes back in front of a reply, never alone: an empty reply is an empty answer
        answer, how = extract_answer(self.answer_prefix + raw.lstrip() if self.answer_prefix and raw.strip() else raw)
        return Reading(answer, raw, how)


@dataclass
class RetrieveReadConfig(MethodConfig):
    k: int = 5
    max_passage_words: int = 120
    max_tokens: int = 32
    temperature: float = 0.0


@register("retrieve-then-read")
class RetrieveThenRead(RetrievingMethod):
    """One retrieval with the question, then read."""

    Config = RetrieveReadConfig
    config: RetrieveReadConfig

    @property
    def reader(self) -> Reader:
        return Reader(READ_PROMPT, max_tokens=self.config.max_tokens, temperature=self.config.temperature)

    def run(self, question: str) -> Result:
        with step("retrieve", query=question, k=self.config.k) as s:
            passages = self.retriever.search(question, self.config.k)
            s.output(passages=[p.to_dict() for p in passages])
        with step("read", question=question) as s:
            reading = self.reader.read(self.llm, question,
                                       render_passages(passages, max_words=self.config.max_passage_words))
            s.output(raw=reading.raw, answer=reading.answer, parsed_by=reading.parsed_by)
            if not passages:
                s.note("the retriever returned no passage; the model answered from its own knowledge")
        return Result(answer=reading.answer, passages=passages)
