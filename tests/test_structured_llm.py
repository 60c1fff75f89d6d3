"""Structured generation as an LLM capability (``schema=``), the reader every method's
structured steps use (``hopqa.methods.structured``) and the parse records in the trace."""

from __future__ import annotations

import json

import pytest

from hopqa.llm import GENERATE, STRUCTURED, CachedLLM, GenerationRequest, LLMError, ResponseCache, UnsupportedCapability
from hopqa.llm.base import request_key
from hopqa.llm.openai import OpenAICompatibleLLM, OpenAIConfig
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.structured import (
    direct,
    failed,
    fallback,
    json_reply,
    loads_object,
    object_schema,
    read,
    string_list,
    use_schema,
)
from hopqa.runtime import traced_llm
from hopqa.trace import Trace, parse_counts
from fault_server import FaultServer

SCHEMA = object_schema({"steps": string_list(3), "answer": {"type": "string"}})


# -- the request -------------------------------------------------------------------------------
def test_schema_is_json_text_in_its_property_order_and_part_of_the_cache_key():
    a = GenerationRequest.make("q", schema={"type": "object", "properties": {"x": {"type": "string"}, "a": {}}})
    b = GenerationRequest.make("q", schema={"type": "object", "properties": {"x": {"type": "string"}, "a": {}}})
    swapped = GenerationRequest.make("q", schema={"type": "object", "properties": {"a": {}, "x": {"type": "string"}}})
    # the model writes properties in the schema's order (reasoning before the answer): kept, never sorted
    assert a.schema == '{"type": "object", "properties": {"x": {"type": "string"}, "a": {}}}'
    assert list(a.schema_dict()["properties"]) == ["x", "a"]
    free = GenerationRequest.make("q")
    assert "schema" not in free.key_dict()  # free-text requests keep their old cache keys
    keys = {request_key({"m": 1}, "generate", r.key_dict()) for r in (a, b, swapped, free)}
    assert len(keys) == 3


def test_schema_needs_the_capability():
    llm = ScriptedLLM(replies=["x"])
    with pytest.raises(UnsupportedCapability, match="structured"):
        llm.generate("q", schema=SCHEMA)
    assert llm.requests == []


def test_cached_and_traced_like_every_call(tmp_path):
    inner = ScriptedLLM(replies=['{"steps": [], "answer": "a"}', "free"], capabilities={GENERATE, STRUCTURED})
    llm = CachedLLM(inner, ResponseCache(tmp_path))
    traced = traced_llm(llm)
    trace = Trace(question="q")
    with trace.activate():
        assert traced.generate("q", schema=SCHEMA).text == '{"steps": [], "answer": "a"}'
        assert traced.generate("q", schema=SCHEMA).cached
        assert traced.generate("q").text == "free"  # a different request: not the schema's entry
    calls = trace.llm_calls()
    assert calls[0]["params"]["schema"] == SCHEMA and calls[1]["cached"] and "schema" not in calls[2]["params"]
    assert len(inner.requests) == 2


# -- the OpenAI-compatible backend -------------------------------------------------------------------
def _reply(prompt: str) -> str:
    return '{"steps": ["s1"], "answer": "Paris"}'


def _server_llm(server: FaultServer, options: str = "") -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(OpenAIConfig.parse(f"fake@{server.url}?retries=0&backoff=0{options}"))


