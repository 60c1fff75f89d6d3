"""What ``hopqa eval`` costs besides the LLM: start-up, per-call overhead, parallel speed-up and
the cached re-run, against a fake OpenAI-compatible server that answers every request after a
fixed delay (no model, no network).

    .venv/bin/python benchmarks/eval_overhead.py [--delay 0.2] [--limit 64] [--workers 1,8]
        [--methods retrieve-then-read,self-ask] [--dataset hotpotqa] [--peers dspy,sdk]
        [--peer-python /path/to/venv-with-dspy/bin/python] [--peer-ranking overlap|bm25] [--figures FILE]
        [--checkout NAME=PATH ...]

For each method and worker count, ``hopqa eval`` runs as a subprocess on the first ``--limit``
shipped dev questions (distractor setting) twice with the same ``--home``: a first run, whose
every LLM call reaches the server, then a re-run into a new ``--out`` that the LLM response
cache answers. Printed per row:

- ``wall s``: the subprocess's wall time, first run and cached re-run (``cached %`` of first);
- ``start s``: process start to the server's first request (imports, data, method set-up);
- ``calls``: requests the server answered;
- ``end s``: the last reply to the process's exit (summary, results, report table, shutdown);
- ``overhead ms/call`` (one worker only, where calls are sequential): the time between two
  consecutive requests minus the server's delay, i.e. hopqa's own work per call (prompting,
  retrieval, parsing, trace, cache, results file);
- ``speed-up``: first-run wall time at the first worker count over this row's; ``after start``
  the same for the time from the first request to the end (start-up left out: it does not
  shrink with workers).

Then, in the same run and against the same server, the peers: Retrieve-then-Read on the same
questions written with DSPy (``dspy.Predict`` under ``dspy.Evaluate``, its cache for the re-run)
and with the bare openai SDK in a thread pool (no cache), by ``benchmarks/overhead_peers.py``
under ``--peer-python`` (a venv with ``pip install dspy==3.4.1``: DSPy is not a dependency of
hopqa); a peer that is not installed there gets a row saying so. The server answers DSPy's
prompts in DSPy's ``[[ ## answer ## ]]`` format, so it makes one call a question as the others.
The peers rank each question's paragraphs by the words they share with it, or with
``--peer-ranking bm25`` by bm25s with PyStemmer's stemmer (``pip install bm25s PyStemmer`` in
the peer's venv), the same work as hopqa's BM25 over the question's pool.

``--figures FILE`` also writes every row as JSON, with the date, the machine and its load
average, and the command (``docs/results/overhead-*.json`` are such files, which
``benchmarks/doc_tables.py`` renders into docs/benchmarks/speed.md).

The server is ``tests/fault_server.py``'s ``FaultServer`` (imported by path) with no faults.
Figures depend on the machine and on its load: run nothing else meanwhile and quote the load
average (printed with the machine). ``PYTHONPATH`` chooses the hopqa that runs; ``--checkout
NAME=PATH`` (repeatable) runs the hopqa of each checkout instead, one after the other in the same
run against the same server, its rows named ``hopqa NAME`` with the checkout's commit (e.g. a ``git
worktree`` of an older commit beside ``now=.``: ``docs/results/overhead-history-*.json``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# benchmarks/figures.py (the script's folder is on sys.path)
from figures import about, machine, write_figures

ROOT = Path(__file__).resolve().parent.parent


def load_fault_server() -> Any:
    """``tests/fault_server.py`` as a module (the tests are not a package)."""
    spec = importlib.util.spec_from_file_location("fault_server", ROOT / "tests" / "fault_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_server(fault_server: Any, delay: float) -> Any:
    """A healthy ``FaultServer`` with a fixed delay that notes when each request arrived."""

    class TimedServer(fault_server.FaultServer):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__(faults={}, delay=delay, reply=dspy_reply(fault_server.answer_for))
            self.arrivals: list[float] = []

        def record(self, path: str, body: dict[str, Any], headers: Any, kind: str) -> None:
            with self._lock:
                self.arrivals.append(time.perf_counter())
            super().record(path, body, headers, kind)

        def reset(self) -> None:
            with self._lock:
                self.arrivals.clear()
                self.requests.clear()

    return TimedServer()


def clean_env(checkout: Path | None = None) -> dict[str, str]:
    """The environment of the measured processes: no hopqa or OpenAI settings, and Python's
    bytecode cache written as on a user's machine (``PYTHONDONTWRITEBYTECODE``, set in some
    containers, would make every run compile its modules again: ~0.13 s of a cached re-run);
    with ``checkout``, its hopqa first on ``PYTHONPATH``."""
    drop = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HOPQA_HOME", "HOPQA_LLM", "HOPQA_JUDGE", "HOPQA_DATA_DIR",
            "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    return env


def checkouts(specs: list[str]) -> list[tuple[str, Path | None]]:
    """``--checkout NAME=PATH`` as (the rows' harness name with the checkout's commit, the path);
    none given: the hopqa ``PYTHONPATH`` (or the installation) gives, named ``hopqa``."""
    if not specs:
        return [("hopqa", None)]
    found = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        where = Path(path).resolve()
        if not sep or not name or not (where / "hopqa" / "__init__.py").is_file():
            raise SystemExit(f"--checkout {spec!r}: expected NAME=PATH, PATH a checkout with hopqa/ in it")
        commit = subprocess.run(["git", "-C", str(where), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip()
        found.append((f"hopqa {name}" + (f" ({commit})" if commit else ""), where))
    return found


def run_eval(server: Any, method: str, workers: int, home: Path, out: Path, args: argparse.Namespace,
             checkout: Path | None = None) -> dict[str, Any]:
    """One ``hopqa eval`` subprocess (of ``checkout``'s hopqa if given); its wall time and what the
    server saw."""
    cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", args.dataset, "--split", "dev",
           "--setting", "distractor", "--method", method, "--limit", str(args.limit),
           "--llm", f"openai:fake@{server.url}?timeout=30", "--workers", str(workers),
           "--home", str(home), "--out", str(out), "--no-progress"]
    # cwd not the checkout: PYTHONPATH (or the installed hopqa)
    return timed(server, cmd, out.parent, args.delay, clean_env(checkout))


def run_peer(server: Any, peer: str, workers: int, questions: Path, cache: Path, args: argparse.Namespace
             ) -> dict[str, Any]:
    """One run of ``overhead_peers.py`` (DSPy or the SDK) under ``--peer-python``."""
    cmd = [args.peer_python, str(ROOT / "benchmarks" / "overhead_peers.py"), peer, "--url", server.url + "/v1",
           "--questions", str(questions), "--workers", str(workers), "--cache-dir", str(cache),
           "--ranking", args.peer_ranking]
    return timed(server, cmd, questions.parent, args.delay, clean_env())


def timed(server: Any, cmd: list[str], cwd: Path, delay: float, env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd``; its wall time, the server's first request after start (``start``), the
    time from the last reply to the exit (``end``) and, for sequential calls, the time between
    two requests beyond the server's delay (``overhead``)."""
    server.reset()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=1800, cwd=cwd)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    arrivals = sorted(server.arrivals)
    start = arrivals[0] - t0 if arrivals else None
    overhead = None
    if len(arrivals) > 1:
        overhead = (arrivals[-1] - arrivals[0]) / (len(arrivals) - 1) - delay
    end = wall - (arrivals[-1] - t0) - delay if arrivals else None
    return {"wall": wall, "start": start, "end": end, "calls": len(arrivals), "overhead": overhead}


