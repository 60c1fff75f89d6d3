"""Golden reader prompts (issue 14, item 7: each method owns its templates; one passage renderer).

The strings below are the exact prompts the readers sent before the refactor: a change to one
of them is a change of behaviour (and of every cached reply), so it must be deliberate.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hopqa.build import build_method
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods import retrieve_read
from hopqa.retrieval.pool import CandidatePool
from hopqa.text import render_passage, render_passages
from hopqa.types import Passage

POOL = [
    Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County."),
    Passage("b", "", "Stanley is the county seat of Mountrail County, North Dakota, United States."),
]
Q = "What is the seat of the county where Van Hook Township is located?"
SUB = "Where is Van Hook Township?"

ONE_R = ("Answer the question using the passages below. Reply with a short answer of a few words, without "
         "explanation.\n\n")
GENREAD = "Refer to the passage below and answer the following question with just a few words.\n\nPassage: "

#: method, options, which request, the exact prompt, its (temperature, top_p, max_tokens, stop)
GOLDEN = [
    ("retrieve-then-read", {"max_passage_words": 5}, "Answer the question using the passages below",
     ONE_R + "[1] Van Hook Township | Van Hook Township is a ...\n\n[2] Stanley is the county seat ...\n\n"
     f"Question: {Q}\nAnswer:", (0.0, 1.0, 32, ("\n\n",))),
    ("ircot", {"k": 2}, "Answer the question using the passages below",
     ONE_R + "[1] Van Hook Township | Van Hook Township is a township in Mountrail County.\n\n"
     "[2] Stanley is the county seat of Mountrail County, North Dakota, United States.\n\n"
     f"Question: {Q}\nAnswer:", (0.0, 1.0, 32, ("\n\n",))),
    ("self-ask", {"k": 2, "max_passage_words": 5}, "Answer the question using the passages below",
     ONE_R + "[1] Van Hook Township | Van Hook Township is a ...\n\n[2] Stanley is the county seat ...\n\n"
     f"Question: {SUB}\nAnswer:", (0.0, 1.0, 32, ("\n\n",))),
    ("self-dc", {"k": 2, "max_passage_words": 5}, "Refer to the passage below",
     GENREAD + "Van Hook Township | Van Hook Township is a ... Stanley is the county seat ...\n\n"
     f"Question: {Q}\n\nThe answer is", (0.1, 0.1, 32, ("\n\n",))),
    ("self-dc", {"alpha": 0.0, "beta": 0.0, "document_tokens": 50}, "Generate a background document",
     f"Generate a background document from Wikipedia to answer the given question.\n\n{Q}\n\n", (0.1, 0.1, 50, ())),
    ("self-dc", {"alpha": 0.0, "beta": 0.0}, "Refer to the passage below",
     GENREAD + f"Stanley\n\nQuestion: {Q}\n\nThe answer is", (0.1, 0.1, 32, ("\n\n",))),
    ("genread", {}, "Refer to the passage below",
     GENREAD + f"Stanley\n\nQuestion: {Q}\n\nThe answer is", (0.0, 1.0, 32, ("\n\n",))),
    ("genread", {"n_documents": 2}, "Refer to the passage below",
     GENREAD + f"[1] Stanley\n\n[2] Stanley\n\nQuestion: {Q}\n\nThe answer is", (0.0, 1.0, 32, ("\n\n",))),
]


def reply(request) -> str:
    t = request.text()
    if t.startswith("Please read the question, give"):
        return " X\nConfidence (0-100): 0%"  # Self-DC: unknown, retrieve (or generate when alpha = beta = 0)
    if t.startswith("Answer the last question"):
        if "Follow up:" in t.split("Are follow up questions needed here:")[-1]:
            return "So the final answer is: Stanley"
        return f" Yes.\nFollow up: {SUB}\n"
    if t.startswith("Answer the question by reasoning"):
        return " So the answer is: Stanley."
    return "Stanley"


def requests_of(name: str, options: dict) -> list:
    llm = ScriptedLLM(replies=reply)
    ans = build_method(name, llm, CandidatePool(POOL), **options).answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    return llm.requests


@pytest.mark.parametrize("name, options, prefix, prompt, params", GOLDEN)
def test_reader_prompts_are_unchanged(name, options, prefix, prompt, params):
    sent = [r for r in requests_of(name, options) if r.prompt.startswith(prefix)]
    assert len(sent) == 1
    assert sent[0].prompt == prompt
    assert (sent[0].temperature, sent[0].top_p, sent[0].max_tokens, sent[0].stop) == params


def test_editing_retrieve_then_read_changes_only_retrieve_then_read(monkeypatch):
    """IRCoT and Self-Ask own their reader templates: they no longer follow Retrieve-then-Read's."""
    monkeypatch.setattr(retrieve_read, "READ_PROMPT", "EDITED {passages}\nQ: {question}\nA:")
    assert requests_of("retrieve-then-read", {})[0].prompt.startswith("EDITED [1] Van Hook")
    for name, options, prefix, prompt, _ in GOLDEN[1:3]:
        assert [r.prompt for r in requests_of(name, options) if r.prompt.startswith(prefix)] == [prompt]


