"""HGOT demonstrations (Appendix D): the filters, bootstrapping (match rule, cache, resume),
balanced and KNN selection, their use in the prompts, and a bootstrap on the embedded model."""

from __future__ import annotations

import json

import pytest

from hopqa.embed import LexicalEmbedder
from hopqa.methods import build_method, hgot_demos
from hopqa.methods.hgot_demos import (
    PredictDemo,
    build_demo_set,
    iqr_upper_fence,
    normalize_citations,
    select_balanced,
    select_knn,
    well_formed_dependencies,
)
from hopqa.types import Example
from tests.test_hgot import POOL, Q, scripted_hgot


@pytest.mark.parametrize("raw, expected", [
    ("Steve Masiello was born on September 2, 1977 [2].", "Steve Masiello was born on September 2, 1977 [2]."),
    ("Let's think step by step. Paris [1] is in France. It is the capital.[2]",
     "Paris is in France [1]. It is the capital [2]."),
    ("A is in B. [1][3] B is in C [2]", "A is in B [1][3]. B is in C [2]."),
    ("A [1] is in B [1].", "A is in B [1]."),
    ("No citation at all.", "No citation at all."),
    ("He said [sic] it was 1990 [1].", None),  # a bracket that is not a citation breaks the format
    ("He moved to the U.S. in 1990 [1].", "He moved to the U.S. in 1990 [1]."),  # the paper's regex allows it
    ("[1][2]", None),
    ("", None),
])
def test_normalize_citations(raw, expected):
    assert normalize_citations(raw) == expected


@pytest.mark.parametrize("text, ok", [
    ("Step 2 depends on Step 1.", True),
    ("None", True),
    ("Step 2 depends on Step 1. step 3 depends on Step 2.", True),
    ("Step 2 depends on Step 1", False),
    ("Step 1 -> Step 2", False),
    ("Step 2 depends on Step 1 and Step 3.", False),
    ("", False),
])
def test_dependency_format(text, ok):
    assert well_formed_dependencies(text) is ok


def test_iqr_upper_fence():
    assert iqr_upper_fence([4, 5, 5, 6, 20]) == pytest.approx(6 + 1.5 * (6 - 5))
    assert iqr_upper_fence([3, 4, 5]) is None


def _run(i, matched=True, rationale="X is Y [1].", deps="Step 2 depends on Step 1.", steps=("Who is X?", "What is Y?")):
    return {"id": f"t{i}", "answers": [f"ans{i % 2}"], "matched": matched, "error": None, "records": [
        {"kind": "predict", "question": f"q{i}", "context": ["[1] X | X is Y."], "rationale": rationale, "answer": "Y"},
        {"kind": "plan", "question": f"q{i}", "context": [], "steps": list(steps), "dependencies": deps},
        {"kind": "rewrite", "question": f"s{i}", "context_text": "Step 1: a ANSWER: b. Step 2: c", "rewrite": "c b?"},
    ]}


def test_build_demo_set_applies_the_match_rule_and_the_filters():
    runs = [_run(0), _run(1), _run(2, matched=False), _run(3, rationale="X [sic] is Y [1]."),
            _run(4, deps="Step 1 -> Step 2"), _run(5, steps=("Who is X?", "What is the Y of the X that " + "z " * 30)),
            _run(6), {"id": "t7", "error": "boom", "records": []}, _run(8)]
    ds = build_demo_set(runs)
    assert ds.stats["runs"] == 9 and ds.stats["matched"] == 7 and ds.stats["failed"] == 1
    assert ds.stats["predict_bad_citations"] == 1 and ds.stats["plan_bad_dependencies"] == 1
    assert ds.stats["plan_long_steps"] == 1  # run 5's 36-word step is above Q3 + 1.5 IQR
    assert [d.question for d in ds.predict] == ["q0", "q1", "q4", "q5", "q6", "q8"]
    assert [d.question for d in ds.plan] == ["q0", "q1", "q3", "q6", "q8"]
    assert ds.predict[0].render().endswith("Rationale: Let's think step by step. X is Y [1].\nAnswer: Y")
    assert ds.plan[0].render_reflect() == "Plan:\nStep 1: Who is X? Step 2: What is Y?\nDependencies: Step 2 depends on Step 1."
    assert ds.predict[0].label == "ans0" and ds.predict[1].label == "ans1"


def _demo(q, label):
    return PredictDemo(q, (), "r.", "a", label)


def test_balanced_sampling_keeps_classes_even_and_is_seeded():
    demos = [_demo(f"q{i}", "yes") for i in range(6)] + [_demo("n1", "no"), _demo("n2", "no"), _demo("m", "maybe")]
    chosen = select_balanced(demos, 3, seed=1)
    assert sorted(d.label for d in chosen) == ["maybe", "no", "yes"]
    assert select_balanced(demos, 3, seed=1) == chosen
    five = select_balanced(demos, 5, seed=0)
    assert sorted(d.label for d in five).count("yes") == 2 and len(set(five)) == 5
    assert len(select_balanced(demos, 50)) == len(demos)


def test_knn_picks_the_nearest_questions_nearest_last():
    demos = [_demo("Who wrote Hamlet?", "a"), _demo("What is the seat of Mountrail County?", "b"),
             _demo("Which county is Van Hook Township in?", "c")]
    chosen = select_knn(demos, "In which county is Van Hook Township located?", 2, LexicalEmbedder())
    assert [d.label for d in chosen][-1] == "c" and len(chosen) == 2 and demos[0] not in chosen


