"""hopqa.methods.choice: a "which of A or B" answer held to the question's candidates (issue 33)."""

from __future__ import annotations

import pytest

from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.choice import (
    CHOICE_PASSAGES,
    DATES_PROMPT,
    candidates,
    date_direction,
    earlier_of,
    hold_to_choice,
    named,
    parse_date,
    value_lines,
)
from hopqa.trace import Trace
from hopqa.types import Passage


@pytest.mark.parametrize("question, expected", [
    ("Which film came out first, Blind Shaft or The Mask Of Fu Manchu?", ("Blind Shaft", "The Mask Of Fu Manchu")),
    # a candidate holding a comma, and one ending on its own question mark
    ("Which film has the director born earlier, The Adventures Of Priscilla, Queen Of The Desert or Harvest: 3,000 "
     "Years?", ("The Adventures Of Priscilla, Queen Of The Desert", "Harvest: 3,000 Years")),
    ("Which film has the director who died later, What Will You Do When You Catch Me? or School On Fire?",
     ("What Will You Do When You Catch Me?", "School On Fire")),
    ("Who is older,  Ada   Lovelace or Charles Babbage ?", ("Ada Lovelace", "Charles Babbage")),
    ("Which band, Letters to Cleo or Screaming Trees, had more members?", ("Letters to Cleo", "Screaming Trees")),
    ("Who was born first out of Martin Hodge and Ivania Martinich?", ("Martin Hodge", "Ivania Martinich")),
    ("Which came first between the Eiffel Tower and the Statue of Liberty?",
     ("the Eiffel Tower", "the Statue of Liberty")),
    ("Between Iain Banks and Irwin Shaw, which writer was born first?", ("Iain Banks", "Irwin Shaw")),
    # a question opening on its verb: the second candidate is the run of name words after "or"
    ("Was Diego Lugano or John R. Gunn born first?", ("Diego Lugano", "John R. Gunn")),
    ("Was Ian Brennan (Footballer) or Jagnandan Singh born first?", ("Ian Brennan (Footballer)", "Jagnandan Singh")),
    ("Was Gone with the Wind or The Wizard of Oz released first?", ("Gone with the Wind", "The Wizard of Oz")),
    ("Did Ada Lovelace or Charles Babbage have more children?", ("Ada Lovelace", "Charles Babbage")),
    # a wh-head ending on its word of comparison, the names after it with no comma
    ("Which band was formed first The Exies or Circus Diablo ?", ("The Exies", "Circus Diablo")),
    ("Which was released first: Up or Cars?", ("Up", "Cars")),
    # no candidates: a yes / no question, a bridge question, three choices, no wh-head
    ("Are Local H and For Against both from the United States?", None),
    ("What is the place of birth of the director of film Boden's Boy?", None),
    ("Which university is older, Harvard or Yale or Princeton?", None),
    ("In 1990, did Ada or Charles win?", None),
    ("What is the fight song of the university in Lawrence, Kansas and in Kansas City?", None),
    ("Who was born first out of Ann and Bob and Carl?", None),
    ("Between 1990 and 2000, the band toured.", None),
    # opening on its verb without a word of comparison after the names, or with two "or"s
    ("Did Ada or Charles win?", None),
    ("Is Paris or London the capital of France?", None),
    ("Was Ada or Bob or Carl born first?", None),
    ("Was the author or the editor born first?", None),
    # no comma, and what follows the word of comparison is not two names
    ("Which came first the forming of The Dandy Warhols or the birth of Robert Young?", None),
    ("Which is older than Paris or London?", None),
    # "between" / "out of" without a word of comparison: no choice is asked for
    ("Which river forms the border between France and Germany?", None),
    ("What is the distance between Paris and London?", None),
    ("Between Iain Banks and Irwin Shaw, which writer wrote Espedair Street?", None),
    ("", None),
])
def test_candidates_are_read_off_the_question(question, expected):
    assert candidates(question) == expected


def test_named_is_the_one_candidate_the_answer_names():
    pair = ("The Adventures Of Priscilla, Queen Of The Desert", "Harvest: 3,000 Years")
    assert named("Harvest: 3,000 Years.", pair) == pair[1]
    assert named("Priscilla, Queen of the Desert", pair) == pair[0]  # a part of the candidate
    assert named("the film Harvest: 3,000 Years", pair) == pair[1]  # the candidate inside the answer
    assert named("Stephan Elliott", pair) is None  # the director: neither
    assert named("", pair) is None
    assert named("Anna", ("Anna Smith", "Anna Jones")) is None  # both: ambiguous


@pytest.mark.parametrize("text, expected", [
    ("October 6, 1988", (1988, 10, 6)),
    (" born on 6 October 1988.", (1988, 10, 6)),
    ("Feb. 27th, 1975 (aged 40)", (1975, 2, 27)),
    ("May 1990", (1990, 5, 0)),
    ("1927 (death of its director)", (1927, 0, 0)),
    ("in 1988, he moved", (1988, 0, 0)),
    ("the 1980s", (1980, 0, 0)),
    ("unknown", None),
    ("3,000 Years", None),  # not a year: inside a number
    ("120 minutes", None),
    ("12000 people", None),
    ("", None),
])
def test_parse_date(text, expected):
    assert parse_date(text) == expected


