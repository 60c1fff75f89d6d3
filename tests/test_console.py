"""Hops read from the trace and what ``hopqa ask`` prints (scripted LLM: exact and fast); no path
of the command prints a control character from model or corpus text."""

from __future__ import annotations

import json

import pytest

from hopqa.build import build_method
from hopqa.console import clip, render_answer, safe
from hopqa.llm.scripted import ScriptedLLM
from hopqa.retrieval.pool import CandidatePool
from hopqa.trace import Trace
from hopqa.types import Answer, Passage, Usage

POOL = CandidatePool([
    Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County, North Dakota."),
    Passage("b", "Stanley, North Dakota", "Stanley is a city in and the county seat of Mountrail County."),
    Passage("c", "Paris", "Paris is the capital of France. It is large."),
])
Q = "What is the seat of the county where Van Hook Township is located?"


def _self_ask_llm() -> ScriptedLLM:
    def reply(request):
        text = request.text()
        if text.rstrip().endswith("Answer:"):  # a follow-up read from passages
            return "Mountrail County" if "Which county" in text.rsplit("Question:", 1)[1] else "Stanley"
        if "Intermediate answer: Stanley" in text:
            return "So the final answer is: Stanley"
        if "Intermediate answer: Mountrail County" in text:
            return "Follow up: What is the county seat of Mountrail County?"
        return " Yes.\nFollow up: Which county is Van Hook Township in?"

    return ScriptedLLM(replies=reply)


def test_self_ask_hops_and_the_printed_reasoning():
    ans = build_method("self-ask", _self_ask_llm(), POOL, k=2).answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    hops = ans.hops
    assert [(h.label, h.question, h.answer, h.depth) for h in hops] == [
        ("follow-up", "Which county is Van Hook Township in?", "Mountrail County", 0),
        ("follow-up", "What is the county seat of Mountrail County?", "Stanley", 0),
    ]
    assert [p["id"] for p in hops[0].passages] == [p.id for p in POOL.search(hops[0].question, 2)]
    out = render_answer(ans, llm="scripted")
    lines = out.splitlines()
    assert lines[0] == f"Question: {Q}"
    assert lines[1] == "Method: self-ask (scripted)"
    assert lines[2] == " 1. follow-up: Which county is Van Hook Township in?"
    assert lines[3] == "    -> Mountrail County"
    assert lines[4].startswith("    passages: Van Hook Township (")
    assert lines[5] == " 2. follow-up: What is the county seat of Mountrail County?"
    assert "Answer: Stanley" in lines and lines[-1].startswith("Cost: 5 LLM calls")
    assert any(line.startswith("Read from 2 passages: ") for line in lines)
    # the hops travel with the JSON result, and a trace read back gives the same hops
    d = ans.to_dict()
    assert [h["answer"] for h in d["hops"]] == ["Mountrail County", "Stanley"]
    assert [h.to_dict() for h in Trace.from_dict(d["trace"]).hops()] == d["hops"]


def test_nested_hops_get_depth_and_own_passages():
    trace = Trace(question="q")
    with trace.activate():
        with trace.step("outer") as outer:
            outer.mark_hop("first sub-question", label="step")
            outer.add_retrieval({"query": "x", "passages": [{"id": "1", "title": "One", "score": 2.0}]})
            with trace.step("inner") as inner:
                inner.mark_hop("nested", "deep answer")
                inner.add_retrieval({"query": "y", "passages": [{"id": "2", "title": "Two", "score": 1.0}]})
            outer.mark_hop("first sub-question", "its answer")
    hops = trace.hops()
    assert [(h.question, h.answer, h.depth, h.label) for h in hops] == [
        ("first sub-question", "its answer", 0, "step"), ("nested", "deep answer", 1, "")]
    assert [p["id"] for p in hops[0].passages] == ["1"] and [p["id"] for p in hops[1].passages] == ["2"]
    text = render_answer(Answer(question="q", answer="a", method="m", trace=trace, usage=Usage()))
    assert " 1. step: first sub-question" in text and "    2. nested" in text


