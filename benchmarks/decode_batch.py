"""What one decoding step costs with 1, 2, 4, 8 sequences in the batch, on the embedded model.

    .venv/bin/python benchmarks/decode_batch.py [--llm qwen2.5-1.5b] [--sizes 1,2,4,8]
        [--prompt-tokens 512] [--steps 32] [--repeats 3] [--figures FILE]

Batching concurrent requests (continuous batching: HGOT's level, GenSco's candidates, Tree of
Reviews' children and LeapQuery's votes decoded together instead of taking turns) pays only
when a step of ``n`` tokens, one per sequence, costs less than ``n`` steps of one token. This
measures exactly that, below everything hopqa adds: a prompt of ``--prompt-tokens`` tokens is
evaluated once on sequence 0 and shared with every sequence (``llama_memory_seq_cp``), then
``--steps`` decoding steps of ``n`` tokens (one per sequence, at its next position) are timed
with ``llama_decode``, for each ``n``; the best of ``--repeats``. Prints per size: milliseconds
per step, per token, and tokens per second against ``n = 1``. Load only one model process at a
time (it uses every core). ``--figures FILE`` writes the rows as JSON (``benchmarks/figures.py``),
which ``benchmarks/doc_tables.py`` renders in docs/llm-backends.md (``docs/results/decode-batch.json``).
"""

from __future__ import annotations

import argparse
import time

# benchmarks/doc_tables.py and figures.py (the script's folder is on sys.path)
from doc_tables import decode_batch_table
from figures import about, machine, write_figures

from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM


def measure(llm: LlamaCppLLM, n: int, prompt: list[int], steps: int) -> float:
    """Seconds for ``steps`` decoding steps of ``n`` sequences sharing ``prompt``'s cells."""
    import llama_cpp
    from llama_cpp import _internals

    llama = llm._llm
    ctx = llama._ctx
    ctx.kv_cache_seq_rm(-1, 0, -1)
    llama.reset()
    llama.eval(prompt)
    for seq in range(1, n):
        ctx.kv_cache_seq_cp(0, seq, 0, len(prompt))
    batch = _internals.LlamaBatch(n_tokens=n, embd=0, n_seq_max=1, verbose=False)
    token = prompt[-1]
    try:
        t0 = time.perf_counter()
        for step in range(steps):
            b = batch.batch
            for i in range(n):
                b.token[i] = token
                b.pos[i] = len(prompt) + step
                b.seq_id[i][0] = i
                b.n_seq_id[i] = 1
                b.logits[i] = True
            b.n_tokens = n
            ctx.decode(batch)
        return time.perf_counter() - t0
    finally:
        batch.close()
        for seq in range(1, n):
            llama_cpp.llama_memory_seq_rm(ctx.memory, seq, -1, -1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", default="qwen2.5-1.5b", help="an embedded model name")
    p.add_argument("--sizes", default="1,2,4,8")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--figures", help="also write the rows as JSON to this file")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    # batch_samples > 1 gives the context one KV cache holding several sequences, as hopqa's lockstep does
    llm = LlamaCppLLM(args.llm, config=EmbeddedConfig(n_ctx=4096, batch_samples=max(sizes), prefix_cache_mb=0))
    text = " ".join(f"Paragraph {i}: the town number {i} lies on the river and has a market." for i in range(200))
    prompt = llm._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)[: args.prompt_tokens]
    print(f"# decoding steps on {args.llm}: a {len(prompt)}-token shared prompt, {args.steps} steps, best of "
          f"{args.repeats}\n# machine: {machine()}\n", flush=True)
    rows: list[dict[str, float]] = []
    for n in sizes:
        best = min(measure(llm, n, prompt, args.steps) for _ in range(args.repeats))
        rows.append({"sequences": n, "ms_step": best / args.steps * 1000})
        print(f"{n} sequences: {rows[-1]['ms_step']:.1f} ms a step", flush=True)
    print("\n" + decode_batch_table(rows), end="")
    if args.figures:
        write_figures(args.figures, about(model=f"embedded:{args.llm}", prompt_tokens=len(prompt), steps=args.steps,
                                          repeats=args.repeats), rows=rows)
    llm.close()


if __name__ == "__main__":
    main()
