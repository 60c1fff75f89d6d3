"""Which method should ``make demo`` show? Candidates on the shipped dev sets with the embedded Qwen.

    .venv/bin/python benchmarks/demo_choice.py [--limit 10] [--datasets musique,hotpotqa]
        [--setting open] [--llm embedded:qwen2.5-1.5b] [--only NAME,...] [--out runs/demo-choice]
        [--table-only] [--figures FILE]

Runs ``hopqa eval`` for every candidate below on the first ``--limit`` questions of each dataset
(default: the open setting over the demo corpus, as ``hopqa ask`` answers), one model process
at a time, resumably (re-running continues where it stopped; a finished candidate is not run
again), with the LLM response cache off so every figure is a real call. Prints one Markdown
row per candidate: EM / F1 per dataset and on both, LLM calls and seconds per question, and the
machine. Qwen takes ~15 s per single-call question on 2 cores and minutes for the iterative
methods: run it in the background (``nohup ... &``). ``--figures`` (default ``OUT/figures.json``)
writes each candidate's summary per dataset (as ``hopqa eval``'s ``summary.json`` has it) and
its F1 by question id as JSON with the date, machine, model and command
(``benchmarks/figures.py``), for ``benchmarks/doc_tables.py`` (the demo-method table) and
``benchmarks/doc_numbers.py``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

# benchmarks/figures.py and doc_tables.py (the script's folder is on sys.path)
from doc_tables import demo_method_table
from figures import about, summary_row, write_figures

#: (label, method, LLM spec suffix, --set options), cheapest first. Self-DC's 'prob' confidence
#: needs token log-probabilities (logits_all); HGOT runs with the benchmark's cheap settings.
CANDIDATES: list[tuple[str, str, str, list[str]]] = [
    ("retrieve-then-read", "retrieve-then-read", "", []),
    ("self-ask", "self-ask", "", []),
    ("self-dc (prob)", "self-dc", "?logits_all=1", ["confidence=prob"]),
    ("iter-retgen", "iter-retgen", "", []),
    ("ircot", "ircot", "", []),
    ("gensco-stop", "gensco-stop", "", []),
    ("react", "react", "", []),
    ("hgot (samples=2 max_steps=2 entailment_delta=false)", "hgot", "",
     ["samples=2", "max_steps=2", "entailment_delta=false"]),
]


def _slug(label: str) -> str:
    return label.split(" ")[0] + ("-prob" if "prob" in label else "")


def run(args: argparse.Namespace) -> None:
    only = {x for x in args.only.split(",") if x} if args.only else None
    for label, method, suffix, sets in CANDIDATES:
        if only and _slug(label) not in only:
            continue
        for dataset in args.datasets.split(","):
            out = Path(args.out) / _slug(label)
            cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", dataset, "--split", "dev",
                   "--setting", args.setting, "--method", method, "--limit", str(args.limit),
                   "--llm", args.llm + suffix, "--out", str(out), "--no-progress", "--no-cache"]
            for kv in sets:
                cmd += ["--set", kv]
            t0 = time.time()
            print(f"== {dataset} / {label}", flush=True)
            done = subprocess.run(cmd, stdout=subprocess.DEVNULL)
            print(f"   {time.time() - t0:.0f} s" + (f" (exit {done.returncode})" if done.returncode else ""),
                  flush=True)


def table(args: argparse.Namespace) -> None:
    """Print the table of what has run (``doc_tables.demo_method_table``) and write its figures."""
    datasets = args.datasets.split(",")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"LLM {args.llm}; first {args.limit} dev questions of {', '.join(datasets)}, {args.setting} setting; "
          "response cache off")
    rows = []
    for label, method, suffix, sets in CANDIDATES:
        for dataset in datasets:
            path = Path(args.out) / _slug(label) / f"{dataset}-dev-{args.setting}" / method / "results.jsonl"
            if not path.is_file():
                continue
            rows.append({"label": label, "method": method, "options": sets, "llm": args.llm + suffix,
                         "dataset": dataset, **summary_row(path)[1]})
    if rows:
        print(demo_method_table(rows), end="")
    target = write_figures(args.figures or Path(args.out) / "figures.json",
                           about(llm=args.llm, datasets=datasets, setting=args.setting, limit=args.limit,
                                 response_cache="off"), rows=rows)
    print(f"figures: {target}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--datasets", default="musique,hotpotqa")
    ap.add_argument("--setting", default="open")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--only", default="", help="candidate slugs to run (e.g. self-ask,ircot); the table shows all")
    ap.add_argument("--out", default="runs/demo-choice")
    ap.add_argument("--table-only", action="store_true", help="print the table of what has run, run nothing")
    ap.add_argument("--figures", help="where the rows go as JSON (default OUT/figures.json)")
    args = ap.parse_args()
    if not args.table_only:
        run(args)
    table(args)


if __name__ == "__main__":
    main()
