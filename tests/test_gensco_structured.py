"""GenSco's structured step (issue 16): the generator's next sub-question under a JSON schema,
its fallbacks to the free-text parser, Table 7's exact prompt with ``structured=off`` (or a
backend without ``STRUCTURED``), the error of ``structured=on`` on a backend that cannot, and
the repeated-sub-question remedy (``repeat_retries``) with exact requests and trace values."""

from __future__ import annotations

import re

import pytest

from hopqa.llm.base import GENERATE, STRUCTURED, GenerationRequest
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.base import MethodError
from hopqa.methods.gensco import GenSco, GenScoConfig
from hopqa.methods.gensco.method import (
    FIN,
    read_subquestion,
    subquestion_from_json,
    subquestion_key,
)
from hopqa.methods.gensco.prompts import (
    DECOMPOSE_INSTRUCTION,
    DECOMPOSE_PROMPT,
    DECOMPOSE_SHOTS,
    SUBQUESTION_SCHEMA,
)
from hopqa.text import render_passage
from hopqa.types import Answer

from tests.test_gensco import PASSAGES, POOL, Q, Q1, Q2  # the same toy pool and questions

CAPS = {GENERATE, STRUCTURED}
HEAD = f"{DECOMPOSE_INSTRUCTION}\n\n{DECOMPOSE_SHOTS}\n\nQuestion: {Q}\n"
HISTORY_1 = f"Subquestion 1: {Q1}\nSubcontext 1: {render_passage(PASSAGES[1])}\n"


def json_cue(level: int) -> str:
    if level == 1:  # the decomposition has not started: no end signal offered
        return 'Write Subquestion 1. Reply with one JSON object of this form: {"subquestion": "[the first subquestion]"}'
    return (f'Write Subquestion {level}, or "<FIN></FIN>" if no more subquestion could be drawn. '
            'Reply with one JSON object of this form: {"subquestion": "[the next subquestion, or <FIN></FIN>]"}')


def overlap_scorer(context: str, continuation: str) -> list[float]:
    """-0.1 per continuation word found in the candidate passage (the last context line), else -3."""
    candidate = context.rsplit("\nQuestion:", 1)[0].splitlines()[-1].lower()
    return [-0.1 if w in candidate else -3.0 for w in re.findall(r"\w+", continuation.lower())]


def gensco(replies: list[str], caps: set[str] | None = None, **cfg: object) -> tuple[GenSco, ScriptedLLM]:
    """GenSco on a scripted generator: the decomposition prompts get ``replies`` in order (then
    the end signal), the answer prompt " Stanley"; the scorer is ``overlap_scorer``."""
    def reply(request: GenerationRequest) -> str:
        t = request.text()
        if t.startswith("I am going to give you a question"):
            if replies:
                return replies.pop(0)
            return '{"subquestion": "<FIN></FIN>"}' if request.schema else "<FIN></FIN>"
        if t.startswith("Answer the question given the context"):
            return " Stanley"
        raise AssertionError(t[:80])

    llm = ScriptedLLM(replies=reply, scorer=overlap_scorer, capabilities=CAPS if caps is None else caps)
    return GenSco(llm, POOL, GenScoConfig(shots=0).update(**cfg)), llm


def decompositions(llm: ScriptedLLM) -> list[GenerationRequest]:
    return [r for r in llm.requests if r.text().startswith("I am going to give you a question")]


def records(ans: Answer) -> list[tuple[str, str]]:
    """(status, how) of every parse record of the sub-question, in order."""
    assert ans.trace is not None
    return [(e["status"], e["how"]) for s in ans.trace.root.walk() for e in s.events
            if e["message"] == "parse" and e["field"] == "subquestion"]


def select(ans: Answer) -> dict:
    assert ans.trace is not None
    return ans.trace.root.find("select")[0].outputs


def levels(ans: Answer) -> list[dict]:
    assert ans.trace is not None
    return [s.outputs for s in ans.trace.root.find("level")]


