"""Self-DC's structured steps (issue 16): the verbal confidence and the decomposition under a
JSON schema, their fallbacks to the free-text parsers, the paper's exact prompts with
``structured=off`` (or a backend without ``STRUCTURED``), and the error of ``structured=on``
on a backend that cannot constrain its output. Every parse record is checked by value."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pytest

from hopqa.llm.base import GENERATE, LOGPROBS, STRUCTURED, Generation, GenerationRequest
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.self_dc import (
    DECOMPOSE_PROMPT,
    VERB_CONFIDENCE_PROMPT,
    VERB_CONFIDENCE_SCHEMA,
    SelfDC,
    SelfDCConfig,
    confidence_from_json,
    decomposition_schema,
    read_subquestions,
    read_verbal_confidence,
    subquestions_from_json,
)
from hopqa.retrieval.pool import CandidatePool
from hopqa.types import Answer, Passage

POOL = CandidatePool([
    Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County."),
    Passage("b", "Mountrail County", "Stanley is the county seat of Mountrail County."),
])
Q = "What is the seat of the county where Van Hook Township is located?"
S1 = "Which county is Van Hook Township in?"
S2 = "What is the seat of Mountrail County?"
CAPS = {GENERATE, STRUCTURED}
#: The Table 21 prompts as sent under a schema: the cue "Answer:" replaced by the JSON instruction.
CONF_JSON_TAIL = ("degree of certainty you have about your answer and is represented as a percentage.\n"
                  'Reply with one JSON object of this form: {"answer": "[Your answer]", "confidence": 80}')
DECOMPOSE_JSON_TAIL = (f"Question: {Q}\n"
                       'Reply with one JSON object of this form: {"subquestions": ["[sub-question 1]", "[sub-question 2]"]}')


def question_of(request: GenerationRequest) -> str:
    """The ``Question:`` of a Table 21 confidence or decomposition prompt."""
    return request.text().split("Question: ")[-1].split("\n")[0]


def scripted(confidence: Callable[[str, bool], str], decomposition: str = "", caps: set[str] | None = None,
             **cfg: object) -> tuple[SelfDC, ScriptedLLM]:
    """Self-DC on a scripted LLM: ``confidence(question, structured)`` answers the confidence
    prompts, ``decomposition`` the decomposition of Q (a sub-question cannot be divided: []);
    passages and documents are read as "Stanley" ("Mountrail County" for S1)."""
    def reply(request: GenerationRequest) -> str:
        t = request.text()
        structured = request.schema is not None
        if t.startswith("Please read the question, give the answer"):
            return confidence(question_of(request), structured)
        if t.startswith("Please read the question, divide"):
            if question_of(request) == Q:
                return decomposition
            return '{"subquestions": []}' if structured else ""
        if t.startswith("Generate a background document"):
            return "Stanley is the seat of Mountrail County."
        if t.startswith("Refer to the passage below"):
            return " Mountrail County" if S1 in t.split("Question:")[-1] else " Stanley"
        if t.startswith("Question:"):
            return " Stanley"
        raise AssertionError(t[:80])

    llm = ScriptedLLM(replies=reply, capabilities=CAPS if caps is None else caps)
    return SelfDC(llm, POOL, SelfDCConfig().update(**cfg)), llm


def records(ans: Answer, field: str) -> list[tuple[str, str]]:
    """(status, how) of every parse record of ``field`` in the answer's trace, in order."""
    assert ans.trace is not None
    return [(e["status"], e["how"]) for s in ans.trace.root.walk() for e in s.events
            if e["message"] == "parse" and e["field"] == field]


def requests_of(llm: ScriptedLLM, start: str) -> list[GenerationRequest]:
    return [r for r in llm.requests if r.text().startswith(start)]


def conf_step(ans: Answer, i: int = 0):
    assert ans.trace is not None
    return ans.trace.root.find("confidence")[i]


def self_dc_nodes(ans: Answer):
    assert ans.trace is not None
    return ans.trace.root.find("self-dc")


# -- the verbal confidence ---------------------------------------------------------------------------------
def test_confidence_json_request_and_direct_record():
    method, llm = scripted(lambda q, structured: '{"answer": "Stanley", "confidence": 90}')
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    (request,) = requests_of(llm, "Please read the question, give the answer")
    assert request.schema_dict() == VERB_CONFIDENCE_SCHEMA
    assert request.schema_dict() == {
        "type": "object",
        "properties": {"answer": {"type": "string"},
                       "confidence": {"type": "integer", "enum": list(range(101))}},
        "required": ["answer", "confidence"], "additionalProperties": False}
    assert request.prompt == VERB_CONFIDENCE_PROMPT.format(question=Q).removesuffix("\nAnswer:") + "\n" + \
        'Reply with one JSON object of this form: {"answer": "[Your answer]", "confidence": 80}'
    assert request.prompt.endswith(CONF_JSON_TAIL)
    assert request.max_tokens == 64 and request.stop == ()
    step = conf_step(ans)
    assert step.outputs == {"raw": '{"answer": "Stanley", "confidence": 90}', "answer": "Stanley", "confidence": 0.9}
    assert records(ans, "confidence") == [("direct", "json")]
    assert self_dc_nodes(ans)[0].outputs["route"] == "generate-then-read"


