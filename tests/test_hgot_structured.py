"""HGOT's structured steps (issue 16): Plan and Predict under a JSON schema, written back in the
paper's text form; their fallbacks; the paper's prompts byte for byte without a schema."""

from __future__ import annotations

import json

import pytest

from hopqa.llm.base import GENERATE, NATIVE_N, STRUCTURED
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.hgot import HGOT, HGOTConfig, parse_dependencies
from hopqa.methods.hgot.method import Scored, plan_from_json
from hopqa.methods.hgot.prompts import (
    CONTEXT_FORMAT,
    PLAN_JSON_EXAMPLE,
    PREDICT_DEMOS,
    PREDICT_INSTRUCTIONS,
    PREDICT_JSON_EXAMPLE,
    PREDICT_PROMPT,
    PREDICT_SCHEMA,
    plan_schema,
    render_statement,
)
from hopqa.methods.structured import json_reply
from hopqa.nli import ScriptedJudge
from hopqa.retrieval.pool import CandidatePool
from hopqa.text import render_passages
from hopqa.trace import PARSE_EVENT, Trace
from hopqa.types import Passage

POOL = CandidatePool([
    Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County."),
    Passage("b", "Stanley, North Dakota", "Stanley is the county seat of Mountrail County."),
    Passage("c", "Paris", "Paris is the capital of France."),
])
Q = "What is the seat of the county where Van Hook Township is located?"
WITH_SCHEMAS = {GENERATE, NATIVE_N, STRUCTURED}  # NATIVE_N: the samples in one request

PLAN_JSON = json.dumps({"steps": [{"question": "Which county is Van Hook Township in?", "depends_on": []},
                                  {"question": "What is the seat of that county?", "depends_on": [1]}]})
PLAN_TEXT = ("Step 1: Which county is Van Hook Township in? Step 2: What is the seat of that county?\n"
             "Dependencies: Step 2 depends on Step 1.")
# [9] names no passage (two are shown): dropped
PREDICT_JSON = json.dumps({"statements": [
    {"text": "Van Hook Township is in Mountrail County.", "citations": [1]},
    {"text": "Stanley is the county seat of Mountrail County", "citations": [2, 9]}], "answer": "Stanley"})
RATIONALE = "Van Hook Township is in Mountrail County [1]. Stanley is the county seat of Mountrail County [2]."


def reply(request) -> str:
    """JSON under a schema, the paper's free text otherwise (one script for every prompt)."""
    t, structured = request.text(), request.schema is not None
    tail = t[-600:]
    if t.startswith("Sketch a plan"):
        if "Question: " + Q in tail:
            return PLAN_JSON if structured else PLAN_TEXT
        sub = tail.split("Question: ")[-1].split("\n")[0]  # a sub-query restates itself
        return json.dumps({"steps": [{"question": sub, "depends_on": []}]}) if structured else "Step 1: " + sub
    if t.startswith("Highlight interdependencies"):
        return "Step 2 depends on Step 1."
    if t.startswith("Express the dependencies"):
        return "Step 1 -> Step 2"
    if t.startswith("Rewrite the last question"):
        return "What is the seat of Mountrail County?"
    if t.startswith("Answer questions with short factoid answers"):
        if "Question: Which county" in tail:
            return (json.dumps({"statements": [{"text": "Van Hook Township is in Mountrail County", "citations": [1]}],
                                "answer": "Mountrail County"}) if structured
                    else "Van Hook Township is in Mountrail County [1].\nAnswer: Mountrail County")
        return PREDICT_JSON if structured else "Stanley is the county seat of Mountrail County [1].\nAnswer: Stanley"
    raise AssertionError(t[:80])


def hgot(replies=reply, capabilities=WITH_SCHEMAS, **cfg) -> tuple[HGOT, ScriptedLLM]:
    from hopqa.embed import LexicalEmbedder

    llm = ScriptedLLM(replies=replies, capabilities=capabilities)
    config = HGOTConfig(samples=2, k=2, probe_k=2, depth=1).update(**cfg)
    judge = ScriptedJudge(lambda p, h: h.rstrip(".").split()[0] in p)  # the statement's first word is in the passage
    return HGOT(llm, POOL, config, judge=judge, embedder=LexicalEmbedder()), llm


def parses(step) -> list[tuple[str, str, str, bool]]:
    return [(e["field"], e["status"], e["how"], e["structured"]) for e in step.events if e["message"] == PARSE_EVENT]


def paper_predict_prompt(question: str, passages: list[Passage]) -> str:
    return PREDICT_PROMPT.format(instructions=PREDICT_INSTRUCTIONS, demos="\n\n---\n\n".join(PREDICT_DEMOS),
                                 context=render_passages(passages, max_words=None, **CONTEXT_FORMAT), question=question)