def test_single_step_method_lists_its_passages_not_hops():
    llm = ScriptedLLM(replies=["Stanley"])
    ans = build_method("retrieve-then-read", llm, POOL, k=2).answer(Q)
    assert ans.hops == []
    lines = render_answer(ans).splitlines()
    assert lines[2] == "Answer: Stanley" and lines[3] == "Passages:"
    assert lines[4].startswith("  [1] ")


def test_terminal_control_characters_are_not_shown():
    evil = "Stan\x1b[2J\x1b]0;pwned\x07ley\u202e\u200f!\r\x00"
    assert safe(evil) == "Stan[2J]0;pwnedley!"
    assert clip("a\n b\tc  " + "x" * 50, 10) == "a b c x..."
    ans = Answer(question="q\x1b[31m", answer=evil, method="direct", trace=Trace(question="q"))
    out = render_answer(ans)
    assert "\x1b" not in out and "\u202e" not in out and "Answer: Stan[2J]0;pwnedley!" in out
    assert ans.answer == evil  # the raw text is kept in the result and the trace


# -- every path of the hopqa command that prints model or corpus text -----------------------------
EVIL = "Stan\x1b[2J\x1b]0;pwned\x07ley\u202e\u200f\x9b31m!\r\x00"
RAW = ("\x1b", "\x07", "\u202e", "\u200f", "\x9b", "\r", "\x00")


def _is_clean(text: str) -> bool:
    return not any(c in text for c in RAW)


@pytest.fixture
def evil_cli(tmp_path, monkeypatch):
    """Run ``hopqa.cli.main`` in-process with a model that replies EVIL, over an index whose
    passage titles and texts hold control characters too; returns (run, home)."""
    import hopqa.llm
    from hopqa.cli import main
    from hopqa.retrieval.bm25 import BM25Retriever

    monkeypatch.setattr(hopqa.llm, "load_llm", lambda spec, **kw: ScriptedLLM(replies=lambda r: EVIL, name="evil"))
    index = tmp_path / "idx"
    BM25Retriever.build([Passage("e1", "Stanley\x1b[31m \u202eND", "Stanley is the county seat. \x1b[2J"),
                         Passage("e2", "Paris", "Paris is in France.")], progress=False).save(index)

    def run(*args: str) -> int:
        return main(["ask", Q, *args, "--home", str(tmp_path / "home"), "--index", str(index)])

    return run


@pytest.mark.parametrize("method", ["direct", "retrieve-then-read"])
@pytest.mark.parametrize("mode", [[], ["--trace"], ["--quiet"]])
def test_ask_never_prints_control_characters(evil_cli, capsys, method, mode):
    assert evil_cli("--method", method, "--k", "2", *mode) == 0
    out, err = capsys.readouterr()
    assert _is_clean(out) and _is_clean(err)
    assert "Stan[2J]0;pwnedley31m!" in out  # the text is shown, its controls are not
    if mode == ["--trace"]:
        assert "Trace:" in out and "- " + ("read" if method == "retrieve-then-read" else "") in out
    if mode == ["--quiet"]:
        assert out == "Stan[2J]0;pwnedley31m!\n"
    if method == "retrieve-then-read" and not mode:
        assert "Stanley[31m ND" in out  # a passage title from the corpus, cleaned


def test_ask_json_escapes_control_characters_losslessly(evil_cli, capsys):
    assert evil_cli("--method", "retrieve-then-read", "--k", "2", "--json") == 0
    out, _ = capsys.readouterr()
    assert _is_clean(out.replace("\n", ""))  # newlines are the JSON's own layout
    result = json.loads(out)
    outputs = [o for step in result["trace"]["children"] for call in step["llm_calls"] for o in call["outputs"]]
    assert outputs == [EVIL]  # the raw reply, exactly
    assert result["answer"] == EVIL.splitlines()[0]  # (the method keeps the first line)
    assert result["passages"][0]["title"] == "Stanley\x1b[31m \u202eND"


