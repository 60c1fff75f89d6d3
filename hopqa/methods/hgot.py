"""HGOT — Hierarchical Graph of Thoughts (Fang et al. 2024; METHODS.md §1, Algorithm 1).

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
``bootstrap`` builds them DSP-style from a training split as in Appendix D (``hgot_demos``:
runs of HGOT on ``bootstrap_examples`` examples of ``bootstrap_dataset`` whose prediction
matches gold, citation-format and dependency-format filters, IQR filter on step length; cached
on disk and resumable) and picks ``num_demos`` per prompt by ``demo_selection``: ``sampling``
(balanced over answer classes, seeded by ``seed``: "HGOT+Sampling") or ``knn`` (nearest
questions by sentence embedding: "HGOT+KNN"). A prompt kind with no bootstrapped
demonstration falls back to the Appendix C ones, noted in the trace. Bootstrapping runs once,
before the first question, outside that question's trace and usage; it is not free: it is a
full HGOT run per training example (prebuild it with ``hopqa demos``).
"""

from __future__ import annotations

import contextvars
import itertools
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import networkx as nx

from hopqa.llm.base import GenerationRequest
from hopqa.methods import hgot_demos
from hopqa.methods.base import Method, MethodConfig, MethodError, Result, register
from hopqa.methods.hgot_prompts import (
    CONTEXT_FORMAT,
    FORMALIZE_PROMPT,
    PLAN_DEMOS,
    PLAN_INSTRUCTIONS,
    PLAN_PROMPT,
    PREDICT_DEMOS,
    PREDICT_INSTRUCTIONS,
    PREDICT_PROMPT,
    REFLECT_DEMOS,
    REFLECT_INSTRUCTIONS,
    REFLECT_PROMPT,
    REWRITE_DEMOS,
    REWRITE_INSTRUCTIONS,
    REWRITE_PROMPT,
)
from hopqa.methods.hgot_quality import (
    Thought,
    citation_quality,
    normalize_scores,
    passage_votes,
    split_statements,
    thought_quality,
    update_sigma,
    vote,
)
from hopqa.methods.parsing import extract_answer
from hopqa.runtime import TracedRetriever
from hopqa.text import normalize_answer, render_passage, render_passages
from hopqa.trace import current_step, step, submit
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
    samples: int = 3
    temperature: float = 0.7
    alpha: float = 0.2
    beta: float = 0.4
    gamma: float = 0.4
    w1: float = 0.2
    w2: float = 0.55
    w3: float = 0.25
    stop_similarity: float = 0.9
    max_steps: int = 5
    self_reflect: bool = True
    formalize: bool = True
    rewrite: bool = True
    citation_quality: bool = True
    passage_scoring: bool = True
    entailment_delta: bool = True
    max_passage_words: int = 80
    max_tokens: int = 160
    complete_answer: bool = True
    demo_source: str = "paper"
    demo_selection: str = "sampling"
    num_demos: int = 2
    bootstrap_dataset: str = "hotpotqa:train"
    bootstrap_examples: int = 20
    demo_cache: str = ""
    seed: int = 0


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


# -- dependency parsing ---------------------------------------------------------------------------
#: A step header "Step 3:" / "step 3." / "Step 3)" / "Step 3 -".
_STEP_HEADER = re.compile(r"step\s*(\d+)\s*[:.)-]", re.IGNORECASE)
#: Where the steps end: a line starting with "Dependencies" (a plan's second field).
_DEPENDENCIES_LINE = re.compile(r"(?<=\n)[^\S\n]*dependenc", re.IGNORECASE)
_NUM = re.compile(r"step\s*(\d+)", re.IGNORECASE)
#: Step numbers longer than this are noise (and ``int`` refuses more than 4,300 digits).
MAX_STEP_DIGITS = 6


def _step_number(digits: str) -> int | None:
    """The step number written as ``digits``, or None when it is absurdly long."""
    return int(digits) if len(digits) <= MAX_STEP_DIGITS else None


