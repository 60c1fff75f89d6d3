"""Structured steps of Self-Ask, ReAct and IRCoT (issue 16): the schema-constrained request, the
JSON read back into the paper's transcript, the free-text fallbacks and the parse records,
with a scripted LLM (exact prompts and values)."""

from __future__ import annotations

import json

import pytest

from hopqa.build import build_method
from hopqa.llm import GENERATE, STRUCTURED
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods import ircot, react, self_ask
from hopqa.retrieval.pool import CandidatePool
from hopqa.types import Passage

POOL = CandidatePool([
    Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County, North Dakota."),
    Passage("b", "Stanley, North Dakota", "Stanley is a city in and the county seat of Mountrail County."),
    Passage("c", "Paris", "Paris is the capital of France. It is large."),
])
Q = "What is the seat of the county where Van Hook Township is located?"
SUB1, SUB2 = "Which county is Van Hook Township in?", "What is the county seat of Mountrail County?"
JSON_LLM = {GENERATE, STRUCTURED}


def js(**fields) -> str:
    return json.dumps(fields)


def scripted(replies, structured: bool = True) -> ScriptedLLM:
    return ScriptedLLM(replies=replies, capabilities=JSON_LLM if structured else {GENERATE})


class IgnoringLLM(ScriptedLLM):
    """A backend that declares STRUCTURED but answered in free text (a server that refused
    every ``response_format``)."""

    def _complete(self, request):
        gen = super()._complete(request)
        gen.schema_ignored = request.schema is not None
        return gen


def parses(ans, kind: str) -> list[tuple[str, str, str]]:
    """(field, status, how) of the parse records of every ``kind`` step, in order."""
    return [(e["field"], e["status"], e["how"]) for s in ans.trace.root.find(kind) for e in s.events
            if e["message"] == "parse"]


# -- Self-Ask -------------------------------------------------------------------------------------
def _self_ask_reply(structured: bool):
    """Two follow-ups, then the final answer; the same decisions as JSON or as the paper's text."""

    def reply(request):
        text = request.text()
        if text.startswith("Answer the question using the passages"):
            return "Mountrail County" if SUB1 in text.rsplit("Question:", 1)[1] else "Stanley"
        transcript = text.split("Are follow up questions needed here:")[-1]
        if "Intermediate answer: Stanley." in transcript:
            return js(follow_up_needed=False, follow_up="", final_answer="Stanley.") if structured \
                else "So the final answer is: Stanley."
        if "Intermediate answer: Mountrail County." in transcript:
            return js(follow_up_needed=True, follow_up=SUB2, final_answer="") if structured \
                else f"Follow up: {SUB2}\n"
        return js(follow_up_needed=True, follow_up=SUB1, final_answer="") if structured else f" Yes.\nFollow up: {SUB1}\n"

    return reply


def test_self_ask_structured_turns_render_the_papers_transcript():
    free_llm = scripted(_self_ask_reply(False), structured=False)
    free = build_method("self-ask", free_llm, POOL, k=2, shots=1).answer(Q)
    llm = scripted(_self_ask_reply(True))
    ans = build_method("self-ask", llm, POOL, k=2, shots=1).answer(Q)  # structured=auto
    assert ans.error is None and ans.answer == free.answer == "Stanley"
    turns = [r for r in llm.requests if not r.prompt.startswith("Answer the question using")]
    free_turns = [r for r in free_llm.requests if not r.prompt.startswith("Answer the question using")]
    assert len(turns) == len(free_turns) == 3
    # the paper's prompt (same demonstrations, same transcript) and the JSON instruction
    for on, off in zip(turns, free_turns):
        assert on.schema_dict() == self_ask.TURN_SCHEMA and off.schema is None
        assert on.prompt == off.prompt + self_ask.TURN_INSTRUCTION
        assert on.max_tokens == 96 + 32 and on.stop == () and off.stop == ("Intermediate answer:", "\nQuestion:")
    assert turns[2].prompt.endswith(f"Are follow up questions needed here: Yes.\nFollow up: {SUB1}\nIntermediate "
                                    f"answer: Mountrail County.\nFollow up: {SUB2}\nIntermediate answer: Stanley."
                                    + self_ask.TURN_INSTRUCTION)
    # follow-ups are still read from passages in free text
    assert all(r.schema is None for r in llm.requests if r.prompt.startswith("Answer the question using"))
    assert [(h.question, h.answer) for h in ans.hops] == [(SUB1, "Mountrail County"), (SUB2, "Stanley")]
    assert parses(ans, "follow_up") == [("turn", "direct", "json")] * 3
    assert ans.trace.parse_counts() == {"direct": 3, "fallback": 0, "failed": 0}
    assert parses(free, "follow_up") == [("turn", "direct", "Follow up:")] * 2 + [
        ("turn", "direct", "So the final answer is:")]


