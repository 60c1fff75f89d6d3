"""Where the time of one LLM call of ``hopqa eval`` goes, layer by layer, against a fake
OpenAI-compatible server that answers at once (no model, no network).

    .venv/bin/python benchmarks/call_layers.py [--questions 64] [--repeats 5] [--dataset hotpotqa]
        [--figures FILE]

``benchmarks/eval_overhead.py`` measures hopqa's whole cost per call beside DSPy's and the bare
SDK's; this script splits hopqa's into the layers a call goes through, each timed alone in this
process on the same prompts (Retrieve-then-Read's, over the first ``--questions`` shipped dev
questions, distractor setting), sequentially:

1. ``sdk``: ``openai.OpenAI().chat.completions.create``, the SDK's default HTTP client;
2. ``bounded``: the same through hopqa's HTTP client (``bounded_http_client``: deadline and byte
   limit hooks, tracked connections) inside ``_bounded`` (the request registered with the
   watcher that aborts it when cancelled), as every hopqa request is;
3. ``llm``: ``OpenAICompatibleLLM.generate`` without the response cache (retries, parsing of the
   reply, usage accounting);
4. ``cached llm``: the same with the response cache, every call a miss (the lookup and the
   queued write);
5. ``method``: ``Method.answer`` of Retrieve-then-Read over the question's own paragraphs
   (``CandidatePool``: BM25 with stemming; the prompt; the answer parser; the trace);
6. ``record``: 5 plus scoring the answer and making its ``results.jsonl`` line
   (``evaluation.runner._record``: EM, F1, ROUGE-L, supporting-paragraph recall, K-precision,
   the trace as a dict), as ``hopqa eval`` does for each question (on its main thread, while the
   worker goes on to the next question, unless a judge or BERTScore scores: then on the worker).

Each layer is timed ``--repeats`` times over all questions; printed: the median milliseconds a
call (over the repeats) and what the layer adds to the one before. Writing the line to disk
(``fsync``) is left out: the runner does it on its main thread while the worker goes on. The
server runs in a subprocess (``tests/fault_server.py``'s ``FaultServer``), so its work is not
this process's; it is part of every row, so the differences are hopqa's. Figures depend on the
machine and its load: run nothing else meanwhile. ``--figures FILE`` writes the rows as JSON
(``benchmarks/figures.py``), which ``benchmarks/doc_tables.py`` renders in
docs/benchmarks/speed.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# benchmarks/doc_tables.py and figures.py (the script's folder is on sys.path)
from doc_tables import call_layers_table
from figures import about, machine, write_figures

ROOT = Path(__file__).resolve().parent.parent
SERVER = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("fault_server", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
server = module.FaultServer(faults={})
print(server.url, flush=True)
sys.stdin.read()  # until the benchmark closes the pipe
server.close()
"""


def start_server() -> tuple[subprocess.Popen[str], str]:
    """The fake server in a subprocess, and its base URL."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(ROOT / "tests" / "fault_server.py")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def timed(call: Callable[[Any], Any], items: list[Any], repeats: int) -> float:
    """The median over ``repeats`` of the mean milliseconds of ``call`` over ``items`` (after one warm-up call)."""
    call(items[0])
    means = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for item in items:
            call(item)
        means.append((time.perf_counter() - t0) / len(items) * 1000)
    return statistics.median(means)


def layers(url: str, args: argparse.Namespace) -> list[tuple[str, float]]:
    """(layer, median ms a call) for each layer of the module docstring."""
    import openai

    from hopqa.build import build_method, load_model
    from hopqa.datasets import iter_dataset
    from hopqa.evaluation import runner
    from hopqa.evaluation.metrics import load_metrics
    from hopqa.llm.openai import _bounded, bounded_http_client
    from hopqa.methods.retrieve_read import READ_PROMPT
    from hopqa.retrieval.pool import CandidatePool
    from hopqa.text import render_passages

    examples = list(iter_dataset(args.dataset, "dev", limit=args.questions))
    prompts = [READ_PROMPT.format(passages=render_passages(CandidatePool(ex.paragraphs).search(ex.question, 5),
                                                           max_words=120), question=ex.question) for ex in examples]
    load_metrics()
    home = tempfile.mkdtemp(prefix="hopqa-layers-")
    spec = f"openai:fake@{url}?timeout=30"
    sdk = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)
    bounded = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0, http_client=bounded_http_client(openai))
    plain_llm = load_model(spec, home=home, cache=False)
    cached_llm = load_model(spec, home=home, cache=True)
    method = build_method("retrieve-then-read", load_model(spec, home=home, cache=False))
    misses = iter(range(10**9))

    def request(client: Any, prompt: str) -> Any:
        return client.chat.completions.create(model="fake", messages=[{"role": "user", "content": prompt}],
                                              max_tokens=32, temperature=0.0, stop=["\n\n"])

    def in_bound(prompt: str) -> Any:
        with _bounded(30.0, 10_000_000, None):
            return request(bounded, prompt)

    def record(ex: Any) -> Any:
        return runner._record(ex, runner._answer(method, ex, "distractor"), "distractor", None, None)

    rows = [("sdk", lambda p: request(sdk, p), prompts),
            ("bounded", in_bound, prompts),
            ("llm", lambda p: plain_llm.generate(p, max_tokens=32, stop=["\n\n"]), prompts),
            ("cached llm", lambda p: cached_llm.generate(f"{p} {next(misses)}", max_tokens=32, stop=["\n\n"]), prompts),
            ("method", lambda ex: runner._answer(method, ex, "distractor"), examples),
            ("record", record, examples)]
    out = []
    for name, call, items in rows:
        out.append((name, timed(call, items, args.repeats)))
        print(f"#   {name}: {out[-1][1]:.2f} ms", file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dataset", default="hotpotqa")
    ap.add_argument("--figures", help="also write the rows as JSON to this file")
    args = ap.parse_args()
    print(f"# one LLM call of hopqa eval, layer by layer: {args.dataset} dev, {args.questions} questions, "
          f"median of {args.repeats} repeats\n# machine: {machine()}\n")
    proc, url = start_server()
    try:
        rows = layers(url, args)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
    figures = [{"layer": name, "ms": ms} for name, ms in rows]
    print(call_layers_table(figures), end="")
    if args.figures:
        write_figures(args.figures, about(dataset=args.dataset, questions=args.questions, repeats=args.repeats),
                      rows=figures)


if __name__ == "__main__":
    main()
