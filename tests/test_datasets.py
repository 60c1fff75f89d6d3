"""Dataset loaders on the shipped files: sizes, field mapping, errors."""

from __future__ import annotations

import json

import pytest

from hopqa.datasets import DatasetError, download_dataset, list_datasets, load_dataset

SIZES = {
    ("musique", "dev"): 200, ("musique", "train"): 100,
    ("hotpotqa", "dev"): 200, ("hotpotqa", "train"): 100,
    ("hotpotqa", "hgot-test-long"): 137, ("hotpotqa", "hgot-test-medium"): 148, ("hotpotqa", "hgot-test-short"): 148,
    ("2wikimultihopqa", "dev"): 164, ("2wikimultihopqa", "train"): 500,
    ("adversarial_hotpotqa", "dev"): 308, ("adversarial_hotpotqa", "train"): 30,
    ("bamboogle", "test"): 125, ("bamboogle", "test-decomposed"): 125,
    ("fever", "hgot-test-long"): 113, ("fever", "hgot-test-medium"): 150, ("fever", "hgot-test-short"): 150,
    ("open_squad", "hgot-test-long"): 118, ("open_squad", "hgot-test-medium"): 159,
    ("open_squad", "hgot-test-short"): 159,
}


@pytest.mark.parametrize("name,split", list(SIZES))
def test_sizes_match_sources(name, split, data_dir):
    examples = load_dataset(name, split, data_dir=data_dir)
    assert len(examples) == SIZES[(name, split)]
    assert all(e.question.strip() and e.answers and e.answers[0] != "" for e in examples)
    assert len({e.id for e in examples}) == len(examples)
    assert all(e.dataset == name and e.split == split for e in examples)


def test_every_split_listed_and_present(data_dir):
    rows = list_datasets(data_dir)
    assert {r.name for r in rows} == {"musique", "hotpotqa", "2wikimultihopqa", "adversarial_hotpotqa", "bamboogle",
                                      "freshqa", "fever", "open_squad"}
    assert all(r.exists and r.size > 0 for r in rows)
    fresh = sum(r.size for r in rows if r.name == "freshqa")
    assert fresh == 600


def test_musique_mapping(data_dir):
    ex = load_dataset("musique", "dev", data_dir=data_dir, limit=1)[0]
    assert ex.id == "2hop__574419_270105" and ex.answer == "Stanley"
    assert len(ex.paragraphs) == 20 and len(ex.supporting) == 2
    assert [d["answer"] for d in ex.decomposition] == ["Mountrail County", "Stanley"]
    assert ex.paragraphs[ex.decomposition[0]["paragraph_support_idx"]].is_supporting


def test_musique_aliases(data_dir):
    train = load_dataset("musique", "train", data_dir=data_dir)
    ex = next(e for e in train if e.id == "2hop__150763_14904")
    assert ex.answers == ["G. Stanley Hall", "Stanley Hall"]


def test_hotpot_and_2wiki_mapping(data_dir):
    ex = load_dataset("hotpotqa", "dev", data_dir=data_dir, limit=1)[0]
    assert ex.answer == "Rush" and len(ex.paragraphs) == 10
    assert {p.title for p in ex.supporting} == {"Neil Peart", "Nobody's Hero"}
    assert ex.extras["type"] == "bridge" and ex.extras["supporting_facts"]
    assert "  " not in ex.paragraphs[0].text
    w = load_dataset("2wikimultihopqa", "train", data_dir=data_dir, limit=1)[0]
    assert len(w.decomposition) == 2 and w.extras["evidences"]


def test_adversarial_alt_answers(data_dir):
    ex = next(e for e in load_dataset("adversarial_hotpotqa", "dev", data_dir=data_dir)
              if e.id == "5ab52a255542996a3a96a048")
    assert ex.answers == ["Sochi, Russia", "In Sochi, Russia"]
    assert [p.is_supporting for p in ex.paragraphs] == [False, True, False, True]


def test_open_domain_sets(data_dir):
    b = load_dataset("bamboogle", "test", data_dir=data_dir)[0]
    assert b.answer == "james madison" and not b.paragraphs
    d = load_dataset("bamboogle", "test-decomposed", data_dir=data_dir)[0]
    assert d.decomposition[0]["answer"] == "1812"
    o = load_dataset("open-squad", "hgot-test-short", data_dir=data_dir)
    assert all(isinstance(a, str) for e in o for a in e.answers)
    f = load_dataset("freshqa", "test", data_dir=data_dir)
    assert f[0].extras["false_premise"] is True and len(f[0].answers) == 2
    fever = load_dataset("fever", "hgot-dev-short", data_dir=data_dir)
    assert {e.answer for e in fever} <= {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}


def test_errors(tmp_path, data_dir):
    with pytest.raises(DatasetError, match="known: musique"):
        load_dataset("squadx")
    with pytest.raises(DatasetError, match="splits: dev, train"):
        load_dataset("musique", "validation", data_dir=data_dir)
    with pytest.raises(DatasetError, match="HOPQA_DATA_DIR"):
        load_dataset("musique", "dev", data_dir=tmp_path)


def test_malformed_jsonl_line_is_skipped(tmp_path, data_dir):
    (tmp_path / "musique").mkdir()
    lines = (data_dir / "musique" / "dev_200.jsonl").read_text().splitlines()[:3]
    (tmp_path / "musique" / "dev_200.jsonl").write_text("\n".join([lines[0], "{oops", lines[1], lines[2]]))
    with pytest.warns(UserWarning, match=r"dev_200.jsonl:2"):
        examples = load_dataset("musique", "dev", data_dir=tmp_path)
    assert [e.id for e in examples] == [json.loads(x)["id"] for x in lines]


def test_download_without_network_is_clear(tmp_path, monkeypatch):
    import hopqa.datasets as ds

    monkeypatch.setitem(ds.OFFICIAL_SOURCES, "bamboogle", {"bamboogle.csv": "http://127.0.0.1:9/bamboogle.csv"})
    with pytest.raises(RuntimeError, match="without a network"):
        download_dataset("bamboogle", tmp_path, timeout=2)
    assert not (tmp_path / "bamboogle" / "bamboogle.csv").exists()
