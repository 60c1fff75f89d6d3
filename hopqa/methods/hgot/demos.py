"""HGOT demonstrations (Fang et al. 2024, Appendix D): DSP-style bootstrapping and selection.

**Bootstrapping.** Following DSP, a demonstration comes from a training example run through
HGOT itself, kept only when the final prediction matches the gold answer (normalized exact
match against any gold alias). Its Predict (context, question, rationale, answer), Plan
(context, question, steps, dependencies; also used as Self-reflect demonstrations) and Rewrite
(context, rewrite) calls are the candidates, and ``build_demo_set`` filters them in one of two
modes (``bootstrap_mode``):

- ``official`` (the authors' code): one candidate of each kind per run (the root's final
  Predict, the first Plan, the first Rewrite), kept together or dropped together: the
  rationale, cleaned as that code cleans it (``official_rationale``), must match
  ``^([^\\[\\.]+(\\[[0-9]+\\])*\\.)+$`` and cite at least once; every plan step must end with
  "?"; the dependencies must start as the paper's regex ``None|((\\s*([Ss]tep [0-9]+) depends on
  ([Ss]tep [0-9]+)\\.\\s*)+)`` says (``re.match``); the plan's mean step length in characters
  must not be above Q3 + 1.5·IQR of all plans'.
- ``every-call`` (hopqa's earlier choice): every call of a kept run, each kind filtered on its
  own: citation marks moved to the end of their sentence (``normalize_citations``) and the
  rationale format checked; the dependency text must match the regex in full
  (``well_formed_dependencies``; an equivalent linear-time form of it); a plan with a step
  whose length in words is an upper IQR outlier over all candidate plans' steps is dropped.

The runs themselves are made by ``hopqa.bootstrap`` (a client of the method, like the
evaluation runner): it runs HGOT on training examples and reads the candidates above from
each run's trace (``candidates_from_trace``); this module holds what the paper defines, the
demonstration kinds, the filters (``build_demo_set``, applied when recorded runs are read, so
they can change without re-running the model) and the selection.

**Selection** (Appendix D), per prompt: ``sampling`` — balanced sampling, a seeded random
choice that keeps an even distribution of answer classes (round robin over the classes: the
label for FEVER, the normalized answer otherwise); ``knn`` — the k demonstrations whose
questions are nearest to the prompt's question by sentence embedding (all-MiniLM-L6-v2,
Liu et al. 2022), most similar last, i.e. next to the question.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hopqa.text import normalize_answer

#: Appendix D: a run of citation marks.
CITATION_MARKS = re.compile(r"(\[[0-9]+\])+")
#: Appendix D: every sentence is text without '[' or '.', then citation marks, then a full stop.
RATIONALE_FORMAT = re.compile(r"^([^\[\.]+(\[[0-9]+\])*\.)+$")
#: Appendix D: well-formed dependency text of a Plan demonstration. The paper writes it
#: ``None|((\s*([Ss]tep [0-9]+) depends on ([Ss]tep [0-9]+)\.\s*)+)``; this is the same language
#: with the two adjacent ``\s*`` of consecutive repetitions merged into one, which makes a failing
#: full match linear instead of quadratic in the length of a whitespace run.
DEPENDENCY_FORMAT = re.compile(r"None|(?:\s*[Ss]tep [0-9]+ depends on [Ss]tep [0-9]+\.)+\s*")


# -- the three demonstration kinds --------------------------------------------------------------------
@dataclass(frozen=True)
class PredictDemo:
    """A Predict (C.5) demonstration: numbered context lines, question, rationale, answer."""

    question: str
    context: tuple[str, ...]
    rationale: str
    answer: str
    label: str = ""  # the answer class for balanced sampling

    def render(self) -> str:
        ctx = "\n".join(self.context) or "(no passages)"
        return (f"Context:\n{ctx}\nQuestion: {self.question}\nRationale: Let's think step by step. "
                f"{self.rationale}\nAnswer: {self.answer}")


@dataclass(frozen=True)
class PlanDemo:
    """A Plan (C.1) demonstration; its steps and dependencies also make a Self-reflect (C.2) one."""

    question: str
    context: tuple[str, ...]
    steps: tuple[str, ...]
    dependencies: str
    label: str = ""

    def listing(self) -> str:
        return " ".join(f"Step {i}: {s}" for i, s in enumerate(self.steps, 1))

    def render(self) -> str:
        ctx = "\n".join(self.context) or "(none)"
        return f"Context:\n{ctx}\nQuestion: {self.question}\nPlan:\n{self.listing()}\nDependencies: {self.dependencies}"

    def render_reflect(self) -> str:
        return f"Plan:\n{self.listing()}\nDependencies: {self.dependencies}"


@dataclass(frozen=True)
class RewriteDemo:
    """A Rewrite (C.4) demonstration: previous steps with answers and the rewritten last step."""

    question: str  # the step before the rewrite (what KNN compares with)
    context: str
    rewrite: str
    label: str = ""

    def render(self) -> str:
        return f"Context:\n{self.context}\nRewrite: {self.rewrite}"


@dataclass
class DemoSet:
    """Bootstrapped demonstrations of every kind, with counts of what the filters dropped."""

    predict: list[PredictDemo] = field(default_factory=list)
    plan: list[PlanDemo] = field(default_factory=list)
    rewrite: list[RewriteDemo] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)


# -- Appendix D filters ----------------------------------------------------------------------------------
def normalize_citations(rationale: str) -> str | None:
    """Move each sentence's citation marks to its end (before the full stop), dropping repeats;
    ``None`` when the result still does not match ``RATIONALE_FORMAT``.

    >>> normalize_citations("Paris [1] is in France. It is the capital.[2]")
    'Paris is in France [1]. It is the capital [2].'
    """
    text = " ".join(rationale.replace("Let's think step by step.", " ").split())
    # marks written after a full stop belong to the sentence before it
    text = re.sub(r"\.\s*((?:\[[0-9]+\]\s*)+)", lambda m: " " + m.group(1).replace(" ", "") + ". ", text)
    sentences = []
    for raw in re.split(r"(?<=\.)\s+", text.strip()):
        if not raw:
            continue
        marks = list(dict.fromkeys(re.findall(r"\[[0-9]+\]", raw)))
        body = " ".join(CITATION_MARKS.sub(" ", raw).split()).rstrip(".").rstrip()
        if not body:
            continue
        sentences.append(f"{body} {''.join(marks)}." if marks else f"{body}.")
    out = " ".join(sentences)
    return out if out and RATIONALE_FORMAT.fullmatch(out) else None


def well_formed_dependencies(text: str) -> bool:
    """Appendix D's dependency-format check (the whole text must match)."""
    return DEPENDENCY_FORMAT.fullmatch(text.strip()) is not None