@pytest.mark.parametrize("reply, confidence, status, how", [
    # free text under the schema (a server that did not constrain): the paper's parser reads it
    ("Answer: Stanley\nConfidence (0-100): 20%", 0.2, "fallback", "no JSON object; free text: Confidence line"),
    # cut by max_tokens inside the number: closed, the digits so far
    ('{"answer": "Stanley", "confidence": 9', 0.09, "fallback", "JSON cut short, closed"),
    # nothing usable: the documented default 0 (so retrieve-then-read); a JSON object without a
    # numeric confidence is not searched as free text
    ('{"answer": "Stanley", "confidence": "35"}', 0.0, "failed", "JSON without a usable value"),
    ('{"answer": "Stanley"}', 0.0, "failed", "JSON without a usable value"),
    ("I do not know.", 0.0, "failed", "no JSON object; free text: no confidence number"),
])
def test_confidence_json_fallbacks(reply, confidence, status, how):
    method, _ = scripted(lambda q, structured: reply)
    ans = method.answer(Q)
    assert ans.error is None
    assert conf_step(ans).outputs["confidence"] == pytest.approx(confidence, abs=1e-12)
    assert records(ans, "confidence") == [(status, how)]
    noted = any("treated as 0" in e["message"] for e in conf_step(ans).events)
    assert noted is (status == "failed")
    if status == "failed":
        assert self_dc_nodes(ans)[0].outputs["route"] == "retrieve-then-read"


def test_confidence_schema_ignored_by_the_server_is_a_fallback():
    class Ignoring(ScriptedLLM):
        def _complete(self, request):
            gen = super()._complete(request)
            gen.schema_ignored = request.schema is not None
            return gen

    llm = Ignoring(replies=lambda r: '{"answer": "Stanley", "confidence": 90}' if r.text().startswith("Please read")
                   else " Stanley", capabilities=CAPS)
    ans = SelfDC(llm, POOL, SelfDCConfig()).answer(Q)
    assert records(ans, "confidence") == [("fallback", "JSON in a reply the server did not constrain")]
    assert conf_step(ans).outputs["confidence"] == 0.9


@pytest.mark.parametrize("caps, mode", [(CAPS, "off"), ({GENERATE}, "auto")])
def test_confidence_free_text_prompt_is_the_papers(caps, mode):
    method, llm = scripted(lambda q, structured: " Stanley\nConfidence (0-100): 90%", caps=caps, structured=mode)
    ans = method.answer(Q)
    assert ans.error is None
    (request,) = requests_of(llm, "Please read the question, give the answer")
    assert request.schema is None and request.schema_dict() is None
    assert request.prompt == VERB_CONFIDENCE_PROMPT.format(question=Q) and request.prompt.endswith("percentage.\nAnswer:")
    assert request.max_tokens == 48 and request.stop == ("\nQuestion:",)
    assert conf_step(ans).outputs == {"raw": " Stanley\nConfidence (0-100): 90%", "answer": "Stanley", "confidence": 0.9}
    assert records(ans, "confidence") == [("direct", "Confidence line")]
    assert not any(r.schema for r in llm.requests)


@pytest.mark.parametrize("reply, confidence, status, how", [
    (" Stanley\nConfidence (0-100): 80", 0.8, "direct", "Confidence line"),
    (" Stanley\nconfidence: 0.7", 0.7, "fallback", "Confidence line (a fraction)"),  # the scale is 0-100
    (" Stanley Confidence: 95", 0.95, "fallback", "number after 'confidence'"),  # not on a line of its own
    (" Your answer is correct and your confidence level is 80%.", 0.8, "fallback", "number after 'confidence'"),
    (" Stanley\nI am 60% sure.", 0.6, "fallback", "a percentage"),
    (" Stanley\nConfidence (0-100): [Your confidence level]", 0.0, "failed", "no confidence number"),
])
def test_confidence_free_text_records(reply, confidence, status, how):
    method, _ = scripted(lambda q, structured: reply, structured="off")
    ans = method.answer(Q)
    assert conf_step(ans).outputs["confidence"] == pytest.approx(confidence)
    assert records(ans, "confidence") == [(status, how)]


