"""HGOT — Hierarchical Graph of Thoughts (Fang et al. 2024, Algorithm 1).

``traverse(q, d)`` reads like Algorithm 1::

    a_q, CI_q, CTX_q <- probe(q)
    G <- plan(q, CTX_q)                      # dependency DAG of sub-queries (networkx)
    if stop(q, G, d): return a_q, CI_q, CTX_q
    CTX_G <- search(G, d + 1)                # topological order, rewrite, traverse each step
    return infer(q, CTX_q, CTX_G)

- ``probe`` retrieves ``k`` passages (σ(p, 0) = normalised retriever score), samples ``m``
  rationales with the Predict prompt (C.5), scores each thought (ρ, Eq. 1, from ALCE citation
  recall and precision judged by a pluggable NLI judge), votes (Eq. 2), computes CI (Eq. 3)
  and updates every passage's σ (Eqs. 4-8).
- ``plan`` runs Plan (C.1), self-reflect (C.2) and formalize (C.3), and parses the formal
  dependencies into a DAG whose edges only go from lower to higher step numbers (acyclic by
  construction); unparseable dependency text degrades to independent steps, noted in the trace;
  repeated identical steps (small models repeat themselves) are dropped, also noted.
- ``stop``: depth reached (checked before planning, since a plan cannot change that
  outcome: it saves the three plan calls of every leaf), an empty plan, or a single step whose sentence embedding
  (all-MiniLM-L6-v2) has cosine similarity above ``stop_similarity`` with the query.
- ``search`` walks the DAG level by level (``nx.topological_generations``): steps of one level
  do not depend on each other and run concurrently; each is rewritten (C.4) with the answers
  of its in-neighbours, then traversed.
- ``infer`` ranks every passage gathered for the query and its sub-queries by σ, keeps the
  top ``k`` (K = 7 in the paper) and predicts again with ``m`` samples, vote, CI, σ update.

Ablation switches (config): ``self_reflect``, ``formalize``, ``rewrite``, ``citation_quality``
(False: ρ = α for every thought, i.e. plain self-consistency), ``passage_scoring`` (False: σ
stays the retriever score), ``entailment_delta`` (False: δ̂ uses citation markers only, saving
k·statements NLI calls per thought). Defaults are the paper's (α, β, γ = 0.2, 0.4, 0.4;
w = 0.2, 0.55, 0.25; K = 7) except the sample count: m = 3 instead of 20, since every sample is
a full generation on the embedded model (set ``samples=20`` for the paper's setting).

Demonstrations (``demo_source``): ``paper`` (default) uses the paper's own Appendix C examples;
``bootstrap`` takes the demonstrations bootstrapped DSP-style from a training split as in
Appendix D, ready, as the ``demo_set`` argument (made by ``hopqa.bootstrap``, a client of this
method: runs of HGOT on ``bootstrap_examples`` examples of ``bootstrap_dataset`` whose
prediction matches gold, the candidates read from their traces, citation-format and
dependency-format filters, IQR filter on step length; cached on disk and resumable; ``hopqa.build``
runs it when it builds the method) and picks ``num_demos`` per prompt by ``demo_selection``:
``sampling`` (balanced over answer classes, seeded by ``seed``: "HGOT+Sampling") or ``knn``
(nearest questions by sentence embedding: "HGOT+KNN"); see ``demos``. A prompt kind with no
bootstrapped demonstration falls back to the Appendix C ones, noted in the trace. The
``rewrite`` step records the context it showed the model, so its trace holds every Appendix D
candidate.

Structured steps (``structured``, ``hopqa.methods.structured``): where the backend constrains
output to a JSON schema (``auto``, ``on``), Plan and Predict send their Appendix C prompts, same
demonstrations, with a JSON instruction on the line before the closing cue (``Plan:``,
``Rationale: Let's think step by step.``) and ``JSON_EXTRA_TOKENS`` more ``max_tokens``. Plan
(with or without context): ``{"steps": [{"question", "depends_on": [int]}]}`` (at most
``max_steps``), written back as ``Step 1: ... Step 2: ...`` / ``Dependencies: Step 2 depends on
Step 1.`` (``None``), which the trace, self-reflect, formalize, the graph and STOP read as free
text. Predict (``samples`` samples): ``{"statements": [{"text", "citations": [int]}], "answer"}``
(at most 6 statements), written back as the paper's rationale, ``"... [1][3]."`` per statement,
so ``split_statements``, REC / PREC and the ρ-weighted vote work as on free text; citation
numbers naming no passage shown are dropped (noted); an empty answer is a sample without one
(``missing_answer``, on the free-text prompt). A reply without usable JSON is read by the
free-text parser. Every Plan reply and every Predict sample records its parse (``plan``,
``answer``): ``direct`` (the JSON, or the ``Step n:`` / ``Answer:`` format in free text),
``fallback`` (JSON cut short, free text under a schema, loose step headers, an answer from
``missing_answer``'s rule), ``failed`` (no step: empty plan; no answer). Self-reflect, formalize
and rewrite stay free text. ``structured=off`` sends the paper's prompts byte for byte.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import networkx as nx

from hopqa.llm.base import GenerationRequest
from hopqa.methods.base import (
    MethodConfig,
    MethodError,
    Preset,
    Result,
    RetrievingMethod,
    register,
)
from hopqa.methods.hgot.demos import DemoSet, select_balanced, select_knn
from hopqa.methods.hgot.graph import bridge_replacement, build_graph, echoes, parse_dependencies, parse_steps
from hopqa.methods.hgot.prompts import (
    CONTEXT_FORMAT,
    FORMALIZE_PROMPT,
    JSON_EXTRA_TOKENS,
    PLAN_CUE,
    PLAN_DEMOS,
    PLAN_INSTRUCTIONS,
    PLAN_INSTRUCTIONS_NO_CONTEXT,
    PLAN_JSON_EXAMPLE,
    PLAN_PROMPT,
    PLAN_PROMPT_NO_CONTEXT,
    PREDICT_CUE,
    PREDICT_DEMOS,
    PREDICT_INSTRUCTIONS,
    PREDICT_JSON_EXAMPLE,
    PREDICT_PROMPT,
    PREDICT_SCHEMA,
    REFLECT_DEMOS,
    REFLECT_INSTRUCTIONS,
    REFLECT_PROMPT,
    REWRITE_DEMOS,
    REWRITE_INSTRUCTIONS,
    REWRITE_PROMPT,
    STEP_ANSWER_LINE,
    STEP_ANSWERS_HEADER,
    json_prompt,
    markers,
    plan_schema,
    render_plan,
    render_statement,
    without_context,
)
from hopqa.methods.hgot.quality import (
    Thought,
    citation_quality,
    normalize_scores,
    passage_votes,
    split_statements,
    thought_quality,
    update_sigma,
    vote,
)
from hopqa.methods.parsing import extract_answer, strip_labels
from hopqa.methods.polar import hold_answer
from hopqa.methods.structured import (
    Parsed,
    StructuredMode,
    direct,
    failed,
    fallback,
    loads_object,
    read,
    use_schema,
)
from hopqa.text import normalize_answer, render_passage, render_passages
from hopqa.trace import (
    PARSE_DIRECT,
    PARSE_FAILED,
    PARSE_FALLBACK,
    current_step,
    step,
    submit,
)
from hopqa.types import Passage

_ANSWER_LABEL = re.compile(r"(?<![a-z])answer[ \t*]*:", re.IGNORECASE)
_COMPLETION_STOPS = ["\n\n", "\n---", "\nContext:"]
_THINK_STEP = re.compile(r"^\s*let's think step by step\.?\s*", re.IGNORECASE)
_ECHOED_FIELD = re.compile(r"\s*(question|rationale|context)\s*:", re.IGNORECASE)
_BARE_MARKER = re.compile(r"(so )?the (final )?answer( is)?\s*:?|answer\s*:?", re.IGNORECASE)


@dataclass
class HGOTConfig(MethodConfig):
    depth: int = 2
    k: int = 7
    probe_k: int = 3
    samples: int = 3
    temperature: float = 0.7
    alpha: float = 0.2
    beta: float = 0.4
    gamma: float = 0.4
    w1: float = 0.2
    w2: float = 0.55
    w3: float = 0.25
    stop_similarity: float = 0.7
    plan_context_sigma: float | None = 0.9
    parent_weight: float = 0.9
    pool_duplicates: Literal["mean", "max"] = "mean"
    max_steps: int = 5
    self_reflect: bool = True
    formalize: bool = True
    rewrite: bool = True
    citation_quality: bool = True
    passage_scoring: bool = True
    entailment_delta: bool = True
    max_passage_words: int | None = None
    max_tokens: int = 160
    missing_answer: Literal["dsp", "follow-up", "rationale"] = "dsp"
    demo_source: Literal["paper", "bootstrap"] = "paper"
    demo_selection: Literal["sampling", "knn"] = "sampling"
    num_demos: int = 2
    #: The training split bootstrapping runs on: a registered dataset ``NAME:SPLIT`` or a question file.
    bootstrap_dataset: str = field(default="hotpotqa:train", metadata={"resource": "dataset"})
    bootstrap_examples: int = 20
    bootstrap_mode: Literal["official", "every-call"] = "official"
    #: Where bootstrapped runs are kept (empty: ``<home>/demos``).
    demo_cache: str = field(default="", metadata={"resource": "directory"})
    seed: int = 0
    #: Structured outputs for the structured steps (``hopqa.methods.structured``): ``auto``
    #: where the backend can constrain to a JSON schema, ``on``, or ``off`` (the paper's free text).
    structured: StructuredMode = "auto"
    #: INFER's Predict also reads the plan's steps as traversed with their answers, after the
    #: passages (``STEP_ANSWERS_HEADER``). Not in the paper, whose final Predict reads only the
    #: σ-ranked passages: a departure for small models (issue 33), off by default.
    step_answers: bool = False
    #: When self-reflection and formalization leave no usable dependency between two or more
    #: steps, PLAN's own ``Dependencies:`` line is read instead (noted in the trace). Not in the
    #: paper, whose reflected text replaces the draft's: a departure for small models (issue 33;
    #: Qwen2.5-1.5B's self-reflection turned "Step 2 depends on Step 1" into "Step 1 depends on
    #: Step 2", a backward edge that is dropped, so step 2 was never rewritten with step 1's
    #: answer), off by default, on in the ``small-model`` preset.
    draft_dependencies: bool = False
    #: A REWRITE that leaves its step as it was, or that copies the question of one of the step's
    #: in-neighbours (the same words, case and punctuation aside), is replaced by the step with
    #: the in-neighbours' answers added in brackets, so that the step searches and reads with
    #: them: "What is the seat of the county where Van Hook Township is located? (Mountrail
    #: County, North Dakota)". Not in the paper, whose C.4 demonstrations keep the earlier answer
    #: out of the rewrite too: a departure for small models (issue 33; Qwen2.5-1.5B copied the
    #: step, which then retrieved the first hop's passages again, and in 11 of 45 rewrites copied
    #: the in-neighbour's question, which then asked the first hop again), off by default, on in
    #: the ``small-model`` preset.
    rewrite_answers: bool = False
    #: INFER's answer, when it names the answer of a step that another step depends on (a
    #: bridge: the chain's intermediate entity, which the later step was rewritten with), is
    #: replaced by the answer of the chain's last step (``graph.bridge_replacement``: the one
    #: answer of the bridge's descendants without successors, a yes / no or a bridge's answer
    #: aside; none or two different: INFER's answer is kept), noted in the trace. Not in the
    #: paper, whose INFER answers with its own vote: a departure for small models (issue 33;
    #: Qwen2.5-1.5B's INFER answered with the first hop's entity, the man where his employer
    #: was asked, the woman's husband where her spouse was, after the steps had found both), off
    #: by default; in the ``small-model`` preset from 2026-12-02 to 2026-12-06, dropped from it
    #: when measured (HotpotQA distractor, 30 questions: it changed 4 answers, each for the worse).
    bridge_guard: bool = False
    #: An answer named in its own question (``graph.echoes``: "Charles Baring" for "Who is the
    #: father of Charles Baring?", the first hop's entity for a step rewritten with it) does not
    #: vote while another sample's answer does (Eqs. 2-3 and the passage votes over the other
    #: samples; when every sample echoes, the vote is as usual, noted), and a last step whose
    #: answer still echoes its question is not one ``bridge_guard`` may take (INFER still reads
    #: it among the steps: left out, INFER lost the chain's last hop). Comparisons naming their
    #: candidates and yes / no answers never echo. Not in the paper, whose vote counts every
    #: answer: a departure for small
    #: models (issue 33; Qwen2.5-1.5B's steps answered with the entity their question named, so
    #: the chain's last step gave back the first hop's answer), off by default, on in the
    #: ``small-model`` preset.
    echo_guard: bool = False
    #: A "which of A or B" question's answer held to its two candidates (``hopqa.methods.choice``:
    #: two dates compared in code, else the candidate the answer names, else one more call; each
    #: reading the σ-ranked passages of the final Predict).
    #: Not in the paper: a remedy for small models that compare two dates wrongly or answer with
    #: the entity the comparison goes through (issue 33), off by default, on in the
    #: ``small-model`` preset (it acts after INFER, so a run of the preset also gives the preset
    #: without it: each answer before its ``choice`` step).
    choice: bool = False
    #: A yes / no question's answer held to yes or no (``hopqa.methods.polar``, reading the final
    #: Predict's σ-ranked passages: for "the same country" the two values written and compared in
    #: code, else the yes or no the answer opens on, else one more call). Not in the paper: a remedy
    #: for small models that answer "Are both directors from the same country?" with a nationality,
    #: or with a yes whatever the two are (issue 33), off by default and in no preset (a gain on
    #: train yes / no questions, inside the noise on dev).
    polar: bool = False


#: Rewrite's field label, which the prompt ends with and a small model writes again (``strip_labels``).
_REWRITE_LABEL = re.compile(r"\s*rewrite\s*:\s*", re.IGNORECASE)


def _words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, without punctuation (a rewrite that only changed those changed nothing)."""
    return re.findall(r"\w+", text.lower())


