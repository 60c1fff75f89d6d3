"""How fast the embedded model scores a given continuation (``loglikelihood``, GenSco's scorer),
with the continuation's rows asked for in batches (now) against token by token (before).

    .venv/bin/python benchmarks/loglikelihood.py [--llm embedded:qwen2.5-1.5b] [--limit 10]
        [--rows 1,64] [--figures FILE]

The pairs are GenSco's Table 9 (``hopqa.methods.gensco.prompts.SCORE_PROMPT``): for each of the
first ``--limit`` MuSiQue dev questions and each of its two supporting paragraphs, the context
is the prompt with that paragraph and the continuation the question, as the scorer scores a
sub-question after each candidate passage. Each setting of ``--rows`` is the number of
continuation tokens evaluated per llama.cpp batch (``hopqa.llm.llamacpp.ROWS_PER_BATCH``): 1
evaluates the continuation one token at a time, as the scorer did before (one model step a
token), 64 is the default. Each setting scores every pair twice on a fresh model, the first
pass warming the prefix cache as a run does; the second is timed.

Prints per setting: pairs, continuation tokens per pair, seconds per pair (median and total)
and the speed-up over the first setting, and the largest difference of a token's
log-probability from the first setting's (float noise: the kernels differ with the batch
size). ``--figures FILE`` writes the rows as JSON with the date, machine, model and command.
Run nothing else meanwhile (the model's threads busy-wait).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

# benchmarks/figures.py and doc_tables.py (the script's folder is on sys.path)
from doc_tables import loglikelihood_table
from figures import about, write_figures


def pairs(limit: int) -> list[tuple[str, str]]:
    """GenSco's passage-relevance pairs (context with one supporting paragraph, the question)."""
    from hopqa.datasets import load_dataset
    from hopqa.methods.gensco.prompts import SCORE_PROMPT
    from hopqa.text import render_passage

    out = []
    for ex in load_dataset("musique", "dev", limit=limit):
        for p in ex.supporting[:2]:
            out.append((SCORE_PROMPT.format(context=render_passage(p)), " " + ex.question))
    return out


def measure(spec: str, rows: int, work: list[tuple[str, str]]) -> dict[str, Any]:
    """Score ``work`` twice on a fresh model with ``rows`` continuation tokens a batch; the
    second pass timed."""
    from hopqa.llm import llamacpp, load_llm

    llamacpp.ROWS_PER_BATCH = rows
    llm = load_llm(spec, cache=False)
    try:
        for context, continuation in work:
            llm.loglikelihood(context, continuation)
        seconds, values, tokens = [], [], 0
        for context, continuation in work:
            t0 = time.perf_counter()
            ll = llm.loglikelihood(context, continuation)
            seconds.append(time.perf_counter() - t0)
            values.append(ll.token_logprobs)
            tokens += len(ll.token_logprobs)
    finally:
        close = getattr(llm, "close", None)
        if close is not None:
            close()
    return {"rows_per_batch": rows, "pairs": len(work), "tokens_per_pair": tokens / len(work),
            "median_s": statistics.median(seconds), "total_s": sum(seconds), "values": values}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--limit", type=int, default=10, help="MuSiQue dev questions (two pairs each)")
    ap.add_argument("--rows", default="1,64", help="continuation tokens per batch, one run each")
    ap.add_argument("--figures", help="also write the rows as JSON to this file (with the date, machine, command)")
    args = ap.parse_args()
    work = pairs(args.limit)
    results = [measure(args.llm, int(r), work) for r in args.rows.split(",") if r]
    first = results[0]
    rows = []
    for r in results:
        diff = max((abs(a - b) for x, y in zip(first["values"], r["values"], strict=True)
                    for a, b in zip(x, y, strict=True)), default=0.0)
        rows.append({k: v for k, v in r.items() if k != "values"} | {"speedup": first["total_s"] / r["total_s"],
                                                                     "max_diff": diff})
    print(f"{args.llm}: GenSco's Table 9 pairs, the first {args.limit} MuSiQue dev questions\n")
    print(loglikelihood_table(rows), end="")
    if args.figures:
        write_figures(args.figures, about(llm=args.llm, limit=args.limit), rows=rows)


if __name__ == "__main__":
    main()
