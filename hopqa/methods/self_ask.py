"""Self-Ask with retrieval (Press et al. 2023, "Measuring and Narrowing the Compositionality Gap").

The model writes "Follow up:" questions one at a time; each is answered from the retriever
(top-``k`` passages read by the LLM, the retrieval variant of the paper's search-engine
setting) and fed back as "Intermediate answer:"; the model ends with "So the final answer
is:". Demonstrations are gold decompositions from the shipped train files
(``hopqa.methods.demos``). Fallbacks, recorded in the trace: a turn with neither a follow-up
nor a final answer, or the step limit, ends with one forced "So the final answer is:" call.
A "Follow up:" with no question after it (on its line, or on the next non-blank line when that
is not another field) is no follow-up: the turn then counts as one with neither, and the trace
says the follow-up was empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hopqa.methods.base import FewShotMethod, MethodConfig, Result, register
from hopqa.methods.parsing import clean_answer, extract_answer, first_line_after
from hopqa.methods.retrieve_read import Reader
from hopqa.text import render_passages
from hopqa.trace import step
from hopqa.types import Demo, Passage

#: Instruction and transcript (Self-Ask, Figure 3 format).
SELF_ASK_PROMPT = (
    "Answer the last question like the examples: ask one follow up question at a time, wait for its "
    "intermediate answer, and finish with \"So the final answer is:\" and a short answer.\n\n"
    "{demos}\n\nQuestion: {question}\nAre follow up questions needed here:{transcript}"
)
FINAL_PROMPT = "{transcript_prompt}\nSo the final answer is:"
#: The "search engine" of the retrieval variant: the top-k passages read for a follow-up (the
#: paper answers follow-ups with a search engine's answer box, so it has no reader prompt;
#: hopqa's wording, owned by Self-Ask: it started as a copy of Retrieve-then-Read's).
INTERMEDIATE_PROMPT = (
    "Answer the question using the passages below. Reply with a short answer of a few words, "
    "without explanation.\n\n{passages}\n\nQuestion: {question}\nAnswer:"
)
#: The reader of follow-ups (greedy, a short answer).
INTERMEDIATE_READER = Reader(INTERMEDIATE_PROMPT, max_tokens=32)

#: The "Follow up:" label (its question is read by ``parse_follow_up``).
_FOLLOW = re.compile(r"follow[ -]?up\s*:", re.IGNORECASE)
#: The final-answer label (its answer is the first non-blank line after it).
_FINAL = re.compile(r"(?:so )?the final answer is\s*:?", re.IGNORECASE)
#: A line that starts another field of the transcript, not a follow-up question.
_FIELD = re.compile(r"\s*(?:follow[ -]?up|intermediate answer|(?:so )?the final answer|are follow)", re.IGNORECASE)


def _line(text: str, pos: int) -> tuple[str, int]:
    """The line of ``text`` from ``pos`` and where the next line starts (no copy of the rest)."""
    end = text.find("\n", pos)
    return (text[pos:], len(text)) if end < 0 else (text[pos:end], end + 1)


def parse_follow_up(text: str) -> tuple[int, str] | None:
    """(position, question) of the first "Follow up:" that has a question: the rest of its
    line, else the next non-blank line unless that starts another field; None if there is none.
    Linear in the length of ``text``."""
    for m in _FOLLOW.finditer(text):
        rest, nxt = _line(text, m.end())
        question = rest.strip()
        if not question:
            while nxt < len(text):
                line, nxt = _line(text, nxt)
                if line.strip():
                    question = "" if _FIELD.match(line) else line.strip()
                    break
        if question:
            return m.start(), question
    return None


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
class SelfAsk(FewShotMethod):
    """Follow-up questions answered from retrieval, then the final answer."""

    Config = SelfAskConfig
    config: SelfAskConfig

    def run(self, question: str) -> Result:
        cfg = self.config
        demos = "\n\n".join(format_demo(d) for d in self.demos)
        transcript = ""
        used: list[Passage] = []
        asked: set[str] = set()
        for i in range(cfg.max_steps):
            with step("follow_up", step=i + 1) as s:
                prompt = SELF_ASK_PROMPT.format(demos=demos, question=question, transcript=transcript)
                out = self.llm.generate(prompt, max_tokens=cfg.max_tokens, stop=["Intermediate answer:", "\nQuestion:"]).text
                final = _FINAL.search(out)
                follow = parse_follow_up(out)
                if final and (not follow or final.start() < follow[0]):
                    answer = clean_answer(first_line_after(out, final.end()))
                    s.output(raw=out, final_answer=answer)
                    if answer:
                        return Result(answer=answer, passages=used)
                    s.note("an empty final answer: asking for the final answer")
                    break
                if not follow:
                    s.output(raw=out)
                    if _FOLLOW.search(out):
                        s.note("'Follow up:' without a question: asking for the final answer")
                    else:
                        s.note("no 'Follow up:' and no final answer: asking for the final answer")
                    break
                sub_q = follow[1]
                if sub_q.lower() in asked:
                    s.note("the same follow-up was asked twice: asking for the final answer")
                    break
                asked.add(sub_q.lower())
                inter, passages = self.answer_follow_up(sub_q)
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

    def answer_follow_up(self, sub_question: str) -> tuple[str, list[Passage]]:
        """Retrieve for the follow-up and let the LLM read the passages (the 'search engine')."""
        with step("intermediate_answer", question=sub_question) as s:
            passages = self.retriever.search(sub_question, self.config.k)
            reading = INTERMEDIATE_READER.read(self.llm, sub_question,
                                               render_passages(passages, max_words=self.config.max_passage_words))
            s.output(answer=reading.answer, parsed_by=reading.parsed_by, passages=[p.id for p in passages])
            return reading.answer or "unknown", passages