@dataclass
class Scored:
    """A passage in a context with its score σ."""

    passage: Passage
    sigma: float


@dataclass
class Node:
    """The outcome of probing / inferring one query: answer, confidence, scored context."""

    answer: str
    ci: float
    context: list[Scored] = field(default_factory=list)
    #: The query the node answers (a plan step as traversed: rewritten or as planned).
    query: str = ""


#: ``plan_context_sigma=None`` (hopqa's earlier choice): the Plan prompt shows the probe's first
#: three passages in retrieval order, each cut to this many words.
PLAN_CONTEXT_PASSAGES, PLAN_CONTEXT_WORDS = 3, 40


def plan_context(context: list[Scored], threshold: float | None) -> list[Scored]:
    """The passages the Plan prompt shows: those whose updated σ is above ``threshold``, highest
    first (the official code, ``B[0]`` = 0.9; none: the prompt without context), or with
    ``threshold=None`` the first three in retrieval order."""
    if threshold is None:
        return context[:PLAN_CONTEXT_PASSAGES]
    return sorted((x for x in context if x.sigma > threshold), key=lambda x: -x.sigma)


@dataclass(frozen=True)
class PlanDraft:
    """The Plan's reply in the paper's text form (C.1): ``text`` (``Step 1: ... Step 2: ...`` and
    its ``Dependencies:`` line), the step questions and the dependency text; ``copied``: JSON
    steps dropped for copying the instruction's example (``copies_plan_example``)."""

    text: str
    steps: list[str]
    dependencies: str
    copied: int = 0


