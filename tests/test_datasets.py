"""Dataset loaders: shipped subsets and their sizes, where data is found, field mapping, the
question-file format, robustness, errors, downloads."""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import threading
import tomllib
import zipfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

import hopqa.datasets as ds
from hopqa import config
from hopqa.datasets import (
    REGISTRY,
    DatasetError,
    DatasetFileNotFoundError,
    DataWarning,
    Download,
    LoadStats,
    data_roots,
    download_dataset,
    iter_paragraphs,
    list_datasets,
    load_dataset,
    shipped_data_dir,
    split_path,
)
from hopqa.datasets import paths as ds_paths
from hopqa.types import Passage

#: The data every test pins explicitly: the subsets shipped in hopqa/data.
DATA = shipped_data_dir()
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def isolated(tmp_path_factory, monkeypatch):
    """No $HOPQA_DATA_DIR and an empty private home, so no test sees the machine's data."""
    monkeypatch.delenv("HOPQA_DATA_DIR", raising=False)
    monkeypatch.setenv("HOPQA_HOME", str(tmp_path_factory.mktemp("home")))


# The real number of examples of every split (counted from the files; SOURCES.md gives the
# test halves of the HGOT samples, the dev halves are larger for Open-SQuAD and HotpotQA).
SIZES = {
    ("musique", "dev"): 200, ("musique", "train"): 100,
    ("hotpotqa", "dev"): 200, ("hotpotqa", "train"): 100,
    ("hotpotqa", "hgot-dev-long"): 168, ("hotpotqa", "hgot-dev-medium"): 181, ("hotpotqa", "hgot-dev-short"): 181,
    ("hotpotqa", "hgot-test-long"): 137, ("hotpotqa", "hgot-test-medium"): 148, ("hotpotqa", "hgot-test-short"): 148,
    ("2wikimultihopqa", "dev"): 164, ("2wikimultihopqa", "train"): 500,
    ("adversarial_hotpotqa", "dev"): 308, ("adversarial_hotpotqa", "train"): 30,
    ("bamboogle", "test"): 125, ("bamboogle", "test-decomposed"): 125,
    ("freshqa", "test"): 500, ("freshqa", "dev"): 100,
    ("fever", "hgot-dev-long"): 113, ("fever", "hgot-dev-medium"): 150, ("fever", "hgot-dev-short"): 150,
    ("fever", "hgot-test-long"): 113, ("fever", "hgot-test-medium"): 150, ("fever", "hgot-test-short"): 150,
    ("open_squad", "hgot-dev-long"): 121, ("open_squad", "hgot-dev-medium"): 133,
    ("open_squad", "hgot-dev-short"): 133, ("open_squad", "hgot-test-long"): 118,
    ("open_squad", "hgot-test-medium"): 159, ("open_squad", "hgot-test-short"): 159,
}

DEMO_PAIRS = [(n, s) for n in ("musique", "hotpotqa", "2wikimultihopqa", "adversarial_hotpotqa")
              for s in ("dev", "train")]


def _by_id(examples, eid):
    return next(e for e in examples if e.id == eid)


# -- registry and sizes ---------------------------------------------------------------------------
def test_registry_has_every_dataset_and_split():
    assert list(REGISTRY) == ["musique", "hotpotqa", "2wikimultihopqa", "adversarial_hotpotqa", "bamboogle",
                              "freshqa", "fever", "open_squad"]
    assert {(n, s) for n, d in REGISTRY.items() for s in d.splits} == set(SIZES)


@pytest.mark.parametrize("name,split", list(SIZES))
def test_every_split_loads_with_its_real_size(name, split):
    stats = LoadStats()
    examples = load_dataset(name, split, data_dir=DATA, stats=stats)
    assert len(examples) == SIZES[(name, split)] == stats.read
    assert stats.skipped == 0
    assert len({e.id for e in examples}) == len(examples)
    assert all(e.dataset == name and e.split == split for e in examples)
    assert all(e.question and e.question == e.question.strip() for e in examples)
    assert all(e.answers and all(isinstance(a, str) and a and a == a.strip() for a in e.answers) for e in examples)
    assert all(len(set(e.answers)) == len(e.answers) for e in examples)
    has_paragraphs = REGISTRY[name].splits[split].has_paragraphs
    assert all(bool(e.paragraphs) == has_paragraphs for e in examples)
    assert all(p.text and p.id.startswith(f"{e.id}#") for e in examples for p in e.paragraphs)


def test_list_datasets_reports_every_split():
    rows = list_datasets(DATA)
    assert {(r.name, r.split): r.size for r in rows} == SIZES
    assert all(r.exists and r.path.is_file() and r.source == "data-dir" for r in rows)
    assert sum(r.size for r in rows if r.name == "freshqa") == 600
    assert {(r.name, r.split) for r in rows if r.has_paragraphs} == set(DEMO_PAIRS)
    # with nothing configured, every split is served by the shipped subsets
    shipped = list_datasets()
    assert {(r.name, r.split): r.size for r in shipped} == SIZES
    assert {r.source for r in shipped} == {"shipped"}
    assert shipped[0].path == DATA / "musique" / "dev_200.jsonl.gz"


