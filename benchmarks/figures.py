"""What a benchmark writes beside its figures (``--figures FILE``): when, on which machine, with
which command, so that ``benchmarks/doc_tables.py`` can render a docs table from the file and
say where its numbers came from.

    from figures import about, write_figures
    write_figures(path, about(llm=args.llm, limit=args.limit), rows=rows)

The file is ``{"about": {...}, **data}`` as indented JSON, written whole or not at all (a
temporary file renamed over the target).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def machine() -> str:
    """The machine and its load now: ``x86_64, 2 CPUs, Python 3.11.7, load average 0.53 1.16 1.62``."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def hopqa_commit() -> str | None:
    """The commit of the hopqa this process imports (``PYTHONPATH`` first, so a ``git worktree``
    of an older commit there is the one named), ``+changes`` when its ``hopqa/`` differs from that
    commit; ``None`` when hopqa is not the root of a git checkout (an installed package)."""
    spec = importlib.util.find_spec("hopqa")
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")  # an installed hopqa inside another checkout is not it
    commit = git("rev-parse", "--short", "HEAD") if top and Path(top).resolve() == root else None
    if commit is None:
        return None
    return commit + ("+changes" if git("status", "--porcelain", "--", "hopqa") else "")


def about(**fields: Any) -> dict[str, Any]:
    """The date, the machine, the command that ran (``benchmarks/NAME.py ARGS``, its arguments
    quoted for a shell, so that it runs again as recorded: an empty ``--baselines ""`` stays
    ``''``), the commit of the hopqa that ran (``hopqa_commit``, where known) and ``fields``."""
    command = f"benchmarks/{Path(sys.argv[0]).name} " + shlex.join(sys.argv[1:])
    commit = hopqa_commit()
    return {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "command": command.strip(),
            **({"hopqa": commit} if commit else {}), **fields}


def f1_by_question(records: dict[str, dict[str, Any]]) -> dict[str, float]:
    """A run's F1 by question id (0.0 for a record without one, a failed question), the per-question
    figures ``benchmarks/doc_numbers.py`` pairs two runs on."""
    return {qid: float((r.get("metrics") or {}).get("f1", 0.0)) for qid, r in records.items()}


def summary_row(path: str | Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """A run's records (``results.jsonl`` at ``path``) and the figures a benchmark stores of it:
    ``n``, ``failed``, ``metrics`` and ``cost`` as ``hopqa eval``'s summary has them, and its F1 by
    question id (``f1_by_question``)."""
    from hopqa.evaluation.runner import read_results, summarize

    records = read_results(Path(path))
    s = summarize(list(records.values()), Path(path).parent)
    return records, {"n": s.n, "failed": s.failed, "metrics": s.metrics, "cost": s.cost,
                     "f1_by_id": f1_by_question(records)}


def write_figures(path: str | Path, about: dict[str, Any], **data: Any) -> Path:
    """Write ``{"about": about, **data}`` to ``path`` atomically; the path written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps({"about": about, **data}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target
