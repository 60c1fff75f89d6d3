"""The per-question pool's own BM25 (``SmallBM25``) against bm25s: the same rows, the same scores
(bit for bit) and the same choice among ties, on the shipped distractor pools."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hopqa.datasets import load_shipped
from hopqa.retrieval.bm25 import STOPWORDS_EN, BM25Retriever
from hopqa.retrieval.pool import SMALL_POOL, CandidatePool, SmallBM25
from hopqa.types import Example, Passage

KS = (1, 2, 3, 5, 8, 10, 20)


def queries_of(ex: Example) -> list[str]:
    """The question, every title, every paragraph's first words and a word-salad query."""
    qs = [ex.question, ex.answer, ""]
    qs += [p.title for p in ex.paragraphs]
    qs += [" ".join(p.text.split()[:6]) for p in ex.paragraphs]
    qs.append(" ".join(w for p in ex.paragraphs for w in p.title.split()[:1]))  # repeated tokens too
    return qs


def assert_same(passages: list[Passage], queries: list[str]) -> int:
    """``SmallBM25.rank`` == ``BM25Retriever.rank`` (bm25s, numpy backend) for every k; the
    number of (query, k) cases checked."""
    small = SmallBM25(passages)
    ref = BM25Retriever.build(passages, progress=False, backend="numpy")
    cases = 0
    for k in KS:
        got, want = small.rank(queries, k), ref.rank(queries, k)
        for q, g, w in zip(queries, got, want):
            assert [row for row, _ in g] == [row for row, _ in w], (q, k)
            assert all(abs(a - b) <= 1e-6 and a == b for (_, a), (_, b) in zip(g, w)), (q, k, g, w)
            cases += 1
    return cases


def test_stopwords_are_bm25s_english_list():
    from bm25s.stopwords import STOPWORDS_EN as BM25S_EN

    assert tuple(STOPWORDS_EN) == tuple(BM25S_EN)


@pytest.mark.parametrize("dataset", ["hotpotqa", "musique", "2wikimultihopqa"])
def test_same_rankings_and_scores_as_bm25s_on_shipped_pools(dataset):
    examples = [ex for ex in load_shipped(dataset, "dev") if ex.paragraphs][:50]
    assert len(examples) == 50 and all(len(ex.paragraphs) <= SMALL_POOL for ex in examples)
    cases = sum(assert_same(ex.paragraphs, queries_of(ex)) for ex in examples)
    assert cases > 50 * len(KS) * 10


def test_ties_fall_as_in_bm25s():
    """Identical paragraphs score the same: which of them make the top k (argpartition's choice)
    and their order (by row) match bm25s's."""
    ex = load_shipped("musique", "dev")[0]
    base = list(ex.paragraphs[:8])
    twin = Passage("twin", "Tied", "An identical paragraph about the Tied River basin and its bridges.")
    for layout in (
        base[:3] + [twin] * 6 + base[3:8],  # a block of ties
        [twin, *base[:4], twin, *base[4:8], twin, twin, twin, twin],  # ties spread out, first and last
        [twin] * 12,  # everything tied
        [Passage(str(i), "", f"word{i % 3} shared") for i in range(20)],  # three groups of equal scores
    ):
        queries = ["Tied River bridges", "basin", "shared", "word1 shared", "word0 word2", ex.question]
        assert assert_same(layout, queries)
        scores = SmallBM25(layout).rank(["Tied River bridges"], 20)[0]
        assert [s for _, s in scores] == sorted((s for _, s in scores), reverse=True)


def test_candidate_pool_uses_small_bm25_only_for_small_pools():
    passages = [Passage(str(i), f"T{i}", f"text number {i} about rivers") for i in range(SMALL_POOL + 1)]
    assert isinstance(CandidatePool(passages[:SMALL_POOL])._bm25, SmallBM25)
    big = CandidatePool(passages)
    assert isinstance(big._bm25, BM25Retriever)
    small = CandidatePool(passages[:SMALL_POOL])
    assert [p.id for p in small.search("number 3 rivers", 5)] == \
        [p.id for p in CandidatePool(passages[:SMALL_POOL]).search("number 3 rivers", 5)]


def test_small_pool_imports_no_bm25s():
    code = ("import sys\n"
            "from hopqa.retrieval.pool import CandidatePool\n"
            "from hopqa.types import Passage\n"
            "pool = CandidatePool([Passage('a', 'Paris', 'Paris is in France.'), Passage('b', 'Rome', 'Rome.')])\n"
            "assert [p.id for p in pool.search('capital of France', 2)] == ['a', 'b']\n"
            "heavy = [m for m in ('bm25s', 'numba', 'scipy') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_nothing_indexable_raises_like_bm25s():
    with pytest.raises(ValueError):
        SmallBM25([Passage("s", "", "the of and")])
    pool = CandidatePool([Passage("s1", "", "the of"), Passage("s2", "", "and it")])
    assert [(p.id, p.score) for p in pool.search("anything", 5)] == [("s1", 0.0), ("s2", 0.0)]


@pytest.mark.parametrize("dataset", ["hotpotqa", "musique", "2wikimultihopqa"])
def test_tokens_are_the_words_bm25s_pattern_finds(dataset):
    """``tokenize`` splits by a faster pattern that finds exactly ``TOKEN_PATTERN``'s words:
    checked on every shipped paragraph and on edge cases (one-letter words, digits, underscores,
    apostrophes, hyphens, accents, other scripts, marks)."""
    import re

    from hopqa.retrieval import bm25

    reference = re.compile(bm25.TOKEN_PATTERN).findall
    texts = ["a b cd e_f _ __ x1 1 22 don't co-op naïve café Ünïcödé 東京 大 ﬁne e\u0301t\u00e9 a\u200bb",
             "", "   ", "é", "ab", "a.b.c", "end."]
    texts += [f"{p.title} {p.text}".lower() for ex in load_shipped(dataset, "dev") for p in ex.paragraphs]
    assert all(bm25._split(t) == reference(t) for t in texts)