def test_list_datasets_without_files(tmp_path, monkeypatch):
    monkeypatch.setattr(ds_paths, "_SHIPPED", tmp_path / "broken-install")
    rows = list_datasets(tmp_path)
    assert len(rows) == len(SIZES)
    assert not any(r.exists for r in rows) and all(r.size == 0 and r.source == "" for r in rows)
    assert rows[0].path == tmp_path / "musique" / "dev_200.jsonl"


# -- shipped data (package data) --------------------------------------------------------------------
def _shipped_files() -> set[str]:
    """Every file the registry reads from the shipped folder (plus the side file of alternative
    answers), relative to hopqa/data."""
    files = {f"{spec.file}.gz" for d in REGISTRY.values() for spec in d.splits.values()}
    return files | {"adversarial_hotpotqa/alt_answers.jsonl.gz"}


def test_every_registered_shipped_file_is_in_the_package():
    package = resources.files("hopqa") / "data"
    assert Path(str(package)) == DATA
    for rel in sorted(_shipped_files()):
        assert (package / rel).is_file(), f"hopqa/data/{rel} is missing"
        with gzip.open(DATA / rel, "rb") as f:
            assert f.read(64)  # a real gzip file, not empty
    on_disk = {p.relative_to(DATA).as_posix() for p in DATA.rglob("*.gz")}
    assert on_disk == _shipped_files()  # no stray file, none missing
    assert len(on_disk) == 30
    licences = (package / "LICENSES.md").read_text(encoding="utf-8")
    for name in REGISTRY:
        assert f"`{name}/" in licences


def test_package_data_is_declared_for_a_plain_install():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["hopqa"]
    assert "data/**/*.gz" in patterns and "data/*.md" in patterns
    assert all(rel.endswith(".gz") for rel in _shipped_files())  # "data/**/*.gz" covers them at any depth


def test_no_product_code_builds_a_path_to_the_shared_folder():
    suspects = ('/ "shared"', "'shared'", '"../shared', '"shared/data', "/work/shared")
    for path in [*(REPO / "hopqa").rglob("*.py"), REPO / "tests" / "conftest.py", REPO / "tests" / "test_demo.py"]:
        text = path.read_text(encoding="utf-8")
        assert not [s for s in suspects if s in text], path


# -- field mapping on known examples ---------------------------------------------------------------
def test_musique_mapping():
    ex = load_dataset("musique", "dev", data_dir=DATA, limit=1)[0]
    assert ex.id == "2hop__574419_270105" and ex.answers == ["Stanley"]
    assert len(ex.paragraphs) == 20 and len(ex.supporting) == 2
    assert [p.id for p in ex.paragraphs[:2]] == ["2hop__574419_270105#0", "2hop__574419_270105#1"]
    assert ex.paragraphs[0].title == "Port Blair"
    assert [d["answer"] for d in ex.decomposition] == ["Mountrail County", "Stanley"]
    assert set(ex.decomposition[0]) == {"question", "answer", "paragraph_support_idx"}
    assert all(ex.paragraphs[d["paragraph_support_idx"]].is_supporting for d in ex.decomposition)
    assert ex.extras == {"answerable": True}


def test_musique_aliases_follow_the_answer():
    ex = _by_id(load_dataset("musique", "train", data_dir=DATA), "2hop__150763_14904")
    assert ex.answers == ["G. Stanley Hall", "Stanley Hall"]
    assert len(ex.decomposition) == len(ex.supporting) == 2


def test_hotpotqa_mapping():
    ex = load_dataset("hotpotqa", "dev", data_dir=DATA, limit=1)[0]
    assert ex.id == "5a7f6fd75542992e7d278cfa" and ex.answers == ["Rush"]
    assert len(ex.paragraphs) == 10
    assert {p.title for p in ex.supporting} == {"Neil Peart", "Nobody's Hero"}
    assert ex.extras["type"] == "bridge" and ex.extras["level"] == "hard"
    assert ex.extras["supporting_facts"] == [["Nobody's Hero", 0], ["Neil Peart", 1]]
    assert "reranked_ret_res" not in ex.extras and ex.decomposition is None
    first = ex.paragraphs[0].text
    assert first.startswith("Jeffrey Thomas Porcaro (April 1, 1954") and ". In a career that spanned" in first
    every = load_dataset("hotpotqa", "dev", data_dir=DATA)
    assert all(len({p.title for p in e.supporting}) == 2 for e in every)
    assert not any("  " in p.text or p.text != p.text.strip() for e in every for p in e.paragraphs)