def test_earlier_of_compares_at_the_precision_both_give():
    assert earlier_of((1975, 2, 27), (1988, 10, 6)) == 0 and earlier_of((1988, 11, 1), (1988, 10, 6)) == 1
    assert earlier_of((1988, 10, 5), (1988, 10, 6)) == 0
    assert earlier_of((1988, 0, 0), (1988, 10, 6)) is None and earlier_of((1988, 10, 6), (1988, 10, 6)) is None


@pytest.mark.parametrize("question, expected", [
    ("Who was born first, Ada Lovelace or Charles Babbage?", "earlier"),
    ("Which film was released more recently, Boundaries Of The Heart or Truck Turner?", "later"),
    ("Who is older, Ada Lovelace or Charles Babbage?", "earlier"),
    ("Which film whose director is younger, Bloody Moon or The House Of Pulcini?", "later"),
    ("Which film has the director who died later, Film 1 or Film 2?", "later"),
    # the candidates' own words do not count: "First for Women" asks for nothing
    ("Which magazine was started earlier, Arthur's Magazine or First for Women?", "earlier"),
    ("Which magazine has more readers, Arthur's Magazine or First for Women?", None),
    ("Who was born first and died later, Ada Lovelace or Charles Babbage?", None),  # both ends: neither
])
def test_date_direction(question, expected):
    assert date_direction(question, candidates(question)) == expected


def passages(n: int) -> list[Passage]:
    return [Passage(id=f"p{i}", title=f"Film {i}", text=f"Film {i} was directed by Person {i}.") for i in range(n)]


def hold(replies: list[str], question: str, answer: str, given: list[Passage]) -> tuple[str, Trace, ScriptedLLM]:
    llm = ScriptedLLM(replies=replies)
    trace = Trace(question=question, method="test", config={})
    with trace.activate():
        out = hold_to_choice(llm, question, answer, given, max_words=5)
    return out, trace, llm


QUESTION = "Which film has the bigger cast, Film 1 or Film 2?"  # no date compared


def test_an_answer_naming_a_candidate_needs_no_call():
    out, trace, llm = hold([], QUESTION, "film 2.", passages(3))
    assert out == "Film 2" and llm.requests == []
    (s,) = trace.root.children
    assert s.kind == "choice" and s.outputs == {"kept": "Film 2", "how": "named"}


def test_an_answer_naming_neither_asks_once_with_the_passages():
    out, trace, llm = hold(["Film 1\nmore"], QUESTION, "Person 1", passages(CHOICE_PASSAGES + 3))
    assert out == "Film 1"
    (request,) = llm.requests
    prompt = request.prompt
    assert "Film 1 / Film 2" in prompt and QUESTION in prompt
    assert f"Film {CHOICE_PASSAGES - 1}" in prompt and f"Film {CHOICE_PASSAGES}" not in prompt  # capped
    assert "Film 1 | Film 1 was directed by ..." in prompt  # each passage cut to max_words (5)
    (s,) = trace.root.children
    assert s.outputs["kept"] == "Film 1" and s.outputs["how"] == "asked" and s.outputs["reply"] == "Film 1"
    assert len(s.outputs["passages"]) == CHOICE_PASSAGES


def test_a_reply_naming_neither_keeps_the_answer_noted():
    out, trace, _ = hold(["Person 2"], QUESTION, "Person 1", passages(2))
    assert out == "Person 1"
    (s,) = trace.root.children
    assert s.outputs["kept"] == "Person 1" and "neither" in s.events[0]["message"]


DATED = "Which film has the director born earlier, Film 1 or Film 2?"


@pytest.mark.parametrize("reply, expected", [
    ("Film 1: directed by Person 1, born 1950.\nFilm 2: directed by Person 2, born March 3, 1940.", "Film 2"),
    ("Film 1: October 6, 1988\nFilm 2: February 27, 1975", "Film 2"),
    ("1930\n1975\nmore", "Film 1"),  # without the names: the lines in their places
    ("Film 2: 1975\nFilm 1: 1930", "Film 1"),  # the names, in another order
])
def test_dates_are_compared_here_not_by_the_model(reply, expected):
    """A question comparing dates: the model writes both dates, the earlier (or later) is picked
    here, whatever candidate the reader named."""
    out, trace, llm = hold([reply], DATED, "Film 1" if expected == "Film 2" else "Film 2", passages(3))
    assert out == expected
    (request,) = llm.requests
    shown = "\n\n".join(f"[{i + 1}] Film {i} | Film {i} was directed by ..." for i in range(3))
    assert request.prompt == DATES_PROMPT.format(passages=shown, question=DATED, first="Film 1", second="Film 2")
    (s,) = trace.root.children
    assert s.outputs["how"] == "compared" and s.outputs["direction"] == "earlier" and s.outputs["kept"] == expected
    later = hold([reply], DATED.replace("born earlier", "born later"), "Person 1", passages(3))[0]
    assert later == ({"Film 1", "Film 2"} - {expected}).pop()


