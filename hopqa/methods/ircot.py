"""IRCoT (Trivedi et al. 2023): interleave retrieval with chain-of-thought steps.

1. Retrieve ``k`` paragraphs with the question.
2. Reason: generate the next CoT sentence given the question, the paragraphs so far and the
   CoT so far; stop when it says "answer is", after ``max_steps``, or when the sentence repeats
   an earlier one (greedy small models loop; recorded in the trace); otherwise retrieve ``k``
   paragraphs with that sentence as the query and add them to the collection (at most
   ``max_paragraphs``; each paragraph keeps its best score, highest first).
3. Read: answer from all accumulated paragraphs (``reader="direct"``, the default here, or
   ``"cot"``: the reasoning's own "So the answer is:").

Demonstrations: chains of thought written from gold decompositions of the train files (the
paper annotated its own CoTs; ours are generated from the gold steps, ``demos.chain_of_thought``),
shown without their paragraphs to save the small model's context.

Structured step (``structured``, ``hopqa.methods.structured``): where the backend constrains to
a JSON schema, each reasoning step sends the same prompt (demonstrations, paragraphs, "A:" and
the CoT so far) followed by ``json_reply``, and the model writes ``{"sentence": str}``
(``REASON_SCHEMA``): the next sentence, read as the paper's text (its first sentence is added to
the CoT), and the reasoning ends as in the paper, on a sentence with "answer is". An earlier
schema had an ``answer`` field beside the sentence; Qwen2.5-1.5B filled it on the first step
every time, so the reasoning stopped after one retrieval (MuSiQue dev 1-10: 2 LLM calls a
question against 3 in free text, F1 0.19 against 0.41): a field that offers to conclude is
taken. A reply that is not JSON (a server that ignored the schema) is read as free text (parse
record ``fallback``); an empty sentence stops the reasoning (``failed``). In free text a
non-empty first sentence is ``direct``, an empty generation ``failed``. The reader is no
structured step: it stays free text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hopqa.methods.base import FewShotMethod, MethodConfig, Result, register
from hopqa.methods.demos import chain_of_thought as demo_cot
from hopqa.methods.parsing import extract_answer, first_sentence
from hopqa.methods.retrieve_read import Reader
from hopqa.methods.structured import (
    Parsed,
    StructuredMode,
    direct,
    failed,
    json_reply,
    object_schema,
    read,
    use_schema,
)
from hopqa.text import render_passages
from hopqa.trace import step
from hopqa.types import Passage

#: Reasoning prompt: demos, paragraphs, question, CoT so far (IRCoT's "Reason" step).
REASON_PROMPT = (
    "Answer the question by reasoning step by step with the help of the paragraphs, one sentence at a "
    "time, and end with \"So the answer is:\" followed by a short answer.\n\n{demos}\n\n"
    "{passages}\n\nQ: {question}\nA:{cot}"
)
#: Structured reasoning step (``structured``): the schema, and the closing instruction appended to
#: ``REASON_PROMPT`` (after "A:" and the CoT so far).
REASON_SCHEMA = object_schema({"sentence": {"type": "string"}})
REASON_INSTRUCTION = "\n" + json_reply({
    "sentence": "the next sentence of the reasoning (the last one: So the answer is: <short answer>.)",
})
#: Room for the JSON wrapper of a structured call (its key, quotes and braces).
JSON_TOKENS = 16
#: Prompt of the "direct" reader over all collected paragraphs (IRCoT's reader step; the papers
#: give no prompt for it, so this is hopqa's wording, owned by IRCoT: it started as a copy of
#: Retrieve-then-Read's and no longer changes with it).
READ_PROMPT = (
    "Answer the question using the passages below. Reply with a short answer of a few words, "
    "without explanation.\n\n{passages}\n\nQuestion: {question}\nAnswer:"
)
#: The direct reader (greedy, a short answer).
READER = Reader(READ_PROMPT, max_tokens=32)


def parse_sentence(text: str) -> Parsed[str]:
    """The free-text step: its first sentence (``first_sentence``; one new sentence per step),
    ``failed`` when the generation is empty."""
    sentence = first_sentence(text)
    return direct(sentence, "first sentence") if sentence else failed("empty reasoning step")


def sentence_from_json(obj: dict[str, Any]) -> str | None:
    """A ``REASON_SCHEMA`` object as the step's sentence: the first sentence of ``sentence``;
    None when it is empty or not a string."""
    sentence = obj.get("sentence")
    return (first_sentence(sentence) or None) if isinstance(sentence, str) else None


@dataclass
class IRCoTConfig(MethodConfig):
    k: int = 4
    max_steps: int = 8
    max_paragraphs: int = 15
    shots: int = 4
    reader: Literal["direct", "cot"] = "direct"
    total_passage_words: int = 1200
    max_tokens: int = 64
    #: Structured outputs for the structured steps (``hopqa.methods.structured``): ``auto``
    #: where the backend can constrain to a JSON schema, ``on``, or ``off`` (the paper's free text).
    structured: StructuredMode = "auto"


@register("ircot")
class IRCoT(FewShotMethod):
    """Retrieve with each new chain-of-thought sentence, then read all paragraphs."""

    Config = IRCoTConfig
    config: IRCoTConfig

    def run(self, question: str) -> Result:
        cfg = self.config
        structured = use_schema(self.llm, cfg.structured, who="IRCoT's reasoning steps")
        demos = "\n\n".join(f"Q: {d.question}\nA: {demo_cot(d)}" for d in self.demos)
        best: dict[str, Passage] = {}
        with step("retrieve", query=question) as s:
            s.mark_hop(question, label="retrieve")
            self.collect(best, self.retriever.search(question, cfg.k))
            s.output(collection=[p.id for p in self.ordered(best)])
        cot: list[str] = []
        for i in range(cfg.max_steps):
            with step("reason", step=i + 1) as s:
                prompt = REASON_PROMPT.format(
                    demos=demos, question=question, cot="".join(" " + c for c in cot),
                    passages=render_passages(self.ordered(best), total_words=cfg.total_passage_words))
                if structured:  # max_tokens: room for the JSON wrapper too
                    gen = self.llm.generate(prompt + REASON_INSTRUCTION, max_tokens=cfg.max_tokens + JSON_TOKENS,
                                            schema=REASON_SCHEMA)
                    parsed = read(gen.text, True, sentence_from_json, parse_sentence, field="sentence",
                                  schema_ignored=gen.schema_ignored)
                else:
                    gen = self.llm.generate(prompt, max_tokens=cfg.max_tokens, stop=["\n\n", "\nQ:"])
                    parsed = read(gen.text, False, sentence_from_json, parse_sentence, field="sentence")
                sentence = parsed.value or ""
                s.output(raw=gen.text, sentence=sentence)
                if not sentence:
                    s.note("empty reasoning step: stopping")
                    break
                if sentence in cot:
                    s.note("the reasoning step repeats an earlier one: stopping")
                    break
                cot.append(sentence)
                if "answer is" in sentence.lower():
                    s.mark_hop(sentence, label="thought")  # the last step: nothing more to retrieve
                    break
            with step("retrieve", query=sentence) as s:
                s.mark_hop(sentence, label="thought")
                self.collect(best, self.retriever.search(sentence, cfg.k))
                s.output(collection=[p.id for p in self.ordered(best)])
        passages = self.ordered(best)
        with step("read", reader=cfg.reader) as s:
            if cfg.reader == "cot" and cot and "answer is" in cot[-1].lower():
                answer, how = extract_answer(cot[-1])
            else:
                reading = READER.read(self.llm, question, render_passages(passages, total_words=cfg.total_passage_words))
                answer, how = reading.answer, reading.parsed_by
            s.output(chain_of_thought=" ".join(cot), answer=answer, parsed_by=how)
        return Result(answer=answer, passages=passages)

    def collect(self, best: dict[str, Passage], hits: list[Passage]) -> None:
        """Add hits, keeping each paragraph's best score, within the paragraph cap."""
        for p in hits:
            old = best.get(p.id)
            if old is None or (p.score or 0.0) > (old.score or 0.0):
                best[p.id] = p
        if len(best) > self.config.max_paragraphs:
            keep = self.ordered(best)[: self.config.max_paragraphs]
            best.clear()
            best.update({p.id: p for p in keep})

    @staticmethod
    def ordered(best: dict[str, Passage]) -> list[Passage]:
        return sorted(best.values(), key=lambda p: -(p.score or 0.0))