def test_2wiki_mapping():
    dev = load_dataset("2wikimultihopqa", "dev", data_dir=DATA, limit=1)[0]
    assert dev.answers == ["Free Guy"] and dev.extras["type"] == "bridge_comparison"
    assert dev.extras["evidences"][0] == ["Forbidden Ground", "director", "Pál Gábor"]
    assert {p.title for p in dev.supporting} == {"Forbidden Ground", "Free Guy", "Pál Gábor", "Shawn Levy"}
    assert dev.decomposition is None and "final_res" not in dev.extras
    train = load_dataset("2wikimultihopqa", "train", data_dir=DATA, limit=1)[0]
    assert [d["question"] for d in train.decomposition] == ["Who is the performer of the song Get Low?",
                                                            "What is the date of birth of Dillon Francis?"]
    assert train.extras["qa_pairs"] and train.extras["explanation"].endswith("October 5, 1987.")


def test_adversarial_alt_answers_are_merged():
    dev = load_dataset("adversarial-hotpotqa", "dev", data_dir=DATA)
    ex = _by_id(dev, "5ab52a255542996a3a96a048")
    assert ex.answers == ["Sochi, Russia", "In Sochi, Russia"]
    assert [p.is_supporting for p in ex.paragraphs] == [False, True, False, True]
    assert ex.extras["rationale"][0]["title"] == "Ukraine at the 2014 Winter Olympics"
    assert sum(len(e.answers) > 1 for e in dev) == 82 + 29 + 3 + 2 + 1  # every qas_id of alt_answers.jsonl


def test_bamboogle():
    test = load_dataset("bamboogle", "test", data_dir=DATA)
    assert test[0].answers == ["james madison"] and not test[0].paragraphs
    assert test[47].answers == ["Mildred Warner", "Mildred Gale"]  # the one row with a 6th column
    assert test[74].answers == ["George VI"]
    decomposed = load_dataset("bamboogle", "test-decomposed", data_dir=DATA)
    assert [e.id for e in decomposed] == [e.id for e in test]
    assert [e.question for e in decomposed] == [e.question for e in test]
    assert [d["answer"] for d in decomposed[0].decomposition] == ["1812", "james madison"]
    assert decomposed[1].decomposition[1]["answers"] == ["titan iiie-centaur", "titan iiie"]


def test_freshqa():
    test = load_dataset("freshqa", "test", data_dir=DATA)
    dev = load_dataset("freshqa", "dev", data_dir=DATA)
    assert test[0].id == "freshqa-0" and dev[0].id == "freshqa-500"
    assert test[0].extras["false_premise"] is True
    assert test[0].answers == ["No animal has ever landed on the moon yet.",
                               "Since humans are animals, one could say Neil Armstrong."]
    assert all(isinstance(e.extras["false_premise"], bool) for e in test + dev)
    assert sum(e.extras["false_premise"] for e in test + dev) == 150
    assert set(test[0].extras) == {"false_premise", "num_hops", "fact_type", "effective_year", "next_review",
                                   "source"}


def test_fever_and_open_squad():
    fever = load_dataset("fever", "hgot-test-long", data_dir=DATA)
    assert {e.answer for e in fever} == {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}
    assert fever[0].question.endswith('Kindly answer with "SUPPORTS", "REFUTES", or "NOT ENOUGH INFO".')
    assert fever[0].extras["question_length"] == 43 and fever[0].extras["label"] == "SUPPORTS"
    assert "Kindly" not in fever[0].extras["claim"]
    squad = load_dataset("open_squad", "hgot-test-long", data_dir=DATA)
    assert squad[0].answers == ["Florida legislature", "the Florida legislature"]
    assert all(not a.startswith("[") for e in squad for a in e.answers)
    hgot = load_dataset("hotpotqa", "hgot-test-long", data_dir=DATA)
    assert hgot[0].answers == ["Usher"] and hgot[0].extras["level"] == "hard"


# -- names, limits, helpers -----------------------------------------------------------------------
def test_hyphen_underscore_and_case_aliases():
    a = load_dataset("adversarial-hotpotqa", "dev", data_dir=DATA, limit=2)
    b = load_dataset("Adversarial_HotpotQA", "DEV", data_dir=DATA, limit=2)
    assert [e.id for e in a] == [e.id for e in b] and a[0].dataset == "adversarial_hotpotqa"
    s = load_dataset("open-squad", "hgot_test_short", data_dir=DATA, limit=1)[0]
    assert (s.dataset, s.split) == ("open_squad", "hgot-test-short")
    assert load_dataset("2wikimultihopqa", data_dir=DATA, limit=1)[0].split == "dev"


def test_limit():
    assert len(load_dataset("musique", "dev", data_dir=DATA, limit=3)) == 3
    assert load_dataset("musique", "dev", data_dir=DATA, limit=0) == []
    with pytest.raises(DatasetError, match="limit"):
        load_dataset("musique", "dev", data_dir=DATA, limit=-1)


def test_iter_paragraphs():
    examples = load_dataset("musique", "dev", data_dir=DATA, limit=5)
    passages = list(iter_paragraphs(examples))
    assert len(passages) == 100 and all(isinstance(p, Passage) for p in passages)
    assert all(p.is_supporting is None and p.score is None for p in passages)
    assert passages[0] == Passage("2hop__574419_270105#0", "Port Blair", examples[0].paragraphs[0].text)