# -- the structured step -----------------------------------------------------------------------------------
def test_json_requests_direct_records_and_free_text_history():
    method, llm = gensco([f'{{"subquestion": "{Q1}"}}', f'{{"subquestion": "Subquestion 2: {Q2}"}}',
                          '{"subquestion": "<FIN></FIN>"}'])
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    assert [p.id for p in ans.passages] == ["a", "b"]
    assert select(ans)["stop_reason"] == "<FIN></FIN>" and select(ans)["subquestions"] == [Q1, Q2]
    first, second, third = decompositions(llm)
    assert SUBQUESTION_SCHEMA == {"type": "object", "properties": {"subquestion": {"type": "string"}},
                                  "required": ["subquestion"], "additionalProperties": False}
    assert all(r.schema_dict() == SUBQUESTION_SCHEMA for r in (first, second, third))
    assert first.prompt == HEAD + json_cue(1)
    # the history the generator sees stays the paper's text, the JSON sub-question written back as text
    assert second.prompt == HEAD + HISTORY_1 + json_cue(2)
    assert third.prompt.endswith(f"Subquestion 2: {Q2}\nSubcontext 2: {render_passage(PASSAGES[2])}\n" + json_cue(3))
    assert first.max_tokens == 64 and first.stop == () and first.temperature == 0.0 and first.seed is None
    assert records(ans) == [("direct", "json")] * 3
    assert levels(ans)[0]["raw"] == f'{{"subquestion": "{Q1}"}}' and levels(ans)[2]["subquestion"] is None


@pytest.mark.parametrize("reply, subquestion, stop, record", [
    # free text under the schema (a server that did not constrain it): the paper's parser
    (f"Subquestion 1: {Q1}", Q1, "max_levels (1)", ("fallback", "no JSON object; free text: echoed label removed")),
    ("<FIN></FIN>", None, "<FIN></FIN>", ("fallback", "no JSON object; free text: <FIN></FIN>")),
    # cut by max_tokens: closed, what was written
    ('{"subquestion": "Which county is Van Hook Township in', "Which county is Van Hook Township in",
     "max_levels (1)", ("fallback", "JSON cut short, closed")),
    # an empty sub-question ends the walk, as an empty free-text reply does
    ('{"subquestion": ""}', None, "empty sub-question", ("direct", "json")),
    # JSON without the field: nothing to score
    ('{"question": "Who?"}', None, "empty sub-question", ("failed", "JSON without a usable value")),
    ("", None, "empty sub-question", ("failed", "no JSON object; free text: empty reply")),
])
def test_json_fallbacks(reply, subquestion, stop, record):
    method, _ = gensco([reply], max_levels=1)
    ans = method.answer(Q)
    assert ans.error is None
    assert levels(ans)[0]["subquestion"] == subquestion and select(ans)["stop_reason"] == stop
    assert records(ans) == [record]
    assert [p.id for p in ans.passages] == (["a"] if subquestion else [])


@pytest.mark.parametrize("caps, mode", [(CAPS, "off"), ({GENERATE}, "auto")])
def test_free_text_prompt_is_table_7(caps, mode):
    method, llm = gensco([f" {Q1}", f"Question: {Q2}", "<FIN></FIN>"], caps=caps, structured=mode)
    ans = method.answer(Q)
    assert ans.error is None and [p.id for p in ans.passages] == ["a", "b"]
    first, second, _ = decompositions(llm)
    assert first.schema is None and second.schema is None
    assert first.prompt == DECOMPOSE_PROMPT.format(instruction=DECOMPOSE_INSTRUCTION, shots=DECOMPOSE_SHOTS,
                                                   question=Q, history="", level=1) == HEAD + "Subquestion 1:"
    assert second.prompt == HEAD + HISTORY_1 + "Subquestion 2:"
    assert first.max_tokens == 48 and first.stop == ("\nSubcontext", "\n\n", "\nQuestion:")
    assert records(ans) == [("direct", "first line"), ("fallback", "echoed label removed"), ("direct", FIN)]


