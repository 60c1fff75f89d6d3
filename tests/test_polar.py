"""hopqa.methods.polar: a yes / no question's answer held to yes or no (issue 33)."""

from __future__ import annotations

import pytest

from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.choice import CHOICE_PASSAGES
from hopqa.methods.polar import (
    HINTS,
    POLAR_PROMPT,
    SAME_PROMPT,
    hold_to_polar,
    is_polar,
    same_pair,
    same_value,
    value_of,
    yes_no,
)
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
    # an alternative question asks which, whether or not choice finds its candidates; a title's "Or" is no "or"
    ("Is Rutgers University or Brown University public?", False),
    ("Could the river or the canal carry barges?", False),
    ("Are the directors of films Kill Or Be Killed and Red Sky from the same country?", True),
    ("Can penguins fly?", True),
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


@pytest.mark.parametrize("question, expected", [
    ("Were Joe Gallivan and John Loone from the same country?", ("Joe Gallivan", "John Loone", "country")),
    ("Are both villages, Stanari and Krasnoye, Prokhorovsky District, Belgorod Oblast, located in the same country?",
     ("Stanari", "Krasnoye, Prokhorovsky District, Belgorod Oblast", "country")),
    ("Do both films Kraurya and Penniless Hearts have the directors that share the same nationality?",
     ("films Kraurya", "Penniless Hearts", "nationality")),
    ("Are both director of film Sacro Gra and director of film Das Boot from the same country?",
     ("director of film Sacro Gra", "director of film Das Boot", "country")),
    ("Were Tomé Varela Da Silva and Wolfgang Smith of the same nationality?",
     ("Tomé Varela Da Silva", "Wolfgang Smith", "nationality")),
    ("Does Rafael Novoa (Actor) have the same nationality as Gayleen Aiken?",
     ("Rafael Novoa (Actor)", "Gayleen Aiken", "nationality")),
    ("Are both Mehdiabad, Hormozgan and Ab Garmu, Kohgiluyeh And Boyer-Ahmad located in the same country?",
     ("Mehdiabad, Hormozgan", "Ab Garmu, Kohgiluyeh And Boyer-Ahmad", "country")),
    ("Are Marian Gold and Jung Eun-ji members of the same band?", ("Marian Gold", "Jung Eun-ji", "band")),
    ("Do the movies Watchers Of The Sky and The Mystery Of The Hooded Horsemen, originate from the same country?",
     ("the movies Watchers Of The Sky", "The Mystery Of The Hooded Horsemen", "country")),
    ("Are director of film Mazhakaaru and director of film Change (Film) both from the same country?",
     ("director of film Mazhakaaru", "director of film Change (Film)", "country")),
    ("Do both films Krasue Valentine and Hiawatha (1913 film) have the directors from the same country?",
     ("films Krasue Valentine", "Hiawatha (1913 film)", "country")),
    # not a comparison of two: no "same", two "and"s before it, no "and", not yes / no
    ("Are Christopher Nolan and Sathish Kalathil both film directors?", None),
    ("Are Tom and Jerry and Mickey from the same country?", None),
    ("Is the river in the same country?", None),
    ("Which film has the same director as Red Sky?", None),
])
def test_same_pair(question, expected):
    assert same_pair(question) == expected


@pytest.mark.parametrize("line, expected", [
    ("Italy", "italy"), ("the United States.", "united states"), ("unknown", None), ("Unknown (not stated)", None),
    ("(film): United States", "united states"), ("U.S. (born in Ohio). He", "us"),
    ("", None), ("Not mentioned in the passages", None), ("N/A", None),
])
def test_value_of(line, expected):
    assert value_of(line) == expected


@pytest.mark.parametrize("a, b, expected", [
    ("united states", "united states of america", True), ("italy", "italy", True), ("italy", "france", False),
    ("rome italy", "italy", True), ("germany", "east germany", True), ("india", "indonesia", False),
])
def test_same_value(a, b, expected):
    assert same_value(a, b) is expected


def passages(n: int) -> list[Passage]:
    return [Passage(id=f"p{i}", title=f"Film {i}", text=f"Film {i} was directed by Person {i} of Italy.")
            for i in range(n)]