def test_a_year_in_a_candidate_s_name_is_not_its_date():
    assert value_lines("Man Alive (1945 Film): April 3, 1965\nSitting Target: 1972", ("Sitting Target",
                      "Man Alive (1945 Film)")) == ("1972", "April 3, 1965")
    assert value_lines("", ("A", "B")) == ("", "")


@pytest.mark.parametrize("reply, note", [
    ("Film 1: unknown\nFilm 2: 1940", "holds no date"),
    ("Film 1: 1940\n", "holds no date"),
    ("Film 1: 1940\nFilm 2: in 1940", "tie"),
])
def test_dates_that_do_not_decide_fall_back_to_the_answer_named(reply, note):
    out, trace, llm = hold([reply], DATED, "film 2", passages(2))
    assert out == "Film 2" and len(llm.requests) == 1
    (s,) = trace.root.children
    assert s.outputs["how"] == "named" and note in s.events[0]["message"]


def test_a_question_without_candidates_is_left_alone():
    out, trace, llm = hold([], "Who directed Film 1?", "Person 1", passages(2))
    assert out == "Person 1" and llm.requests == [] and trace.root.children == []


@pytest.mark.slow
def test_the_choice_on_the_real_model_and_a_real_comparison_question(smollm2, data_dir):
    """LeapQuery's small-model preset on SmolLM2, on the first comparison question of the shipped
    2WikiMultihopQA dev subset (its gold paragraphs and distractors): the answer is held to the
    question's two candidates, recorded as a ``choice`` step, and is what that step kept."""
    from hopqa.build import build_method
    from hopqa.datasets import load_dataset
    from hopqa.retrieval.pool import CandidatePool

    ex = next(e for e in load_dataset("2wikimultihopqa", "dev", data_dir=data_dir, limit=40) if candidates(e.question))
    pair = candidates(ex.question)
    method = build_method("leapquery", smollm2, CandidatePool(ex.paragraphs), preset="small-model", votes=1,
                          max_iter=1)
    ans = method.answer(ex.question)
    assert ans.error is None, ans.error
    (choice,) = ans.trace.root.find("choice")
    (read,) = ans.trace.root.find("read")
    assert choice.inputs == {"candidates": list(pair), "answer": read.outputs["answer"]}
    assert ans.answer == choice.outputs["kept"]
    how = choice.outputs["how"]
    assert how in ("compared", "named", "asked")
    if how == "compared":  # the dates written, compared here
        assert ans.answer in pair and choice.outputs["direction"] in ("earlier", "later")
    elif how == "named":
        assert ans.answer in pair
    else:  # the reader named neither: one call, over the top-k
        assert "one of these two" in choice.llm_calls[-1]["prompt"] and ans.answer in (*pair, read.outputs["answer"])
    assert len(choice.llm_calls) == ("direction" in choice.outputs) + (how == "asked")


# -- the option in the methods that offer it ----------------------------------------------------------------
def _fixed(name: str, method, answer: str, read: list[Passage], first: list[Passage]) -> None:
    """Replace ``method``'s own work by an answer read from ``read`` (``first``: what the question's
    own retrieval gave, for GenSco), so that only what happens after it runs."""
    from types import SimpleNamespace

    if name == "self-dc":
        method.solve = lambda q, depth: (answer, read)
    elif name == "gensco-stop":
        method.retriever.search = lambda q, k: first
        method.select = lambda q, candidates: (read, None)
        method.read = lambda q, context: (answer, answer, "direct")
    else:  # hgot: the root node's final Predict
        method.traverse = lambda q, depth: SimpleNamespace(answer=answer, context=[SimpleNamespace(passage=p)
                                                                                     for p in read])


@pytest.mark.parametrize("name", ["self-dc", "gensco-stop", "hgot"])
@pytest.mark.parametrize("choice", [True, False])
def test_self_dc_gensco_and_hgot_hold_their_answer_to_the_candidates(name, choice):
    """``choice`` (off by default) in Self-DC, GenSco and HGOT: a "which of A or B" question's
    final answer goes through ``hold_to_choice`` over the passages it was read from (GenSco's
    walk often selects one: the question's own retrieval follows them, each passage once)."""
    from hopqa.build import build_method
    from hopqa.retrieval.pool import CandidatePool

    read, first = passages(2), passages(4)[::-1]
    llm = ScriptedLLM(["Film 2"], scorer=lambda context, text: [-1.0])
    method = build_method(name, llm, CandidatePool(first), choice=choice)
    assert build_method(name, llm, CandidatePool(first)).config.choice is False
    _fixed(name, method, "Person 1", read, first)
    ans = method.answer(QUESTION)
    assert ans.error is None, ans.error
    steps = ans.trace.root.find("choice")
    assert len(steps) == choice and len(llm.requests) == choice
    if not choice:
        assert ans.answer == "Person 1"
        return
    assert ans.answer == "Film 2" and steps[0].outputs["how"] == "asked"
    shown = ["p0", "p1", "p3", "p2"] if name == "gensco-stop" else ["p0", "p1"]
    assert steps[0].outputs["passages"] == shown