def test_self_ask_structured_no_follow_up_needed_answers_at_once():
    llm = scripted([js(follow_up_needed=False, follow_up="", final_answer="So the final answer is: Stanley")])
    ans = build_method("self-ask", llm, POOL, shots=1).answer(Q)
    assert ans.answer == "Stanley" and len(llm.requests) == 1 and not ans.hops
    assert ans.trace.root.find("follow_up")[0].outputs["final_answer"] == "Stanley"


@pytest.mark.parametrize("obj, turn", [
    ({"follow_up_needed": True, "follow_up": "Follow up: Follow up:  Where is Stanley?"},
     self_ask.Turn("follow_up", "Where is Stanley?")),
    ({"follow_up_needed": True, "follow_up": " follow-up:Follow up : Follow up:"}, None),
    ({"follow_up_needed": False, "final_answer": "So the final answer is: The final answer is: Stanley"},
     self_ask.Turn("final", "Stanley")),
    ({"follow_up_needed": True, "follow_up": "Is the follow up: needed?"},
     self_ask.Turn("follow_up", "Is the follow up: needed?")),
])
def test_self_ask_json_fields_lose_every_leaked_label_at_their_start(obj, turn):
    """A label the model wrote twice into a JSON field goes both times; one inside the text stays."""
    assert self_ask.turn_from_json(obj) == turn


def test_self_ask_inconsistent_json_forces_a_structured_final_answer():
    llm = scripted([js(follow_up_needed=True, follow_up=" ", final_answer="Stanley"), '{"final_answer": "Stanl'])
    ans = build_method("self-ask", llm, POOL, shots=1).answer(Q)
    assert ans.error is None and ans.answer == "Stanl"  # the JSON cut short, closed
    final = llm.requests[1]
    assert final.schema_dict() == self_ask.FINAL_SCHEMA == {
        "type": "object", "properties": {"final_answer": {"type": "string"}}, "required": ["final_answer"],
        "additionalProperties": False}
    assert final.prompt == llm.requests[0].prompt.removesuffix(self_ask.TURN_INSTRUCTION) + self_ask.FINAL_INSTRUCTION
    assert final.max_tokens == 64
    assert parses(ans, "follow_up") == [
        ("turn", "failed", "JSON without a usable value")]
    assert parses(ans, "final_answer") == [("final_answer", "fallback", "JSON cut short, closed")]
    (turn,) = ans.trace.root.find("follow_up")
    assert [e["message"] for e in turn.events][1] == (
        "JSON without a usable value: asking for the final answer")


def test_self_ask_copied_examples_are_failed_parses_not_answers():
    """SmolLM2-135M copies the reply's example into Self-Ask's turn and final answer ("the short
    final answer" was its answer on 9 of 20 MuSiQue questions): both are failed parses, and the
    answer is the documented default, not the example."""
    llm = scripted([js(follow_up_needed=True, follow_up="the next follow up question, or empty when",
                       final_answer="the short final answer when no follow up is needed"),
                    js(final_answer="the short final answer")])
    ans = build_method("self-ask", llm, POOL, shots=1).answer(Q)
    assert ans.answer != "the short final answer" and "follow up" not in ans.answer
    assert parses(ans, "follow_up") == [("turn", "failed", "the reply's example copied (follow_up, final_answer)")]
    assert parses(ans, "final_answer") == [("final_answer", "failed", "the reply's example copied (final_answer)")]


