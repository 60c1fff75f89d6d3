"""Retrieve-then-Read written with DSPy or with the bare openai SDK, for
``benchmarks/eval_overhead.py`` to time beside ``hopqa eval`` against the same fake server.

    PYTHON benchmarks/overhead_peers.py {dspy,sdk} --url URL --questions FILE --workers N [--cache-dir DIR]
        [--ranking overlap|bm25]

Run by the Python that has the peer installed (``--peer-python`` of ``eval_overhead.py``; e.g. a
venv with ``pip install dspy==3.4.1``): it imports neither hopqa nor anything of this
repository. ``FILE`` holds the questions as JSON (``[{"id", "question", "answers",
"paragraphs": [[title, text], ...]}]``, written by ``eval_overhead.py`` from hopqa's shipped
data). Each question: its paragraphs ranked, the top 5 in one prompt, one LLM call, the answer
scored by exact match; ``N`` threads. ``--ranking overlap`` (the default) ranks by the words a
paragraph shares with the question; ``bm25`` as a DSPy user ranks with bm25s (its retriever in
DSPy's tutorials): an index of the question's paragraphs, English stopwords and PyStemmer's
English stemmer, the top 5 (``pip install bm25s PyStemmer`` beside the peer), the work hopqa's
own pool ranking does. ``dspy``: a
``dspy.Module`` that ranks the paragraphs and calls ``dspy.Predict("context, question ->
answer")`` (the ranking inside the program, as in hopqa and the SDK peer, so that each harness's
per-call cost includes it), evaluated by ``dspy.Evaluate`` with
``num_threads=N`` (DSPy's own harness; its response cache in ``--cache-dir``, so a second run is
its cached re-run); ``sdk``: ``openai.OpenAI().chat.completions.create`` in a thread pool, no
cache. Prints one JSON line: the seconds from start to exit and the exact-match rate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import string
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

T0 = time.perf_counter()  # before the peer's imports: its start-up counts, as hopqa's does


def normalize(text: str) -> str:
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def top_passages(question: str, paragraphs: list[list[str]], k: int = 5) -> str:
    """The top ``k`` paragraphs by ``RANKING``, as the prompt's context."""
    if RANKING == "bm25":
        ranked = top_bm25(question, paragraphs, k)
    else:
        words = set(re.findall(r"\w+", question.lower()))
        ranked = sorted(paragraphs,
                        key=lambda p: -len(words & set(re.findall(r"\w+", (p[0] + " " + p[1]).lower()))))[:k]
    return "\n\n".join(f"{title}: {text}" for title, text in ranked)


RANKING = "overlap"
_STEMMERS: dict[int, Any] = {}


def top_bm25(question: str, paragraphs: list[list[str]], k: int) -> list[list[str]]:
    """bm25s over the question's own paragraphs (its defaults: lucene, k1 1.5, b 0.75)."""
    import threading

    import bm25s
    import Stemmer

    stemmer = _STEMMERS.setdefault(threading.get_ident(), Stemmer.Stemmer("english"))  # one per thread
    corpus = [f"{title} {text}" for title, text in paragraphs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
    query = bm25s.tokenize([question], stopwords="en", stemmer=stemmer, show_progress=False)
    rows, _ = retriever.retrieve(query, k=min(k, len(corpus)), show_progress=False, n_threads=1)
    return [paragraphs[int(i)] for i in rows[0]]


def exact(prediction: str, answers: list[str]) -> float:
    return float(any(normalize(prediction) == normalize(a) for a in answers))


def run_sdk(url: str, questions: list[dict[str, Any]], workers: int) -> float:
    import openai

    client = openai.OpenAI(base_url=url, api_key="fake", max_retries=0, timeout=30)

    def one(q: dict[str, Any]) -> float:
        context = top_passages(q["question"], q["paragraphs"])
        reply = client.chat.completions.create(
            model="fake", temperature=0, max_tokens=64,
            messages=[{"role": "user", "content": f"Answer the question from the passages.\n\n{context}\n\n"
                                                  f"Question: {q['question']}\nAnswer:"}])
        return exact(reply.choices[0].message.content or "", q["answers"])

    with ThreadPoolExecutor(max_workers=workers) as pool:
        scores = list(pool.map(one, questions))
    return sum(scores) / max(1, len(scores))


def run_dspy(url: str, questions: list[dict[str, Any]], workers: int, cache_dir: str | None) -> float:
    if cache_dir:
        os.environ["DSPY_CACHEDIR"] = cache_dir
    import dspy

    lm = dspy.LM("openai/fake", api_base=url, api_key="fake", temperature=0, max_tokens=64, num_retries=0)
    dspy.configure(lm=lm)

    class RetrieveThenRead(dspy.Module):  # type: ignore[misc, name-defined]
        """The passages ranked inside the program, per question, as hopqa and the SDK peer do."""

        def __init__(self) -> None:
            super().__init__()
            self.read = dspy.Predict("context, question -> answer")

        def forward(self, question: str, paragraphs: list[list[str]]) -> Any:
            return self.read(context=top_passages(question, paragraphs), question=question)

    program = RetrieveThenRead()
    devset = [dspy.Example(question=q["question"], paragraphs=q["paragraphs"], answers=q["answers"])
              .with_inputs("question", "paragraphs") for q in questions]

    def metric(example: Any, prediction: Any, trace: Any = None) -> float:
        return exact(prediction.answer or "", example.answers)

    evaluate = dspy.Evaluate(devset=devset, metric=metric, num_threads=workers, display_progress=False)
    result = evaluate(program)
    score = getattr(result, "score", result)
    return float(score) / 100 if float(score) > 1 else float(score)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("peer", choices=("dspy", "sdk"))
    ap.add_argument("--url", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cache-dir")
    ap.add_argument("--ranking", choices=("overlap", "bm25"), default="overlap")
    args = ap.parse_args()
    global RANKING
    RANKING = args.ranking
    if RANKING == "bm25":  # imported at start-up, as hopqa imports its own
        import bm25s  # noqa: F401
        import Stemmer  # noqa: F401
    with open(args.questions, encoding="utf-8") as f:
        questions = json.load(f)
    if args.peer == "sdk":
        em = run_sdk(args.url, questions, args.workers)
    else:
        em = run_dspy(args.url, questions, args.workers, args.cache_dir)
    print(json.dumps({"seconds": time.perf_counter() - T0, "em": em}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
