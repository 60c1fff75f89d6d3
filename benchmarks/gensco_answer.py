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
``short`` ones, and each answer that changed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

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


def report(path: Path, mode: str, dataset: str) -> None:
    rows = [json.loads(line) for line in path.open()] if path.exists() else []
    if not rows:
        print(f"{dataset} {mode}: nothing measured yet")
        return
    n = len(rows)

    def mean(metric, key: str) -> float:
        return sum(metric(r[key], r["gold"]) for r in rows) / n

    print(f"| {dataset} | {mode} | {n} | {mean(exact_match, 'paper'):.2f} | {mean(token_f1, 'paper'):.2f} | "
          f"{mean(exact_match, 'short'):.2f} | {mean(token_f1, 'short'):.2f} |")
    for r in rows:
        if r["paper"] != r["short"]:
            print(f"    {r['id']}: {r['paper'][:90]!r} -> {r['short'][:90]!r} (gold {r['gold'][0]!r})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="runs/bench-issue16")
    ap.add_argument("--modes", default="auto,off")
    ap.add_argument("--datasets", default="musique,hotpotqa")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--report-only", action="store_true")
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
    print("| dataset | structured | n | EM paper | F1 paper | EM short | F1 short |")
    print("|---|---|---|---|---|---|---|")
    for mode, dataset in pairs:
        report(Path(args.runs) / "gensco-answer" / f"{mode}-{dataset}.jsonl", mode, dataset)


if __name__ == "__main__":
    main()
