"""Self-Ask, ReAct, IRCoT and ITER-RETGEN: control flow with a scripted LLM, parsers on saved
real outputs, and end to end on the real embedded model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hopqa.build import build_method
from hopqa.datasets import few_shot_demos as load_demos
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.demos import chain_of_thought
from hopqa.methods.parsing import first_sentence
from hopqa.methods.react import parse_action
from hopqa.methods.self_ask import _FINAL, parse_follow_up
from hopqa.retrieval.pool import CandidatePool
from hopqa.types import Passage

POOL = CandidatePool([
    Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County, North Dakota."),
    Passage("b", "Stanley, North Dakota", "Stanley is a city in and the county seat of Mountrail County."),
    Passage("c", "Paris", "Paris is the capital of France. It is large."),
])
Q = "What is the seat of the county where Van Hook Township is located?"
FIXTURES = Path(__file__).parent / "fixtures"


def by_prompt(rules):
    """A scripted LLM choosing its reply by a substring of the prompt's last part."""

    def reply(request):
        text = request.text()
        for key, value in rules:
            if key(text):
                return value
        raise AssertionError("no rule for prompt ending " + text[-200:])

    return ScriptedLLM(replies=reply)


# -- demonstrations -------------------------------------------------------------------------------
def test_demos_come_from_train_files(data_dir):
    from hopqa.datasets import load_dataset

    demos = load_demos(4)  # pinned to the shipped train subsets
    assert len(demos) == 4
    dev_questions = {e.question for n in ("musique", "2wikimultihopqa") for e in load_dataset(n, "dev", data_dir=data_dir)}
    assert not {d.question for d in demos} & dev_questions
    assert all(2 <= len(d.steps) <= 3 and d.steps[-1].passage is not None for d in demos)
    assert all("#" not in s.question and ">>" not in s.question for d in demos for s in d.steps)
    assert chain_of_thought(demos[0]).endswith(f"So the answer is: {demos[0].answer}.")


# -- Self-Ask -------------------------------------------------------------------------------------
def test_self_ask_follow_ups_then_final():
    llm = by_prompt([
        (lambda t: t.startswith("Answer the question using the passages") and "county is" in t, "Mountrail County"),
        (lambda t: t.startswith("Answer the question using the passages"), "Stanley"),
        (lambda t: t.endswith("Intermediate answer: Stanley."), "So the final answer is: Stanley."),
        (lambda t: t.endswith("Intermediate answer: Mountrail County."),
         "Follow up: What is the county seat of Mountrail County?"),
        (lambda t: True, "Yes.\nFollow up: Which county is Van Hook Township in?"),
    ])
    ans = build_method("self-ask", llm, POOL, k=2).answer(Q.replace("located", "located, and which county is it"))
    assert ans.error is None and ans.answer == "Stanley"
    steps = ans.trace.root.find("follow_up")
    assert [s.outputs.get("follow_up") for s in steps[:2]] == ["Which county is Van Hook Township in?",
                                                                "What is the county seat of Mountrail County?"]
    assert ans.usage.retrieval_calls == 2 and ans.passages


def test_self_ask_without_follow_up_forces_final_answer():
    llm = ScriptedLLM(replies=["I think it is Stanley somewhere.", "Stanley."])
    ans = build_method("self-ask", llm, POOL).answer(Q)
    assert ans.answer == "Stanley" and ans.trace.root.find("follow_up")[0].events
    assert ans.trace.root.find("final_answer")


def test_self_ask_step_limit():
    llm = by_prompt([(lambda t: t.startswith("Answer the question using"), "x"),
                     (lambda t: t.endswith("So the final answer is:"), "Stanley"),
                     (lambda t: True, "Follow up: question number " + "z")])
    ans = build_method("self-ask", llm, POOL, max_steps=3).answer(Q)
    # the second identical follow-up ends the loop
    assert ans.answer == "Stanley" and len(ans.trace.root.find("intermediate_answer")) == 1


