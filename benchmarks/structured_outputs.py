"""Structured outputs on the embedded Qwen: each method with ``structured=off`` (the papers'
free text) and ``structured=auto`` (JSON schemas through llama.cpp grammars), against
Retrieve-then-Read on the same questions (issue 16).

    .venv/bin/python benchmarks/structured_outputs.py [--datasets musique,hotpotqa] [--limit 10]
        [--methods retrieve-then-read,ircot,self-ask,self-dc,self-dc-verb,gensco-stop,hgot] [--modes auto,off]
        [--llm embedded:qwen2.5-1.5b] [--out runs/bench-issue16] [--report-only] [--figures FILE]

Every (dataset, mode, method) is one ``hopqa eval`` run in the distractor setting under
``OUT/<mode>/``, resumable: re-running continues where it stopped, and a finished question is
never redone (run it in the background, one model process at a time; it takes hours on 2
cores). Retrieve-then-Read has no structured step and runs once. Self-DC runs with
``confidence=prob`` (token probabilities: the model is loaded with ``logits_all=1`` for it),
``self-dc-verb`` is Self-DC with the paper's default verbal confidence (for its histogram), HGOT
with the cheap settings ``samples=2 max_steps=2 entailment_delta=false``. The LLM response cache
is off so that seconds per question are real.

Prints, per dataset, one row per method and mode (``doc_tables.structured_outputs_table``): EM,
F1, supporting-paragraph recall, the parse rate (structured outputs read as asked) and fallback
rate, LLM calls and seconds per question, with Retrieve-then-Read's F1 on the same questions;
then the Self-DC confidence histogram (tenths) per mode. ``--figures`` (default
``OUT/figures.json``) writes the rows (each run's ``summarize`` metrics and cost, its F1 by
question id, Retrieve-then-Read's F1 on the same questions) and the confidence histograms as
JSON with the date, machine, model and command (``benchmarks/figures.py``), for
``benchmarks/doc_tables.py`` to render the docs' tables from: the docs keep one file a dataset,
``docs/results/structured-outputs-DATASET.json``, written by ``--datasets DATASET --figures``
(each dataset is hours of runs of its own).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

# benchmarks/figures.py and doc_tables.py (the script's folder is on sys.path)
from doc_tables import structured_outputs_table
from figures import about, summary_row, write_figures

from hopqa.evaluation.runner import read_results

#: Options per method (beyond ``structured``), as ``--set`` values.
METHOD_OPTIONS: dict[str, list[str]] = {
    "self-dc": ["confidence=prob"],
    "self-dc-verb": ["confidence=verb"],
    "hgot": ["samples=2", "max_steps=2", "entailment_delta=false"],
}
#: Labels that run a registered method under another name (their runs go to ``OUT/<mode>-<label>/``).
VARIANTS = {"self-dc-verb": "self-dc"}
#: Methods whose LLM must return token log-probabilities.
NEEDS_LOGPROBS = {"self-dc"}
#: Methods without a structured step (run once, under ``off``).
UNSTRUCTURED = {"retrieve-then-read"}


def mode_dir(out: Path, mode: str, label: str) -> Path:
    return out / (f"{mode}-{label}" if label in VARIANTS else mode)


def run_dir(out: Path, mode: str, dataset: str, label: str) -> Path:
    return mode_dir(out, mode, label) / f"{dataset}-dev-distractor" / VARIANTS.get(label, label)


def run(args: argparse.Namespace, dataset: str, mode: str, label: str) -> None:
    method = VARIANTS.get(label, label)
    needs_logprobs = method in NEEDS_LOGPROBS and "confidence=verb" not in METHOD_OPTIONS.get(label, [])
    llm = args.llm + ("?logits_all=1" if needs_logprobs else "")
    sets = [*METHOD_OPTIONS.get(label, []), *([] if method in UNSTRUCTURED else [f"structured={mode}"])]
    cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", dataset, "--split", "dev", "--setting",
           "distractor", "--limit", str(args.limit), "--llm", llm, "--method", method, "--out",
           str(mode_dir(Path(args.out), mode, label)), "--no-progress", "--no-cache"]
    for item in sets:
        cmd += ["--set", item]
    t0 = time.time()
    print(f"[{time.strftime('%H:%M:%S')}] {dataset} {mode} {method} ...", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    print(f"[{time.strftime('%H:%M:%S')}] {dataset} {mode} {method} done in {time.time() - t0:.0f} s",
          file=sys.stderr, flush=True)


def confidences(records: dict[str, dict]) -> list[float]:
    """Every confidence a Self-DC trace recorded (its ``confidence`` steps: the root question
    and each sub-question)."""
    out: list[float] = []
    stack = [r.get("trace") for r in records.values() if r.get("trace")]
    while stack:
        step = stack.pop()
        c = (step.get("outputs") or {}).get("confidence")
        if step.get("kind") == "confidence" and isinstance(c, (int, float)):
            out.append(float(c))
        stack.extend(step.get("children") or ())
    return out


def cited_samples(records: dict[str, dict]) -> tuple[int, int]:
    """(HGOT Predict samples citing at least one passage, all samples) over the traces."""
    cited = total = 0
    stack = [r.get("trace") for r in records.values() if r.get("trace")]
    while stack:
        step = stack.pop()
        for sample in (step.get("outputs") or {}).get("samples") or ():
            if isinstance(sample, dict) and "statements" in sample:
                total += 1
                cited += any(st.get("citations") for st in sample["statements"] or ())
        stack.extend(step.get("children") or ())
    return cited, total


def report(args: argparse.Namespace, datasets: list[str], modes: list[str], methods: list[str]) -> None:
    out = Path(args.out)
    rows: list[dict] = []
    histograms: list[dict] = []
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"LLM {args.llm}; dev, distractor setting, first {args.limit} questions; LLM response cache off")
    for dataset in datasets:
        base = run_dir(out, "off", dataset, "retrieve-then-read") / "results.jsonl"
        rtr = read_results(base) if base.is_file() else {}
        print(f"\n{dataset}\n")
        mine, missing = [], []
        for method in methods:
            for mode in (["off"] if method in UNSTRUCTURED else modes):
                path = run_dir(out, mode, dataset, method) / "results.jsonl"
                if not path.is_file():
                    missing.append(f"{method} ({'–' if method in UNSTRUCTURED else mode})")
                    continue
                records, figures = summary_row(path)
                same = [rtr[i]["metrics"].get("f1", 0.0) for i in records if i in rtr]
                mine.append({"dataset": dataset, "method": method,
                             "structured": None if method in UNSTRUCTURED else mode, **figures,
                             "rtr_f1_same": sum(same) / len(same) if same else None, "rtr_n_same": len(same)})
        if mine:
            print(structured_outputs_table(dataset, mine), end="")
        for name in missing:
            print(f"(not run: {name})")
        rows += mine
        for mode in modes:
            path = run_dir(out, mode, dataset, "hgot") / "results.jsonl"
            if "hgot" in methods and path.is_file():
                cited, total = cited_samples(read_results(path))
                print(f"\nhgot ({mode}): {cited} of {total} Predict samples cite a passage")
        for label in ("self-dc", "self-dc-verb"):
            for mode in modes:
                path = run_dir(out, mode, dataset, label) / "results.jsonl"
                if label in methods and path.is_file():
                    values = confidences(read_results(path))
                    hist = Counter(min(9, int(v * 10)) for v in values)
                    cells = " ".join(f"{k / 10:.1f}:{hist[k]}" for k in range(10))
                    print(f"\n{label} confidences ({mode}, {len(values)} values, bins of 0.1): {cells}")
                    histograms.append({"dataset": dataset, "method": label, "structured": mode,
                                       "bins": [hist[k] for k in range(10)]})
    target = write_figures(args.figures or out / "figures.json",
                           about(llm=args.llm, datasets=datasets, limit=args.limit, setting="distractor",
                                 response_cache="off"), rows=rows, confidence_histograms=histograms)
    print(f"figures: {target}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="musique,hotpotqa")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--methods", default="retrieve-then-read,ircot,self-ask,self-dc,self-dc-verb,gensco-stop,hgot")
    ap.add_argument("--modes", default="auto,off")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--out", default="runs/bench-issue16")
    ap.add_argument("--report-only", action="store_true", help="print the table of what has run")
    ap.add_argument("--figures", help="where the rows go as JSON (default OUT/figures.json)")
    args = ap.parse_args()
    datasets = [d for d in args.datasets.split(",") if d]
    modes = [m for m in args.modes.split(",") if m]
    methods = [m for m in args.methods.split(",") if m]
    if not args.report_only:
        for dataset in datasets:
            for method in methods:
                for mode in (["off"] if method in UNSTRUCTURED else modes):
                    run(args, dataset, mode, method)
    report(args, datasets, modes, methods)
    print(json.dumps({"finished": time.strftime("%Y-%m-%d %H:%M:%S")}))


if __name__ == "__main__":
    main()
