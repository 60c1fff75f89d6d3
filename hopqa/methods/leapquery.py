"""LeapQuery (Roy, Shroff, Matta and Liao, "LeapQuery: Enhancing Multi-Hop Question Answering",
2024; §3): sub-questions aimed at the knowledge gaps of the passages so far, self-verified by
majority vote, retrieved, and reranked against the main question.

The loop (§3.1-3.5), with its defaults:

1. Retrieve ``k``=5 passages with the question and rerank them against it: the current top-k.
2. Up to ``max_iter``=3 times:

   - **Query generation** (§3.2): the LLM names the knowledge gaps of the current top-k for
     answering the question, as sub-questions (``GAP_PROMPT``: the facts the answer takes that
     the passages do not state, "None" only if they state every one — a first wording that
     offered "None" whenever "the passages already hold everything needed" got "None" from
     Qwen2.5-1.5B on 5 of 5 MuSiQue questions, so the method never left its first retrieval;
     ``parse_gaps`` reads a numbered or bulleted list, one question a line, or "None": a first
     line "None..." / "Nothing..." / "No gap..." is no gap only when no numbered or bulleted
     sub-question follows it; a number with a colon ("1999: ...") is no list marker and an
     echoed "Question: ...?" line no sub-question); at most ``max_subquestions``=3 kept
     (the paper is silent; a small model can list dozens, each a retrieval). None -> stop:
     "the current set of retrieved [passages] sufficiently addresses the main question".
   - **Redundancy** (the paper's aim "to ... prevent redundancy in data retrieval", §1):
     near-duplicate sub-questions (``near_duplicate``: the same SQuAD-normalised words, or a
     word-set Jaccard similarity of at least ``NEAR_DUPLICATE`` = 0.85) are merged, the first
     kept, before the vote; a sub-question that nearly duplicates the main question or one
     searched in an earlier iteration is dropped before the vote too (recorded as
     ``redundant``): its retrieval would bring nothing new. Only such sub-questions -> stop.
   - **Self-verification** (§3.3): each sub-question gets ``votes``=5 sampled True/False
     judgements (``VERIFY_PROMPT``, temperature ``vote_temperature``=0.7: samples of one
     greedy answer would be identical); it is kept when more than half say True. ``parse_vote``
     reads negations ("Not true", "isn't aligned") as False and an echoed choice ("True or
     False: False") by the answer after it; a vote that reads as neither counts as not True
     (recorded). The votes of every sub-question of an iteration are one batch of requests,
     run concurrently where the backend allows (``LLMBase.map``). No sub-question verified ->
     stop (nothing new to retrieve).
   - **Retrieval and reranking** (§3.4): each verified sub-question retrieves ``l``=3
     passages; their union with the current top-k is reranked against the *main question*
     and cut to the top ``k``. The top-k unchanged -> stop (the next gaps would be the same at
     temperature 0).
3. **Answer** (§3.5) from the final top-k (``READ_PROMPT``, a short answer of at most
   ``max_tokens`` tokens). The answer's passages are that top-k: the evaluation's support
   recall is Recall@5.

Structured outputs (``structured``, ``hopqa.methods.structured``; issue 16): where the backend
can constrain to a JSON schema, the gap list is ``{"stated": str, "missing_facts": [str, ...]}``
(what the passages do state first, so the missing facts can be asked with the names they give;
at most ``max_subquestions``; an empty list is "None"), asked by its own prompt
(``GAP_JSON_PROMPT``: the task of ``GAP_PROMPT`` reworded around the two fields), and each
vote ``{"aligned": bool}``, asked by ``VERIFY_PROMPT``'s question with its cue replaced by a
JSON instruction (``VERIFY_JSON_PROMPT``); ``off`` keeps the free text (the LLM reranker's
replies too). Every gap list and every vote records how it parsed (a free-text vote is
``direct`` when it opens with True / False, ``fallback`` for yes / no, a later True / False, a
negation or an echoed choice, ``failed`` for neither), so the parse rate covers both.

The reranker (``rerank`` option, a ``hopqa.retrieval.rerank`` spec as ``--rerank`` takes). The
method needs a reranker that ranks differently from its retriever: §3.4's is a cross-encoder,
which reads the question and the passage together; the bi-encoder (cosine of MiniLM
embeddings) ranks exactly as dense retrieval with MiniLM does, so behind ``--retriever dense``
the main question's top-k is already the reranker's best k over the whole corpus and no
sub-question's passage can ever enter it: LeapQuery then equals Retrieve-then-Read by
construction. The default, ``DEFAULT_RERANK`` = ``auto``, is resolved when the config is made
(``hopqa.retrieval.rerank.resolve_spec``): a sentence-transformers cross-encoder of
``rerank.CROSS_ENCODERS`` found in the local Hugging Face cache (nothing is downloaded), else
``llm`` (the LLM judging each candidate 0-10: one call per candidate). No cross-encoder weights
install offline here, so here it is ``llm``. The config holds the resolved spec, so the run's
``config.json``, every trace's config and the report say what ran; each ``rerank`` step
names the reranker (e.g. ``llm:qwen2.5-1.5b``). ``hybrid`` (BM25 over the candidates fused with
the bi-encoder's cosine), ``bi-encoder``, ``llm`` and a cross-encoder path or ``OWNER/MODEL``
name choose one; an unknown spec is refused when the method is built (``MethodError``), before
any question. A ``reranker`` component given to the constructor is used as it is (tests).

Prompts: the paper publishes none (Figures 2-3 show their roles only); these are hopqa's,
owned by this module. k, l, n and max_iter are the issue's defaults where the paper gives none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from hopqa.llm.base import GenerationRequest, LLMBase
from hopqa.methods.base import FewShotMethod, MethodConfig, MethodError, Preset, Result, register
from hopqa.methods.demos import demo_bridge, multi_hop
from hopqa.methods.parsing import clean_answer, first_line_after
from hopqa.methods.polar import hold_answer
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
    string_list,
    use_schema,
)
from hopqa.retrieval.base import Retriever
from hopqa.retrieval.rerank import make_reranker, rerank, resolve_spec
from hopqa.text import normalize_answer, render_passages
from hopqa.trace import step
from hopqa.types import Demo, Passage

#: Query generation (§3.2): the knowledge gaps of the current passages, as sub-questions.
GAP_TASK = (
    "Question: {question}\n\nPassages:\n{passages}\n\n"
    "Answering the question takes several facts, one after another. Which of these facts do the passages "
    "above not state? Write each missing fact as a question that can be searched on its own"
)
GAP_PROMPT = (
    GAP_TASK + ", as a numbered list. Write None only if the passages state every fact the answer needs."
    "\n\nMissing facts as questions:"
)
#: ``gaps=bridge`` (issue 33, not the paper's): the hops one at a time. The first hop as a
#: question of its own (``FIRST_HOP_PROMPT``, without passages), its answer read from the
#: current passages (``READ_PROMPT``: the bridge entity), then the one question about that
#: entity the answer needs next (``NEXT_PROMPT``), which is the hop the next iteration reads.
FIRST_HOP_PROMPT = (
    "Question: {question}\n\n"
    "Answering this question takes two or more steps, one after another. Write the first step as a short "
    "question that can be answered on its own.\nFirst question:"
)
NEXT_PROMPT = (
    "Question: {question}\nEarlier question: {hop}\nIts answer: {bridge}\n\n"
    "Write the one question about {bridge} whose answer the question needs next. Name {bridge} in it.\n"
    "Next question:"
)
#: ``gaps=bridge`` with ``shots`` > 0 (issue 33): the two prompts above, shown demonstrations
#: from the shipped train subsets (``hopqa.datasets.few_shot_demos``: gold decompositions,
#: never dev questions). Zero-shot, Qwen2.5-1.5B's "first step" restated the whole question in
#: about half of 30 MuSiQue questions, so the hop's answer was the question's and no next hop
#: followed; a demonstration shows a first step that is one hop (``demo_first_hop``) and a
#: next question that names the hop's answer (``demo_next``). Measured: 15 of those 30 first steps
#: nearly restated the question zero-shot (``near_duplicate``), 1 of 14 with 4 demonstrations.
#: The demonstrations sit under "Examples:" and the question after "Now the question ...": shown
#: them back to back with the question, Qwen2.5-1.5B wrote the first demonstration's question as
#: the first step of 10 of 30 questions (greedy; 0 of 14 such questions with this layout).
FIRST_HOP_DEMO_PROMPT = (
    "Answering a question takes two or more steps, one after another. Write the first step as a short "
    "question that can be answered on its own.\n\nExamples:\n\n{demos}\n\n"
    "Now the question to answer. Write its first step only.\n\nQuestion: {question}\nFirst question:"
)
NEXT_DEMO_PROMPT = (
    "Given a question, an earlier question and its answer, write the one question about that answer whose "
    "answer the question needs next. Name the answer in it.\n\nExamples:\n\n{demos}\n\n"
    "Now the question to answer. Write its next question only.\n\n"
    "Question: {question}\nEarlier question: {hop}\nIts answer: {bridge}\nNext question:"
)
#: Tokens of the first hop's question, of the bridge entity and of the next question.
HOP_TOKENS = 48
BRIDGE_TOKENS = 24
NEXT_TOKENS = 48
#: Self-verification (§3.3): one True/False judgement of a sub-question (the question, then the cue).
VERIFY_QUESTION = (
    "Main question: {question}\nSub-question: {subquestion}\n\n"
    "Is the sub-question aligned with the main question: does answering it fill a gap in the knowledge "
    "needed to answer the main question?"
)
VERIFY_PROMPT = VERIFY_QUESTION + " Answer True or False.\nAnswer:"
#: ``gaps=bridge``: the vote on a sub-question made from a hop's answer is shown that answer
#: (``Hops.known``), without which the question about the bridge entity looks unrelated to the
#: main question ("Who is the father of Henry Baring?" for "Who is the father of Edward
#: Baring's father?").
VERIFY_KNOWN_QUESTION = VERIFY_QUESTION.replace("\nSub-question:", "\nKnown from the passages: {known}\nSub-question:")
VERIFY_KNOWN_PROMPT = VERIFY_KNOWN_QUESTION + " Answer True or False.\nAnswer:"
#: The answer from the final top-k (§3.5).
READ_PROMPT = (
    "Answer the question using the passages below. Reply with a short answer of a few words, "
    "without explanation.\n\n{passages}\n\nQuestion: {question}\nAnswer:"
)
#: The reranker when none is chosen (``hopqa.retrieval.rerank`` spec; module docstring).
DEFAULT_RERANK = "auto"
#: Two sub-questions whose SQuAD-normalised word sets have at least this Jaccard similarity are
#: near-duplicates: one word more or less in a question of 6 or more distinct words (6/7), not
#: one word changed in a question of up to 12 ("the name of the county" vs "the seat of the county").
NEAR_DUPLICATE = 0.85

# -- structured outputs (issue 16): the gap list by its own prompt, the vote's cue replaced by JSON ----
#: The gap list as JSON: the sub-questions (an empty list: no gap, as "None" in free text).
#: With a schema, the model first writes what the passages do state (``stated``, evidence before
#: the decision, as every schema here orders its fields), so that a missing fact can be asked
#: about with the names the passages give (the bridge entity of the next hop).
#: The reply's example shows the shape only: Qwen2.5-1.5B copied a field description given as the
#: example's value ("the facts the answer needs that the passages do state") into 7 of 7 replies.
GAP_JSON_PROMPT = (
    "Question: {question}\n\nPassages:\n{passages}\n\n"
    "Answering the question takes several facts, one after another. Under \"stated\", write the facts the "
    "answer needs that the passages above do state, with the names they give. Under \"missing_facts\", write "
    "each fact the passages do not state as a question that can be searched on its own, using those names; leave "
    "the list empty only if the passages state every fact the answer needs.\n{reply}"
)
GAP_REPLY = json_reply({"stated": "...", "missing_facts": ["...", "..."]})
#: Room for ``stated`` in a structured gap list, in tokens.
STATED_TOKENS = 64
#: A vote as JSON.
VOTE_SCHEMA = object_schema({"aligned": {"type": "boolean"}})
VERIFY_JSON_PROMPT = VERIFY_QUESTION + "\n{reply}"
VERIFY_KNOWN_JSON_PROMPT = VERIFY_KNOWN_QUESTION + "\n{reply}"
VOTE_REPLY = json_reply({"aligned": True}) + " (true or false)"
#: Room for the JSON wrapper of a structured call (keys, quotes, brackets), in tokens.
JSON_TOKENS = 32


def gap_schema(limit: int) -> dict[str, Any]:
    """The gap list's schema: at most ``limit`` sub-questions."""
    return object_schema({"stated": {"type": "string"}, "missing_facts": string_list(limit)})