@pytest.mark.parametrize("reply", ["Yes.\nFollow up: \n", "Follow up:", "Follow up:\n\n",
                                   "Yes.\nFollow up: \nSo the final answer is:", "Follow up:\nIntermediate answer: x"])
def test_self_ask_empty_follow_up_is_no_follow_up(reply):
    """Issue 13: "Follow up:" with nothing after it crashed with IndexError; it is now a turn
    with no follow-up: the trace says so and the final answer is asked for."""
    llm = by_prompt([(lambda t: t.endswith("So the final answer is:"), " Stanley."), (lambda t: True, reply)])
    ans = build_method("self-ask", llm, POOL).answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    first = ans.trace.root.find("follow_up")[0]
    assert any("'Follow up:' without a question" in e["message"] or "empty final answer" in e["message"]
               for e in first.events), first.events
    assert ans.trace.root.find("final_answer") and not ans.trace.root.find("intermediate_answer")


@pytest.mark.parametrize("text, expected", [
    ("Yes.\nFollow up: Who is A?\n", "Who is A?"),
    ("Follow up:\n  Who is A?", "Who is A?"),                    # the question on the next line
    ("Follow-up: Who is A? Intermediate", "Who is A? Intermediate"),
    ("Follow up: \nFollow up: Who is B?", "Who is B?"),          # the first one with a question
    ("Yes.\nFollow up: \n", None),
    ("Follow up:\nSo the final answer is: X", None),              # the next line is another field
    ("Follow up:", None),
    ("no follow-up here", None),
])
def test_parse_follow_up(text, expected):
    got = parse_follow_up(text)
    assert (got[1] if got else None) == expected


# -- ReAct ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("Thought 1: I need X.\nAction 1: Search[Van Hook Township]", ("search", "Van Hook Township")),
    ("I should look.\nAction: lookup[county]", ("lookup", "county")),
    ("Action 3: Finish[ Stanley ]", ("finish", "Stanley")),
    ("Action 2: Search Van Hook", None),
    ("print(open('/etc/passwd').read())", None),
    ("Action 1: Search[Van Hook\nTownship]", ("search", "Van Hook Township")),   # newlines allowed
    ("Action 1: Search [ x ] then Finish[y]", ("search", "x")),                    # the first action
    ("Action 1: Search[a [b] c]", ("search", "a [b")),                             # up to the first "]"
    ("Action 1: Search[never closed", None),
    ("Search[" * 1000, None),
])
def test_parse_action(text, expected):
    assert parse_action(text) == expected


def test_react_search_lookup_finish():
    llm = ScriptedLLM(replies=[
        "I need the county.\nAction 1: Search[Van Hook Township]",
        "Lookup the county.\nAction 2: Lookup[County]",
        "Search again.\nAction 3: Search[county seat Mountrail County]",
        "Thought 4: Done.\nAction 4: Finish[Stanley]",
    ])
    ans = build_method("react", llm, POOL).answer(Q)
    assert ans.answer == "Stanley" and ans.error is None
    obs = [s.outputs["observation"] for s in ans.trace.root.find("react_step")[:3]]
    assert obs[0].startswith("[Van Hook Township]") and "Mountrail County" in obs[1]
    assert obs[2].startswith("[Stanley, North Dakota]")
    assert [p.id for p in ans.passages] == ["a", "b"]
    assert "Thought 1: Thought" not in llm.requests[-1].text()


def test_react_invalid_action_and_forced_finish():
    llm = ScriptedLLM(replies=["I am confused.", "still confused", "Stanley"])
    ans = build_method("react", llm, POOL, max_steps=2).answer(Q)
    assert ans.answer == "Stanley"
    assert "Invalid action" in ans.trace.root.find("react_step")[0].outputs["observation"]
    assert llm.requests[-1].text().endswith("Finish[")


