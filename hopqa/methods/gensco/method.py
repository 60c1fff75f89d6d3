"""GenSco — a generator decomposes, a scorer selects the passage sequence (Fazili et al.
2024, Algorithm 1, Eqs. 1-4, Tables 6-9).

Given the question Q and its candidate passages P (the question's own paragraphs in the
distractor setting, or the retriever's top ``k`` in the open setting), a greedy walk down the
passage tree, one level per sub-question::

    for i in 1..max_levels:
        q_i <- G(Table 7: Q, the (sub-question, selected passage) pairs so far)
        stop if q_i is <FIN></FIN> (or empty), or repeats an earlier sub-question      # -max
        stop if NLL_S(Q | P'[:i-1], q_1..q_i) > NLL_S(Q | P'[:i-1], q_1..q_{i-1})   # -stop, Eq. 1, Table 8
        P'[i] <- argmin_p NLL_S(q_i | P'[:i-1] + [p])                                # Eq. 2, Table 9
    answer <- G(Table 6: shots from the training files, Context = P' in selection order, Q)

Two models: the generator ``llm`` (any backend) and the ``scorer`` (any backend with the
``loglikelihood`` capability: the embedded models have it, an OpenAI-compatible server has it
with ``loglikelihood=echo``; default: the generator itself). A scorer that cannot score is an
error when the method is built, not half-way through a batch.

Variants (``variant``; registered as ``gensco-max``, ``gensco-stop``, ``gensco-no-qd``):
``max`` stops on ``<FIN></FIN>``, a repeated sub-question or ``max_levels``; ``stop`` adds the
likelihood criterion of Eq. 1; ``no-qd`` makes no decomposition: it scores every level with Q
itself (Eq. 4) and stops when the best passage was already selected. ``shuffled=true`` shuffles
the selected passages before answering (the Table 5 ablation; seeded by ``seed`` and the
question).

Choices where the paper is silent (each a parameter):
- ``nll``: the per-token **mean** NLL of the continuation (default; sub-questions differ in
  length only across levels, never within one) or the **sum**.
- ``keep_selected`` (default true, as in the paper's tree where every node has k children):
  already-selected passages stay candidates; a passage chosen twice appears once in the
  answer context, at its first position. ``no-qd`` always keeps them (its stop rule needs it).
- ``stop_from_level`` (default 2): Eq. 1 is checked from the second sub-question on. At the
  first level both sides have no context and the "without" side has no decomposition at all,
  so the test would compare against an empty prompt and usually stop before any passage.
- ``k`` (default 20) caps the candidates: every paragraph of MuSiQue (up to 20), 2Wiki (10)
  and Adversarial HotpotQA (4) in the distractor setting.
- Paper settings: ``max_levels`` 5 (2Wiki), shots 2 / 4 / 3 (2Wiki / AdvHotpot / MuSiQue; the
  default ``shots`` is 2), generator at temperature 0.

Structured step (``structured``, ``hopqa.methods.structured``; issue 16): where the backend can
constrain its output to a JSON schema (``auto``) or when asked (``on``), the generator's next
sub-question is asked with ``DECOMPOSE_JSON_PROMPT`` (Table 7, its cue ``Subquestion k:``
replaced by a JSON instruction) under ``SUBQUESTION_SCHEMA`` ``{"subquestion": str}``, the value
``<FIN></FIN>`` ending the decomposition as in the paper; the history above stays the paper's
text. A JSON reply cut short is closed and read, a reply with no JSON object at all goes to
the free-text parser (both ``fallback``); a JSON object without the field, or nothing usable,
is ``failed`` and stops the walk ("empty sub-question"), as an empty JSON sub-question does. With ``off`` (or a backend without
``STRUCTURED``) the prompt is Table 7's, byte for byte, and ``read_subquestion`` records
``direct`` for a bare first line (or ``<FIN></FIN>``), ``fallback`` when it had to strip an
echoed ``Question:`` / ``Subquestion k:`` label, take the ``Subquestion k:`` line under an
echoed question, or cut at a following label, ``failed`` for an empty reply.

Repeated sub-questions (issue 16): sub-questions are compared after removing echoed labels,
case, punctuation and articles (``subquestion_key``). A chat model given Table 7 as one user
message does not continue the cue ``Subquestion k:``; Qwen2.5-1.5B writes a new example's
``Question: ...`` line instead (often an invented question) and, at level 2, copies the
level-1 sub-question the prompt shows it, so GenSco-max stopped on "repeated sub-question"
after one passage. ``repeat_retries`` (default 0: the paper's rule, stop on the first repeat)
re-asks the same prompt up to that many times at ``repeat_temperature`` (0.5, the paper's
Table 11 setting) with seeds ``seed + 1, seed + 2, ...`` and takes the first sub-question that
is new (``<FIN></FIN>`` then ends the walk); only when every retry repeats (or is empty) does the
walk stop on the repeat. Off by default because Algorithm 1 treats a repeat as the end of the
decomposition: retrying overrides that stop, so it is a departure to ask for. The level's trace
records the repeated sub-question and every retry (``retries``: raw, sub-question, seed).

Short answers (``answer``; issue 16): ``paper`` (default) asks Table 6 as written; ``short``
adds "Reply with a short answer of a few words, without explanation." to its instruction (the
request every hopqa reader makes). Given Table 6 as one chat message, Qwen2.5-1.5B answered 11
of its first 20 MuSiQue / HotpotQA questions with a sentence restating the question ("The team
that Anna Benson's husband Kris Benson was on is ..."), which EM and F1 count against it.

Cost per question: one generator call per level plus the answer; ``len(P)`` scorer calls per
level (all candidates of a level are one batch: concurrent where the backend allows, and on
the embedded model the prompt prefix shared by the candidates, the instruction and the
passages already selected, is evaluated once); ``stop`` adds two scorer calls per level.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from hopqa.llm.base import LOGLIKELIHOOD, LLMBase
from hopqa.methods.base import (
    FewShotMethod,
    MethodConfig,
    MethodError,
    Preset,
    Result,
    register,
)
from hopqa.methods.choice import distinct
from hopqa.methods.gensco.prompts import (
    ANSWER_INSTRUCTION,
    ANSWER_INSTRUCTION_ZERO_SHOT,
    ANSWER_PROMPT,
    ANSWER_PROMPT_ZERO_SHOT,
    ANSWER_SHOT,
    CONTEXT_FORMAT,
    DECOMPOSE_INSTRUCTION,
    DECOMPOSE_JSON_PROMPT,
    DECOMPOSE_PROMPT,
    DECOMPOSE_SHOTS,
    END_CLAUSE,
    FIRST_SUBQUESTION_REPLY,
    SCORE_PROMPT,
    SHORT_ANSWER_CLAUSE,
    STOP_PROMPT,
    SUBQUESTION_REPLY,
    SUBQUESTION_SCHEMA,
)
from hopqa.methods.parsing import clean_answer, extract_answer, strip_labels
from hopqa.methods.polar import hold_answer
from hopqa.methods.structured import (
    Parsed,
    StructuredMode,
    direct,
    failed,
    fallback,
    read,
    use_schema,
)
from hopqa.retrieval.base import Retriever
from hopqa.runtime import traced_llm
from hopqa.text import normalize_answer, render_passage, render_passages
from hopqa.trace import Step, step
from hopqa.types import Demo, Passage

_FIN_TAG = re.compile(r"<\s*(?:/\s*)?fin\s*>", re.IGNORECASE)
#: One echoed label ("Question:", "Subquestion 2:", "Sub-question 2:"), for ``strip_labels``.
_ECHO = re.compile(r"\s*(?:sub[^\S\n]*-?[^\S\n]*question|question)\s*(?:\d+\s*)?[:.)-]\s*", re.IGNORECASE)
_NEXT_LABEL = re.compile(r"sub-?(?:context|question)\s*\d+\s*:", re.IGNORECASE)
_QUESTION_ECHO = re.compile(r"^\s*question\s*:", re.IGNORECASE)
_SUBQUESTION_LINE = re.compile(r"^\s*sub[^\S\n]*-?[^\S\n]*question\s*\d+\s*:(.*)$", re.IGNORECASE)


@dataclass
class GenScoConfig(MethodConfig):
    variant: Literal["max", "stop", "no-qd"] = "max"
    shuffled: bool = False
    max_levels: int = 5
    k: int = 20
    nll: Literal["mean", "sum"] = "mean"
    keep_selected: bool = True
    stop_from_level: int = 2
    shots: int = 2
    temperature: float = 0.0
    max_passage_words: int | None = None
    scorer_passage_words: int | None = None
    max_tokens: int = 48
    seed: int = 0
    #: Structured outputs for the structured steps (``hopqa.methods.structured``): ``auto``
    #: where the backend can constrain to a JSON schema, ``on``, or ``off`` (the paper's free text).
    structured: StructuredMode = "auto"
    #: Re-asks of a sub-question that repeats an earlier one before stopping on the repeat (0:
    #: the paper's rule, stop at once); each at ``repeat_temperature`` with its own seed.
    repeat_retries: int = field(default=0, metadata={"range": (0, 10)})
    repeat_temperature: float = field(default=0.5, metadata={"range": (0.0, 2.0), "above": 0.0})
    #: The answer prompt: ``paper`` (Table 6 as written) or ``short`` (Table 6's instruction
    #: asking for a short answer of a few words, without explanation: hopqa's remedy for small
    #: chat models that answer with a sentence restating the question).
    answer: Literal["paper", "short"] = "paper"
    #: Re-asks of a sub-question that restates the question itself (the same words once
    #: normalised, ``subquestion_key``), at ``repeat_temperature`` with seeds ``seed + 1, ...``;
    #: the first that neither restates it nor repeats an earlier sub-question is taken, else the
    #: restatement is kept (the paper's walk goes on with it). 0: the paper's (no re-ask); a
    #: remedy for small models (issue 33).
    restated_retries: int = field(default=0, metadata={"range": (0, 10)})
    #: A "which of A or B" question's answer held to its two candidates (``hopqa.methods.choice``:
    #: two dates compared in code, else the candidate the answer names, else one more call; each
    #: reading the passages the answer was read from, then the question's own candidates).
    #: Not in the paper: a remedy for small models that compare two dates wrongly or answer with
    #: the entity the comparison goes through (issue 33), off by default.
    choice: bool = False
    #: A yes / no question's answer held to yes or no (``hopqa.methods.polar``, reading the passages
    #: the answer was read from, then the question's own candidates: for "the same country" the two
    #: values written and compared in code, else the yes or no the answer opens on, else one more
    #: call). Not in the paper: a remedy for small models that answer "Are both directors from the
    #: same country?" with a nationality, or with a yes whatever the two are (issue 33), off by
    #: default and in no preset (a gain on train yes / no questions, inside the noise on dev).
    polar: bool = False


#: The value of a parsed sub-question that ends the decomposition (the paper's end signal).
FIN = "<FIN></FIN>"


def answer_instruction(paper: str, answer: str) -> str:
    """Table 6's instruction ``paper`` as written (``answer=paper``), or with the short-answer
    request put in its first sentence (``answer=short``): "Answer the question given the context.
    Reply with a short answer of a few words, without explanation. Here are a few examples:"."""
    if answer != "short":
        return paper
    head, dot, tail = paper.partition(".")
    return head + dot + SHORT_ANSWER_CLAUSE + tail