def test_structured_on_without_the_capability_is_an_error():
    method, llm = scripted(lambda q, structured: " Stanley\nConfidence (0-100): 90%", caps={GENERATE}, structured="on")
    ans = method.answer(Q)
    assert ans.error is not None and "structured" in ans.error
    assert "Self-DC confidence" in ans.error and "structured=auto or off" in ans.error
    assert llm.requests == []


class LogprobLLM(ScriptedLLM):
    """A scripted LLM that also returns token log-probabilities: ``logprob`` for every word of a
    reply to a request that asks for them (so the 'prob' confidence is exp(logprob))."""

    def __init__(self, replies: Callable[[GenerationRequest], str], logprob: float, caps: set[str]) -> None:
        super().__init__(replies=replies, capabilities={GENERATE, LOGPROBS, *caps})
        self._logprob = logprob

    def _complete(self, request: GenerationRequest) -> Generation:
        gen = super()._complete(request)
        if request.logprobs:
            gen.completions = [replace(c, tokens=c.text.split(), logprobs=[self._logprob] * len(c.text.split()))
                               for c in gen.completions]
        return gen


def test_prob_confidence_sends_no_schema_and_records_no_parse():
    llm = LogprobLLM(lambda r: " Stanley", math.log(0.1), {STRUCTURED})
    method = SelfDC(llm, POOL, SelfDCConfig(confidence="prob", structured="on"))
    ans = method.answer("Who wrote it?")  # mean probability 0.1: retrieve-then-read, no decomposition
    assert ans.error is None
    (request,) = [r for r in llm.requests if r.logprobs]
    assert request.schema is None
    assert records(ans, "confidence") == [] and conf_step(ans).outputs["confidence"] == pytest.approx(0.1)


# -- the decomposition -------------------------------------------------------------------------------------
def uncertain(q: str, structured: bool) -> str:
    """Q is uncertain (40: decompose), S1 unknown (10: retrieve), S2 known (90: generate)."""
    value = {Q: 40, S1: 10, S2: 90}.get(q, 40)
    return f'{{"answer": "X", "confidence": {value}}}' if structured else f" X\nConfidence (0-100): {value}%"


def test_decomposition_json_request_direct_record_and_free_text_transcript():
    reply = f'{{"subquestions": ["#1: {S1}", "{S2} (the key part)"]}}'
    method, llm = scripted(uncertain, reply, max_subquestions=3)
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    (request,) = [r for r in requests_of(llm, "Please read the question, divide") if question_of(r) == Q]
    assert request.schema_dict() == decomposition_schema(3) == {
        "type": "object",
        "properties": {"subquestions": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 3}},
        "required": ["subquestions"], "additionalProperties": False}
    assert request.prompt == DECOMPOSE_PROMPT.format(question=Q).removesuffix("\nAnswer:") + "\n" + \
        'Reply with one JSON object of this form: {"subquestions": ["[sub-question 1]", "[sub-question 2]"]}'
    assert request.prompt.endswith(DECOMPOSE_JSON_TAIL) and request.max_tokens == 160
    dec = ans.trace.root.find("decompose")[0]
    assert dec.outputs["subquestions"] == [S1, S2]
    assert records(ans, "subquestions") == [("direct", "json")]
    assert records(ans, "confidence") == [("direct", "json")] * 3
    # the combine prompt shows the sub-questions and answers in the paper's text form
    (combine,) = requests_of(llm, "Question:")
    assert combine.schema is None
    assert f"Here are all related sub-questions and corresponding answers:\n{S1} Mountrail County\n{S2} Stanley\n" \
        in combine.prompt


@pytest.mark.parametrize("reply, subs, status, how", [
    # free text under the schema: the paper's parser
    (f"#1: {S1}, #2: {S2}", [S1, S2], "fallback", "no JSON object; free text: #k: items"),
    # cut by max_tokens in the second item: closed, what was written
    (f'{{"subquestions": ["{S1}", "What is the seat of Mou', [S1, "What is the seat of Mou"], "fallback",
     "JSON cut short, closed"),
    # nothing usable: undivided, so retrieve-then-read
    ("I cannot divide this question.", [], "failed", "no JSON object; free text: no #k: items and no list"),
    ('{"subquestion": "Who?"}', [], "failed", "JSON without a usable value"),
])
def test_decomposition_json_fallbacks(reply, subs, status, how):
    method, _ = scripted(uncertain, reply)
    ans = method.answer(Q)
    assert ans.error is None
    assert ans.trace.root.find("decompose")[0].outputs["subquestions"] == subs
    assert records(ans, "subquestions")[0] == (status, how)
    top = self_dc_nodes(ans)[0]
    if subs:
        assert top.outputs["route"] == "decompose"
    else:
        assert (top.outputs["route"], top.outputs["reason"]) == ("retrieve-then-read", "single sub-question")


