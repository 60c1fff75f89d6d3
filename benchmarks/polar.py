"""``polar`` (a yes / no question's answer held to yes or no) measured on *train* yes / no questions.

    .venv/bin/python benchmarks/polar.py [--methods leapquery,hgot] [--per-dataset 2wikimultihopqa=20,hotpotqa=9]
        [--split train] [--llm embedded:qwen2.5-1.5b] [--out runs/polar] [--figures FILE] [--report-only]

Picks the first yes / no questions (``hopqa.methods.polar.is_polar``) of the shipped *train*
subsets (the step is written and judged there before any dev measurement; ``--split dev`` then
measures it on the dev subsets' yes / no questions, with an ``--out`` of its own), writes
them with their paragraphs as one question file (``OUT/questions.jsonl``, the datasets
interleaved so that a stopped run has some of each), and runs ``hopqa eval`` on it in the
distractor setting for each method, its ``small-model`` preset with ``polar=true`` (and the
presets benchmark's shared options: HGOT's cheap settings), LLM response cache off, one model
process at a time, resumably. ``polar`` acts after everything else a method does, so each run
also gives the preset without it: each answer as it was before its ``polar`` step
(``presets.f1_before_step``). ``--figures`` (default ``OUT/figures.json``) writes, per method,
both runs' F1 by id, their paired comparison (as ``hopqa report`` pairs runs), how each step
settled its answer (``compared``, ``read``, ``asked``), and the answers by gold, for
``benchmarks/doc_numbers.py``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

# benchmarks/figures.py and benchmarks/presets.py (the script's folder is on sys.path)
from figures import about, f1_by_question, write_figures
from presets import SHARED, f1_before_step, llm_spec, records_of, trace_steps

from hopqa.datasets import load_dataset
from hopqa.evaluation.report import compare_by_id
from hopqa.methods.polar import is_polar

#: Label of a run without its polar step.
WITHOUT = "no polar"


def questions(per_dataset: dict[str, int], split: str = "train") -> list[dict]:
    """The first yes / no questions of each dataset's ``split`` subset, as question-file records,
    the datasets interleaved (one of each in turn)."""
    picked = []
    for name, n in per_dataset.items():
        rows = [e for e in load_dataset(name, split) if is_polar(e.question)][:n]
        picked.append([{"id": f"{name}-{e.id}", "question": e.question, "answers": list(e.answers),
                        "paragraphs": [{"title": p.title, "text": p.text, "is_supporting": bool(p.is_supporting)}
                                       for p in e.paragraphs]} for e in rows])
    return [r for group in itertools.zip_longest(*picked) for r in group if r is not None]


def run(args: argparse.Namespace, method: str, file: Path) -> None:
    """``hopqa eval`` of ``method``'s preset with ``polar=true`` on ``file`` (resumes)."""
    cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", str(file), "--setting", "distractor",
           "--method", method, "--preset", "small-model", "--set", "polar=true", "--llm", llm_spec(args.llm, method),
           "--out", str(Path(args.out) / "runs"), "--no-progress", "--no-cache"]
    for item in SHARED.get(method, []):
        cmd += ["--set", item]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def summary(path: Path, method: str) -> dict:
    """A method's run at ``path``: the preset with and without its polar step (F1 by id), their
    paired comparison, how each step settled, and the answers with it by gold answer."""
    records = records_of(path)
    with_step = f1_by_question(records)
    without = f1_before_step(path, "polar") or dict(with_step)
    how = Counter(s.get("outputs", {}).get("how", "none") for r in records.values()
                  for s in trace_steps(r.get("trace")) if s.get("kind") == "polar")
    answers = Counter(f"{(r.get('gold') or [''])[0]} -> {str(r.get('prediction', '')).strip().lower()}"
                      for r in records.values())
    c = compare_by_id(with_step, without)
    runs = [{"label": f"{method} (small-model, polar=true)", "method": method, "n": len(with_step),
             "f1": sum(with_step.values()) / max(len(with_step), 1), "f1_by_id": with_step},
            {"label": f"{method} (small-model, {WITHOUT})", "method": method, "n": len(without),
             "f1": sum(without.values()) / max(len(without), 1), "f1_by_id": without}]
    return {"method": method, "runs": runs, "how": dict(how), "answers": dict(sorted(answers.items())),
            "with_vs_without": {"n": c.n, "diff": c.diff, "low": c.low, "high": c.high, "p_value": c.p_value,
                                "wins": c.wins, "ties": c.ties, "losses": c.losses}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default="leapquery,hgot")
    ap.add_argument("--per-dataset", default="2wikimultihopqa=20,hotpotqa=9",
                    help="train yes / no questions per dataset, NAME=N,...")
    ap.add_argument("--split", default="train", choices=["train", "dev"],
                    help="the subsets the questions come from (train: where the step is developed)")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--out", default="runs/polar")
    ap.add_argument("--figures", default=None, help="figures JSON (default OUT/figures.json)")
    ap.add_argument("--report-only", action="store_true", help="only read the runs there are")
    args = ap.parse_args()
    out = Path(args.out)
    file = out / "questions.jsonl"
    if not file.is_file():
        per = {k: int(v) for k, v in (item.split("=") for item in args.per_dataset.split(","))}
        out.mkdir(parents=True, exist_ok=True)
        file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in questions(per, args.split)),
                        encoding="utf-8")
    methods = [m for m in args.methods.split(",") if m]
    if not args.report_only:
        for method in methods:
            run(args, method, file)
    tables = []
    for method in methods:
        path = out / "runs" / f"{file.stem}-file-distractor" / method
        if not records_of(path):
            continue
        t = summary(path, method)
        tables.append(t)
        w = t["with_vs_without"]
        print(f"{method}: n={w['n']} F1 with polar {t['runs'][0]['f1']:.3f}, without {t['runs'][1]['f1']:.3f}, "
              f"{w['diff']:+.3f} [{w['low']:+.3f}, {w['high']:+.3f}], {w['wins']} / {w['ties']} / {w['losses']}; "
              f"how {t['how']}; answers {t['answers']}")
    write_figures(args.figures or out / "figures.json",
                  about(llm=args.llm, setting="distractor", split=args.split, preset="small-model", polar=True,
                        shared_options=SHARED, response_cache="off"), tables=tables)


if __name__ == "__main__":
    main()
