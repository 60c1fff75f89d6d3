"""GenRead, generate-then-read (Yu et al., ICLR 2023): the model writes its own background
document(s), then answers from them. Prompts are the paper's zero-shot templates.

``n_documents`` > 1 samples several documents at ``temperature`` (the paper's sampling
variant; its clustering-based prompting needs a demonstration pool and is not implemented).
The generated documents are returned as passages with ids ``generated-<i>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hopqa.methods.base import Method, MethodConfig, Result, register
from hopqa.methods.parsing import extract_answer, render_passages
from hopqa.runtime import TracedRetriever
from hopqa.trace import step
from hopqa.types import Passage

#: Step 1 (GenRead, Table/Appendix "generate a background document").
GENERATE_PROMPT = "Generate a background document from Wikipedia to answer the given question.\n\n{question}\n\n"
#: Step 2 (GenRead, read the generated document).
READ_PROMPT = (
    "Refer to the passage below and answer the following question with just a few words.\n\n"
    "Passage: {passages}\n\nQuestion: {question}\n\nThe answer is"
)


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

    def run(self, question: str, retriever: TracedRetriever | None) -> Result:
        cfg = self.config
        with step("generate_documents", question=question, n=cfg.n_documents) as s:
            temp = cfg.document_temperature if cfg.n_documents == 1 else max(cfg.document_temperature, 0.7)
            gen = self.llm.generate(GENERATE_PROMPT.format(question=question), n=cfg.n_documents,
                                    temperature=temp, max_tokens=cfg.document_tokens)
            docs = [Passage(id=f"generated-{i}", title="", text=t.strip()) for i, t in enumerate(gen.texts)]
            docs = [d for d in docs if d.text] or [Passage(id="generated-0", title="", text="(no document)")]
            s.output(documents=[d.text for d in docs])
        with step("read", question=question) as s:
            prompt = READ_PROMPT.format(passages=render_passages(docs) if len(docs) > 1 else docs[0].text,
                                        question=question)
            out = self.llm.generate(prompt, max_tokens=cfg.max_tokens, temperature=0.0, stop=["\n\n"])
            answer, how = extract_answer("The answer is " + out.text.lstrip())
            s.output(raw=out.text, answer=answer, parsed_by=how)
        return Result(answer=answer, passages=docs)
