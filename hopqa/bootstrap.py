"""Bootstrapping HGOT's demonstrations (Fang et al. 2024, Appendix D), DSP-style.

A client of the method, like the evaluation runner (the shape of DSPy's
``teleprompt/bootstrap.py``): ``bootstrap_hgot`` runs HGOT, with the paper's own Appendix C
demonstrations, on training examples, keeps the runs whose prediction matches the gold answer
(normalized exact match against any alias), and reads each kept run's **trace** for the
candidate demonstrations (``candidates_from_trace``); HGOT itself records nothing beyond its
trace and takes the finished ``DemoSet`` as its ``demo_set`` argument.

``bootstrap_mode=official`` (default: the authors' code, ``pipeline.py`` ``annotate``) runs
HGOT as that code does while annotating: two levels (``depth=1`` here), no NLI voting
(``citation_quality``, ``entailment_delta`` and ``passage_scoring`` off: a plain majority,
σ stays the retriever's), every passage in the plan context (``plan_context_sigma=0``), and
records one demonstration of each kind per run: the root's final Predict (its query, the
first sample giving the voted answer, its passages whole), the first Plan (query, steps, the
dependencies as "Step b depends on Step a." from the parsed edges or "None", the passages it
was shown) and the first Rewrite (the step, the context it was shown, the rewrite).
``build_demo_set`` then keeps a run's demonstrations all together or not at all.

``bootstrap_mode=every-call`` (hopqa's earlier choice) runs HGOT with the method's own
settings and takes every call of a kept run: every ``probe`` and ``infer`` step (the
best-scored sample among those giving the voted answer, passages by their first 30 words),
every ``plan`` step with steps, every ``rewrite`` step that rewrote; each kind filtered on
its own. Runs are recorded example
by example in a JSON-lines file (``hopqa.jsonl``: durable appends; a torn last line from a
kill is skipped) under ``<home>/demos`` or ``config.demo_cache``, named by a hash of the LLM,
the training split, the HGOT settings that shape the outputs and, when some training example
has no paragraphs of its own, the corpus retriever: an interrupted bootstrap resumes where it
stopped and a finished one is never run again. Next to it, ``.demos.json`` holds the filtered
set for people to read.

Which retriever: a training example's own paragraphs (``CandidatePool``, the distractor
setting) when the file has them, else ``corpus()`` (FEVER and Open-SQuAD samples). The runs
happen outside any question's trace and usage.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hopqa import jsonl
from hopqa.config import default_home
from hopqa.console import progress_bar
from hopqa.datasets import DatasetError, load_dataset
from hopqa.methods.base import MethodError
from hopqa.methods.hgot import HGOT, HGOTConfig
from hopqa.methods.hgot.demos import DemoSet, build_demo_set
from hopqa.retrieval.base import Retriever, RetrieverBase
from hopqa.retrieval.pool import CandidatePool, UnboundPool
from hopqa.text import exact_match, normalize_answer, render_passage
from hopqa.trace import Step, Trace
from hopqa.types import Example, Passage

#: Bumped when the record format or the way runs are made changes (invalidates cached runs).
BOOTSTRAP_FORMAT = 6
#: Words of each passage a Predict / Plan demonstration shows (``every-call``; ``official``: whole).
DEMO_PASSAGE_WORDS = 30


@dataclass
class Bootstrap:
    """A finished bootstrap: the filtered demonstrations and the file of recorded runs."""

    demo_set: DemoSet
    runs_file: Path

    @property
    def demos_file(self) -> Path:
        return self.runs_file.with_suffix(".demos.json")


class _Remembering(RetrieverBase):
    """A retriever that remembers every passage it returned (the trace keeps passage ids only)."""

    def __init__(self, inner: Retriever, seen: dict[str, Passage]) -> None:
        self.inner, self.seen = inner, seen
        self.name = getattr(inner, "name", type(inner).__name__)

    def search(self, query: str, k: int = 5) -> list[Passage]:
        hits = self.inner.search(query, k)
        self.seen.update((p.id, p) for p in hits)
        return hits


# -- from a trace to candidate demonstrations -------------------------------------------------------------
def _shown(ids: Sequence[str], passages: Mapping[str, Passage], words: int | None = DEMO_PASSAGE_WORDS) -> list[str]:
    return [render_passage(passages[pid], i + 1, max_words=words) for i, pid in enumerate(ids)]


def _predict(s: Step, passages: Mapping[str, Passage], words: int | None = DEMO_PASSAGE_WORDS) -> dict[str, Any] | None:
    answer = s.outputs.get("answer") or ""
    if not answer:
        return None
    voted = [t for t in s.outputs.get("samples", []) if normalize_answer(t["answer"]) == normalize_answer(answer)]
    best = max(voted, key=lambda t: t["rho"])
    return {"kind": "predict", "question": s.inputs["query"], "rationale": best["rationale"], "answer": best["answer"],
            "context": _shown(s.outputs.get("passages", []), passages, words)}


def _plan(s: Step, passages: Mapping[str, Passage], words: int | None = DEMO_PASSAGE_WORDS,
          formal: bool = False) -> dict[str, Any] | None:
    steps = list(s.outputs.get("steps") or [])
    if not steps:
        return None
    shown = [x["id"] for x in s.outputs.get("context", [])]  # the passages the Plan prompt showed
    if formal:  # the official code writes the parsed edges back as sentences
        edges = s.outputs.get("edges") or []
        dependencies = " ".join(f"Step {b} depends on Step {a}." for a, b in edges) or "None"
    else:
        dependencies = s.outputs.get("dependencies") or ("None" if len(steps) == 1 else "")
    return {"kind": "plan", "question": s.inputs["query"], "steps": steps, "dependencies": dependencies,
            "context": _shown(shown, passages, words)}


def _rewrite(s: Step) -> dict[str, Any] | None:
    if "context" not in s.outputs:  # the step was kept as it was: nothing to learn from
        return None
    return {"kind": "rewrite", "question": s.outputs["original"], "context_text": s.outputs["context"],
            "rewrite": s.outputs["rewritten"]}


def candidates_from_trace(trace: Trace, passages: Mapping[str, Passage], mode: str = "official") -> list[dict[str, Any]]:
    """The candidate demonstrations of one HGOT run as records (``{"kind", "question", ...}``,
    see the module docstring): ``official``, the root's final Predict, the first Plan and the
    first Rewrite; ``every-call``, every Predict, Plan and Rewrite call in the order they were
    made. ``passages`` maps the ids in the trace to the passages."""
    if mode == "official":
        return _official_candidates(trace, passages)
    records = []
    for s in trace.root.walk():  # pre-order: the order the calls were made
        if s.kind in ("probe", "infer"):
            records.append(_predict(s, passages))
        elif s.kind == "plan":
            records.append(_plan(s, passages))
        elif s.kind == "rewrite":
            records.append(_rewrite(s))
    return [r for r in records if r is not None]


def _official_candidates(trace: Trace, passages: Mapping[str, Passage]) -> list[dict[str, Any]]:
    steps = list(trace.root.walk())
    roots = [s for s in steps if s.kind == "traverse" and s.inputs.get("depth") == 0]
    records: list[dict[str, Any]] = []
    if roots:
        final = [c for c in roots[0].children if c.kind in ("probe", "infer")]
        if final and (record := _predict(final[-1], passages, None)) is not None:
            records.append(record)
    plans = [s for s in steps if s.kind == "plan" and s.outputs.get("steps")]
    if plans and (record := _plan(plans[0], passages, None, formal=True)) is not None:
        records.append(record)
    rewrites = [r for r in (_rewrite(s) for s in steps if s.kind == "rewrite") if r is not None]
    return records + rewrites[:1]


#: What the official code changes while it annotates (``pipeline.py``: depth 2, no electoral
#: college, ``B[0] = 0``), in this config's terms.
OFFICIAL_BOOTSTRAP_SETTINGS: dict[str, Any] = {
    "depth": 1, "citation_quality": False, "entailment_delta": False, "passage_scoring": False,
    "plan_context_sigma": 0.0,
}


# -- the runs ---------------------------------------------------------------------------------------------
def cache_key(**parts: Any) -> str:
    """A short stable hash of the settings a bootstrap depends on."""
    blob = json.dumps({"format": BOOTSTRAP_FORMAT, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def runs_file(llm_identity: dict[str, Any], config: HGOTConfig, retriever: str | None = None,
              home: str | Path | None = None) -> Path:
    """Where the runs of this LLM / training split / configuration are recorded."""
    shaping = {k: v for k, v in vars(config).items()
               if not k.startswith(("demo_", "bootstrap_")) and k not in ("num_demos", "seed")}
    key = cache_key(llm=llm_identity, dataset=config.bootstrap_dataset, config=shaping, retriever=retriever,
                    mode=config.bootstrap_mode)
    root = Path(config.demo_cache) if config.demo_cache else default_home(home) / "demos"
    return root / f"hgot-{config.bootstrap_dataset.replace(':', '-')}-{key}.jsonl"


def read_runs(path: Path) -> list[dict[str, Any]]:
    """Recorded runs of a bootstrap file, one per example (a line that does not parse, such as a
    torn one from a kill, is skipped; the newest line of an example wins)."""
    return list(jsonl.read(path, key="id").values())


def record_runs(examples: Sequence[Example], run: Callable[[Example], tuple[str, list[dict[str, Any]], str | None]],
                path: Path, *, progress: bool = True, mode: str = "official") -> DemoSet:
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
    return build_demo_set((r for r in read_runs(path) if r.get("id") in wanted), mode)


def bootstrap_hgot(llm: Any, config: HGOTConfig, *, corpus: Callable[[], Retriever] | None = None,
                   judge: Any = None, embedder: Any = None, home: str | Path | None = None,
                   data_dir: str | Path | None = None, progress: bool = True) -> Bootstrap:
    """Bootstrap (or read back) HGOT's demonstrations for ``config`` (its ``bootstrap_dataset``,
    ``bootstrap_examples`` and the settings that shape outputs) on ``llm``. ``corpus`` gives the
    retriever for training examples without paragraphs (called only if there are some);
    ``judge`` and ``embedder`` are HGOT's. ``MethodError`` if the training split cannot be read."""
    name, _, split = config.bootstrap_dataset.partition(":")
    try:
        examples = load_dataset(name, split or "train", data_dir=data_dir, limit=config.bootstrap_examples, home=home)
    except DatasetError as exc:
        raise MethodError(f"cannot bootstrap HGOT demonstrations from {config.bootstrap_dataset!r}: {exc}") from exc
    retriever = corpus() if corpus is not None and any(not ex.paragraphs for ex in examples) else None
    settings = OFFICIAL_BOOTSTRAP_SETTINGS if config.bootstrap_mode == "official" else {}
    # every run binds its own retriever (``with_retriever``): the runner is built unbound
    runner = HGOT(llm, UnboundPool(), replace(config, demo_source="paper", **settings), judge=judge, embedder=embedder)

    def run(ex: Example) -> tuple[str, list[dict[str, Any]], str | None]:
        seen: dict[str, Passage] = {}
        inner = CandidatePool(ex.paragraphs) if ex.paragraphs else retriever
        if inner is None:
            return "", [], "the example has no paragraphs and no retriever was given"
        # a fresh context: the runs are not part of any question's trace or usage
        ans = contextvars.Context().run(runner.with_retriever(_Remembering(inner, seen)).answer, ex.question)
        return ans.answer, candidates_from_trace(ans.trace, seen, config.bootstrap_mode), ans.error

    path = runs_file(runner.llm.identity(), config, getattr(retriever, "name", None) if retriever is not None else None,
                     home)
    demo_set = record_runs(examples, run, path, progress=progress, mode=config.bootstrap_mode)
    result = Bootstrap(demo_set, path)
    result.demos_file.write_text(json.dumps(asdict(demo_set), ensure_ascii=False, indent=1), encoding="utf-8")
    return result
