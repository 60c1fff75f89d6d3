"""Metric functions against hand-worked cases."""

from __future__ import annotations

import pytest

from hopqa.evaluation.metrics import (
    exact_match,
    fever_accuracy,
    fever_label,
    judge_accuracy,
    k_precision,
    normalize_answer,
    score_answer,
    support_metrics,
    token_scores,
)
from hopqa.llm.scripted import ScriptedLLM
from hopqa.types import Passage


def test_normalization():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("  Rock   music. ") == "rock music"


@pytest.mark.parametrize("pred,golds,em", [
    ("the Eiffel Tower", ["Eiffel Tower"], 1.0),
    ("Eiffel Tower.", ["eiffel tower"], 1.0),
    ("Stanley Hall", ["G. Stanley Hall", "Stanley Hall"], 1.0),  # alias
    ("G Stanley Hall", ["G. Stanley Hall"], 1.0),  # punctuation
    ("Paris, France", ["Paris"], 0.0),
    ("yes", ["Yes"], 1.0),
    ("", ["x"], 0.0),
])
def test_exact_match(pred, golds, em):
    assert exact_match(pred, golds) == em


def test_token_scores_hand_worked():
    # pred tokens: [paris, france]; gold tokens: [paris]; common 1 -> P 1/2, R 1/1, F1 2/3
    s = token_scores("Paris, France", ["Paris"])
    assert s == pytest.approx({"f1": 2 / 3, "precision": 0.5, "recall": 1.0})
    # best over aliases: "the city of paris" vs ["Lyon", "city of Paris"] -> exact after normalisation
    assert token_scores("the city of Paris", ["Lyon", "city of Paris"])["f1"] == 1.0
    # repeated tokens count with multiplicity: pred [a1 a1 b] gold [a1 b b] -> common 2 -> P 2/3 R 2/3
    assert token_scores("x1 x1 y", ["x1 y y"])["f1"] == pytest.approx(2 / 3)


def test_yes_no_special_case():
    assert token_scores("yes it is", ["no"])["f1"] == 0.0
    assert token_scores("no", ["no"])["f1"] == 1.0
    assert token_scores("yes", ["yes sir"])["f1"] == 0.0  # HotpotQA rule: yes/no must match exactly


def test_fever():
    assert fever_label("The claim is SUPPORTED by the evidence.") == "SUPPORTS"
    assert fever_label("refutes") == "REFUTES"
    assert fever_label("There is not enough info to support it") == "NOT ENOUGH INFO"
    assert fever_label("maybe") is None
    assert fever_accuracy("Supports.", ["SUPPORTS"]) == 1.0 and fever_accuracy("refuted", ["SUPPORTS"]) == 0.0


def test_support_metrics_hand_worked():
    g1, g2 = Passage("a", "A", "alpha text"), Passage("b", "B", "beta text")
    used = [Passage("x", "X", "other"), Passage("a2", "A", "alpha  text"), Passage("y", "Y", "more")]
    m = support_metrics(used, [g1, g2])
    # one of two gold found (matched by title + text, not id), 1 of 3 used is gold
    assert m == pytest.approx({"support_recall": 0.5, "support_precision": 1 / 3, "support_f1": 0.4})
    assert support_metrics(used, [g1, g2], k=1)["support_recall"] == 0.0
    assert support_metrics(used, []) == {}


def test_support_metrics_by_title_only():
    used = [Passage("1", "Alpha ", "chunk one"), Passage("2", "alpha", "chunk two"), Passage("3", "Gamma", "g"),
            Passage("4", "Delta", "d")]
    m = support_metrics(used, [], gold_titles=["ALPHA", "Beta"])
    # gold: 2 titles; Alpha found (twice: one support), Beta not -> recall 1/2;
    # 2 of the 4 distinct used passages carry a gold title -> precision 1/2; F1 1/2
    assert m == pytest.approx({"support_recall": 0.5, "support_precision": 0.5, "support_f1": 0.5})
    assert support_metrics(used, [], k=1, gold_titles=["Gamma", "Beta"])["support_recall"] == 0.0
    assert support_metrics(used, [], k=3, gold_titles=["Gamma", "Beta"])["support_recall"] == 0.5
    assert support_metrics(used, [], gold_titles=["", "  "]) == {}


