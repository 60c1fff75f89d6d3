"""Every parser of model output in ``hopqa.methods``, on arbitrary and adversarial text.

For each parser (the ``PARSERS`` table: every function that reads an LLM's reply) three
properties:

1. it never raises, whatever the text (hypothesis, over arbitrary unicode and over an
   adversarial alphabet of the markers the parsers look for, newlines, whitespace runs,
   digits, brackets and quotes);
2. it returns its documented type;
3. it runs in linear time: 200,000-character adversarial inputs (long whitespace runs,
   repeated markers, repeated brackets and digits) each finish well under ``TIME_BOUND``
   seconds, where a quadratic implementation takes minutes.

Then every registered method runs end to end on a scripted LLM whose replies are adversarial
(empty, blank, an empty "Follow up:", citation and step numbers of thousands of digits,
50,000 characters of garbage) and must return an ``Answer`` with no error.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hopqa.build import build_method
from hopqa.methods import METHODS
from hopqa.methods.choice import parse_date, value_lines
from hopqa.methods.gensco import is_fin, parse_subquestion
from hopqa.methods.hgot import HGOT, parse_dependencies, parse_steps
from hopqa.methods.hgot.demos import normalize_citations, well_formed_dependencies
from hopqa.methods.hgot.quality import Statement, Thought, split_statements
from hopqa.methods.parsing import (
    clean_answer,
    extract_answer,
    first_line_after,
    first_sentence,
    strip_labels,
)
from hopqa.llm import STRUCTURED
from hopqa.methods import gensco, hgot, ircot, react, self_ask, self_dc
from hopqa.methods.polar import same_pair, value_of, yes_no
from hopqa.methods.react import parse_action, sentences
from hopqa.methods.self_ask import _FINAL, parse_follow_up
from hopqa.methods.self_dc import parse_subquestions, parse_verbal_confidence
from hopqa.methods.structured import Parsed, loads_object
from hopqa.retrieval.pool import CandidatePool
from hopqa.types import Answer, Passage
from tests.test_self_dc import LogprobLLM

BOUNDED_JSON = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: Seconds a parser may take on a 200,000-character input (linear ones take milliseconds; a
#: quadratic one takes minutes: the bound is generous so that a loaded machine cannot flake it).
TIME_BOUND = 2.0
LONG = 200_000


# -- the parsers and what they return ------------------------------------------------------------------
def _is_str(x: Any) -> bool:
    return isinstance(x, str)


def _is_opt_str(x: Any) -> bool:
    return x is None or isinstance(x, str)


def _is_str_list(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(s, str) for s in x)


def _is_answer_how(x: Any) -> bool:
    return (isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) and isinstance(x[1], str)
            and (x[1] in ("first-line", "empty") or x[1].startswith("marker:")))


def _is_dependencies(x: Any) -> bool:
    edges, notes = x
    return (isinstance(edges, list) and all(isinstance(a, int) and isinstance(b, int) and 1 <= a < b <= 5
                                            for a, b in edges) and _is_str_list(notes))


def _is_statements(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(s, Statement) and isinstance(s.text, str)
                                       and all(isinstance(c, int) and 1 <= c <= 7 for c in s.citations) for s in x)


def _is_thought(x: Any) -> bool:
    return isinstance(x, Thought) and isinstance(x.rationale, str) and isinstance(x.answer, str) and _is_statements(x.statements)


def _is_confidence(x: Any) -> bool:
    c, answer = x
    return (c is None or (isinstance(c, float) and 0.0 <= c <= 1.0)) and isinstance(answer, str)


def _is_action(x: Any) -> bool:
    return x is None or (isinstance(x, tuple) and x[0] in ("search", "lookup", "finish") and isinstance(x[1], str))


def _is_follow_up(x: Any) -> bool:
    return x is None or (isinstance(x, tuple) and isinstance(x[0], int) and isinstance(x[1], str) and x[1].strip() == x[1] != "")


def _final_answer(text: str) -> str:
    """Self-Ask's final-answer reading: the first line after "So the final answer is:"."""
    m = _FINAL.search(text)
    return clean_answer(first_line_after(text, m.end())) if m else ""


