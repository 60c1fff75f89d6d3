"""How much of each method's prompts a prefix cache can serve, from the traces of stored runs.

    .venv/bin/python benchmarks/prefix_share.py [--figures FILE] RUN_DIR [RUN_DIR ...]
    .venv/bin/python benchmarks/prefix_share.py   # every run under runs/bench-prefix-cache/off

For every question of every run (``hopqa eval``'s ``results.jsonl``, found under each directory),
its LLM calls are taken in the order their trace steps were opened, and of each prompt's characters it
counts those that repeat the start of the previous call's prompt (all a server or a model that
keeps one prompt can reuse) and those that repeat the start of some earlier call's prompt of the
same question (what a prefix cache of many prompts can reuse: the embedded backend's, vLLM's
automatic prefix caching, SGLang's RadixAttention; a server with one slot per client only the
first). A method whose prompts put their stable parts (instructions, demonstrations) first and
the question-specific parts last has a high share; one that starts with the question has none.

Prints per run: its LLM (the run's ``config.json``), questions, LLM calls per question, prompt
characters per question, the share repeating the previous prompt and the share repeating any
earlier prompt. No model is run. ``--figures FILE`` writes the same rows as JSON with the date,
machine and command, from which ``benchmarks/doc_tables.py`` renders docs/llm-backends.md's table
(``docs/results/prefix-share.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# benchmarks/figures.py and doc_tables.py (the script's folder is on sys.path)
from doc_tables import prefix_share_table
from figures import about, write_figures

from hopqa.evaluation.runner import read_results


def calls_in_order(step: dict[str, Any]) -> list[dict[str, Any]]:
    """The LLM calls of a trace step and its children in the order their steps were opened (step
    ids count up as steps open: Tree of Reviews opens a level's five reviews, then their
    analyses), each step's own calls in order."""
    found: list[tuple[int, int, dict[str, Any]]] = []

    def walk(s: dict[str, Any]) -> None:
        sid = s.get("id")
        key = sid if isinstance(sid, int) else len(found)
        found.extend((key, i, c) for i, c in enumerate(s.get("llm_calls") or []))
        for child in s.get("children") or ():
            walk(child)

    walk(step)
    return [c for _, _, c in sorted(found, key=lambda x: (x[0], x[1]))]


def prompt_of(call: dict[str, Any]) -> str:
    return str(call.get("prompt") if call.get("type", "generate") == "generate" else call.get("context") or "")


def shared_start(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def shares(records: dict[str, Any]) -> dict[str, float]:
    """Totals over a run's questions (module docstring)."""
    calls = chars = previous = earlier = 0
    for rec in records.values():
        prompts = [prompt_of(c) for c in calls_in_order(rec.get("trace") or {})]
        prompts = [p for p in prompts if p]
        calls += len(prompts)
        for i, p in enumerate(prompts):
            chars += len(p)
            if i:
                previous += shared_start(prompts[i - 1], p)
                earlier += max(shared_start(q, p) for q in prompts[:i])
    n = max(1, len(records))
    return {"n": len(records), "calls": calls / n, "chars": chars / n,
            "previous": previous / chars if chars else 0.0, "earlier": earlier / chars if chars else 0.0}


def rows(dirs: list[Path]) -> list[dict[str, Any]]:
    """A row for each run (a ``results.jsonl`` with records) found under ``dirs``: its name, LLM,
    questions, calls and prompt characters per question and the two shares."""
    out: list[dict[str, Any]] = []
    for d in dirs:
        for path in sorted(d.rglob("results.jsonl")):
            try:
                f = shares(read_results(path))
            except (OSError, ValueError) as exc:
                print(f"{path}: {exc}", file=sys.stderr)
                continue
            if not f["n"]:
                continue
            try:
                llm = json.loads((path.parent / "config.json").read_text(encoding="utf-8")).get("llm")
            except (OSError, ValueError, AttributeError):
                llm = None
            name = path.parent.name if len(dirs) == 1 or path.parent.name != d.name else d.name
            out.append({"run": name, "llm": llm, "n": f["n"], "calls_per_q": f["calls"], "chars_per_q": f["chars"],
                        "previous": f["previous"], "earlier": f["earlier"]})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="*", help="run directories (default: runs/bench-prefix-cache/off/*)")
    p.add_argument("--figures", help="also write the rows as JSON to this file (with the date, machine, command)")
    args = p.parse_args()
    dirs = [Path(d) for d in args.runs] or sorted(Path("runs/bench-prefix-cache/off").glob("*"))
    table = rows(dirs)
    print(prefix_share_table(table), end="")
    if args.figures:
        write_figures(args.figures, about(runs=[str(d) for d in dirs]), rows=table)


if __name__ == "__main__":
    main()
