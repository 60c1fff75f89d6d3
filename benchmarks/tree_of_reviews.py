"""Tree of Reviews and CoR against Retrieve-then-Read and IRCoT on the embedded Qwen (issue 18).

    .venv/bin/python benchmarks/tree_of_reviews.py [--datasets 2wikimultihopqa,musique]
        [--limits 5,10] [--methods retrieve-then-read,cor,ircot,tor] [--llm embedded:qwen2.5-1.5b]
        [--out runs/bench-tor] [--report-only] [--figures FILE] [--merge]

Every (dataset, method) is one ``hopqa eval`` run on the first dev questions in the distractor
setting, each method with its defaults (ToR: depth 3, widths 5,3,3, MPC expansion, both
prunings, evidence fusion), under ``OUT/``. The runs grow in steps (``--limits``: every method
on both datasets reaches 5 questions before any goes on to 10), and each is resumable: re-running
continues where it stopped and a finished question is never redone (run it in the background,
one model process at a time; ToR takes minutes a question on 2 cores). The LLM response cache is
off so that seconds per question are real.

Prints, per dataset, one row per method: EM, F1, Recall@15 (the evaluation's supporting-paragraph
recall: every method here returns at most 15 paragraphs — Retrieve-then-Read its k=5, IRCoT its
``max_paragraphs=15``, CoR at most 3 turns of 5, ToR its ``recall_k=15`` ranking), #API (LLM calls
per question), #Doc (distinct paragraphs reviewed), #Doc/#API, #Evidence, the parse rate (of ToR's
and CoR's reviews, of IRCoT's structured steps) and the share a forgiving rule read, and seconds
per question — the columns of the paper's Tables 1, 2 and 5. ``--figures`` (default
``OUT/figures.json``) writes those rows (each run's ``summarize`` metrics and cost, and its F1 by
question id, from which ``benchmarks/doc_numbers.py`` recomputes a paired difference the docs
quote) as JSON with the date, machine, model and command (``benchmarks/figures.py``), for
``benchmarks/doc_tables.py`` to render the docs' tables from: copied to
``docs/results/tree-of-reviews.json``, each dataset it has rows of gets its
``tree-of-reviews-DATASET`` table in docs/benchmarks/tree-of-reviews.md. With ``--merge`` the figures
file keeps the rows it already has of the datasets this report does not cover (a dataset measured
on another day, whose runs are gone), and the ``about`` of the run they came from under
``about.earlier``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

# benchmarks/figures.py and doc_tables.py (the script's folder is on sys.path)
from doc_tables import tree_of_reviews_table
from figures import about, summary_row, write_figures


def run(args: argparse.Namespace, dataset: str, method: str, limit: int) -> None:
    cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", dataset, "--split", "dev", "--setting",
           "distractor", "--limit", str(limit), "--llm", args.llm, "--method", method, "--out", args.out,
           "--no-progress", "--no-cache"]
    t0 = time.time()
    print(f"[{time.strftime('%H:%M:%S')}] {dataset} {method} (first {limit}) ...", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    print(f"[{time.strftime('%H:%M:%S')}] {dataset} {method} done in {time.time() - t0:.0f} s", file=sys.stderr,
          flush=True)


def report(args: argparse.Namespace, datasets: list[str], methods: list[str]) -> None:
    rows: list[dict] = []
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"LLM {args.llm}; dev, distractor setting; LLM response cache off")
    for dataset in datasets:
        print(f"\n{dataset}\n")
        mine, missing = [], []
        for method in methods:
            path = Path(args.out) / f"{dataset}-dev-distractor" / method / "results.jsonl"
            if not path.is_file():
                missing.append(method)
                continue
            mine.append({"dataset": dataset, "method": method, **summary_row(path)[1]})
        if mine:
            print(tree_of_reviews_table(dataset, mine), end="")
        for method in missing:
            print(f"(not run: {method})")
        rows += mine
    target = Path(args.figures or Path(args.out) / "figures.json")
    now = about(llm=args.llm, datasets=datasets, setting="distractor", response_cache="off")
    if args.merge and target.is_file():
        rows, now = merged(json.loads(target.read_text(encoding="utf-8")), rows, now)
    write_figures(target, now, rows=rows)
    print(f"figures: {target}", file=sys.stderr)


def merged(old: dict, rows: list[dict], now: dict) -> tuple[list[dict], dict]:
    """``--merge``: the rows of ``old`` (a figures file this script wrote) of the datasets ``rows``
    do not have, followed by ``rows``; ``now`` with the datasets of both and, under ``earlier``,
    where each kept dataset was measured: the entry of ``old``'s own ``earlier`` that has it, or
    ``old``'s ``about`` (without its ``earlier``) for those it measured itself."""
    measured = {r["dataset"] for r in rows}
    kept = [r for r in old["rows"] if r["dataset"] not in measured]
    if not kept:
        return rows, now
    keep = list(dict.fromkeys(r["dataset"] for r in kept))
    before = old["about"].get("earlier", [])
    earlier = [{**e, "datasets": [d for d in e["datasets"] if d in keep]} for e in before
               if set(e["datasets"]) & set(keep)]
    listed = {d for e in before for d in e["datasets"]}
    if own := [d for d in keep if d not in listed]:
        earlier.append({**{k: v for k, v in old["about"].items() if k != "earlier"}, "datasets": own})
    return kept + rows, {**now, "datasets": list(dict.fromkeys(keep + now["datasets"])), "earlier": earlier}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="2wikimultihopqa,musique")
    ap.add_argument("--limits", default="5,10", help="question counts to reach, in steps")
    ap.add_argument("--methods", default="retrieve-then-read,cor,ircot,tor")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--out", default="runs/bench-tor")
    ap.add_argument("--report-only", action="store_true", help="print the table of what has run")
    ap.add_argument("--figures", help="where the rows go as JSON (default OUT/figures.json)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the figures file's rows of the datasets this report does not cover")
    args = ap.parse_args()
    datasets = [d for d in args.datasets.split(",") if d]
    methods = [m for m in args.methods.split(",") if m]
    if not args.report_only:
        for limit in [int(x) for x in args.limits.split(",") if x]:
            for dataset in datasets:
                for method in methods:
                    run(args, dataset, method, limit)
    report(args, datasets, methods)
    print(json.dumps({"finished": time.strftime("%Y-%m-%d %H:%M:%S")}))


if __name__ == "__main__":
    main()