def gaps_from_json(obj: dict[str, Any], limit: int) -> list[str] | None:
    """The sub-questions of a JSON gap list (``missing_facts``), cleaned and deduplicated as in
    free text, at most ``limit``; None without a list."""
    items = obj.get("missing_facts")
    if not isinstance(items, list):
        return None
    return _distinct(item for item in items if isinstance(item, str))[:limit]


def _distinct(items: Iterable[str]) -> list[str]:
    """``items`` cleaned (markdown emphasis and answer labels stripped), empty ones and
    near-duplicates of an earlier one (``near_duplicate``) dropped, in order: a gap list's
    sub-questions, JSON or free text."""
    out: list[str] = []
    for item in items:
        text = clean_answer(item.strip("*_ "))
        if text and not any(near_duplicate(text, o) for o in out):
            out.append(text)
    return out


def near_duplicate(a: str, b: str) -> bool:
    """Whether two questions ask the same: their SQuAD-normalised word sets are equal or have a
    Jaccard similarity of at least ``NEAR_DUPLICATE``."""
    x, y = set(normalize_answer(a).split()), set(normalize_answer(b).split())
    if x == y:
        return True
    return len(x & y) >= NEAR_DUPLICATE * len(x | y)


def vote_from_json(obj: dict[str, Any]) -> bool | None:
    """A JSON vote's ``aligned`` (a boolean, or the words true / false); None otherwise."""
    value = obj.get("aligned")
    if isinstance(value, bool):
        return value
    return parse_vote(value) if isinstance(value, str) else None


