"""Sentence embedders and entailment judges."""

from __future__ import annotations

import numpy as np
import pytest

from hopqa.embed import LexicalEmbedder, default_embedder
from hopqa.llm.scripted import ScriptedLLM
from hopqa.nli import LLMJudge, ScriptedJudge


def test_lexical_embedder_is_normalised_overlap():
    e = LexicalEmbedder()
    v = e.encode(["a b c", "a b c", "x y"])
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    assert e.similarity("Who directed Titanic", "who directed titanic") == pytest.approx(1.0)
    assert e.similarity("Who directed Titanic", "capital of France") == pytest.approx(0.0)


@pytest.mark.slow
def test_minilm_embedder_loads_offline():
    e = default_embedder()
    assert e.name == "all-MiniLM-L6-v2"
    assert e.encode(["x"]).shape == (1, 384)
    close = e.similarity("Who directed Titanic?", "Who is the director of Titanic?")
    far = e.similarity("Who directed Titanic?", "What is the capital of France?")
    assert close > 0.8 > 0.3 > far


def test_llm_judge_parses_and_memoizes():
    llm = ScriptedLLM(replies=["Yes.", "no", "maybe"])
    judge = LLMJudge(llm)
    assert judge.entails("Paris is in France.", "Paris is in Europe.") is True
    assert judge.entails("Paris is in France.", "Paris is in Europe.") is True  # memo: no second call
    assert judge.entails("a", "b") is False
    assert judge.entails("c", "d") is False and judge.memo.failures == 1
    assert len(llm.requests) == 3 and "Hypothesis: Paris is in Europe." in llm.requests[0].text()


def test_llm_judge_premise_cut_keeps_every_cited_passage():
    """No cut by default (the premise is what the method showed its model); with a cap, each
    line (one cited passage) is cut on its own, so the second passage of a two-citation
    statement is still read."""
    first = "Van Hook Township is a civil township in Mountrail County, North Dakota. " * 40  # 480 words
    second = "Stanley is the county seat of Mountrail County."
    llm = ScriptedLLM(replies=lambda r: "Yes")
    LLMJudge(llm).entails(f"{first}\n{second}", "Stanley is the seat.")
    assert f"{first}\n{second}" in llm.requests[-1].text()
    LLMJudge(llm, max_premise_words=300).entails(f"{first}\n{second}", "Stanley is the seat.")
    prompt = llm.requests[-1].text()
    assert second in prompt and first not in prompt and " ...\n" + second in prompt


def test_scripted_judge_records_calls():
    j = ScriptedJudge(lambda p, h: h in p)
    assert j.entails_many([("abc", "b"), ("abc", "z")]) == [True, False] and len(j.calls) == 2


@pytest.mark.slow
def test_llm_judge_on_embedded_model(smollm2):
    judge = LLMJudge(smollm2)
    value = judge.entails("Stanley is the county seat of Mountrail County.", "Stanley is a county seat.")
    assert isinstance(value, bool) and judge.memo.calls == 1
