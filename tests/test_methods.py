"""The first methods: control flow with a scripted LLM, then end to end on the real model."""

from __future__ import annotations

import pytest

from hopqa.build import build_method
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods import METHODS, get_method_class
from hopqa.methods.base import MethodError
from hopqa.retrieval.pool import CandidatePool
from hopqa.types import Passage

POOL = [
    Passage("a", "Titanic (1997 film)", "Titanic is a 1997 film directed by James Cameron. It won Best Picture."),
    Passage("b", "James Cameron", "James Cameron is a Canadian filmmaker born in 1954."),
    Passage("c", "Paris", "Paris is the capital of France."),
]
QUESTION = "Who directed the film that won Best Picture at the 1998 Oscars?"


def test_registry_names_and_aliases():
    assert {"direct", "cot", "retrieve-then-read", "genread"} <= set(METHODS)
    assert get_method_class("retrieve_then_read") is get_method_class("Retrieve-Then-Read")
    with pytest.raises(MethodError) as e:
        get_method_class("nope")
    assert "available" in str(e.value)


def test_unknown_option_is_an_error():
    with pytest.raises(MethodError):
        build_method("direct", ScriptedLLM(replies=[]), k=3)


@pytest.mark.parametrize("question", ["", "   ", "x" * 5000])
def test_bad_questions_are_errors_not_crashes(question):
    ans = build_method("direct", ScriptedLLM(replies=[])).answer(question)
    assert ans.error and ans.answer == "" and ans.usage.llm_calls == 0


def test_direct_parses_and_traces():
    llm = ScriptedLLM(replies=["James Cameron.\nExtra"])
    ans = build_method("direct", llm).answer(QUESTION)
    assert ans.answer == "James Cameron" and ans.error is None
    gen = ans.trace.root.find("generate")[0]
    assert gen.outputs["parsed_by"] == "first-line" and gen.llm_calls[0]["outputs"] == ["James Cameron.\nExtra"]
    assert ans.usage.llm_calls == 1 and ans.usage.retrieval_calls == 0


def test_cot_records_fallback_when_marker_missing():
    ans = build_method("cot", ScriptedLLM(replies=["Titanic won. Cameron directed it."])).answer(QUESTION)
    assert ans.answer == "Titanic won. Cameron directed it"
    assert ans.trace.root.find("reason")[0].events


def test_cot_marker():
    ans = build_method("cot", ScriptedLLM(replies=["Titanic won.\nSo the answer is: James Cameron."])).answer(QUESTION)
    assert ans.answer == "James Cameron"


def test_retrieve_then_read_uses_pool_and_k():
    llm = ScriptedLLM(replies=["James Cameron"])
    ans = build_method("retrieve-then-read", llm, CandidatePool(POOL), k=2).answer(QUESTION)
    assert ans.answer == "James Cameron" and len(ans.passages) == 2
    assert ans.passages[0].id == "a"
    prompt = llm.requests[0].text()
    assert "[1] Titanic (1997 film) | Titanic is a 1997 film" in prompt and "[3]" not in prompt
    assert ans.usage.retrieval_calls == 1
    assert ans.trace.root.find("retrieve")[0].retrievals[0]["passages"][0]["id"] == "a"


@pytest.mark.parametrize("reply, answer", [
    ("James" + " " * 60_000 + "Cameron", "James Cameron"),
    ("\n" * 60_000 + "So the answer is:" + " " * 60_000 + "James Cameron.", "James Cameron"),
    ("Titanic (1997 film)" + "\t " * 30_000, "Titanic (1997 film)"),
])
def test_retrieve_then_read_is_fast_on_a_huge_whitespace_reply(reply, answer):
    """Issue 13: a 30 KB whitespace reply made one retrieve-then-read take 17 s (quadratic
    regular expressions in the answer parser). max_tokens is raised so that the LLM layer's
    reply cap lets the whole reply reach the parser."""
    method = build_method("retrieve-then-read", ScriptedLLM(replies=[reply]), CandidatePool(POOL), max_tokens=8192)
    ans = method.answer(QUESTION)
    assert ans.error is None and ans.answer == answer
    assert ans.usage.seconds < 2.0, ans.usage.seconds


