"""Speed and cost figures of the foundation: BM25 over the demo corpus, the embedded LLMs,
the response cache, and one retrieve-then-read question end to end.

    .venv/bin/python benchmarks/foundation.py [--llm embedded:smollm2-135m] [--llm embedded:qwen2.5-1.5b]
        [--figures FILE]

Prints a table per part; ``--figures FILE`` also writes every part's rows as JSON with the
date, the machine and its load average, and the command (``docs/results/foundation.json`` is
such a file, from which ``benchmarks/doc_tables.py`` renders the first tables of
docs/benchmarks/speed.md). Figures depend on the machine and on what else runs on it: quote
medians, and run nothing else meanwhile (llama.cpp's OpenMP threads busy-wait).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

# benchmarks/figures.py (the script's folder is on sys.path)
from figures import about, write_figures

#: Every part's rows (``--figures``): part -> rows of numbers.
ROWS: dict[str, list[dict[str, Any]]] = {}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bench_bm25(home: Path) -> None:
    from hopqa.datasets import load_dataset
    from hopqa.demo import build_demo_corpus
    from hopqa.retrieval.bm25 import BM25Retriever, build_index

    corpus = build_demo_corpus(home)
    t0 = time.perf_counter()
    r = build_index(corpus, home / "bench-idx", progress=False)
    build = time.perf_counter() - t0
    size_mb = sum(f.stat().st_size for f in (home / "bench-idx").iterdir()) / 2**20
    t0 = time.perf_counter()
    r = BM25Retriever.load(home / "bench-idx")
    load = time.perf_counter() - t0
    examples = load_dataset("musique", "dev")
    lat, hits = [], 0
    for ex in examples:
        t0 = time.perf_counter()
        res = r.search(ex.question, 10)
        lat.append((time.perf_counter() - t0) * 1000)
        gold = {(p.title, p.text) for p in ex.supporting}
        hits += bool(gold & {(h.title, h.text) for h in res})
    t0 = time.perf_counter()
    r.batch_search([ex.question for ex in examples], 10)
    batch_qps = len(examples) / (time.perf_counter() - t0)
    ROWS.setdefault("bm25", []).append({
        "passages": r.size, "build_s": build, "index_mb": size_mb, "load_s": load, "p50_ms": statistics.median(lat),
        "p95_ms": pct(lat, 0.95), "batch_qps": batch_qps, "questions": len(examples),
        "recall_at_10_any": hits / len(examples)})
    print("\n## BM25 over the demo corpus (bm25s, numpy backend)")
    print("| passages | build s | index MB | load s | query p50 ms | p95 ms | batch q/s | MuSiQue dev recall@10 (any gold) |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {r.size} | {build:.1f} | {size_mb:.0f} | {load:.2f} | {statistics.median(lat):.1f} | {pct(lat, 0.95):.1f} "
          f"| {batch_qps:.0f} | {hits / len(examples):.2f} |")


def bench_llm(spec: str, home: Path) -> None:
    from hopqa.llm import load_llm

    t0 = time.perf_counter()
    llm = load_llm(spec, home=home, cache=False)
    load = time.perf_counter() - t0
    prompt = ("Answer the question using the passages below.\n\n"
              + "\n".join(f"[{i}] Passage {i} | " + "The county seat of Mountrail County is Stanley. " * 12
                          for i in range(1, 6))
              + "\n\nQuestion: What is the county seat of Mountrail County?\nAnswer:")
    llm.generate("warm up", max_tokens=2)
    gens = []
    for _ in range(3):
        t0 = time.perf_counter()
        g = llm.generate(f"Run {len(gens)}. " + prompt, max_tokens=48, temperature=0.0)  # no KV prefix reuse
        gens.append((time.perf_counter() - t0, g.prompt_tokens, g.completion_tokens))
    secs = statistics.median(x[0] for x in gens)
    ptok, ctok = gens[0][1], gens[0][2]
    ctx = prompt[:1500]
    t0 = time.perf_counter()
    ll = llm.loglikelihood(ctx, " What is the county seat of Mountrail County in North Dakota?")
    ll_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    llm.loglikelihood(ctx, " Which town is the seat of the county?")
    ll_reuse = time.perf_counter() - t0
    ROWS.setdefault("llm", []).append({
        "llm": spec, "load_s": load, "prompt_tokens": ptok, "completion_tokens": ctok, "generate_s": secs,
        "loglikelihood_s": ll_first, "loglikelihood_shared_prefix_s": ll_reuse, "loglikelihood_tokens": len(ll.tokens),
        "context_tokens": llm.count_tokens(ctx)})
    print(f"\n## {spec}")
    print("| load s | prompt tokens | completion tokens | generate s (cold prompt, median of 3) | loglikelihood s (cold / shared prefix) |")
    print("|---|---|---|---|---|")
    print(f"| {load:.1f} | {ptok} | {ctok} | {secs:.2f} | {ll_first:.2f} / {ll_reuse:.2f} ({len(ll.tokens)} tokens) |")
    llm.close()


def bench_cache(home: Path) -> None:
    from hopqa.llm import CachedLLM, ResponseCache
    from hopqa.llm.scripted import ScriptedLLM

    llm = CachedLLM(ScriptedLLM(replies=lambda r: "x" * 200), ResponseCache(tempfile.mkdtemp(dir=home)))
    prompts = [f"prompt {i} " * 100 for i in range(500)]
    t0 = time.perf_counter()
    for p in prompts:
        llm.generate(p)
    miss = (time.perf_counter() - t0) / len(prompts) * 1000
    t0 = time.perf_counter()
    for p in prompts:
        llm.generate(p)
    hit = (time.perf_counter() - t0) / len(prompts) * 1000
    ROWS.setdefault("cache", []).append({"store_ms": miss, "hit_ms": hit, "calls": len(prompts)})
    print("\n## Response cache (diskcache)")
    print("| store ms/call | hit ms/call |\n|---|---|")
    print(f"| {miss:.2f} | {hit:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--llm", action="append", help="LLM spec(s) to time (default embedded:smollm2-135m)")
    ap.add_argument("--home", help="hopqa home (default: a temporary directory)")
    ap.add_argument("--figures", help="also write every part's rows as JSON to this file")
    args = ap.parse_args()
    home = Path(args.home or tempfile.mkdtemp(prefix="hopqa-bench-"))
    os.environ.setdefault("HOPQA_HOME", str(home))
    print(f"machine: {os.cpu_count()} cores; home {home}")
    bench_bm25(home)
    bench_cache(home)
    for spec in args.llm or ["embedded:smollm2-135m"]:
        bench_llm(spec, home)
    if args.figures:
        print(f"figures: {write_figures(args.figures, about(), rows=ROWS)}")


if __name__ == "__main__":
    main()
