"""HGOT demonstrations (Appendix D): the filters, bootstrapping (match rule, cache, resume),
balanced and KNN selection, their use in the prompts, and a bootstrap on the embedded model."""

from __future__ import annotations

import json

import pytest

from hopqa.bootstrap import bootstrap_hgot, candidates_from_trace, record_runs
from hopqa.build import build_method
from hopqa.embed import LexicalEmbedder
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.hgot import HGOTConfig
from hopqa.methods.hgot.demos import (
    PredictDemo,
    build_demo_set,
    official_rationale,
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
    ds = build_demo_set(runs, "every-call")
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
    ds = record_runs(examples[:2], run, path, progress=False, mode="every-call")
    assert calls == ["e0", "e1"] and len(ds.predict) == 1 and ds.stats["matched"] == 1
    with path.open("a") as f:
        f.write('{"id": "e2", "torn')  # a run killed mid-write
    ds = record_runs(examples, run, path, progress=False, mode="every-call")
    assert calls == ["e0", "e1", "e2"] and len(ds.predict) == 2
    assert record_runs(examples, run, path, progress=False, mode="every-call").stats["runs"] == 3 and len(calls) == 3
    unmatched = [json.loads(x) for x in path.read_text().splitlines() if '"e1"' in x][0]
    assert unmatched["matched"] is False and unmatched["records"] == [] and unmatched["prediction"] == "N"


# -- from the trace of a run -------------------------------------------------------------------------------
def test_the_candidates_are_read_from_the_trace():
    """Predict (probe and infer), Plan and Rewrite calls, in call order, as Appendix D shows them."""
    method, _ = scripted_hgot()
    ans = method.answer(Q)
    records = candidates_from_trace(ans.trace, {p.id: p for p in POOL.passages}, "every-call")
    kinds = [r["kind"] for r in records]
    # probe Q, plan Q, [probe sub 1 (leaf: plan), ...], rewrite step 2, probe sub 2, ..., infer Q
    assert kinds[:2] == ["predict", "plan"] and kinds[-1] == "predict" and "rewrite" in kinds
    assert kinds.index("rewrite") > 2
    plan = records[1]
    assert plan["question"] == Q and plan["steps"] == ["Which county is Van Hook Township in?",
                                                       "What is the seat of that county?"]
    plan_step = ans.trace.root.find("plan")[0]
    assert plan["dependencies"] == "Step 2 depends on Step 1."
    assert len(plan["context"]) == len(plan_step.outputs["context"]) >= 1  # the passages the Plan prompt showed
    assert plan["context"][0].startswith("[1] ")  # numbered, as the Plan prompt shows passages
    rewrite = records[kinds.index("rewrite")]
    assert rewrite["context_text"] == ("Step 1: Which county is Van Hook Township in? ANSWER: Mountrail County. "
                                       "Step 2: What is the seat of that county?")
    assert rewrite["rewrite"] == "What is the seat of Mountrail County?"
    first = records[0]
    assert first["question"] == Q and first["answer"] == "Stanley"
    assert first["rationale"] == "Stanley is the county seat of Mountrail County [1]."
    assert all(len(c.split()) <= 31 + 3 for c in first["context"])  # 30 words of each passage (+ its mark, title)
    # and nothing else: the traverse, stop and search steps are not calls of a prompt
    assert len(records) == len(ans.trace.root.find("probe")) + len(ans.trace.root.find("infer")) \
        + len([s for s in ans.trace.root.find("plan") if s.outputs.get("steps")]) + 1


# -- bootstrapping, then the method ---------------------------------------------------------------------------
def _train(monkeypatch, examples):
    import hopqa.bootstrap

    seen = {}

    def fake_load(name, split, data_dir=None, limit=None, home=None):
        seen["args"] = (name, split, limit)
        return examples[:limit]

    monkeypatch.setattr(hopqa.bootstrap, "load_dataset", fake_load)
    return seen


def _bootstrap(tmp_path, **cfg):
    """Bootstrap with the scripted HGOT's model and judge; (result, the model)."""
    probe, llm = scripted_hgot()
    config = HGOTConfig(samples=2, k=2, depth=2, demo_source="bootstrap", demo_cache=str(tmp_path)).update(**cfg)
    return bootstrap_hgot(llm, config, judge=probe.judge, embedder=LexicalEmbedder(), progress=False), llm


def test_bootstrapped_demos_reach_the_prompts(tmp_path, monkeypatch):
    """hopqa's earlier harvest (every call of a matched run): the nearest Predict demonstration by
    KNN is the sub-query's own."""
    train = [Example(id="t1", question=Q, answers=["Stanley"], paragraphs=POOL.passages),
             Example(id="t2", question="Who is the mayor of Paris?", answers=["Anne Hidalgo"], paragraphs=POOL.passages)]
    seen = _train(monkeypatch, train)
    result, boot_llm = _bootstrap(tmp_path, bootstrap_examples=2, bootstrap_mode="every-call")
    assert seen["args"] == ("hotpotqa", "train", 2) and boot_llm.requests
    method, llm = scripted_hgot(demo_set=result.demo_set, demo_source="bootstrap", demo_cache=str(tmp_path),
                                bootstrap_examples=2, demo_selection="knn", num_demos=1)
    ans = method.answer("Which county is Van Hook Township in?")
    assert ans.error is None
    step = ans.trace.root.find("demonstrations")[0]
    assert step.outputs["matched"] == 1 and step.outputs["runs"] == 2 and step.outputs["predict"] >= 3
    assert ans.usage.llm_calls == len(ans.trace.llm_calls())  # the bootstrap ran on another model object
    # KNN: the nearest bootstrapped Predict demo is the sub-query's own, with its rationale
    prompt = [r.text() for r in llm.requests if r.text().startswith("Answer questions")][0]
    assert "Question: Which county is Van Hook Township in?\nRationale: Let's think step by step. " \
           "Van Hook Township is in Mountrail County [1].\nAnswer: Mountrail County" in prompt
    assert "Manhattan Jaspers" not in prompt  # not the paper's Appendix C examples
    files = list(tmp_path.glob("hgot-hotpotqa-train-*.jsonl"))
    assert files == [result.runs_file] and len(files[0].read_text().splitlines()) == 2
    assert result.demos_file.is_file()
    # the same settings again read the runs from disk: no model call to bootstrap
    again, llm2 = _bootstrap(tmp_path, bootstrap_examples=2, bootstrap_mode="every-call")
    assert llm2.requests == [] and len(again.demo_set.predict) == len(result.demo_set.predict)


def test_official_bootstrap_keeps_one_demonstration_of_each_kind_per_run(tmp_path, monkeypatch):
    """The authors' annotate(): two levels, no NLI voting, every passage in the plan context; a
    matched run gives its root's final Predict, its first Plan (dependencies from the parsed
    edges) and its first Rewrite, whole passages."""
    train = [Example(id="t1", question=Q, answers=["Stanley"], paragraphs=POOL.passages),
             Example(id="t2", question="Who is the mayor of Paris?", answers=["Anne Hidalgo"], paragraphs=POOL.passages)]
    _train(monkeypatch, train)
    result, boot_llm = _bootstrap(tmp_path, bootstrap_examples=2)
    ds = result.demo_set
    assert ds.stats["matched"] == 1 and ds.stats["kept"] == 1
    assert [d.question for d in ds.predict] == [Q] and [d.question for d in ds.plan] == [Q] and len(ds.rewrite) == 1
    assert ds.predict[0].rationale == "Stanley is the county seat of Mountrail County [1]."
    assert ds.plan[0].dependencies == "Step 2 depends on Step 1."
    assert ds.plan[0].steps == ("Which county is Van Hook Township in?", "What is the seat of that county?")
    assert all(not c.endswith(" ...") for c in ds.predict[0].context)  # whole passages
    assert ds.rewrite[0].context.startswith("Step 1: Which county is Van Hook Township in? ANSWER: Mountrail County.")
    # no NLI voting while annotating: the judge was never asked
    assert not any(r.text().startswith("Premise") or "Hypothesis:" in r.text() for r in boot_llm.requests)
    runs = [json.loads(x) for x in result.runs_file.read_text().splitlines()]
    assert [r["kind"] for r in runs[0]["records"]] == ["predict", "plan", "rewrite"]
    # a different mode is a different cache file
    other, _ = _bootstrap(tmp_path, bootstrap_examples=2, bootstrap_mode="every-call")
    assert other.runs_file != result.runs_file


@pytest.mark.parametrize("change, stat", [
    ({"rationale": "X is Y."}, "bad_rationale"),  # no citation
    ({"rationale": "X is Y [1]"}, "bad_rationale"),  # no full stop
    ({"steps": ("Who is X?", "Find Y")}, "bad_steps"),  # a step that is not a question
    ({"deps": "Step 1 -> Step 2"}, "bad_dependencies"),
])
def test_official_filters_drop_the_whole_run(change, stat):
    ds = build_demo_set([_run(0), _run(1, **change), _run(2)])
    assert ds.stats[stat] == 1 and ds.stats["kept"] == 2
    assert [d.question for d in ds.predict] == [d.question for d in ds.plan] == ["q0", "q2"]
    assert [d.question for d in ds.rewrite] == ["s0", "s2"]


def test_official_rationale_moves_leading_marks_and_needs_a_citation():
    assert official_rationale("[1] Paris is in France. [2] It is big.") == "Paris is in France [1]. It is big [2]."
    assert official_rationale("Paris is in France [1].\nIt is big [2].") == "Paris is in France [1]. It is big [2]."
    assert official_rationale("Paris is in France.") is None


def test_official_iqr_uses_mean_step_characters():
    runs = [_run(i, steps=("Who is X?", "What is Y" + "y" * i + "?")) for i in range(4)]  # means 9.5 .. 11
    runs.append(_run(4, steps=("Who is X?", "What is the Y of the X that " + "z " * 30 + "?")))
    ds = build_demo_set(runs)
    assert ds.stats["long_steps"] == 1 and ds.stats["kept"] == 4
    same = build_demo_set([_run(i) for i in range(4)])  # IQR 0: every plan at the fence is kept
    assert same.stats["kept"] == 4


def test_no_bootstrapped_demo_of_a_kind_falls_back_to_the_paper(tmp_path, monkeypatch):
    _train(monkeypatch, [Example(id="t1", question="Who is the mayor of Paris?", answers=["Anne Hidalgo"],
                                 paragraphs=POOL.passages)])
    result, _ = _bootstrap(tmp_path)
    method, llm = scripted_hgot(demo_set=result.demo_set, demo_source="bootstrap", depth=0)
    ans = method.answer(Q)
    assert ans.error is None and ans.trace.root.find("demonstrations")[0].outputs["matched"] == 0
    assert "Manhattan Jaspers" in llm.requests[-1].text()
    assert any("Appendix C" in e["message"] for s in ans.trace.root.walk() for e in s.events)


def test_bad_demo_options_are_clear_errors(tmp_path):
    from hopqa.methods.base import MethodError

    with pytest.raises(MethodError, match="demo_selection"):
        scripted_hgot(demo_selection="nearest")
    with pytest.raises(MethodError, match="takes its bootstrapped demonstrations ready"):
        scripted_hgot(demo_source="bootstrap")  # built directly without them
    with pytest.raises(MethodError, match="cannot bootstrap"):
        _bootstrap(tmp_path, bootstrap_dataset="nonesuch:train")
    with pytest.raises(MethodError, match="cannot bootstrap"):  # the builder bootstraps when it builds
        build_method("hgot", ScriptedLLM(replies=[]), POOL, demo_source="bootstrap", bootstrap_dataset="nonesuch:train",
                     demo_cache=str(tmp_path))


@pytest.mark.slow
def test_bootstrap_on_the_embedded_model(smollm2, data_dir, tmp_path):
    cheap = dict(depth=1, samples=1, k=3, max_tokens=48, max_steps=2, citation_quality=False,
                 entailment_delta=False, demo_source="bootstrap", bootstrap_examples=2, demo_cache=str(tmp_path))
    method = build_method("hgot", smollm2, POOL, progress=False, **cheap)
    demos = method.demo_set
    [path] = tmp_path.glob("hgot-*.jsonl")
    runs = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(runs) == 2 and all(r["error"] is None for r in runs)
    assert demos.stats["runs"] == 2 and demos.stats["matched"] == sum(r["matched"] for r in runs)
    mtime = path.stat().st_mtime_ns
    again = build_method("hgot", smollm2, POOL, progress=False, **cheap)
    assert again.demo_set.stats == demos.stats and path.stat().st_mtime_ns == mtime
    ans = again.answer(Q)
    assert ans.error is None and ans.trace.root.find("demonstrations")
