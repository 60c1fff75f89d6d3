"""GenRead, generate-then-read (Yu et al., ICLR 2023): the model writes its own background
document(s), then answers from them. Prompts are the paper's zero-shot templates.

``n_documents`` > 1 samples several documents at ``document_temperature``, at least 0.7 (the
paper's sampling variant; its clustering-based prompting needs a demonstration pool and is not
implemented).
The generated documents are returned as passages with ids ``generated-<i>``.

Both steps are objects that other methods reuse: ``DocumentGenerator`` (step 1) and
``GenReadReader`` (step 2, a ``retrieve_read.Reader`` with GenRead's template). Self-DC holds
one of each, with its own sampling settings (its Table 21 repeats these two prompts).
"""

from __future__ import annotations

from dataclasses import dataclass

from hopqa.llm.base import LLMBase
from hopqa.methods.base import Method, MethodConfig, Result, register
from hopqa.methods.retrieve_read import Reader
from hopqa.text import render_passages
from hopqa.trace import step
from hopqa.types import Passage

#: Step 1 (GenRead, Table/Appendix "generate a background document").
GENERATE_PROMPT = "Generate a background document from Wikipedia to answer the given question.\n\n{question}\n\n"
#: Step 2 (GenRead, read the generated document).
READ_PROMPT = (
    "Refer to the passage below and answer the following question with just a few words.\n\n"
    "Passage: {passages}\n\nQuestion: {question}\n\nThe answer is"
)


@dataclass(frozen=True)
class DocumentGenerator:
    """Step 1: ``n`` background documents for a question (``GENERATE_PROMPT``), each stripped;
    a document may come back empty (the caller decides what stands in for it)."""

    template: str = GENERATE_PROMPT
    n: int = 1
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0

    def generate(self, llm: LLMBase, question: str) -> list[str]:
        gen = llm.generate(self.template.format(question=question), n=self.n, temperature=self.temperature,
                           top_p=self.top_p, max_tokens=self.max_tokens)
        return [t.strip() for t in gen.texts]


@dataclass(frozen=True)
class GenReadReader(Reader):
    """Step 2: read a passage (a generated document, or retrieved text) with ``READ_PROMPT``;
    the template ends in "The answer is", which the answer parser is shown again."""

    template: str = READ_PROMPT
    answer_prefix: str = "The answer is "


def render_documents(docs: list[Passage]) -> str:
    """The ``Passage:`` of the reader: one document as it is, several numbered."""
    return render_passages(docs) if len(docs) > 1 else docs[0].text


@dataclass
class GenReadConfig(MethodConfig):
    n_documents: int = 1
    document_tokens: int = 256
    document_temperature: float = 0.0
    max_tokens: int = 32


@register("genread")
class GenRead(Method):
    """Generate background documents, then read them."""

    Config = GenReadConfig
    config: GenReadConfig

    @property
    def generator(self) -> DocumentGenerator:
        cfg = self.config
        temp = cfg.document_temperature if cfg.n_documents == 1 else max(cfg.document_temperature, 0.7)
        return DocumentGenerator(n=cfg.n_documents, max_tokens=cfg.document_tokens, temperature=temp)

    @property
    def reader(self) -> GenReadReader:
        return GenReadReader(max_tokens=self.config.max_tokens)

    def run(self, question: str) -> Result:
        cfg = self.config
        with step("generate_documents", question=question, n=cfg.n_documents) as s:
            texts = self.generator.generate(self.llm, question)
            docs = [Passage(id=f"generated-{i}", title="", text=t) for i, t in enumerate(texts)]
            docs = [d for d in docs if d.text] or [Passage(id="generated-0", title="", text="(no document)")]
            s.output(documents=[d.text for d in docs])
        with step("read", question=question) as s:
            reading = self.reader.read(self.llm, question, render_documents(docs))
            s.output(raw=reading.raw, answer=reading.answer, parsed_by=reading.parsed_by)
        return Result(answer=reading.answer, passages=docs)
