"""What a large question file costs ``hopqa eval`` before and while it answers: the time to the
first recorded answer, the memory, the warnings printed for bad lines, and how promptly Ctrl-C
ends the run — against a fake OpenAI-compatible server (no model, no network).

    .venv/bin/python benchmarks/eval_stream.py [--lines 1000000] [--bad-every 2] [--answers 50]
        [--workers 2] [--delay 0.02] [--label now] [--figures FILE]

Writes a question file of ``--lines`` questions (every ``--bad-every``-th followed by a malformed
line; 0: none), runs ``hopqa eval`` on it as a subprocess, samples the process's resident memory
(``/proc/PID/status`` VmRSS) every 50 ms, sends SIGINT once ``--answers`` answers are recorded,
and prints:

- ``first answer s``: process start to the first line of ``results.jsonl``;
- ``peak RSS MB`` and ``RSS at N answers MB``;
- ``Ctrl-C to exit s`` and the exit code (130 expected; killed after ``--exit-timeout``);
- ``warning lines``: ``hopqa: warning:`` lines on stderr (bad lines of the file are warned
  about 20 times, then counted);
- ``requests after Ctrl-C``: what the server still answered (the questions in flight).

``PYTHONPATH`` chooses the hopqa that runs (a ``git worktree`` of an older commit, to compare).
The server is ``tests/fault_server.py``'s ``FaultServer``, imported by path. ``--figures FILE``
adds the run's row, named ``--label`` ("now", "before (7026ae7)"), to FILE as JSON, replacing
the row of that label and keeping the others, each row with its own date, machine and command
(``benchmarks/figures.py``); ``benchmarks/doc_tables.py`` renders docs/reliability.md's table
from ``docs/results/eval-stream.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from eval_overhead import load_fault_server  # type: ignore[import-not-found]
from figures import about, write_figures  # type: ignore[import-not-found]


def write_questions(path: Path, lines: int, bad_every: int) -> None:
    row = '{"id": "q%d", "question": "Which word ends question %d: w%d", "answers": ["w%d"]}\n'
    with open(path, "w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(row % (i, i, i, i))
            if bad_every and i % bad_every == bad_every - 1:
                f.write("{broken\n")


def add_row(path: Path, row: dict) -> None:
    """``row`` into the figures file ``path``: the row of its label replaced, or added."""
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"] if path.exists() else []
    rows = [r for r in rows if r["label"] != row["label"]] + [row]
    write_figures(path, about(what="one row a run, each with its own about"), rows=rows)


def rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--bad-every", type=int, default=2)
    ap.add_argument("--answers", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--delay", type=float, default=0.02)
    ap.add_argument("--exit-timeout", type=float, default=120, help="seconds to wait for the exit after Ctrl-C")
    ap.add_argument("--label", default="now", help="the row's name in --figures")
    ap.add_argument("--figures", help="add the row to this JSON file (replacing the row of --label)")
    args = ap.parse_args()
    fault_server = load_fault_server()
    server = fault_server.FaultServer(delay=args.delay)
    with tempfile.TemporaryDirectory() as tmp:
        questions = Path(tmp) / "questions.jsonl"
        write_questions(questions, args.lines, args.bad_every)
        size_mb = questions.stat().st_size / 2**20
        out = Path(tmp) / "runs"
        results = out / "questions-file-open" / "direct" / "results.jsonl"
        cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", str(questions), "--method", "direct",
               "--setting", "open", "--no-progress", "--out", str(out), "--home", str(Path(tmp) / "home"),
               "--workers", str(args.workers), "--llm", f"openai:fake@{server.url}?retries=1&timeout=30"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HOPQA_", "OPENAI_"))}
        t0 = time.monotonic()
        # run from the temporary folder: ``-m`` puts the working folder first on sys.path, so a run
        # started in a checkout would import that checkout's hopqa whatever PYTHONPATH says
        # SIGINT back to its default in the child: a parent started in the background by a shell
        # ignores it, the child would inherit that, and its Python would never see the Ctrl-C
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        stderr: list[str] = []
        reader = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
        reader.start()
        peak, first, at_n = 0.0, None, None
        while proc.poll() is None:
            now = rss_mb(proc.pid)
            peak = max(peak, now or 0.0)
            answered = len(results.read_bytes().splitlines()) if results.exists() else 0
            if answered and first is None:
                first = time.monotonic() - t0
            if answered >= args.answers:
                at_n = now
                break
            time.sleep(0.05)
        sent = len(server.requests)
        t1 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=args.exit_timeout)
            exit_s: float | None = time.monotonic() - t1
            stopped = f"{exit_s:.1f}"
        except subprocess.TimeoutExpired:  # an older hopqa went on answering every queued question
            proc.kill()
            proc.wait()
            exit_s = None
            stopped = f"> {args.exit_timeout:g} (killed)"
        reader.join(timeout=5)
        time.sleep(0.3)
        warnings = [x for x in stderr if x.startswith("hopqa: warning:")]
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
        print(f"question file: {args.lines:,} questions, {size_mb:.0f} MB, bad line after every {args.bad_every}")
        print("| first answer s | peak RSS MB | RSS at N answers MB | N | Ctrl-C to exit s | exit | warning lines "
              "| requests after Ctrl-C |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {first if first is not None else float('nan'):.1f} | {peak:.0f} | "
              f"{at_n if at_n is not None else float('nan'):.0f} | {args.answers} | {stopped} | {proc.returncode} "
              f"| {len(warnings)} | {len(server.requests) - sent} |")
        last = [x.rstrip() for x in stderr if x.strip()][-1:] or [""]
        print(f"last stderr line: {last[0][:200]}")
        if args.figures:
            row = {"label": args.label, "about": about(pythonpath=os.environ.get("PYTHONPATH", "")),
                   "lines": args.lines, "size_mb": size_mb, "bad_every": args.bad_every, "answers": args.answers,
                   "first_s": first, "peak_mb": peak, "rss_at_n_mb": at_n, "exit_s": exit_s,
                   "exit_timeout": args.exit_timeout, "returncode": proc.returncode, "warning_lines": len(warnings),
                   "requests_after": len(server.requests) - sent}
            add_row(Path(args.figures), row)
    server.close()


if __name__ == "__main__":
    main()
