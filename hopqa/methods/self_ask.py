"""Self-Ask with retrieval (Press et al. 2023, "Measuring and Narrowing the Compositionality Gap").

The model writes "Follow up:" questions one at a time; each is answered from the retriever
(top-``k`` passages read by the LLM, the retrieval variant of the paper's search-engine
setting) and fed back as "Intermediate answer:"; the model ends with "So the final answer
is:". Demonstrations are gold decompositions from the shipped train files
(``hopqa.methods.demos``). Fallbacks, recorded in the trace: a turn with neither a follow-up
nor a final answer, or the step limit, ends with one forced "So the final answer is:" call.
A "Follow up:" with no question after it (on its line, or on the next non-blank line when that
is not another field) is no follow-up: the turn then counts as one with neither, and the trace
says the follow-up was empty. An empty reply to the forced call gives an empty answer.

Structured steps (``structured``, ``hopqa.methods.structured``): where the backend constrains to
a JSON schema, each turn is the same prompt (demonstrations and transcript in the paper's text)
followed by ``json_reply``, and the model answers the paper's question "Are follow up questions
needed here" explicitly: ``{"follow_up_needed": bool, "follow_up": str, "final_answer": str}``
(``TURN_SCHEMA``; a follow-up when needed, the final answer when not, as in the paper — a
follow-up is never forced). The method writes the turn back into the transcript as the paper's
text ("Follow up: ...", then "Intermediate answer: ..." from the reader), so later prompts look
as in free text. The forced final answer asks for ``{"final_answer": str}`` (``FINAL_SCHEMA``).
An object without a consistent decision (a follow-up asked for but empty, a final answer
missing) counts as a turn with neither (parse record ``failed``); a reply that is not JSON (a
server that ignored the schema) is read by the free-text parser (``fallback``). Follow-ups are
still answered by the free-text reader ("Answer:"), like Retrieve-then-Read's: a short answer is
no structured step. In free text every turn is recorded ``direct`` when "Follow up:" or "So the
final answer is:" was found as asked, ``fallback`` for a question read from the line after
"Follow up:", ``failed`` when the final answer is forced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from hopqa.methods.base import FewShotMethod, MethodConfig, Result, register
from hopqa.methods.parsing import clean_answer, extract_answer, first_line_after, strip_labels
from hopqa.methods.retrieve_read import Reader
from hopqa.methods.structured import (
    Parsed,
    StructuredMode,
    direct,
    failed,
    fallback,
    json_reply,
    object_schema,
    read,
    use_schema,
)
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
#: Structured turn (``structured``): the schema, and the closing instruction appended to
#: ``SELF_ASK_PROMPT`` (after "Are follow up questions needed here:" on the first turn, after the
#: last "Intermediate answer: ..." later: the JSON's first field answers that question).
TURN_SCHEMA = object_schema({
    "follow_up_needed": {"type": "boolean"},
    "follow_up": {"type": "string"},
    "final_answer": {"type": "string"},
})
TURN_INSTRUCTION = "\n" + json_reply({
    "follow_up_needed": True,
    "follow_up": "the next follow up question, or empty when none is needed",
    "final_answer": "the short final answer when no follow up is needed, else empty",
})
#: Structured forced final answer: ``SELF_ASK_PROMPT`` and this instruction instead of the cue
#: "So the final answer is:".
FINAL_SCHEMA = object_schema({"final_answer": {"type": "string"}})
FINAL_INSTRUCTION = "\n" + json_reply({"final_answer": "the short final answer"})
#: Room for the JSON wrapper of a structured call (its keys, quotes and braces), in tokens.
JSON_TOKENS = 32
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
#: The two labels as a JSON field's leaked prefix, with their spaces (``strip_labels`` drops
#: them one after another: "Follow up: Follow up: Who ...?").
_FOLLOW_PREFIX = re.compile(rf"\s*(?:{_FOLLOW.pattern})\s*", re.IGNORECASE)
_FINAL_PREFIX = re.compile(rf"\s*(?:{_FINAL.pattern})\s*", re.IGNORECASE)
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


class Turn(NamedTuple):
    """One model turn read: a follow-up question or the final answer."""

    kind: Literal["follow_up", "final"]
    text: str


def parse_turn(text: str) -> Parsed[Turn]:
    """The free-text turn: the first of "So the final answer is:" (its answer) and a "Follow
    up:" with a question (``parse_follow_up``); ``failed`` with the reason when there is
    neither, the final answer is empty or the follow-up has no question."""
    final = _FINAL.search(text)
    follow = parse_follow_up(text)
    if final and (not follow or final.start() < follow[0]):
        answer = clean_answer(first_line_after(text, final.end()))
        return direct(Turn("final", answer), "So the final answer is:") if answer else failed("an empty final answer")
    if follow:
        pos, question = follow
        if question in _line(text, pos)[0]:
            return direct(Turn("follow_up", question), "Follow up:")
        return fallback(Turn("follow_up", question), "the question on the line after 'Follow up:'")
    if _FOLLOW.search(text):
        return failed("'Follow up:' without a question")
    return failed("no 'Follow up:' and no final answer")


def turn_from_json(obj: dict[str, Any]) -> Turn | None:
    """A ``TURN_SCHEMA`` object as a turn (a leaked "Follow up:" / "So the final answer is:"
    label dropped); None unless it decides one way and fills the field of its decision."""
    needed = obj.get("follow_up_needed")
    if needed is True and isinstance(obj.get("follow_up"), str):
        question = " ".join(_strip_label(_FOLLOW_PREFIX, obj["follow_up"]).split())
        return Turn("follow_up", question) if question else None
    if needed is False and isinstance(obj.get("final_answer"), str):
        answer = clean_answer(_strip_label(_FINAL_PREFIX, obj["final_answer"]))
        return Turn("final", answer) if answer else None
    return None


def final_from_json(obj: dict[str, Any]) -> str | None:
    """A ``FINAL_SCHEMA`` object's answer; None when empty."""
    answer = obj.get("final_answer")
    return (clean_answer(_strip_label(_FINAL_PREFIX, answer)) or None) if isinstance(answer, str) else None


