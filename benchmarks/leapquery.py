"""LeapQuery against Retrieve-then-Read, Self-Ask and ITER-RETGEN on the embedded Qwen (issues 19, 29).

    .venv/bin/python benchmarks/leapquery.py [--limit 10] [--methods retrieve-then-read,self-ask,iter-retgen,leapquery]
        [--retriever dense] [--llm embedded:qwen2.5-1.5b] [--bertscore minilm] [--out runs/bench-leapquery-rerank]
        [--report-only] [--figures FILE]

Every method is one ``hopqa eval`` run on the first MuSiQue dev questions in the *open* setting
(one index over the pooled demo corpus: every shipped paragraph, so the retriever must find the
supporting paragraphs among the other questions'; the paper searched all MuSiQue train and dev
paragraphs with Contriever, and ``--retriever dense`` (MiniLM) is the closest setting here),
with ``--support-k 5`` (Recall@5 over the first 5 passages each method used, as the paper
counts) and BERTScore with ``--bertscore`` (``minilm``: the shipped all-MiniLM-L6-v2, not the
paper's model). Each run is resumable: re-running continues where it stopped (one model
process at a time). The LLM response cache is off so that seconds per question are real.

LeapQuery runs with its default reranker (``rerank=auto``: a cross-encoder in the local Hugging
Face cache, else the LLM judge ``llm``; here, where no cross-encoder installs offline, ``llm``)
and in three variants: ``leapquery-free-text`` (``structured=off``), ``leapquery-hybrid``
(``rerank=hybrid``: BM25 over the candidates fused with the MiniLM cosine) and
``leapquery-bi-encoder`` (``rerank=bi-encoder``: the MiniLM cosine, which ranks as the dense
retriever does, so the top 5 cannot change: the control that LeapQuery then equals
Retrieve-then-Read).

Prints one row per method: the reranker it ran (its run's ``config.json``), Recall@5, ROUGE-L,
BERTScore, EM, F1, LLM calls, retrieval calls and seconds per question (the paper's Tables 1
and 2, and the cost), and its F1 against Retrieve-then-Read's on the questions both answered
(the paired difference, its bootstrap 95 % interval and wins / ties / losses, as ``hopqa
report`` pairs runs: ``compare_by_id``; p too in the figures). ``--figures FILE`` writes the
same rows as JSON, with the date, machine, model and command and each run's F1 by question id,
from which ``benchmarks/doc_tables.py`` renders the table of docs/methods/leapquery.md
(``docs/results/leapquery-rerankers.json``). Runs made before the default changed
(``bi-encoder``) are refused by ``hopqa eval`` as made with other options: the default ``--out``
is a new folder for that reason.
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
from typing import Any

# benchmarks/doc_tables.py, figures.py and presets.py (the script's folder is on sys.path)
from doc_tables import LEAPQUERY_METRICS, leapquery_rerankers_table
from figures import about, write_figures
from presets import COMPARISON_FIELDS, f1_by_id, records_of

from hopqa.evaluation.report import compare_by_id
from hopqa.evaluation.runner import summarize


#: Labels that run a registered method with other options (their runs go to ``OUT/<label>/``):
#: LeapQuery in the papers' free text, and with the two rerankers that are not the default.
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "leapquery-free-text": ("leapquery", ["structured=off"]),
    "leapquery-hybrid": ("leapquery", ["rerank=hybrid"]),
    "leapquery-bi-encoder": ("leapquery", ["rerank=bi-encoder"]),
}


def results_path(args: argparse.Namespace, label: str) -> Path:
    method = VARIANTS.get(label, (label, []))[0]
    out = Path(args.out) / label if label in VARIANTS else Path(args.out)
    return out / "musique-dev-open" / method / "results.jsonl"


def run(args: argparse.Namespace, label: str) -> None:
    method, sets = VARIANTS.get(label, (label, []))
    out = results_path(args, label).parents[2]
    cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", "musique", "--split", "dev", "--setting", "open",
           "--retriever", args.retriever, "--support-k", "5", "--limit", str(args.limit), "--llm", args.llm,
           "--method", method, "--out", str(out), "--no-progress", "--no-cache"]
    for item in sets:
        cmd += ["--set", item]
    if args.bertscore:
        cmd += ["--bertscore", args.bertscore]
    method = label
    t0 = time.time()
    print(f"[{time.strftime('%H:%M:%S')}] {method} ...", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    print(f"[{time.strftime('%H:%M:%S')}] {method} done in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)


def rows(args: argparse.Namespace, methods: list[str]) -> list[dict[str, Any]]:
    """A row for each method that has run: its reranker, n, the metrics (None where the run has
    none), parse rate, calls and seconds a question, F1 by question id, and its paired F1
    comparison with Retrieve-then-Read's run on the shared questions (None for Retrieve-then-Read
    itself or without its run)."""
    out: list[dict[str, Any]] = []
    for method in methods:
        path = results_path(args, method)
        if not path.is_file():
            continue
        s = summarize(list(records_of(path.parent).values()), path.parent)
        out.append({
            "method": method, "rerank": reranker(path), "n": s.n,
            **{k: s.metrics.get(k) for k in LEAPQUERY_METRICS},
            "parse_rate": s.metrics.get("parse_rate"),
            "llm_calls_per_q": s.cost["llm_calls_per_q"], "retrieval_calls_per_q": s.cost["retrieval_calls_per_q"],
            "seconds_per_q": s.cost["seconds_per_q"],
            "f1_by_id": f1_by_id(path.parent),  # the records read once (records_of)
        })
    base = next((r for r in out if r["method"] == "retrieve-then-read"), None)
    for row in out:
        c = compare_by_id(row["f1_by_id"], base["f1_by_id"]) if base is not None and row is not base else None
        row["vs_retrieve_then_read"] = {k: getattr(c, k) for k in COMPARISON_FIELDS} if c is not None else None
    return out


def report(args: argparse.Namespace, methods: list[str]) -> list[dict[str, Any]]:
    """Print the table of the methods that have run (and name those that have not); its rows."""
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"LLM {args.llm}; MuSiQue dev, open setting (pooled demo corpus, {args.retriever} retrieval); "
          f"BERTScore model {args.bertscore or 'none'}; LLM response cache off\n")
    table = rows(args, methods)
    print(leapquery_rerankers_table(table), end="")
    missing = [m for m in methods if m not in {r["method"] for r in table}]
    if missing:
        print(f"\nnot run: {', '.join(missing)}")
    return table


def reranker(results: Path) -> str:
    """The reranker a run used, from its ``config.json`` (the resolved ``rerank`` option); – for a
    method without one."""
    config = results.parent / "config.json"
    options = json.loads(config.read_text()).get("options", {}) if config.is_file() else {}
    return str(options.get("rerank", "–"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--methods", default="retrieve-then-read,self-ask,iter-retgen,leapquery," + ",".join(VARIANTS),
                    help="methods, or the variants " + ", ".join(VARIANTS))
    ap.add_argument("--retriever", default="dense", help="bm25, dense or hybrid (the open setting's search)")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--bertscore", default="minilm", help="BERTScore model ('' for none)")
    ap.add_argument("--out", default="runs/bench-leapquery-rerank")
    ap.add_argument("--report-only", action="store_true", help="print the table of what has run")
    ap.add_argument("--figures", help="also write the rows as JSON to this file (with the date, machine, command)")
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    if not args.report_only:
        for method in methods:
            run(args, method)
    table = report(args, methods)
    if args.figures:
        write_figures(args.figures, about(llm=args.llm, limit=args.limit, dataset="musique", split="dev",
                                          setting="open", retriever=args.retriever, support_k=5,
                                          bertscore=args.bertscore or None, response_cache="off"), rows=table)
    print(json.dumps({"finished": time.strftime("%Y-%m-%d %H:%M:%S")}))


if __name__ == "__main__":
    main()
