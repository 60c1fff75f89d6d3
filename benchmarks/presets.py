"""Each seed method's paper defaults against its ``small-model`` preset (issue 33), beside
Retrieve-then-Read and IRCoT, on the same questions, with paired intervals.

    .venv/bin/python benchmarks/presets.py [--datasets musique,hotpotqa,2wikimultihopqa]
        [--settings distractor,open] [--limit 30] [--methods hgot,gensco-stop,self-dc,leapquery,tor]
        [--baselines retrieve-then-read,ircot] [--variants defaults,small-model]
        [--llm embedded:qwen2.5-1.5b] [--out runs/bench-presets] [--report-only] [--figures FILE]

Every (setting, dataset, method, variant) is one ``hopqa eval`` run, resumable: re-running
continues where it stopped and never redoes a finished question (run it in the background, one
model process at a time: days of model time on 2 cores for everything; start with one dataset
and setting). ``defaults`` runs go under ``OUT/defaults/``, preset runs under
``OUT/small-model/`` (a method without that preset has no such run), the baselines once under
``OUT/defaults/``. The open setting searches the demo corpus, as ``hopqa ask`` does. Options
every run of a method shares, whatever the variant, are in ``SHARED`` (HGOT's cheap settings:
its paper's take ~10 minutes a question here). The LLM response cache is off, so seconds per
question are real.

Then, per dataset and setting, ``hopqa report`` over both variants with ``--baseline
retrieve-then-read``: every method and variant against Retrieve-then-Read on the questions both
answered (the paired difference, its 95 % interval, p, win / tie / loss), and each preset
against its own defaults (the ``vs defaults`` lines: the paired F1 difference on the shared
questions, computed here with ``hopqa.evaluation.stats``).

The figures go to ``--figures`` (default ``OUT/figures.json``) with the date, machine, model and
command: per dataset and setting each complete run's F1, its median seconds a question (a
median, so that a run paused for a while still shows its pace) and its comparison with
Retrieve-then-Read, and each preset against its defaults; each run's F1 by question id too
(``f1_by_id``), so that a later run can be paired with it after its records are gone.
``docs/results/presets.json`` is a copy of it, from which ``benchmarks/doc_tables.py`` renders
the docs' tables.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

# benchmarks/figures.py (the script's folder is on sys.path)
from figures import about, write_figures

from hopqa.evaluation.runner import read_results
from hopqa.evaluation.stats import compare

#: Options every run of a method takes, defaults and preset alike (``--set`` values).
SHARED: dict[str, list[str]] = {
    "hgot": ["samples=2", "max_steps=2", "entailment_delta=false"],
}
#: The preset compared with the paper's defaults.
PRESET = "small-model"
#: Methods whose preset reads token log-probabilities (Self-DC's ``confidence=prob``): the
#: embedded model is loaded with ``logits_all=1`` for every run of them.
NEEDS_LOGPROBS = {"self-dc"}


def run_dir(out: Path, variant: str, dataset: str, setting: str, method: str) -> Path:
    return out / variant / f"{dataset}-dev-{setting}" / method


def has_preset(method: str) -> bool:
    from hopqa.methods.base import method_presets

    return PRESET in method_presets(method)


def llm_spec(spec: str, method: str) -> str:
    """``spec``, for an embedded model with ``logits_all=1`` when ``method`` needs log-probabilities."""
    if method not in NEEDS_LOGPROBS or not spec.startswith("embedded:") or "logits_all" in spec:
        return spec
    return spec + ("&" if "?" in spec else "?") + "logits_all=1"


def run(args: argparse.Namespace, dataset: str, setting: str, method: str, variant: str) -> None:
    cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", dataset, "--split", "dev", "--setting", setting,
           "--limit", str(args.limit), "--llm", llm_spec(args.llm, method), "--method", method, "--out", str(Path(args.out) / variant),
           "--no-progress", "--no-cache"]
    if variant != "defaults":
        cmd += ["--preset", variant]
    for item in SHARED.get(method, []):
        cmd += ["--set", item]
    t0 = time.time()
    label = f"{setting} {dataset} {method} ({variant})"
    print(f"[{time.strftime('%H:%M:%S')}] {label} ...", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    print(f"[{time.strftime('%H:%M:%S')}] {label} done in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)


@functools.cache
def records_of(path: Path) -> dict[str, dict]:
    """A run's records by id (none without a results file), read once: the report reads each
    run's F1 and seconds, and its F1 again for the preset comparisons, after the runs ended."""
    return read_results(path / "results.jsonl") if (path / "results.jsonl").is_file() else {}


def f1_by_id(path: Path) -> dict[str, float]:
    return {qid: float(r.get("metrics", {}).get("f1", 0.0)) for qid, r in records_of(path).items()}


def median_seconds(path: Path) -> float | None:
    """The median of a run's seconds per question (None without records)."""
    import statistics

    seconds = [float((r.get("usage") or {}).get("seconds") or 0.0) for r in records_of(path).values()]
    return statistics.median(seconds) if seconds else None


def variant_label(method: str, run: Path) -> str:
    """A run's label in the figures: ``METHOD (VARIANT)`` for a method with a preset (its
    defaults or its preset), the method alone for a baseline, whichever runs one report holds
    (``hopqa report`` labels by method alone when they are unambiguous)."""
    if not has_preset(method):
        return method
    return f"{method} ({PRESET if PRESET in run.parts else 'defaults'})"


