"""hopqa.methods.polar: a yes / no question's answer held to yes or no (issue 33)."""

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
    held to yes or no, recorded as a ``polar`` step, and is what that step kept."""
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
    if polar.outputs["how"] == "read":  # the reader said yes or no itself
        assert polar.llm_calls == [] and ans.answer in ("yes", "no")
    else:  # one call, over the top-k, whose reply decides unless it says neither
        assert polar.outputs["how"] == "asked" and len(polar.llm_calls) == 1
        assert "with yes or no" in polar.llm_calls[0]["prompt"]
        assert ans.answer in ("yes", "no") or ans.answer == read.outputs["answer"]
