"""Self-Ask with retrieval (Press et al. 2023, "Measuring and Narrowing the Compositionality Gap").

The model writes "Follow up:" questions one at a time; each is answered from the retriever
(top-``k`` passages read by the LLM, the retrieval variant of the paper's search-engine
setting) and fed back as "Intermediate answer:"; the model ends with "So the final answer
is:". Demonstrations are gold decompositions from the shipped train files
(``hopqa.methods.demos``). Fallbacks, recorded in the trace: a turn with neither a follow-up
nor a final answer, or the step limit, ends with one forced "So the final answer is:" call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hopqa.methods.base import Method, MethodConfig, Result, register
from hopqa.methods.demos import Demo, load_demos
from hopqa.methods.parsing import clean_answer, extract_answer, render_passages
from hopqa.methods.retrieve_read import READ_PROMPT
from hopqa.runtime import TracedRetriever
from hopqa.trace import step
from hopqa.types import Passage

#: Instruction and transcript (Self-Ask, Figure 3 format).
SELF_ASK_PROMPT = (
    "Answer the last question like the examples: ask one follow up question at a time, wait for its "
    "intermediate answer, and finish with \"So the final answer is:\" and a short answer.\n\n"
    "{demos}\n\nQuestion: {question}\nAre follow up questions needed here:{transcript}"
)
FINAL_PROMPT = "{transcript_prompt}\nSo the final answer is:"

_FOLLOW = re.compile(r"follow[ -]?up\s*:\s*(.+)", re.IGNORECASE)
_FINAL = re.compile(r"(?:so )?the final answer is\s*:?\s*(.*)", re.IGNORECASE)


def format_demo(demo: Demo) -> str:
    lines = [f"Question: {demo.question}", "Are follow up questions needed here: Yes."]
    for s in demo.steps:
        lines += [f"Follow up: {s.question}", f"Intermediate answer: {s.answer.rstrip('.')}."]
    lines.append(f"So the final answer is: {demo.answer}")
    return "\n".join(lines)


@dataclass
class SelfAskConfig(MethodConfig):
    k: int = 3
    max_steps: int = 5
    shots: int = 4
    max_passage_words: int = 80
    max_tokens: int = 96


@register("self-ask")
class SelfAsk(Method):
    """Follow-up questions answered from retrieval, then the final answer."""

    Config = SelfAskConfig
    config: SelfAskConfig
    needs_retriever = True

    def run(self, question: str, retriever: TracedRetriever | None) -> Result:
        assert retriever is not None
        cfg = self.config
        demos = "\n\n".join(format_demo(d) for d in load_demos(cfg.shots))
        transcript = ""
        used: list[Passage] = []
        asked: set[str] = set()
        for i in range(cfg.max_steps):
            with step("follow_up", step=i + 1) as s:
                prompt = SELF_ASK_PROMPT.format(demos=demos, question=question, transcript=transcript)
                out = self.llm.generate(prompt, max_tokens=cfg.max_tokens, stop=["Intermediate answer:", "\nQuestion:"]).text
                final = _FINAL.search(out)
                follow = _FOLLOW.search(out)
                if final and (not follow or final.start() < follow.start()):
                    answer = clean_answer(final.group(1).splitlines()[0] if final.group(1) else "")
                    s.output(raw=out, final_answer=answer)
                    if answer:
                        return Result(answer=answer, passages=used)
                    break
                if not follow:
                    s.output(raw=out)
                    s.note("no 'Follow up:' and no final answer: asking for the final answer")
                    break
                sub_q = follow.group(1).strip().splitlines()[0].strip()
                if sub_q.lower() in asked:
                    s.note("the same follow-up was asked twice: asking for the final answer")
                    break
                asked.add(sub_q.lower())
                inter, passages = self.answer_follow_up(sub_q, retriever)
                used += [p for p in passages if p.id not in {u.id for u in used}]
                s.output(raw=out, follow_up=sub_q, intermediate_answer=inter)
                s.mark_hop(sub_q, inter, label="follow-up")
                transcript += (" Yes.\n" if i == 0 else "\n") + f"Follow up: {sub_q}\nIntermediate answer: {inter}."
        with step("final_answer") as s:
            prompt = FINAL_PROMPT.format(transcript_prompt=SELF_ASK_PROMPT.format(demos=demos, question=question,
                                                                                  transcript=transcript))
            out = self.llm.generate(prompt, max_tokens=32, stop=["\n\n", "\nQuestion:"]).text
            answer, how = extract_answer("So the final answer is: " + out.strip())
            s.output(raw=out, answer=answer, parsed_by=how)
        return Result(answer=answer, passages=used)

    def answer_follow_up(self, sub_question: str, retriever: TracedRetriever) -> tuple[str, list[Passage]]:
        """Retrieve for the follow-up and let the LLM read the passages (the 'search engine')."""
        with step("intermediate_answer", question=sub_question) as s:
            passages = retriever.search(sub_question, self.config.k)
            prompt = READ_PROMPT.format(passages=render_passages(passages, self.config.max_passage_words),
                                        question=sub_question)
            out = self.llm.generate(prompt, max_tokens=32, stop=["\n\n"]).text
            answer, how = extract_answer(out)
            s.output(answer=answer, parsed_by=how, passages=[p.id for p in passages])
            return answer or "unknown", passages