# -- where data is found ----------------------------------------------------------------------------
def _one_musique(root: Path, eid: str, rel: str = "musique/dev_200.jsonl", gz: bool = False) -> Path:
    text = json.dumps(_musique_record(eid)) + "\n"
    path = root / (rel + (".gz" if gz else ""))
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_data_dir_from_env_is_read_in_config_only(tmp_path, monkeypatch):
    assert config.data_dir_from_env() is None
    monkeypatch.setenv("HOPQA_DATA_DIR", "  ")
    assert config.data_dir_from_env() is None
    monkeypatch.setenv("HOPQA_DATA_DIR", str(tmp_path))
    assert config.data_dir_from_env() == tmp_path
    assert "os.environ" not in "".join(p.read_text() for p in (REPO / "hopqa" / "datasets").glob("*.py"))


def test_data_roots_labels_and_order(tmp_path, monkeypatch):
    home = tmp_path / "home"
    assert data_roots(home=home) == [("downloaded", home / "datasets"), ("shipped", DATA)]
    assert not home.exists()  # looking does not create the home
    (tmp_path / "mine").mkdir()
    (tmp_path / "env").mkdir()
    monkeypatch.setenv("HOPQA_DATA_DIR", str(tmp_path / "env"))
    assert [label for label, _ in data_roots(tmp_path / "mine", home)] == ["data-dir", "env", "downloaded", "shipped"]
    assert data_roots("", home)[0] == ("env", tmp_path / "env")  # an empty --data-dir is no choice
    monkeypatch.setenv("HOPQA_HOME", str(home))
    assert data_roots()[-2] == ("downloaded", home / "datasets")


def test_search_order_explicit_then_env_then_downloaded_then_shipped(tmp_path, monkeypatch):
    explicit, env, home = tmp_path / "explicit", tmp_path / "env", tmp_path / "home"
    _one_musique(explicit, "from-explicit")
    _one_musique(env, "from-env")
    # a download keeps the official file name (a later candidate of the split)
    _one_musique(home / "datasets", "from-download", rel="musique/musique_ans_v1.0_dev.jsonl")
    monkeypatch.setenv("HOPQA_DATA_DIR", str(env))

    def first_id(**kw):
        return load_dataset("musique", "dev", home=home, **kw)[0].id

    assert first_id(data_dir=explicit) == "from-explicit"
    assert first_id() == "from-env"
    monkeypatch.delenv("HOPQA_DATA_DIR")
    assert first_id() == "from-download"
    assert split_path("musique", "dev", home=home).name == "musique_ans_v1.0_dev.jsonl"
    monkeypatch.setenv("HOPQA_HOME", str(home))  # the default home is $HOPQA_HOME
    assert load_dataset("musique", "dev")[0].id == "from-download"
    assert len(load_dataset("musique", "dev", home=tmp_path / "empty-home")) == 200  # shipped
    rows = {(r.name, r.split): r for r in list_datasets(explicit, home)}
    assert rows["musique", "dev"].source == "data-dir" and rows["musique", "dev"].size == 1
    assert rows["musique", "train"].source == "shipped" and rows["hotpotqa", "dev"].source == "shipped"


def test_a_folder_with_one_dataset_falls_back_to_shipped_for_the_others(tmp_path):
    _one_musique(tmp_path, "mine")
    assert [e.id for e in load_dataset("musique", "dev", data_dir=tmp_path)] == ["mine"]
    assert len(load_dataset("musique", "train", data_dir=tmp_path)) == 100  # same dataset, other split
    hotpot = load_dataset("hotpotqa", "dev", data_dir=tmp_path)
    assert len(hotpot) == 200 and hotpot[0].id == "5a7f6fd75542992e7d278cfa"
    assert split_path("hotpotqa", "dev", tmp_path) == DATA / "hotpotqa" / "dev_distractor_200.jsonl.gz"
    assert split_path("musique", "dev", tmp_path) == tmp_path / "musique" / "dev_200.jsonl"


def test_gzip_and_plain_files_read_the_same(tmp_path):
    plain = _one_musique(tmp_path / "plain", "x1")
    packed = _one_musique(tmp_path / "packed", "x1", gz=True)
    assert split_path("musique", "dev", tmp_path / "packed") == packed
    a = load_dataset("musique", "dev", data_dir=plain.parents[1])
    b = load_dataset("musique", "dev", data_dir=packed.parents[1])
    assert [e.to_dict() for e in a] == [e.to_dict() for e in b] and len(a) == 1
    # plain wins over .gz in the same root; the shipped subset decompresses to its original
    _one_musique(tmp_path / "packed", "plain-wins")
    assert load_dataset("musique", "dev", data_dir=tmp_path / "packed")[0].id == "plain-wins"
    with gzip.open(DATA / "bamboogle" / "bamboogle_125.csv.gz", "rt", encoding="utf-8") as f:
        assert f.read().count("\n") >= 125