def iqr_upper_fence(lengths: Sequence[float], factor: float = 1.5, method: str = "linear") -> float | None:
    """Q3 + factor·IQR of ``lengths`` (numpy percentile ``method``: the official code uses
    ``midpoint``); ``None`` with fewer than 4 values (no meaningful quartiles)."""
    if len(lengths) < 4:
        return None
    q1, q3 = np.percentile(np.asarray(lengths, dtype=float), [25, 75], method=method)
    return float(q3 + factor * (q3 - q1))


def _matched(runs: Iterable[dict[str, Any]], stats: dict[str, int]) -> Iterable[tuple[dict[str, Any], str]]:
    """The runs whose prediction matched gold, each with its answer class; counts ``runs``,
    ``failed`` and ``matched`` in ``stats``."""
    for run in runs:
        stats["runs"] += 1
        if run.get("error"):
            stats["failed"] += 1
        elif run.get("matched"):
            stats["matched"] += 1
            yield run, answer_class(run.get("answers") or [])


def answer_class(answers: Sequence[str]) -> str:
    """The class used by balanced sampling: a FEVER label as it is, else the normalized answer."""
    first = answers[0] if answers else ""
    return first.upper() if first.upper() in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO") else normalize_answer(first)


# -- from recorded runs to a demonstration set ---------------------------------------------------------
#: The official code's rationale clean-up before its format check (``pipeline.py``): a run of
#: marks written before a sentence moves behind it.
_MARKS_BEFORE = re.compile(r"((\[[0-9]+\])+)\s*([^a-z\[\.\s][^\[\.]*)\.[\n\s]")
_MARKS_BEFORE_END = re.compile(r"((\[[0-9]+\])+)\s*([^a-z\[\.\s][^\[\.]*)\.$")


def official_rationale(rationale: str) -> str | None:
    """The official code's rationale clean-up and check: marks before a sentence moved behind
    it, newlines to spaces; kept when it matches ``RATIONALE_FORMAT`` and cites at least once."""
    text = _MARKS_BEFORE.sub(r"\3 \1. ", rationale.strip())
    text = _MARKS_BEFORE_END.sub(r"\3 \1.", text).replace("\n", " ").strip()
    return text if RATIONALE_FORMAT.match(text) and re.search(r"\[[0-9]+\]", text) else None