def test_self_ask_free_text_under_a_schema_is_a_fallback():
    llm = IgnoringLLM(replies=[f"Yes.\nFollow up:\n{SUB1}", "Mountrail County", "no idea", "Mountrail County"],
                      capabilities=JSON_LLM)
    ans = build_method("self-ask", llm, POOL, shots=1).answer(Q)
    assert ans.answer == "Mountrail County" and [h.question for h in ans.hops] == [SUB1]
    assert parses(ans, "follow_up") == [
        ("turn", "fallback", "schema ignored by the server; free text: the question on the line after 'Follow up:'"),
        ("turn", "failed", "schema ignored by the server; free text: no 'Follow up:' and no final answer")]
    assert parses(ans, "final_answer") == [
        ("final_answer", "fallback", "schema ignored by the server; free text: marker:so the final answer is\\s*[:\\-]?")]


@pytest.mark.parametrize("mode, caps", [("off", JSON_LLM), ("auto", {GENERATE})])
def test_self_ask_free_text_prompts_are_the_papers(mode, caps):
    llm = ScriptedLLM(replies=["Nothing to see.", "  "], capabilities=caps)
    method = build_method("self-ask", llm, POOL, shots=1, structured=mode)
    ans = method.answer(Q)
    demos = self_ask.format_demo(method.demos[0])
    paper = self_ask.SELF_ASK_PROMPT.format(demos=demos, question=Q, transcript="")
    assert [r.prompt for r in llm.requests] == [paper, paper + "\nSo the final answer is:"]
    assert all(r.schema is None for r in llm.requests)
    # an empty forced final answer is an empty answer (it was the cue "So the final answer is:")
    assert ans.error is None and ans.answer == ""
    assert parses(ans, "follow_up") == [("turn", "failed", "no 'Follow up:' and no final answer")]
    assert parses(ans, "final_answer") == [("final_answer", "failed", "an empty final answer")]


# -- ReAct ----------------------------------------------------------------------------------------
def test_react_structured_steps_render_the_papers_transcript():
    free_llm = scripted(["I need the county.\nAction 1: Search[Van Hook Township]",
                         "Thought 2: It is Mountrail County.\nAction 2: Finish[Mountrail County]"], structured=False)
    free = build_method("react", free_llm, POOL, shots=1).answer(Q)
    llm = scripted([js(thought="Thought 1: I need\nthe county.", action="Search", argument="Van Hook  Township"),
                    js(thought="It is Mountrail County.", action="Finish", argument="Mountrail County.")])
    ans = build_method("react", llm, POOL, shots=1).answer(Q)
    assert ans.error is None and ans.answer == free.answer == "Mountrail County"
    assert [r.schema_dict() for r in llm.requests] == [react.STEP_SCHEMA] * 2
    assert react.STEP_SCHEMA["properties"]["action"] == {"type": "string", "enum": ["Search", "Lookup", "Finish"]}
    assert list(react.STEP_SCHEMA["properties"]) == ["thought", "action", "argument"]
    for n, (on, off) in enumerate(zip(llm.requests, free_llm.requests), 1):
        assert off.prompt.endswith(f"Thought {n}:") and off.schema is None
        assert on.prompt == off.prompt.removesuffix(f"Thought {n}:") + react.STEP_INSTRUCTION
        assert on.max_tokens == 128 + 32 and on.stop == ()
    assert llm.requests[1].prompt.endswith(
        f"Question: {Q}\nThought 1: I need the county.\nAction 1: Search[Van Hook Township]\nObservation 1: "
        "[Van Hook Township] Van Hook Township is a township in Mountrail County, North Dakota.\n"
        + react.STEP_INSTRUCTION)
    assert [s.outputs["action"] for s in ans.trace.root.find("react_step")] == [
        ["search", "Van Hook Township"], ["finish", "Mountrail County."]]
    assert parses(ans, "react_step") == [("action", "direct", "json")] * 2
    assert parses(free, "react_step") == [("action", "direct", "Action N: X[...]")] * 2


def test_react_structured_forced_finish_asks_for_an_answer():
    llm = scripted([js(thought="Look.", action="Lookup", argument="county"), js(answer="Stanley")])
    ans = build_method("react", llm, POOL, shots=1, max_steps=1).answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    finish = llm.requests[1]
    assert finish.schema_dict() == react.FINISH_SCHEMA and finish.max_tokens == 64
    assert finish.prompt.endswith("Action 1: Lookup[county]\nObservation 1: Lookup needs a passage: Search first.\n"
                                  "Thought 2: I must give my final answer now.\n" + react.FINISH_INSTRUCTION)
    assert parses(ans, "forced_finish") == [("answer", "direct", "json")]


