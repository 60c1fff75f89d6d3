"""The trace tree: nesting, errors, JSON round trips, rendering."""

from __future__ import annotations

import json

import pytest

from hopqa.trace import Trace, step
from hopqa.types import Answer, Passage, Usage


def build() -> Trace:
    t = Trace(question="Who?", method="demo")
    with t.activate():
        with step("retrieve", query="who") as s:
            s.add_retrieval({"query": "who", "passages": [{"id": "1"}]})
            s.output(passages=[Passage(id="1", title="T", text="x")])
        with step("read") as s:
            s.add_llm_call({"prompt": "p", "outputs": ["A"]})
            with step("parse") as inner:
                inner.note("fell back to first line")
            s.output(answer="A")
    return t


def test_nesting_and_outputs():
    t = build()
    kinds = [s.kind for s in t.steps()]
    assert kinds == ["question", "retrieve", "read", "parse"]
    assert t.root.find("retrieve")[0].outputs["passages"][0]["title"] == "T"
    assert len(t.llm_calls()) == 1


def test_json_round_trip_is_lossless():
    t = build()
    again = Trace.from_json(t.to_json())
    assert again.to_dict() == t.to_dict()
    assert json.loads(again.to_json())["children"][1]["children"][0]["events"][0]["message"] == "fell back to first line"


def test_error_is_recorded_and_reraised():
    t = Trace(question="q")
    with pytest.raises(ValueError):
        with t.activate():
            with step("bad"):
                raise ValueError("nope")
    assert t.root.find("bad")[0].error == "ValueError: nope"
    assert t.root.error == "ValueError: nope"


def test_render_mentions_steps_and_events():
    text = build().render()
    assert "- retrieve" in text and "! fell back to first line" in text and "out answer: A" in text


def test_answer_round_trip():
    a = Answer(question="q", answer="a", method="m", passages=[Passage("1", "T", "x", 1.5, True)],
               trace=build(), usage=Usage(llm_calls=2, prompt_tokens=10))
    b = Answer.from_dict(json.loads(json.dumps(a.to_dict())))
    assert b.to_dict() == a.to_dict()
    assert b.passages[0].is_supporting is True and b.usage.llm_calls == 2


def test_step_outside_a_trace_does_not_fail():
    with step("free") as s:
        s.output(x=1)
    assert s.outputs == {"x": 1}


def test_child_step_is_entered_later_from_any_thread():
    import threading

    from hopqa.trace import child_step, current_step, step, within

    trace = Trace(question="q")
    with trace.activate():
        with step("tree") as tree:
            kids = [child_step("node", i=i) for i in range(3)]
            assert [k.inputs["i"] for k in tree.children] == [0, 1, 2] and current_step() is tree

            def work(k):
                with within(k):
                    assert current_step() is k
                    with step("expand"):
                        pass

            threads = [threading.Thread(target=work, args=(k,)) for k in kids]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            with pytest.raises(RuntimeError), within(kids[0]):
                raise RuntimeError("boom")
    assert all([c.kind for c in k.children] == ["expand"] for k in kids)
    assert kids[0].error == "RuntimeError: boom" and kids[1].error is None and kids[0].started > 0