#: A step header as the Plan format writes it ("Step 2:"); parse_steps also takes looser ones.
_PLAN_HEADER = re.compile(r"\bstep\s*\d+\s*:", re.IGNORECASE)


def plan_from_text(text: str, max_steps: int) -> PlanDraft:
    """A free-text Plan reply: its steps (``parse_steps``) and the text after ``Dependencies:``."""
    m = re.search(r"dependencies\s*:\s*(.*)", text, re.IGNORECASE | re.DOTALL)
    return PlanDraft(text, parse_steps(text, max_steps), m.group(1).strip() if m else "")


def read_plan_text(text: str, max_steps: int) -> Parsed[PlanDraft]:
    """Parse status of a free-text plan: ``direct`` when its steps have the format's
    ``Step n:`` headers, ``fallback`` when only looser ones ("Step 2." / "Step 2)") gave them,
    ``failed`` when there is no step (the documented default: an empty plan, so STOP)."""
    draft = plan_from_text(text, max_steps)
    if not draft.steps:
        return failed("no 'Step n:' in the plan: empty plan")
    if len(_PLAN_HEADER.findall(text)) >= len(draft.steps):
        return direct(draft, "Step n: headers")
    return fallback(draft, "loose step headers")


#: The words that name ``PREDICT_JSON_EXAMPLE``'s answer, SQuAD-normalised.
_PREDICT_EXAMPLE_PHRASE = "short factoid answer"


def copies_the_example(answer: str) -> bool:
    """Whether a structured Predict answer is the JSON instruction's own placeholder
    (``PREDICT_JSON_EXAMPLE``'s answer, "a short factoid answer, often between 1 and 5 words",
    after SQuAD normalisation), which Qwen2.5-1.5B wrote back in 2 of 174 HotpotQA samples, or
    an answer that names it anywhere (the words "short factoid answer", which no real answer
    holds): SmolLM2-135M's variants, "A short factoid answer, often between 1 and 3 words", "an
    example of a short factoid answer, ...", "The statement is a short factoid answer, ..." (9
    of its 20 MuSiQue answers)."""
    if not answer:
        return False
    return f" {_PREDICT_EXAMPLE_PHRASE} " in f" {normalize_answer(answer)} "


#: The questions of ``PLAN_JSON_EXAMPLE`` ("Step 1 as a standalone search question?", ...),
#: normalised: a plan step that copies one is no step (Qwen2.5-1.5B wrote one back in 4 of 105
#: plan steps on MuSiQue and HotpotQA, and HGOT then searched for it).
_PLAN_EXAMPLE_KEYS = frozenset(normalize_answer(step["question"]) for step in PLAN_JSON_EXAMPLE["steps"])


def copies_plan_example(question: str) -> bool:
    """Whether a JSON plan step is one of the instruction's example steps."""
    return normalize_answer(question) in _PLAN_EXAMPLE_KEYS


def plan_from_json(obj: dict[str, Any], max_steps: int) -> PlanDraft | None:
    """A JSON plan (``plan_schema``) in the paper's text form (``render_plan``): the first
    ``max_steps`` non-empty questions, whitespace collapsed, each with its integer
    ``depends_on`` (renumbered when an empty question, or one copying the instruction's example
    steps, ``copies_plan_example``, was dropped before it); None when ``steps`` is not a list.
    ``{"steps": []}`` is the model's own empty plan."""
    items = obj.get("steps")
    if not isinstance(items, list):
        return None
    questions: list[str] = []
    raw_deps: list[list[int]] = []
    number: dict[int, int] = {}  # position in the JSON list (1-based) -> step number
    copied = 0
    for pos, item in enumerate(items, 1):
        if isinstance(item, str):
            item = {"question": item}
        if not isinstance(item, dict) or len(questions) == max_steps:
            continue
        q = " ".join(str(item.get("question") or "").split())
        if copies_plan_example(q):
            copied += 1
            continue
        if not q:
            continue
        number[pos] = len(questions) + 1
        questions.append(q)
        deps = item.get("depends_on")
        raw_deps.append([d for d in deps if isinstance(d, int) and not isinstance(d, bool)]
                        if isinstance(deps, list) else [])
    # a number naming a dropped position is dropped; one beyond the list is kept for parse_dependencies to note
    depends_on = [list(dict.fromkeys(number.get(d, d) for d in deps if d in number or not 1 <= d <= len(items)))
                  for deps in raw_deps]
    text, dependencies = render_plan(questions, depends_on)
    return PlanDraft(text, questions, dependencies, copied)


