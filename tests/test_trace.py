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


# -- live observation (the service's streamed trace) -----------------------------------------------------
def test_observe_reports_each_step_as_it_opens_and_closes_and_nests_like_the_trace():
    from concurrent.futures import ThreadPoolExecutor

    from hopqa.trace import child_step, observe, submit, within

    events: list[dict] = []
    with observe(events.append):
        trace = Trace(question="q")
    with trace.activate():
        with step("plan") as s:
            s.output(steps=2)
            with step("retrieve", query="a"):
                pass
        nodes = [child_step("node", i=i) for i in range(3)]

        def review(node):
            with within(node), step("review"):
                pass

        with ThreadPoolExecutor(2) as pool:
            for f in [submit(pool, review, n) for n in nodes]:
                f.result()
        with within(nodes[0]):  # entered again: closes again
            nodes[0].output(action="accept")
    opened = {e["id"]: e for e in events if e["event"] == "open"}
    # every step of the final trace was announced once, with its parent, before it closed
    final = {s.id: s for s in trace.root.walk()}
    assert set(opened) == set(final)
    parents = {c.id: p.id for p in trace.root.walk() for c in p.children}
    assert all(opened[i]["parent"] == parents.get(i) for i in opened)
    for i in final:
        first_open = next(n for n, e in enumerate(events) if e["id"] == i and e["event"] == "open")
        closes = [n for n, e in enumerate(events) if e["id"] == i and e["event"] == "close"]
        assert closes and first_open < closes[0]
        if opened[i]["parent"] is not None:  # a child opens after its parent
            assert first_open > next(n for n, e in enumerate(events) if e["id"] == opened[i]["parent"])
    last = [e for e in events if e["id"] == nodes[0].id and e["event"] == "close"][-1]
    assert last["outputs"] == {"action": "accept"} and "children" not in last
    plan_close = next(e for e in events if e["event"] == "close" and e["kind"] == "plan")
    assert plan_close["outputs"] == {"steps": 2} and plan_close["parent"] == trace.root.id
    assert events[-1]["event"] == "close" and events[-1]["id"] == trace.root.id
    json.dumps(events)  # plain JSON, ready to stream


def test_observer_errors_are_ignored_and_traces_outside_observe_report_nothing():
    from hopqa.trace import observe

    def broken(event):
        raise RuntimeError("observer down")

    with observe(broken):
        trace = Trace(question="q")
    with trace.activate(), step("read") as s:
        s.output(answer="x")
    assert trace.root.children[0].outputs == {"answer": "x"}
    seen: list[dict] = []
    with observe(seen.append):
        pass
    other = Trace(question="q")
    with other.activate(), step("read"):
        pass
    assert seen == []