# -- (a) the structured path ---------------------------------------------------------------------------------
def test_structured_predict_sends_the_schema_and_writes_the_papers_rationale():
    method, llm = hgot(depth=0)
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    [request] = llm.requests
    assert request.schema_dict() == PREDICT_SCHEMA and request.n == 2 and request.max_tokens == 160 + 64
    cue = "Rationale: Let's think step by step."
    paper = paper_predict_prompt(Q, POOL.passages[:2])
    assert request.text() == paper[: -len(cue)] + json_reply(PREDICT_JSON_EXAMPLE) + "\n" + cue
    assert request.text().endswith(f"Question: {Q}\nReply with one JSON object of this form: "
                                   + json.dumps(PREDICT_JSON_EXAMPLE) + "\nRationale: Let's think step by step.")
    probe = ans.trace.root.find("probe")[0]
    samples = probe.outputs["samples"]
    assert [x["rationale"] for x in samples] == [RATIONALE, RATIONALE]
    assert samples[0]["statements"] == [{"text": "Van Hook Township is in Mountrail County.", "citations": [1]},
                                        {"text": "Stanley is the county seat of Mountrail County.", "citations": [2]}]
    # both statements are entailed by the passage they cite: REC = PREC = 1, ρ = 0.2 + 0.4 + 0.4
    assert [(x["rec"], x["prec"], x["rho"]) for x in samples] == [(1.0, 1.0, pytest.approx(1.0))] * 2
    assert probe.outputs["votes"] == {"Stanley": pytest.approx(2.0)} and probe.outputs["ci"] == 1.0
    assert any(e["message"] == "citation number(s) [9] outside the 2 passages shown: dropped from the structured "
               "rationale(s)" for e in probe.events)
    assert parses(probe) == [("answer", "direct", "json", True)] * 2
    assert ans.trace.parse_counts() == {"direct": 2, "fallback": 0, "failed": 0}


def test_structured_plan_with_and_without_context_renders_the_papers_plan():
    for sigma, context, with_context in [(0.9, [], False), (None, [Scored(POOL.passages[0], 1.0)], True)]:
        off, off_llm = hgot(structured="off", plan_context_sigma=sigma, self_reflect=False, formalize=False)
        method, llm = hgot(plan_context_sigma=sigma, self_reflect=False, formalize=False)
        trace = Trace(question=Q)
        with trace.activate():
            graph = method.plan(Q, context)
        with Trace().activate():
            off_graph = off.plan(Q, context)
        [request], [paper] = llm.requests, off_llm.requests
        assert request.schema_dict() == plan_schema(5) and paper.schema is None
        assert plan_schema(5)["properties"]["steps"]["maxItems"] == 5
        assert request.max_tokens == 200 + 64 and paper.max_tokens == 200
        assert request.text() == paper.text()[: -len("Plan:")] + json_reply(PLAN_JSON_EXAMPLE) + "\nPlan:"
        assert ("\nContext:\n[1] Van Hook Township | " in request.text()) is with_context
        plan = trace.root.find("plan")[0]
        assert plan.outputs["raw"] == PLAN_TEXT  # the JSON in the paper's text form
        assert plan.outputs["steps"] == ["Which county is Van Hook Township in?", "What is the seat of that county?"]
        assert plan.outputs["dependencies"] == "Step 2 depends on Step 1." and plan.outputs["edges"] == [[1, 2]]
        assert list(graph.edges) == list(off_graph.edges) == [(1, 2)]
        assert parses(plan) == [("plan", "direct", "json", True)]


def test_structured_traverse_feeds_self_reflect_and_stop_the_papers_text():
    method, llm = hgot()
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    schemas = [r.schema_dict() for r in llm.requests]
    kinds = [r.text().split(" ", 1)[0] for r in llm.requests]
    # Predict and Plan carry their schemas; Self-reflect, Formalize and Rewrite stay free text
    assert {k: s is not None for k, s in zip(kinds, schemas)} == {"Answer": True, "Sketch": True, "Highlight": False,
                                                                 "Express": False, "Rewrite": False}
    reflect = next(r for r in llm.requests if r.text().startswith("Highlight"))
    assert reflect.text().endswith("Plan:\nStep 1: Which county is Van Hook Township in? Step 2: What is the seat of "
                                   "that county?\nDependencies:")
    infer = ans.trace.root.find("infer")[0]
    assert [x["rationale"] for x in infer.outputs["samples"]] == [RATIONALE, RATIONALE]
    # four Predict calls of two samples, one Plan (the sub-queries stop at depth 1 without planning)
    assert ans.trace.parse_counts() == {"direct": 9, "fallback": 0, "failed": 0}


