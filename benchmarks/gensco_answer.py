"""GenSco's short-answer remedy (``answer=short``) measured on the stored issue-16 runs.

    .venv/bin/python benchmarks/gensco_answer.py [--runs runs/bench-issue16] [--modes auto,off]
        [--datasets musique,hotpotqa] [--llm embedded:qwen2.5-1.5b] [--report-only]

``answer`` changes only GenSco's last call, the Table 6 answer prompt: every earlier call (the
sub-questions, the scorer's choices, Eq. 1) is the same prompt at temperature 0 with or without
it. So instead of re-running whole walks (about 100 s a question on 2 cores), this re-asks the
answer of each stored ``gensco-stop`` run of ``benchmarks/structured_outputs.py`` with
``answer=short`` on the passages that run selected, built as ``hopqa eval`` builds the method
(the run's own ``config.json`` options, the dataset's demonstrations), and scores both answers
with the evaluation's metrics. One model process; the re-asked answers are appended to
``RUNS/gensco-answer/<mode>-<dataset>.jsonl`` as they come, so a stopped run resumes.

Prints, per (dataset, mode): questions, EM and F1 of the stored (``paper``) answers and of the
``short`` ones (``doc_tables.gensco_answer_table``), and each answer that changed. ``--figures
FILE`` writes those rows (with each answer's F1 by question id) as JSON with the date, machine,
model and command (``benchmarks/figures.py``); the docs keep one file a dataset,
``docs/results/gensco-answer-DATASET.json`` (``--datasets DATASET``), for
``benchmarks/doc_tables.py`` to render the table of the structured-outputs page from.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

# benchmarks/figures.py and doc_tables.py (the script's folder is on sys.path)
from doc_tables import gensco_answer_table
from figures import about, write_figures

from hopqa.build import build_method, load_model
from hopqa.datasets import load_dataset
from hopqa.evaluation.metrics import exact_match, token_f1
from hopqa.evaluation.runner import read_results
from hopqa.trace import Step


def selected_ids(trace: dict | None) -> list[str]:
    """The passage ids of a GenSco trace's ``answer`` step (the walk's selection, in order)."""
    steps = Step.from_dict(trace).find("answer") if trace else []
    return next((list(st.outputs["passages"]) for st in steps if "passages" in st.outputs), [])


def stored_run(runs: Path, mode: str, dataset: str) -> Path:
    return runs / mode / f"{dataset}-dev-distractor" / "gensco-stop"


def reask(args: argparse.Namespace, llm, mode: str, dataset: str) -> Path:
    """Re-asks every stored answer not yet in the output file; returns that file."""
    src = stored_run(Path(args.runs), mode, dataset)
    out = Path(args.runs) / "gensco-answer" / f"{mode}-{dataset}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["id"] for line in out.open()} if out.exists() else set()
    records = read_results(src / "results.jsonl")
    todo = [r for r in records.values() if r["id"] not in done]
    if not todo:
        return out
    options = {**json.loads((src / "config.json").read_text())["options"], "answer": "short"}
    method = build_method("gensco-stop", llm, dataset=dataset, **options)
    examples = {ex.id: ex for ex in load_dataset(dataset, "dev")}
    print(f"[{time.strftime('%H:%M:%S')}] {dataset} {mode}: {len(todo)} answers to re-ask", file=sys.stderr, flush=True)
    with out.open("a") as f:
        for r in todo:
            by_id = {p.id: p for p in examples[r["id"]].paragraphs}
            passages = [by_id[i] for i in selected_ids(r["trace"])]
            answer, raw, how = method.read(r["question"], passages)
            f.write(json.dumps({"id": r["id"], "gold": r["gold"], "paper": r["prediction"], "short": answer,
                                "raw": raw, "parsed_by": how, "passages": [p.id for p in passages]}) + "\n")
            f.flush()
    return out


def summary(path: Path, mode: str, dataset: str) -> dict | None:
    """The row of one (dataset, mode): questions, EM and F1 of the stored (``paper``) and the
    ``short`` answers, each answer's F1 by question id, and the answers that changed; None
    before any was re-asked."""
    rows = [json.loads(line) for line in path.open()] if path.exists() else []
    if not rows:
        return None
    row: dict = {"dataset": dataset, "structured": mode, "n": len(rows)}
    for key in ("paper", "short"):
        row[key] = {"em": sum(exact_match(r[key], r["gold"]) for r in rows) / len(rows),
                    "f1": sum(token_f1(r[key], r["gold"]) for r in rows) / len(rows)}
        row[f"f1_by_id_{key}"] = {r["id"]: token_f1(r[key], r["gold"]) for r in rows}
    row["changed"] = [{"id": r["id"], "paper": r["paper"], "short": r["short"], "gold": r["gold"][0]}
                      for r in rows if r["paper"] != r["short"]]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="runs/bench-issue16")
    ap.add_argument("--modes", default="auto,off")
    ap.add_argument("--datasets", default="musique,hotpotqa")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--figures", help="where the rows go as JSON (default: not written)")
    args = ap.parse_args()
    pairs = [(m, d) for d in args.datasets.split(",") for m in args.modes.split(",")]
    missing = [stored_run(Path(args.runs), m, d) for m, d in pairs
               if not (stored_run(Path(args.runs), m, d) / "results.jsonl").exists()]
    if missing:
        sys.exit(f"no stored gensco-stop run in {', '.join(map(str, missing))}: "
                 "run benchmarks/structured_outputs.py --methods gensco-stop first")
    if not args.report_only:
        llm = load_model(args.llm, cache=False)
        for mode, dataset in pairs:
            reask(args, llm, mode, dataset)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"LLM {args.llm}; gensco-stop's stored selections, the answer re-asked with answer=short")
    rows = []
    for mode, dataset in pairs:
        row = summary(Path(args.runs) / "gensco-answer" / f"{mode}-{dataset}.jsonl", mode, dataset)
        if row:
            rows.append(row)
        else:
            print(f"{dataset} {mode}: nothing measured yet")
    if rows:
        print(gensco_answer_table(rows), end="")
    for row in rows:
        for c in row["changed"]:
            print(f"    {row['dataset']} {row['structured']} {c['id']}: {c['paper'][:90]!r} -> {c['short'][:90]!r} "
                  f"(gold {c['gold']!r})")
    if args.figures:
        target = write_figures(args.figures, about(llm=args.llm, runs=args.runs, datasets=args.datasets.split(","),
                                                   setting="distractor"), rows=rows)
        print(f"figures: {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