def test_support_metrics_passages_and_titles_together():
    g1 = Passage("a", "A", "alpha text")
    used = [Passage("x", "A", "another A chunk"), Passage("y", "B", "beta"), Passage("z", "C", "c")]
    # a title already covered by a gold passage is not a second support: gold = {A text, title B}
    m = support_metrics(used, [g1], gold_titles=["a", "B"])
    # A-passage differs in text -> not a hit; title B found -> recall 1/2; precision 1/3; F1 2*(1/3*1/2)/(5/6) = 0.4
    assert m == pytest.approx({"support_recall": 0.5, "support_precision": 1 / 3, "support_f1": 0.4})


def test_score_answer_passes_gold_titles():
    used = [Passage("1", "Paris", "Paris is the capital of France.")]
    m = score_answer("Paris", ["Paris"], passages=used, gold_titles=["paris"])
    assert (m["support_recall"], m["support_precision"], m["support_f1"]) == (1.0, 1.0, 1.0)
    assert "support_recall" not in score_answer("Paris", ["Paris"], passages=used)


def test_k_precision():
    ps = [Passage("1", "Titanic", "directed by James Cameron")]
    assert k_precision("James Cameron", ps) == 1.0
    assert k_precision("Steven Spielberg Cameron", ps) == pytest.approx(1 / 3)
    assert k_precision("x", []) is None


def test_judge():
    judge = ScriptedLLM(replies=["Yes.", "no"])
    assert judge_accuracy(judge, "q", "Cameron", ["James Cameron"]) == (1.0, "Yes.")
    assert judge_accuracy(judge, "q", "Spielberg", ["James Cameron"]) == (0.0, "no")
    assert judge_accuracy(judge, "q", "", ["x"])[0] == 0.0 and len(judge.requests) == 2


def test_score_answer_keys():
    m = score_answer("Paris", ["Paris"], passages=[Passage("1", "P", "Paris")], gold_support=[Passage("1", "P", "Paris")])
    assert m["em"] == 1 and m["support_recall"] == 1 and m["k_precision"] == 1
    assert "support_recall" not in score_answer("Paris", ["Paris"], passages=[], gold_support=[Passage("1", "P", "x")])
    assert score_answer("supports", ["SUPPORTS"], dataset="fever")["label_acc"] == 1.0


def test_runner_scores_support_by_title_for_a_question_file_example(tmp_path):
    from hopqa.datasets import load_dataset
    from hopqa.evaluation.runner import _record
    from hopqa.types import Answer

    path = tmp_path / "mine.jsonl"
    path.write_text('{"question": "Capital of France?", "answer": "Paris", "supporting_titles": ["Paris"]}\n')
    (example,) = load_dataset(str(path))
    used = [Passage("c1", "Paris", "Paris is the capital of France."), Passage("c2", "Lyon", "Lyon is a city.")]
    record = _record(example, Answer(example.question, "Paris", "direct", passages=used), "open", None, None)
    assert record["metrics"]["support_recall"] == 1.0 and record["metrics"]["support_precision"] == 0.5
    assert record["metrics"]["support_f1"] == pytest.approx(2 / 3)


def test_rouge_l_best_over_golds_and_in_every_score():
    from hopqa.evaluation.metrics import rouge_l

    assert rouge_l("Kris Benson", ["the answer is Kris Benson"]) == pytest.approx(2 * 0.4 * 1.0 / 1.4)
    assert rouge_l("Kris Benson", ["nobody", "Kris Benson"]) == 1.0
    assert rouge_l("", ["x"]) == 0.0 and rouge_l("x", [""]) == 0.0
    assert rouge_l("running fast", ["ran fast", "runs fast"]) == 1.0  # Porter stemming: run / runs
    assert score_answer("Paris", ["Paris"])["rouge_l"] == 1.0
    assert "rouge_l" not in score_answer("supports", ["SUPPORTS"], dataset="fever")