def test_response_format_json_schema_is_sent():
    with FaultServer(reply=_reply) as server:
        llm = _server_llm(server)
        assert llm.supports(STRUCTURED)
        gen = llm.generate("q", schema=SCHEMA, max_tokens=50)
        assert json.loads(gen.text)["answer"] == "Paris" and not gen.schema_ignored
        sent = server.requests[0]["body"]["response_format"]
        assert sent == {"type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA, "strict": True}}
        llm.generate("free text please")
        assert "response_format" not in server.requests[1]["body"]


def test_a_server_refusing_json_schema_gets_json_object_then_remembers():
    with FaultServer(reply=_reply, response_formats={"json_object"}) as server:
        llm = _server_llm(server)
        gen = llm.generate("q", schema=SCHEMA)
        assert not gen.schema_ignored
        assert [r["kind"] for r in server.requests] == ["refused", "ok"]
        assert server.requests[1]["body"]["response_format"] == {"type": "json_object", "schema": SCHEMA}
        llm.generate("q2", schema=SCHEMA)
        assert [r["kind"] for r in server.requests] == ["refused", "ok", "ok"]  # no second refusal


def test_a_server_refusing_every_form_gets_free_text_marked_schema_ignored(tmp_path):
    with FaultServer(reply=lambda p: "Paris", response_formats=()) as server:
        llm = traced_llm(_server_llm(server))
        trace = Trace(question="q")
        with trace.activate():
            gen = llm.generate("q", schema=SCHEMA)
        assert gen.text == "Paris" and gen.schema_ignored
        assert [r["kind"] for r in server.requests] == ["refused", "refused", "ok"]
        assert "response_format" not in server.requests[2]["body"]
        assert trace.llm_calls()[0]["schema_ignored"] is True
        llm.generate("q2", schema=SCHEMA)
        assert server.requests[3]["kind"] == "ok" and "response_format" not in server.requests[3]["body"]


def test_other_refusals_are_errors_not_fallbacks():
    with FaultServer(reply=_reply, script=["http400"]) as server:  # a 400 of the request itself
        llm = _server_llm(server)
        with pytest.raises(LLMError, match="HTTP 400"):
            llm.generate("q")
    with FaultServer(reply=_reply, script=["http400"] * 3, response_formats=()) as server:
        llm = _server_llm(server)  # refused with and without response_format: the last refusal is raised
        with pytest.raises(LLMError, match="HTTP 400"):
            llm.generate("q", schema=SCHEMA)
    with FaultServer(reply=_reply, script=["http400"]) as server:
        llm = _server_llm(server)  # a 400 that does not name the format: an error, the form stays in use
        with pytest.raises(LLMError, match="bad request"):
            llm.generate("q", schema=SCHEMA)
        assert llm._format == 0 and len(server.requests) == 1
        llm.generate("q", schema=SCHEMA)
        assert server.requests[1]["body"]["response_format"]["type"] == "json_schema"


def test_structured_0_declares_no_capability():
    llm = OpenAICompatibleLLM(OpenAIConfig.parse("m@http://127.0.0.1:9/v1?structured=0"))
    assert not llm.supports(STRUCTURED)
    with pytest.raises(UnsupportedCapability, match="structured=0"):
        llm.generate("q", schema=SCHEMA)
    with pytest.raises(ValueError, match="structured"):
        OpenAIConfig.parse("m@http://127.0.0.1:9/v1?structured=maybe")


# -- reading a completion ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, obj, repaired", [
    ('{"a": [1, 2]}', {"a": [1, 2]}, False),
    ('Sure! ```json\n{"a": "x"}\n``` done', {"a": "x"}, False),
    ('{"steps": ["a", "b', {"steps": ["a", "b"]}, True),
    ('{"steps": ["a"], "answer', {"steps": ["a"]}, True),
    ('{"answer": "Par', {"answer": "Par"}, True),
    ('{"a": 1,', {"a": 1}, True),
    ('{"a": "x\\', {"a": "x"}, True),
    ('{"a": {"b": [1, {"c": "d"', {"a": {"b": [1, {"c": "d"}]}}, True),
    ('{"a": 1, "b": tr', None, False),
    ("no json at all", None, False),
    ('{"a": 1]', None, False),
    ("[1, 2]", None, False),
    ('{"a": "x\ny"} more', {"a": "x\ny"}, False),  # a raw newline in a string (JSON forbids it): read
    ('{"a": "x\n\nQuestion: y', {"a": "x\n\nQuestion: y"}, True),
])
def test_loads_object(text, obj, repaired):
    assert loads_object(text) == (obj, repaired if obj is not None else False)


def test_loads_object_is_linear_on_huge_noise():
    text = "{" + '"a": [' * 20000 + "x" * 100000
    assert loads_object(text) == (None, False)


def _from_json(obj):
    return obj.get("answer") or None


def _parse_text(text):
    if text.startswith("Answer:"):
        return direct(text[7:].strip(), "marker")
    if text.strip():
        return fallback(text.strip(), "first line")
    return failed("empty")