def test_a_data_dir_that_does_not_exist_is_an_error(tmp_path, monkeypatch):
    with pytest.raises(DatasetError, match=r"nowhere \(--data-dir\) does not exist"):
        load_dataset("musique", "dev", data_dir=tmp_path / "nowhere")
    monkeypatch.setenv("HOPQA_DATA_DIR", str(tmp_path / "gone"))
    with pytest.raises(DatasetError, match=r"gone \(\$HOPQA_DATA_DIR\) does not exist"):
        load_dataset("musique", "dev")


# -- robustness on temporary data directories -----------------------------------------------------
def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _musique_record(eid: str) -> dict:
    return {"id": eid, "question": f"Question {eid}?", "answer": "A", "answer_aliases": ["a1"], "answerable": True,
            "paragraphs": [{"idx": 0, "title": "T0", "paragraph_text": "text 0", "is_supporting": True},
                           {"idx": 1, "title": "T1", "paragraph_text": "text 1", "is_supporting": False}],
            "question_decomposition": [{"id": 1, "question": "q1", "answer": "A", "paragraph_support_idx": 0}]}


def test_malformed_jsonl_line_is_skipped_with_a_warning(tmp_path):
    lines = [json.dumps(_musique_record("x1")), "{oops, not json", json.dumps(_musique_record("x2")), "",
             json.dumps({"id": "x3", "answer": "no question"}), json.dumps(_musique_record("x4"))]
    _write(tmp_path / "musique" / "dev_200.jsonl", "\n".join(lines) + "\n")
    stats = LoadStats()
    with pytest.warns(DataWarning) as caught:
        examples = load_dataset("musique", "dev", data_dir=tmp_path, stats=stats)
    assert [e.id for e in examples] == ["x1", "x2", "x4"]
    messages = [str(w.message) for w in caught]
    assert any("dev_200.jsonl:2" in m and "malformed JSON" in m for m in messages)
    assert any("dev_200.jsonl:5" in m and "question" in m for m in messages)
    assert (stats.read, stats.skipped) == (3, 2) and len(stats.problems) == 2
    assert examples[0].answers == ["A", "a1"] and examples[0].supporting[0].id == "x1#0"


def test_broken_json_list_is_a_clear_error(tmp_path):
    _write(tmp_path / "musique" / "train_100.json", '[{"id": "x1", ')
    with pytest.raises(DatasetError, match=r"train_100\.json: not valid JSON"):
        load_dataset("musique", "train", data_dir=tmp_path)


def test_hotpotqa_official_json_list_and_literal_string_fields(tmp_path):
    records = [
        {"_id": "h1", "question": "Q1?", "answer": "yes", "type": "comparison", "level": "hard",
         "supporting_facts": [["Alpha", 0], ["Beta", 1]],
         "context": [["Alpha", ["Alpha is one.", ' It is "', 'Quoted" here.', "Next item."]],
                     ["Beta", ["Beta is two.", " Really."]], ["Gamma", ["Gamma is three."]]]},
        # fields stored as strings holding literals (Python for context, JSON for the facts)
        {"_id": "h2", "question": "Q2?", "answer": "Beta",
         "supporting_facts": json.dumps([["Beta", 0]]),
         "context": repr([["Alpha", ["A.", " B."]], ["Beta", ["C.", " D."]]])},
        # the Hugging Face layout
        {"id": "h3", "question": "Q3?", "answer": "x",
         "supporting_facts": {"title": ["Beta"], "sent_id": [0]},
         "context": {"title": ["Alpha", "Beta"], "sentences": [["One.", "Two."], ["Three."]]}},
    ]
    # the official file name and format (a JSON list), as download_dataset saves it
    _write(tmp_path / "hotpotqa" / "hotpot_dev_distractor_v1.json", json.dumps(records))
    assert split_path("hotpotqa", "dev", tmp_path).name == "hotpot_dev_distractor_v1.json"
    h1, h2, h3 = load_dataset("hotpotqa", "dev", data_dir=tmp_path)
    assert [p.text for p in h1.paragraphs] == ['Alpha is one. It is "Quoted" here. Next item.', "Beta is two. Really.",
                                               "Gamma is three."]
    assert [p.is_supporting for p in h1.paragraphs] == [True, True, False]
    assert h1.extras["supporting_facts"] == [["Alpha", 0], ["Beta", 1]]
    assert [p.text for p in h2.paragraphs] == ["A. B.", "C. D."] and [p.title for p in h2.supporting] == ["Beta"]
    assert h3.id == "h3" and [p.text for p in h3.paragraphs] == ["One. Two.", "Three."]
    assert [p.title for p in h3.supporting] == ["Beta"]