#: A list marker: "1." or "1)" (one or two digits: "1999." and "1999:" are no markers), a bullet,
#: or a "Sub-question 1:" / "Q1:" label.
_ITEM = re.compile(r"^\s*(?:\(?\d{1,2}[.)](?!\d)|[-*\u2022]|sub-?question\s*\d*\s*:|q\d+\s*:)\s*", re.IGNORECASE)
_NONE = re.compile(r"^\W*(none|no (?:knowledge )?gaps?|no sub-?questions?|nothing)\b", re.IGNORECASE)
#: An echo of the prompt's own lines ("Question: ...?"), never a sub-question.
_ECHO = re.compile(r"^\W*(?:main\s+)?question\s*:", re.IGNORECASE)
#: A vote's verdict, the first one found: a negated True ("not true", "isn't aligned", "not
#: really true") is False, a negated False is True, then True / yes and False / no.
_VERDICT = re.compile(
    r"(?P<not_true>(?:\bnot|n't)\s+(?:\w+\s+)?(?:true|aligned)\b)|(?P<not_false>\bnot\s+false\b)"
    r"|(?P<true>\b(?:true|yes)\b)|(?P<false>\b(?:false|no)\b)", re.IGNORECASE)
#: The choice a vote may echo before its answer ("True or False: False", "yes/no - no").
_CHOICE = re.compile(r"\b(?:true\s*(?:or|/)\s*false|yes\s*(?:or|/)\s*no)\b\W*", re.IGNORECASE)


