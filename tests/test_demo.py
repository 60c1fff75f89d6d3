"""The demo corpus: the deduplicated union of the shipped paragraphs, indexed, and useful."""

from __future__ import annotations

from hopqa.corpus import read_corpus


def test_demo_corpus_is_deduplicated_union(hopqa_home, demo_index, data_dir):
    from hopqa.datasets import demo_corpus_files, load_dataset

    corpus = list(read_corpus(hopqa_home / "demo" / "corpus.jsonl"))
    keys = {(p.title, p.text) for p in corpus}
    assert len(keys) == len(corpus) == demo_index.size
    expected = {(p.title, p.text) for name, split in demo_corpus_files(data_dir)
                for ex in load_dataset(name, split, data_dir=data_dir) for p in ex.paragraphs}
    normalized = {(" ".join(t.split()), " ".join(x.split())) for t, x in expected}
    assert keys <= expected  # nothing that is not a shipped paragraph
    assert len(keys) == len(normalized)  # every distinct paragraph, once


def test_demo_index_finds_supporting_paragraphs(demo_index, data_dir):
    from hopqa.datasets import load_dataset

    assert demo_index.size > 10000
    examples = load_dataset("musique", "dev", data_dir=data_dir, limit=20)
    found = 0
    for ex in examples:
        gold = {(p.title, p.text) for p in ex.supporting}
        found += bool(gold & {(h.title, h.text) for h in demo_index.search(ex.question, 10)})
    assert found >= 10  # a supporting paragraph in the top 10 of the pooled corpus for most questions


def test_demo_corpus_is_reused_not_rebuilt(hopqa_home, demo_index, data_dir):
    from hopqa.demo import build_demo_corpus

    path = hopqa_home / "demo" / "corpus.jsonl"
    before = path.stat().st_mtime_ns
    assert build_demo_corpus(hopqa_home, data_dir) == path
    assert path.stat().st_mtime_ns == before