def parse_final(text: str) -> Parsed[str]:
    """The free-text reply to the forced "So the final answer is:" (``extract_answer`` behind
    the cue); ``failed`` (an empty answer) when nothing is left of it but the cue."""
    answer, how = extract_answer("So the final answer is: " + text.strip())
    return direct(answer, how) if answer and how.startswith("marker:so the final") else failed("an empty final answer")


def _strip_label(label: re.Pattern[str], text: str) -> str:
    """``text`` without the ``label`` a small model wrote at its start, however many times."""
    return strip_labels(text, label)[0]



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
    #: Structured outputs for the structured steps (``hopqa.methods.structured``): ``auto``
    #: where the backend can constrain to a JSON schema, ``on``, or ``off`` (the paper's free text).
    structured: StructuredMode = "auto"


@register("self-ask")
class SelfAsk(FewShotMethod):
    """Follow-up questions answered from retrieval, then the final answer."""

    Config = SelfAskConfig
    config: SelfAskConfig

    def run(self, question: str) -> Result:
        cfg = self.config
        structured = use_schema(self.llm, cfg.structured, who="Self-Ask's follow-up turns")
        demos = "\n\n".join(format_demo(d) for d in self.demos)
        transcript = ""
        used: list[Passage] = []
        asked: set[str] = set()
        for i in range(cfg.max_steps):
            with step("follow_up", step=i + 1) as s:
                prompt = SELF_ASK_PROMPT.format(demos=demos, question=question, transcript=transcript)
                if structured:  # max_tokens: room for the JSON wrapper too
                    gen = self.llm.generate(prompt + TURN_INSTRUCTION, max_tokens=cfg.max_tokens + JSON_TOKENS,
                                            schema=TURN_SCHEMA)
                    turn = read(gen.text, True, turn_from_json, parse_turn, field="turn",
                                schema_ignored=gen.schema_ignored)
                else:
                    gen = self.llm.generate(prompt, max_tokens=cfg.max_tokens,
                                            stop=["Intermediate answer:", "\nQuestion:"])
                    turn = read(gen.text, False, turn_from_json, parse_turn, field="turn")
                out = gen.text
                if turn.value is None:
                    s.output(raw=out)
                    s.note(f"{turn.how}: asking for the final answer")
                    break
                if turn.value.kind == "final":
                    s.output(raw=out, final_answer=turn.value.text)
                    return Result(answer=turn.value.text, passages=used)
                sub_q = turn.value.text
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
            prompt = SELF_ASK_PROMPT.format(demos=demos, question=question, transcript=transcript)
            if structured:
                gen = self.llm.generate(prompt + FINAL_INSTRUCTION, max_tokens=32 + JSON_TOKENS, schema=FINAL_SCHEMA)
                final = read(gen.text, True, final_from_json, parse_final, field="final_answer",
                             schema_ignored=gen.schema_ignored)
            else:
                gen = self.llm.generate(FINAL_PROMPT.format(transcript_prompt=prompt), max_tokens=32,
                                        stop=["\n\n", "\nQuestion:"])
                final = read(gen.text, False, final_from_json, parse_final, field="final_answer")
            answer = final.value or ""
            s.output(raw=gen.text, answer=answer, parsed_by=final.how)
        return Result(answer=answer, passages=used)

    def answer_follow_up(self, sub_question: str) -> tuple[str, list[Passage]]:
        """Retrieve for the follow-up and let the LLM read the passages (the 'search engine')."""
        with step("intermediate_answer", question=sub_question) as s:
            passages = self.retriever.search(sub_question, self.config.k)
            reading = INTERMEDIATE_READER.read(self.llm, sub_question,
                                               render_passages(passages, max_words=self.config.max_passage_words))
            s.output(answer=reading.answer, parsed_by=reading.parsed_by, passages=[p.id for p in passages])
            return reading.answer or "unknown", passages
