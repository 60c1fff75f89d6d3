"""Direct prompting: the question alone, a short answer back (the no-retrieval baseline).

``Direct`` is also the shape of chain-of-thought (``cot.py``): one prompt, one generation, the
answer read with ``extract_answer``; CoT changes the class attributes below (template, trace
step name, stop sequences, what the reply is called in the trace) and ``check``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hopqa.methods.base import Method, MethodConfig, Result, register
from hopqa.methods.parsing import extract_answer
from hopqa.trace import Step, step

#: Direct prompt (the "Direct" / "standard prompting" baseline of the papers).
DIRECT_PROMPT = (
    "Answer the following question with a short answer of a few words, without explanation.\n\n"
    "Question: {question}\nAnswer:"
)


@dataclass
class DirectConfig(MethodConfig):
    max_tokens: int = 32
    temperature: float = 0.0


class OnePrompt(Method):
    """One prompt, one generation, the answer extracted from the reply; no retrieval. A
    subclass sets ``Config`` (with ``max_tokens`` and ``temperature``) and the attributes below."""

    #: The prompt template (``{question}``).
    PROMPT: ClassVar[str]
    #: The trace step of the generation.
    STEP: ClassVar[str]
    #: Stop sequences of the generation.
    STOP: ClassVar[tuple[str, ...]] = ()
    #: The name of the model's reply in the step's outputs.
    REPLY: ClassVar[str]

    def run(self, question: str) -> Result:
        with step(self.STEP, question=question) as s:
            gen = self.llm.generate(self.PROMPT.format(question=question), max_tokens=self.config.max_tokens,
                                    temperature=self.config.temperature, stop=list(self.STOP))
            answer, how = extract_answer(gen.text)
            s.output(**{self.REPLY: gen.text}, answer=answer, parsed_by=how)
            self.check(s, how)
        return Result(answer=answer, passages=[])

    def check(self, s: Step, parsed_by: str) -> None:
        """Notes on how the answer was read (none here)."""


@register("direct")
class Direct(OnePrompt):
    """Ask the model directly; no retrieval."""

    Config = DirectConfig
    config: DirectConfig
    PROMPT = DIRECT_PROMPT
    STEP = "generate"
    STOP = ("\n\n",)
    REPLY = "raw"
