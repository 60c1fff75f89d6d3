"""The demo corpus (the deduplicated union of the shipped paragraphs, indexed, and useful) and
the pinned few-shot demonstrations."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from hopqa.corpus import read_corpus
from hopqa.datasets import demos, load_dataset, shipped_data_dir
from hopqa.datasets import paths as ds_paths
from hopqa.demo import DEMO_FORMAT, build_demo_corpus, demo_corpus_files

DEMO_PAIRS = [(n, s) for n in ("musique", "hotpotqa", "2wikimultihopqa", "adversarial_hotpotqa")
              for s in ("dev", "train")]


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No $HOPQA_DATA_DIR, an empty $HOPQA_HOME: the shipped subsets serve every split."""
    monkeypatch.delenv("HOPQA_DATA_DIR", raising=False)
    monkeypatch.setenv("HOPQA_HOME", str(tmp_path / "env-home"))
    return tmp_path


def test_demo_corpus_files_are_the_splits_with_paragraphs():
    assert demo_corpus_files() == DEMO_PAIRS


def test_demo_corpus_is_deduplicated_union(hopqa_home, demo_index, data_dir):
    corpus = list(read_corpus(hopqa_home / "demo" / "corpus.jsonl"))
    keys = {(p.title, p.text) for p in corpus}
    assert len(keys) == len(corpus) == demo_index.size
    expected = {(p.title, p.text) for name, split in demo_corpus_files()
                for ex in load_dataset(name, split, data_dir=data_dir) for p in ex.paragraphs}
    normalized = {(" ".join(t.split()), " ".join(x.split())) for t, x in expected}
    assert keys <= expected  # nothing that is not a shipped paragraph
    assert len(keys) == len(normalized)  # every distinct paragraph, once


def test_demo_index_finds_supporting_paragraphs(demo_index, data_dir):
    assert demo_index.size > 10000
    examples = load_dataset("musique", "dev", data_dir=data_dir, limit=20)
    found = 0
    for ex in examples:
        gold = {(p.title, p.text) for p in ex.supporting}
        found += bool(gold & {(h.title, h.text) for h in demo_index.search(ex.question, 10)})
    assert found >= 10  # a supporting paragraph in the top 10 of the pooled corpus for most questions


def test_demo_corpus_is_reused_not_rebuilt(hopqa_home, demo_index, data_dir):
    path = hopqa_home / "demo" / "corpus.jsonl"
    before = path.stat().st_mtime_ns
    assert build_demo_corpus(hopqa_home) == path
    assert path.stat().st_mtime_ns == before


def _stamp(home):
    return json.loads((home / "demo" / "source.json").read_text())


def test_demo_corpus_builds_without_any_data_directory_and_rebuilds_when_sources_change(isolated):
    home = isolated / "home"
    corpus = build_demo_corpus(home)  # no --data-dir, no $HOPQA_DATA_DIR, nothing downloaded
    stamp = _stamp(home)
    assert stamp["format"] == DEMO_FORMAT
    assert [f[:2] for f in stamp["files"]] == [list(p) for p in DEMO_PAIRS]
    assert all(f[2].startswith(str(shipped_data_dir())) and f[2].endswith(".gz") for f in stamp["files"])
    shipped_size = len(list(read_corpus(corpus)))
    assert shipped_size > 10000

    before = corpus.stat().st_mtime_ns
    assert build_demo_corpus(home) == corpus and corpus.stat().st_mtime_ns == before  # unchanged: reused

    # a data directory or $HOPQA_DATA_DIR holding the same split does not change the demo corpus
    mine = isolated / "mine" / "adversarial_hotpotqa" / "train_30.json"
    mine.parent.mkdir(parents=True)
    record = {"qas_id": "m1", "question": "Q?", "answer": "A",
              "paragraphs": [{"title": "Zyx", "context": "A paragraph nobody else has.", "is_supp": True}]}
    mine.write_text(json.dumps([record]))
    os.environ["HOPQA_DATA_DIR"] = str(isolated / "mine")
    try:
        assert build_demo_corpus(home) == corpus and corpus.stat().st_mtime_ns == before
    finally:
        del os.environ["HOPQA_DATA_DIR"]
    assert "A paragraph nobody else has." not in {p.text for p in read_corpus(corpus)}

    # a corpus built by an older loader format is rebuilt
    stamp = _stamp(home)
    (home / "demo" / "source.json").write_text(json.dumps({**stamp, "format": DEMO_FORMAT - 1}))
    before = corpus.stat().st_mtime_ns
    build_demo_corpus(home)
    assert _stamp(home)["format"] == DEMO_FORMAT and corpus.stat().st_mtime_ns != before


# -- few-shot demonstrations: pinned to the shipped train subsets ---------------------------------
@pytest.fixture
def fresh_demos(monkeypatch):
    """Forget the demonstrations built so far in this process (restored afterwards)."""
    monkeypatch.setattr(demos, "_DEMOS", None)


def test_load_demos_ignores_hopqa_data_dir(isolated, monkeypatch, fresh_demos):
    baseline = demos.few_shot_demos(6)
    assert len(baseline) == 6 and baseline[0].source.startswith("musique:") and baseline[1].source.startswith("2wiki")
    other = isolated / "other"
    for rel in ("musique/train_100.json", "2wikimultihopqa/train_500.json"):
        (other / rel).parent.mkdir(parents=True)
        (other / rel).write_text("[]")
    monkeypatch.setenv("HOPQA_DATA_DIR", str(other))
    monkeypatch.setattr(demos, "_DEMOS", None)
    assert demos.few_shot_demos(6) == baseline
    monkeypatch.setenv("HOPQA_DATA_DIR", str(isolated / "does-not-exist"))
    monkeypatch.setattr(demos, "_DEMOS", None)
    assert demos.few_shot_demos(6) == baseline
    assert demos.few_shot_demos(0) == []


def test_load_demos_without_the_shipped_files_is_an_error(isolated, monkeypatch, fresh_demos):
    monkeypatch.setattr(ds_paths, "_SHIPPED", isolated / "broken-install")
    with pytest.raises(demos.DemosUnavailableError, match="installation is broken"):
        demos.few_shot_demos(2)


def test_load_demos_builds_once_under_concurrency(monkeypatch, fresh_demos):
    calls = []
    real = demos._build_demos

    def slow_build():
        calls.append(1)
        time.sleep(0.2)
        return real()

    monkeypatch.setattr(demos, "_build_demos", slow_build)
    results = []
    threads = [threading.Thread(target=lambda: results.append(demos.few_shot_demos(3))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(results) == 6 and all(r == results[0] for r in results)


def test_damaged_demo_index_is_rebuilt_automatically_with_a_warning(isolated, monkeypatch):
    """The demo index is built by hopqa, so a damaged one is rebuilt, not an error (a small demo
    corpus here: one shipped split)."""
    import hopqa.demo
    from hopqa.demo import demo_retriever

    monkeypatch.setattr(hopqa.demo, "DEMO_CORPUS_FILES", (("musique", "dev"),))
    home = isolated / "home"
    size = demo_retriever(home).size
    index = home / "demo" / "bm25"
    passages = index / "passages.jsonl"
    passages.write_bytes(passages.read_bytes()[:1000])  # e.g. a disk filled up mid-write
    with pytest.warns(UserWarning, match=r"the index at .*demo/bm25 is damaged \(passages\.jsonl: 1000 bytes "
                                         r"instead of \d+ \(truncated\)\): rebuilding it"):
        again = demo_retriever(home)
    assert again.size == size and passages.stat().st_size > 1000