def test_per_question_retriever_overrides_default():
    llm = ScriptedLLM(replies=["x", "y"])
    m = build_method("retrieve-then-read", llm, CandidatePool(POOL[2:]), k=1)
    assert m.answer(QUESTION).passages[0].id == "c"
    assert m.with_retriever(CandidatePool(POOL[:1])).answer(QUESTION).passages[0].id == "a"


def test_retrieve_then_read_without_retriever_is_an_error():
    ans = build_method("retrieve-then-read", ScriptedLLM(replies=[])).answer(QUESTION)
    assert "built without a retriever" in ans.error  # recorded in the answer, not raised
    with pytest.raises(MethodError, match="needs a retriever"):  # built directly, it cannot be made without one
        get_method_class("retrieve-then-read")(ScriptedLLM(replies=[]), None)


def test_genread_generates_then_reads():
    llm = ScriptedLLM(replies=["Titanic (1997) was directed by James Cameron.", " James Cameron."])
    ans = build_method("genread", llm).answer(QUESTION)
    assert ans.answer == "James Cameron"
    assert ans.passages[0].text.startswith("Titanic (1997)")
    assert llm.requests[1].text().startswith("Refer to the passage below")
    assert "Passage: Titanic (1997)" in llm.requests[1].text()


def test_genread_n_documents():
    llm = ScriptedLLM(replies=["doc one", "doc two", "doc three", "X"])
    ans = build_method("genread", llm, n_documents=3).answer(QUESTION)
    assert len(ans.passages) == 3 and "[2] doc two" in llm.requests[-1].text()


def test_genread_reads_an_empty_reply_as_an_empty_answer_not_its_cue():
    """The reader puts "The answer is" back in front of a reply; an empty reply stays empty."""
    for empty in ("", "  \n"):
        ans = build_method("genread", ScriptedLLM(replies=["Titanic (1997) was directed by James Cameron.", empty])
                           ).answer(QUESTION)
        assert ans.answer == "" and ans.error is None
        assert ans.trace.root.find("read")[0].outputs["parsed_by"] == "empty"


def test_model_error_is_recorded_not_raised():
    def boom(request):
        raise RuntimeError("server went away")

    ans = build_method("direct", ScriptedLLM(replies=boom)).answer(QUESTION)
    assert ans.error == "RuntimeError: server went away"
    assert ans.trace.root.find("generate")[0].error


# -- the real thing ------------------------------------------------------------------------------
REAL_METHODS = ["direct", "cot", "retrieve-then-read", "genread"]


@pytest.mark.slow
@pytest.mark.parametrize("name", REAL_METHODS)
def test_method_end_to_end_on_embedded_model_and_demo_index(name, smollm2, demo_index):
    method = build_method(name, smollm2, demo_index)
    ans = method.answer("What is the seat of the county where Van Hook Township is located?")
    assert ans.error is None, ans.error
    assert ans.answer.strip()
    assert ans.usage.llm_calls >= 1 and ans.usage.prompt_tokens > 0 and ans.usage.completion_tokens > 0
    calls = ans.trace.llm_calls()
    assert calls and all(c["outputs"][0] is not None for c in calls)
    if "retriever" in get_method_class(name).components:
        assert ans.passages and ans.usage.retrieval_calls == 1
        assert any("Van Hook" in p.text or "Mountrail" in p.text for p in ans.passages)


@pytest.mark.slow
def test_distractor_pool_with_real_model(smollm2, data_dir):
    from hopqa.datasets import load_dataset

    ex = load_dataset("musique", "dev", data_dir=data_dir, limit=1)[0]
    ans = build_method("retrieve-then-read", smollm2, k=4).with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
    assert ans.error is None and len(ans.passages) == 4
    assert {p.id for p in ans.passages} <= {p.id for p in ex.paragraphs}