#: name -> (parser of one reply, check of its result)
PARSERS: dict[str, tuple[Callable[[str], Any], Callable[[Any], bool]]] = {
    "parsing.clean_answer": (clean_answer, _is_str),
    "parsing.extract_answer": (extract_answer, _is_answer_how),
    "parsing.first_sentence": (first_sentence, _is_str),
    "parsing.first_line_after": (lambda t: first_line_after(t, len(t) // 2), _is_str),
    "parsing.strip_labels": (lambda t: strip_labels(t, hgot.method._REWRITE_LABEL)[0], _is_str),
    "self_ask.parse_follow_up": (parse_follow_up, _is_follow_up),
    "self_ask.final_answer": (_final_answer, _is_str),
    "hgot.parse_steps": (parse_steps, _is_str_list),
    "hgot.parse_dependencies": (lambda t: parse_dependencies(t, 5), _is_dependencies),
    "hgot.parse_thought": (lambda t: HGOT.parse_thought(t, 7), _is_thought),
    "hgot.completed_answer": (HGOT.completed_answer, _is_str),
    "hgot_quality.split_statements": (lambda t: split_statements(t, 7), _is_statements),
    "hgot_demos.normalize_citations": (normalize_citations, _is_opt_str),
    "hgot_demos.well_formed_dependencies": (well_formed_dependencies, lambda x: isinstance(x, bool)),
    "self_dc.parse_verbal_confidence": (parse_verbal_confidence, _is_confidence),
    "self_dc.parse_subquestions": (parse_subquestions, lambda x: _is_str_list(x) and len(x) <= 5),
    "gensco.parse_subquestion": (parse_subquestion, lambda x: x is None or (isinstance(x, str) and x.strip() == x != "")),
    "gensco.is_fin": (is_fin, lambda x: isinstance(x, bool)),
    "react.parse_action": (parse_action, _is_action),
    "react.sentences": (sentences, _is_str_list),
    # the free-text readers of the structured steps, and the JSON reader
    "structured.loads_object": (loads_object, lambda x: (x[0] is None or isinstance(x[0], dict))
                                and isinstance(x[1], bool)),
    "self_ask.parse_turn": (self_ask.parse_turn, lambda x: isinstance(x, Parsed)),
    "self_ask.parse_final": (self_ask.parse_final, lambda x: isinstance(x, Parsed)),
    "react.parse_turn": (react.parse_turn, lambda x: isinstance(x, Parsed)),
    "react.parse_finish": (react.parse_finish, lambda x: isinstance(x, Parsed)),
    "ircot.parse_sentence": (ircot.parse_sentence, lambda x: isinstance(x, Parsed)),
    "self_dc.read_verbal_confidence": (self_dc.read_verbal_confidence, lambda x: isinstance(x, Parsed)),
    "self_dc.read_subquestions": (self_dc.read_subquestions, lambda x: isinstance(x, Parsed)),
    "gensco.read_subquestion": (gensco.method.read_subquestion, lambda x: isinstance(x, Parsed)),
    "hgot.read_plan_text": (lambda t: hgot.method.read_plan_text(t, 5), lambda x: isinstance(x, Parsed)),
    # the last steps' readers (choice's date lines, polar's yes / no and value lines), and the
    # question readers they start from (a question can be huge too)
    "choice.value_lines": (lambda t: value_lines(t, ("A", "B")), lambda x: len(x) == 2 and all(map(_is_str, x))),
    "choice.parse_date": (parse_date, lambda x: x is None or (len(x) == 3 and all(isinstance(v, int) for v in x))),
    "polar.yes_no": (yes_no, lambda x: x in (None, "yes", "no")),
    "polar.value_of": (value_of, _is_opt_str),
    "polar.same_pair": (same_pair, lambda x: x is None or (len(x) == 3 and all(map(_is_str, x)))),
}

#: Every ``*_from_json`` of a structured step: each must take any JSON object (wrong types,
#: missing keys, huge numbers) without raising.
FROM_JSON: dict[str, Callable[[dict[str, Any]], Any]] = {
    "self_ask.turn_from_json": self_ask.turn_from_json,
    "self_ask.final_from_json": self_ask.final_from_json,
    "react.turn_from_json": react.turn_from_json,
    "react.finish_from_json": react.finish_from_json,
    "ircot.sentence_from_json": ircot.sentence_from_json,
    "self_dc.confidence_from_json": self_dc.confidence_from_json,
    "self_dc.subquestions_from_json": self_dc.subquestions_from_json,
    "gensco.subquestion_from_json": gensco.method.subquestion_from_json,
    "hgot.plan_from_json": lambda obj: hgot.method.plan_from_json(obj, 5),
    "hgot.thought_from_json": lambda obj: hgot.HGOT.thought_from_json(obj, 7),
}
#: Keys the structured steps read, so the generated objects hit them.
JSON_KEYS = ["steps", "question", "depends_on", "statements", "text", "citations", "answer", "subquestion",
             "subquestions", "confidence", "follow_up_needed", "follow_up", "final_answer", "thought", "action",
             "argument", "sentence"]
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**30, max_value=10**30), st.floats(allow_nan=True),
              st.text(max_size=40), st.sampled_from(["Search", "Finish", "Lookup", "<FIN></FIN>", "", " ", "[1]"])),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.sampled_from(JSON_KEYS), children, max_size=4)),
    max_leaves=12)