@pytest.mark.parametrize("reply, value, status, how", [
    (" Who is X?", "Who is X?", "direct", "first line"),
    ("<FIN></FIN>", FIN, "direct", FIN),
    ("FIN", FIN, "fallback", "FIN spelled otherwise"),
    ("Subquestion 2: <FIN></FIN>", FIN, "fallback", "echoed label removed"),
    ("Question: Who is X?", "Who is X?", "fallback", "echoed label removed"),
    ("Sub-question 2: Question: Who is X?", "Who is X?", "fallback", "echoed label removed"),
    ("Who is X? Subcontext 2: X is Y.", "Who is X?", "fallback", "cut at the next label"),
    ("Question: What is Q?\nSubquestion 1: Who is X?", "Who is X?", "fallback",
     "the Subquestion line under an echoed Question line"),
    ("Subquestion 2:", None, "failed", "echoed label removed; nothing after the label"),
    ("\n\n", None, "failed", "empty reply"),
])
def test_read_subquestion_records(reply, value, status, how):
    parsed = read_subquestion(reply)
    assert (parsed.value, parsed.status, parsed.how) == (value, status, how)


def test_subquestion_from_json():
    assert subquestion_from_json({"subquestion": "  Question: Who is\nX? "}) == "Who is X?"
    assert subquestion_from_json({"subquestion": "<fin></fin>"}) == FIN
    assert subquestion_from_json({"subquestion": ""}) == ""
    assert subquestion_from_json({"subquestion": 3}) is None and subquestion_from_json({}) is None


def test_structured_on_without_the_capability_is_an_error():
    method, llm = gensco([Q1], caps={GENERATE}, structured="on")
    ans = method.answer(Q)
    assert ans.error is not None and "GenSco decomposition" in ans.error and "structured=auto or off" in ans.error
    assert decompositions(llm) == []


# -- repeated sub-questions ----------------------------------------------------------------------------------
def test_repeats_are_compared_without_labels_case_and_punctuation():
    assert subquestion_key(f"Question: {Q1}") == subquestion_key(Q1) == "which county is van hook township in"
    assert subquestion_key("Subquestion 2: Question: WHICH county is Van Hook township in!") == subquestion_key(Q1)
    assert subquestion_key(Q2) != subquestion_key(Q1)
    # the paper's rule by default: the first repeat stops the walk, one passage, no resampling
    method, llm = gensco([Q1, f"Question: {Q1.upper()[:-1]}!", Q2], structured="off")
    ans = method.answer(Q)
    assert GenScoConfig().repeat_retries == 0
    assert select(ans)["stop_reason"] == "repeated sub-question" and [p.id for p in ans.passages] == ["a"]
    assert len(decompositions(llm)) == 2 and "retries" not in levels(ans)[1]
    assert levels(ans)[1]["subquestion"] == Q1.upper()[:-1] + "!"


def test_repeat_retries_resample_until_a_new_subquestion():
    method, llm = gensco([Q1, f"Question: {Q1}", f"Subquestion 2: {Q1}", Q2, "<FIN></FIN>"], repeat_retries=3, seed=7,
                         structured="off")
    ans = method.answer(Q)
    assert ans.error is None and [p.id for p in ans.passages] == ["a", "b"]
    assert select(ans)["stop_reason"] == "<FIN></FIN>" and select(ans)["subquestions"] == [Q1, Q2]
    reqs = decompositions(llm)
    assert len(reqs) == 5  # level 1, level 2 and two retries, level 3
    level2 = reqs[1:4]
    assert {r.prompt for r in level2} == {HEAD + HISTORY_1 + "Subquestion 2:"}  # the same prompt, resampled
    assert [(r.temperature, r.seed) for r in level2] == [(0.0, None), (0.5, 8), (0.5, 9)]
    assert (reqs[4].temperature, reqs[4].seed) == (0.0, None)  # the next level is greedy again
    lv2 = levels(ans)[1]
    assert lv2["repeated"] == Q1 and lv2["subquestion"] == Q2 and lv2["chosen"] == "b"
    assert lv2["retries"] == [{"raw": f"Subquestion 2: {Q1}", "subquestion": Q1, "seed": 8},
                              {"raw": Q2, "subquestion": Q2, "seed": 9}]
    assert records(ans) == [("direct", "first line"), ("fallback", "echoed label removed"),
                            ("fallback", "echoed label removed"), ("direct", "first line"), ("direct", FIN)]


