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

Not built yet (see the issue): the DSP-style bootstrapped demonstrations of Appendix D and
their balanced / KNN selection — the prompts use the paper's Appendix C examples.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from hopqa.methods.base import Method, MethodConfig, Result, register
from hopqa.methods.hgot_prompts import (
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
from hopqa.methods.parsing import clean_answer
from hopqa.runtime import TracedRetriever, submit
from hopqa.trace import step
from hopqa.types import Passage


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
_STEP = re.compile(r"step\s*(\d+)\s*[:.)-]\s*(.+?)(?=\s*step\s*\d+\s*[:.)-]|\n\s*dependenc|$)", re.IGNORECASE | re.DOTALL)
_NUM = re.compile(r"step\s*(\d+)", re.IGNORECASE)


def parse_steps(text: str, max_steps: int = 10) -> list[str]:
    """``Step 1: ... Step 2: ...`` (one line or many) -> the step questions, in order."""
    body = re.split(r"\n\s*dependencies\s*:", text, flags=re.IGNORECASE)[0]
    steps: dict[int, str] = {}
    for m in _STEP.finditer(body):
        n, q = int(m.group(1)), " ".join(m.group(2).split())
        if q and n not in steps:
            steps[n] = q
    return [steps[n] for n in sorted(steps)][:max_steps]


def parse_dependencies(text: str, n_steps: int) -> tuple[list[tuple[int, int]], list[str]]:
    """Edges (a, b) meaning 'step b depends on step a', from formal (``Step 1 -> Step 2``,
    ``Step 1 -> (Step 2 and Step 3)``, ``(Step 1 and Step 2) -> Step 3``) or descriptive
    (``Step 2 depends on Step 1``) text; plus notes on what was dropped. Only edges from a lower
    to a higher existing step are kept, so the graph is acyclic."""
    edges: list[tuple[int, int]] = []
    notes: list[str] = []
    for clause in re.split(r"[;\n]|\.(?!\d)", text):
        clause = clause.strip()
        if not clause or clause.lower() in ("none", "no dependencies", "n/a"):
            continue
        if "->" in clause:
            parts = clause.split("->")
            for left, right in zip(parts, parts[1:]):
                for a in map(int, _NUM.findall(left)):
                    for b in map(int, _NUM.findall(right)):
                        edges.append((a, b))
        elif m := re.search(r"depends?\s+(?:up)?on", clause, re.IGNORECASE):
            head, tail = clause[: m.start()], clause[m.end():]
            for b in map(int, _NUM.findall(head)):
                for a in map(int, _NUM.findall(tail)):
                    edges.append((a, b))
        elif _NUM.search(clause):
            notes.append(f"unparsed dependency text: {clause!r}")
    kept = []
    for a, b in edges:
        if a == b:
            notes.append(f"self-loop Step {a} dropped")
        elif not (1 <= a <= n_steps and 1 <= b <= n_steps):
            notes.append(f"edge Step {a} -> Step {b} names a missing step: dropped")
        elif a > b:
            notes.append(f"edge Step {a} -> Step {b} goes backwards: dropped (a step can only depend on lower steps)")
        elif (a, b) not in kept:
            kept.append((a, b))
    return kept, notes


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

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from hopqa.embed import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    def run(self, question: str, retriever: TracedRetriever | None) -> Result:
        assert retriever is not None
        node = self.traverse(question, 0, retriever)
        return Result(answer=node.answer, passages=[s.passage for s in node.context])

    # -- Algorithm 1 ---------------------------------------------------------------------------
    def traverse(self, q: str, d: int, retriever: TracedRetriever) -> Node:
        with step("traverse", query=q, depth=d) as s:
            probed = self.probe(q, retriever)
            if d >= self.config.depth:  # STOP by depth does not look at the plan: skip planning
                self.stop(q, nx.DiGraph(), d)
                s.output(answer=probed.answer, ci=probed.ci, stopped=True)
                return probed
            graph = self.plan(q, probed.context)
            if self.stop(q, graph, d):
                s.output(answer=probed.answer, ci=probed.ci, stopped=True)
                return probed
            sub_nodes = self.search(graph, d + 1, retriever)
            node = self.infer(q, probed.context, sub_nodes)
            s.output(answer=node.answer, ci=node.ci, stopped=False)
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
        texts = [f"{x.passage.title} | {x.passage.text}" if x.passage.title else x.passage.text for x in context]
        ctx = "\n".join(x.passage.render(i + 1, max_words=cfg.max_passage_words) for i, x in enumerate(context))
        prompt = PREDICT_PROMPT.format(instructions=PREDICT_INSTRUCTIONS, demos="\n\n---\n\n".join(PREDICT_DEMOS),
                                       context=ctx or "(no passages)", question=q)
        gen = self.llm.generate(prompt, n=cfg.samples, temperature=cfg.temperature if cfg.samples > 1 else 0.0,
                                max_tokens=cfg.max_tokens, stop=["\n\n---", "\nContext:", "\nQuestion:"])
        thoughts = [self.parse_thought(t, len(context)) for t in gen.texts]
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
        s.output(samples=[t.to_dict() for t in thoughts], votes=votes, answer=answer, ci=round(ci, 4),
                 passages=[x.passage.id for x in context], sigma_before=before,
                 sigma_after=[round(x.sigma, 4) for x in context], nu_bar=[round(v, 4) for v in nu_bar])
        return Node(answer=answer, ci=ci, context=context)

    @staticmethod
    def parse_thought(text: str, n_passages: int) -> Thought:
        """Rationale and answer of one Predict sample (answer line missing: the last line)."""
        m = re.search(r"\n?\s*answer\s*:\s*(.*)", text, re.IGNORECASE)
        if m:
            rationale, answer = text[: m.start()], m.group(1).strip().splitlines()[0] if m.group(1).strip() else ""
        else:
            lines = [x for x in text.strip().splitlines() if x.strip()]
            rationale, answer = text, ""
            if len(lines) > 1:
                answer = lines[-1]
        return Thought(rationale=rationale.strip(), answer=clean_answer(answer),
                       statements=split_statements(rationale, n_passages))

    # -- PLAN / STOP / REWRITE ---------------------------------------------------------------------
    def plan(self, q: str, context: list[Scored]) -> nx.DiGraph:
        cfg = self.config
        with step("plan", query=q) as s:
            ctx = "\n".join(x.passage.render(i + 1, max_words=40) for i, x in enumerate(context[:3]))
            out = self.llm.generate(PLAN_PROMPT.format(instructions=PLAN_INSTRUCTIONS, demos="\n\n---\n\n".join(PLAN_DEMOS),
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
                    REFLECT_PROMPT.format(instructions=REFLECT_INSTRUCTIONS, demos="\n\n---\n\n".join(REFLECT_DEMOS),
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
                                                          demos="\n\n---\n\n".join(REWRITE_DEMOS), context=context),
                                    max_tokens=60, stop=["\n"]).text.strip()
            rewritten = out if len(out) > 3 else original
            if rewritten is original:
                s.note("empty rewrite: the step is kept as it is")
            s.output(original=original, rewritten=rewritten)
            return rewritten
