"""The embedded model's prefix cache, before and after (issue 31), on the embedded Qwen.

    .venv/bin/python benchmarks/prefix_cache.py [--limit 5] [--methods hgot,tor,self-ask,leapquery,gensco-stop]
        [--llm embedded:qwen2.5-1.5b] [--out runs/bench-prefix-cache] [--settings off,on] [--report-only]
        [--figures FILE]

Every method runs ``hopqa eval`` on the first ``--limit`` MuSiQue dev questions in the distractor
setting twice: before (``?prefix_cache_mb=0&batch_samples=0``: the KV cache holds only the last
prompt and samples are drawn one by one, as before issue 31) and after (the defaults: the prefix
cache; samples are decoded together only with ``?batch_samples=N``, off by default), the LLM
response cache off so that every call is a real one; HGOT with the cheap settings the issue
measured (``samples=2 max_steps=2 entailment_delta=false``). Each run is resumable (re-running continues where it stopped): run it
in the background, one model process at a time.

Prints one row per method and setting: questions, LLM calls, prompt tokens sent, prompt tokens
evaluated (from each call's ``prompt_tokens_evaluated`` in the traces) and their share,
completion tokens, seconds per question, the speed-up, on how many questions the predictions and
on how many every LLM output of the traces are identical between the two settings (samples drawn
together may differ from the same seeds drawn alone: docs/llm-backends.md, "Batched samples"), and the
peak memory (RSS) of each run, from ``/usr/bin/time`` when it is there. ``--figures FILE``
writes the same rows as JSON with the date, machine, model and command, from which
``benchmarks/doc_tables.py`` renders docs/llm-backends.md's table
(``docs/results/prefix-cache.json``); ``benchmarks/prefix_share.py`` reads the "off" runs' traces.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# benchmarks/figures.py and doc_tables.py (the script's folder is on sys.path)
from doc_tables import prefix_cache_table
from figures import about, write_figures

from hopqa.evaluation.runner import read_results

#: method -> its --set options (HGOT: the issue's cheap settings).
OPTIONS = {"hgot": ["samples=2", "max_steps=2", "entailment_delta=false"]}
SETTINGS = {"off": "?prefix_cache_mb=0&batch_samples=0", "on": ""}


def _run_dir(args: argparse.Namespace, method: str, setting: str) -> Path:
    return Path(args.out) / setting / method


def run(args: argparse.Namespace, method: str, setting: str) -> float | None:
    """One resumable ``hopqa eval``; the peak RSS in MB when ``/usr/bin/time`` measured it."""
    out = _run_dir(args, method, setting)
    cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", "musique", "--split", "dev", "--setting",
           "distractor", "--limit", str(args.limit), "--llm", args.llm + SETTINGS[setting], "--method", method,
           "--out", str(out), "--no-progress", "--no-cache"]
    for kv in OPTIONS.get(method, []):
        cmd += ["--set", kv]
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    stats = out.parent / f".{method}.time"
    out.parent.mkdir(parents=True, exist_ok=True)
    if timer:
        cmd = [timer, "-f", "%M", "-o", str(stats), *cmd]
    t0 = time.time()
    print(f"== {method} / prefix cache {setting}", flush=True)
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL)
    print(f"   {time.time() - t0:.0f} s" + (f" (exit {done.returncode})" if done.returncode else ""), flush=True)
    try:
        return int(stats.read_text().split()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        return None


def _calls(step: dict[str, Any]) -> list[dict[str, Any]]:
    out = list(step.get("llm_calls") or [])
    for child in step.get("children") or ():
        out.extend(_calls(child))
    return out


def figures(path: Path) -> dict[str, Any] | None:
    """Totals over a run's records, and per question its prediction and LLM outputs."""
    found = sorted(path.rglob("results.jsonl"))  # hopqa eval writes OUT/DATASET-SPLIT-SETTING/METHOD/
    try:
        records = read_results(found[0])
    except (IndexError, OSError, ValueError):
        return None
    sent = evaluated = completion = calls = 0
    seconds = 0.0
    outputs: dict[str, Any] = {}
    for qid, rec in records.items():
        steps = _calls(rec.get("trace") or {})
        calls += len(steps)
        for c in steps:
            sent += int(c.get("prompt_tokens") or 0)
            evaluated += int(c.get("prompt_tokens_evaluated", c.get("prompt_tokens")) or 0)
            completion += int(c.get("completion_tokens") or 0)
        seconds += float((rec.get("usage") or {}).get("seconds") or 0.0)
        outputs[qid] = (rec.get("prediction"), [c.get("outputs") or c.get("token_logprobs") for c in steps])
    return {"n": len(records), "calls": calls, "sent": sent, "evaluated": evaluated, "completion": completion,
            "seconds": seconds, "outputs": outputs}