def test_react_structured_fallbacks():
    llm = IgnoringLLM(replies=["I should Search[Van Hook Township] now.", "Thought 2: Stanley"],
                      capabilities=JSON_LLM)
    ans = build_method("react", llm, POOL, shots=1, max_steps=1).answer(Q)
    assert ans.answer == "Stanley" and [p.id for p in ans.passages] == ["a"]
    assert parses(ans, "react_step") == [
        ("action", "fallback", "schema ignored by the server; free text: an action without its 'Action N:' label")]
    assert parses(ans, "forced_finish") == [
        ("answer", "fallback", "schema ignored by the server; free text: a leaked 'Thought N:' stripped")]
    # a JSON object without an answer: the documented default, an empty answer
    llm = scripted([js(thought="Hm.", action="Search", argument="Paris"), '{"answer": "  "}'])
    ans = build_method("react", llm, POOL, shots=1, max_steps=1).answer(Q)
    assert ans.error is None and ans.answer == ""
    assert parses(ans, "forced_finish") == [
        ("answer", "failed", "JSON without a usable value")]


@pytest.mark.parametrize("mode, caps", [("off", JSON_LLM), ("auto", {GENERATE})])
def test_react_free_text_prompts_and_the_leaked_thought(mode, caps):
    """The forced finish of Qwen2.5-1.5B answered "Thought 1: ..."; the label is stripped."""
    llm = ScriptedLLM(replies=["I am confused.", "Thought 1: Stanley"], capabilities=caps)
    method = build_method("react", llm, POOL, shots=1, max_steps=1, structured=mode)
    ans = method.answer(Q)
    base = react.REACT_PROMPT.format(demos=react.format_demo(method.demos[0]), question=Q, transcript="")
    invalid = "Invalid action. Valid actions are Search[<query>], Lookup[<keyword>] and Finish[<answer>]."
    assert [r.prompt for r in llm.requests] == [
        base + "Thought 1:",
        base + f"Thought 1: I am confused.\nAction 1: (none)\nObservation 1: {invalid}\n"
        "Thought 2: I must give my final answer now.\nAction 2: Finish["]
    assert all(r.schema is None for r in llm.requests)
    assert ans.answer == "Stanley"
    assert parses(ans, "react_step") == [("action", "failed", "no parseable action")]
    assert parses(ans, "forced_finish") == [("answer", "fallback", "a leaked 'Thought N:' stripped")]


@pytest.mark.parametrize("text, answer, status", [
    ("Stanley", "Stanley", "direct"),
    ("Action 2: Finish[Stanley", "Stanley", "fallback"),
    ("Thought 8:", "", "failed"),
    ("", "", "failed"),
])
def test_react_parse_finish(text, answer, status):
    got = react.parse_finish(text)
    assert (got.value or "", got.status) == (answer, status)


# -- IRCoT ----------------------------------------------------------------------------------------
def _ircot_llm(steps: list[str], cls: type[ScriptedLLM] = ScriptedLLM) -> ScriptedLLM:
    """The reasoning steps in order (JSON-capable when the first is JSON); the reader says Stanley."""

    def reply(request):
        if request.text().startswith("Answer the question using the passages"):
            return "Stanley"
        return steps[sum(1 for r in llm.requests if r.prompt.startswith("Answer the question by")) - 1]

    llm = cls(replies=reply, capabilities=JSON_LLM if steps[0].startswith("{") else {GENERATE})
    return llm