def parse_steps(text: str, max_steps: int = 10) -> list[str]:
    """``Step 1: ... Step 2: ...`` (one line or many) -> the step questions, in order.

    A step's question is the text up to the next step header; the steps end at a line starting
    with "Dependencies". A repeated number keeps its first question; an empty question or an
    absurd number (more than ``MAX_STEP_DIGITS`` digits) is skipped. Linear in the text."""
    end = _DEPENDENCIES_LINE.search(text)
    body = text[: end.start()] if end else text
    headers = list(_STEP_HEADER.finditer(body))
    steps: dict[int, str] = {}
    for h, nxt in zip(headers, [*headers[1:], None]):
        n = _step_number(h.group(1))
        q = " ".join(body[h.end(): nxt.start() if nxt else len(body)].split())
        if n is not None and q and n not in steps:
            steps[n] = q
    return [steps[n] for n in sorted(steps)][:max_steps]


def _step_numbers(text: str, n_steps: int, notes: list[str]) -> list[int]:
    """The distinct step numbers named in ``text`` that exist (1..n_steps), in order; the others
    are noted as missing steps."""
    found: dict[int, None] = {}
    for digits in _NUM.findall(text):
        n = _step_number(digits)
        if n is None:
            notes.append(f"a step number of {len(digits)} digits ignored")
        elif 1 <= n <= n_steps:
            found[n] = None
        else:
            notes.append(f"Step {n} names a missing step: dropped")
    return list(found)


def parse_dependencies(text: str, n_steps: int) -> tuple[list[tuple[int, int]], list[str]]:
    """Edges (a, b) meaning 'step b depends on step a', from formal (``Step 1 -> Step 2``,
    ``Step 1 -> (Step 2 and Step 3)``, ``(Step 1 and Step 2) -> Step 3``) or descriptive
    (``Step 2 depends on Step 1``) text; plus notes on what was dropped (each note once). Only
    edges from a lower to a higher existing step are kept, so the graph is acyclic. Linear in
    the text: numbers of missing steps are dropped before pairing."""
    edges: list[tuple[int, int]] = []
    notes: list[str] = []
    for clause in re.split(r"[;\n]|\.(?!\d)", text):
        clause = clause.strip()
        if not clause or clause.lower() in ("none", "no dependencies", "n/a"):
            continue
        if "->" in clause:
            sides = [_step_numbers(part, n_steps, notes) for part in clause.split("->")]
            for left, right in itertools.pairwise(sides):
                edges += [(a, b) for a in left for b in right]
        elif m := re.search(r"depends?\s+(?:up)?on", clause, re.IGNORECASE):
            heads, tails = _step_numbers(clause[: m.start()], n_steps, notes), _step_numbers(clause[m.end():], n_steps, notes)
            edges += [(a, b) for b in heads for a in tails]
        elif _NUM.search(clause):
            notes.append(f"unparsed dependency text: {clause!r}")
    kept: dict[tuple[int, int], None] = {}
    for a, b in edges:
        if a == b:
            notes.append(f"self-loop Step {a} dropped")
        elif a > b:
            notes.append(f"edge Step {a} -> Step {b} goes backwards: dropped (a step can only depend on lower steps)")
        else:
            kept[(a, b)] = None
    return list(kept), list(dict.fromkeys(notes))


def build_graph(steps: list[str], edges: list[tuple[int, int]]) -> nx.DiGraph:
    g = nx.DiGraph()
    for i, q in enumerate(steps, 1):
        g.add_node(i, question=q)
    g.add_edges_from(edges)
    return g


