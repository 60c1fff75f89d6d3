"""How well each reranker orders a question's candidates, and how often it cannot tell them apart.

    .venv/bin/python benchmarks/rerank.py [--datasets musique,hotpotqa] [--limit 15] [--depth 10]
        [--k 5] [--rerankers none,bi-encoder,hybrid,llm,llm-expected] [--llm embedded:qwen2.5-1.5b]
        [--figures FILE]

For the first ``--limit`` dev questions of each dataset (distractor setting: the question's own
paragraphs), the candidates are the question's ``--depth`` best paragraphs by BM25 over its pool
(``hopqa.retrieval.pool.CandidatePool``, what LeapQuery's first retrieval finds there); each
reranker reorders them against the question (``hopqa.retrieval.rerank.rerank``, a stable sort:
ties keep BM25's order) and the top ``--k`` are kept, as LeapQuery keeps them. ``none`` is BM25's
own order. Per reranker and dataset it prints:

- **Recall@k**: the share of a question's gold supporting paragraphs among the kept ``k``
  (averaged over questions), and how many questions' kept set differs from BM25's;
- **ties**: the share of rankings in which every kept passage has the same score (then the
  reranker changed nothing a tie-break did not decide), and the mean number of distinct scores
  among a question's candidates;
- for the LLM judge, the scores it gave most often (which of 0-10; not for ``llm-expected``,
  whose expected ratings are real numbers); seconds a question;
- for the LLM judge asked for JSON, the reply form its prompt ends with (``form``), so that runs
  of different versions of the prompt can be told apart.

Why it exists: with LeapQuery's default reranker (the LLM judge, ``rerank=auto`` where no
cross-encoder is cached), Qwen2.5-1.5B gave 7 of 10 to nearly every passage, so LeapQuery kept
the question's own first passages and answered as Retrieve-then-Read (docs/methods/leapquery.md).
One LLM process at a time (the embedded model busy-waits on both cores); the response cache is
off, so the seconds are real. ``--figures FILE`` writes the rows as JSON with the date, machine
and command (``benchmarks/figures.py``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from typing import Any

# benchmarks/figures.py and retrieval.py (the script's folder is on sys.path): a passage's key is
# its title and text, whitespace collapsed, as retrieval.py's recall counts it
from figures import about, write_figures
from retrieval import _key


def measure(name: str, reranker: Any, examples: list[Any], depth: int, k: int) -> dict[str, Any]:
    """One reranker's figures over ``examples`` (module docstring)."""
    from hopqa.retrieval.pool import CandidatePool
    from hopqa.retrieval.rerank import rerank

    recalls: list[float] = []
    changed = tied = 0
    distinct: list[int] = []
    given: Counter[float] = Counter()
    seconds: list[float] = []
    for ex in examples:
        candidates = CandidatePool(ex.paragraphs).search(ex.question, depth)
        t0 = time.perf_counter()
        if reranker is None:
            kept = candidates[:k]
            scores = [p.score for p in candidates]
        else:
            scores = [float(s) for s in reranker.score(ex.question, candidates)]
            kept = rerank(_Fixed(scores), ex.question, candidates, k)
        seconds.append(time.perf_counter() - t0)
        gold = {_key(p) for p in ex.supporting}
        recalls.append(len(gold & {_key(p) for p in kept}) / len(gold))
        changed += {_key(p) for p in kept} != {_key(p) for p in candidates[:k]}
        top = sorted(scores, reverse=True)[:k]
        tied += len(set(top)) == 1
        distinct.append(len(set(scores)))
        if getattr(reranker, "name", "").startswith("llm:"):  # the judge's 0-10 (others' scores are all distinct)
            given.update(scores)
    n = len(examples)
    return {"reranker": name, "questions": n, "depth": depth, "k": k,
            "recall": statistics.mean(recalls) if recalls else 0.0,
            "changed": changed, "tied": tied / n if n else 0.0,
            "distinct": statistics.mean(distinct) if distinct else 0.0,
            "most_given": [[s, c] for s, c in given.most_common(3)],
            "seconds": statistics.median(seconds) if seconds else 0.0}


class _Fixed:
    """A reranker returning scores already computed (so that each is timed once)."""

    name = "fixed"

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores

    def score(self, query: str, passages: Any) -> list[float]:
        return list(self.scores)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="musique,hotpotqa")
    ap.add_argument("--limit", type=int, default=15)
    ap.add_argument("--depth", type=int, default=10, help="candidates a question (BM25 over its pool)")
    ap.add_argument("--k", type=int, default=5, help="passages kept after reranking")
    ap.add_argument("--rerankers", default="none,bi-encoder,hybrid,llm")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--figures", help="also write the rows as JSON to this file")
    args = ap.parse_args()

    from hopqa.datasets import load_dataset
    from hopqa.llm import load_llm
    from hopqa.retrieval.rerank import JSON_REPLY, LLM_JUDGES, make_reranker

    names = [n.strip() for n in args.rerankers.split(",") if n.strip()]
    llm = load_llm(args.llm, cache=False) if any(n in LLM_JUDGES for n in names) else None
    rerankers = {n: None if n == "none" else make_reranker(n, llm=llm) for n in names}
    rows = []
    print("| dataset | reranker | n | Recall@k | kept set changed | top-k all tied | distinct scores / q | "
          "most given | s/q |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    for dataset in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        examples = [ex for ex in load_dataset(dataset, "dev", limit=args.limit) if ex.supporting and ex.paragraphs]
        for name, reranker in rerankers.items():
            r = {"dataset": dataset, **measure(name, reranker, examples, args.depth, args.k)}
            if getattr(reranker, "use_schema", False):  # the LLM judge's reply form, as this code asks for it
                r["form"] = JSON_REPLY
            rows.append(r)
            most = ", ".join(f"{s:g} ×{c}" for s, c in r["most_given"]) or "–"
            print(f"| {dataset} | {name} | {r['questions']} | {r['recall']:.3f} | {r['changed']} | {r['tied']:.0%} | "
                  f"{r['distinct']:.1f} | {most} | {r['seconds']:.2f} |", flush=True)
    if args.figures:
        write_figures(args.figures, about(llm=args.llm if llm is not None else None, limit=args.limit,
                                          depth=args.depth, k=args.k), rows=rows)


if __name__ == "__main__":
    main()