def figures_of(report_json: Path, dataset: str, setting: str) -> dict:
    """One dataset and setting of ``figures.json``: its runs (complete ones) and their F1
    comparisons with Retrieve-then-Read, from ``hopqa report``'s JSON."""
    data = json.loads(report_json.read_text(encoding="utf-8"))
    rows = [r for r in data["rows"] if r["stratum"] == "all"]
    labels = {r["label"]: variant_label(r["method"], Path(r["run"])) for r in rows}
    runs = [{"label": labels[r["label"]], "method": r["method"], "n": r["n"], "asked": r["asked"],
             "partial": r["partial"], "f1": r["metrics"].get("f1"), "median_seconds": median_seconds(Path(r["run"])),
             "f1_by_id": f1_by_id(Path(r["run"]))}
            for r in rows]
    comparisons = [{**{k: c[k] for k in ("n", "diff", "low", "high", "p_value", "wins", "ties", "losses",
                                         "excludes_zero", "significant")}, "method": labels.get(c["method"], c["method"])}
                   for c in data["comparisons"] if c["stratum"] == "all" and c["metric"] == "f1"]
    return {"dataset": dataset, "setting": setting, "runs": runs, "vs_retrieve_then_read": comparisons,
            "preset_vs_defaults": []}


def report(args: argparse.Namespace, datasets: list[str], settings: list[str], methods: list[str]) -> None:
    out = Path(args.out)
    tables: list[dict] = []
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; LLM {args.llm}; "
          f"dev, first {args.limit} questions; LLM response cache off; shared options {SHARED}")
    for setting in settings:
        for dataset in datasets:
            dirs = [d for d in (out / v / f"{dataset}-dev-{setting}" for v in ("defaults", PRESET)) if d.is_dir()]
            if not dirs:
                continue
            print(f"\n## {dataset}, {setting} setting\n", flush=True)
            # without a Retrieve-then-Read run (``--baselines ""``) the report compares nothing with it
            baseline = (["--baseline", "retrieve-then-read"]
                        if run_dir(out, "defaults", dataset, setting, "retrieve-then-read").is_dir() else [])
            cmd = [sys.executable, "-m", "hopqa.cli", "report", *map(str, dirs), *baseline,
                   "--metrics", "em,f1,support_recall", "--no-plots", "--out", str(out / f"report-{dataset}-{setting}")]
            subprocess.run(cmd, check=True)
            table = figures_of(out / f"report-{dataset}-{setting}" / "report.json", dataset, setting)
            tables.append(table)
            for method in methods:
                base = f1_by_id(run_dir(out, "defaults", dataset, setting, method))
                tuned = f1_by_id(run_dir(out, PRESET, dataset, setting, method))
                shared = sorted(base.keys() & tuned.keys())
                if not shared:
                    continue
                c = compare([tuned[i] for i in shared], [base[i] for i in shared])
                print(f"{method} {PRESET} vs defaults, F1 on {len(shared)} shared questions: {c.diff:+.3f} "
                      f"[{c.low:+.3f}, {c.high:+.3f}], p = {c.p_value:.3g}, {c.wins} / {c.ties} / {c.losses}")
                table["preset_vs_defaults"].append({"method": method, "n": len(shared), "diff": c.diff, "low": c.low,
                                                    "high": c.high, "p_value": c.p_value, "wins": c.wins,
                                                    "ties": c.ties, "losses": c.losses})
    target = write_figures(args.figures or out / "figures.json",
                           about(llm=args.llm, limit=args.limit, shared_options=SHARED, response_cache="off"),
                           tables=tables)
    print(f"figures: {target}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="musique,hotpotqa,2wikimultihopqa")
    ap.add_argument("--settings", default="distractor,open")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--methods", default="hgot,gensco-stop,self-dc,leapquery,tor")
    ap.add_argument("--baselines", default="retrieve-then-read,ircot")
    ap.add_argument("--variants", default=f"defaults,{PRESET}",
                    help="which runs of each method: its defaults, its preset or both (baselines run with defaults)")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--out", default="runs/bench-presets")
    ap.add_argument("--report-only", action="store_true", help="print the tables of what has run")
    ap.add_argument("--figures", help="where the figures go as JSON (default OUT/figures.json)")
    args = ap.parse_args()
    datasets = [d for d in args.datasets.split(",") if d]
    settings = [s for s in args.settings.split(",") if s]
    methods = [m for m in args.methods.split(",") if m]
    baselines = [m for m in args.baselines.split(",") if m]
    variants = {v for v in args.variants.split(",") if v}
    if unknown := variants - {"defaults", PRESET}:
        ap.error(f"unknown variants: {', '.join(sorted(unknown))} (defaults, {PRESET})")
    if not args.report_only:
        for setting in settings:
            for dataset in datasets:
                for method in baselines:
                    run(args, dataset, setting, method, "defaults")
                for method in methods:
                    if "defaults" in variants:
                        run(args, dataset, setting, method, "defaults")
                    if PRESET in variants and has_preset(method):
                        run(args, dataset, setting, method, PRESET)
    report(args, datasets, settings, methods)
    print(json.dumps({"finished": time.strftime("%Y-%m-%d %H:%M:%S")}))


if __name__ == "__main__":
    main()