_LEAN_CHECK = """
import json, sys
from hopqa.evaluation import metrics
metrics.load_metrics(lean=%s)
pairs = [("Kris Benson", ["the answer is Kris Benson"]), ("running fast", ["runs fast"]),
         ("the generously dying hopefulness", ["generous die hopeful", "x"]), ("1990s", ["the 1990s decade"]),
         ("Ségolène's tries", ["segolene try"]), ("", ["x"])]
heavy = sorted({"scipy", "sklearn", "pandas", "nltk.corpus", "nltk.parse"} & set(sys.modules))
nltk_after = sorted(m for m in sys.modules if m.startswith("nltk"))
import nltk, nltk.corpus, scipy.stats  # afterwards nltk imports whole, as usual
print(json.dumps({"scores": [metrics.rouge_l(p, g) for p, g in pairs], "heavy": heavy, "nltk_after": nltk_after,
                  "whole": hasattr(nltk, "sent_tokenize") and hasattr(nltk, "PorterStemmer")}))
"""


def test_lean_metric_load_imports_only_the_stemmer_of_nltk_with_the_same_scores():
    """``hopqa eval`` imports rouge-score without the rest of nltk (its parsers, corpora, scipy,
    scikit-learn: 1.5 s of 1.6 s): the scores are the same, no nltk module stays in
    ``sys.modules``, and nltk imports whole afterwards."""
    import json
    import subprocess
    import sys

    def run(lean: bool) -> dict:
        out = subprocess.run([sys.executable, "-c", _LEAN_CHECK % lean], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    lean, full = run(True), run(False)
    assert lean["scores"] == full["scores"] and lean["scores"][1] == 1.0 and lean["scores"][-1] == 0.0
    assert lean["heavy"] == [] and lean["nltk_after"] == [] and lean["whole"]
    assert "scipy" in full["heavy"] and "nltk.corpus" in full["heavy"]  # what the full load brings


def test_bare_packages_run_no_init_and_leave_no_module_behind():
    import sys

    from hopqa.evaluation.metrics import _bare_packages

    saved = {m: sys.modules.pop(m) for m in [m for m in sys.modules if m.startswith("xml")]}  # loadable afresh
    try:
        with _bare_packages(["xml", "xml.dom"]):
            bare = sys.modules["xml.dom"]
            assert not hasattr(bare, "Node")  # xml/dom/__init__.py defines Node: it did not run
            from xml.dom import minicompat  # a submodule loads on its own

            assert minicompat.NodeList
        assert not any(m.startswith("xml") for m in sys.modules)
        sys.modules.pop("tabnanny", None)
        with pytest.raises(ModuleNotFoundError), _bare_packages(["tabnanny"]):  # a module, not a package
            pass
        assert "tabnanny" not in sys.modules
        with pytest.raises(ValueError, match="imported already: json"), _bare_packages(["json"]):
            pass
        assert "json.decoder" in sys.modules  # what was there is left alone
    finally:
        sys.modules.update(saved)  # the modules other tests and libraries hold, as they were
        import xml.dom

        assert hasattr(xml.dom, "Node")


def test_bertscore_with_the_shipped_minilm_and_a_clear_error_otherwise():
    pytest.importorskip("bert_score")
    from hopqa.evaluation.metrics import BertScore, BertScoreUnavailable

    scorer = BertScore("minilm")
    same, other = scorer.score("Kris Benson", ["Kris Benson"]), scorer.score("Kris Benson", ["Paris"])
    assert same == pytest.approx(1.0, abs=1e-4) and other < same
    assert scorer.score("Kris Benson", ["Paris", "Kris Benson"]) == pytest.approx(same, abs=1e-4)  # best gold
    assert scorer.score("", ["x"]) == 0.0 and scorer.num_layers == 6
    with pytest.raises(BertScoreUnavailable, match="cannot be loaded offline"):
        BertScore("/no/such/model")


def test_report_says_when_bertscore_was_not_computed():
    from hopqa.evaluation.report import BERTSCORE_NOTE, Row, markdown_table

    row = Row("musique", "dev", "open", "leapquery", "all", 1, 0, {"f1": 0.5, "rouge_l": 0.4}, {})
    assert BERTSCORE_NOTE in markdown_table([row]) and "ROUGE-L" in markdown_table([row])
    scored = Row("musique", "dev", "open", "leapquery", "all", 1, 0, {"f1": 0.5, "rouge_l": 0.4, "bertscore": 0.6}, {})
    table = markdown_table([scored])
    assert BERTSCORE_NOTE not in table and "| 0.600 |" in table
