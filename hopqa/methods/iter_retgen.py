"""ITER-RETGEN (Shao et al. 2023): iterative retrieval-generation synergy.

For t = 1..T: retrieve ``k`` passages with the question (t = 1) or the question joined with
the previous generation (t > 1), then generate a chain of thought ending with "So the answer
is:" from those passages. The answer is read from the last generation. Demonstrations are
chains of thought from the train files' gold decompositions.
"""

from __future__ import annotations

from dataclasses import dataclass

from hopqa.methods.base import FewShotMethod, MethodConfig, Result, register
from hopqa.methods.demos import chain_of_thought
from hopqa.methods.parsing import extract_answer
from hopqa.text import render_passages
from hopqa.trace import step

#: Generation prompt of each iteration.
GENERATE_PROMPT = (
    "Answer the question using the passages. Think step by step and end with \"So the answer is:\" "
    "followed by a short answer.\n\n{demos}\n\n{passages}\n\nQuestion: {question}\nAnswer:"
)


@dataclass
class IterRetGenConfig(MethodConfig):
    k: int = 5
    iterations: int = 3
    shots: int = 4
    total_passage_words: int = 1000
    max_tokens: int = 128


@register("iter-retgen")
class IterRetGen(FewShotMethod):
    """T rounds of retrieve (question + last generation) then generate."""

    Config = IterRetGenConfig
    config: IterRetGenConfig

    def run(self, question: str) -> Result:
        cfg = self.config
        demos = "\n\n".join(f"Question: {d.question}\nAnswer: {chain_of_thought(d)}" for d in self.demos)
        generation, passages, answer = "", [], ""
        for t in range(1, max(1, cfg.iterations) + 1):
            with step("iteration", t=t) as s:
                query = question if t == 1 else f"{question} {generation}"
                passages = self.retriever.search(query, cfg.k)
                prompt = GENERATE_PROMPT.format(demos=demos, question=question,
                                                passages=render_passages(passages, total_words=cfg.total_passage_words))
                generation = self.llm.generate(prompt, max_tokens=cfg.max_tokens, stop=["\n\nQuestion:"]).text.strip()
                answer, how = extract_answer(generation)
                s.output(query=query, passages=[p.id for p in passages], generation=generation, answer=answer,
                         parsed_by=how)
                s.mark_hop(query, answer, label=f"iteration {t}", passages=passages)
        return Result(answer=answer, passages=passages)
