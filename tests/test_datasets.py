"""Dataset loaders: sizes of the shipped files, field mapping, robustness, errors, downloads."""

from __future__ import annotations

import functools
import http.server
import json
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import hopqa.datasets as ds
from hopqa.datasets import (
    REGISTRY,
    DatasetError,
    DatasetFileNotFoundError,
    DataWarning,
    Download,
    LoadStats,
    default_data_dir,
    demo_corpus_files,
    download_dataset,
    iter_paragraphs,
    list_datasets,
    load_dataset,
    split_path,
)
from hopqa.types import Passage

DATA = default_data_dir()
HAS_DATA = DATA is not None and (DATA / "musique" / "dev_200.jsonl").is_file()
needs_data = pytest.mark.skipif(not HAS_DATA, reason="no benchmark data (set HOPQA_DATA_DIR or put shared/data "
                                                     "beside the repository)")

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


@needs_data
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


@needs_data
def test_list_datasets_reports_every_split():
    rows = list_datasets(DATA)
    assert {(r.name, r.split): r.size for r in rows} == SIZES
    assert all(r.exists and r.path.is_file() for r in rows)
    assert sum(r.size for r in rows if r.name == "freshqa") == 600
    assert {(r.name, r.split) for r in rows if r.has_paragraphs} == set(DEMO_PAIRS)


def test_list_datasets_without_files(tmp_path):
    rows = list_datasets(tmp_path)
    assert len(rows) == len(SIZES)
    assert not any(r.exists for r in rows) and all(r.size == 0 for r in rows)
    assert rows[0].path == tmp_path / "musique" / "dev_200.jsonl"


# -- field mapping on known examples ---------------------------------------------------------------
@needs_data
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


@needs_data
def test_musique_aliases_follow_the_answer():
    ex = _by_id(load_dataset("musique", "train", data_dir=DATA), "2hop__150763_14904")
    assert ex.answers == ["G. Stanley Hall", "Stanley Hall"]
    assert len(ex.decomposition) == len(ex.supporting) == 2


@needs_data
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


@needs_data
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


@needs_data
def test_adversarial_alt_answers_are_merged():
    dev = load_dataset("adversarial-hotpotqa", "dev", data_dir=DATA)
    ex = _by_id(dev, "5ab52a255542996a3a96a048")
    assert ex.answers == ["Sochi, Russia", "In Sochi, Russia"]
    assert [p.is_supporting for p in ex.paragraphs] == [False, True, False, True]
    assert ex.extras["rationale"][0]["title"] == "Ukraine at the 2014 Winter Olympics"
    assert sum(len(e.answers) > 1 for e in dev) == 82 + 29 + 3 + 2 + 1  # every qas_id of alt_answers.jsonl


@needs_data
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


@needs_data
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


@needs_data
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
@needs_data
def test_hyphen_underscore_and_case_aliases():
    a = load_dataset("adversarial-hotpotqa", "dev", data_dir=DATA, limit=2)
    b = load_dataset("Adversarial_HotpotQA", "DEV", data_dir=DATA, limit=2)
    assert [e.id for e in a] == [e.id for e in b] and a[0].dataset == "adversarial_hotpotqa"
    s = load_dataset("open-squad", "hgot_test_short", data_dir=DATA, limit=1)[0]
    assert (s.dataset, s.split) == ("open_squad", "hgot-test-short")
    assert load_dataset("2wikimultihopqa", data_dir=DATA, limit=1)[0].split == "dev"


@needs_data
def test_limit():
    assert len(load_dataset("musique", "dev", data_dir=DATA, limit=3)) == 3
    assert load_dataset("musique", "dev", data_dir=DATA, limit=0) == []
    with pytest.raises(DatasetError, match="limit"):
        load_dataset("musique", "dev", data_dir=DATA, limit=-1)


@needs_data
def test_iter_paragraphs_and_demo_corpus_files():
    examples = load_dataset("musique", "dev", data_dir=DATA, limit=5)
    passages = list(iter_paragraphs(examples))
    assert len(passages) == 100 and all(isinstance(p, Passage) for p in passages)
    assert all(p.is_supporting is None and p.score is None for p in passages)
    assert passages[0] == Passage("2hop__574419_270105#0", "Port Blair", examples[0].paragraphs[0].text)
    assert demo_corpus_files(DATA) == DEMO_PAIRS


def test_demo_corpus_files_keeps_the_present_files(tmp_path):
    assert demo_corpus_files(tmp_path) == DEMO_PAIRS  # nothing present: all, so loading says what is missing
    _write(tmp_path / "musique" / "dev_200.jsonl", "")
    assert demo_corpus_files(tmp_path) == [("musique", "dev")]


def test_default_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HOPQA_DATA_DIR", str(tmp_path / "from-env"))
    assert default_data_dir(tmp_path / "explicit") == tmp_path / "explicit"
    assert default_data_dir() == tmp_path / "from-env"
    monkeypatch.delenv("HOPQA_DATA_DIR")
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    assert default_data_dir() == tmp_path / "shared" / "data"
    assert default_data_dir("") == tmp_path / "shared" / "data"  # an empty --data-dir is no choice


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


# -- errors ---------------------------------------------------------------------------------------
def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(DatasetError, match="unknown dataset 'squadx'; known datasets: musique, hotpotqa"):
        load_dataset("squadx")


def test_unknown_split_lists_the_splits(tmp_path):
    with pytest.raises(DatasetError, match="its splits: dev, train$"):
        load_dataset("musique", "validation", data_dir=tmp_path)
    with pytest.raises(DatasetError, match="its splits: test, test-decomposed"):
        load_dataset("bamboogle", data_dir=tmp_path)  # the default split "dev" does not exist


def test_missing_file_says_where_it_looked_and_how_to_fix_it(tmp_path):
    with pytest.raises(DatasetFileNotFoundError) as info:
        load_dataset("musique", "dev", data_dir=tmp_path)
    message = str(info.value)
    assert str(tmp_path / "musique" / "dev_200.jsonl") in message
    assert "--data-dir" in message and "HOPQA_DATA_DIR" in message and "download_dataset('musique'" in message
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, DatasetError)
    with pytest.raises(DatasetFileNotFoundError, match="data directory does not exist"):
        load_dataset("fever", "hgot-test-long", data_dir=tmp_path / "nowhere")


def test_no_data_directory_at_all(monkeypatch):
    monkeypatch.setattr(ds, "default_data_dir", lambda explicit=None: None)
    with pytest.raises(DatasetError, match="no data directory found.*HOPQA_DATA_DIR"):
        load_dataset("musique")
    assert not any(r.exists for r in list_datasets())


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


def test_download_of_a_dataset_without_official_source(tmp_path):
    with pytest.raises(DatasetError, match="no official download for 'fever'"):
        download_dataset("fever", tmp_path)
    assert set(ds.OFFICIAL_SOURCES) == {"musique", "hotpotqa", "2wikimultihopqa", "bamboogle", "freshqa"}
