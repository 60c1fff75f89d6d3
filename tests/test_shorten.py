"""hopqa.methods.shorten: a short answer cut out of a reply that answers in a sentence (issue 33)."""

from __future__ import annotations

import pytest

from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.shorten import SHORTEN_PROMPT, in_reply, needs_shortening, shorten
from hopqa.trace import Trace


@pytest.mark.parametrize("answer, how, expected", [
    ("Ada Lovelace", "marker:answer is", False),
    ("Ada Lovelace founded the company in London in the year 1843", "marker:answer is", True),  # 11 words
    ("Ada Lovelace", "first-line", True),  # no marker: the first line may be anything
    ("", "empty", False),
])
def test_when_to_shorten(answer, how, expected):
    assert needs_shortening(answer, how) is expected


def test_in_reply_matches_whole_normalised_words():
    assert in_reply("the Eiffel Tower", "It is the Eiffel tower, in Paris.")
    assert in_reply("Paris", "It is the Eiffel tower, in Paris.")
    assert not in_reply("Pari", "It is in Paris.") and not in_reply("London", "It is in Paris.") and not in_reply("", "x")


def run(reply: str, question: str, sentence: str) -> tuple[str, Trace, ScriptedLLM]:
    llm = ScriptedLLM(replies=[reply])
    trace = Trace(question=question, method="test", config={})
    with trace.activate():
        out = shorten(llm, question, sentence, sentence)
    return out, trace, llm


def test_shorten_keeps_a_phrase_of_the_reply_and_refuses_one_made_up():
    sentence = "The film that won was directed by\n Steven Spielberg, an American."
    out, trace, llm = run("Steven Spielberg.\nmore text", "Who directed it?", sentence)
    assert out == "Steven Spielberg"
    (request,) = llm.requests
    assert request.text() == SHORTEN_PROMPT.format(question="Who directed it?", reply=" ".join(sentence.split()))
    assert request.max_tokens == 24 and request.temperature == 0.0
    (s,) = trace.root.find("shorten")
    assert s.outputs == {"phrase": "Steven Spielberg", "kept": "phrase"}
    out, trace, _ = run("George Lucas", "Who directed it?", sentence)  # not in the reply: the reply's answer stays
    assert out == sentence and trace.root.find("shorten")[0].outputs["kept"] == "answer"
    out, _, _ = run("", "Who directed it?", sentence)
    assert out == sentence