def test_bootstrap_file_is_resumable(tmp_path):
    examples = [Example(id=f"e{i}", question=f"q{i}", answers=["Y"]) for i in range(3)]
    calls = []

    def run(ex):
        calls.append(ex.id)
        return ("Y" if ex.id != "e1" else "N"), [{"kind": "predict", "question": ex.question, "context": [],
                                                  "rationale": "X is Y [1].", "answer": "Y"}], None

    path = tmp_path / "runs.jsonl"
    ds = hgot_demos.bootstrap(examples[:2], run, path, progress=False)
    assert calls == ["e0", "e1"] and len(ds.predict) == 1 and ds.stats["matched"] == 1
    with path.open("a") as f:
        f.write('{"id": "e2", "torn')  # a run killed mid-write
    ds = hgot_demos.bootstrap(examples, run, path, progress=False)
    assert calls == ["e0", "e1", "e2"] and len(ds.predict) == 2
    assert hgot_demos.bootstrap(examples, run, path, progress=False).stats["runs"] == 3 and len(calls) == 3
    unmatched = [json.loads(x) for x in path.read_text().splitlines() if '"e1"' in x][0]
    assert unmatched["matched"] is False and unmatched["records"] == [] and unmatched["prediction"] == "N"


# -- in the method -------------------------------------------------------------------------------------------
def _train(monkeypatch, examples):
    import hopqa.datasets

    seen = {}

    def fake_load(name, split, data_dir=None, limit=None):
        seen["args"] = (name, split, limit)
        return examples[:limit]

    monkeypatch.setattr(hopqa.datasets, "load_dataset", fake_load)
    return seen


def test_bootstrapped_demos_reach_the_prompts(tmp_path, monkeypatch):
    train = [Example(id="t1", question=Q, answers=["Stanley"], paragraphs=POOL.passages),
             Example(id="t2", question="Who is the mayor of Paris?", answers=["Anne Hidalgo"], paragraphs=POOL.passages)]
    seen = _train(monkeypatch, train)
    method, llm = scripted_hgot(demo_source="bootstrap", demo_cache=str(tmp_path), bootstrap_examples=2,
                                demo_selection="knn", num_demos=1)
    method.progress = False
    ans = method.answer("Which county is Van Hook Township in?")
    assert ans.error is None and seen["args"] == ("hotpotqa", "train", 2)
    step = ans.trace.root.find("demonstrations")[0]
    assert step.outputs["matched"] == 1 and step.outputs["runs"] == 2 and step.outputs["predict"] >= 3
    # the bootstrap calls are not in this question's usage: only the question's own calls are
    assert ans.usage.llm_calls == len(ans.trace.llm_calls())
    # KNN: the nearest bootstrapped Predict demo is the sub-query's own, with its rationale
    prompt = [r.text() for r in llm.requests[-ans.usage.llm_calls:] if r.text().startswith("Answer questions")][0]
    assert "Question: Which county is Van Hook Township in?\nRationale: Let's think step by step. " \
           "Van Hook Township is in Mountrail County [1].\nAnswer: Mountrail County" in prompt
    assert "Manhattan Jaspers" not in prompt  # not the paper's Appendix C examples
    files = list(tmp_path.glob("hgot-hotpotqa-train-*.jsonl"))
    assert len(files) == 1 and len(files[0].read_text().splitlines()) == 2
    assert files[0].with_suffix(".demos.json").is_file()
    # a new instance with the same settings loads the runs from disk: no model call to bootstrap
    again, llm2 = scripted_hgot(demo_source="bootstrap", demo_cache=str(tmp_path), bootstrap_examples=2)
    demos = again.prepare_demos(POOL)
    assert llm2.requests == [] and len(demos.predict) == len(method.demo_set.predict)


def test_no_bootstrapped_demo_of_a_kind_falls_back_to_the_paper(tmp_path, monkeypatch):
    _train(monkeypatch, [Example(id="t1", question="Who is the mayor of Paris?", answers=["Anne Hidalgo"],
                                 paragraphs=POOL.passages)])
    method, llm = scripted_hgot(demo_source="bootstrap", demo_cache=str(tmp_path), depth=0)
    method.progress = False
    ans = method.answer(Q)
    assert ans.error is None and ans.trace.root.find("demonstrations")[0].outputs["matched"] == 0
    assert "Manhattan Jaspers" in llm.requests[-1].text()
    assert any("Appendix C" in e["message"] for s in ans.trace.root.walk() for e in s.events)


def test_bad_demo_options_are_clear_errors(tmp_path, monkeypatch):
    from hopqa.methods.base import MethodError

    with pytest.raises(MethodError, match="demo_selection"):
        scripted_hgot(demo_selection="nearest")
    method, _ = scripted_hgot(demo_source="bootstrap", bootstrap_dataset="nonesuch:train", demo_cache=str(tmp_path))
    ans = method.answer(Q)
    assert ans.error and "cannot bootstrap" in ans.error


@pytest.mark.slow
def test_bootstrap_on_the_embedded_model(smollm2, data_dir, tmp_path):
    cheap = dict(depth=1, samples=1, k=3, max_tokens=48, max_steps=2, citation_quality=False,
                 entailment_delta=False, demo_source="bootstrap", bootstrap_examples=2, demo_cache=str(tmp_path))
    method = build_method("hgot", smollm2, POOL, **cheap)
    method.progress = False
    demos = method.prepare_demos(POOL)
    path = method.demo_file
    runs = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(runs) == 2 and all(r["error"] is None for r in runs)
    assert demos.stats["runs"] == 2 and demos.stats["matched"] == sum(r["matched"] for r in runs)
    mtime = path.stat().st_mtime_ns
    again = build_method("hgot", smollm2, POOL, **cheap)
    assert again.prepare_demos(POOL).stats == demos.stats and path.stat().st_mtime_ns == mtime
    ans = again.answer(Q)
    assert ans.error is None and ans.trace.root.find("demonstrations")