def test_plan_from_json_renumbers_and_leaves_bad_dependencies_to_the_graph_parser():
    obj = {"steps": [{"question": "  Who is\nA? ", "depends_on": [3]}, {"question": "", "depends_on": []},
                     {"question": "Who is B?", "depends_on": []},
                     {"question": "When did A meet B?", "depends_on": [1, 3, 3, True, 7]}]}
    draft = plan_from_json(obj, 5)
    assert draft is not None and draft.steps == ["Who is A?", "Who is B?", "When did A meet B?"]
    assert draft.dependencies == "Step 1 depends on Step 2. Step 3 depends on Step 1 and Step 2 and Step 7."
    assert draft.text == ("Step 1: Who is A? Step 2: Who is B? Step 3: When did A meet B?\nDependencies: "
                          + draft.dependencies)
    edges, notes = parse_dependencies(draft.dependencies, 3)
    assert edges == [(1, 3), (2, 3)]
    assert notes == ["Step 7 names a missing step: dropped",
                     "edge Step 2 -> Step 1 goes backwards: dropped (a step can only depend on lower steps)"]
    assert plan_from_json(obj, 2).steps == ["Who is A?", "Who is B?"]
    assert plan_from_json({"plan": "Step 1: Who?"}, 5) is None
    empty = plan_from_json({"steps": []}, 5)
    assert empty is not None and (empty.text, empty.steps, empty.dependencies) == ("", [], "")


@pytest.mark.parametrize("text, citations, sentence", [
    ("Stanley is the seat.", [2], "Stanley is the seat [2]."),
    ("Stanley is the seat", [1, 3], "Stanley is the seat [1][3]."),
    ("Stanley is the seat", [], "Stanley is the seat."),
    ("  ", [1], ""),
])
def test_render_statement(text, citations, sentence):
    assert render_statement(text, citations) == sentence


def test_markers_in_a_statement_text_move_to_its_citations():
    obj = {"statements": [{"text": "Stanley [2] is the seat [12].", "citations": [1, "x", False]}], "answer": "Stanley"}
    thought, dropped = HGOT.thought_from_json(obj, 3)
    assert thought.rationale == "Stanley is the seat [1][2]." and dropped == [12]
    assert [(s.text, s.citations) for s in thought.statements] == [("Stanley is the seat.", [1, 2])]
    assert HGOT.thought_from_json({"statements": "Stanley [1].", "answer": "Stanley"}, 3) is None
    # a JSON cut before its answer: the statements, no answer (missing_answer handles it)
    thought, _ = HGOT.thought_from_json({"statements": [{"text": "Stanley is the seat", "citations": [1]}]}, 3)
    assert (thought.rationale, thought.answer) == ("Stanley is the seat [1].", "")
    assert HGOT.thought_from_json({"statements": [], "answer": "The answer is: Stanley"}, 3)[0].answer == "Stanley"


def test_structured_bootstrap_candidates_are_in_the_papers_format():
    """hopqa.bootstrap reads a structured run's trace as a free-text one: the rationale written back
    passes the official format check."""
    from hopqa.bootstrap import candidates_from_trace
    from hopqa.methods.hgot.demos import official_rationale

    method, _ = hgot()
    ans = method.answer(Q)
    records = candidates_from_trace(ans.trace, {p.id: p for p in POOL.passages}, "official")
    predict, plan = (next(r for r in records if r["kind"] == k) for k in ("predict", "plan"))
    assert predict["rationale"] == RATIONALE and official_rationale(RATIONALE) is not None
    assert plan["steps"] == ["Which county is Van Hook Township in?", "What is the seat of that county?"]
    assert plan["dependencies"] == "Step 2 depends on Step 1."


# -- (b) the fallbacks ------------------------------------------------------------------------------------------
def test_free_text_under_the_schema_is_a_fallback():
    method, _ = hgot(depth=0, samples=1, replies=lambda r: "Stanley is the seat [2].\nAnswer: Stanley")
    ans = method.answer(Q)
    assert ans.answer == "Stanley"
    assert parses(ans.trace.root.find("probe")[0]) == [
        ("answer", "fallback", "'Answer:' label", True)]


def test_json_cut_after_its_answer_is_a_fallback():
    method, _ = hgot(depth=0, samples=1, replies=lambda r: '{"statements": [], "answer": "Stanley"')
    ans = method.answer(Q)
    assert ans.answer == "Stanley"
    assert parses(ans.trace.root.find("probe")[0]) == [("answer", "fallback", "JSON cut short, closed", True)]