def is_fin(text: str) -> bool:
    """Whether ``text`` ends the decomposition: a ``<FIN>`` / ``</FIN>`` tag anywhere (any case,
    spaces allowed) or nothing but "FIN"."""
    return _FIN_TAG.search(text) is not None or text.strip().lower() == "fin"


def subquestion_key(text: str) -> str:
    """What two sub-questions are compared by for "repeats an earlier sub-question": without
    echoed labels, SQuAD-normalised (case, punctuation, articles, spaces)."""
    return normalize_answer(strip_labels(text, _ECHO)[0])


def read_subquestion(text: str) -> Parsed[str]:
    """The generator's next sub-question (``FIN`` for the end) as a parse record: ``direct`` for
    a first non-empty line that is the sub-question itself or ``<FIN></FIN>``; ``fallback`` when
    a rule had to recover it (an echoed label removed, the ``Subquestion k:`` line under an
    echoed ``Question:`` line, the line cut at a following ``Subcontext k:`` label, "FIN"
    spelled otherwise); ``failed`` for nothing at all (the walk stops: "empty sub-question").

    Small models often start a new example instead of continuing ("Question: <the question
    again>\nSubquestion 1: <a real sub-question>"): an echoed ``Question:`` line gives way to
    the first non-empty ``Subquestion k:`` line after it, if there is one. Linear in the text."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return failed("empty reply")
    rules: list[str] = []
    first = lines[0]
    if _QUESTION_ECHO.match(first) and not is_fin(first):
        for line in lines[1:]:
            m = _SUBQUESTION_LINE.match(line)
            if m and m.group(1).strip() and not is_fin(m.group(1)):
                first = m.group(1)
                rules.append("the Subquestion line under an echoed Question line")
                break
    line, stripped = strip_labels(first, _ECHO)
    if stripped:
        rules.append("echoed label removed")
    if is_fin(line):
        if FIN.lower() not in line.lower().replace(" ", ""):
            rules.append("FIN spelled otherwise")
        return fallback(FIN, "; ".join(rules)) if rules else direct(FIN, FIN)
    cut = _NEXT_LABEL.search(line)
    if cut:
        rules.append("cut at the next label")
    line = (line[: cut.start()] if cut else line).strip()
    if not line:
        return failed("; ".join([*rules, "nothing after the label"]))
    return fallback(line, "; ".join(rules)) if rules else direct(line, "first line")


def parse_subquestion(text: str) -> str | None:
    """The generator's next sub-question (first non-empty line, a repeated ``Subquestion k:``
    prefix removed); ``None`` for ``<FIN></FIN>`` (any spelling) or nothing at all
    (``read_subquestion`` without its parse record)."""
    parsed = read_subquestion(text)
    return None if parsed.value is None or parsed.value == FIN else parsed.value


def subquestion_from_json(obj: dict[str, Any]) -> str | None:
    """The sub-question of ``{"subquestion": ...}``: ``FIN`` for the end signal, "" for an
    empty one, the text (on one line, echoed labels removed) otherwise; None without a string."""
    value = obj.get("subquestion")
    if not isinstance(value, str):
        return None
    text = " ".join(strip_labels(value.strip(), _ECHO)[0].split())
    return FIN if is_fin(text) else text


@register("gensco-max", preset={"variant": "max"},
          doc="GenSco-max: stop on <FIN></FIN>, a repeated sub-question or max_levels.")
@register("gensco-stop", preset={"variant": "stop"},
          doc="GenSco-stop: GenSco-max plus the scorer's likelihood stopping criterion (Eq. 1).")
@register("gensco-no-qd", preset={"variant": "no-qd"},
          doc="GenSco-no-QD: score with the question itself, stop when the best passage repeats (Eq. 4).")
class GenSco(FewShotMethod):
    """Generator decomposes, scorer picks one passage per sub-question (greedy passage sequence).

    One class for the paper's three variants (``config.variant``), registered as the presets
    ``gensco-max``, ``gensco-stop`` and ``gensco-no-qd``; ``name`` follows the variant."""

    Config = GenScoConfig
    config: GenScoConfig
    components = FewShotMethod.components | {"scorer"}
    presets: ClassVar[dict[str, Preset]] = {
        "small-model": Preset(
            {"stop_from_level": 3, "restated_retries": 2, "repeat_retries": 2, "answer": "short"},
            "the walk ended on its first sub-question (a restatement of the question, a repeat of it at level 2, or "
            "Eq. 1 stopping right second hops) and the reader answered that sub-question in a sentence: the "
            "restatement and the repeat are asked again, Eq. 1 may stop from the third level, the answer is short"),
    }
    #: §4.3: the answer prompt's demonstrations come from the evaluated dataset's own training
    #: data, this many (2Wiki 2, AdvHotpot 4, MuSiQue 3); ``hopqa.build`` applies it when it knows
    #: the dataset and ``shots`` is not set; elsewhere ``shots``=2 MuSiQue / 2Wiki ones alternate.
    shots_by_dataset: ClassVar[dict[str, int]] = {"2wikimultihopqa": 2, "adversarial_hotpotqa": 4, "musique": 3}

    def __init__(self, llm: LLMBase, retriever: Retriever, config: GenScoConfig | None = None, *,
                 demos: Sequence[Demo] | None = None, scorer: LLMBase | None = None) -> None:
        super().__init__(llm, retriever, config, demos=demos)
        cfg = self.config
        self.name = f"gensco-{cfg.variant}"  # type: ignore[misc]
        self.scorer = traced_llm(scorer) if scorer is not None else self.llm
        if not self.scorer.supports(LOGLIKELIHOOD):
            hint = self.scorer.capability_hint(LOGLIKELIHOOD)
            raise MethodError(
                f"GenSco's scorer must score given text (the loglikelihood capability) and {self.scorer.name!r} "
                f"cannot{': ' + hint if hint else ''}. Use an embedded model (embedded:smollm2-135m, "
                "embedded:qwen2.5-1.5b) or an OpenAI-compatible completions server with echo support "
                "(openai:MODEL@URL?loglikelihood=echo, e.g. vLLM) as the scorer (--scorer-llm).")

    # -- the scorer's two quantities ---------------------------------------------------------------
    def _nll(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Negative log-likelihood of each continuation after its context (one batch)."""
        scores = self.scorer.map_loglikelihood(pairs)
        return [-(s.mean if self.config.nll == "mean" else s.total) for s in scores]

    def score_passages(self, subquestion: str, selected: list[Passage], candidates: list[Passage]) -> list[float]:
        """Eq. 2 (Table 9): NLL_S(q | P'[:i-1] + [p]) for every candidate p."""
        w = self.config.scorer_passage_words
        head = render_passages(selected, max_words=w, **CONTEXT_FORMAT)
        pairs = [(SCORE_PROMPT.format(context=(head + "\n" if head else "") + render_passage(p, max_words=w)),
                  " " + subquestion)
                 for p in candidates]
        return self._nll(pairs)

    def stop_scores(self, question: str, subquestions: list[str], selected: list[Passage]) -> tuple[float, float]:
        """Eq. 1 (Table 8): (NLL of Q with q_1..q_i, NLL of Q with q_1..q_{i-1}), context P'[:i-1]."""
        context = render_passages(selected, max_words=self.config.scorer_passage_words, **CONTEXT_FORMAT) or "(none)"
        with_q, without_q = (STOP_PROMPT.format(context=context, decomposition=" ".join(qs) or "(none)")
                             for qs in (subquestions, subquestions[:-1]))
        a, b = self._nll([(with_q, " " + question), (without_q, " " + question)])
        return a, b

    # -- the generator's two prompts ------------------------------------------------------------------
    def decompose(self, question: str, subquestions: list[str], selected: list[Passage], *,
                  temperature: float | None = None, seed: int | None = None) -> tuple[str | None, str]:
        """Table 7: the next sub-question and the raw output. The sub-question is ``FIN`` for the
        end of the decomposition and None when nothing usable came (both stop the walk).
        ``temperature`` and ``seed``: a resample (``repeat_retries``); default the config's."""
        cfg = self.config
        history = "".join(f"Subquestion {j}: {q}\nSubcontext {j}: {render_passage(p, max_words=cfg.max_passage_words)}\n"
                          for j, (q, p) in enumerate(zip(subquestions, selected), 1))
        fields = {"instruction": DECOMPOSE_INSTRUCTION, "shots": DECOMPOSE_SHOTS, "question": question,
                  "history": history, "level": len(subquestions) + 1}
        sampling: dict[str, Any] = {"temperature": cfg.temperature if temperature is None else temperature}
        if seed is not None:
            sampling["seed"] = seed
        structured = use_schema(self.llm, cfg.structured, who="GenSco decomposition")
        if structured:
            # 16 tokens more than the free-text call: room for the JSON around the sub-question
            first = not subquestions
            prompt = DECOMPOSE_JSON_PROMPT.format(**fields, end="" if first else END_CLAUSE,
                                                  reply=FIRST_SUBQUESTION_REPLY if first else SUBQUESTION_REPLY)
            gen = self.llm.generate(prompt,
                                    max_tokens=cfg.max_tokens + 16, schema=SUBQUESTION_SCHEMA, **sampling)
        else:
            gen = self.llm.generate(DECOMPOSE_PROMPT.format(**fields), max_tokens=cfg.max_tokens,
                                    stop=["\nSubcontext", "\n\n", "\nQuestion:"], **sampling)
        parsed = read(gen.text, structured, subquestion_from_json, read_subquestion, field="subquestion",
                      schema_ignored=gen.schema_ignored)
        return parsed.value or None, gen.text

    def next_subquestion(self, question: str, subquestions: list[str], selected: list[Passage],
                         s: Step) -> tuple[str | None, str]:
        """Table 7's next sub-question, re-asked while it repeats an earlier one, up to
        ``repeat_retries`` times (module docstring); the stop reason when the walk ends here,
        else "". Records the sub-question (and any retries) on the level step ``s``."""
        cfg = self.config
        q, raw = self.decompose(question, subquestions, selected)
        s.output(raw=raw, subquestion=None if q == FIN else q)
        if q is None:
            return None, "empty sub-question"
        if q == FIN:
            return None, FIN
        seen = {subquestion_key(x) for x in subquestions}
        if cfg.restated_retries and subquestion_key(q) == subquestion_key(question):
            s.output(restated=q)
            new = self.resample(question, subquestions, selected, cfg.restated_retries,
                                seen | {subquestion_key(question)}, "restated_retries", s)
            if new == FIN:
                return None, FIN
            if new is None:
                s.note(f"every one of {cfg.restated_retries} resampled sub-questions restated the question, "
                       "repeated an earlier one or was empty: the restatement is kept")
            else:
                q = new
        if subquestion_key(q) not in seen:
            return q, ""
        if cfg.repeat_retries:
            s.output(repeated=q)
            new = self.resample(question, subquestions, selected, cfg.repeat_retries, seen, "retries", s)
            if new == FIN:
                return None, FIN
            if new is not None:
                return new, ""
            s.note(f"every one of {cfg.repeat_retries} resampled sub-questions repeated an earlier one or was empty")
        return None, "repeated sub-question"

    def resample(self, question: str, subquestions: list[str], selected: list[Passage], count: int,
                 avoid: set[str], record: str, s: Step) -> str | None:
        """The first of ``count`` resampled sub-questions (``repeat_temperature``, seeds
        ``seed + 1, ...``) whose ``subquestion_key`` is not in ``avoid``; ``FIN`` when one ends the
        walk; None when none will do. Each resample is recorded on ``s`` under ``record``."""
        cfg = self.config
        tries: list[dict[str, Any]] = []
        for attempt in range(1, count + 1):
            seed = cfg.seed + attempt
            q, raw = self.decompose(question, subquestions, selected, temperature=cfg.repeat_temperature, seed=seed)
            tries.append({"raw": raw, "subquestion": q, "seed": seed})
            s.output(**{record: tries})
            if q == FIN:
                s.output(subquestion=None)
                return FIN
            if q is not None and subquestion_key(q) not in avoid:
                s.output(subquestion=q)
                return q
        return None

    def read(self, question: str, passages: list[Passage]) -> tuple[str, str, str]:
        """Table 6: (answer, raw output, how it was parsed)."""
        cfg = self.config
        context = render_passages(passages, max_words=cfg.max_passage_words, **CONTEXT_FORMAT) or "(no passage selected)"
        demos = self.demos
        if demos:
            shots = "\n\n".join(ANSWER_SHOT.format(question=d.question, answer=d.answer,
                                                   context=render_passages(d.passages, max_words=cfg.max_passage_words, **CONTEXT_FORMAT))
                                  for d in demos)
            prompt = ANSWER_PROMPT.format(instruction=answer_instruction(ANSWER_INSTRUCTION, cfg.answer),
                                          shots=shots, question=question, context=context)
        else:
            prompt = ANSWER_PROMPT_ZERO_SHOT.format(
                instruction=answer_instruction(ANSWER_INSTRUCTION_ZERO_SHOT, cfg.answer), question=question, context=context)
        raw = self.llm.generate(prompt, max_tokens=32, temperature=cfg.temperature, stop=["\n\n", "\nQuestion:"]).text
        answer, how = extract_answer(raw)
        return clean_answer(answer), raw, how if demos else how + " (zero-shot: no training file for shots)"

    # -- Algorithm 1 -----------------------------------------------------------------------------------
    def run(self, question: str) -> Result:
        cfg = self.config
        with step("candidates", query=question, k=cfg.k) as s:
            candidates = self.retriever.search(question, cfg.k)
            s.output(passages=[{"id": p.id, "title": p.title} for p in candidates])
        selected, _ = self.select(question, candidates)
        with step("answer", question=question) as s:
            context = list({p.id: p for p in reversed(selected)}.values())[::-1]  # first occurrence, in order
            if cfg.shuffled:
                random.Random(f"{cfg.seed}:{question}").shuffle(context)
            answer, raw, how = self.read(question, context)
            s.output(passages=[p.id for p in context], shuffled=cfg.shuffled, raw=raw, answer=answer, parsed_by=how)
            if not context:
                s.note("no passage was selected: the generator answered from its own knowledge")
        # the walk often selects one passage: the question's candidates follow it
        answer = hold_answer(self.llm, question, answer, distinct(context, candidates), choice=cfg.choice,
                             polar=cfg.polar, max_words=cfg.max_passage_words)
        return Result(answer=answer, passages=context)

    def select(self, question: str, candidates: list[Passage]) -> tuple[list[Passage], list[str]]:
        """The greedy passage sequence P' and the sub-questions that chose it."""
        cfg = self.config
        selected: list[Passage] = []
        subquestions: list[str] = []
        reason = f"max_levels ({cfg.max_levels})"
        with step("select", variant=cfg.variant, candidates=len(candidates)) as outer:
            for level in range(1, cfg.max_levels + 1):
                with step("level", level=level) as s:
                    if not candidates:
                        reason = "no candidate passage"
                        break
                    if cfg.variant == "no-qd":
                        q = question
                    else:
                        q, end = self.next_subquestion(question, subquestions, selected, s)
                        if q is None:
                            reason = end
                            s.output(stop=reason)
                            break
                        if cfg.variant == "stop" and level >= cfg.stop_from_level:
                            nll_with, nll_without = self.stop_scores(question, [*subquestions, q], selected)
                            s.output(stop_nll_with=round(nll_with, 4), stop_nll_without=round(nll_without, 4))
                            if nll_with > nll_without:
                                reason = "likelihood (Eq. 1)"
                                s.output(stop=reason)
                                break
                    chosen_ids = {p.id for p in selected}
                    pool = candidates if cfg.keep_selected or cfg.variant == "no-qd" else \
                        [p for p in candidates if p.id not in chosen_ids]
                    if not pool:
                        reason = "every candidate already selected"
                        s.output(stop=reason)
                        break
                    nll = self.score_passages(q, selected, pool)
                    best = min(range(len(pool)), key=lambda i: (nll[i], i))
                    s.output(scores=[{"id": p.id, "title": p.title, "nll": round(v, 4)} for p, v in zip(pool, nll)],
                             chosen=pool[best].id)
                    if cfg.variant == "no-qd" and pool[best].id in chosen_ids:
                        reason = "best passage already selected"
                        s.output(stop=reason)
                        break
                    selected.append(pool[best])
                    subquestions.append(q)
                    s.mark_hop(q, label="sub-question" if cfg.variant != "no-qd" else "question",
                               passages=[pool[best]])
            outer.output(stop_reason=reason, subquestions=subquestions, selected=[p.id for p in selected])
        return selected, subquestions
