"""HGOT demonstrations (Fang et al. 2024, Appendix D): DSP-style bootstrapping and selection.

**Bootstrapping.** Following DSP, a demonstration is a training example run through HGOT
itself, kept only when the final prediction matches the gold answer (normalized exact match
against any gold alias). Every procedure call of a kept run becomes a candidate
demonstration of its prompt: Predict (PROBE and INFER: context, question, the winning
rationale, answer), Plan (context, question, steps, dependencies; also used as Self-reflect
demonstrations) and Rewrite (context, rewrite). Then the filters of Appendix D:

- Predict: citation marks ``(\\[[0-9]+\\])+`` are moved to the end of their sentence
  (``normalize_citations``); the rationale must then match ``^([^\\[\\.]+(\\[[0-9]+\\])*\\.)+$``
  (one statement per sentence, marks before the full stop) or the demonstration is dropped.
- Plan: the dependency text must match ``None|((\\s*([Ss]tep [0-9]+) depends on ([Ss]tep
  [0-9]+)\\.\\s*)+)`` in full (``well_formed_dependencies``; an equivalent linear-time
  form of it), and a plan with a step whose
  length (in words) is an upper IQR outlier over all candidate plans' steps (longer than
  Q3 + 1.5·IQR) is dropped: such steps tend to restate the whole question.

Runs are recorded example by example in a JSON-lines file in the demo cache (``hopqa.jsonl``,
the evaluation runner's format: durable appends; a torn last line, from a kill, stays on a line
of its own that is skipped),
keyed by the LLM, the training split and the HGOT settings that shape the outputs, so an
interrupted bootstrap resumes where it stopped and a finished one is never run again. The filters are
applied when the file is read (cheap), so they can change without re-running the model.

Which retriever: a training example's own paragraphs (``CandidatePool``, the distractor
setting) when the file has them, else the method's retriever (FEVER and Open-SQuAD samples).

**Selection** (Appendix D), per prompt: ``sampling`` — balanced sampling, a seeded random
choice that keeps an even distribution of answer classes (round robin over the classes: the
label for FEVER, the normalized answer otherwise); ``knn`` — the k demonstrations whose
questions are nearest to the prompt's question by sentence embedding (all-MiniLM-L6-v2,
Liu et al. 2022), most similar last, i.e. next to the question.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import random
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hopqa import jsonl
from hopqa.console import progress_bar
from hopqa.text import exact_match, normalize_answer

#: Appendix D: a run of citation marks.
CITATION_MARKS = re.compile(r"(\[[0-9]+\])+")
#: Appendix D: every sentence is text without '[' or '.', then citation marks, then a full stop.
RATIONALE_FORMAT = re.compile(r"^([^\[\.]+(\[[0-9]+\])*\.)+$")
#: Appendix D: well-formed dependency text of a Plan demonstration. The paper writes it
#: ``None|((\s*([Ss]tep [0-9]+) depends on ([Ss]tep [0-9]+)\.\s*)+)``; this is the same language
#: with the two adjacent ``\s*`` of consecutive repetitions merged into one, which makes a failing
#: full match linear instead of quadratic in the length of a whitespace run.
DEPENDENCY_FORMAT = re.compile(r"None|(?:\s*[Ss]tep [0-9]+ depends on [Ss]tep [0-9]+\.)+\s*")
#: Bumped when the record format or the way runs are made changes (invalidates caches).
BOOTSTRAP_FORMAT = 5


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


def iqr_upper_fence(lengths: Sequence[float], factor: float = 1.5) -> float | None:
    """Q3 + factor·IQR of ``lengths``; ``None`` with fewer than 4 values (no meaningful quartiles)."""
    if len(lengths) < 4:
        return None
    q1, q3 = np.percentile(np.asarray(lengths, dtype=float), [25, 75])
    return float(q3 + factor * (q3 - q1))


def answer_class(answers: Sequence[str]) -> str:
    """The class used by balanced sampling: a FEVER label as it is, else the normalized answer."""
    first = answers[0] if answers else ""
    return first.upper() if first.upper() in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO") else normalize_answer(first)


# -- recording what a run produces -----------------------------------------------------------------------
_RECORDER: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("hgot_recorder", default=None)


@contextmanager
def recording() -> Iterator[list[dict[str, Any]]]:
    """Collect the ``record`` calls made by HGOT procedures inside the block (thread-safe append)."""
    records: list[dict[str, Any]] = []
    token = _RECORDER.set(records)
    try:
        yield records
    finally:
        _RECORDER.reset(token)


def record(kind: str, **data: Any) -> None:
    """Called by HGOT's predict / plan / rewrite; does nothing outside ``recording()``."""
    records = _RECORDER.get()
    if records is not None:
        records.append({"kind": kind, **data})


# -- from recorded runs to a demonstration set ---------------------------------------------------------
def build_demo_set(runs: Iterable[dict[str, Any]]) -> DemoSet:
    """Apply DSP's match rule and Appendix D's filters to recorded runs (see the module docstring)."""
    out = DemoSet()
    stats = dict.fromkeys(["runs", "matched", "failed", "predict_candidates", "predict_bad_citations",
                           "plan_candidates", "plan_bad_dependencies", "plan_long_steps", "rewrite_candidates"], 0)
    plans: list[PlanDemo] = []
    seen: set[tuple[str, str]] = set()
    for run in runs:
        stats["runs"] += 1
        if run.get("error"):
            stats["failed"] += 1
            continue
        if not run.get("matched"):
            continue
        stats["matched"] += 1
        label = answer_class(run.get("answers") or [])
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


# -- bootstrapping ---------------------------------------------------------------------------------------
def cache_key(**parts: Any) -> str:
    """A short stable hash of the settings a bootstrap depends on."""
    blob = json.dumps({"format": BOOTSTRAP_FORMAT, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_runs(path: Path) -> list[dict[str, Any]]:
    """Recorded runs of a bootstrap file, one per example (``hopqa.jsonl``: a line that does not
    parse, such as a torn one from a kill, is skipped; the newest line of an example wins)."""
    return list(jsonl.read(path, key="id").values())


def bootstrap(examples: Sequence[Any], run: Callable[[Any], tuple[str, list[dict[str, Any]], str | None]],
              path: Path, *, progress: bool = True) -> DemoSet:
    """Run ``run(example) -> (prediction, records, error)`` on every example not yet in ``path``
    (appending one JSON line per example as it finishes, durably), then build the demonstration set."""
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {r.get("id") for r in read_runs(path)}
    todo = [ex for ex in examples if ex.id not in done]
    if todo:
        with jsonl.Appender(path, default=None) as out:
            for ex in progress_bar(desc="HGOT demonstrations (bootstrapping)", enabled=progress, iterable=todo,
                                   unit="example"):
                prediction, records, error = run(ex)
                matched = bool(prediction) and exact_match(prediction, ex.answers) == 1.0
                out.write({"id": ex.id, "question": ex.question, "answers": list(ex.answers),
                           "prediction": prediction, "matched": matched, "error": error,
                           "records": records if matched else []})
    wanted = {ex.id for ex in examples}
    return build_demo_set(r for r in read_runs(path) if r.get("id") in wanted)


def save_demo_set(demos: DemoSet, path: Path) -> None:
    """Write the filtered set next to the runs (for people to read; the runs are the source)."""
    path.write_text(json.dumps(asdict(demos), ensure_ascii=False, indent=1), encoding="utf-8")


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
