"""HGOT's plan as a graph (Fang et al. 2024, §3.2 "Thought Graph Construction", C.1-C.3).

The Plan prompt lists steps (``Step 1: ... Step 2: ...``) and, after self-reflection and
formalization, their dependencies (``Step 1 -> Step 2``, ``Step 2 depends on Step 1``): this
module turns that text into a networkx DAG whose edge ``a -> b`` means "step b depends on step
a". Edges only go from lower to higher step numbers, so the graph is acyclic by construction;
what cannot be parsed is dropped and returned as notes for the trace.
"""

from __future__ import annotations

import itertools
import re

import networkx as nx

from hopqa.text import normalize_answer

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


#: Last-step answers the bridge guard never takes: a yes / no checks the chain, it names nothing.
_YES_NO = frozenset({"yes", "no"})


def _names_the_same(answer: str, bridge: str) -> bool:
    """Whether ``answer`` names what ``bridge`` names: the same words after SQuAD normalisation,
    or a whole-word run of them ("Douglass" in "Frederick Douglass"); both normalised, non-empty."""
    return answer == bridge or f" {answer} " in f" {bridge} "


def echoes(answer: str, question: str) -> bool:
    """Whether ``answer`` is named in its own ``question`` (HGOT's ``echo_guard``, not in the
    paper): its SQuAD-normalised words are a whole-word run of the question's ("Mountrail County"
    for "What is the seat of the county ...? (Mountrail County, North Dakota)", "Charles Baring"
    for "Who is the father of Charles Baring?"). Never a yes / no, and never for a question that
    names two candidates to choose from (``hopqa.methods.choice.candidates``), whose answer is
    one of them."""
    from hopqa.methods.choice import candidates

    key = normalize_answer(answer)
    if not key or key in _YES_NO or candidates(question) is not None:
        return False
    return _names_the_same(key, normalize_answer(question))


def bridge_replacement(answer: str, graph: nx.DiGraph, answers: dict[int, str]) -> tuple[int, int | None, str] | None:
    """The bridge guard (HGOT's ``bridge_guard``, not in the paper): when INFER's ``answer`` names
    the answer of a *bridge*, a step that another step depends on (an intermediate entity of the
    chain, which the later step was rewritten with), the answer of the chain's last step instead.

    Returns None when ``answer`` is no bridge's; else ``(bridge, last, new)``: the first bridge
    step it names, and the one step without successors among the bridge's descendants whose
    answer is non-empty, not a yes / no and names no bridge's answer, with that answer; when
    those last steps give no answer or more than one distinct (normalised) answer, ``last`` is
    None and ``new`` empty (the caller keeps INFER's answer). ``answers``: each step's answer by
    step number."""
    key = normalize_answer(answer)
    if not key:
        return None
    bridges = {i: normalize_answer(answers.get(i, "")) for i in sorted(graph.nodes) if graph.out_degree(i)}
    named = [i for i, b in bridges.items() if b and _names_the_same(key, b)]
    if not named:
        return None
    first = named[0]
    lasts = {i: a for i in sorted(nx.descendants(graph, first))  # each last step's normalised answer
             if graph.out_degree(i) == 0 and (a := normalize_answer(answers.get(i, ""))) and a not in _YES_NO
             and not any(b and _names_the_same(a, b) for b in bridges.values())}
    if len(set(lasts.values())) != 1:
        return first, None, ""
    last = max(lasts)
    return first, last, answers[last]