def test_errors_are_printed_clean_on_one_line(tmp_path, monkeypatch, capsys):
    import hopqa.llm
    from hopqa.cli import main
    from hopqa.llm.base import LLMError

    def failing(spec, **kw):
        raise LLMError("the server said:\n\x1b[2Jgo away\u202e")

    monkeypatch.setattr(hopqa.llm, "load_llm", failing)
    assert main(["ask", Q, "--method", "direct", "--home", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "hopqa: error: the server said: [2Jgo away\n"


def test_quiet_failure_prints_a_clean_error(tmp_path, monkeypatch, capsys):
    import hopqa.llm
    from hopqa.cli import main

    def explode(request):
        raise RuntimeError("model says \x1b[2J\nno")

    monkeypatch.setattr(hopqa.llm, "load_llm", lambda spec, **kw: ScriptedLLM(replies=explode))
    assert main(["ask", Q, "--method", "direct", "--quiet", "--home", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == "hopqa: error: RuntimeError: model says [2J no\n"


def test_report_table_cells_are_clean():
    from hopqa.evaluation.report import Row, markdown_table

    row = Row("toy\x1b[2J", "dev", "open", "evil|method\u202e\n", "all", 1, 0, {"em": 1.0}, {})
    table = markdown_table([row])
    assert _is_clean(table) and len(table.splitlines()) == 3
    assert "| toy[2J/dev | open | evil\\|method | all | 1 | 0 | 1.000 |" in table


def test_json_safe_and_one_line():
    from hopqa.console import json_safe, one_line

    text = json.dumps({"a": EVIL, "b": ["\x7f\u2066x"]}, ensure_ascii=False, indent=1)
    safe_text = json_safe(text)
    assert json.loads(safe_text) == json.loads(text) and _is_clean(safe_text.replace("\n", ""))
    assert "\x7f" not in safe_text and "\\u007f" in safe_text and "\\u2066" in safe_text
    assert one_line("a\n  b\x1b[1m\tc\r\n") == "a b[1m c"


# -- progress bars and warnings -------------------------------------------------------------------
def test_progress_bar_off_is_silent_and_complete(capsys):
    from hopqa.console import progress_bar

    bar = progress_bar(10, "x", enabled=False, unit="B", unit_scale=True)
    bar.update(3)
    bar.set_postfix(failed=1, refresh=False)
    bar.close()
    assert list(progress_bar(desc="y", enabled=False, iterable=[1, 2])) == [1, 2]
    assert list(progress_bar(enabled=False)) == []
    assert capsys.readouterr() == ("", "")


def test_progress_bar_on_draws_on_stderr_and_warnings_go_above_it(capsys):
    import warnings

    from hopqa.console import progress_bar, show_warning

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show_warning
        for _ in progress_bar(desc="work", iterable=range(3), unit="q"):
            warnings.warn("bad\nline \x1b[31m", stacklevel=1)
    out, err = capsys.readouterr()
    assert out == "" and "work" in err and "3/3" in err
    assert err.count("hopqa: warning: bad line [31m\n") == 3


def test_a_warning_with_no_bar_on_screen_does_not_go_through_tqdm(capsys, monkeypatch):
    """With no progress bar, ``show_warning`` writes the line itself: ``tqdm.write`` would create
    tqdm's lock, and a Ctrl-C during that turned the ``KeyboardInterrupt`` into an
    ``AttributeError`` (``hopqa eval`` exited 1 and kept answering)."""
    from tqdm import tqdm

    from hopqa.console import progress_bar, show_warning

    def broken(*args, **kwargs):
        raise AttributeError("type object 'tqdm' has no attribute '_lock'")

    monkeypatch.setattr(tqdm, "write", broken)
    assert not getattr(tqdm, "_instances", None)
    show_warning(UserWarning("bad line 7"), UserWarning, "f.py", 1)
    assert capsys.readouterr().err == "hopqa: warning: bad line 7\n"
    with pytest.raises(AttributeError):  # a bar on screen: the line goes above it, through tqdm.write
        for _ in progress_bar(desc="work", iterable=range(1), unit="q"):
            show_warning(UserWarning("bad"), UserWarning, "f.py", 1)

