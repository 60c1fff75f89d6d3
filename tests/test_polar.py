"""hopqa.methods.polar: a yes / no question's answer held to yes or no (issue 33, draft)."""

from __future__ import annotations

import pytest

from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.choice import CHOICE_PASSAGES
from hopqa.methods.polar import POLAR_PROMPT, hold_to_polar, is_polar, yes_no
from hopqa.trace import Trace
from hopqa.types import Passage


@pytest.mark.parametrize("question, expected", [
    ("Are the directors of films Red Sky and Blue Sea both from the same country?", True),
    ("Is Lyon the capital of France?", True),
    ("  did Ada Lovelace and Charles Babbage meet?", True),
    ("Were both bands formed in Ohio?", True),
    ("Has the river a delta?", True),
    # a choice between two named candidates is not yes / no (choice holds it)
    ("Was Ada Lovelace or Charles Babbage born first?", False),
    # wh-questions, a question opening on another word, and an empty one
    ("Which film came out first, Red Sky or Blue Sea?", False),
    ("Where was the director of Red Sky born?", False),
    ("Island of Capri: is it in Italy?", False),
    ("Isabella Bird was born where?", False),  # "Isabella" is not "is"
    ("", False),
    ("?", False),
])
def test_is_polar(question, expected):
    assert is_polar(question) is expected


@pytest.mark.parametrize("answer, expected", [
    ("Yes", "yes"), ("yes.", "yes"), ("Yes, both are American.", "yes"), ("**No**", "no"), ("TRUE", "yes"),
    ("false", "no"), ("\"No\"", "no"), ("no, they are not", "no"),
    ("Italian", None), ("Nobody", None), ("Yesterday", None), ("", None), ("The answer is yes", None),
    ("1942", None),
])
def test_yes_no(answer, expected):
    assert yes_no(answer) == expected


def passages(n: int) -> list[Passage]:
    return [Passage(id=f"p{i}", title=f"Film {i}", text=f"Film {i} was directed by Person {i} of Italy.")
            for i in range(n)]


def hold(replies: list[str], question: str, answer: str, given: list[Passage]) -> tuple[str, Trace, ScriptedLLM]:
    llm = ScriptedLLM(replies=replies)
    trace = Trace(question=question, method="test", config={})
    with trace.activate():
        out = hold_to_polar(llm, question, answer, given, max_words=5)
    return out, trace, llm


QUESTION = "Are the directors of Film 1 and Film 2 both from the same country?"


def test_a_question_that_is_not_yes_no_is_left_alone():
    out, trace, llm = hold([], "Where was Person 1 born?", "Italian", passages(3))
    assert out == "Italian" and llm.requests == [] and trace.root.children == []


def test_an_answer_saying_yes_or_no_needs_no_call():
    out, trace, llm = hold([], QUESTION, "Yes, both are Italian.", passages(3))
    assert out == "yes" and llm.requests == []
    (s,) = trace.root.children
    assert s.kind == "polar" and s.outputs == {"kept": "yes", "how": "read"}


def test_an_answer_with_a_value_asks_once_with_the_passages():
    out, trace, llm = hold(["Yes.\nBoth directors are Italian."], QUESTION, "Italian", passages(CHOICE_PASSAGES + 3))
    assert out == "yes"
    (request,) = llm.requests
    shown = "\n\n".join(f"[{i + 1}] Film {i} | Film {i} was directed by ..." for i in range(CHOICE_PASSAGES))
    assert request.prompt == POLAR_PROMPT.format(passages=shown, question=QUESTION)
    assert request.max_tokens > 0 and request.temperature == 0.0 and tuple(request.stop) == ("\n",)
    (s,) = trace.root.children
    assert s.outputs["how"] == "asked" and s.outputs["reply"] == "Yes" and s.outputs["kept"] == "yes"
    assert s.outputs["passages"] == [f"p{i}" for i in range(CHOICE_PASSAGES)]


def test_a_reply_saying_neither_keeps_the_answer_and_is_noted():
    out, trace, _ = hold(["Italian"], QUESTION, "Italian", passages(2))
    assert out == "Italian"
    (s,) = trace.root.children
    assert s.outputs["kept"] == "Italian" and s.outputs["how"] == "asked"
    assert any("neither" in e["message"] for e in s.events)