def test_freshqa_spreadsheet_export_with_a_banner(tmp_path):
    header = "id,split,question,effective_year,next_review,false_premise,num_hops,fact_type,source," + ",".join(
        f"answer_{i}" for i in range(10)) + ",note"
    rows = ['FreshQA snapshot,,,', "", header,
            '7,TEST,"Who is it? ",2023,occasionally,FALSE,one-hop,fast-changing,"http://a\nhttp://b",X,,Y,,,,,,,,',
            '8,DEV,Q8?,2022,N/A,TRUE,multi-hop,never-changing,,Z,,,,,,,,,,']
    _write(tmp_path / "freshqa" / "freshqa.csv", "\n".join(rows) + "\n")
    (ex,) = load_dataset("freshqa", "test", data_dir=tmp_path)
    assert (ex.id, ex.question, ex.answers) == ("freshqa-7", "Who is it?", ["X", "Y"])
    assert ex.extras["false_premise"] is False and ex.extras["source"] == "http://a\nhttp://b"
    assert load_dataset("freshqa", "dev", data_dir=tmp_path)[0].extras["false_premise"] is True


def test_open_squad_answer_that_is_not_a_literal_is_kept_raw(tmp_path):
    _write(tmp_path / "open_squad" / "hgot" / "test_short.csv",
           'Question,Answer,Question Length\nQ1?,"[\'a\', \'b\', \'a\']",2\nQ2?,[not a literal,2\n')
    q1, q2 = load_dataset("open_squad", "hgot-test-short", data_dir=tmp_path)
    assert q1.answers == ["a", "b"] and q2.answers == ["[not a literal"]
    assert (q1.id, q1.extras["question_length"]) == ("open_squad-hgot-test-short-0", 2)


# -- the question-file format (your own questions) -----------------------------------------------
PARAS = [{"title": "Alpha", "text": "Alpha was born in Paris.", "is_supporting": True},
         {"title": "Beta", "text": "Beta lives in Rome."}]


