"""Every available method on a small benchmark slice with the embedded model.

    .venv/bin/python benchmarks/eval_methods.py [--dataset musique] [--limit 20]
        [--llm embedded:smollm2-135m] [--setting distractor] [--out runs/bench]
        [--methods a,b,...] [--set METHOD:KEY=VALUE ...] [--cache] [--figures FILE]

Runs ``hopqa eval`` (resumable: re-running continues where it stopped) and prints a table of
EM / F1 / token precision and recall / supporting-paragraph recall, precision and F1 /
K-precision / LLM calls / tokens / retrieval calls / seconds per question, plus the machine it
ran on. ``--set hgot:samples=2`` passes an option to one method (that method then runs in its
own ``hopqa eval`` call). By default every registered method runs, HGOT with its
``CHEAP_HGOT`` options (its defaults cost minutes per question on the embedded model), and the
LLM response cache is bypassed (``--no-cache``) so that one method's timings never profit from
another's identical calls (GenSco-stop scores the same prompts as GenSco-max); ``--cache``
allows it. ``--figures`` (default ``OUT/DATASET-SPLIT-SETTING/figures.json``) writes every
row's summary (``hopqa eval``'s ``summary.json``: metrics and cost per question) as JSON with the
date, machine, model and command (``benchmarks/figures.py``), for ``benchmarks/doc_tables.py``
to render the docs' table from. ``PYTHONPATH=WORKTREE`` runs the hopqa of a ``git worktree`` of
another commit (the figures name the commit that ran, ``about.hopqa``): a change measured before
and after it is two such files, ``docs/results/NAME-before.json`` and ``NAME-after.json``
(``doc_tables.before_after_table``).
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

# benchmarks/figures.py (the script's folder is on sys.path)
from figures import about, write_figures

from hopqa.methods import METHODS

#: HGOT settings that keep the benchmark's wall time bounded on a 2-core CPU (see docs/benchmarks).
CHEAP_HGOT = ["hgot:samples=2", "hgot:max_steps=2", "hgot:entailment_delta=false"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", default="musique")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--setting", default="distractor")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--llm", default="embedded:smollm2-135m")
    ap.add_argument("--methods", default=",".join(sorted(METHODS)))
    ap.add_argument("--out", default="runs/bench")
    ap.add_argument("--set", action="append", default=None, metavar="METHOD:KEY=VALUE")
    ap.add_argument("--cache", action="store_true", help="use the LLM response cache (timings then depend on "
                    "what earlier runs cached)")
    ap.add_argument("--figures", help="where the rows go as JSON (default OUT/DATASET-SPLIT-SETTING/figures.json)")
    args = ap.parse_args()
    sets = args.set if args.set is not None else CHEAP_HGOT
    per_method: dict[str, list[str]] = {}
    for item in sets:
        method, _, kv = item.partition(":")
        per_method.setdefault(method, []).extend(["--set", kv])
    names = [m for m in args.methods.split(",") if m]
    plain = [m for m in names if m not in per_method]
    t0 = time.time()
    # -P: the hopqa this script imports (PYTHONPATH's worktree, or the installed one), never one in the cwd
    base_cmd = [sys.executable, "-P", "-m", "hopqa.cli", "eval", "--dataset", args.dataset, "--split", args.split,
                "--setting", args.setting, "--limit", str(args.limit), "--llm", args.llm,
                "--out", args.out, "--no-progress", *([] if args.cache else ["--no-cache"])]
    groups = ([plain] if plain else []) + [[m] for m in names if m in per_method]
    for group in groups:
        extra = per_method.get(group[0], []) if len(group) == 1 else []
        subprocess.run([*base_cmd, "--method", ",".join(group), *extra], check=True, stdout=subprocess.DEVNULL)
    wall = time.time() - t0
    base = Path(args.out) / f"{args.dataset}-{args.split}-{args.setting}"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"LLM {args.llm}; {args.dataset}/{args.split} {args.setting}, {args.limit} questions; "
          f"wall {wall / 60:.1f} min (this invocation; finished questions are skipped on a re-run); "
          f"LLM response cache {'on' if args.cache else 'off'}")
    print("| method | EM | F1 | tok. P / R | sup. R / P / F1 | K-prec | LLM calls/q | prompt tok/q | compl. tok/q "
          "| retrievals/q | s/q | failed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in names:
        path = base / name / "summary.json"
        if not path.is_file():
            print(f"| {name} | (no result) |")
            continue
        s = json.loads(path.read_text())
        m, c = s["metrics"], s["cost"]
        rows.append({"method": name, "options": per_method.get(name, [])[1::2], "n": s.get("n"),
                     "failed": s["failed"], "metrics": m, "cost": c})
        sup = (f"{m['support_recall']:.2f} / {m['support_precision']:.2f} / {m['support_f1']:.2f}"
               if "support_recall" in m else "–")
        kp = f"{m['k_precision']:.2f}" if "k_precision" in m else "–"
        label = name + (" (" + " ".join(per_method[name][1::2]) + ")" if name in per_method else "")
        print(f"| {label} | {m.get('em', 0):.3f} | {m.get('f1', 0):.3f} | {m.get('precision', 0):.2f} / "
              f"{m.get('recall', 0):.2f} | {sup} | {kp} | {c['llm_calls_per_q']:.1f} | "
              f"{c['prompt_tokens_per_q']:.0f} | {c['completion_tokens_per_q']:.0f} | {c['retrieval_calls_per_q']:.1f} | "
              f"{c['seconds_per_q']:.1f} | {s['failed']} |")
    target = write_figures(args.figures or base / "figures.json",
                           about(llm=args.llm, dataset=args.dataset, split=args.split, setting=args.setting,
                                 limit=args.limit, response_cache="on" if args.cache else "off",
                                 wall_seconds=round(wall, 1)), rows=rows)
    print(f"figures: {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
