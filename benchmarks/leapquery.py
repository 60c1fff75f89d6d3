"""LeapQuery against Retrieve-then-Read, Self-Ask and ITER-RETGEN on the embedded Qwen (issues 19, 29).

    .venv/bin/python benchmarks/leapquery.py [--limit 10] [--methods retrieve-then-read,self-ask,iter-retgen,leapquery]
        [--retriever dense] [--llm embedded:qwen2.5-1.5b] [--bertscore minilm] [--out runs/bench-leapquery-rerank]
        [--report-only]

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
and 2, and the cost). Runs made before the default changed (``bi-encoder``) are refused by
``hopqa eval`` as made with other options: the default ``--out`` is a new folder for that reason.
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

from hopqa.evaluation.runner import read_results, summarize


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


def report(args: argparse.Namespace, methods: list[str]) -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"LLM {args.llm}; MuSiQue dev, open setting (pooled demo corpus, {args.retriever} retrieval); "
          f"BERTScore model {args.bertscore or 'none'}; LLM response cache off")
    print("\n| method | rerank | n | Recall@5 | ROUGE-L | BERTScore | EM | F1 | parsed | LLM calls/q | retrievals/q "
          "| s/q |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for method in methods:
        path = results_path(args, method)
        if not path.is_file():
            print(f"| {method} | (not run) |")
            continue
        s = summarize(list(read_results(path).values()), path.parent)
        m, c = s.metrics, s.cost
        cells = [f"{m[k]:.3f}" if k in m else "–" for k in ("support_recall", "rouge_l", "bertscore", "em", "f1")]
        parsed = f"{100 * m['parse_rate']:.1f}%" if "parse_rate" in m else "–"
        print(f"| {method} | {reranker(path)} | {s.n} | " + " | ".join(cells) + f" | {parsed} "
              f"| {c['llm_calls_per_q']:.1f} | {c['retrieval_calls_per_q']:.1f} | {c['seconds_per_q']:.0f} |")


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
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    if not args.report_only:
        for method in methods:
            run(args, method)
    report(args, methods)
    print(json.dumps({"finished": time.strftime("%Y-%m-%d %H:%M:%S")}))


if __name__ == "__main__":
    main()