def test_question_file_jsonl_with_paragraphs_and_extras(tmp_path):
    lines = [{"id": "q1", "question": " Where was Alpha born? ", "answer": "Paris", "paragraphs": PARAS,
              "topic": "geo"},
             {"question": "Where does Beta live?", "answers": ["Rome", "rome ", "Roma"], "paragraphs": ["Just text."]}]
    path = _write(tmp_path / "my_questions.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    q1, q2 = load_dataset(str(path))
    assert (q1.id, q1.question, q1.answers, q1.dataset, q1.split) == ("q1", "Where was Alpha born?", ["Paris"],
                                                                     "my_questions", "file")
    assert [(p.id, p.title, p.is_supporting) for p in q1.paragraphs] == [("q1#0", "Alpha", True),
                                                                         ("q1#1", "Beta", False)]
    assert q1.extras == {"topic": "geo"}
    assert q2.id == "my_questions-2" and q2.answers == ["Rome", "rome", "Roma"]  # line 2; stripped, no repeats
    assert [(p.title, p.text) for p in q2.paragraphs] == [("", "Just text.")]
    assert load_dataset(path, limit=1) == [q1]  # a Path works too; the split argument is ignored


def test_question_file_json_list_data_wrapper_and_supporting_titles(tmp_path):
    records = [{"question": "Q1?", "answer": "A1", "supporting_titles": ["alpha ", "Gamma"],
                "paragraphs": PARAS[1:] + [{"title": "ALPHA", "text": "Alpha text."}]},
               {"question": "Q2?", "answers": ["A2"], "supporting_titles": "Only One"}]
    listed = _write(tmp_path / "listed.json", json.dumps(records))
    wrapped = _write(tmp_path / "wrapped.json", json.dumps({"data": records}))
    a1, a2 = load_dataset(listed)
    assert (a1.id, a2.id) == ("listed-1", "listed-2")  # 1-based record numbers
    assert [p.is_supporting for p in a1.paragraphs] == [False, True]  # matched by title, case and spacing ignored
    assert a1.extras["supporting_titles"] == ["alpha", "Gamma"]
    assert a2.paragraphs == [] and a2.extras == {"supporting_titles": ["Only One"]}
    b1, _ = load_dataset(wrapped)
    assert b1.dataset == "wrapped" and [p.is_supporting for p in b1.paragraphs] == [False, True]


def test_question_file_csv_and_gzip(tmp_path):
    rows = ["My questions (exported),,", "ID,Question,Answers,Paragraphs,Supporting_Titles,Note",
            'c1,Who?,"[""Ann"", ""Anne""]","[{""title"": ""T"", ""text"": ""Ann did it.""}]","[""T""]",',
            ',What?,Thing,,,keep me']
    path = _write(tmp_path / "sheet.csv", "\n".join(rows) + "\n")
    c1, c2 = load_dataset(str(path))
    assert (c1.id, c1.answers, c1.extras) == ("c1", ["Ann", "Anne"], {"supporting_titles": ["T"]})
    assert c1.paragraphs[0].is_supporting and c1.paragraphs[0].id == "c1#0"
    assert (c2.id, c2.answers, c2.extras) == ("sheet-4", ["Thing"], {"note": "keep me"})  # CSV line 4
    packed = tmp_path / "sheet.csv.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    again = load_dataset(str(packed))
    assert [e.to_dict() for e in again] == [e.to_dict() for e in (c1, c2)]  # same stem, same examples


def test_question_file_bad_lines_are_skipped_warned_and_counted(tmp_path):
    lines = ['{"question": "Good?", "answer": "yes"}',
             "{not json",
             '"just a string"',
             '{"answer": "no question"}',
             '{"question": "No answer?", "answers": []}',
             '{"question": "Bad paragraphs?", "answer": "x", "paragraphs": {"title": "T"}}',
             '{"question": "Textless?", "answer": "x", "paragraphs": [{"title": "T", "text": "t"}, {"title": "U"}]}',
             '{"id": "dup", "question": "First?", "answer": "1"}',
             '{"id": "dup", "question": "Second?", "answer": "2"}',
             '{"question": "Also good?", "answer": "ok"}']
    path = _write(tmp_path / "mixed.jsonl", "\n".join(lines) + "\n")
    stats = LoadStats()
    with pytest.warns(DataWarning) as caught:
        examples = load_dataset(str(path), stats=stats)
    assert [e.id for e in examples] == ["mixed-1", "dup", "mixed-10"]
    messages = [str(w.message) for w in caught]
    expected = [(2, "malformed JSON"), (3, "not a JSON object"), (4, "no 'question'"), (5, "no answer"),
                (6, "'paragraphs' is not a list"), (7, "paragraphs[1] has no 'text'"), (9, "repeated 'id' 'dup'")]
    for line, why in expected:
        assert any(f"{path}:{line}:" in m and why in m for m in messages), (line, why, messages)
    assert (stats.read, stats.skipped) == (3, 7) and len(stats.problems) == 7


def test_question_file_json_record_numbers_in_warnings(tmp_path):
    path = _write(tmp_path / "recs.json", json.dumps([{"question": "Q?", "answer": "A"}, {"question": "Q2?"}]))
    with pytest.warns(DataWarning, match=r"recs\.json record 2: skipped \(no answer"):
        assert len(load_dataset(str(path))) == 1


def test_question_file_without_a_valid_record_is_a_clear_error(tmp_path):
    path = _write(tmp_path / "empty_answers.jsonl", '{"question": "Q?"}\n{"question": "R?", "answer": ""}\n')
    with pytest.warns(DataWarning), pytest.raises(DatasetError) as info:
        load_dataset(str(path))
    message = str(info.value)
    assert str(path) in message and "no valid question" in message and "empty_answers.jsonl:1" in message
    assert "'answer'" in message
    with pytest.raises(DatasetError, match="holds no record"):
        load_dataset(str(_write(tmp_path / "blank.jsonl", "\n")))
    with pytest.raises(DatasetError, match="no header row with the columns question"):
        load_dataset(str(_write(tmp_path / "headless.csv", "a,b\n1,2\n")))


def test_question_file_that_does_not_exist(tmp_path):
    missing = tmp_path / "nope" / "my_questions.jsonl"
    with pytest.raises(DatasetFileNotFoundError, match=f"{missing}: no such file"):
        load_dataset(str(missing))
    with pytest.raises(DatasetError, match="unknown dataset 'my_questions'.*the path of"):
        load_dataset("my_questions")  # no suffix, no such file: an unknown dataset name
    assert ds.is_question_file("x.jsonl.gz") and ds.is_question_file("y.CSV") and not ds.is_question_file("musique")


# -- errors ---------------------------------------------------------------------------------------
def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(DatasetError, match="unknown dataset 'squadx'; known datasets: musique, hotpotqa"):
        load_dataset("squadx")


def test_unknown_split_lists_the_splits(tmp_path):
    with pytest.raises(DatasetError, match="its splits: dev, train$"):
        load_dataset("musique", "validation", data_dir=tmp_path)
    with pytest.raises(DatasetError, match="its splits: test, test-decomposed"):
        load_dataset("bamboogle", data_dir=tmp_path)  # the default split "dev" does not exist


def test_missing_file_says_where_it_looked_and_how_to_fix_it(tmp_path, monkeypatch):
    broken = tmp_path / "broken-install"
    monkeypatch.setattr(ds_paths, "_SHIPPED", broken)  # only a broken installation lacks a shipped split
    home = tmp_path / "home"
    with pytest.raises(DatasetFileNotFoundError) as info:
        load_dataset("musique", "dev", data_dir=tmp_path, home=home)
    message = str(info.value)
    assert "musique/dev_200.jsonl, musique/musique_ans_v1.0_dev.jsonl (each also as .gz)" in message
    assert f"--data-dir {tmp_path}; downloaded releases {home / 'datasets'}; shipped subsets {broken}" in message
    assert "HOPQA_DATA_DIR" in message and "`hopqa datasets download musique`" in message
    assert "installation is incomplete" in message
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, DatasetError)
    with pytest.raises(DatasetFileNotFoundError, match="fever has no official download: copy its files"):
        load_dataset("fever", "hgot-test-long", data_dir=tmp_path)
    with pytest.raises(DatasetFileNotFoundError):
        split_path("musique", "dev", tmp_path)