def hold(replies: list[str], question: str, answer: str, given: list[Passage]) -> tuple[str, Trace, ScriptedLLM]:
    llm = ScriptedLLM(replies=replies)
    trace = Trace(question=question, method="test", config={})
    with trace.activate():
        out = hold_to_polar(llm, question, answer, given, max_words=5)
    return out, trace, llm


QUESTION = "Is the director of Film 1 an Italian?"
SAME = "Are the directors of Film 1 and Film 2 both from the same country?"


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


def test_two_values_are_written_and_compared_in_code_over_the_readers_yes():
    """A "same country" question: one call writes both values; they differ, so the answer is no,
    whatever the reader said (the model leans yes)."""
    out, trace, llm = hold(["Film 1: Italy\nFilm 2: United States"], SAME, "Yes, both are Italian.", passages(3))
    assert out == "no"
    (request,) = llm.requests
    shown = "\n\n".join(f"[{i + 1}] Film {i} | Film {i} was directed by ..." for i in range(3))
    assert request.prompt == SAME_PROMPT.format(passages=shown, question=SAME, first="the directors of Film 1",
                                                second="Film 2", what="country", hint=HINTS["country"])
    assert tuple(request.stop) == ("\n\n",) and request.temperature == 0.0
    (s,) = trace.root.children
    assert s.outputs["how"] == "compared" and s.outputs["kept"] == "no"
    assert s.outputs["values"] == ["italy", "united states"] and s.outputs["pair"] == ["the directors of Film 1",
                                                                                        "Film 2"]


def test_the_same_value_is_yes_and_a_nationality_is_asked_as_a_country():
    question = "Do Ada Lovelace and Charles Babbage share the same nationality?"
    out, trace, llm = hold(["Ada Lovelace: United Kingdom\nCharles Babbage: the United Kingdom."], question, "No",
                           passages(2))
    assert out == "yes"
    assert "Write the country of each of the two (the country's name, as France, not French)," in llm.requests[0].prompt
    assert trace.root.children[0].outputs["what"] == "country"


def test_an_unknown_value_falls_back_to_reading_the_answer():
    out, trace, llm = hold(["Film 1: Italy\nFilm 2: unknown"], SAME, "Yes, both are Italian.", passages(2))
    assert out == "yes" and len(llm.requests) == 1
    (s,) = trace.root.children
    assert s.outputs["how"] == "read" and s.outputs["values"] == ["italy", None]
    assert any("no value" in e["message"] for e in s.events)


def test_a_reply_saying_neither_keeps_the_answer_and_is_noted():
    out, trace, _ = hold(["Italian"], QUESTION, "Italian", passages(2))
    assert out == "Italian"
    (s,) = trace.root.children
    assert s.outputs["kept"] == "Italian" and s.outputs["how"] == "asked"
    assert any("neither" in e["message"] for e in s.events)