def test_ircot_structured_sentences_render_the_papers_chain_of_thought():
    free_llm = _ircot_llm(["Van Hook Township is in Mountrail County. Extra.", "So the answer is: Stanley."])
    free = build_method("ircot", free_llm, POOL, k=1, shots=1, reader="cot").answer(Q)
    llm = _ircot_llm([js(sentence="Van Hook Township is in Mountrail County. Extra."),
                        js(sentence="So the answer is: Stanley.")])
    ans = build_method("ircot", llm, POOL, k=1, shots=1, reader="cot").answer(Q)
    assert ans.error is None and ans.answer == free.answer == "Stanley"
    assert len(llm.requests) == len(free_llm.requests) == 2  # the cot reader makes no call
    for on, off in zip(llm.requests, free_llm.requests):
        assert on.schema_dict() == ircot.REASON_SCHEMA and off.schema is None
        assert on.prompt == off.prompt + ircot.REASON_INSTRUCTION
        assert on.max_tokens == 64 + 16 and on.stop == () and off.stop == ("\n\n", "\nQ:")
    assert llm.requests[1].prompt.endswith(f"Q: {Q}\nA: Van Hook Township is in Mountrail County."
                                           + ircot.REASON_INSTRUCTION)
    assert [r.outputs["sentence"] for r in ans.trace.root.find("reason")] == [
        "Van Hook Township is in Mountrail County.", "So the answer is: Stanley."]
    assert ans.usage.retrieval_calls == free.usage.retrieval_calls == 2
    assert parses(ans, "reason") == [("sentence", "direct", "json")] * 2
    assert parses(free, "reason") == [("sentence", "direct", "first sentence")] * 2


def test_ircot_structured_fallbacks_and_stop():
    llm = _ircot_llm(['{"sentence": "Van Hook Township is in Mountrail', "Stanley is the seat. More.",
                      js(sentence=" ")], cls=IgnoringLLM)
    ans = build_method("ircot", llm, POOL, k=1, shots=1).answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    reasons = ans.trace.root.find("reason")
    assert [r.outputs["sentence"] for r in reasons] == ["Van Hook Township is in Mountrail", "Stanley is the seat.", ""]
    assert parses(ans, "reason") == [
        ("sentence", "fallback", "JSON in a reply the server did not constrain"),
        ("sentence", "fallback", "schema ignored by the server; free text: first sentence"),
        ("sentence", "failed", "JSON without a usable value")]
    assert reasons[-1].events[-1]["message"] == "empty reasoning step: stopping"
    assert ans.usage.retrieval_calls == 3


def test_ircot_repaired_json_is_a_fallback():
    llm = _ircot_llm(['{"sentence": "Van Hook Township is in Mountrail', js(sentence="")])
    ans = build_method("ircot", llm, POOL, k=1, shots=1).answer(Q)
    assert parses(ans, "reason") == [
        ("sentence", "fallback", "JSON cut short, closed"),
        ("sentence", "failed", "JSON without a usable value")]
    assert [r.outputs["sentence"] for r in ans.trace.root.find("reason")] == ["Van Hook Township is in Mountrail", ""]


@pytest.mark.parametrize("mode, caps", [("off", JSON_LLM), ("auto", {GENERATE})])
def test_ircot_free_text_prompt_is_the_papers(mode, caps):
    llm = ScriptedLLM(replies=["  \n", "Stanley"], capabilities=caps)
    method = build_method("ircot", llm, POOL, k=1, shots=1, structured=mode)
    ans = method.answer(Q)
    from hopqa.methods.demos import chain_of_thought
    from hopqa.text import render_passages

    demos = f"Q: {method.demos[0].question}\nA: {chain_of_thought(method.demos[0])}"
    passages = render_passages(POOL.search(Q, 1), total_words=1200)
    assert llm.requests[0].prompt == ircot.REASON_PROMPT.format(demos=demos, passages=passages, question=Q, cot="")
    assert all(r.schema is None for r in llm.requests)
    assert ans.answer == "Stanley"
    assert parses(ans, "reason") == [("sentence", "failed", "empty reasoning step")]


# -- structured=on needs the capability ------------------------------------------------------------
@pytest.mark.parametrize("name, who", [("self-ask", "Self-Ask's follow-up turns"), ("react", "ReAct's actions"),
                                       ("ircot", "IRCoT's reasoning steps")])
def test_structured_on_without_the_capability_is_an_error(name, who):
    llm = ScriptedLLM(replies=["x"])
    ans = build_method(name, llm, POOL, shots=1, structured="on").answer(Q)
    assert ans.error is not None and ans.error.startswith("UnsupportedCapability: ")
    assert "'structured'" in ans.error and f"{who} (set structured=auto or off to use free text) needs it" in ans.error
    assert llm.requests == []


@pytest.mark.parametrize("name", ["self-ask", "react", "ircot"])
def test_structured_on_with_the_capability_sends_the_schema(name):
    llm = scripted(lambda request: "{}")
    build_method(name, llm, POOL, shots=1, structured="on").answer(Q)
    assert llm.requests[0].schema is not None