def test_json_without_answers_follows_dsp_on_the_papers_prompt():
    """Both samples cut before their answer: DSP continues the first on the free-text prompt with
    its rationale written back (no schema), drops the second."""
    replies = iter(['{"statements": [{"text": "Stanley is the county seat", "citations": [2]}',
                    '{"statements": [{"text": "Minot is the seat", "citations": [1',
                    " Stanley\n\nmore"])
    method, llm = hgot(depth=0, replies=lambda r: next(replies))
    ans = method.answer(Q)
    assert ans.answer == "Stanley"
    first, follow = llm.requests
    assert first.schema is not None and follow.schema is None
    assert follow.text() == paper_predict_prompt(Q, POOL.passages[:2]) + " Stanley is the county seat [2].\nAnswer:"
    assert follow.max_tokens == 80 and follow.temperature == 0.0
    why = ""
    assert parses(ans.trace.root.find("probe")[0]) == [
        ("answer", "fallback", why + "missing_answer=dsp: continued greedily after 'Answer:'", True),
        ("answer", "failed", why + "no answer: dropped (DSP), only the first sample is continued", True)]
    assert ans.trace.parse_counts() == {"direct": 0, "fallback": 1, "failed": 1}


def test_an_empty_json_answer_is_dropped_when_another_sample_has_one():
    replies = iter(['{"statements": [], "answer": ""}', PREDICT_JSON])
    method, llm = hgot(depth=0, replies=lambda r: next(replies))
    ans = method.answer(Q)
    probe = ans.trace.root.find("probe")[0]
    assert ans.answer == "Stanley" and len(probe.outputs["samples"]) == 1 and len(llm.requests) == 1
    assert [p[1] for p in parses(probe)] == ["failed", "direct"]


@pytest.mark.parametrize("text, status, how, steps, edges", [
    ("I cannot make a plan.", "failed", "no JSON object; free text: no 'Step n:' in the plan: empty plan", [], []),
    ("Step 1: Who is A? Step 2: Who is B?\nDependencies: Step 2 depends on Step 1.", "fallback",
     "no JSON object; free text: Step n: headers", ["Who is A?", "Who is B?"], [[1, 2]]),
    ('{"steps": [{"question": "Who is A?", "depends_on": []}, {"question": "Who is B?", "depends_on": [1',
     "fallback", "JSON cut short, closed", ["Who is A?", "Who is B?"], [[1, 2]]),
])
def test_structured_plan_fallbacks(text, status, how, steps, edges):
    method, _ = hgot(replies=lambda r: text, self_reflect=False, formalize=False)
    trace = Trace(question=Q)
    with trace.activate():
        graph = method.plan(Q, [])
    plan = trace.root.find("plan")[0]
    assert plan.outputs["steps"] == steps and plan.outputs["edges"] == edges and graph.number_of_nodes() == len(steps)
    assert parses(plan) == [("plan", status, how, True)]


def test_an_unusable_plan_under_the_schema_stops_with_an_empty_plan():
    def replies(request):
        return "no plan" if request.text().startswith("Sketch") else PREDICT_JSON

    method, _ = hgot(replies=replies)
    ans = method.answer(Q)
    assert ans.answer == "Stanley" and not ans.trace.root.find("infer")
    assert ans.trace.root.find("stop")[0].outputs["reason"] == "empty plan"
    assert ans.trace.parse_counts() == {"direct": 2, "fallback": 0, "failed": 1}


# -- (c) no schema: the paper's prompts ----------------------------------------------------------------------------
def test_without_schemas_the_prompts_are_the_papers():
    runs = [hgot(structured="off"), hgot(capabilities={GENERATE, NATIVE_N})]  # off; auto on a backend without STRUCTURED
    texts = []
    for method, llm in runs:
        ans = method.answer(Q)
        assert ans.error is None and ans.answer == "Stanley"
        assert all(r.schema is None for r in llm.requests)
        assert llm.requests[0].text() == paper_predict_prompt(Q, POOL.passages[:2])
        assert not any("JSON" in r.text() for r in llm.requests)
        assert all(e["structured"] is False for s in ans.trace.root.walk() for e in s.events
                   if e["message"] == PARSE_EVENT)
        texts.append([(r.text(), r.max_tokens, r.stop) for r in llm.requests])
    assert texts[0] == texts[1]
    plan = next(t for t, _, _ in texts[0] if t.startswith("Sketch"))
    assert plan.endswith(f"Question: {Q}\nPlan:")