# -- the option in the seed methods ---------------------------------------------------------------------------
class _Scores:
    """A reranker scoring passages by a fixed table."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def score(self, query, passages):
        return [self.scores.get(p.id, 0.0) for p in passages]


def _built(name: str, llm: ScriptedLLM, read: list[Passage], polar: bool):
    """``name`` built with ``polar``, its own work replaced by the answer "Italian" read from
    ``read`` (LeapQuery and Tree of Reviews: their reader, scripted), so that only what follows runs."""
    from types import SimpleNamespace

    from hopqa.build import build_method
    from hopqa.retrieval.pool import CandidatePool
    from tests.scripted_retriever import ScriptedRetriever

    if name == "leapquery":
        retriever = ScriptedRetriever({QUESTION: "01"}, {p.id[1:]: p for p in read})
        return build_method(name, llm, retriever, reranker=_Scores({"p0": 1.0, "p1": 0.5}), k=2, polar=polar)
    if name == "tor":
        retriever = ScriptedRetriever({QUESTION: "01"}, {p.id[1:]: p for p in read})
        return build_method(name, llm, retriever, shots=1, widths="2", depth=1, polar=polar)
    method = build_method(name, llm, CandidatePool(read), polar=polar)
    if name == "self-dc":
        method.solve = lambda q, depth: ("Italian", read)
    elif name == "gensco-stop":
        method.select = lambda q, candidates: (read, None)
        method.read = lambda q, context: ("Italian", "Italian", "direct")
    else:  # hgot: the root node's final Predict
        method.traverse = lambda q, depth: SimpleNamespace(answer="Italian",
                                                           context=[SimpleNamespace(passage=p) for p in read])
    return method


def _reply(request) -> str:
    """Yes for the polar prompt; for everything else a seed method asks, "Italian" or nothing."""
    prompt = request.text()
    if prompt.endswith("answer the question with yes or no, nothing else.\nAnswer:"):
        return "Yes"
    if prompt.endswith("Missing facts as questions:"):  # LeapQuery's gap list: none
        return "None"
    if prompt.startswith("Instruction:I will give you a query"):  # ToR's review: an accepted paragraph
        return "- Judgment: [SUPPORTED]\n- Answer: Italian"
    return "The answer is Italian."


@pytest.mark.parametrize("name", ["hgot", "self-dc", "gensco-stop", "leapquery", "tor"])
@pytest.mark.parametrize("polar", [True, False])
def test_the_seed_methods_hold_a_yes_no_answer_to_yes_or_no(name, polar):
    """``polar`` (off by default, in no preset) in each seed method: a yes / no question's final
    answer goes through ``hold_to_polar`` over the passages it was read from; a value ("Italian")
    is asked once more for yes or no; off, the answer is the method's."""
    from hopqa.methods.base import method_config

    read = [Passage(id=f"p{i}", title=f"Film {i}", text=f"Film {i} was directed by Person {i} of Italy.")
            for i in range(2)]
    llm = ScriptedLLM(_reply, scorer=lambda context, text: [-1.0])
    ans = _built(name, llm, read, polar).answer(QUESTION)
    assert ans.error is None, ans.error
    steps = ans.trace.root.find("polar")
    assert len(steps) == polar
    asked = [r for r in llm.requests if r.text().endswith("with yes or no, nothing else.\nAnswer:")]
    assert len(asked) == polar
    assert not method_config(name).polar and not method_config(name, preset="small-model").polar
    if not polar:
        assert ans.answer != "yes"
        return
    assert ans.answer == "yes" and steps[0].inputs["answer"] != "yes"
    assert steps[0].outputs["how"] == "asked" and set(steps[0].outputs["passages"]) <= {"p0", "p1"}
    assert "Film 0 was directed by Person 0 of Italy." in asked[0].text()


@pytest.mark.slow
def test_polar_on_the_real_model_and_a_real_yes_no_question(smollm2, data_dir):
    """LeapQuery's small-model preset with ``polar`` on SmolLM2, on the first yes / no question of
    the shipped 2WikiMultihopQA dev subset (its gold paragraphs and distractors): the answer is
    held to yes or no, recorded as a ``polar`` step, and is what that step kept; a "same country"
    question has its two values written and compared first."""
    from hopqa.build import build_method
    from hopqa.datasets import load_dataset
    from hopqa.retrieval.pool import CandidatePool

    ex = next(e for e in load_dataset("2wikimultihopqa", "dev", data_dir=data_dir, limit=60) if is_polar(e.question))
    method = build_method("leapquery", smollm2, CandidatePool(ex.paragraphs), preset="small-model", polar=True,
                          votes=1, max_iter=1)
    ans = method.answer(ex.question)
    assert ans.error is None, ans.error
    (polar,) = ans.trace.root.find("polar")
    (read,) = ans.trace.root.find("read")
    assert polar.inputs == {"answer": read.outputs["answer"]}
    assert ans.answer == polar.outputs["kept"]
    if same_pair(ex.question) is not None:  # "the same country": both values written, compared in code
        assert "Write the" in polar.llm_calls[0]["prompt"] and polar.outputs["values"]
    if polar.outputs["how"] == "compared":
        assert len(polar.llm_calls) == 1 and ans.answer == ("yes" if same_value(*polar.outputs["values"]) else "no")
    elif polar.outputs["how"] == "read":  # the reader said yes or no itself
        assert ans.answer in ("yes", "no")
    else:  # one call, over the top-k, whose reply decides unless it says neither
        assert polar.outputs["how"] == "asked"
        assert "with yes or no" in polar.llm_calls[-1]["prompt"]
        assert ans.answer in ("yes", "no") or ans.answer == read.outputs["answer"]