def pool_passages(own: list[Scored], subs: list[list[Scored]], parent_weight: float,
                  duplicates: str) -> list[Scored]:
    """INFER's candidates: the query's own passages with σ × ``parent_weight`` (the official
    code's ``B[2]`` = 0.9, which favours the sub-queries' evidence), then each sub-query's, a
    passage met more than once merged at the ``mean`` (official) or ``max`` of its σ, in order
    of first appearance."""
    seen: dict[str, list[Scored]] = {}
    for x in [*(Scored(x.passage, x.sigma * parent_weight) for x in own), *(x for ctx in subs for x in ctx)]:
        seen.setdefault(x.passage.id, []).append(x)
    merge = max if duplicates == "max" else (lambda v: sum(v) / len(v))
    return [Scored(group[0].passage, merge([x.sigma for x in group])) for group in seen.values()]


# -- the method ------------------------------------------------------------------------------------
@register("hgot")
class HGOT(RetrievingMethod):
    """Hierarchical Graph of Thoughts: probe, plan a DAG, search it recursively, infer."""

    Config = HGOTConfig
    config: HGOTConfig
    presets: ClassVar[dict[str, Preset]] = {
        "small-model": Preset(
            {"step_answers": True, "draft_dependencies": True, "rewrite_answers": True, "choice": True},
            "INFER's Predict reads the steps' answers: the steps find the intermediate "
            "answers, the final Predict on passages alone missed them; and PLAN's own dependencies "
            "are kept when self-reflection leaves none usable: the small model's reflection reversed "
            "them, so a later step was never rewritten with an earlier one's answer; and a rewrite that "
            "copies its step (or an earlier step's question) gets the earlier answers added: the small model "
            "copied them, so the step searched for the first hop again; and a comparison's answer is held "
            "to the two candidates it names, their dates compared in code: small models answered with the "
            "entity the comparison goes through or compared two dates wrongly"),
    }

    components = RetrievingMethod.components | {"judge", "embedder", "demo_set"}

    def __init__(self, llm: Any, retriever: Any, config: HGOTConfig | None = None, *,
                 judge: Any = None, embedder: Any = None, demo_set: DemoSet | None = None) -> None:
        super().__init__(llm, retriever, config)
        from hopqa.nli import LLMJudge

        self.judge = judge if judge is not None else LLMJudge(self.llm)
        self._embedder = embedder
        cfg = self.config
        if cfg.demo_source == "bootstrap" and demo_set is None:
            raise MethodError("HGOT with demo_source=bootstrap takes its bootstrapped demonstrations ready: build it "
                              "with hopqa.build, or pass demo_set=hopqa.bootstrap.bootstrap_hgot(...).demo_set")
        self.demo_set = demo_set if cfg.demo_source == "bootstrap" else None

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from hopqa.embed import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    @property
    def stop_embedder(self) -> Any:
        """STOP's sentence model: the given ``embedder``, else the official code's
        bert-base-nli-mean-tokens when present, else MiniLM (``hopqa.embed.stop_embedder``)."""
        if self._embedder is not None:
            return self._embedder
        from hopqa.embed import stop_embedder

        return stop_embedder()

    def run(self, question: str) -> Result:
        if self.demo_set is not None:
            with step("demonstrations", source=self.config.bootstrap_dataset, selection=self.config.demo_selection) as s:
                ds = self.demo_set
                s.output(predict=len(ds.predict), plan=len(ds.plan), rewrite=len(ds.rewrite), **ds.stats)
        node = self.traverse(question, 0)
        passages = [s.passage for s in node.context]
        cfg = self.config
        answer = hold_answer(self.llm, question, node.answer, passages, choice=cfg.choice, polar=cfg.polar,
                             max_words=cfg.max_passage_words)
        return Result(answer=answer, passages=passages)

    # -- demonstrations (Appendix D) ---------------------------------------------------------------
    def demos(self, kind: str, question: str) -> list[str]:
        """Rendered demonstrations for one prompt (``predict``, ``plan``, ``reflect``, ``rewrite``)."""
        paper = {"predict": PREDICT_DEMOS, "plan": PLAN_DEMOS, "reflect": REFLECT_DEMOS, "rewrite": REWRITE_DEMOS}[kind]
        ds = self.demo_set
        if ds is None:
            return paper
        pool: list[Any] = {"predict": ds.predict, "plan": ds.plan, "reflect": ds.plan, "rewrite": ds.rewrite}[kind]
        if not pool:
            if (s := current_step()) is not None:
                s.note(f"no bootstrapped {kind} demonstration: the paper's Appendix C examples are used")
            return paper
        n = self.config.num_demos
        if self.config.demo_selection == "knn":
            chosen = select_knn(pool, question, n, self.embedder)
        else:
            chosen = select_balanced(pool, n, self.config.seed)
        return [d.render_reflect() if kind == "reflect" else d.render() for d in chosen]

    # -- Algorithm 1 ---------------------------------------------------------------------------
    def traverse(self, q: str, d: int) -> Node:
        with step("traverse", query=q, depth=d) as s:
            if d > 0:  # a plan step: one hop of the reasoning (its answer is set below)
                s.mark_hop(q, label=f"step, depth {d}")
            probed = self.probe(q)
            if d >= self.config.depth:  # STOP by depth does not look at the plan: skip planning
                self.stop(q, nx.DiGraph(), d)
                node, stopped = probed, True
            else:
                graph = self.plan(q, probed.context)
                stopped = self.stop(q, graph, d)
                node = probed if stopped else self.infer(q, probed.context, self.search(graph, d + 1), graph)
            s.output(answer=node.answer, ci=node.ci, stopped=stopped)
            if d > 0:
                s.mark_hop(q, node.answer)
            return node

    def search(self, graph: nx.DiGraph, d: int) -> list[Node]:
        """Traverse the plan's steps in topological order; a level's steps run concurrently."""
        answers: dict[int, str] = {}
        asked: dict[int, str] = {}  # each step as traversed: rewritten or as planned
        nodes: dict[int, Node] = {}
        with step("search", depth=d, levels=[sorted(g) for g in nx.topological_generations(graph)]):
            for level in nx.topological_generations(graph):
                level = sorted(level)

                def visit(i: int) -> tuple[int, Node]:
                    q = graph.nodes[i]["question"]
                    preds = sorted(graph.predecessors(i))
                    if preds and self.config.rewrite:
                        q = self.rewrite(graph, i, preds, answers, asked)
                    asked[i] = q
                    return i, self.traverse(q, d)

                if len(level) == 1:
                    done = [visit(level[0])]
                else:
                    with ThreadPoolExecutor(max_workers=min(len(level), max(1, self.llm.max_concurrency))) as pool:
                        done = [f.result() for f in [submit(pool, visit, i) for i in level]]
                for i, node in done:
                    nodes[i] = node
                    answers[i] = node.answer
        return [nodes[i] for i in sorted(nodes)]

    # -- PROBE / INFER ---------------------------------------------------------------------------
    def probe(self, q: str) -> Node:
        with step("probe", query=q) as s:
            hits = self.retriever.search(q, self.config.probe_k)
            context = [Scored(p, sigma) for p, sigma in zip(hits, normalize_scores([p.score for p in hits]))]
            node = self.predict(q, context, s)
            return node

    def infer(self, q: str, own: list[Scored], sub_nodes: list[Node], graph: nx.DiGraph | None = None) -> Node:
        """Pool the query's passages (σ × ``parent_weight``) with every sub-query's, merge
        duplicates (``pool_duplicates``: their mean σ, as the official code; or the max), keep
        the top ``k`` by σ (ties: first seen, the query's own first) and predict again.
        ``sub_nodes``: the nodes of ``graph``'s steps in step order (``bridge_guard`` reads both)."""
        cfg = self.config
        with step("infer", query=q) as s:
            pooled = pool_passages(own, [n.context for n in sub_nodes], cfg.parent_weight, cfg.pool_duplicates)
            top = sorted(pooled, key=lambda x: -x.sigma)[: cfg.k]
            s.output(candidates=len(pooled), selected=[{"id": x.passage.id, "sigma": round(x.sigma, 4)} for x in top])
            steps = [(n.query, n.answer) for n in sub_nodes if n.query and n.answer] if cfg.step_answers else []
            if steps:
                s.output(step_answers=[{"question": q_, "answer": a} for q_, a in steps])
            node = self.predict(q, top, s, steps=steps)
            if cfg.bridge_guard and graph is not None:
                node = self.guard_bridge(node, graph, sub_nodes, s, cfg.echo_guard)
            return node

    @staticmethod
    def guard_bridge(node: Node, graph: nx.DiGraph, sub_nodes: list[Node], s: Any, echo_guard: bool = False) -> Node:
        """``bridge_guard``: INFER's ``node`` with the chain's last answer when its answer names a
        bridge step's (``bridge_replacement``), noted and recorded on ``s`` (``bridge_guard``);
        with ``echo_guard``, a last step's answer named in its own question is not taken."""
        answers = {i: n.answer for i, n in zip(sorted(graph.nodes), sub_nodes)}
        if echo_guard:  # a bridge's answer stays: INFER's naming it is what the guard looks for
            answers = {i: "" if graph.out_degree(i) == 0 and echoes(a, n.query) else a
                       for (i, a), n in zip(answers.items(), sub_nodes)}
        hit = bridge_replacement(node.answer, graph, answers)
        if hit is None:
            return node
        bridge, last, new = hit
        s.output(bridge_guard={"answer": node.answer, "bridge_step": bridge, "last_step": last, "replaced_by": new})
        if last is None:
            s.note(f"the answer is Step {bridge}'s, a step another depends on, and the last steps give no single "
                   "other answer: kept (bridge_guard)")
            return node
        s.note(f"the answer {node.answer!r} is Step {bridge}'s, a step another depends on: replaced by the last "
               f"step's answer, Step {last}'s {new!r} (bridge_guard)")
        return Node(answer=new, ci=node.ci, context=node.context, query=node.query)

    def predict(self, q: str, context: list[Scored], s: Any, steps: list[tuple[str, str]] | None = None) -> Node:
        """Predict with m samples, score thoughts, vote, CI, and update σ (shared by probe and
        infer); ``steps``: the plan's steps and their answers, shown after the passages
        (``step_answers``)."""
        cfg = self.config
        # what the NLI judge reads: each passage exactly as the model was shown it
        texts = [render_passage(x.passage, max_words=cfg.max_passage_words) for x in context]
        ctx = render_passages([x.passage for x in context], max_words=cfg.max_passage_words, **CONTEXT_FORMAT)
        if steps:
            ctx = (ctx + "\n" if ctx else "") + STEP_ANSWERS_HEADER + "\n" + "\n".join(
                STEP_ANSWER_LINE.format(question=sq, answer=sa) for sq, sa in steps)
        prompt = PREDICT_PROMPT.format(instructions=PREDICT_INSTRUCTIONS, demos="\n\n---\n\n".join(self.demos("predict", q)),
                                       context=ctx or "(no passages)", question=q)
        thoughts = self.sample_thoughts(prompt, len(context), s)
        entails = self.judge.entails if cfg.citation_quality or cfg.entailment_delta else None
        for t in thoughts:
            if cfg.citation_quality and entails is not None:
                t.rec, t.prec = citation_quality(t.statements, texts, entails)
            t.rho = thought_quality(t.rec, t.prec, cfg.alpha, cfg.beta if cfg.citation_quality else 0.0,
                                    cfg.gamma if cfg.citation_quality else 0.0)
        voting = self.echo_filter(thoughts, q, s) if cfg.echo_guard else thoughts
        answer, ci, votes = vote(voting)
        before = [round(x.sigma, 4) for x in context]
        if cfg.passage_scoring and context:
            voters = [t for t in voting if normalize_answer(t.answer)]  # official: empty answers do not count
            nu_bar = passage_votes(voters, texts, self.judge.entails if cfg.entailment_delta else None)
            context = [Scored(x.passage, update_sigma(x.sigma, nb, ci, (cfg.w1, cfg.w2, cfg.w3)))
                       for x, nb in zip(context, nu_bar)]
        else:
            nu_bar = []
        if not answer:
            s.note("no sample gave a parseable answer")
        s.output(samples=[t.to_dict() for t in thoughts], votes=votes, answer=answer, ci=round(ci, 4),
                 passages=[x.passage.id for x in context], sigma_before=before,
                 sigma_after=[round(x.sigma, 4) for x in context], nu_bar=[round(v, 4) for v in nu_bar])
        return Node(answer=answer, ci=ci, context=context, query=q)

    @staticmethod
    def echo_filter(thoughts: list[Thought], q: str, s: Any) -> list[Thought]:
        """``echo_guard``: the samples that vote on ``q``, those whose answer ``q`` itself names
        (``graph.echoes``) left out while another sample has an answer; all of them when every
        answer echoes. Recorded on ``s`` (``echo_guard``: the echoed answers, whether they voted)."""
        echoed = [t for t in thoughts if echoes(t.answer, q)]
        if not echoed:
            return thoughts
        others = [t for t in thoughts if not any(t is e for e in echoed) and normalize_answer(t.answer)]
        s.output(echo_guard={"echoed": [t.answer for t in echoed], "voted": not others})
        if not others:
            s.note("every sample's answer is named in the question: they vote as usual (echo_guard)")
            return thoughts
        s.note(f"{len(echoed)} sample answer(s) named in the question do not vote (echo_guard)")
        return others

    def sample_thoughts(self, prompt: str, n_passages: int, s: Any) -> list[Thought]:
        """The ``samples`` Predict samples that vote, each parse recorded on ``s`` (field
        ``answer``).

        Structured: the same prompt with the JSON instruction before its ``Rationale:`` cue and
        ``PREDICT_SCHEMA`` (statements with their citation numbers, then the answer); each
        statement is written back as the paper's rationale, markers before its period
        (``thought_from_json``), so ``split_statements`` and REC / PREC read it as free text;
        citation numbers outside the passages shown are dropped (noted). A reply without usable
        JSON is read as free text. Free text: ``parse_thought``.

        Samples without an answer (an empty ``answer`` under the schema, or the instruction's
        example answer copied back, ``copies_the_example``; no ``Answer:`` label in free text) go
        through ``complete_thoughts`` (``missing_answer``, on the paper's free-text prompt). Then each sample's parse is recorded, once its fate is known: ``direct`` when the
        answer came as asked (the JSON's ``answer``, the ``Answer:`` label), ``fallback`` when
        ``missing_answer``'s rule gave it (or, under the schema, the JSON was cut short or the
        answer came from free text), ``failed`` when the sample has no answer (dropped by DSP's
        rule included)."""
        cfg = self.config
        stop = ["\n\n---", "\nContext:", "\nQuestion:"]
        temperature = cfg.temperature if cfg.samples > 1 else 0.0
        structured = use_schema(self.llm, cfg.structured, who="HGOT predict")
        if structured:  # JSON_EXTRA_TOKENS: room for the JSON wrapper on top of the free-text rationale
            gen = self.llm.generate(json_prompt(prompt, PREDICT_CUE, PREDICT_JSON_EXAMPLE), n=cfg.samples,
                                    temperature=temperature, max_tokens=cfg.max_tokens + JSON_EXTRA_TOKENS, stop=stop,
                                    schema=PREDICT_SCHEMA)
        else:
            gen = self.llm.generate(prompt, n=cfg.samples, temperature=temperature, max_tokens=cfg.max_tokens, stop=stop)
        samples: list[tuple[Thought, str, bool]] = []  # each sample's thought, where its answer came from, repaired
        dropped: list[int] = []
        for text in gen.texts:
            obj, repaired = loads_object(text) if structured else (None, False)
            from_json = self.thought_from_json(obj, n_passages) if obj is not None else None
            if from_json is not None:
                thought, out_of_range = from_json
                dropped += out_of_range
                if copies_the_example(thought.answer):  # the instruction's placeholder is no answer
                    thought.answer = ""
                    s.note("a sample's answer copied the JSON instruction's example "
                           f"({PREDICT_JSON_EXAMPLE['answer']!r}): read as no answer")
                samples.append((thought, "json" if thought.answer else "missing", repaired))
            else:
                thought = self.parse_thought(text, n_passages)
                samples.append((thought, "label" if thought.answer else "missing", False))
        if dropped:
            s.note(f"citation number(s) {sorted(set(dropped))} outside the {n_passages} passages shown: dropped "
                   "from the structured rationale(s)")
        thoughts, how = self.complete_thoughts(prompt, [t for t, _, _ in samples], s)
        kept = {id(t) for t in thoughts}
        for i, (thought, origin, repaired) in enumerate(samples):
            if origin == "json" and not repaired and not gen.schema_ignored:
                s.record_parse("answer", PARSE_DIRECT, "json", structured=structured)
            elif origin == "json":
                why = "JSON in a reply the server did not constrain" if gen.schema_ignored else "JSON cut short, closed"
                s.record_parse("answer", PARSE_FALLBACK, why, structured=structured)
            elif origin == "label":
                status = PARSE_FALLBACK if structured else PARSE_DIRECT  # free text under a schema: a fallback
                s.record_parse("answer", status, "'Answer:' label", structured=structured)
            elif id(thought) in kept and thought.answer:
                s.record_parse("answer", PARSE_FALLBACK, how[i], structured=structured)
            else:
                s.record_parse("answer", PARSE_FAILED, how.get(i, "no answer"), structured=structured)
        return thoughts

    @staticmethod
    def thought_from_json(obj: dict[str, Any], n_passages: int) -> tuple[Thought, list[int]] | None:
        """A structured Predict sample (``PREDICT_SCHEMA``) as a thought, and the citation numbers
        dropped for naming no passage shown (outside 1..``n_passages``). Each statement is
        written as the paper writes a rationale sentence, ``"<text> [1][3]."`` (markers the text
        carries itself are moved to its end), the rationale is the statements joined and is split
        again by ``split_statements`` as free text is. The answer is read as an ``Answer:``
        field's (``completed_answer``); missing (a JSON cut before it) it is empty. None when
        ``statements`` is not a list."""
        items = obj.get("statements")
        answer = obj.get("answer", "")
        if not isinstance(items, list):
            return None
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            answer = str(answer)
        sentences: list[str] = []
        dropped: list[int] = []
        for item in items:
            if isinstance(item, str):
                item = {"text": item}
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                continue
            cites = item.get("citations")
            numbers = [c for c in cites if isinstance(c, int) and not isinstance(c, bool)] if isinstance(cites, list) else []
            numbers = list(dict.fromkeys([*numbers, *markers(item["text"])]))
            dropped += [c for c in numbers if not 1 <= c <= n_passages]
            sentence = render_statement(item["text"], [c for c in numbers if 1 <= c <= n_passages])
            if sentence:
                sentences.append(sentence)
        rationale = " ".join(sentences)
        answer = HGOT.completed_answer(answer) if isinstance(answer, str) else ""
        return Thought(rationale=rationale, answer=answer, statements=split_statements(rationale, n_passages)), dropped

    @staticmethod
    def parse_thought(text: str, n_passages: int) -> Thought:
        """Rationale and answer of one Predict sample. The answer is read after the last
        ``Answer:`` label (``completed_answer``: on its line or the next); no label or nothing
        after it leaves the answer empty for ``complete_thoughts``."""
        matches = list(_ANSWER_LABEL.finditer(text))
        if matches:
            m = matches[-1]
            rationale, answer = text[: m.start()], HGOT.completed_answer(text[m.end():])
        else:
            rationale, answer = text, ""
        return Thought(rationale=rationale.strip(), answer=answer,
                       statements=split_statements(rationale, n_passages))

    @staticmethod
    def completed_answer(text: str) -> str:
        """The answer in the text after an ``Answer:`` label (a sample's or a follow-up reply's):
        echoed ``Question:`` / ``Rationale:`` lines skipped, a leading "The answer is:" peeled
        off (its answer may be on the next line); a bare marker is no answer."""
        lines = [_THINK_STEP.sub("", x) for x in text.splitlines() if x.strip() and not _ECHOED_FIELD.match(x)]
        answer, _ = extract_answer("\n".join(lines))
        return "" if _BARE_MARKER.fullmatch(answer) else answer

    def complete_thoughts(self, prompt: str, thoughts: list[Thought], s: Any) -> tuple[list[Thought], dict[int, str]]:
        """The samples that vote, when some stopped before their ``Answer:`` field (small models
        often do, or run out of tokens), and how each sample without an answer was handled (by
        its index in ``thoughts``: the rule that gave its answer, or why it has none).
        ``missing_answer``:

        - ``dsp`` (default: DSP's ``generate``, which the authors' code runs,
          ``dsp/primitives/predict.py``): if any sample has an answer, the samples without one
          are dropped; if none has, the first sample is continued by one greedy call on the
          prompt + its rationale + ``Answer:`` (max_tokens = min(max(75, max_tokens // 2),
          max_tokens)) and is the only sample left;
        - ``follow-up`` (hopqa's earlier choice): every sample without an answer gets that greedy
          call (32 tokens), and all samples vote;
        - ``rationale``: no call, all samples vote.

        What is still empty falls back to the rationale's ``the answer is`` / first line
        (``completed_answer``). Each case is noted in the trace. ``prompt`` is the paper's
        free-text Predict prompt (also for structured samples: their rationale is in its form)."""
        missing = [i for i, t in enumerate(thoughts) if not t.answer]
        how: dict[int, str] = {}
        if not missing:
            return thoughts, how
        if self.config.missing_answer == "dsp":
            if len(missing) < len(thoughts):
                s.note(f"{len(missing)} of {len(thoughts)} samples had no answer after 'Answer:': dropped (DSP)")
                how.update((i, "no answer: dropped (DSP), another sample has one") for i in missing)
                return [t for t in thoughts if t.answer], how
            first = thoughts[0]
            tokens = min(max(75, self.config.max_tokens // 2), self.config.max_tokens)
            g = self.llm.generate(prompt + " " + first.rationale + "\nAnswer:", temperature=0.0, max_tokens=tokens,
                                  stop=_COMPLETION_STOPS)
            first.answer = self.completed_answer(g.text)
            s.note(f"no sample had an answer after 'Answer:': the first was continued greedily (DSP), "
                   f"{len(thoughts) - 1} dropped")
            how.update((i, "no answer: dropped (DSP), only the first sample is continued") for i in missing[1:])
            how[0] = "missing_answer=dsp: continued greedily after 'Answer:'"
            thoughts, missing = [first], [0]
        elif self.config.missing_answer == "follow-up":
            requests = [GenerationRequest.make(prompt + " " + thoughts[i].rationale + "\nAnswer:",
                                               temperature=0.0, max_tokens=32, stop=_COMPLETION_STOPS) for i in missing]
            for i, g in zip(missing, self.llm.map(requests)):
                thoughts[i].answer = self.completed_answer(g.text)
                how[i] = "missing_answer=follow-up: a greedy call after 'Answer:'"
            s.note(f"{len(missing)} of {len(thoughts)} samples had no answer after 'Answer:': "
                   "completed by a follow-up call each")
        rest = [i for i in missing if not thoughts[i].answer]
        for i in rest:
            thoughts[i].answer = self.completed_answer(thoughts[i].rationale)
            how[i] = ("the rationale's answer sentence or first line" if thoughts[i].answer
                      else "no answer after 'Answer:', nor in the rationale")
        if rest:
            s.note(f"{len(rest)} samples still without an answer: took the rationale's answer sentence or first line "
                   f"({sum(1 for i in rest if not thoughts[i].answer)} found none)")
        return thoughts, how

    # -- PLAN / STOP / REWRITE ---------------------------------------------------------------------
    def plan(self, q: str, context: list[Scored]) -> nx.DiGraph:
        cfg = self.config
        with step("plan", query=q) as s:
            shown = plan_context(context, cfg.plan_context_sigma)
            if shown or cfg.plan_context_sigma is None:
                ctx = render_passages([x.passage for x in shown], max_words=None if cfg.plan_context_sigma is not None
                                      else PLAN_CONTEXT_WORDS, **CONTEXT_FORMAT)
                prompt = PLAN_PROMPT.format(instructions=PLAN_INSTRUCTIONS, demos="\n\n---\n\n".join(self.demos("plan", q)),
                                            context=ctx or "(none)", question=q)
            else:  # no passage is trusted enough: the plan prompt without context (official code)
                prompt = PLAN_PROMPT_NO_CONTEXT.format(
                    instructions=PLAN_INSTRUCTIONS_NO_CONTEXT, question=q,
                    demos="\n\n---\n\n".join(without_context(d) for d in self.demos("plan", q)))
            s.output(context=[{"id": x.passage.id, "sigma": round(x.sigma, 4)} for x in shown])
            draft = self.draft_plan(prompt)
            out, steps, described = draft.text, draft.steps, draft.dependencies
            if draft.copied:
                s.note(f"{draft.copied} JSON plan step(s) copied the instruction's example: dropped")
            unique = list(dict.fromkeys(x.strip() for x in steps))
            if len(unique) < len(steps):
                s.note(f"{len(steps) - len(unique)} repeated step(s) dropped")
                steps = unique
            if cfg.self_reflect and len(steps) > 1:
                listing = " ".join(f"Step {i}: {x}" for i, x in enumerate(steps, 1))
                described = self.llm.generate(
                    REFLECT_PROMPT.format(instructions=REFLECT_INSTRUCTIONS, demos="\n\n---\n\n".join(self.demos("reflect", q)),
                                          steps=listing), max_tokens=80, stop=["\n\n", "\n---", "\nPlan:"]).text.strip()
            formal = described
            if cfg.formalize and len(steps) > 1 and described:
                formal = self.llm.generate(FORMALIZE_PROMPT.format(descriptions=described), max_tokens=60,
                                           stop=["\n\n", "\n---", "\nDescriptions:"]).text.strip()
            edges, notes = parse_dependencies(formal, len(steps))
            if not edges and formal is not described and described:
                edges, more = parse_dependencies(described, len(steps))
                notes += more
            for n in notes:
                s.note(n)
            if (cfg.draft_dependencies and not edges and len(steps) > 1 and draft.dependencies
                    and draft.dependencies is not described):
                edges, more = parse_dependencies(draft.dependencies, len(steps))
                for n in more:
                    s.note(f"plan's own dependencies: {n}")
                if edges:
                    s.note("self-reflection left no usable dependency: the plan's own Dependencies line is used "
                           "(draft_dependencies)")
            if len(steps) > 1 and not edges and (formal or described):
                s.note("no usable dependency: the steps are treated as independent")
            graph = build_graph(steps, edges)
            s.output(raw=out, steps=steps, dependencies=described, formal=formal, edges=[list(e) for e in edges],
                     levels=[sorted(g) for g in nx.topological_generations(graph)])
            return graph

    def draft_plan(self, prompt: str) -> PlanDraft:
        """Send the Plan prompt (with or without context) and read the reply as the paper's plan
        text. Structured: the same prompt with the JSON instruction before its ``Plan:`` cue,
        ``plan_schema(max_steps)``, the JSON rendered back to ``Step 1: ... Dependencies: ...``
        (``plan_from_json``); a reply without a usable ``steps`` list is read as free text; a
        plan whose every step copied the instruction's example is an empty plan, its parse
        ``failed``. Free text: ``parse_steps`` and the ``Dependencies:`` line. Nothing usable: an
        empty plan."""
        cfg = self.config
        stop = ["\n\n---", "\nContext:", "\nQuestion:"]
        structured = use_schema(self.llm, cfg.structured, who="HGOT plan")
        if structured:  # JSON_EXTRA_TOKENS: room for the JSON wrapper on top of the free-text plan's 200
            gen = self.llm.generate(json_prompt(prompt, PLAN_CUE, PLAN_JSON_EXAMPLE), max_tokens=200 + JSON_EXTRA_TOKENS,
                                    stop=stop, schema=plan_schema(cfg.max_steps))
        else:
            gen = self.llm.generate(prompt, max_tokens=200, stop=stop)
        parsed = read(gen.text, structured, lambda obj: plan_from_json(obj, cfg.max_steps),
                      lambda text: read_plan_text(text, cfg.max_steps), field="plan", schema_ignored=gen.schema_ignored,
                      record=False)
        draft = parsed.value
        if draft is not None and draft.copied and not draft.steps:
            # every step copied the instruction's example (dropped, noted by the caller): no plan of the model's
            parsed = failed(f"the reply's example copied ({draft.copied} plan step(s)): empty plan")
        target = current_step()
        if target is not None:
            target.record_parse("plan", parsed.status, parsed.how, structured=structured)
        return draft or plan_from_text(gen.text, cfg.max_steps)

    def stop(self, q: str, graph: nx.DiGraph, d: int) -> bool:
        with step("stop", depth=d, steps=graph.number_of_nodes()) as s:
            if d >= self.config.depth:
                s.output(stop=True, reason="depth")
                return True
            if graph.number_of_nodes() == 0:
                s.output(stop=True, reason="empty plan")
                return True
            if graph.number_of_nodes() == 1:
                embedder = self.stop_embedder
                sim = embedder.similarity(q, graph.nodes[1]["question"])
                s.output(similarity=round(sim, 4), embedder=getattr(embedder, "name", "?"))
                if sim > self.config.stop_similarity:
                    s.output(stop=True, reason="single step restating the query")
                    return True
            s.output(stop=False)
            return False

    def rewrite(self, graph: nx.DiGraph, i: int, preds: list[int], answers: dict[int, str],
                asked: dict[int, str]) -> str:
        """C.4: make step i standalone with the answers of its in-neighbours: each in-neighbour as
        it was asked (its own rewrite, if it had one) with its answer, empty or not, as the
        official code writes the rewrite context."""
        with step("rewrite", step=i) as s:
            parts = [f"Step {p}: {asked.get(p, graph.nodes[p]['question'])} ANSWER: {answers.get(p, '')}." for p in preds]
            original = graph.nodes[i]["question"]
            if not any(answers.get(p) for p in preds):
                s.note("no in-neighbour has an answer: rewritten with empty answers (as the official code)")
            context = " ".join(parts + [f"Step {i}: {original}"])
            out = self.llm.generate(REWRITE_PROMPT.format(instructions=REWRITE_INSTRUCTIONS,
                                                          demos="\n\n---\n\n".join(self.demos("rewrite", original)),
                                                          context=context),
                                    max_tokens=60, stop=["\n"]).text.strip()
            bare, echoed = strip_labels(out, _REWRITE_LABEL)
            if echoed:
                s.note("the reply repeated the prompt's \"Rewrite:\" label: removed")
                out = bare.strip()
            if len(out) <= 3:
                s.note("empty rewrite: the step is kept as it is")
                out = original
            given = [answers[p] for p in preds if answers.get(p)]
            if self.config.rewrite_answers and given:
                copied = _words(out) == _words(original)
                earlier = [p for p in preds if _words(out) == _words(asked.get(p, graph.nodes[p]["question"]))]
                if copied or earlier:
                    what = "kept the step as it was" if copied else f"copied Step {earlier[0]}'s question"
                    out = f"{original} ({'; '.join(given)})"
                    s.note(f"the rewrite {what}: the step is kept with the in-neighbours' answers added (rewrite_answers)")
            s.output(original=original, rewritten=out, context=context)  # context: what Appendix D's Rewrite demo shows
            return out