json_objects = st.dictionaries(st.sampled_from(JSON_KEYS), json_values, max_size=6)


@pytest.mark.parametrize("name", sorted(FROM_JSON))
@BOUNDED_JSON
@given(obj=json_objects)
def test_from_json_never_raises(name, obj):
    FROM_JSON[name](obj)


# -- 1 and 2: never raises, returns its type ----------------------------------------------------------------
#: Pieces of replies the parsers look for, and what breaks naive ones.
TOKENS = [
    "\n", "\n\n", " ", "   ", "\t", "\r\n", "\x0b", "\u2028", "\u00a0", "0", "1", "7", "42", "99999999", "9" * 40,
    "[", "]", "(", ")", "{", "}", '"', "'", "`", "*", "_", ".", ",", ":", ";", "-", "->", "?", "!", "%", "#", "<", ">", "/",
    "\u201c", "\u201d", "\u2018", "\u2019", "\u00ab", "\u00bb", "é", "日本", "\U0001F600",
    "Follow up:", "follow-up:", "Intermediate answer:", "So the final answer is:", "So the answer is", "the answer is",
    "Answer:", "Final Answer:", "[1]", "[2]", "[1][3]", "[0]", "[12345678901234567890]", "Step 1:", "Step 2.", "step 3)",
    "Step 1 -> Step 2", "(Step 1 and Step 2) -> Step 3", "depends on", "Dependencies:", "Question:", "Rationale:",
    "Let's think step by step.", "Confidence (0-100):", "Confidence:", "80%", "0.7", "#1:", "#2.", "1.", "2)", "- ", "* ",
    "Subquestion 1:", "Subcontext 2:", "<FIN></FIN>", "FIN", "Search[", "Lookup[", "Finish[", "Thought 1:", "Action 1:",
    "Paris", "Titanic (1997 film)", "Jr.", "D.C.",
]
adversarial = st.lists(st.sampled_from(TOKENS), max_size=40).map("".join)
any_text = st.one_of(st.text(max_size=300), adversarial)
BOUNDED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", sorted(PARSERS))
@BOUNDED
@given(text=any_text)
def test_parser_never_raises_and_returns_its_type(name, text):
    parse, ok = PARSERS[name]
    result = parse(text)
    assert ok(result), (name, text, result)


@BOUNDED
@given(text=any_text)
def test_clean_answer_never_grows_and_is_stripped(text):
    once = clean_answer(text)
    assert len(once) <= len(text) and once == once.strip()


@BOUNDED
@given(inner=st.text(alphabet=st.characters(blacklist_characters="()[]{}\"'`*_\u201c\u201d\u2018\u2019\u00ab\u00bb."),
                     min_size=1, max_size=30).filter(lambda s: s.strip() != ""),
       extra=st.sampled_from(["Titanic (1997 film)", '"Heat" (1995)', "(a) and (b)", "x [1]"]))
def test_clean_answer_keeps_balanced_brackets_and_quotes(inner, extra):
    """An answer made of plain text and balanced brackets / quote pairs is returned as it is
    (whitespace collapsed), never with a bracket or quote torn off."""
    answer = " ".join(f"{inner} {extra}".split())
    assert clean_answer(answer) == answer
    assert clean_answer(f"**{answer}**") == answer
    if '"' not in answer:
        assert clean_answer(f'"{answer}"') == answer