def test_no_data_directory_at_all_uses_the_shipped_subsets():
    examples = load_dataset("musique")
    assert len(examples) == 200 and examples[0].id == "2hop__574419_270105"
    assert split_path("bamboogle", "test") == DATA / "bamboogle" / "bamboogle_125.csv.gz"


# -- downloads (offline: a local HTTP server or a closed port) -----------------------------------
@pytest.fixture
def no_proxy(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv("NO_PROXY", "*")


@pytest.fixture
def http_root(tmp_path, no_proxy) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on 127.0.0.1 and its base URL."""
    root = tmp_path / "served"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_download_without_network_is_a_clear_error(tmp_path, monkeypatch, no_proxy):
    monkeypatch.setitem(ds.OFFICIAL_SOURCES, "bamboogle", (Download("http://127.0.0.1:9/bamboogle.csv",
                                                                    "bamboogle.csv"),))
    with pytest.raises(RuntimeError, match=r"no network: .*put the files in DATA_DIR/bamboogle/"):
        download_dataset("bamboogle", tmp_path, timeout=2)
    assert list((tmp_path / "bamboogle").iterdir()) == []  # no partial file left behind


def test_download_http_error_is_clear(tmp_path, monkeypatch, http_root):
    _, base = http_root
    monkeypatch.setitem(ds.OFFICIAL_SOURCES, "bamboogle", (Download(f"{base}/missing.csv", "bamboogle.csv"),))
    with pytest.raises(RuntimeError, match="HTTP 404"):
        download_dataset("bamboogle", tmp_path / "data", timeout=5)
    assert not (tmp_path / "data" / "bamboogle" / "bamboogle.csv").exists()


def test_download_then_load(tmp_path, monkeypatch, http_root):
    root, base = http_root
    _write(root / "bamboogle.csv", "Question,Answer\nWho wrote it?,Someone\n")
    monkeypatch.setitem(ds.OFFICIAL_SOURCES, "bamboogle", (Download(f"{base}/bamboogle.csv", "bamboogle.csv"),))
    assert download_dataset("Bamboogle", tmp_path / "data", timeout=5) == [tmp_path / "data/bamboogle/bamboogle.csv"]
    (ex,) = load_dataset("bamboogle", "test", data_dir=tmp_path / "data")
    assert (ex.id, ex.question, ex.answers) == ("bamboogle-0", "Who wrote it?", ["Someone"])


def test_download_extracts_zip_members(tmp_path, monkeypatch, http_root):
    root, base = http_root
    record = {"_id": "w1", "type": "compositional", "question": "Q?", "answer": "A", "evidences": [],
              "supporting_facts": [["T", 0]], "context": [["T", ["S one.", "S two."]]]}
    with zipfile.ZipFile(root / "data_ids_april7.zip", "w") as zf:
        zf.writestr("data_ids_april7/dev.json", json.dumps([record]))
        zf.writestr("data_ids_april7/train.json", json.dumps([record]))
        zf.writestr("data_ids_april7/test.json", "[]")
    members = (("dev.json", "dev.json"), ("train.json", "train.json"))
    source = Download(f"{base}/data_ids_april7.zip", "data_ids_april7.zip", members)
    monkeypatch.setitem(ds.OFFICIAL_SOURCES, "2wikimultihopqa", (source,))
    written = download_dataset("2wikimultihopqa", tmp_path / "data", timeout=5)
    assert sorted(p.name for p in written) == ["dev.json", "train.json"]
    assert sorted(p.name for p in (tmp_path / "data" / "2wikimultihopqa").iterdir()) == ["dev.json", "train.json"]
    (ex,) = load_dataset("2wikimultihopqa", "dev", data_dir=tmp_path / "data")
    assert ex.paragraphs[0].text == "S one. S two." and ex.paragraphs[0].is_supporting


def test_download_goes_to_the_home_by_default_and_is_found_there(tmp_path, monkeypatch, http_root):
    root, base = http_root
    _write(root / "bamboogle.csv", "Question,Answer\nWho wrote it?,Someone\n")
    monkeypatch.setitem(ds.OFFICIAL_SOURCES, "bamboogle", (Download(f"{base}/bamboogle.csv", "bamboogle.csv"),))
    home = tmp_path / "home"
    written = download_dataset("bamboogle", timeout=5, progress=False, home=home)
    assert written == [home / "datasets" / "bamboogle" / "bamboogle.csv"]
    (ex,) = load_dataset("bamboogle", "test", home=home)  # the downloaded release beats the shipped subset
    assert ex.question == "Who wrote it?"
    assert {(r.name, r.split): r.source for r in list_datasets(home=home)}["bamboogle", "test"] == "downloaded"
    assert len(load_dataset("bamboogle", "test-decomposed", home=home)) == 125  # not downloadable: shipped


def test_download_of_a_dataset_without_official_source(tmp_path):
    with pytest.raises(DatasetError, match="no official download for 'fever'"):
        download_dataset("fever", tmp_path)
    assert set(ds.OFFICIAL_SOURCES) == {"musique", "hotpotqa", "2wikimultihopqa", "bamboogle", "freshqa"}
