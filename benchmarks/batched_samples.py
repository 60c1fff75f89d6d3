"""Samples decoded together against the same seeds drawn one by one, on the embedded model.

    .venv/bin/python benchmarks/batched_samples.py [--model qwen2.5-1.5b] [--n 2,4] [--max-tokens 64]
        [--temperature 0.7] [--prompts 6] [--figures FILE]

Two instances of the model, ``batch_samples=8`` (``hopqa.llm.lockstep``: off by default, as this
measures) and ``batch_samples=0`` (the default: each sample a seeded call of its own), answer the same requests for ``n``
samples: short multi-hop prompts in the shape of HGOT's Predict and LeapQuery's vote (passages,
a question, a reasoning cue), each at every ``n``. Prints per ``n``: seconds per request each
way and the speed-up, prompt tokens evaluated each way, and how many samples are identical
between the two and how many share their first token (llama.cpp's kernels for a batch of two or
more tokens are not those for one, so identical samples are not guaranteed: docs/llm-backends.md, "Batched
samples"). Run it alone: one model process at a time on a 2-core machine. ``--figures FILE``
writes the rows as JSON (``benchmarks/figures.py``), which ``benchmarks/doc_tables.py`` renders in
docs/llm-backends.md (``docs/results/batched-samples.json``).
"""

from __future__ import annotations

import argparse
import time

# benchmarks/doc_tables.py and figures.py (the script's folder is on sys.path)
from doc_tables import batched_samples_table
from figures import about, machine, write_figures

PASSAGES = [
    ("Kinnaird Head", "Kinnaird Head is a headland projecting into the North Sea, within the town of Fraserburgh, "
     "Aberdeenshire on the east coast of Scotland. Its lighthouse was the first built in Scotland."),
    ("Fraserburgh", "Fraserburgh is a town in Aberdeenshire, Scotland, with a population of about 13,000. It lies "
     "at the extreme northeast corner of Aberdeenshire, around 64 km north of Aberdeen."),
    ("Aberdeenshire", "Aberdeenshire is one of the 32 council areas of Scotland. Its council headquarters are in "
     "Aberdeen, which is not part of the council area."),
    ("Northern Lighthouse Board", "The Northern Lighthouse Board is the general lighthouse authority for Scotland "
     "and the Isle of Man; it was founded in 1786 and is based in Edinburgh."),
]
QUESTIONS = [
    "In which council area is the town with Scotland's first lighthouse?",
    "Where are the headquarters of the council area that contains Fraserburgh?",
    "How far is the town on Kinnaird Head from Aberdeen?",
    "In what year was the authority that runs Scotland's lighthouses founded?",
    "Which sea does the headland in Fraserburgh project into?",
    "Which city hosts the base of the body responsible for the lighthouse at Kinnaird Head?",
    "Is Aberdeen part of the council area whose headquarters it hosts?",
    "What is the population of the town at the northeast corner of Aberdeenshire?",
]


def prompt(i: int) -> str:
    passages = "\n".join(f"[{k + 1}] «{t}» {text}" for k, (t, text) in enumerate(PASSAGES))
    return (f"Answer the question from the passages, reasoning step by step.\n\n{passages}\n\n"
            f"Question: {QUESTIONS[i % len(QUESTIONS)]}\nRationale: Let's think step by step.")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="qwen2.5-1.5b")
    p.add_argument("--n", default="2,4")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--prompts", type=int, default=6)
    p.add_argument("--figures", help="also write the rows as JSON to this file")
    args = p.parse_args()

    from hopqa.config import default_home
    from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM

    home = default_home()
    models = {"batched": LlamaCppLLM(args.model, home=home, config=EmbeddedConfig(batch_samples=8)),
              "alone": LlamaCppLLM(args.model, home=home, config=EmbeddedConfig(batch_samples=0))}
    print(f"# batched samples on embedded:{args.model}: {args.prompts} prompts, max_tokens={args.max_tokens}, "
          f"temperature={args.temperature}\n# machine: {machine()}\n", flush=True)
    rows: list[dict[str, float | int]] = []
    for n in (int(x) for x in args.n.split(",")):
        seconds = {k: 0.0 for k in models}
        evaluated = {k: 0 for k in models}
        texts: dict[str, list[str]] = {k: [] for k in models}
        for i in range(args.prompts):
            for name, llm in models.items():
                llm.clear_cache()  # each request from a cold cache, both ways
                t0 = time.perf_counter()
                gen = llm.generate(prompt(i), n=n, max_tokens=args.max_tokens, temperature=args.temperature,
                                   seed=100 + i, stop=["\nQuestion:"])
                seconds[name] += time.perf_counter() - t0
                evaluated[name] += gen.prompt_tokens_evaluated or 0
                texts[name] += gen.texts
        pairs = list(zip(texts["batched"], texts["alone"], strict=True))
        r = args.prompts
        rows.append({"n": n, "requests": r, "batched_s": seconds["batched"] / r, "alone_s": seconds["alone"] / r,
                     "batched_evaluated": evaluated["batched"], "alone_evaluated": evaluated["alone"],
                     "samples": len(pairs), "identical": sum(a == b for a, b in pairs),
                     "same_first_token": sum(a.split()[:1] == b.split()[:1] for a, b in pairs)})
        print(f"n = {n}: {rows[-1]['batched_s']:.1f} s a request batched, {rows[-1]['alone_s']:.1f} one by one",
              flush=True)
    print("\n" + batched_samples_table(rows), end="")
    if args.figures:
        write_figures(args.figures, about(model=f"embedded:{args.model}", prompts=args.prompts,
                                          max_tokens=args.max_tokens, temperature=args.temperature), rows=rows)
    for llm in models.values():
        llm.close()


if __name__ == "__main__":
    main()