def parse_gaps(text: str, limit: int) -> Parsed[list[str]]:
    """The sub-questions of a gap list, at most ``limit``, near-duplicates merged (``_distinct``).

    ``direct``: numbered items ("1. ...", "1) ..."), or "None" (no gap: an empty list);
    ``fallback``: bullets or "Sub-question 1:" labels, unlabelled lines ending with "?", or a
    list under a first line that says "None" (a "None" line is no gap only when no numbered or
    bulleted item follows it); ``failed``: nothing of the kind (read as no gap: the loop stops).
    Lines that echo the prompt ("Question: ...?") are skipped."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said_none = bool(lines) and bool(_NONE.match(lines[0]))
    found: list[str] = []
    numbered, marked = True, False
    for line in lines[1:] if said_none else lines:
        m = _ITEM.match(line)
        item = line[m.end():].strip() if m else line
        if _ECHO.match(item):
            continue
        if m:
            numbered, marked = numbered and bool(re.match(r"^\s*\(?\d", line)), True
            found.append(item)
        elif line.endswith("?") and not said_none:
            numbered = False
            found.append(line)
    if said_none and not marked:
        return direct([], "none")
    items = _distinct(found)
    if not items:
        return failed("no sub-question")
    kept = items[:limit]
    if said_none:
        return fallback(kept, "a list under None")
    return direct(kept, "numbered list") if numbered else fallback(kept, "bullets or question lines")


def parse_vote(text: str) -> bool | None:
    """The verdict of a vote (``_VERDICT``: True / False, yes / no, a negated True or False,
    the first found) after an echoed choice ("True or False:") is removed; None for neither."""
    m = _VERDICT.search(_CHOICE.sub(" ", text))
    if m is None:
        return None
    return m.lastgroup in ("true", "not_false")


def read_vote(text: str) -> Parsed[bool]:
    """A free-text vote, with how it read: ``direct`` when it opens with True or False (not
    negated, no echoed choice), ``fallback`` otherwise (yes / no, a later True / False, a
    negation, an echoed choice), ``failed`` when there is no verdict (the vote then counts
    as not True)."""
    vote = parse_vote(text)
    if vote is None:
        return failed("neither True nor False")
    if re.match(r"^\W*(true|false)\b", text, re.IGNORECASE) and not _CHOICE.search(text):
        return direct(vote, "True/False")
    return fallback(vote, "yes/no, a later or negated True/False, or an echoed choice")


@dataclass
class Hops:
    """``gaps=bridge``'s hops of one question: the hop questions in order (``asked``), and for
    each sub-question made from a hop's answer, that answer as the vote is shown it (``known``)."""

    asked: list[str] = field(default_factory=list)
    known: dict[str, str] = field(default_factory=dict)