def rows(args: argparse.Namespace, rss: dict[str, float | None]) -> list[dict[str, Any]]:
    """A row for each method and setting that has run: per question its LLM calls, prompt tokens
    sent and evaluated, completion tokens and seconds; with the cache on, the speed-up over the
    run without it and on how many of the questions both answered the predictions and every LLM
    output are identical; the peak RSS in MB (None unmeasured)."""
    out: list[dict[str, Any]] = []
    for method in args.methods.split(","):
        off = figures(_run_dir(args, method, "off"))
        for setting in ("off", "on"):
            f = off if setting == "off" else figures(_run_dir(args, method, "on"))
            if f is None or not f["n"]:
                continue
            n = f["n"]
            row: dict[str, Any] = {
                "method": method, "options": OPTIONS.get(method, []), "setting": setting, "llm": args.llm + SETTINGS[setting],
                "n": n, "calls_per_q": f["calls"] / n, "sent_per_q": f["sent"] / n, "evaluated_per_q": f["evaluated"] / n,
                "completion_per_q": f["completion"] / n, "seconds_per_q": f["seconds"] / n,
                "speedup": None, "shared": None, "answers_identical": None, "outputs_identical": None,
                "peak_rss_mb": rss.get(f"{method}/{setting}"),
            }
            if setting == "on" and off and off["n"]:
                shared = sorted(set(off["outputs"]) & set(f["outputs"]))
                row.update(speedup=(off["seconds"] / off["n"]) / row["seconds_per_q"] if f["seconds"] else None,
                           shared=len(shared),
                           answers_identical=sum(off["outputs"][q][0] == f["outputs"][q][0] for q in shared),
                           outputs_identical=sum(off["outputs"][q] == f["outputs"][q] for q in shared))
            out.append(row)
    return out


def report(args: argparse.Namespace, rss: dict[str, float | None]) -> list[dict[str, Any]]:
    """Print the table of what has run; its rows."""
    print(f"\nprefix cache on the embedded model: {args.llm}, MuSiQue dev (distractor), first {args.limit} "
          f"questions; {platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}\n")
    table = rows(args, rss)
    print(prefix_cache_table(table), end="")
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--methods", default="hgot,tor,self-ask,leapquery,gensco-stop")
    p.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    p.add_argument("--out", default="runs/bench-prefix-cache")
    p.add_argument("--settings", default="off,on", help="which settings to run (off, on or both)")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--figures", help="also write the rows as JSON to this file (with the date, machine, command)")
    args = p.parse_args()
    rss_file = Path(args.out) / "rss.json"
    try:
        rss: dict[str, float | None] = json.loads(rss_file.read_text())
    except (OSError, ValueError):
        rss = {}
    if not args.report_only:
        for method in args.methods.split(","):
            for setting in args.settings.split(","):
                measured = run(args, method, setting)
                if measured is not None:
                    rss[f"{method}/{setting}"] = measured
                    rss_file.write_text(json.dumps(rss))
    table = report(args, rss)
    if args.figures:
        write_figures(args.figures, about(llm=args.llm, limit=args.limit, dataset="musique", split="dev",
                                          setting="distractor", response_cache="off"), rows=table)


if __name__ == "__main__":
    main()
