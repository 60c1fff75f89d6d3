"""Every available method on a small benchmark slice with the embedded model.

    .venv/bin/python benchmarks/eval_methods.py [--dataset musique] [--limit 20]
        [--llm embedded:smollm2-135m] [--setting distractor] [--out runs/bench]

Runs ``hopqa eval`` (resumable: re-running continues where it stopped) and prints a table of
EM / F1 / supporting-paragraph recall / LLM calls / tokens / retrieval calls / seconds per
question, plus the machine it ran on. Methods that need a capability the backend lacks are
reported as skipped.
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

from hopqa.methods import METHODS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", default="musique")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--setting", default="distractor")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--llm", default="embedded:smollm2-135m")
    ap.add_argument("--methods", default=",".join(sorted(METHODS)))
    ap.add_argument("--out", default="runs/bench")
    args = ap.parse_args()
    t0 = time.time()
    cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", args.dataset, "--split", args.split,
           "--setting", args.setting, "--method", args.methods, "--limit", str(args.limit), "--llm", args.llm,
           "--out", args.out, "--no-progress"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.time() - t0
    base = Path(args.out) / f"{args.dataset}-{args.split}-{args.setting}"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"LLM {args.llm}; {args.dataset}/{args.split} {args.setting}, {args.limit} questions; "
          f"wall {wall / 60:.1f} min (cached calls are free on a re-run)")
    print("| method | EM | F1 | sup. recall | LLM calls/q | prompt tok/q | compl. tok/q | retrievals/q | s/q | failed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.methods.split(","):
        path = base / name / "summary.json"
        if not path.is_file():
            print(f"| {name} | (no result) |")
            continue
        s = json.loads(path.read_text())
        m, c = s["metrics"], s["cost"]
        sup = f"{m['support_recall']:.2f}" if "support_recall" in m else "–"
        print(f"| {name} | {m.get('em', 0):.3f} | {m.get('f1', 0):.3f} | {sup} | {c['llm_calls_per_q']:.1f} | "
              f"{c['prompt_tokens_per_q']:.0f} | {c['completion_tokens_per_q']:.0f} | {c['retrieval_calls_per_q']:.1f} | "
              f"{c['seconds_per_q']:.1f} | {s['failed']} |")


if __name__ == "__main__":
    main()
