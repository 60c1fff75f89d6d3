"""The embedded model's memory (RSS) as its prefix cache fills up to its budget, and after.

    .venv/bin/python benchmarks/prefix_cache_memory.py [--llm qwen2.5-1.5b] [--budget-mb 2048]
        [--prompt-tokens 1024] [--past-full 4] [--figures FILE]

Loads the embedded model with ``?prefix_cache_mb=--budget-mb`` and sends prompts that share no
whole block with each other (each keeps a snapshot of its own) until the cache has evicted
``--past-full`` snapshots, asking one token of each. Prints, every few prompts and at the end:
prompt tokens sent, the cache's entries and MiB, evictions, and the process's resident memory
(``VmRSS``) and its peak (``VmHWM``) against the model loaded with nothing cached. The prompts are
evaluated at the model's prompt speed (Qwen2.5-1.5B: ~60 tokens/s on 2 cores, ~28 KB of keys and
values a token), so the default budget takes ~20 minutes to fill. One model process at a time.
``--figures FILE`` also writes the rows as JSON with the date, machine, model and command
(``benchmarks/figures.py``), rewritten after every row so a stopped run keeps what it printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from typing import Any

from figures import about, write_figures

from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM


def memory_mb() -> tuple[float, float]:
    """(resident, peak resident) memory of this process in MiB, from /proc/self/status."""
    found = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) / 1024
    return found.get("VmRSS", 0.0), found.get("VmHWM", 0.0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", default="qwen2.5-1.5b", help="an embedded model name")
    p.add_argument("--budget-mb", type=int, default=2048)
    p.add_argument("--prompt-tokens", type=int, default=1024)
    p.add_argument("--past-full", type=int, default=4, help="stop after this many evictions")
    p.add_argument("--figures", help="also write the rows as JSON to this file")
    args = p.parse_args()
    llm = LlamaCppLLM(args.llm, config=EmbeddedConfig(n_ctx=4096, prefix_cache_mb=args.budget_mb, chat=False))
    cache = llm.prefix_cache
    assert cache is not None, "--budget-mb must be above 0"
    rss0, _ = memory_mb()
    print(f"prefix cache memory on {args.llm}: budget {args.budget_mb} MiB, prompts of ~{args.prompt_tokens} "
          f"tokens sharing no block; {platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}\n")
    print(f"model loaded, nothing cached: RSS {rss0:.0f} MiB\n")
    print("| prompts | tokens sent | entries | cache MiB | evictions | RSS MiB | RSS − loaded | peak RSS MiB | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    words = [f"w{i}" for i in range(5000)]
    rng = random.Random(0)
    sent, i, t0 = 0, 0, time.perf_counter()
    rows: list[dict[str, Any]] = []
    meta = about(model=f"embedded:{args.llm}", budget_mb=args.budget_mb, prompt_tokens=args.prompt_tokens,
                 past_full=args.past_full, loaded_rss_mb=rss0)

    def row() -> None:
        s = cache.stats()
        rss, peak = memory_mb()
        r = {"prompts": i, "tokens_sent": sent, "entries": s["entries"], "cache_mb": s["bytes"] / 2**20,
             "evictions": s["evictions"], "rss_mb": rss, "rss_over_loaded_mb": rss - rss0, "peak_rss_mb": peak,
             "seconds": time.perf_counter() - t0}
        rows.append(r)
        if args.figures:
            write_figures(args.figures, meta, rows=rows)
        print(f"| {r['prompts']} | {r['tokens_sent']} | {r['entries']} | {r['cache_mb']:.0f} | {r['evictions']} | "
              f"{r['rss_mb']:.0f} | {r['rss_over_loaded_mb']:+.0f} | {r['peak_rss_mb']:.0f} | {r['seconds']:.0f} |",
              flush=True)

    while cache.stats()["evictions"] < args.past_full:
        # a distinct first word: no two prompts share a whole block, so each keeps its own snapshot
        text = f"Note {i}: " + " ".join(rng.choice(words) for _ in range(args.prompt_tokens // 3))
        gen = llm.generate(text, max_tokens=1)
        sent += gen.prompt_tokens
        i += 1
        if cache.stats()["entries"] == 0:
            raise SystemExit(f"the prompt's snapshot was not kept: {args.prompt_tokens} tokens is less than a block, "
                             f"or its snapshot is larger than the {args.budget_mb} MiB budget")
        if i % 8 == 0:
            row()
    row()
    llm.close()


if __name__ == "__main__":
    main()
