"""Corpus files: jsonl and tsv, bad lines, dedupe, fingerprints; the demo corpus."""

from __future__ import annotations

import pytest

from hopqa.corpus import CorpusStats, corpus_fingerprint, dedupe, read_corpus, write_corpus
from hopqa.types import Passage


def test_jsonl_with_aliases_and_bad_lines(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"id": 1, "title": "T", "text": "x"}\n\n{"contents": "y"}\n[1, 2]\n{broken\n{"id": "e", "text": "  "}\n')
    stats = CorpusStats()
    with pytest.warns(UserWarning):
        got = list(read_corpus(p, stats))
    assert [(g.id, g.title, g.text) for g in got] == [("1", "T", "x"), ("3", "", "y")]
    assert stats.read == 2 and stats.skipped == 3 and "c.jsonl:5" in stats.problems[1]


def test_tsv(tmp_path):
    p = tmp_path / "c.tsv"
    p.write_text("id\ttext\ttitle\n7\tsome text\tA title\nbad-line\n8\tmore\n")
    with pytest.warns(UserWarning):
        got = list(read_corpus(p))
    assert [(g.id, g.title, g.text) for g in got] == [("7", "A title", "some text"), ("8", "", "more")]


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        list(read_corpus(tmp_path / "none.jsonl"))


def test_dedupe_and_unique_ids():
    out = dedupe([Passage("a", "T", "x  y"), Passage("b", "T", "x y"), Passage("a", "U", "z"), Passage("c", "T", "w")])
    assert [p.id for p in out] == ["a", "a~2", "c"]


def test_write_read_round_trip_and_fingerprint(tmp_path):
    ps = [Passage("1", "T", "text one"), Passage("2", "", "text two")]
    f = tmp_path / "c.jsonl"
    assert write_corpus(ps, f) == 2
    assert list(read_corpus(f)) == ps
    fp = corpus_fingerprint(f)
    f.write_text(f.read_text() + '{"id": "3", "text": "t"}\n')
    assert corpus_fingerprint(f) != fp


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