# -- (d) structured=on without the capability ---------------------------------------------------------------------
def test_structured_on_needs_a_backend_with_schemas():
    method, llm = hgot(structured="on", capabilities={GENERATE, NATIVE_N})
    ans = method.answer(Q)
    assert ans.answer == "" and ans.error is not None and ans.error.startswith("UnsupportedCapability")
    assert "HGOT predict" in ans.error and "structured=auto or off" in ans.error
    assert llm.requests == []


def test_the_instructions_example_answer_copied_back_is_no_answer():
    """Qwen2.5-1.5B on HotpotQA wrote the JSON instruction's placeholder as a sample's answer: it
    is read as no answer (dropped beside a sample with one, as an empty answer is), and noted."""
    copied = json.dumps({"statements": [{"text": "Stanley is the county seat", "citations": [2]}],
                         "answer": "A short factoid answer, often between 1 and 5 words."})
    replies = iter([copied, PREDICT_JSON])
    method, llm = hgot(depth=0, replies=lambda r: next(replies))
    ans = method.answer(Q)
    probe = ans.trace.root.find("probe")[0]
    assert ans.answer == "Stanley" and probe.outputs["votes"].keys() == {"Stanley"}
    assert [p[1] for p in parses(probe)] == ["failed", "direct"]
    assert any("copied the JSON instruction's example" in e["message"] for e in probe.events)
    assert PREDICT_JSON_EXAMPLE["answer"] in json_reply(PREDICT_JSON_EXAMPLE)  # the text the model saw


def test_an_answer_naming_the_instructions_placeholder_is_no_answer():
    """SmolLM2-135M's variants of the placeholder (another number of words, words before or after
    it) are no answer either; an answer that only shares a word with it stays."""
    from hopqa.methods.hgot.method import copies_the_example

    for copy in ("A short factoid answer, often between 1 and 3 words", "a short factoid answer, but more often",
                 "an example of a short factoid answer", "The statement is a short factoid answer.",
                 "a short factoid answer"):
        assert copies_the_example(copy), copy
    for real in ("Stanley", "a short answer", "factoid answer", "Short Factoid (album)", ""):
        assert not copies_the_example(real), real


def _plan_of(plan_reply: str):
    """The plan step and graph HGOT makes of ``plan_reply`` as the reply to its Plan prompt for ``Q``."""
    def replies(request):
        if request.text().startswith("Sketch a plan") and "Question: " + Q in request.text()[-600:]:
            return plan_reply
        return reply(request)

    method, _ = hgot(replies=replies, self_reflect=False, formalize=False)
    trace = Trace(question=Q)
    with trace.activate():
        graph = method.plan(Q, [])
    return trace.root.find("plan")[0], graph


def test_a_plan_step_copying_the_instructions_example_is_dropped():
    """Qwen2.5-1.5B wrote the JSON instruction's own "Step 2 as a standalone search question?" as a
    step (4 of 105 plan steps): it is dropped like an empty step, later numbers renumbered, and noted."""
    example = PLAN_JSON_EXAMPLE["steps"][1]["question"]
    obj = {"steps": [{"question": "Who is the father of Sean Covey?", "depends_on": []},
                     {"question": example.lower().rstrip("?"), "depends_on": [1]},
                     {"question": "What did he write?", "depends_on": [1, 2]}]}
    draft = plan_from_json(obj, 5)
    assert draft.steps == ["Who is the father of Sean Covey?", "What did he write?"] and draft.copied == 1
    assert draft.dependencies == "Step 2 depends on Step 1."
    assert plan_from_json({"steps": [{"question": "Who is A?"}]}, 5).copied == 0

    plan, graph = _plan_of(json.dumps({"steps": [
        {"question": "Which county is Van Hook Township in?", "depends_on": []}, {"question": example, "depends_on": [1]}]}))
    assert plan.outputs["steps"] == ["Which county is Van Hook Township in?"] and graph.number_of_nodes() == 1
    assert any("copied the instruction's example" in e["message"] for e in plan.events)
    assert [p[1] for p in parses(plan)] == ["direct"]  # one step of the model's own: a plan


def test_a_plan_of_copied_example_steps_alone_is_a_failed_parse():
    """SmolLM2-135M wrote the JSON instruction's two example steps as every plan (20 of 20
    MuSiQue questions): both dropped, the plan is empty (STOP), and its parse is ``failed``, not
    ``direct``."""
    plan, graph = _plan_of(json.dumps({"steps": PLAN_JSON_EXAMPLE["steps"]}))
    assert graph.number_of_nodes() == 0 and plan.outputs["steps"] == []
    assert [p[1] for p in parses(plan)] == ["failed"]
    assert any("copied the instruction's example" in e["message"] for e in plan.events)