def test_repeat_retries_are_bounded_and_then_stop_on_the_repeat():
    method, llm = gensco([Q1, Q1, f"{Q1}?", "", Q2], repeat_retries=2, repeat_temperature=0.8, structured="off")
    ans = method.answer(Q)
    assert select(ans)["stop_reason"] == "repeated sub-question" and [p.id for p in ans.passages] == ["a"]
    reqs = decompositions(llm)
    assert [(r.temperature, r.seed) for r in reqs] == [(0.0, None), (0.0, None), (0.8, 1), (0.8, 2)]
    lv2 = levels(ans)[1]
    assert lv2["subquestion"] == Q1 and lv2["stop"] == "repeated sub-question" and "scores" not in lv2
    assert [r["subquestion"] for r in lv2["retries"]] == [f"{Q1}?", None]
    assert ans.trace is not None
    assert any("every one of 2 resampled" in e["message"] for e in ans.trace.root.find("level")[1].events)


def test_restated_retries_ask_again_for_a_subquestion_that_restates_the_question():
    """``restated_retries`` (the small-model preset): a first sub-question that is the question
    itself is re-asked at ``repeat_temperature``; a resample that restates it again is passed
    over; with none better the restatement is kept, as the paper's walk would."""
    method, llm = gensco([f" {Q.upper()}", f"Question: {Q}", Q1, Q2, "<FIN></FIN>"], restated_retries=3, seed=4,
                         structured="off")
    ans = method.answer(Q)
    assert ans.error is None and select(ans)["subquestions"] == [Q1, Q2] and [p.id for p in ans.passages] == ["a", "b"]
    reqs = decompositions(llm)
    assert [(r.temperature, r.seed) for r in reqs] == [(0.0, None), (0.5, 5), (0.5, 6), (0.0, None), (0.0, None)]
    assert len({r.prompt for r in reqs[:3]}) == 1  # the level-1 prompt, resampled
    lv1 = levels(ans)[0]
    assert lv1["restated"] == Q.upper() and lv1["subquestion"] == Q1
    assert [t["subquestion"] for t in lv1["restated_retries"]] == [Q, Q1]
    # every resample restates it: kept, and the walk goes on with it
    method, llm = gensco([Q, Q, Q, Q2], restated_retries=2, structured="off")
    ans = method.answer(Q)
    assert select(ans)["subquestions"][:2] == [Q, Q2]
    assert any("the restatement is kept" in e["message"] for e in ans.trace.root.find("level")[0].events)
    # off by default (the paper's walk): no re-ask
    method, llm = gensco([Q, Q2], structured="off")
    assert select(method.answer(Q))["subquestions"] == [Q, Q2] and len(decompositions(llm)) == 3


def test_gensco_small_model_preset():
    from hopqa.methods.base import method_config

    cfg = method_config("gensco-stop", preset="small-model")
    assert (cfg.variant, cfg.stop_from_level, cfg.restated_retries, cfg.repeat_retries, cfg.answer) == (
        "stop", 3, 2, 2, "short")
    assert method_config("gensco-max", preset="small-model").variant == "max"  # the variant's own default stays


def test_repeat_retry_that_ends_the_decomposition_stops_on_fin():
    method, llm = gensco([Q1, Q1, "<FIN></FIN>", Q2], repeat_retries=3, structured="off")
    ans = method.answer(Q)
    assert select(ans)["stop_reason"] == "<FIN></FIN>" and [p.id for p in ans.passages] == ["a"]
    assert len(decompositions(llm)) == 3 and levels(ans)[1]["subquestion"] is None


def test_repeat_retries_under_the_schema():
    method, llm = gensco([f'{{"subquestion": "{Q1}"}}', f'{{"subquestion": "Question: {Q1}"}}',
                          f'{{"subquestion": "{Q2}"}}'], repeat_retries=1)
    ans = method.answer(Q)
    assert [p.id for p in ans.passages] == ["a", "b"]
    reqs = decompositions(llm)
    assert [(r.temperature, r.seed) for r in reqs[:3]] == [(0.0, None), (0.0, None), (0.5, 1)]
    assert reqs[2].schema_dict() == SUBQUESTION_SCHEMA and reqs[2].prompt == HEAD + HISTORY_1 + json_cue(2)


def test_repeat_options_are_checked():
    with pytest.raises(MethodError, match="repeat_retries"):
        GenScoConfig(repeat_retries=11)
    with pytest.raises(MethodError, match="repeat_temperature"):
        GenScoConfig(repeat_temperature=0.0)
    assert GenScoConfig(repeat_retries=10, repeat_temperature=2.0).repeat_retries == 10