def build_demo_set(runs: Iterable[dict[str, Any]], mode: str = "official") -> DemoSet:
    """Apply DSP's match rule and Appendix D's filters to recorded runs (see the module docstring).

    ``official`` (the authors' code): a run gives one demonstration of each kind it recorded
    (the root's final Predict, the first Plan, the first Rewrite), all or none: the rationale
    must pass ``official_rationale``, every plan step end with "?", the dependencies match the
    paper's regex, and the plan's mean step length (characters) not be an outlier, above Q3 +
    1.5·IQR of all recorded plans' (midpoint quartiles, as the code; over the whole file instead
    of its batches; skipped with fewer than 4 plans; a plan exactly at the fence is kept, where
    the code's strict ``<`` drops it). ``every-call``
    (hopqa's earlier choice): every recorded call is a candidate, each kind filtered on its own
    (``normalize_citations``, ``well_formed_dependencies``, IQR of step lengths in words)."""
    runs = list(runs)
    if mode == "every-call":
        return _every_call(runs)
    out = DemoSet()
    stats = dict.fromkeys(["runs", "matched", "failed", "kept", "bad_rationale", "bad_steps", "bad_dependencies",
                           "long_steps"], 0)
    plan_lengths = [float(np.mean([len(x) for x in r["steps"]])) for run in runs for r in run.get("records", [])
                    if r["kind"] == "plan" and r.get("steps")]
    fence = iqr_upper_fence(plan_lengths, method="midpoint")
    for run, label in _matched(runs, stats):
        by_kind = {r["kind"]: r for r in run.get("records", [])}
        predict, plan, rewrite = by_kind.get("predict"), by_kind.get("plan"), by_kind.get("rewrite")
        rationale = official_rationale(predict.get("rationale", "")) if predict else None
        if rationale is None or not predict.get("answer"):
            stats["bad_rationale"] += 1
            continue
        steps = tuple(plan.get("steps", [])) if plan else ()
        deps = " ".join(str(plan.get("dependencies", "")).split()) if plan else ""
        if not steps or not all(x.endswith("?") for x in steps):
            stats["bad_steps"] += 1
            continue
        if not DEPENDENCY_FORMAT.match(deps):  # the official code's ``re.match``: a prefix match
            stats["bad_dependencies"] += 1
            continue
        if fence is not None and np.mean([len(x) for x in steps]) > fence:  # an outlier (the code's `<` drops ties too)
            stats["long_steps"] += 1
            continue
        stats["kept"] += 1
        out.predict.append(PredictDemo(predict["question"], tuple(predict.get("context", [])), rationale,
                                       predict["answer"], label))
        out.plan.append(PlanDemo(plan["question"], tuple(plan.get("context", [])), steps, deps, label))
        if rewrite is not None:
            out.rewrite.append(RewriteDemo(rewrite["question"], rewrite["context_text"], rewrite["rewrite"], label))
    out.stats = stats
    return out


def _every_call(runs: list[dict[str, Any]]) -> DemoSet:
    """hopqa's earlier harvest: every recorded call a candidate, each kind filtered on its own."""
    out = DemoSet()
    stats = dict.fromkeys(["runs", "matched", "failed", "predict_candidates", "predict_bad_citations",
                           "plan_candidates", "plan_bad_dependencies", "plan_long_steps", "rewrite_candidates"], 0)
    plans: list[PlanDemo] = []
    seen: set[tuple[str, str]] = set()
    for run, label in _matched(runs, stats):
        for r in run.get("records", []):
            key = (r["kind"], json.dumps([r.get("question"), r.get("context"), r.get("context_text")]))
            if key in seen:
                continue
            seen.add(key)
            if r["kind"] == "predict":
                stats["predict_candidates"] += 1
                rationale = normalize_citations(r.get("rationale", ""))
                if rationale is None or not r.get("answer"):
                    stats["predict_bad_citations"] += 1
                    continue
                out.predict.append(PredictDemo(r["question"], tuple(r.get("context", [])), rationale, r["answer"], label))
            elif r["kind"] == "plan":
                stats["plan_candidates"] += 1
                deps = " ".join(str(r.get("dependencies", "")).split()) or "None"
                steps = tuple(r.get("steps", []))
                if not steps or not well_formed_dependencies(deps):
                    stats["plan_bad_dependencies"] += 1
                    continue
                plans.append(PlanDemo(r["question"], tuple(r.get("context", [])), steps, deps, label))
            elif r["kind"] == "rewrite":
                stats["rewrite_candidates"] += 1
                out.rewrite.append(RewriteDemo(r["question"], r["context_text"], r["rewrite"], label))
    fence = iqr_upper_fence([len(s.split()) for p in plans for s in p.steps])
    for p in plans:
        if fence is not None and any(len(s.split()) > fence for s in p.steps):
            stats["plan_long_steps"] += 1
        else:
            out.plan.append(p)
    out.stats = stats
    return out


# -- selection -------------------------------------------------------------------------------------------
def select_balanced(demos: Sequence[Any], k: int, seed: int = 0) -> list[Any]:
    """Balanced sampling: shuffle (seeded) within and across answer classes, then take one per
    class in turn until ``k`` are chosen."""
    rng = random.Random(seed)
    classes: dict[str, list[Any]] = {}
    for d in demos:
        classes.setdefault(d.label, []).append(d)
    groups = list(classes.values())
    rng.shuffle(groups)
    for g in groups:
        rng.shuffle(g)
    chosen: list[Any] = []
    while len(chosen) < k and any(groups):
        for g in groups:
            if g and len(chosen) < k:
                chosen.append(g.pop())
    return chosen


def select_knn(demos: Sequence[Any], question: str, k: int, embedder: Any) -> list[Any]:
    """The ``k`` demonstrations whose question is most similar to ``question`` (cosine of
    sentence embeddings), ordered from least to most similar (the nearest next to the query)."""
    if not demos or k <= 0:
        return []
    vecs = embedder.encode([question, *[d.question for d in demos]])
    sims = vecs[1:] @ vecs[0]
    order = np.argsort(-sims, kind="stable")[:k]
    return [demos[i] for i in reversed(order)]