def test_decomposition_json_list_is_cut_to_max_subquestions():
    items = ", ".join(f'"Who is person {i}?"' for i in range(1, 8))
    assert subquestions_from_json({"subquestions": [f"Who is person {i}?" for i in range(1, 8)]}, 2) == \
        ["Who is person 1?", "Who is person 2?"]
    method, _ = scripted(uncertain, f'{{"subquestions": [{items}]}}', max_subquestions=5, depth=1)
    ans = method.answer(Q)
    assert ans.trace.root.find("decompose")[0].outputs["subquestions"] == [f"Who is person {i}?" for i in range(1, 6)]


@pytest.mark.parametrize("caps, mode", [(CAPS, "off"), ({GENERATE}, "auto")])
def test_decomposition_free_text_prompt_is_the_papers(caps, mode):
    method, llm = scripted(uncertain, f" #1: {S1}, #2: {S2}", caps=caps, structured=mode)
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    (request,) = [r for r in requests_of(llm, "Please read the question, divide") if question_of(r) == Q]
    assert request.schema is None and request.prompt == DECOMPOSE_PROMPT.format(question=Q)
    assert request.max_tokens == 120 and request.stop == ("\nQuestion:", "\n\n\n")
    assert records(ans, "subquestions") == [("direct", "#k: items")]


@pytest.mark.parametrize("reply, subs, status, how", [
    (f" #1: {S1}\n#2: {S2}", [S1, S2], "direct", "#k: items"),
    (f"1. {S1}\n2. {S2}", [S1, S2], "fallback", "a numbered or bulleted list"),
    (f"- {S1}\n- {S2}", [S1, S2], "fallback", "a numbered or bulleted list"),
    ("The territory containing Bansaan Island is located at the island of Bansaan.", [], "failed",
     "no #k: items and no list"),
    ("", [], "failed", "no #k: items and no list"),
])
def test_decomposition_free_text_records(reply, subs, status, how):
    method, _ = scripted(uncertain, reply, structured="off")
    ans = method.answer(Q)
    assert ans.trace.root.find("decompose")[0].outputs["subquestions"] == subs
    assert records(ans, "subquestions") == [(status, how)]


def test_decomposition_structured_on_without_the_capability_is_an_error():
    # the confidence step is 'prob' (no schema), so the decomposition is the first step that needs one
    llm = LogprobLLM(lambda r: " Stanley", math.log(0.6), set())  # c = 0.6: decompose
    ans = SelfDC(llm, POOL, SelfDCConfig(confidence="prob", structured="on")).answer(Q)
    assert ans.error is not None and "Self-DC decompose" in ans.error
    assert not any(r.text().startswith("Please read the question, divide") for r in llm.requests)


# -- the readers, one by one -------------------------------------------------------------------------------
def test_readers_directly():
    assert confidence_from_json({"answer": " Stanley ", "confidence": 100}) == (1.0, "Stanley")
    assert confidence_from_json({"answer": "x", "confidence": 0.8}) == (0.8, "x")   # a fraction, as "0.8" in text
    assert confidence_from_json({"answer": "x", "confidence": 250}) == (1.0, "x")   # clamped
    assert confidence_from_json({"answer": "x", "confidence": True}) is None
    assert confidence_from_json({"answer": "x"}) is None
    assert read_verbal_confidence("Answer: Paris\nConfidence (0-100): 75%").value == (0.75, "Paris")
    assert read_verbal_confidence("Answer: Paris").status == "failed"
    assert subquestions_from_json({"subquestions": ["1. Who is A?", "- Who is B? (b)", "who is a?", 3, ""]}) == \
        ["Who is A?", "Who is B?"]
    assert subquestions_from_json({"subquestions": ["1.5 million people live where?"]}) == ["1.5 million people live where?"]
    assert subquestions_from_json({"subquestions": "Who?"}) is None
    assert read_subquestions("#1: A?, #2: B?").value == ["A?", "B?"]


def test_decomposition_schema_asks_for_two_parts_at_least():
    from hopqa.methods.self_dc import decomposition_schema

    assert decomposition_schema(5)["properties"]["subquestions"]["minItems"] == 2
    assert decomposition_schema(1)["properties"]["subquestions"] == {"type": "array", "items": {"type": "string"},
                                                                     "minItems": 1, "maxItems": 1}