# -- the method ------------------------------------------------------------------------------------
@register("hgot")
class HGOT(Method):
    """Hierarchical Graph of Thoughts: probe, plan a DAG, search it recursively, infer."""

    Config = HGOTConfig
    config: HGOTConfig
    needs_retriever = True

    def __init__(self, llm: Any, retriever: Any = None, config: HGOTConfig | None = None,
                 judge: Any = None, embedder: Any = None) -> None:
        super().__init__(llm, retriever, config)
        from hopqa.nli import LLMJudge

        self.judge = judge if judge is not None else LLMJudge(self.llm)
        self._embedder = embedder
        cfg = self.config
        if cfg.demo_source not in ("paper", "bootstrap"):
            raise MethodError(f"demo_source must be 'paper' or 'bootstrap', not {cfg.demo_source!r}")
        if cfg.demo_selection not in ("sampling", "knn"):
            raise MethodError(f"demo_selection must be 'sampling' or 'knn', not {cfg.demo_selection!r}")
        self.demo_set: hgot_demos.DemoSet | None = None
        self.demo_file: Path | None = None  # the bootstrap's runs file, once prepared
        self._demo_lock = threading.Lock()
        self.progress = True  # progress bar while bootstrapping demonstrations

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from hopqa.embed import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    def run(self, question: str, retriever: TracedRetriever | None) -> Result:
        assert retriever is not None
        if self.config.demo_source == "bootstrap":
            with step("demonstrations", source=self.config.bootstrap_dataset, selection=self.config.demo_selection) as s:
                demos = self.prepare_demos(retriever.inner)
                s.output(predict=len(demos.predict), plan=len(demos.plan), rewrite=len(demos.rewrite), **demos.stats)
        node = self.traverse(question, 0, retriever)
        return Result(answer=node.answer, passages=[s.passage for s in node.context])

    # -- demonstrations (Appendix D) ---------------------------------------------------------------
    def demos(self, kind: str, question: str) -> list[str]:
        """Rendered demonstrations for one prompt (``predict``, ``plan``, ``reflect``, ``rewrite``)."""
        paper = {"predict": PREDICT_DEMOS, "plan": PLAN_DEMOS, "reflect": REFLECT_DEMOS, "rewrite": REWRITE_DEMOS}[kind]
        ds = self.demo_set
        if self.config.demo_source == "paper" or ds is None:
            return paper
        pool: list[Any] = {"predict": ds.predict, "plan": ds.plan, "reflect": ds.plan, "rewrite": ds.rewrite}[kind]
        if not pool:
            if (s := current_step()) is not None:
                s.note(f"no bootstrapped {kind} demonstration: the paper's Appendix C examples are used")
            return paper
        n = self.config.num_demos
        if self.config.demo_selection == "knn":
            chosen = hgot_demos.select_knn(pool, question, n, self.embedder)
        else:
            chosen = hgot_demos.select_balanced(pool, n, self.config.seed)
        return [d.render_reflect() if kind == "reflect" else d.render() for d in chosen]

    def prepare_demos(self, retriever: Any = None) -> hgot_demos.DemoSet:
        """Bootstrap (or load from the cache) the demonstrations, once per method instance."""
        with self._demo_lock:
            if self.demo_set is None:
                # a fresh context: the bootstrap runs are not part of the current question's trace or usage
                self.demo_set = contextvars.Context().run(self._bootstrap, retriever)
            return self.demo_set

    def bootstrap_file(self, retriever: Any = None) -> Path:
        """Where the runs of this LLM / training split / configuration are recorded. The
        retriever is part of the key only when given, i.e. when some training example has no
        paragraphs of its own."""
        from hopqa.config import default_home

        cfg = self.config
        shaping = {k: v for k, v in vars(cfg).items()
                   if not k.startswith(("demo_", "bootstrap_")) and k not in ("num_demos", "seed")}
        key = hgot_demos.cache_key(llm=self.llm.identity(), dataset=cfg.bootstrap_dataset, config=shaping,
                                   retriever=getattr(retriever, "name", None) if retriever is not None else None)
        root = Path(cfg.demo_cache) if cfg.demo_cache else default_home() / "demos"
        return root / f"hgot-{cfg.bootstrap_dataset.replace(':', '-')}-{key}.jsonl"

    def _bootstrap(self, retriever: Any) -> hgot_demos.DemoSet:
        from hopqa.datasets import DatasetError, load_dataset
        from hopqa.retrieval.pool import CandidatePool

        cfg = self.config
        name, _, split = cfg.bootstrap_dataset.partition(":")
        try:
            examples = load_dataset(name, split or "train", limit=cfg.bootstrap_examples)
        except DatasetError as exc:
            raise MethodError(f"cannot bootstrap HGOT demonstrations from {cfg.bootstrap_dataset!r}: {exc}") from exc
        runner = HGOT(self.llm, retriever, replace(cfg, demo_source="paper"), judge=self.judge, embedder=self._embedder)

        def run(ex: Any) -> tuple[str, list[dict[str, Any]], str | None]:
            r = CandidatePool(ex.paragraphs) if ex.paragraphs else retriever
            if r is None:
                return "", [], "the example has no paragraphs and no retriever was given"
            with hgot_demos.recording() as records:
                ans = runner.answer(ex.question, r)
            return ans.answer, list(records), ans.error

        path = self.bootstrap_file(retriever if any(not ex.paragraphs for ex in examples) else None)
        self.demo_file = path
        demos = hgot_demos.bootstrap(examples, run, path, progress=self.progress)
        hgot_demos.save_demo_set(demos, path.with_suffix(".demos.json"))
        return demos

    # -- Algorithm 1 ---------------------------------------------------------------------------
    def traverse(self, q: str, d: int, retriever: TracedRetriever) -> Node:
        with step("traverse", query=q, depth=d) as s:
            if d > 0:  # a plan step: one hop of the reasoning (its answer is set below)
                s.mark_hop(q, label=f"step, depth {d}")
            probed = self.probe(q, retriever)
            if d >= self.config.depth:  # STOP by depth does not look at the plan: skip planning
                self.stop(q, nx.DiGraph(), d)
                node, stopped = probed, True
            else:
                graph = self.plan(q, probed.context)
                stopped = self.stop(q, graph, d)
                node = probed if stopped else self.infer(q, probed.context, self.search(graph, d + 1, retriever))
            s.output(answer=node.answer, ci=node.ci, stopped=stopped)
            if d > 0:
                s.mark_hop(q, node.answer)
            return node

    def search(self, graph: nx.DiGraph, d: int, retriever: TracedRetriever) -> list[Node]:
        """Traverse the plan's steps in topological order; a level's steps run concurrently."""
        answers: dict[int, str] = {}
        nodes: dict[int, Node] = {}
        with step("search", depth=d, levels=[sorted(g) for g in nx.topological_generations(graph)]):
            for level in nx.topological_generations(graph):
                level = sorted(level)

                def visit(i: int) -> tuple[int, Node]:
                    q = graph.nodes[i]["question"]
                    preds = sorted(graph.predecessors(i))
                    if preds and self.config.rewrite:
                        q = self.rewrite(graph, i, preds, answers)
                    return i, self.traverse(q, d, retriever)

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
    def probe(self, q: str, retriever: TracedRetriever) -> Node:
        with step("probe", query=q) as s:
            hits = retriever.search(q, self.config.k)
            context = [Scored(p, sigma) for p, sigma in zip(hits, normalize_scores([p.score for p in hits]))]
            node = self.predict(q, context, s)
            return node

    def infer(self, q: str, own: list[Scored], sub_nodes: list[Node]) -> Node:
        with step("infer", query=q) as s:
            pool: dict[str, Scored] = {}
            for sc in [*own, *(x for n in sub_nodes for x in n.context)]:
                if sc.passage.id not in pool or sc.sigma > pool[sc.passage.id].sigma:
                    pool[sc.passage.id] = sc
            top = sorted(pool.values(), key=lambda x: -x.sigma)[: self.config.k]
            s.output(candidates=len(pool), selected=[{"id": x.passage.id, "sigma": round(x.sigma, 4)} for x in top])
            return self.predict(q, [Scored(x.passage, x.sigma) for x in top], s)

    def predict(self, q: str, context: list[Scored], s: Any) -> Node:
        """Predict with m samples, score thoughts, vote, CI, and update σ (shared by probe and infer)."""
        cfg = self.config
        texts = [render_passage(x.passage) for x in context]  # what the NLI judge reads: whole passages
        ctx = render_passages([x.passage for x in context], max_words=cfg.max_passage_words, **CONTEXT_FORMAT)
        prompt = PREDICT_PROMPT.format(instructions=PREDICT_INSTRUCTIONS, demos="\n\n---\n\n".join(self.demos("predict", q)),
                                       context=ctx or "(no passages)", question=q)
        gen = self.llm.generate(prompt, n=cfg.samples, temperature=cfg.temperature if cfg.samples > 1 else 0.0,
                                max_tokens=cfg.max_tokens, stop=["\n\n---", "\nContext:", "\nQuestion:"])
        thoughts = [self.parse_thought(t, len(context)) for t in gen.texts]
        self.fill_missing_answers(prompt, thoughts, s)
        entails = self.judge.entails if cfg.citation_quality or cfg.entailment_delta else None
        for t in thoughts:
            if cfg.citation_quality and entails is not None:
                t.rec, t.prec = citation_quality(t.statements, texts, entails)
            t.rho = thought_quality(t.rec, t.prec, cfg.alpha, cfg.beta if cfg.citation_quality else 0.0,
                                    cfg.gamma if cfg.citation_quality else 0.0)
        answer, ci, votes = vote(thoughts)
        before = [round(x.sigma, 4) for x in context]
        if cfg.passage_scoring and context:
            nu_bar = passage_votes(thoughts, texts, self.judge.entails if cfg.entailment_delta else None)
            context = [Scored(x.passage, update_sigma(x.sigma, nb, ci, (cfg.w1, cfg.w2, cfg.w3)))
                       for x, nb in zip(context, nu_bar)]
        else:
            nu_bar = []
        if not answer:
            s.note("no sample gave a parseable answer")
        else:
            best = max((t for t in thoughts if normalize_answer(t.answer) == normalize_answer(answer)), key=lambda t: t.rho)
            hgot_demos.record("predict", question=q, rationale=best.rationale, answer=best.answer,
                              context=[render_passage(x.passage, i + 1, max_words=30) for i, x in enumerate(context)])
        s.output(samples=[t.to_dict() for t in thoughts], votes=votes, answer=answer, ci=round(ci, 4),
                 passages=[x.passage.id for x in context], sigma_before=before,
                 sigma_after=[round(x.sigma, 4) for x in context], nu_bar=[round(v, 4) for v in nu_bar])
        return Node(answer=answer, ci=ci, context=context)

    @staticmethod
    def parse_thought(text: str, n_passages: int) -> Thought:
        """Rationale and answer of one Predict sample. The answer is read after the last
        ``Answer:`` label (``completed_answer``: on its line or the next); no label or nothing
        after it leaves the answer empty for ``fill_missing_answers``."""
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

    def fill_missing_answers(self, prompt: str, thoughts: list[Thought], s: Any) -> None:
        """Samples that stopped before their ``Answer:`` field (small models often do, or run
        out of tokens) get it the way DSPy, the paper's framework, gets a missing output field:
        a greedy follow-up call on the prompt + the sample + ``Answer:`` (``complete_answer``).
        What is still empty (or with the switch off) falls back to the rationale's
        ``the answer is`` / first line (``completed_answer``). Both are noted in the trace."""
        missing = [i for i, t in enumerate(thoughts) if not t.answer]
        if not missing:
            return
        if self.config.complete_answer:
            requests = [GenerationRequest.make(prompt + " " + thoughts[i].rationale + "\nAnswer:",
                                               temperature=0.0, max_tokens=32, stop=_COMPLETION_STOPS) for i in missing]
            for i, g in zip(missing, self.llm.map(requests)):
                thoughts[i].answer = self.completed_answer(g.text)
            s.note(f"{len(missing)} of {len(thoughts)} samples had no answer after 'Answer:': "
                   "completed by a follow-up call (DSPy-style)")
        rest = [i for i in missing if not thoughts[i].answer]
        for i in rest:
            thoughts[i].answer = self.completed_answer(thoughts[i].rationale)
        if rest:
            s.note(f"{len(rest)} samples still without an answer: took the rationale's answer sentence or first line "
                   f"({sum(1 for i in rest if not thoughts[i].answer)} found none)")

    # -- PLAN / STOP / REWRITE ---------------------------------------------------------------------
    def plan(self, q: str, context: list[Scored]) -> nx.DiGraph:
        cfg = self.config
        with step("plan", query=q) as s:
            ctx = render_passages([x.passage for x in context[:3]], max_words=40, **CONTEXT_FORMAT)
            out = self.llm.generate(PLAN_PROMPT.format(instructions=PLAN_INSTRUCTIONS, demos="\n\n---\n\n".join(self.demos("plan", q)),
                                                       context=ctx or "(none)", question=q),
                                    max_tokens=200, stop=["\n\n---", "\nContext:", "\nQuestion:"]).text
            steps = parse_steps(out, cfg.max_steps)
            unique = list(dict.fromkeys(x.strip() for x in steps))
            if len(unique) < len(steps):
                s.note(f"{len(steps) - len(unique)} repeated step(s) dropped")
                steps = unique
            m = re.search(r"dependencies\s*:\s*(.*)", out, re.IGNORECASE | re.DOTALL)
            described = m.group(1).strip() if m else ""
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
            if len(steps) > 1 and not edges and (formal or described):
                s.note("no usable dependency: the steps are treated as independent")
            graph = build_graph(steps, edges)
            if steps:
                hgot_demos.record("plan", question=q, steps=steps, dependencies=described or ("None" if len(steps) == 1 else ""),
                                  context=[render_passage(x.passage, i + 1, max_words=30) for i, x in enumerate(context[:3])])
            s.output(raw=out, steps=steps, dependencies=described, formal=formal, edges=[list(e) for e in edges],
                     levels=[sorted(g) for g in nx.topological_generations(graph)])
            return graph

    def stop(self, q: str, graph: nx.DiGraph, d: int) -> bool:
        with step("stop", depth=d, steps=graph.number_of_nodes()) as s:
            if d >= self.config.depth:
                s.output(stop=True, reason="depth")
                return True
            if graph.number_of_nodes() == 0:
                s.output(stop=True, reason="empty plan")
                return True
            if graph.number_of_nodes() == 1:
                sim = self.embedder.similarity(q, graph.nodes[1]["question"])
                s.output(similarity=round(sim, 4), embedder=getattr(self.embedder, "name", "?"))
                if sim > self.config.stop_similarity:
                    s.output(stop=True, reason="single step restating the query")
                    return True
            s.output(stop=False)
            return False

    def rewrite(self, graph: nx.DiGraph, i: int, preds: list[int], answers: dict[int, str]) -> str:
        """C.4: make step i standalone with the answers of its in-neighbours."""
        with step("rewrite", step=i) as s:
            parts = [f"Step {p}: {graph.nodes[p]['question']} ANSWER: {answers[p]}." for p in preds if answers.get(p)]
            original = graph.nodes[i]["question"]
            if not parts:
                s.note("no answered in-neighbour: the step is kept as it is")
                return original
            context = " ".join(parts + [f"Step {i}: {original}"])
            out = self.llm.generate(REWRITE_PROMPT.format(instructions=REWRITE_INSTRUCTIONS,
                                                          demos="\n\n---\n\n".join(self.demos("rewrite", original)),
                                                          context=context),
                                    max_tokens=60, stop=["\n"]).text.strip()
            rewritten = out if len(out) > 3 else original
            if rewritten is original:
                s.note("empty rewrite: the step is kept as it is")
            else:
                hgot_demos.record("rewrite", question=original, context_text=context, rewrite=rewritten)
            s.output(original=original, rewritten=rewritten)
            return rewritten