# -- IRCoT ----------------------------------------------------------------------------------------
def test_ircot_interleaves_and_stops_on_answer():
    llm = by_prompt([
        (lambda t: t.startswith("Answer the question using the passages"), "Stanley"),
        (lambda t: t.endswith("is Stanley."), "So the answer is: Stanley."),
        (lambda t: t.endswith("Mountrail County."), "The seat of Mountrail County is Stanley. So the answer is: Stanley."),
        (lambda t: True, "Van Hook Township is in Mountrail County. Extra sentence."),
    ])
    ans = build_method("ircot", llm, POOL, k=1).answer(Q)
    assert ans.answer == "Stanley"
    reasons = ans.trace.root.find("reason")
    # one new sentence per step (the rest of a generation is dropped), stop on "answer is"
    assert [r.outputs["sentence"] for r in reasons] == ["Van Hook Township is in Mountrail County.",
                                                        "The seat of Mountrail County is Stanley.",
                                                        "So the answer is: Stanley."]
    # initial retrieval + one per non-final step
    assert ans.usage.retrieval_calls == 3
    scores = [p.score for p in ans.passages]
    assert scores == sorted(scores, reverse=True)


def test_ircot_paragraph_cap_and_step_limit():
    calls = []

    def reply(request):
        if request.text().startswith("Answer the question using the passages"):
            return "x"
        calls.append(1)
        return f"Step number {len(calls)} mentions Paris and Mountrail County."

    ans = build_method("ircot", ScriptedLLM(replies=reply), POOL, k=3, max_paragraphs=2, max_steps=3).answer(Q)
    assert len(ans.passages) == 2 and len(ans.trace.root.find("reason")) == 3


def test_ircot_stops_when_a_step_repeats():
    llm = by_prompt([(lambda t: t.startswith("Answer the question using the passages"), "x"),
                     (lambda t: True, "Paris is large.")])
    ans = build_method("ircot", llm, POOL, k=1, max_steps=5).answer(Q)
    reasons = ans.trace.root.find("reason")
    assert len(reasons) == 2 and "repeats" in reasons[-1].events[-1]["message"]  # after its parse record


# -- ITER-RETGEN ------------------------------------------------------------------------------------
def test_iter_retgen_queries_with_previous_generation():
    llm = ScriptedLLM(replies=["It is in Mountrail County. So the answer is: Mountrail.",
                               "The seat is Stanley. So the answer is: Stanley.", "So the answer is: Stanley."])
    ans = build_method("iter-retgen", llm, POOL, iterations=3, k=1).answer(Q)
    its = ans.trace.root.find("iteration")
    assert [i.outputs["query"] for i in its] == [
        Q, f"{Q} It is in Mountrail County. So the answer is: Mountrail.", f"{Q} The seat is Stanley. So the answer is: Stanley."]
    assert ans.answer == "Stanley" and ans.usage.retrieval_calls == 3 and ans.usage.llm_calls == 3


# -- parsers on saved real outputs --------------------------------------------------------------------
def test_parsers_on_saved_real_outputs():
    cases = json.loads((FIXTURES / "baseline_outputs.json").read_text())
    assert cases
    for c in cases:
        if c["method"] == "react" and c["step"] == "react_step":
            got = parse_action(c["raw"])
            assert (list(got) if got else None) == c["expected"], c
        elif c["method"] == "self-ask" and c["step"] == "follow_up":
            final, follow = _FINAL.search(c["raw"]), parse_follow_up(c["raw"])
            kind = "final" if final and (not follow or final.start() < follow[0]) else "follow" if follow else None
            assert kind == c["expected"], c
        elif c["method"] == "ircot" and c["step"] == "reason":
            assert first_sentence(c["raw"]) == c["expected"], c


# -- the real thing -------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["self-ask", "react", "ircot", "iter-retgen"])
def test_baseline_end_to_end_on_embedded_model(name, smollm2, data_dir):
    from hopqa.datasets import load_dataset

    for ex in load_dataset("musique", "dev", data_dir=data_dir, limit=2):
        ans = build_method(name, smollm2).with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
        assert ans.error is None, ans.error
        assert ans.usage.llm_calls >= 1 and ans.usage.prompt_tokens > 0
        assert ans.trace.llm_calls()
        assert {p.id for p in ans.passages} <= {p.id for p in ex.paragraphs}
