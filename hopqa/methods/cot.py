"""Chain-of-thought prompting (Wei et al. 2022; zero-shot trigger of Kojima et al. 2022).

The model reasons step by step and ends with "So the answer is: ...", the answer format
IRCoT and Self-Ask use; ``extract_answer`` falls back to the last marker or the first line,
and the trace records which.
"""

from __future__ import annotations

from dataclasses import dataclass

from hopqa.methods.base import Method, MethodConfig, Result, register
from hopqa.methods.parsing import extract_answer
from hopqa.runtime import TracedRetriever
from hopqa.trace import step

#: Zero-shot CoT prompt with an explicit final-answer line.
COT_PROMPT = (
    "Answer the following question. Think step by step, then write the final short answer "
    'on its own line, starting with "So the answer is:".\n\n'
    "Question: {question}\nLet's think step by step."
)


@dataclass
class CoTConfig(MethodConfig):
    max_tokens: int = 256
    temperature: float = 0.0


@register("cot")
class CoT(Method):
    """Reason step by step, then answer; no retrieval."""

    Config = CoTConfig
    config: CoTConfig

    def run(self, question: str, retriever: TracedRetriever | None) -> Result:
        with step("reason", question=question) as s:
            gen = self.llm.generate(COT_PROMPT.format(question=question), max_tokens=self.config.max_tokens,
                                    temperature=self.config.temperature)
            answer, how = extract_answer(gen.text)
            s.output(rationale=gen.text, answer=answer, parsed_by=how)
            if not how.startswith("marker"):
                s.note("no 'So the answer is:' line; answer taken from " + how)
        return Result(answer=answer, passages=[])
