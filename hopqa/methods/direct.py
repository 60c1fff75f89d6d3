"""Direct prompting: the question alone, a short answer back (the no-retrieval baseline)."""

from __future__ import annotations

from dataclasses import dataclass

from hopqa.methods.base import Method, MethodConfig, Result, register
from hopqa.methods.parsing import extract_answer
from hopqa.runtime import TracedRetriever
from hopqa.trace import step

#: Direct prompt (the "Direct" / "standard prompting" baseline of the papers).
DIRECT_PROMPT = (
    "Answer the following question with a short answer of a few words, without explanation.\n\n"
    "Question: {question}\nAnswer:"
)


@dataclass
class DirectConfig(MethodConfig):
    max_tokens: int = 32
    temperature: float = 0.0


@register("direct")
class Direct(Method):
    """Ask the model directly; no retrieval."""

    Config = DirectConfig
    config: DirectConfig

    def run(self, question: str, retriever: TracedRetriever | None) -> Result:
        with step("generate", question=question) as s:
            gen = self.llm.generate(DIRECT_PROMPT.format(question=question), max_tokens=self.config.max_tokens,
                                    temperature=self.config.temperature, stop=["\n\n"])
            answer, how = extract_answer(gen.text)
            s.output(raw=gen.text, answer=answer, parsed_by=how)
        return Result(answer=answer, passages=[])
