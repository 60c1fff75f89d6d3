"""Self-DC — confidence-routed divide and conquer (Wang et al. 2024, Section 4,
Figure 3, prompts of Table 21).

::

    SelfDC(q, depth):
        c <- confidence(q)                                   # verb or prob, in [0, 1]
        if alpha - beta < c < alpha + beta:                  # unsure: divide
            if depth >= t: return retrieve_then_read(q)      # depth cap
            subs <- decompose(q)                             # "#1: ..., #2: ..."
            if len(subs) <= 1: return retrieve_then_read(q)  # a single question: unknown
            answers <- [SelfDC(s, depth + 1) for s in subs]  # one level, concurrently
            return combine_sub_qas(q, subs, answers)
        if c >= alpha + beta: return generate_then_read(q)   # known
        return retrieve_then_read(q)                         # unknown

With ``chain`` (not the paper's; off by default, on in the ``small-model`` preset) the question
is divided into steps to be answered one after another, a later one naming an earlier one's
answer as ``#1`` (``DECOMPOSE_CHAIN_PROMPT``), optionally shown ``shots`` demonstrations (the
shipped training subsets' gold decompositions, ``hopqa.methods.demos.chain_decomposition``), and
the sub-questions of one level are solved in order, each asked with the earlier answers its
``#k`` names, replaced by the k-th answer; a step naming none is asked as written, or with
``brackets`` with all the earlier answers in brackets (``chained``).

The ranges are the paper's: [0, α−β] retrieve, (α−β, α+β) decompose, [α+β, 1] generate; so
c exactly at α−β retrieves and c exactly at α+β generates (bounds rounded to 10 decimals so
0.4 − 0.1 is 0.3). GenRead is (α, β) = (0, 0): every c ≥ 0 generates; Retrieve-then-Read is
(1, 0): every c retrieves (the two closed ranges meet at c = 1 there; Figure 3's code would
generate, the paper's text says (1, 0) is Retrieve-then-Read, and hopqa follows the text).

Confidence (``confidence``):
- ``verb`` — the Table 21 prompt asks for ``Answer:`` and ``Confidence (0-100):``; the number
  is parsed forgivingly ("80", "80%", "Confidence: 80", "0.8" read as a fraction) and mapped to
  [0, 1]; no number at all counts as 0 and is noted in the trace.
- ``prob`` — the mean token probability of a few-word answer (Eq. 1); needs per-token
  logprobs from the backend (the embedded models and OpenAI-compatible servers have them), a
  clear error at start-up otherwise.

Structured steps (``structured``, ``hopqa.methods.structured``; issue 16): where the backend
can constrain its output to a JSON schema (``auto``) or when asked (``on``), two steps send the
Table 21 prompt with its closing cue ``Answer:`` replaced by a JSON instruction
(``json_reply``): the verbal confidence (``VERB_CONFIDENCE_SCHEMA``: ``{"answer": str,
"confidence": 0..100}``, the paper's percentage scale as an integer enum; the value / 100 is c)
and the decomposition (``decomposition_schema``: ``{"subquestions": [str]}``, at most
``max_subquestions``). A JSON reply cut short by ``max_tokens`` is closed and read (a
``fallback`` parse record); a reply with no JSON object at all (a server that did not
constrain it) goes to the free-text parser (``fallback``); a JSON object without a usable value,
or nothing usable, takes the documented default (``failed``: confidence 0; no sub-questions,
so retrieve-then-read). With ``off`` (or a backend without
``STRUCTURED``) the prompts are the paper's, byte for byte, and the free-text parsers record
``direct`` for the paper's format (a ``Confidence (0-100): N`` line; ``#k:`` items),
``fallback`` for what a forgiving rule recovered (a number elsewhere; a numbered or bulleted
list), ``failed`` for the default. The ``prob`` confidence parses nothing (no schema, no
record); combine-sub-qas and the readers write a free-text answer after ``Answer:``, not a
format, so they stay free text. The confidence step keeps its outputs ``raw``, ``answer`` and
``confidence`` (c in [0, 1], the value a histogram of confidences reads).

Defaults are the paper's: α = 0.4 (verb) / 0.6 (prob) when ``alpha`` is unset, β = 0.1, t = 3,
3 retrieved passages, temperature 0.1 and top_p 0.1. Every retrieval is counted in the usage
(``retrieval_calls``), so the evaluation reports retrievals per question, the paper's
efficiency claim. The trace is the recursion tree: one ``self-dc`` step per (sub-)question
with its confidence, route and answer, sub-questions nested under their parent.

The two leaves reuse GenRead as objects, the way FlashRAG's ``ConditionalPipeline`` reuses its
sequential pipelines: ``generator`` (``genread.DocumentGenerator``) writes the background
document and ``reader`` (``genread.GenReadReader``) reads in both routes, since the paper reads
retrieved and generated passages with the one prompt (Table 21, = Tables 16 and 17). The
retrieve route shows the top-k passages as one run-on ``Passage:`` (``hopqa.text.render_passages``
unnumbered, space-separated). Self-DC passes its own sampling settings (temperature, top_p,
token limits); changing GenRead's templates changes Self-DC on purpose.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from hopqa.llm.base import LOGPROBS, Generation, LLMBase
from hopqa.methods.base import (
    FewShotMethod,
    MethodConfig,
    MethodError,
    Preset,
    Result,
    register,
)
from hopqa.methods.choice import distinct
from hopqa.methods.demos import chain_decomposition, multi_hop
from hopqa.methods.genread import DocumentGenerator, GenReadReader
from hopqa.methods.parsing import extract_answer
from hopqa.methods.polar import hold_answer
from hopqa.methods.structured import (
    Parsed,
    StructuredMode,
    direct,
    failed,
    fallback,
    json_reply,
    object_schema,
    read,
    string_list,
    use_schema,
)
from hopqa.retrieval.base import Retriever
from hopqa.text import normalize_answer, render_passages
from hopqa.trace import step, submit
from hopqa.types import Demo, Passage

#: Table 21, verbalized confidence.
VERB_CONFIDENCE_PROMPT = (
    "Please read the question, give the answer and indicate your level of confidence. Use the following format "
    "to provide your answer and confidence level:\nAnswer: [Your answer]\nConfidence (0-100): [Your confidence "
    "level, please only include the numerical number, e.g. 80]%\nNote: The confidence level indicates the degree "
    "of certainty you have about your answer and is represented as a percentage. For instance, if your confidence "
    "level is 80%, it means you are 80% certain that your answer is correct and there is a 20% chance that it may "
    "be incorrect. If you do not know the answer, simply output confidence as 0%.\nQuestion: {question}\n"
    "Please answer this question and provide your confidence level. Note that the confidence level indicates the "
    "degree of certainty you have about your answer and is represented as a percentage.\nAnswer:"
)
#: Table 14 (Direct prompting): the short answer whose token probabilities give the 'prob' confidence.
PROB_CONFIDENCE_PROMPT = "Please answer the following question with just a few words.\nQuestion: {question}\nThe answer is"
#: Table 21, decompose.
DECOMPOSE_PROMPT = (
    "Please read the question, divide the question into smaller, independent parts. By solving these individual "
    "sub-questions and combining their answers, you can derive the solution to the main question. Use the "
    "following format to provide your answer: #1: [sub-question 1], #2: [sub-question 2], ...\n"
    "Question: {question}\nAnswer:"
)
#: Table 21, combine-sub-qas.
COMBINE_PROMPT = (
    "Question: {question}\nHere are all related sub-questions and corresponding answers:\n{sub_qas}\n"
    "According to answers of all related sub-quesions of the original question, please generate the final answer "
    "of the original question using a few words.\nAnswer:"
)
#: ``chain`` (not the paper's): Table 21's decompose prompt asking for steps answered one after
#: another instead of independent parts, a later step naming an earlier answer as "#1"; the
#: demonstrations (``shots``), if any, go in ``{examples}`` (``DECOMPOSE_CHAIN_EXAMPLES``).
DECOMPOSE_CHAIN_PROMPT = (
    "Please read the question, divide the question into smaller sub-questions that are answered one after "
    "another. A later sub-question may use the answer of an earlier one, written as #1, #2, ... By solving these "
    "sub-questions in order, you can derive the solution to the main question. Use the following format to "
    "provide your answer: #1: [sub-question 1], #2: [sub-question 2], ...\n{examples}"
    "Question: {question}\nAnswer:"
)
#: The block of demonstrations in ``DECOMPOSE_CHAIN_PROMPT`` (empty with ``shots=0``).
DECOMPOSE_CHAIN_EXAMPLES = "Examples:\n\n{demos}\n\nNow the question to divide.\n"
ROUTES = ("retrieve-then-read", "generate-then-read", "decompose")

# -- structured outputs (issue 16): the same prompts, the cue "Answer:" replaced by a JSON instruction ----------
#: The verbal confidence as JSON: the answer first (as in the paper's format), then the confidence
#: on the paper's 0-100 scale (an integer enum: llama-cpp-python's converter ignores minimum/maximum).
VERB_CONFIDENCE_SCHEMA = object_schema({"answer": {"type": "string"},
                                        "confidence": {"type": "integer", "enum": list(range(101))}})
VERB_CONFIDENCE_REPLY = json_reply({"answer": "[Your answer]", "confidence": 80})
#: Table 21, verbalized confidence, asking for ``VERB_CONFIDENCE_SCHEMA``.
VERB_CONFIDENCE_JSON_PROMPT = VERB_CONFIDENCE_PROMPT.removesuffix("\nAnswer:") + "\n{reply}"
DECOMPOSE_REPLY = json_reply({"subquestions": ["[sub-question 1]", "[sub-question 2]"]})
#: Table 21, decompose, asking for ``decomposition_schema``.
DECOMPOSE_JSON_PROMPT = DECOMPOSE_PROMPT.removesuffix("\nAnswer:") + "\n{reply}"
DECOMPOSE_CHAIN_REPLY = json_reply({"subquestions": ["[sub-question 1]", "[sub-question 2, may use #1]"]})
#: ``chain``'s decompose prompt, asking for ``decomposition_schema``.
DECOMPOSE_CHAIN_JSON_PROMPT = DECOMPOSE_CHAIN_PROMPT.removesuffix("\nAnswer:") + "\n{reply}"


def decomposition_schema(max_subquestions: int) -> dict[str, Any]:
    """The decomposition as JSON: ``{"subquestions": [2 to max_subquestions strings]}``. At
    least two: a decomposition has parts, and one sub-question is no decomposition (it falls
    back to retrieve-then-read); unconstrained, Qwen2.5-1.5B returned one item — often the
    question itself — for most questions."""
    return object_schema({"subquestions": string_list(max_subquestions, min_items=min(2, max_subquestions))})


@dataclass
class SelfDCConfig(MethodConfig):
    confidence: Literal["verb", "prob"] = "verb"
    alpha: float | None = None
    beta: float = 0.1
    depth: int = 3
    k: int = 3
    temperature: float = 0.1
    top_p: float = 0.1
    max_subquestions: int = 5
    max_tokens: int = 32
    document_tokens: int = 200
    max_passage_words: int = 120
    #: Structured outputs for the structured steps (``hopqa.methods.structured``): ``auto``
    #: where the backend can constrain to a JSON schema, ``on``, or ``off`` (the paper's free text).
    structured: StructuredMode = "auto"
    #: What answers a question the model is sure of (c ≥ α + β): ``generate`` (the paper:
    #: generate-then-read) or ``retrieve`` (retrieve-then-read: a small model's confidence is
    #: not trusted to skip retrieval; issue 33). The routes to retrieval and decomposition are
    #: unchanged.
    known_route: Literal["generate", "retrieve"] = "generate"
    #: A "which of A or B" question's answer held to its two candidates (``hopqa.methods.choice``:
    #: two dates compared in code, else the candidate the answer names, else one more call; each
    #: reading the passages the answer was read from, the sub-questions' for a divided question).
    #: Not in the paper: a remedy for small models that compare two dates wrongly or answer with
    #: the entity the comparison goes through (issue 33), off by default, on in the small-model preset.
    choice: bool = False
    #: A yes / no question's answer held to yes or no (``hopqa.methods.polar``, reading the passages
    #: the answer was read from: for "the same country" the two values written and compared in code,
    #: else the yes or no the answer opens on, else one more call). Not in the paper: a remedy for
    #: small models that answer "Are both directors from the same country?" with a nationality, or
    #: with a yes whatever the two are (issue 33), off by default and in no preset (a gain on train
    #: yes / no questions, inside the noise on dev).
    polar: bool = False
    #: A divided question divided into steps answered one after another (``DECOMPOSE_CHAIN_PROMPT``:
    #: a later step writes an earlier answer as "#1"), solved in order, each asked with the
    #: answers of the ones before it that it names (``chained``: "#1" replaced), so that its
    #: confidence, retrieval and reading see them. Not in the paper, whose
    #: sub-questions are independent parts solved at once: a remedy for chains of hops whose later
    #: hop cannot be asked before the earlier answer is known (issue 33), off by default, on in
    #: the small-model preset.
    chain: bool = False
    #: With ``chain``: demonstrations of a chain decomposition shown to the decompose step, the
    #: first ``shots`` of the shipped training subsets' gold decompositions (MuSiQue and
    #: 2WikiMultihopQA train alternating, never dev; ``chain_decomposition``). Not in the paper,
    #: whose decompose prompt is zero-shot: Qwen2.5-1.5B's zero-shot chains asked the last hop
    #: first (issue 33). 0 (default): zero-shot; 4 in the small-model preset.
    shots: int = field(default=0, metadata={"range": (0, 16), "needs": "chain"})
    #: With ``chain``: a step naming no ``#k`` asked with every earlier answer in brackets
    #: ("What is the seat of that county? (Mountrail County)"), as the chain was first measured.
    #: Off (default): it is asked as written, the decomposition naming which answers a step uses
    #: (with the brackets, the second part of a comparison, "Who is the director of B? (Stephan
    #: Elliott)", was answered with the first part's answer; issue 33). On in the small-model
    #: preset, whose figures were measured with it.
    brackets: bool = field(default=False, metadata={"needs": "chain"})


# -- parsing ---------------------------------------------------------------------------------------------
_CONF_LABEL = re.compile(r"confidence[^0-9\n]{0,20}?(\d+(?:\.\d+)?)\s*(%?)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(%?)")
_FORMAT_RANGE = re.compile(r"\(\s*0\s*-\s*100\s*\)")
_CONFIDENCE_WORD = re.compile(r"confidence", re.IGNORECASE)
_BARE_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_HASH_ITEM = re.compile(r"#\s*\d+\s*[:.)]")
_LIST_ITEM = re.compile(r"^[^\S\n]*(?:\d+[.)]|[-*\u2022])\s+", re.MULTILINE)
#: The paper's confidence line (after ``_FORMAT_RANGE`` removed "(0-100)"): "Confidence: 80".
_CONF_LINE = re.compile(r"[^\S\n]*confidence[^\S\n]*:[^\S\n]*", re.IGNORECASE)
#: A marker an item of a JSON list may still carry: "#1:", "1. ", "- ".
_ITEM_MARKER = re.compile(r"^\s*(?:#\s*\d+\s*[:.)]\s*|(?:\d+[.)]|[-*\u2022])\s+)")


def parse_verbal_confidence(text: str) -> tuple[float | None, str]:
    """(confidence in [0, 1] or None, the answer) from a verbalized-confidence reply.

    Looks for a number after "Confidence", else a number followed by "%", else a reply that is
    only a number. 0-100 is divided by 100; a fraction written as 0.x is kept; values are clamped.
    The answer is what comes before the first "confidence". Linear in the length of ``text``.
    """
    c, answer, _ = _verbal_confidence(text)
    return c, answer


def _verbal_confidence(text: str) -> tuple[float | None, str, str]:
    """``parse_verbal_confidence`` and the rule that found the number (``read_verbal_confidence``)."""
    text = _FORMAT_RANGE.sub(" ", text)  # the "(0-100)" of the format line is not a value
    cut = _CONFIDENCE_WORD.search(text)
    answer_part = text[: cut.start()] if cut else text
    answer = extract_answer(answer_part)[0] if answer_part.strip() else ""
    how = "number after 'confidence'"
    m = _CONF_LABEL.search(text)
    if m is not None and _CONF_LINE.fullmatch(text, text.rfind("\n", 0, m.start()) + 1, m.start(1)):
        how = "Confidence line"  # the label alone at the start of its line, then the number
    if m is None:
        percents = [x for x in _NUMBER.finditer(text) if x.group(2)]
        m = percents[-1] if percents else None
        how = "a percentage"
    if m is None:
        bare = text.strip()
        if _BARE_NUMBER.fullmatch(bare[:-1].rstrip() if bare.endswith("%") else bare):
            m = _NUMBER.search(text)
            how = "a reply that is only a number"
    if m is None:
        return None, answer, "no confidence number"
    value = float(m.group(1))
    if not m.group(2) and "." in m.group(1) and value <= 1.0:
        return value, answer, how + " (a fraction)"  # "0.8": already a fraction
    return max(0.0, min(100.0, value)) / 100.0, answer, how


def read_verbal_confidence(text: str) -> Parsed[tuple[float, str]]:
    """The free-text reading of a verbalized-confidence reply (``"Answer:" + completion``) as a
    parse record: ``direct`` for the paper's ``Confidence (0-100): N`` line, ``fallback`` for a
    number found by another rule of ``parse_verbal_confidence``, ``failed`` for none (the
    method then takes confidence 0)."""
    c, answer, how = _verbal_confidence(text)
    if c is None:
        return failed(how)
    return direct((c, answer), how) if how == "Confidence line" else fallback((c, answer), how)


def confidence_from_json(obj: dict[str, Any]) -> tuple[float, str] | None:
    """``(c, answer)`` from ``{"answer": ..., "confidence": 0..100}``: c = confidence / 100,
    clamped to [0, 1]; a number written with a point and at most 1 (0.8, from a server that
    ignored the schema) is already a fraction, as in the free-text rule. None without a numeric
    confidence."""
    value = obj.get("confidence")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    answer = obj.get("answer")
    answer = " ".join(answer.split()) if isinstance(answer, str) else ""
    if isinstance(value, float) and 0.0 <= value <= 1.0:  # written with a point, as "0.8" in free text
        return value, answer
    return max(0.0, min(100.0, float(value))) / 100.0, answer


def parse_subquestions(text: str, limit: int = 5) -> list[str]:
    """Sub-questions from ``#1: ..., #2: ...`` (one line or many); numbered or bulleted lists
    are accepted too. Each is cut after its first "?"; repeats (after SQuAD normalisation)
    count once; at most ``limit``. Linear in the length of ``text``."""
    parts = _HASH_ITEM.split(text)
    items = parts[1:] if len(parts) > 1 else _LIST_ITEM.split(text)
    return _clean_subquestions(items, limit)


def _clean_subquestions(items: list[str], limit: int) -> list[str]:
    """Each item on one line, cut after its first "?"; repeats (SQuAD normalisation) once; at
    most ``limit``."""
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if len(out) >= limit:
            break
        q = " ".join(item.split()).strip(" ,;")
        if not q:
            continue
        if "?" in q:
            q = q[: q.index("?") + 1]
        key = normalize_answer(q)
        if key not in seen:
            seen.add(key)
            out.append(q)
    return out


def read_subquestions(text: str, limit: int = 5) -> Parsed[list[str]]:
    """The free-text reading of a decomposition (``parse_subquestions``) as a parse record:
    ``direct`` when the paper's ``#k:`` items are there, ``fallback`` for a numbered or bulleted
    list, ``failed`` for neither (a statement or nothing: the method treats the question as
    undivided and retrieves)."""
    if _HASH_ITEM.search(text):
        return direct(parse_subquestions(text, limit), "#k: items")
    if _LIST_ITEM.search(text):
        return fallback(parse_subquestions(text, limit), "a numbered or bulleted list")
    return failed("no #k: items and no list")


def subquestions_from_json(obj: dict[str, Any], limit: int = 5) -> list[str] | None:
    """The sub-questions of ``{"subquestions": [...]}`` (strings only; a leftover "#1:" or "1."
    marker removed; cleaned as ``parse_subquestions``); None without such a list."""
    items = obj.get("subquestions")
    if not isinstance(items, list):
        return None
    return _clean_subquestions([_ITEM_MARKER.sub("", x, count=1) for x in items if isinstance(x, str)], limit)


_REFERENCE = re.compile(r"#(\d+)\b")


def resolved(sub: str, earlier: list[str]) -> str:
    """``sub`` with each ``#k`` replaced by the k-th of the ``earlier`` answers ("When was #1
    born?": "When was Guido Brignone born?"); a ``#k`` with no answer, or past the earlier ones,
    stays."""
    def answer(m: re.Match[str]) -> str:
        k = int(m.group(1))
        return earlier[k - 1].strip() if 1 <= k <= len(earlier) and earlier[k - 1].strip() else m.group(0)

    return _REFERENCE.sub(answer, sub)


def chained(sub: str, earlier: list[str], brackets: bool = False) -> str:
    """``sub`` asked with the earlier sub-questions' answers it names: its ``#k`` references
    replaced (``resolved``); a ``sub`` that names none is asked as written, or with ``brackets``
    with the earlier answers in brackets, the empty ones left out ("What is the seat of that
    county? (Mountrail County)"; ``sub`` itself when there are none)."""
    if _REFERENCE.search(sub) or not brackets:
        return resolved(sub, earlier)
    given = [a for a in earlier if a.strip()]
    return f"{sub} ({'; '.join(given)})" if given else sub


def chain_examples(demos: Sequence[Demo], structured: bool = False) -> str:
    """``DECOMPOSE_CHAIN_EXAMPLES`` holding ``demos`` (``chain_decomposition``) written as the
    reply is asked for: the paper's ``#1: ..., #2: ...`` after "Answer:", or with ``structured``
    the JSON object; empty without demos."""
    if not demos:
        return ""
    def reply(subs: list[str]) -> str:
        if structured:
            return "\n" + json.dumps({"subquestions": subs}, ensure_ascii=False)
        return "\nAnswer: " + ", ".join(f"#{i}: {q}" for i, q in enumerate(subs, 1))

    shown = [f"Question: {d.question}{reply(chain_decomposition(d))}" for d in demos]
    return DECOMPOSE_CHAIN_EXAMPLES.format(demos="\n\n".join(shown))


def route(c: float, alpha: float, beta: float) -> str:
    """Which function handles a question of confidence ``c`` (see the module docstring)."""
    lo, hi = round(alpha - beta, 10), round(alpha + beta, 10)
    if lo < c < hi:
        return "decompose"
    if c >= hi and not (beta == 0 and lo >= 1.0):  # (1, 0) is Retrieve-then-Read even at c = 1
        return "generate-then-read"
    return "retrieve-then-read"


@register("self-dc")
class SelfDC(FewShotMethod):
    """Self Divide-and-Conquer: confidence decides between generate, retrieve and decompose."""

    Config = SelfDCConfig
    config: SelfDCConfig
    presets: ClassVar[dict[str, Preset]] = {
        "small-model": Preset(
            {"confidence": "prob", "known_route": "retrieve", "k": 5, "choice": True,
             "chain": True, "shots": 4, "brackets": True, "alpha": 0.5, "beta": 0.5, "depth": 1},
            "a small model's verbal confidence is 0.8-1.0 for every question and the questions it is sure of are "
            "answered from its own document, confidently wrong: token probabilities spread the confidence, and a "
            "sure question still reads retrieved passages; and reading the paper's 3 passages it found fewer "
            "supporting paragraphs than Retrieve-then-Read's 5: it reads 5; on a \"which of A or B\" question it "
            "names the wrong one of two dates it read, or the entity the comparison goes through: its answer is "
            "held to the two candidates; and the paper's independent parts cannot carry a chain of hops (a later "
            "hop asked before the earlier answer is known), while its confidence did not tell which questions one "
            "retrieval answers: every question is divided once (alpha 0.5, beta 0.5, depth 1) into steps answered "
            "in order, each given the earlier answers, shown 4 demonstrations of such a division"),
    }

    def __init__(self, llm: LLMBase, retriever: Retriever, config: SelfDCConfig | None = None, *,
                 demos: Sequence[Demo] | None = None) -> None:
        super().__init__(llm, retriever, config, demos=multi_hop(demos))
        cfg = self.config
        if cfg.confidence == "prob" and not self.llm.supports(LOGPROBS):
            hint = self.llm.capability_hint(LOGPROBS)
            raise MethodError(f"Self-DC with confidence=prob needs token logprobs and {self.llm.name!r} does not "
                              f"return them{': ' + hint if hint else ''}; use confidence=verb")

    @classmethod
    def needs(cls, config: MethodConfig) -> frozenset[str]:
        return frozenset({LOGPROBS}) if getattr(config, "confidence", "") == "prob" else frozenset()

    @property
    def alpha(self) -> float:
        if self.config.alpha is not None:
            return self.config.alpha
        return 0.4 if self.config.confidence == "verb" else 0.6

    def _gen(self, prompt: str, max_tokens: int | None = None, **kw: Any) -> Generation:
        cfg = self.config
        return self.llm.generate(prompt, max_tokens=max_tokens or cfg.max_tokens, temperature=cfg.temperature,
                                 top_p=cfg.top_p, **kw)

    # -- Figure 3 ----------------------------------------------------------------------------------------
    def run(self, question: str) -> Result:
        answer, passages = self.solve(question, 0)
        cfg = self.config
        answer = hold_answer(self.llm, question, answer, distinct(passages), choice=cfg.choice, polar=cfg.polar,
                             max_words=cfg.max_passage_words)
        return Result(answer=answer, passages=passages)

    def solve(self, q: str, depth: int) -> tuple[str, list[Passage]]:
        cfg = self.config
        with step("self-dc", question=q, depth=depth) as s:
            c = self.confidence(q)
            where = route(c, self.alpha, cfg.beta)
            s.output(confidence=round(c, 4), route=where)
            if where == "generate-then-read" and cfg.known_route == "retrieve":
                s.output(route="retrieve-then-read", reason="known_route=retrieve")
                where = "retrieve-then-read"
            if where == "generate-then-read":
                answer, passages = self.generate_then_read(q)
            elif where == "retrieve-then-read":
                answer, passages = self.retrieve_then_read(q)
            elif depth >= cfg.depth:
                s.note(f"depth limit t={cfg.depth} reached: the question is treated as unknown")
                s.output(route="retrieve-then-read", reason="depth limit")
                answer, passages = self.retrieve_then_read(q)
            else:
                subs = self.decompose(q)
                if len(subs) <= 1:
                    s.note("the decomposition gave one sub-question or none: the question is treated as unknown")
                    s.output(route="retrieve-then-read", reason="single sub-question")
                    answer, passages = self.retrieve_then_read(q)
                else:
                    if cfg.chain:
                        shown, results = self.solve_chain(subs, depth + 1)
                    else:
                        shown, results = subs, self.solve_all(subs, depth + 1)
                    answer = self.combine(q, shown, [a for a, _ in results])
                    passages = [p for _, ps in results for p in ps]
            s.output(answer=answer)
            s.mark_hop(q, answer, label=f"{s.outputs.get('route', where)}, confidence {c:.2f}")
            return answer, passages

    def solve_all(self, subs: list[str], depth: int) -> list[tuple[str, list[Passage]]]:
        """The sub-questions of one level, concurrently where the backend allows (results in order)."""
        width = max(1, min(len(subs), self.llm.max_concurrency))
        if width == 1:
            return [self.solve(x, depth) for x in subs]
        with ThreadPoolExecutor(max_workers=width) as pool:
            return [f.result() for f in [submit(pool, self.solve, x, depth) for x in subs]]

    def solve_chain(self, subs: list[str], depth: int) -> tuple[list[str], list[tuple[str, list[Passage]]]]:
        """The sub-questions of one level in order, each asked with the answers before it
        (``chain``; ``chained``): the sub-questions with their ``#k`` references resolved (what
        combine-sub-qas is shown; the brackets left out) and their results, in order."""
        shown: list[str] = []
        results: list[tuple[str, list[Passage]]] = []
        for sub in subs:
            earlier = [a for a, _ in results]
            shown.append(resolved(sub, earlier))
            results.append(self.solve(chained(sub, earlier, self.config.brackets), depth))
        return shown, results

    # -- the sub-functions -----------------------------------------------------------------------------------
    def confidence(self, q: str) -> float:
        with step("confidence", measure=self.config.confidence) as s:
            if self.config.confidence == "prob":
                gen = self._gen(PROB_CONFIDENCE_PROMPT.format(question=q), logprobs=True, stop=["\n"])
                comp = gen.completions[0]
                prob = comp.mean_prob
                if prob is None:
                    s.note("the backend returned no token logprobs: confidence 0")
                s.output(raw=comp.text, confidence=prob or 0.0)
                return prob or 0.0
            structured = use_schema(self.llm, self.config.structured, who="Self-DC confidence")
            if structured:
                # 64 tokens, not 48: room for the JSON around the answer and the number
                gen = self._gen(VERB_CONFIDENCE_JSON_PROMPT.format(question=q, reply=VERB_CONFIDENCE_REPLY),
                                max_tokens=64, schema=VERB_CONFIDENCE_SCHEMA)
            else:
                # no stop at a blank line: small models often put one between the answer and the confidence
                gen = self._gen(VERB_CONFIDENCE_PROMPT.format(question=q), max_tokens=48, stop=["\nQuestion:"])
            raw = gen.text
            parsed = read(raw, structured, confidence_from_json, lambda t: read_verbal_confidence("Answer:" + t),
                          field="confidence", schema_ignored=gen.schema_ignored)
            if parsed.value is None:
                s.note("no confidence number in the reply: treated as 0")
                c, answer = 0.0, parse_verbal_confidence("Answer:" + raw)[1]
            else:
                c, answer = parsed.value
            s.output(raw=raw, answer=answer, confidence=c)
            return c

    def decompose(self, q: str) -> list[str]:
        cfg = self.config
        limit = cfg.max_subquestions
        with step("decompose", question=q) as s:
            structured = use_schema(self.llm, cfg.structured, who="Self-DC decompose")
            if structured:
                # 160 tokens, not 120: room for the JSON list around the sub-questions
                prompt = (DECOMPOSE_CHAIN_JSON_PROMPT.format(question=q, examples=chain_examples(self.demos, True),
                                                             reply=DECOMPOSE_CHAIN_REPLY)
                          if cfg.chain else DECOMPOSE_JSON_PROMPT.format(question=q, reply=DECOMPOSE_REPLY))
                gen = self._gen(prompt, max_tokens=160, schema=decomposition_schema(limit))
            else:
                prompt = (DECOMPOSE_CHAIN_PROMPT.format(question=q, examples=chain_examples(self.demos)) if cfg.chain
                          else DECOMPOSE_PROMPT.format(question=q))
                gen = self._gen(prompt, max_tokens=120, stop=["\nQuestion:", "\n\n\n"])
            raw = gen.text
            parsed = read(raw, structured, lambda o: subquestions_from_json(o, limit),
                          lambda t: read_subquestions(t, limit), field="subquestions", schema_ignored=gen.schema_ignored)
            subs = [x for x in parsed.value or [] if normalize_answer(x) != normalize_answer(q)]
            s.output(raw=raw, subquestions=subs)
            return subs

    @property
    def reader(self) -> GenReadReader:
        """Table 21's reader of both routes: GenRead's (Table 17 step 2, also the paper's
        Retrieve-then-read prompt, Table 16), with Self-DC's sampling settings."""
        cfg = self.config
        return GenReadReader(max_tokens=cfg.max_tokens, temperature=cfg.temperature, top_p=cfg.top_p)

    @property
    def generator(self) -> DocumentGenerator:
        """Table 21's generate step: GenRead's background document, one, with Self-DC's sampling."""
        cfg = self.config
        return DocumentGenerator(max_tokens=cfg.document_tokens, temperature=cfg.temperature, top_p=cfg.top_p)

    def read(self, q: str, passage: str) -> str:
        return self.reader.read(self.llm, q, passage).answer

    def retrieve_then_read(self, q: str) -> tuple[str, list[Passage]]:
        with step("retrieve-then-read", question=q) as s:
            passages = self.retriever.search(q, self.config.k)
            # Table 21 has one ``Passage:``: the top-k passages run on in it, unnumbered
            text = render_passages(passages, numbered=False, max_words=self.config.max_passage_words, separator=" ")
            answer = self.read(q, text or "(no passage found)")
            s.output(passages=[p.id for p in passages], answer=answer)
            return answer, passages

    def generate_then_read(self, q: str) -> tuple[str, list[Passage]]:
        with step("generate-then-read", question=q) as s:
            doc = next(iter(self.generator.generate(self.llm, q)), "")
            answer = self.read(q, doc or "(no document)")
            s.output(document=doc, answer=answer)
            return answer, []

    def combine(self, q: str, subs: list[str], answers: list[str]) -> str:
        with step("combine-sub-qas", question=q) as s:
            sub_qas = "\n".join(f"{sq} {a or '(unknown)'}" for sq, a in zip(subs, answers))
            raw = self._gen(COMBINE_PROMPT.format(question=q, sub_qas=sub_qas), stop=["\n\n", "\nQuestion:"]).text
            answer = extract_answer(raw)[0]
            s.output(raw=raw, answer=answer)
            return answer