def demo_first_hop(demo: Demo) -> str:
    """A demonstration of ``FIRST_HOP_DEMO_PROMPT``: the question and its first gold step."""
    return f"Question: {demo.question}\nFirst question: {demo.steps[0].question}"


def demo_next(demo: Demo) -> str:
    """A demonstration of ``NEXT_DEMO_PROMPT``: the question, its first gold step with the entity
    its answer names (``demo_bridge``), and the second step."""
    first, second = demo.steps[0], demo.steps[1]
    return (f"Question: {demo.question}\nEarlier question: {first.question}\n"
            f"Its answer: {demo_bridge(first.answer, second.question)}\nNext question: {second.question}")


def _words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, without articles, split at every non-word character
    ("Natalie Wood's sister": natalie, wood, s, sister; SQuAD's normalisation would make "woods")."""
    return [w for w in re.findall(r"[^\W_]+", text.lower()) if w not in ("a", "an", "the")]


@dataclass
class LeapQueryConfig(MethodConfig):
    #: Passages kept (the top-k the loop refines and the answer reads).
    k: int = 5
    #: Passages each verified sub-question retrieves.
    l: int = field(default=3, metadata={"range": (1, 100)})  # the paper's name
    #: Verification votes per sub-question (majority: more than half True).
    votes: int = field(default=5, metadata={"range": (1, 64)})
    vote_temperature: float = field(default=0.7, metadata={"range": (0.0, 2.0)})
    max_iter: int = field(default=3, metadata={"range": (1, 100)})
    max_subquestions: int = 3
    #: The reranker (``hopqa.retrieval.rerank.make_reranker``): ``auto`` (a cached cross-encoder,
    #: else ``llm``; resolved when the config is made, so the config holds what runs), ``llm``,
    #: ``llm-expected`` (the judge's expected rating under the model's probabilities), ``hybrid``
    #: (BM25 over the candidates + MiniLM cosine), ``bi-encoder`` (MiniLM cosine: no use behind
    #: dense retrieval, module docstring), or a cross-encoder model path / name.
    rerank: str = field(default=DEFAULT_RERANK, metadata={"resource": "model"})
    max_passage_words: int = 120
    gap_tokens: int = field(default=128, metadata={"range": (1, 32768)})
    #: Tokens of the answer.
    max_tokens: int = 32
    seed: int = 0
    #: Structured outputs for the gap list, the votes and the LLM reranker
    #: (``hopqa.methods.structured``): ``auto`` (JSON schemas where the backend can), ``on``, or
    #: ``off`` (free text and forgiving parsers).
    structured: StructuredMode = "auto"
    #: How the sub-questions are made: ``missing-facts`` (``GAP_PROMPT`` / ``GAP_JSON_PROMPT``: the
    #: facts the passages do not state) or ``bridge`` (one hop an iteration: the hop's question —
    #: ``FIRST_HOP_PROMPT`` in the first iteration, the previous sub-question after — answered from
    #: the current passages, then ``NEXT_PROMPT``: the question about that answer the question
    #: needs next; the missing facts when the hop has no answer, its answer is a name the question
    #: already holds, or the next question does not name it). ``bridge`` is not the paper's: a
    #: remedy for small models (issue 33).
    gaps: Literal["missing-facts", "bridge"] = "missing-facts"
    #: Demonstrations shown by ``gaps=bridge``'s first-hop and next-question prompts
    #: (``FIRST_HOP_DEMO_PROMPT``, ``NEXT_DEMO_PROMPT``; two-hop or longer gold decompositions of
    #: the shipped train subsets); 0 (the default): zero-shot. Not the paper's (it publishes no
    #: prompt); ``missing-facts`` shows none.
    shots: int = 0
    #: A "which of A or B" question's answer held to its two candidates (``hopqa.methods.choice``:
    #: two dates compared in code, else the candidate the answer names, else one more call; each
    #: reading the top-k). Not the paper's: a remedy for small models that compare two dates
    #: wrongly or answer with the entity the comparison goes through (issue 33), off by default.
    choice: bool = False
    #: A yes / no question's answer held to yes or no (``hopqa.methods.polar``, reading the top-k:
    #: for "the same country" the two values written and compared in code, else the yes or no the
    #: answer opens on, else one more call). Not in the paper: a remedy for small models that answer
    #: "Are both directors from the same country?" with a nationality, or with a yes whatever the
    #: two are (issue 33), off by default and in no preset (a gain on train yes / no questions,
    #: inside the noise on dev).
    polar: bool = False
    #: The order the reader reads the final top-k in: ``rerank`` (§3.4: the reranker's, best
    #: first) or ``question-first`` (``question_first``: those of the top-k that the question's
    #: own retrieval found, in the retriever's order, then those the sub-questions brought, in the
    #: reranker's). Which passages are read is the reranker's either way. Not the paper's: a
    #: remedy for small readers whose answer follows the passages' order (issue 33: on HotpotQA
    #: distractor the hybrid reranker put the question's own supporting paragraphs in another
    #: order and Qwen2.5-1.5B named the other film of a comparison), off by default, on in the
    #: ``small-model`` preset.
    read_order: Literal["rerank", "question-first"] = "rerank"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.rerank = _checked_rerank(self.rerank)

    def update(self, **overrides: Any) -> LeapQueryConfig:
        """As ``MethodConfig.update``, with the ``rerank`` spec checked and ``auto`` resolved."""
        if overrides.get("rerank") is not None:
            overrides = {**overrides, "rerank": _checked_rerank(overrides["rerank"])}
        super().update(**overrides)
        return self


def question_first(top: list[Passage], first: list[Passage]) -> list[Passage]:
    """``read_order=question-first``: the passages of ``top`` that the question's own retrieval
    ``first`` found, in ``first``'s order, then the others in ``top``'s order."""
    rank = {p.id: i for i, p in enumerate(first)}
    own = sorted((p for p in top if p.id in rank), key=lambda p: rank[p.id])
    return own + [p for p in top if p.id not in rank]


def _checked_rerank(spec: Any) -> str:
    """A ``rerank`` spec checked for its form (``MethodError`` naming the accepted values: a
    config with an unknown reranker is refused when it is made, before any model loads), with
    ``auto`` resolved."""
    try:
        return resolve_spec(spec)
    except ValueError as exc:
        raise MethodError(f"rerank={spec}: {exc}") from None


@register("leapquery")
class LeapQuery(FewShotMethod):
    """LeapQuery: sub-questions for the knowledge gaps, verified by vote, reranked against the question."""

    Config = LeapQueryConfig
    config: LeapQueryConfig
    components: ClassVar[frozenset[str]] = FewShotMethod.components | {"reranker"}
    presets: ClassVar[dict[str, Preset]] = {
        "small-model": Preset(
            {"gaps": "bridge", "rerank": "hybrid", "shots": 4, "choice": True, "read_order": "question-first"},
            "the gap questions restated the question or named other passages' entities, never the next hop's: "
            "the hops are taken one at a time, each read from the passages, and the sub-question is asked "
            "about the entity the hop's answer names; zero-shot, half of the first hops restated the question, "
            "so 4 demonstrations of a first hop and a next question are shown; and the LLM reranker gave almost "
            "every passage the same score, so no sub-question's passage entered the top-k: BM25 fused with "
            "MiniLM ranks them; on comparison questions the reader named the wrong one of two dates it could read: "
            "a which-of-two answer is held to the question's candidates, two dates compared in code; and the "
            "hybrid rerank reordered the question's own supporting passages and the reader, whose answer follows "
            "the order, named the other candidate: the question's own passages are read first, in the retriever's order"),
    }

    def __init__(self, llm: LLMBase, retriever: Retriever, config: MethodConfig | None = None, *,
                 reranker: Any = None, demos: Sequence[Demo] | None = None) -> None:
        super().__init__(llm, retriever, config, demos=multi_hop(demos))
        if reranker is None:  # made now: a spec that is unknown or cannot load fails the build, not each question
            spec = self.config.rerank
            try:
                reranker = make_reranker(spec, llm=self.llm, structured=self.config.structured)
            except (ValueError, ImportError, OSError) as exc:
                raise MethodError(f"rerank={spec}: {exc}") from exc
        self.reranker = reranker

    def run(self, question: str) -> Result:
        cfg = self.config
        with step("retrieve", query=question, k=cfg.k) as s:
            s.mark_hop(question, label="retrieve")
            first = self.retriever.search(question, cfg.k)
            top = self.rerank(question, first)
            s.output(passages=[p.id for p in top])
        asked = [question]  # the main question and every sub-question searched
        hops = Hops()  # gaps=bridge: the hops taken
        for it in range(1, cfg.max_iter + 1):
            with step("iteration", iteration=it) as s:
                named = self.gaps(question, top, hops)
                if not named:
                    s.note("no knowledge gap named: stop")
                    break
                subs = [q for q in named if not any(near_duplicate(q, a) for a in asked)]
                if len(subs) < len(named):
                    s.output(redundant=[q for q in named if q not in subs])
                if not subs:
                    s.note("every sub-question restates the question or one already searched: stop")
                    break
                verified = self.verify(question, subs, hops.known)
                if not verified:
                    s.note("no sub-question verified: stop")
                    break
                pool = {p.id: p for p in top}
                asked.extend(verified)
                for sub in verified:
                    with step("retrieve", query=sub, k=cfg.l) as r:
                        r.mark_hop(sub, label="sub-question")
                        hits = self.retriever.search(sub, cfg.l)
                        r.output(passages=[p.id for p in hits])
                    for p in hits:
                        pool.setdefault(p.id, p)
                new_top = self.rerank(question, list(pool.values()))
                changed = [p.id for p in new_top] != [p.id for p in top]
                top = new_top
                if not changed:
                    s.note("the top-k did not change: stop")
                    break
        with step("read", question=question) as s:
            if cfg.read_order == "question-first":
                top = question_first(top, first)
                s.output(order=[p.id for p in top])
            reader = Reader(READ_PROMPT, max_tokens=cfg.max_tokens)
            reading = reader.read(self.llm, question, render_passages(top, max_words=cfg.max_passage_words))
            s.output(raw=reading.raw, answer=reading.answer, parsed_by=reading.parsed_by)
        answer = hold_answer(self.llm, question, reading.answer, top, choice=cfg.choice, polar=cfg.polar,
                             max_words=cfg.max_passage_words)
        return Result(answer=answer, passages=top)

    def gaps(self, question: str, top: list[Passage], hops: Hops | None = None) -> list[str]:
        """Query generation: the sub-questions for the knowledge gaps of ``top`` (``hops``: with
        ``gaps=bridge``, the hops so far, to which the next one is added)."""
        cfg = self.config
        limit = cfg.max_subquestions
        with step("gaps") as s:
            passages = render_passages(top, max_words=cfg.max_passage_words)
            if cfg.gaps == "bridge":
                sub = self.bridge_question(question, passages, s, Hops() if hops is None else hops)
                if sub:
                    s.output(subquestions=[sub], made_by="bridge")
                    return [sub]
            structured = use_schema(self.llm, cfg.structured, who="LeapQuery's gap list")
            if structured:
                gen = self.llm.generate(GAP_JSON_PROMPT.format(question=question, passages=passages, reply=GAP_REPLY),
                                        max_tokens=cfg.gap_tokens + JSON_TOKENS + STATED_TOKENS,
                                        schema=gap_schema(limit))
            else:
                gen = self.llm.generate(GAP_PROMPT.format(question=question, passages=passages),
                                        max_tokens=cfg.gap_tokens, stop=["\n\nQuestion:"])
            parsed = read(gen.text, structured, lambda o: gaps_from_json(o, limit), lambda t: parse_gaps(t, limit),
                          field="gaps", schema_ignored=gen.schema_ignored)
            subs = parsed.value or []
            s.output(raw=gen.text, subquestions=subs)
        return subs

    def bridge_question(self, question: str, passages: str, s: Any, hops: Hops) -> str | None:
        """``gaps=bridge``: the hop's question (the last of ``hops.asked``; the first hop's, asked
        of the LLM, when there is none), its answer from ``passages`` (the bridge entity), then the
        question about it the answer needs next, added to ``hops`` and returned; None (noted) when
        the hop has no answer, its answer is a name ``question`` already holds, or the next
        question does not name it. Recorded on ``s``."""
        if hops.asked:
            hop = hops.asked[-1]
        else:
            prompt = (FIRST_HOP_DEMO_PROMPT.format(demos="\n\n".join(map(demo_first_hop, self.demos)), question=question)
                      if self.demos else FIRST_HOP_PROMPT.format(question=question))
            gen = self.llm.generate(prompt, max_tokens=HOP_TOKENS, temperature=0.0, stop=["\n"])
            hop = " ".join(first_line_after(gen.text, 0).split())
            if not hop:
                s.note("no first step written: the missing facts are asked for")
                return None
            hops.asked.append(hop)
        bridge = Reader(READ_PROMPT, max_tokens=BRIDGE_TOKENS).read(self.llm, hop, passages).answer
        s.output(hop=hop, bridge=bridge)
        words = _words(bridge)
        if not words or " ".join(words) in ("none", "no answer", "unknown"):
            s.note("the hop has no answer in the passages: the missing facts are asked for")
            return None
        if set(words) <= set(_words(question)):
            s.note(f"the hop's answer {bridge!r} is named in the question already: the missing facts are asked for")
            return None
        prompt = (NEXT_DEMO_PROMPT.format(demos="\n\n".join(map(demo_next, self.demos)), question=question, hop=hop,
                                          bridge=bridge)
                  if self.demos else NEXT_PROMPT.format(question=question, hop=hop, bridge=bridge))
        gen = self.llm.generate(prompt, max_tokens=NEXT_TOKENS, temperature=0.0, stop=["\n"])
        sub = " ".join(first_line_after(gen.text, 0).split())
        s.output(bridge_question=sub)
        if not sub or not set(words) <= set(_words(sub)):
            s.note(f"the next question does not name {bridge!r}: the missing facts are asked for")
            return None
        hops.asked.append(sub)
        hops.known[sub] = f'the answer to "{hop}" is {bridge}'
        return sub

    def verify(self, question: str, subs: list[str], known: dict[str, str] | None = None) -> list[str]:
        """Self-verification: ``votes`` sampled judgements per sub-question (one concurrent
        batch), kept on a majority of True. A sub-question in ``known`` (``gaps=bridge``) is
        judged with what it was made from (``VERIFY_KNOWN_PROMPT``)."""
        cfg = self.config
        known = known or {}
        with step("verify", votes=cfg.votes) as s:
            structured = use_schema(self.llm, cfg.structured, who="LeapQuery's votes")
            form = {"max_tokens": 4 + JSON_TOKENS // 2, "schema": VOTE_SCHEMA} if structured else {"max_tokens": 4}
            templates = (VERIFY_JSON_PROMPT, VERIFY_KNOWN_JSON_PROMPT) if structured else (VERIFY_PROMPT,
                                                                                           VERIFY_KNOWN_PROMPT)
            requests = [GenerationRequest.make(templates[sub in known].format(question=question, subquestion=sub,
                                                                              known=known.get(sub), reply=VOTE_REPLY),
                                               n=cfg.votes, temperature=cfg.vote_temperature, seed=cfg.seed, **form)
                        for sub in subs]
            kept: list[str] = []
            tally = []
            for sub, gen in zip(subs, self.llm.map(requests)):
                votes = [read(t, structured, vote_from_json, read_vote, field="vote", step=s,
                              schema_ignored=gen.schema_ignored).value for t in gen.texts]
                true = sum(v is True for v in votes)
                ok = true * 2 > cfg.votes
                tally.append({"subquestion": sub, "votes": [t.strip() for t in gen.texts], "true": true,
                              "unreadable": sum(v is None for v in votes), "kept": ok})
                if ok:
                    kept.append(sub)
            s.output(tally=tally, kept=kept)
        return kept

    def rerank(self, question: str, passages: list[Passage]) -> list[Passage]:
        """``passages`` ordered by the reranker's score against ``question`` (stable), top ``k``."""
        with step("rerank", reranker=getattr(self.reranker, "name", type(self.reranker).__name__),
                  candidates=len(passages)) as s:
            top = rerank(self.reranker, question, passages, self.config.k)
            s.output(kept=[p.id for p in top], scores=[round(p.score or 0.0, 4) for p in top])
        return top