def dspy_reply(answer: Any) -> Any:
    """The fake server's reply: hopqa's and the SDK's as ``tests/fault_server.py`` gives it; in
    DSPy's ChatAdapter format for a DSPy prompt (its ``[[ ## field ## ]]`` markers)."""

    def reply(prompt: str) -> str:
        text = answer(prompt)
        if "[[ ## " in prompt:
            return f"[[ ## answer ## ]]\n{text}\n\n[[ ## completed ## ]]"
        return text

    return reply


def write_questions(args: argparse.Namespace, path: Path) -> Path:
    """The questions hopqa's runs answer, as ``overhead_peers.py`` reads them."""
    from hopqa.datasets import iter_dataset

    rows = [{"id": ex.id, "question": ex.question, "answers": ex.answers,
             "paragraphs": [[p.title, p.text] for p in ex.paragraphs]}
            for ex in iter_dataset(args.dataset, "dev", limit=args.limit)]
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def peer_available(python: str, peer: str, ranking: str = "overlap") -> bool:
    modules = ("dspy" if peer == "dspy" else "openai") + (", bm25s, Stemmer" if ranking == "bm25" else "")
    return subprocess.run([python, "-c", f"import {modules}"], capture_output=True, check=False).returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay", type=float, default=0.2, help="seconds the server waits before each reply")
    ap.add_argument("--limit", type=int, default=64, help="questions per run")
    ap.add_argument("--workers", default="1,8", help="worker counts, comma-separated (the first is the baseline)")
    ap.add_argument("--methods", default="retrieve-then-read,self-ask")
    ap.add_argument("--dataset", default="hotpotqa")
    ap.add_argument("--peers", default="dspy,sdk",
                    help="the same Retrieve-then-Read in DSPy and with the bare openai SDK (overhead_peers.py), "
                         "comma-separated; empty for none")
    ap.add_argument("--peer-python", default=sys.executable,
                    help="the Python that has the peers installed (e.g. a venv with dspy==3.4.1)")
    ap.add_argument("--figures", help="also write the rows as JSON to this file")
    ap.add_argument("--peer-ranking", choices=("overlap", "bm25"), default="overlap",
                    help="how the peers rank a question's paragraphs: by shared words, or with bm25s and "
                         "PyStemmer as hopqa's BM25 does (installed beside the peer)")
    ap.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH",
                    help="run the hopqa of this checkout (e.g. a git worktree of an older commit), its rows named "
                         "'hopqa NAME (commit)'; repeatable, in order; default: the hopqa PYTHONPATH gives")
    args = ap.parse_args()
    harnesses = checkouts(args.checkout)
    peers = [p for p in args.peers.split(",") if p]
    workers = [int(w) for w in args.workers.split(",") if w]
    methods = [m for m in args.methods.split(",") if m]
    fault_server = load_fault_server()
    server = timed_server(fault_server, args.delay)
    print(f"# hopqa eval overhead: {args.dataset} dev, {args.limit} questions, distractor setting, "
          f"server delay {args.delay * 1000:.0f} ms")
    print(f"# machine: {machine()}")
    if peers:
        print(f"# the peers rank a question's paragraphs by {'bm25s' if args.peer_ranking == 'bm25' else 'shared words'}")
    for harness, checkout in harnesses:
        where = subprocess.run([sys.executable, "-c", "import hopqa; print(hopqa.__file__)"], capture_output=True,
                               text=True, env=clean_env(checkout), cwd=tempfile.gettempdir(), check=False).stdout.strip()
        print(f"# {harness} from: {Path(where).parent if where else '?'}")
    print()
    print("| harness | method | workers | calls | first run s | start s | end s | overhead ms/call | speed-up "
          "| after start | cached re-run s | cached % of first |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    try:
        with tempfile.TemporaryDirectory(prefix="hopqa-overhead-") as tmp:
            for i, ((harness, checkout), method) in enumerate((h, m) for h in harnesses for m in methods):
                rows: list[tuple[int, dict[str, Any], dict[str, Any] | None]] = []
                for w in workers:
                    run = Path(tmp) / f"{i}-{method}-{w}"
                    run.mkdir()
                    first = run_eval(server, method, w, run / "home", run / "first", args, checkout)
                    cached = run_eval(server, method, w, run / "home", run / "cached", args, checkout)
                    rows.append((w, first, cached))
                print_rows(harness, method, rows)
            questions = write_questions(args, Path(tmp) / "questions.json") if peers else None
            for peer in peers:
                if not peer_available(args.peer_python, peer, args.peer_ranking):
                    print(f"| {peer} | not installed in {args.peer_python} (pip install "
                          f"{'dspy==3.4.1' if peer == 'dspy' else 'openai'}"
                          f"{' bm25s PyStemmer' if args.peer_ranking == 'bm25' else ''}) |")
                    continue
                rows = []
                for w in workers:
                    cache = Path(tmp) / f"cache-{peer}-{w}"
                    first = run_peer(server, peer, w, questions, cache, args)
                    cached = run_peer(server, peer, w, questions, cache, args) if peer == "dspy" else None
                    rows.append((w, first, cached))
                print_rows(peer, "retrieve-then-read", rows)
    finally:
        server.close()
    print(f"\n# load average after: {os.getloadavg()[0]:.2f}")
    if args.figures:
        write_figures(args.figures, about(load_after=os.getloadavg()[0], dataset=args.dataset, questions=args.limit,
                                          delay_ms=args.delay * 1000, peer_ranking=args.peer_ranking), rows=FIGURES)


#: Every printed row as figures (``--figures``).
FIGURES: list[dict[str, Any]] = []


def print_rows(harness: str, method: str, rows: list[tuple[int, dict[str, Any], dict[str, Any] | None]]) -> None:
    """One table row per worker count: the first run, against the first worker count's."""
    base_wall = base_run = None
    for w, first, cached in rows:
        run = first["wall"] - (first["start"] or 0.0)
        base_wall, base_run = base_wall or first["wall"], base_run or run
        FIGURES.append({"harness": harness, "method": method, "workers": w, "calls": first["calls"],
                        "wall": first["wall"], "start": first["start"], "end": first["end"],
                        "overhead_ms": first["overhead"] * 1000 if first["overhead"] is not None and w == 1 else None,
                        "speedup": base_wall / first["wall"], "speedup_after_start": base_run / run,
                        "cached_wall": cached["wall"] if cached is not None else None})
        start = f"{first['start']:.2f}" if first["start"] is not None else "-"
        overhead = f"{first['overhead'] * 1000:.1f}" if first["overhead"] is not None and w == 1 else "-"
        end = f"{first['end']:.2f}" if first["end"] is not None else "-"
        again = (f"{cached['wall']:.2f} | {100 * cached['wall'] / first['wall']:.1f}%" if cached is not None
                 else "- | -")
        print(f"| {harness} | {method} | {w} | {first['calls']} | {first['wall']:.2f} | {start} | {end} | {overhead} "
              f"| {base_wall / first['wall']:.2f}x | {base_run / run:.2f}x | {again} |", flush=True)
        if cached is not None and cached["calls"]:
            print(f"#   note: the cached re-run still sent {cached['calls']} requests", flush=True)


if __name__ == "__main__":
    main()