@pytest.mark.parametrize("text, structured, ignored, value, status", [
    ('{"answer": "Paris"}', True, False, "Paris", "direct"),
    ('{"answer": "Par', True, False, "Par", "fallback"),
    ('{"answer": "Paris"}', True, True, "Paris", "fallback"),
    ('{"answer": ""}', True, False, None, "failed"),  # JSON without a usable value: nothing else to read
    ('{"answer": "', True, False, None, "failed"),
    ("", True, False, None, "failed"),
    ("Answer: Paris", False, False, "Paris", "direct"),
    ("Paris", False, False, "Paris", "fallback"),
    ("  ", False, False, None, "failed"),
])
def test_read_records_how_it_parsed(text, structured, ignored, value, status):
    trace = Trace(question="q")
    with trace.activate(), trace.step("plan") as step:
        parsed = read(text, structured, _from_json, _parse_text, field="answer", schema_ignored=ignored)
    assert (parsed.value, parsed.status) == (value, status)
    event = step.events[0]
    assert (event["message"], event["field"], event["status"], event["structured"]) == ("parse", "answer", status,
                                                                                          structured)
    counts = trace.parse_counts()
    assert counts[status] == 1 and sum(counts.values()) == 1


def test_a_copied_reply_example_is_no_value():
    """A value a small model copied from the reply's example (``json_reply``) is dropped before
    the step reads the object: the whole example, or its first words cut short; a real value,
    a one-word beginning of an example and other fields stay."""
    from hopqa.methods.structured import is_example, json_reply, without_examples

    json_reply({"answer": "the placeholder answer of this test, or empty", "items": ["[an item of this test]"]})
    assert is_example("The placeholder answer of this test, or empty.") and is_example("the  placeholder answer")
    assert not is_example("the placeholder") and not is_example("Paris") and not is_example("") and not is_example(3)
    # a whole bracketed example, then more (SmolLM2-135M: "[the first subquestion] }} The first subquestion is")
    assert is_example("[An item of this test] }} #1. The first item is") and is_example("[an item of this test]")
    # ... but not an unbracketed one run on (a real value may begin so), nor a bracketed example's beginning run on
    assert not is_example("the placeholder answer of this test is Paris") and not is_example("[an item of it")
    json_reply({"answer": "[two words]"})
    assert not is_example("[two words] Paris")  # under EXAMPLE_PREFIX_WORDS: a real value may follow
    obj, copied = without_examples({"answer": "the placeholder answer of this test", "items": ["[an item of this test]",
                                                                                               "Who is X?"], "n": 1})
    assert obj == {"items": ["Who is X?"], "n": 1} and copied == ["answer", "items"]
    trace = Trace(question="q")
    with trace.activate(), trace.step("final") as step:
        parsed = read('{"answer": "the placeholder answer of this test, or empty"}', True, _from_json, _parse_text,
                      field="answer")
        kept = read('{"answer": "Paris"}', True, _from_json, _parse_text, field="answer")
    assert (parsed.value, parsed.status) == (None, "failed") and parsed.how == "the reply's example copied (answer)"
    assert (kept.value, kept.status) == ("Paris", "direct")
    assert step.events[0]["status"] == "failed"


def test_parse_counts_walk_every_step():
    trace = Trace(question="q")
    with trace.activate():
        with trace.step("a") as a:
            a.record_parse("x", "direct")
            with trace.step("b") as b:
                b.record_parse("y", "failed")
                b.record_parse("y", "direct")
        trace.root.record_parse("z", "fallback")
    assert parse_counts(trace.to_dict()) == {"direct": 2, "fallback": 1, "failed": 1}
    assert parse_counts(None) == {"direct": 0, "fallback": 0, "failed": 0}
    with pytest.raises(ValueError, match="parse status"):
        trace.root.record_parse("z", "sort of")


def test_use_schema_modes():
    plain = ScriptedLLM(replies=[])
    able = ScriptedLLM(replies=[], capabilities={GENERATE, STRUCTURED})
    assert use_schema(able, "auto") and not use_schema(plain, "auto")
    assert not use_schema(able, "off") and not use_schema(plain, "off")
    assert use_schema(able, "on")
    with pytest.raises(UnsupportedCapability, match="structured=auto or off"):
        use_schema(plain, "on", who="Self-Ask's step")


def test_schema_helpers():
    assert SCHEMA == {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "string"},
                                                                 "maxItems": 3}, "answer": {"type": "string"}},
                      "required": ["steps", "answer"], "additionalProperties": False}
    assert json_reply({"answer": "..."}) == 'Reply with one JSON object of this form: {"answer": "..."}'


def test_loads_object_survives_numbers_too_long_for_int():
    assert loads_object('{"a": ' + "9" * 5000 + "}") == (None, False)
    assert loads_object('{"a": ' + "9" * 5000) == (None, False)