_TEMPLATE = re.compile(r"(PROMPT|INSTRUCTIONS?|SHOTS?|DEMOS)(_\w+)?$")


def test_no_method_imports_another_methods_templates():
    """A method reuses another's logic as objects (Self-DC holds GenRead's reader), never its
    template strings; its own ``<method>_prompts`` module is fine."""
    methods = Path(__file__).resolve().parents[1] / "hopqa" / "methods"
    borrowed = []
    for path in sorted(methods.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hopqa.methods."):
                source = node.module.rsplit(".", 1)[1]
                own = source.endswith("_prompts") and path.stem.startswith(source.removesuffix("_prompts"))
                borrowed += [f"{path.name}: {a.name} from {source}" for a in node.names
                             if _TEMPLATE.search(a.name) and not own]
    assert borrowed == []


# -- the one passage renderer ------------------------------------------------------------------------------
P = [Passage("a", "Title A", "one two three four five six"), Passage("b", "", "seven  eight\nnine")]


@pytest.mark.parametrize("index, max_words, first, second", [
    (None, None, "Title A | one two three four five six", "seven  eight\nnine"),
    (1, None, "[1] Title A | one two three four five six", "[1] seven  eight\nnine"),
    (7, 2, "[7] Title A | one two ...", "[7] seven eight ..."),
    (None, 0, "Title A |  ...", " ..."),
    (1, 3, "[1] Title A | one two three ...", "[1] seven  eight\nnine"),  # not longer: unchanged, spacing and all
    (1, 6, "[1] Title A | one two three four five six", "[1] seven  eight\nnine"),
])
def test_render_passage(index, max_words, first, second):
    assert [render_passage(p, index, max_words) for p in P] == [first, second]


def test_render_passages_options():
    assert render_passages(P) == "[1] Title A | one two three four five six\n\n[2] seven  eight\nnine"
    assert render_passages(P, max_words=2) == "[1] Title A | one two ...\n\n[2] seven eight ..."
    assert render_passages(P, numbered=False, separator="\n", max_words=3) == \
        "Title A | one two three ...\nseven  eight\nnine"
    assert render_passages(P, numbered=False, separator=" ", max_words=3) == "Title A | one two three ... seven  eight\nnine"
    assert render_passages(P, start=3, separator="\n", title_separator=": ") == \
        "[3] Title A: one two three four five six\n[4] seven  eight\nnine"
    assert render_passages([]) == ""


def test_total_words_shares_the_budget_with_a_floor():
    long = [Passage(str(i), "", " ".join(["w"] * 50)) for i in range(4)]
    # 100 words over 4 passages: 25 each; a floor of 20 words per passage; the smaller of the two caps wins
    assert all(x.count("w") == 25 for x in render_passages(long, total_words=100).split("\n\n"))
    assert all(x.count("w") == 20 for x in render_passages(long, total_words=10).split("\n\n"))
    assert all(x.count("w") == 5 for x in render_passages(long, total_words=100, max_words=5).split("\n\n"))