# -- 3: linear time ---------------------------------------------------------------------------------------------
def _repeat(piece: str, n: int = LONG) -> str:
    return (piece * (n // len(piece) + 1))[:n]


#: name -> a 200,000-character input aimed at a quadratic regular expression.
LONG_INPUTS = {
    "spaces": " " * LONG,
    "newlines": "\n" * LONG,
    "space run between words": "x" + " " * LONG + "x",
    "newline run then text": "\n" * LONG + "x",
    "mixed whitespace": _repeat(" \t\n\r\x0b "),
    "open brackets": "[" * LONG,
    "nested brackets": "(" * (LONG // 2) + "x" + ")" * (LONG // 2),
    "digits": "9" * LONG,
    "open bracket then digits": "[" + "9" * LONG,
    "huge citation": "A is B [" + "9" * LONG + "].\nAnswer: x",
    "quotes": _repeat("\"'"),
    "empty follow-ups": _repeat("Follow up: \n"),
    "follow-up then blank lines": "Follow up:" + "\n" * LONG + "x",
    "citations": _repeat("[1]"),
    "answer labels": _repeat("Answer:"),
    "answer markers then spaces": "So the answer is" + " " * LONG + "x",
    "step header then spaces": "Step 1: a" + " " * LONG + "b",
    "step headers": _repeat("Step 1: "),
    "huge step number": "Step " + "9" * LONG + ": x\nStep 1 -> Step " + "9" * 5000,
    "many step numbers": " ".join(f"Step {i}" for i in range(20000)) + " -> " + " ".join(f"Step {i}" for i in range(20000)),
    "dependency clauses": _repeat("Step 1 -> Step 2; Step 2 depends on Step 1. "),
    "dependencies then spaces": "\n" + " " * LONG + "dependencies",
    "confidence then spaces": " " * LONG + "confidence",
    "number then spaces": "5" + " " * LONG + "x",
    "percent numbers": _repeat("5 % "),
    "hash items": _repeat("#1: "),
    "distinct hash items": "".join(f"#{i}: q{i}? " for i in range(20000))[:LONG],
    "list items": _repeat("\n1. "),
    "distinct list items": "".join(f"\n- q{i}?" for i in range(25000))[:LONG],
    "fin tag": "<" + " " * LONG + "x",
    "question echo": "question" + " " * LONG + "x",
    "subquestion labels": _repeat("Subquestion 1: "),
    "unclosed actions": _repeat("search["),
    "thought label": "thought" + " " * LONG + "x",
    "well-formed then spaces": "Step 2 depends on Step 1." + " " * LONG + "x",
    "sentences": _repeat("a. "),
    "think step by step": _repeat("Let's think step by step. "),
}


@pytest.mark.timeout(120)  # a quadratic parser fails here instead of holding the run for many minutes
@pytest.mark.parametrize("name", sorted(PARSERS))
def test_parser_runs_in_linear_time(name):
    parse, ok = PARSERS[name]
    slow = {}
    for label, text in LONG_INPUTS.items():
        t0 = time.perf_counter()
        result = parse(text)
        elapsed = time.perf_counter() - t0
        assert ok(result), (name, label)
        if elapsed > TIME_BOUND:
            slow[label] = round(elapsed, 2)
    assert not slow, f"{name} is not linear: seconds per 200,000-character input {slow}"


# -- every method end to end on adversarial replies -------------------------------------------------------------
def _garbage(n: int = 50_000, seed: int = 0) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < n:
        out.append(rng.choice(TOKENS))
        size += len(out[-1])
    return "".join(out)[:n]


ADVERSARIAL_REPLIES = {
    "empty": "",
    "blank": " \n\t \n",
    "empty follow-up": "Yes.\nFollow up: \n",
    "huge citation": "Paris is in France [" + "9" * 5000 + "].\nAnswer: Paris [" + "1" * 5000 + "]",
    "huge step numbers": "Step " + "9" * 5000 + ": Who? Step 1: Where?\nDependencies: Step " + "9" * 5000 + " depends on Step 1.",
    "huge confidence": "Paris\nConfidence (0-100): " + "9" * 5000 + "%",
    "unclosed action": "Action 1: Search[" + "x " * 2000,
    "garbage": _garbage(),
}

POOL = [
    Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County."),
    Passage("b", "Mountrail County", "Stanley is the county seat of Mountrail County."),
    Passage("c", "Paris", "Paris is the capital of France."),
]
Q = "What is the seat of the county where Van Hook Township is located?"

#: Small settings so that a method's loops stay short on 50,000-character replies, and a large
#: ``max_tokens`` so that the reply cap of the LLM layer lets long replies reach the parsers.
COMMON = {"max_tokens": 4096}
OPTIONS: dict[str, dict[str, Any]] = {
    "hgot": {"depth": 1, "samples": 2, "k": 3, "max_steps": 2},
    "self-dc": {"depth": 1, "max_subquestions": 2},
    "gensco-max": {"max_levels": 2, "shots": 0},
    "gensco-stop": {"max_levels": 2, "shots": 0},
    "gensco-no-qd": {"max_levels": 2, "shots": 0},
    "react": {"max_steps": 2},
    "self-ask": {"max_steps": 2},
    "ircot": {"max_steps": 2},
    "iter-retgen": {"iterations": 2},
}


def _build(name: str, reply: str, structured_llm: bool = False, **extra: Any):
    from hopqa.embed import LexicalEmbedder
    from hopqa.nli import ScriptedJudge

    llm = LogprobLLM(replies=lambda request: reply, logprobs=lambda request, text: [-0.5] * max(1, len(text.split())),
                     scorer=lambda ctx, cont: [-1.0] * max(1, len(cont.split())),
                     capabilities={STRUCTURED} if structured_llm else None)
    components: dict[str, Any] = {}
    if name == "hgot":
        components = {"judge": ScriptedJudge(lambda p, h: h[:20] in p), "embedder": LexicalEmbedder()}
    return build_method(name, llm, CandidatePool(POOL), **components,
                        **{**COMMON, **OPTIONS.get(name, {}), **extra})


@pytest.mark.parametrize("reply", sorted(ADVERSARIAL_REPLIES))
@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_survives_adversarial_replies(name, reply):
    method = _build(name, ADVERSARIAL_REPLIES[reply])
    t0 = time.perf_counter()
    ans = method.answer(Q)
    assert isinstance(ans, Answer) and ans.error is None, ans.error
    assert isinstance(ans.answer, str)
    assert time.perf_counter() - t0 < 30, "a method must not crawl on a long reply"


@pytest.mark.parametrize("reply", sorted(ADVERSARIAL_REPLIES))
def test_self_dc_prob_survives_adversarial_replies(reply):
    ans = _build("self-dc", ADVERSARIAL_REPLIES[reply], confidence="prob").answer(Q)
    assert ans.error is None, ans.error
    assert ans.trace.root.find("confidence")[0].outputs["confidence"] > 0


#: Replies to schema-constrained calls a broken server or a cut reply could give.
ADVERSARIAL_JSON = {
    "wrong types": '{"steps": "x", "statements": 5, "answer": [1], "subquestion": null, "subquestions": [1, {}], '
                   '"confidence": "high", "follow_up_needed": "yes", "action": 7, "sentence": false}',
    "huge numbers": '{"steps": [{"question": "Who?", "depends_on": [' + "9" * 300 + ']}], "statements": [{"text": '
                    '"x", "citations": [' + "9" * 300 + ', -1, 0]}], "answer": "a", "confidence": ' + "9" * 300 + "}",
    "cut short": '{"steps": [{"question": "Who is',
    "empty object": "{}",
    "not an object": "[1, 2, 3]",
    # ~2 KB nested 1,000 deep: json.loads raised RecursionError in every structured method (issue 29)
    "deeply nested": '{"steps": ' + "[" * 1000 + "]" * 1000 + ', "answer": "a"}',
    "deeply nested, cut short": '{"answer": ' + '{"a": ' * 1000,
}


@pytest.mark.parametrize("reply", sorted(ADVERSARIAL_JSON))
@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_survives_adversarial_json(name, reply):
    method = _build(name, ADVERSARIAL_JSON[reply], structured_llm=True)
    ans = method.answer(Q)
    assert isinstance(ans, Answer) and ans.error is None, ans.error
    assert isinstance(ans.answer, str)


def test_the_table_covers_every_registered_method():
    """A new method gets its adversarial run automatically (the parametrisation reads METHODS)."""
    assert {"hgot", "self-dc", "self-ask", "react", "ircot", "gensco-max", "direct"} <= set(METHODS)


@pytest.mark.parametrize("reply", ["deeply nested", "deeply nested, cut short"])
def test_json_readers_refuse_deep_nesting_without_raising(reply):
    """A reply nested deeper than hopqa.jsonl.MAX_DEPTH reads as no JSON (the free-text path),
    in the structured steps' reader and the LLM reranker's."""
    from hopqa.retrieval.rerank import parse_relevance

    text = ADVERSARIAL_JSON[reply]
    assert loads_object(text) == (None, False)
    assert parse_relevance(text.replace('"answer"', '"score"') + " 7") == 7.0  # the number after it
