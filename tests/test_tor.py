"""Tree of Reviews and CoR: review parsing, pruning, the DFS on a scripted LLM (known tree, counted
calls), concurrent = sequential, the reader's context fill, Recall@15, structured outputs (JSON
reviews and MPC completions), then the real model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hopqa.build import build_method
from hopqa.evaluation.runner import summarize
from hopqa.llm.base import GENERATE, STRUCTURED, GenerationRequest
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.base import MethodError
from hopqa.methods.structured import Parsed
from hopqa.methods.tor.fusion import Evidence, fuse, top_by_similarity
from hopqa.methods.tor.prompts import REVIEW_DEMOS
from hopqa.methods.tor.review import (
    MPC_INSTRUCTION,
    MPC_SCHEMA,
    Review,
    mpc_from_json,
    parse_mpc,
    parse_review,
    read_mpc,
    review_from_json,
    review_instruction,
    review_schema,
    review_text,
)
from hopqa.trace import Trace
from hopqa.types import Passage
from tests.scripted_retriever import ScriptedRetriever as _ScriptedRetriever

# -- review parsing ---------------------------------------------------------------------------------
#: A real Qwen2.5-1.5B review (Table 7 prompt, MuSiQue dev), kept as it came.
QWEN_REVIEW = """Step 1
- Thought: The document mentions Anna Benson and her husband, Kris Benson, a baseball pitcher.
- Judgment: [RELEVANT]
Step 2
- Thought: Kris Benson is Anna Benson's husband, but the documents do not say which team he played on.
- Judgment: [UNSUPPORTED]
Step 3
- Thought: I need the team Kris Benson played for.
- Output: [QUERY] Which team did Kris Benson play for?"""


@pytest.mark.parametrize("text, status, relevant, supported, answer, query", [
    (QWEN_REVIEW, "direct", True, False, "", "Which team did Kris Benson play for?"),
    ("Step 1\n- Judgment: [IRRELEVANT]", "direct", False, False, "", ""),
    ("- Judgment: [RELEVANT]\n- Judgment: [SUPPORTED]\n- Output: [ANSWER] Oak Park, Illinois.", "direct", True, True,
     "Oak Park, Illinois.", ""),
    # lower case, no brackets
    ("- judgment: relevant\n- judgment: unsupported\n- output: [query] where was he born?", "fallback", True, False, "",
     "where was he born?"),
    ("- Judgment: Not relevant", "fallback", False, False, "", ""),
    # missing tags: inferred
    ("- Judgment: [SUPPORTED]\n- Output: [ANSWER] 1999", "fallback", True, True, "1999", ""),
    ("The documents answer it. [ANSWER] Paris", "fallback", True, True, "Paris", ""),
    ("- Judgment: [RELEVANT]\n- Output: [QUERY] who founded it?", "fallback", True, False, "", "who founded it?"),
    # extra text around, and a contradiction (the output wins)
    ("Sure! Here is my review.\nStep 1\n- Judgment: [RELEVANT]\nStep 2\n- Judgment: [SUPPORTED]\n"
     "- Output: [QUERY] when?\nHope this helps.", "fallback", True, False, "", "when?"),
    # Qwen2.5-1.5B's common reply: irrelevant, then the other steps anyway; the query is kept
    ("Step 1\n- Thought: none are about the director.\n- Judgment: [IRRELEVANT]\n\nStep 2\n- Judgment: "
     "[UNSUPPORTED]\n\nStep 3\n- Output: [QUERY] Who directed The Zone?", "direct", False, False, "",
     "Who directed The Zone?"),
    # the format's own "A special token ([ANSWER] or [QUERY]) follow with ..." copied back is no output
    ("- Judgment: [RELEVANT]\n- Judgment: [UNSUPPORTED]\n- Output: A special token ([ANSWER] or [QUERY]) follow "
     "with your answer or new query.", "fallback", True, False, "", ""),
    # "relevant" inside a Thought does not count as a judgment
    ("- Thought: is this relevant? it mentions the film.\n- Judgment: [IRRELEVANT]", "direct", False, False, "", ""),
    # Step 3's output decides, not a later tag in prose (issue 29, item 14)
    ("[ANSWER] Ada\nNo [QUERY] needed.", "fallback", True, True, "Ada", ""),
    ("- Judgment: [RELEVANT]\n- Judgment: [UNSUPPORTED]\n- Output: [QUERY] Who founded it?\nI cannot give an [ANSWER] "
     "yet.", "direct", True, False, "", "Who founded it?"),
    ("Step 1\n- Judgment: [RELEVANT]\nStep 2\n- Judgment: [SUPPORTED]\nStep 3\n- Thought: no [QUERY] is needed.\n"
     "- Output: [ANSWER] Ada\n[QUERY] none", "direct", True, True, "Ada", ""),
    ("- Judgment: [RELEVANT]\n- Judgment: [SUPPORTED]\nI could ask a [QUERY] but\nStep 3\n[ANSWER] Ada", "direct",
     True, True, "Ada", ""),
    # the format's Step 3 line copied back ("[ANSWER] if you can answer the question, otherwise [QUERY]") is no output
    ("- Judgment: [RELEVANT]\n- Judgment: [SUPPORTED]\n- Output: [ANSWER] if you can answer the question, otherwise "
     "[QUERY]", "fallback", True, True, "", ""),
])
def test_parse_review_real_and_malformed(text, status, relevant, supported, answer, query):
    parsed = parse_review(text)
    assert parsed.status == status, parsed.how
    review = parsed.value
    assert (review.relevant, review.supported, review.answer, review.query) == (relevant, supported, answer, query)


@pytest.mark.parametrize("text", [
    "", "I cannot help with that.", "- Judgment: [RELEVANT] or [IRRELEVANT]\n- Judgment: [SUPPORTED] or [UNSUPPORTED]",
    "- Judgment: [RELEVANT]", "x" * 100_000,
])
def test_unreadable_reviews_fail(text):
    assert parse_review(text).status == "failed"


def test_brief_analysis_is_the_reasoning_path_and_answer():
    review = parse_review("- Thought: a\n- Judgment: [RELEVANT]\n- Thought: Spielberg is American.\n"
                          "- Judgment: [SUPPORTED]\n- Thought: c\n- Output: [ANSWER] American").value
    assert review.analysis == "Spielberg is American. American"


def test_the_reviews_thought_is_read_by_step_not_by_position():
    # Step 1's thought left out: Step 2's is still the reasoning path (not Step 3's, the second by position)
    review = parse_review("Step 1\n- Judgment: [RELEVANT]\nStep 2\n- Thought: Spielberg is American.\n"
                          "- Judgment: [SUPPORTED]\nStep 3\n- Thought: c\n- Output: [ANSWER] American").value
    assert review.thought == "Spielberg is American." and review.analysis == "Spielberg is American. American"
    # an irrelevant review's thought is Step 1's, as review_text shows it
    review = parse_review("Step 1\n- Thought: Off topic.\n- Judgment: [IRRELEVANT]\nStep 2\n- Judgment: [UNSUPPORTED]\n"
                          "Step 3\n- Thought: I need the founder.\n- Output: [QUERY] Who founded it?").value
    assert review == Review(False, False, query="Who founded it?", thought="Off topic.")


def test_parse_mpc():
    assert parse_mpc("- Thought: x\n- Information: [INFO] Hemingway was born in Oak Park.\n- Answer: [ANSWER] Oak Park"
                     ).value == "Hemingway was born in Oak Park."
    info = parse_mpc("Information: He was born\nin Lyon.\nAnswer: Lyon")
    assert info.status == "fallback" and info.value == "He was born in Lyon."
    assert parse_mpc("no information here").status == "failed"
    # Qwen2.5-1.5B copied the format's own line back (MuSiQue dev): no information, not a query
    echo = ("- Information: A special token ([INFO]) follow with the missing information you want to supply.\n\n"
            "Step 2\nAnswer generation\n- Answer: [ANSWER] Northern Territory")
    assert parse_mpc(echo).status == "failed"
    assert parse_mpc("([INFO]) is the format.\n- Information: [INFO] Lyon is on the Rhone.").value == "Lyon is on the Rhone."
    assert parse_mpc("[INFO] " + "word " * 500).value.count("word") == 80


# -- the parsers on long and adversarial text (issue 29, item 13) ---------------------------------------
def _tor_long_inputs() -> dict[str, str]:
    """The shared 200,000-character inputs of ``tests.test_parser_properties``, each also after an
    ``[INFO]`` tag and after an ``Information:`` line (where the MPC parser searches for the
    information's end), and ToR's own markers repeated."""
    from tests.test_parser_properties import LONG, LONG_INPUTS, _repeat

    inputs = dict(LONG_INPUTS)
    for label, text in LONG_INPUTS.items():
        inputs[f"[INFO] then {label}"] = "[INFO] x" + text
        inputs[f"Information: then {label}"] = "- Information: x" + text
    inputs.update({
        "info then newlines": "[INFO] x" + "\n" * LONG,
        "info then newline-space lines": "[INFO] x" + "\n " * (LONG // 2),
        "info then dash lines": "[INFO] x" + "\n- " * (LONG // 3),
        "info tags": _repeat("[INFO] "),
        "information lines": _repeat("- Information: x\n"),
        "output tags": _repeat("[QUERY] "),
        "output tags after spaces": " " * (LONG // 2) + _repeat("[ANSWER] ", LONG // 2),
        "output lines": _repeat("- Output: [ANSWER] x\n"),
        "judgment lines": _repeat("- Judgment: [RELEVANT]\n"),
        "thought lines": _repeat("Step 2\n- Thought: x\n"),
        "step headers then newlines": "Step 2" + "\n" * LONG + "- Thought: x",
        "format words": _repeat("([ANSWER] or [QUERY]) "),
        "unclosed tags": _repeat("[ answer "),
    })
    return inputs


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["parse_review", "parse_mpc"])
def test_tor_parsers_run_in_linear_time(name):
    from tests.test_parser_properties import TIME_BOUND

    parse = {"parse_review": parse_review, "parse_mpc": parse_mpc}[name]
    slow = {}
    for label, text in _tor_long_inputs().items():
        t0 = time.perf_counter()
        assert isinstance(parse(text), Parsed), label
        elapsed = time.perf_counter() - t0
        if elapsed > TIME_BOUND:
            slow[label] = round(elapsed, 2)
    assert not slow, f"{name} is not linear: seconds per 200,000-character input {slow}"


#: Pieces of reviews and completions: the tags, the labels, their sloppy forms and what breaks naive parsers.
TOR_TOKENS = ["\n", "\n\n", " ", "\t", "\r\n", "\x0b", "\u2028", "- ", "[", "]", "(", ")", ":", "Step 1",
              "Step 2", "Step 3", "step2", "- Thought: ", "- Judgment: ", "- Output: ", "- Information: ",
              "- Answer: ", "Answer:",
              "[RELEVANT]", "[IRRELEVANT]", "[SUPPORTED]", "[UNSUPPORTED]", "[ANSWER]", "[QUERY]", "[INFO]", "[answer]",
              "relevant", "not relevant", "Not supported", "supported", " or ", "otherwise ", "if you can answer",
              "([ANSWER] or [QUERY])", "([INFO])", "Ada", "Who?", "é", "\U0001F600"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=200), st.lists(st.sampled_from(TOR_TOKENS), max_size=40).map("".join)))
def test_tor_parsers_never_raise_and_read_consistently(text):
    review = parse_review(text)
    assert review.status in ("direct", "fallback", "failed") and isinstance(review.how, str)
    if review.value is not None:
        r = review.value
        assert not (r.answer and r.query) and (r.relevant or not r.supported)
        assert not r.relevant or not r.answer or r.supported  # a relevant review's answer is an accepted one
    info = parse_mpc(text)
    assert (info.value is None) == (info.status == "failed")
    assert info.value is None or (info.value.strip() and len(info.value.split()) <= 80)


# -- a scripted world -------------------------------------------------------------------------------
Q = "Who founded the company that made the gadget?"
P = {n: Passage(n, f"Title {n}", f"Paragraph {n} text.") for n in "ABCDEFG"}


def ScriptedRetriever(table: dict[str, str]) -> _ScriptedRetriever:
    """The scripted retriever over this module's passages ``P``."""
    return _ScriptedRetriever(table, P)


def _path_ids(prompt: str) -> str:
    """The ids of the documents of a review's path (the part after the last 'Documents: ')."""
    docs = prompt.rsplit("Documents: ", 1)[1]
    return "".join(line.split("Title ", 1)[1][0] for line in docs.splitlines() if line.startswith("[") and "Title " in line)


REVIEWS = {
    "C": "- Judgment: [RELEVANT]\n- Judgment: [SUPPORTED]\n- Output: [ANSWER] Ada",
    "A": "- Judgment: [RELEVANT]\n- Judgment: [UNSUPPORTED]\n- Output: [QUERY] query of A",
    "B": "- Judgment: [IRRELEVANT]",
    "AD": "- Judgment: [RELEVANT]\n- Judgment: [SUPPORTED]\n- Output: [ANSWER] Ada Lovelace",
    "AC": "- Judgment: [RELEVANT]\n- Judgment: [SUPPORTED]\n- Output: [ANSWER] Ada",
    "BE": "- Judgment: [IRRELEVANT]",
    "F": "complete nonsense",
}


#: Table 10's prompt: the acceptance call of an accepted path (§3.2), and the reader of an empty pool.
ANSWER_FROM_DOCUMENTS = "Instruct:Your task is to answer my questions in a few words"


def world_reply(request: GenerationRequest) -> str:
    prompt = request.text()
    if prompt.startswith("Instruction:I will give you a query"):
        return REVIEWS.get(_path_ids(prompt), "- Judgment: [IRRELEVANT]")
    if prompt.startswith("Instruction:I will give you a question"):  # MPC
        ids = prompt.rsplit("References: ", 1)[1]
        return "- Information: [INFO] info of " + ("B" if "Title B" in ids else "A")
    if prompt.startswith(ANSWER_FROM_DOCUMENTS):  # an accepted path's brief analysis (or the empty pool's reader)
        ids = _path_ids(prompt.replace("Documents:", "Documents: "))
        return f"Paths {ids} give the founder. The answer is Ada Lovelace."
    return "Ada Lovelace founded it. The answer is Ada Lovelace."


TABLE = {Q: "CAB", "query of A": "CD", "info of A": "CD", "info of B": "E"}


def tor(llm, retriever=None, **options):
    return build_method("tor", llm, retriever or ScriptedRetriever(TABLE), shots=1, **options)


def nodes(answer) -> list[tuple[int, str, str]]:
    """(depth, path, action) of every node, in the order the tree was built."""
    return [(s.inputs["depth"], "".join(s.inputs["path"]), s.outputs.get("action")) for s in answer.trace.root.find("node")]


def test_dfs_builds_the_known_tree_with_repetitive_pruning():
    llm = ScriptedLLM(world_reply)
    ans = tor(llm, widths="3,2", depth=2, expansion="cot").answer(Q)
    assert ans.error is None and ans.answer == "Ada Lovelace"
    # C is accepted first, so A's search (C, D) keeps only D
    assert nodes(ans) == [(1, "C", "accept"), (1, "A", "search"), (2, "AD", "accept"), (1, "B", "reject")]
    assert ans.usage.llm_calls == 7  # 4 reviews, the brief analyses of C and AD, the reader; no MPC under cot
    retrieve = [s for s in ans.trace.root.find("retrieve") if s.inputs["query"] == "query of A"][0]
    assert retrieve.outputs["pruned_repetitive"] == ["C"] and retrieve.outputs["kept"] == ["D"]
    assert ans.metrics == {"docs_reviewed": 4.0, "evidence": 2.0}
    assert {p.id for p in ans.passages} == {"C", "A", "D"}
    assert ans.trace.parse_counts()["direct"] == 4


def test_without_repetitive_pruning_the_pooled_paragraph_is_reviewed_again():
    ans = tor(ScriptedLLM(world_reply), widths="3,2", depth=2, expansion="cot", repetitive_pruning=False).answer(Q)
    assert (2, "AC", "accept") in nodes(ans) and ans.usage.llm_calls == 6 + 3 and ans.metrics["evidence"] == 3.0


def test_mpc_expansion_and_no_relevance_pruning():
    retriever = ScriptedRetriever(TABLE)
    ans = tor(ScriptedLLM(world_reply), retriever, widths="3,2", depth=2, relevance_pruning=False).answer(Q)
    # MPC's [INFO] is the query; B (irrelevant) is expanded too, its child at the depth limit stops
    assert retriever.queries == [Q, "info of A", "info of B"]
    assert nodes(ans)[-1] == (2, "BE", "max depth") and (1, "B", "search") in nodes(ans)
    assert len(ans.trace.root.find("expand")) == 2
    assert ans.usage.llm_calls == 3 + 2 + 2 + 2 + 1  # level-1 reviews, 2 MPC, AD and BE reviews, 2 analyses, reader


def test_unparseable_review_is_rejected_and_counted():
    retriever = ScriptedRetriever({Q: "F"})
    ans = tor(ScriptedLLM(world_reply), retriever).answer(Q)
    assert nodes(ans) == [(1, "F", "reject")]
    node = ans.trace.root.find("node")[0]
    assert any("unparseable review" in e["message"] for e in node.events)
    assert ans.trace.parse_counts()["failed"] == 1
    # an empty pool: the reader reads the root's paragraphs
    read = ans.trace.root.find("read")[0]
    assert any("empty evidence pool" in e["message"] for e in read.events) and ans.answer == "Ada Lovelace"


def test_a_later_query_in_prose_does_not_turn_an_accept_into_a_search():
    """Issue 29, item 14: the tag of Step 3's output decides, not the last tag of the reply."""

    def reply(request: GenerationRequest) -> str:
        if request.text().startswith("Instruction:I will give you a query"):
            return "[ANSWER] Ada\nNo [QUERY] needed."
        return world_reply(request)

    retriever = ScriptedRetriever({Q: "C"})
    ans = tor(ScriptedLLM(reply), retriever).answer(Q)
    assert nodes(ans) == [(1, "C", "accept")] and retriever.queries == [Q]


@pytest.mark.parametrize("expansion", ["direct", "cot"])
def test_without_relevance_pruning_an_irrelevant_node_is_expanded(expansion):
    """Issue 29, item 15: with relevance pruning off every paragraph is expanded (Table 5's
    ablation); an irrelevant review without a query of its own gets one from Table 9's
    completion, as under MPC."""
    retriever = ScriptedRetriever(TABLE)
    ans = tor(ScriptedLLM(world_reply), retriever, widths="3,2", depth=2, expansion=expansion,
              relevance_pruning=False).answer(Q)
    assert retriever.queries == [Q, "query of A", "info of B"]
    assert nodes(ans) == [(1, "C", "accept"), (1, "A", "search"), (2, "AD", "accept"), (1, "B", "search"),
                          (2, "BE", "max depth")]
    (expand,) = ans.trace.root.find("expand")  # B's only: A has its own [QUERY]
    assert expand.inputs["strategy"] == "mpc" and expand.outputs["query"] == "info of B"
    assert any("relevance pruning off" in e["message"] for e in expand.events)
    assert ans.usage.llm_calls == 3 + 1 + 2 + 2 + 1  # level-1 reviews, B's completion, AD and BE, 2 analyses, reader
    # an irrelevant review that asks a query of its own searches it, without a completion
    own = {**REVIEWS, "B": "- Judgment: [IRRELEVANT]\n- Judgment: [UNSUPPORTED]\n- Output: [QUERY] info of B"}

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.startswith("Instruction:I will give you a query"):
            return own.get(_path_ids(prompt), "- Judgment: [IRRELEVANT]")
        return world_reply(request)

    retriever = ScriptedRetriever(TABLE)
    ans = tor(ScriptedLLM(reply), retriever, widths="3,2", depth=2, expansion=expansion,
              relevance_pruning=False).answer(Q)
    assert retriever.queries == [Q, "query of A", "info of B"] and not ans.trace.root.find("expand")
    # with relevance pruning (the default) the irrelevant node is rejected, nothing is completed
    pruned = tor(ScriptedLLM(world_reply), widths="3,2", depth=2, expansion=expansion).answer(Q)
    assert (1, "B", "reject") in nodes(pruned) and not pruned.trace.root.find("expand")


def test_an_accepted_path_is_answered_from_its_paragraphs():
    """Issue 29, item 16 (§3.2): once a path is accepted the model answers Q from the path's
    documents (Table 10's prompt); that answer is the brief analysis the evidence carries. One
    call more per accepted node, counted in #API (the usage's LLM calls)."""
    llm = ScriptedLLM(world_reply)
    ans = tor(llm, widths="3,2", depth=2).answer(Q)  # MPC with Table 8's review: no thoughts
    assert nodes(ans) == [(1, "C", "accept"), (1, "A", "search"), (2, "AD", "accept"), (1, "B", "reject")]
    evidence = ans.trace.root.find("tree")[0].outputs["evidence"]
    assert [ev["analysis"] for ev in evidence] == ["Paths C give the founder. The answer is Ada Lovelace.",
                                                   "Paths AD give the founder. The answer is Ada Lovelace."]
    analyses = ans.trace.root.find("analyse")
    assert [a.inputs["paragraphs"] for a in analyses] == [["C"], ["A", "D"]]
    accepted = [n for n in ans.trace.root.find("node") if n.outputs["action"] == "accept"]
    assert [[c.kind for c in n.children] for n in accepted] == [["analyse"], ["analyse"]]
    for a in analyses:
        (call,) = a.llm_calls
        assert call["prompt"].startswith(ANSWER_FROM_DOCUMENTS) and call["prompt"].endswith(f"Question:{Q}\n")
        assert a.outputs["answer"] == "Ada Lovelace"
    assert ans.usage.llm_calls == 3 + 1 + 1 + 2 + 1  # level-1 reviews, A's completion, AD's review, 2 analyses, reader
    assert [h.answer for h in ans.hops if h.label == "accept"] == ["Ada Lovelace", "Ada Lovelace"]
    read = ans.trace.root.find("read")[0].llm_calls[0]["prompt"]
    assert "Assertions:Paths C give the founder. The answer is Ada Lovelace.\nDocuments:" in read
    # analysis=review: the review's own Step-2 thought and [ANSWER] (here the bare answer), no call
    old = tor(ScriptedLLM(world_reply), widths="3,2", depth=2, analysis="review").answer(Q)
    assert [ev["analysis"] for ev in old.trace.root.find("tree")[0].outputs["evidence"]] == ["Ada", "Ada Lovelace"]
    assert old.usage.llm_calls == ans.usage.llm_calls - 2 and not old.trace.root.find("analyse")
    with pytest.raises(MethodError):
        tor(ScriptedLLM([]), analysis="thought")


def test_short_answer_cuts_a_readers_sentence_to_its_phrase():
    """``short_answer`` (in the small-model preset): the final reader's reply without "The answer
    is" is cut to its phrase by one more call; a reply with the marker, or the option off, is
    read as before."""
    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.startswith("Question: "):  # hopqa.methods.shorten
            return "Ada Lovelace"
        if "Assertions:" in prompt:  # the final reader (evidence fusion): a sentence, no marker
            return "It was founded by Ada Lovelace in London."
        return world_reply(request)

    plain = tor(ScriptedLLM(reply), widths="3,2", depth=2).answer(Q)
    assert plain.answer == "It was founded by Ada Lovelace in London" and not plain.trace.root.find("shorten")
    short = tor(ScriptedLLM(reply), widths="3,2", depth=2, short_answer=True).answer(Q)
    assert short.answer == "Ada Lovelace" and short.usage.llm_calls == plain.usage.llm_calls + 1
    (s,) = short.trace.root.find("read")[0].find("shorten")
    assert s.outputs == {"phrase": "Ada Lovelace", "kept": "phrase"}
    marked = tor(ScriptedLLM(world_reply), widths="3,2", depth=2, short_answer=True).answer(Q)
    assert marked.answer == "Ada Lovelace" and not marked.trace.root.find("shorten")  # the marker was there


def test_small_model_preset_reads_the_paragraphs_without_analysis_calls():
    """The small-model preset (issue 33): the same tree, but the reader reads the accepted paths'
    paragraphs (Table 10's paragraph-based fusion, no assertions), the brief analyses are the
    reviews' own (no ``analyse`` call), and a reader's sentence without "The answer is" is cut."""
    paper_llm, small_llm = ScriptedLLM(world_reply), ScriptedLLM(world_reply)
    paper = tor(paper_llm, widths="3,2", depth=2).answer(Q)
    small = tor(small_llm, widths="3,2", depth=2, preset="small-model").answer(Q)
    assert nodes(small) == nodes(paper) and small.metrics == paper.metrics  # the same tree and pool
    accepted = len(paper.trace.root.find("analyse"))
    assert accepted and not small.trace.root.find("analyse")
    assert small.usage.llm_calls == paper.usage.llm_calls - accepted
    (read,) = small.trace.root.find("read")
    prompt = read.llm_calls[0]["prompt"]
    assert read.inputs["fusion"] == "paragraph" and "\nDocuments:" in prompt and "Assertions:" not in prompt
    assert {p.id for p in small.passages} == {p.id for p in paper.passages}
    assert small.answer == "Ada Lovelace"

    def sentence(request: GenerationRequest) -> str:  # the paragraph reader answers in a sentence
        if request.text().startswith(ANSWER_FROM_DOCUMENTS):
            return "It was founded by Ada Lovelace in London."
        if request.text().startswith("Question: "):  # hopqa.methods.shorten
            return "Ada Lovelace"
        return world_reply(request)

    cut = tor(ScriptedLLM(sentence), widths="3,2", depth=2, preset="small-model").answer(Q)
    assert cut.answer == "Ada Lovelace" and cut.trace.root.find("read")[0].find("shorten")


def test_short_reader_asks_the_same_context_for_a_short_answer_without_demonstrations():
    """``reader=short`` (issue 33, not in the paper): the final read shows the pool's pieces as
    ``fusion`` says under a zero-shot short-answer prompt (no demonstrations, no "The answer
    is"), its reply's first line is the answer and is not cut unless it runs long; the brief
    analyses keep the paper's prompt; the tree is the same."""
    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.startswith("Answer the question using the"):
            return " Ada Lovelace\n"
        if prompt.startswith("Question: "):  # hopqa.methods.shorten
            return "Lovelace"
        return world_reply(request)

    paper = tor(ScriptedLLM(reply), widths="3,2", depth=2, fusion="paragraph").answer(Q)
    for fusion, label in (("paragraph", "\n\nDocuments:\n[1] Title C | "), ("evidence", "\n\nEvidence:\nAssertions:")):
        llm = ScriptedLLM(reply)
        short = tor(llm, widths="3,2", depth=2, fusion=fusion, reader="short", short_answer=True).answer(Q)
        assert short.answer == "Ada Lovelace" and nodes(short) == nodes(paper)
        (read,) = short.trace.root.find("read")
        assert read.inputs == {"fusion": fusion, "reader": "short"} and read.outputs["parsed_by"] == "first-line"
        prompt = read.llm_calls[0]["prompt"]
        assert prompt.startswith("Answer the question using the") and label in prompt
        assert "Demonstration" not in prompt and 'must include "The answer is' not in prompt and prompt.endswith(f"Question: {Q}\nAnswer:")
        assert "\n\n" in llm.requests[-1].stop and not read.find("shorten")  # two words: not cut
        analyses = short.trace.root.find("analyse")  # the brief analyses: the paper's prompt
        assert analyses and all(a.llm_calls[0]["prompt"].startswith(ANSWER_FROM_DOCUMENTS) for a in analyses)
    with pytest.raises(MethodError):
        tor(ScriptedLLM([]), reader="brief")
    assert build_method("tor", ScriptedLLM([]), ScriptedRetriever(TABLE)).config.reader == "paper"


def test_choice_holds_a_which_of_two_answer_to_the_question_s_candidates():
    """``choice`` (issue 33; in the small-model preset): on a "which of A or B" question, a reader's
    answer naming neither candidate (the entity the comparison goes through) is asked once more,
    over the pool's paragraphs, for one of the two; the paper's reader (off) keeps it."""
    from hopqa.methods.tor.method import ToRConfig, read_pool

    question = "Which gadget is heavier, Title C or Title B?"  # (not "Title A": an article)

    def reply(request: GenerationRequest) -> str:
        if request.text().startswith(ANSWER_FROM_DOCUMENTS):
            return "The answer is Ada Lovelace."  # the inventor, where the gadget is asked
        return "Title B\n"

    pool = [Evidence((P["C"], P["B"]), "")]
    for choice, expected in ((True, "Title B"), (False, "Ada Lovelace")):
        llm, trace = ScriptedLLM(reply), Trace(question=question, method="tor", config={})
        with trace.activate():
            answer, _, passages = read_pool(llm, ToRConfig(fusion="paragraph", shots=1, choice=choice), question, pool, [])
        assert answer == expected and [p.id for p in passages] == ["C", "B"]
        steps = trace.root.find("choice")
        assert len(steps) == choice and len(llm.requests) == 1 + choice
        if choice:
            assert steps[0].outputs == {"passages": ["C", "B"], "reply": "Title B", "kept": "Title B", "how": "asked"}
    assert build_method("tor", ScriptedLLM([]), ScriptedRetriever(TABLE), preset="small-model").config.choice
    assert not build_method("tor", ScriptedLLM([]), ScriptedRetriever(TABLE)).config.choice


def test_grounded_accept_searches_on_from_a_path_that_does_not_state_its_answer():
    """``grounded_accept`` (issue 33): a [SUPPORTED] review whose brief analysis's answer is not
    in the path's paragraphs is searched further (MPC writes the query) or stopped at the maximum
    depth, noted; a path that states it is accepted. Off (the paper): every [SUPPORTED] is accepted."""
    stated = {**P, "D": Passage("D", "Title D", "Ada Lovelace founded the company that made the gadget.")}
    retriever = _ScriptedRetriever(TABLE, stated)
    ans = tor(ScriptedLLM(world_reply), retriever, widths="3,2", depth=2, grounded_accept=True).answer(Q)
    assert nodes(ans) == [(1, "C", "search"), (2, "CD", "reject"), (1, "A", "search"), (2, "AC", "max depth"),
                          (2, "AD", "accept"), (1, "B", "reject")]
    assert retriever.queries == [Q, "info of A", "info of A"]  # C's search, then A's
    ungrounded = [n for n in ans.trace.root.find("node") if any("grounded_accept" in e["message"] for e in n.events)]
    assert ["".join(n.inputs["path"]) for n in ungrounded] == ["C", "AC"]
    assert [ev["passages"] for ev in ans.trace.root.find("tree")[0].outputs["evidence"]] == [["A", "D"]]
    assert ans.answer == "Ada Lovelace" and ans.metrics["evidence"] == 1.0
    off = tor(ScriptedLLM(world_reply), _ScriptedRetriever(TABLE, stated), widths="3,2", depth=2).answer(Q)
    assert nodes(off)[0] == (1, "C", "accept") and not any(
        "grounded_accept" in e["message"] for n in off.trace.root.find("node") for e in n.events)


@pytest.mark.parametrize("answer, stated", [
    ("Ada Lovelace", True), ("ada  LOVELACE.", True), ("the Title D", True),  # normalised; a title counts
    ("Lovelace Ada", False), ("Ada Byron", False), ("", False), ("Yes", True), ("no.", True),
])
def test_answer_stated_reads_the_paths_titles_and_texts(answer, stated):
    from hopqa.methods.tor.method import answer_stated

    path = [P["C"], Passage("D", "Title D", "Ada Lovelace founded the company.")]
    assert answer_stated(answer, path) is stated


def test_an_empty_acceptance_answer_keeps_the_reviews_analysis():
    def reply(request: GenerationRequest) -> str:
        return " " if request.text().startswith(ANSWER_FROM_DOCUMENTS) else world_reply(request)

    ans = tor(ScriptedLLM(reply), ScriptedRetriever({Q: "C"}), expansion="cot").answer(Q)
    (analyse,) = ans.trace.root.find("analyse")
    assert any("empty" in e["message"] for e in analyse.events)
    assert ans.trace.root.find("tree")[0].outputs["evidence"][0]["analysis"] == "Ada"


def test_recall_ranking_warns_and_notes_when_minilm_cannot_load(monkeypatch):
    """Issue 29, item 20: the lexical stand-in is no silent switch: a ``hopqa: warning:`` (a
    ``UserWarning``) once per method, and a note on every ``rank`` step that used it."""
    import hopqa.embed as embed

    class Unloadable:
        def __init__(self, *args, **kwargs):
            raise OSError("no model files on this machine")

    monkeypatch.setattr(embed, "MiniLMEmbedder", Unloadable)
    monkeypatch.setattr(embed, "_default", None)
    for name, options in (("tor", {"widths": "3,2", "depth": 2, "expansion": "cot"}), ("cor", {})):
        method = build_method(name, ScriptedLLM(world_reply if name == "tor" else cor_reply), ScriptedRetriever(TABLE),
                              shots=1, recall_k=2, **options)
        with pytest.warns(UserWarning, match="Recall@15 .*lexical"):
            first = method.answer(Q)
        with warnings.catch_warnings(record=True) as again:
            warnings.simplefilter("always")
            second = method.answer(Q)
        assert not [w for w in again if "Recall@15" in str(w.message)]  # once per method
        for ans in (first, second):
            (rank,) = ans.trace.root.find("rank")
            assert rank.outputs["embedder"] == "lexical" and len(ans.passages) == 2
            assert any("lexical" in e["message"] and "MiniLM" in e["message"] for e in rank.events)


def test_a_given_or_loadable_embedder_ranks_without_a_warning(monkeypatch):
    import hopqa.embed as embed

    class Loads(embed.LexicalEmbedder):  # stands in for MiniLM, which the unit tests do not load
        name = "all-MiniLM-L6-v2"

    monkeypatch.setattr(embed, "MiniLMEmbedder", Loads)
    monkeypatch.setattr(embed, "_default", None)
    for embedder in (None, embed.LexicalEmbedder()):
        method = build_method("tor", ScriptedLLM(world_reply), ScriptedRetriever(TABLE), embedder=embedder, shots=1,
                              recall_k=2, widths="3,2", depth=2, expansion="cot")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ans = method.answer(Q)
        assert not [w for w in caught if "Recall@15" in str(w.message)]
        (rank,) = ans.trace.root.find("rank")
        assert rank.outputs["embedder"] == ("lexical" if embedder else "all-MiniLM-L6-v2") and not rank.events


def test_bad_options_are_errors():
    for bad in ({"widths": "5,x"}, {"widths": "0,3"}, {"depth": 0}, {"expansion": "bfs"}, {"fusion": "all"}):
        with pytest.raises(MethodError):
            tor(ScriptedLLM([]), **bad)


def test_concurrent_expansion_gives_the_sequential_tree():
    def run(concurrency: int):
        llm = ScriptedLLM(world_reply, max_concurrency=concurrency, gate=gate if concurrency > 1 else None)
        return tor(llm, widths="3,2", depth=2).answer(Q), llm

    barrier = threading.Barrier(3, timeout=10)
    calls = iter(range(1000))

    def gate():  # the three level-1 reviews must be in flight together
        if next(calls) < 3:
            barrier.wait()

    seq, seq_llm = run(1)
    par, par_llm = run(4)
    assert par_llm.max_in_flight == 3 and seq_llm.max_in_flight == 1
    assert nodes(par) == nodes(seq) and par.answer == seq.answer and par.usage.llm_calls == seq.usage.llm_calls
    assert [p.id for p in par.passages] == [p.id for p in seq.passages]
    # each node's calls land on its own step
    assert all(len(s.llm_calls) == 1 for s in par.trace.root.find("node"))


def test_reader_context_is_filled_to_the_limit_never_past():
    llm = ScriptedLLM([])
    pool = [Evidence((Passage(str(i), f"T{i}", "word " * 100),), f"analysis {i}") for i in range(30)]
    fused = fuse(llm, "evidence", Q, pool, shots=3, max_words=120, limit=2048, reply_tokens=128)
    assert 0 < fused.shown < fused.available == 30
    assert fused.tokens <= fused.budget and fused.budget == 2048 - 128 - 64
    assert "T0" in fused.prompt and f"T{fused.shown}" not in fused.prompt
    bigger = fuse(llm, "evidence", Q, pool, shots=3, max_words=120, limit=4096, reply_tokens=128)
    assert bigger.shown > fused.shown
    paragraphs = fuse(llm, "paragraph", Q, pool, shots=0, max_words=120, limit=4096, reply_tokens=128)
    assert "[1] T0" in paragraphs.prompt and f"[{paragraphs.shown}] T{paragraphs.shown - 1}" in paragraphs.prompt


def test_recall_at_15_ranks_by_similarity_to_the_response():
    from hopqa.embed import LexicalEmbedder

    passages = [Passage(str(i), f"T{i}", f"topic{i} filler text") for i in range(20)]
    top = top_by_similarity(passages, "the answer is topic17 and topic3", 15, LexicalEmbedder())
    assert len(top) == 15 and {top[0].id, top[1].id} == {"17", "3"}
    assert top_by_similarity(passages[:10], "x", 15, LexicalEmbedder()) == passages[:10]


def test_method_figures_reach_the_evaluation_summary(tmp_path):
    records = [{"metrics": {"em": 1.0, "docs_reviewed": 10.0, "evidence": 2.0}, "usage": {"llm_calls": 20}},
               {"metrics": {"em": 0.0, "docs_reviewed": 6.0, "evidence": 1.0}, "usage": {"llm_calls": 12}}]
    summary = summarize(records, tmp_path)
    assert summary.metrics["docs_reviewed"] == 8.0 and summary.metrics["evidence"] == 1.5
    assert summary.metrics["docs_per_call"] == pytest.approx(8.0 / 16.0)


# -- CoR ----------------------------------------------------------------------------------------------
def cor_reply(request: GenerationRequest) -> str:
    prompt = request.text()
    if prompt.startswith("Instruction:"):
        ids = _path_ids(prompt)
        if "D" in ids:
            return "- Thought: x\n- Judgment: [RELEVANT]\n- Thought: C then D.\n- Judgment: [SUPPORTED]\n- Output: [ANSWER] Ada"
        return "- Judgment: [RELEVANT]\n- Judgment: [UNSUPPORTED]\n- Output: [QUERY] query of A"
    return "The answer is Ada."


def test_cor_is_one_chain_over_all_paragraphs():
    retriever = ScriptedRetriever(TABLE)
    ans = build_method("cor", ScriptedLLM(cor_reply), retriever, shots=0).answer(Q)
    assert ans.error is None and ans.answer == "Ada"
    assert retriever.queries == [Q, "query of A"]
    reviews = ans.trace.root.find("review")
    assert [s.outputs["action"] for s in reviews] == ["search", "accept"]
    # two reviews, the accepted chain's brief analysis, the reader
    assert ans.usage.llm_calls == 4 and ans.metrics == {"docs_reviewed": 4.0, "evidence": 1.0}
    # the accepted chain's brief analysis: Q answered from the chain's paragraphs (Table 10), inside the review step
    (analyse,) = ans.trace.root.find("analyse")
    assert analyse.inputs["paragraphs"] == ["C", "A", "B", "D"] and analyse in reviews[1].children
    assert ans.trace.root.find("tree") == [] and "Assertions:The answer is Ada." in (
        ans.trace.root.find("read")[0].llm_calls[0]["prompt"])
    # the second review saw every paragraph of the chain
    assert _path_ids(ans.trace.root.find("review")[1].llm_calls[0]["prompt"]) == "CABD"


def test_cor_goes_on_with_the_query_of_an_irrelevant_review_and_stops_replies_at_the_next_question():
    replies = ["- Judgment: [IRRELEVANT]\n- Judgment: [UNSUPPORTED]\n- Output: [QUERY] query of A",
               "- Judgment: [RELEVANT]\n- Judgment: [SUPPORTED]\n- Output: [ANSWER] Ada", "The answer is Ada.",
               "The answer is Ada."]
    llm = ScriptedLLM(replies)
    retriever = ScriptedRetriever(TABLE)
    ans = build_method("cor", llm, retriever, shots=0).answer(Q)
    assert retriever.queries == [Q, "query of A"] and ans.answer == "Ada"
    assert all("\nQuestion:" in r.stop for r in llm.requests)


def test_cor_stops_at_the_turn_limit_and_reads_the_chain():
    retriever = ScriptedRetriever({Q: "A", "query of A": "B"})
    ans = build_method("cor", ScriptedLLM(cor_reply), retriever, shots=0, max_turns=2).answer(Q)
    assert len(ans.trace.root.find("review")) == 2 and ans.metrics["evidence"] == 0.0
    assert any("empty evidence pool" in e["message"] for e in ans.trace.root.find("read")[0].events)


# -- structured outputs -------------------------------------------------------------------------------
JSON_LLM = {GENERATE, STRUCTURED}


def js(**fields) -> str:
    return json.dumps(fields)


def review_json(review: Review, thoughts: bool = True) -> str:
    """``review`` as the JSON a schema-constrained review writes."""
    obj = {"thought": review.thought} if thoughts else {}
    obj.update(relevance="relevant" if review.relevant else "irrelevant",
               support="supported" if review.supported else "unsupported", answer=review.answer, query=review.query)
    return json.dumps(obj)


class IgnoringLLM(ScriptedLLM):
    """A backend that declares STRUCTURED but answered in free text (a server that refused every
    ``response_format``)."""

    def _complete(self, request):
        gen = super()._complete(request)
        gen.schema_ignored = request.schema is not None
        return gen


def parse_records(answer) -> list[tuple[str, str, str, bool]]:
    """(field, status, how, structured) of every parse record, depth first."""
    return [(e["field"], e["status"], e["how"], e["structured"]) for s in answer.trace.root.walk() for e in s.events
            if e["message"] == "parse"]


def test_review_schema_and_instruction():
    assert review_schema(True) == {
        "type": "object",
        "properties": {"thought": {"type": "string"},
                       "relevance": {"type": "string", "enum": ["relevant", "irrelevant"]},
                       "support": {"type": "string", "enum": ["supported", "unsupported"]},
                       "answer": {"type": "string"}, "query": {"type": "string"}},
        "required": ["thought", "relevance", "support", "answer", "query"], "additionalProperties": False}
    assert list(review_schema(False)["properties"]) == ["relevance", "support", "answer", "query"]
    assert review_schema(False)["required"] == ["relevance", "support", "answer", "query"]
    plain = review_instruction(False)
    assert plain.startswith("Reply with one JSON object of this form: {") and "\n" not in plain
    assert json.loads(plain.split(": ", 1)[1]) == {
        "relevance": "relevant | irrelevant", "support": "supported | unsupported",
        "answer": "the short answer when supported, else empty",
        "query": "a search query for the missing information when unsupported, else empty"}
    assert next(iter(json.loads(review_instruction(True).split(": ", 1)[1]))) == "thought"
    assert MPC_SCHEMA["properties"] == {"info": {"type": "string"}} and '"info"' in MPC_INSTRUCTION


@pytest.mark.parametrize("obj, review", [
    ({"thought": "Spielberg is  American.", "relevance": "relevant", "support": "supported", "answer": "American",
      "query": "ignored"}, Review(True, True, answer="American", thought="Spielberg is American.")),
    ({"relevance": "relevant", "support": "unsupported", "answer": "", "query": "Where was Hemingway born?"},
     Review(True, False, query="Where was Hemingway born?")),
    # an irrelevant review keeps its query (no relevance pruning, CoR), not its answer
    ({"relevance": "irrelevant", "support": "unsupported", "answer": "x", "query": "Who directed The Zone?"},
     Review(False, False, query="Who directed The Zone?")),
    ({"relevance": "irrelevant"}, Review(False, False)),
    # usable without the output text: the method rejects a search without a query
    ({"relevance": "relevant", "support": "supported", "answer": "", "query": ""}, Review(True, True)),
    ({"relevance": "relevant", "support": "unsupported", "answer": "", "query": ""}, Review(True, False)),
    # a server that ignored the schema: case and a leaked output tag forgiven
    ({"relevance": " RELEVANT", "support": "Supported", "answer": "[ANSWER] Ada", "query": 3},
     Review(True, True, answer="Ada")),
])
def test_review_from_json(obj, review):
    assert review_from_json(obj) == review


@pytest.mark.parametrize("obj", [
    {}, {"relevance": "maybe", "support": "supported", "answer": "Ada"}, {"relevance": None},
    {"relevance": ["relevant"]}, {"relevance": "relevant"}, {"relevance": "relevant", "support": "partly"},
])
def test_review_from_json_without_a_usable_judgment(obj):
    assert review_from_json(obj) is None


def test_review_text_is_the_demonstrations_format_and_reads_back():
    # Table 8's demonstrations, from their "Step 1" on
    demos = ["Step 1" + demo.render(False).split("\nStep 1", 1)[1] for demo in REVIEW_DEMOS]
    assert review_text(Review(False, False)) == demos[0]
    assert review_text(Review(True, False, query="Where was Ernest Hemingway born?")) == demos[1]
    assert review_text(Review(True, True, answer="American")) == demos[2]
    # the thought is Step 2's reasoning path (Step 1's thought of an irrelevant review)
    assert review_text(Review(True, True, answer="American", thought="He is American.")) == (
        "Step 1\n- Judgment: [RELEVANT]\nStep 2\n- Thought: He is American.\n- Judgment: [SUPPORTED]\nStep 3\n"
        "- Output: [ANSWER] American")
    assert review_text(Review(False, False, query="Who directed it?", thought="Off topic.")) == (
        "Step 1\n- Thought: Off topic.\n- Judgment: [IRRELEVANT]\nStep 2\n- Judgment: [UNSUPPORTED]\nStep 3\n"
        "- Output: [QUERY] Who directed it?")
    for review in (Review(True, True, answer="Oak Park, Illinois"), Review(True, False, query="q?"),
                   Review(False, False), Review(False, False, query="q?")):
        parsed = parse_review(review_text(review))
        assert parsed.status == "direct" and parsed.value == review


def test_mpc_from_json_and_read_mpc():
    assert mpc_from_json({"info": " [INFO] Lyon is\non the Rhone."}) == "Lyon is on the Rhone."
    assert mpc_from_json({"info": " "}) is None and mpc_from_json({"info": 3}) is None
    assert mpc_from_json({"info": "word " * 500}).count("word") == 80
    trace = Trace()
    with trace.activate():
        direct = read_mpc(js(info="Lyon is on the Rhone."), True)
        cut = read_mpc('{"info": "Lyon is on', True)
        free = read_mpc("- Information: [INFO] Lyon.", True, schema_ignored=True)
        empty = read_mpc(js(info=""), True)
        off = read_mpc("- Information: [INFO] Lyon.", False)
    assert (direct.status, direct.value) == ("direct", "Lyon is on the Rhone.")
    assert (cut.status, cut.value) == ("fallback", "Lyon is on")
    assert (free.status, free.value, free.how) == ("fallback", "Lyon.", "schema ignored by the server; free text: [INFO]")
    assert empty.status == "failed" and off == parse_mpc("- Information: [INFO] Lyon.")
    assert trace.parse_counts() == {"direct": 0, "fallback": 0, "failed": 0}  # the parse rate counts reviews only


WORLD = {
    "C": Review(True, True, answer="Ada", thought="C names the founder."),
    "A": Review(True, False, query="query of A", thought="A names the company, not its founder."),
    "B": Review(False, False, thought="B is about something else."),
    "AD": Review(True, True, answer="Ada Lovelace", thought="A and D give the founder."),
    "AC": Review(True, True, answer="Ada"),
    "BE": Review(False, False),
}


def world(json_reviews: bool):
    """The scripted world of ``world_reply`` with reviews from ``WORLD``: as JSON (the schema's
    fields, a thought only when the schema has one) or as the paper's text (``review_text``)."""

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.startswith("Instruction:I will give you a query"):
            review = WORLD.get(_path_ids(prompt), Review(False, False))
            if not json_reviews:
                return review_text(review)
            thoughts = "thought" in (request.schema_dict() or {}).get("properties", {})
            return review_json(review, thoughts)
        if prompt.startswith("Instruction:I will give you a question") and json_reviews:  # MPC
            return js(info="info of " + ("B" if "Title B" in prompt.rsplit("References: ", 1)[1] else "A"))
        return world_reply(request)

    return reply


def review_requests(llm) -> list[GenerationRequest]:
    return [r for r in llm.requests if r.text().startswith("Instruction:I will give you a query")]


def test_tor_structured_reviews_build_the_free_text_tree():
    free_llm = ScriptedLLM(world(False))
    free = tor(free_llm, widths="3,2", depth=2, expansion="cot").answer(Q)
    llm = ScriptedLLM(world(True), capabilities=JSON_LLM)
    ans = tor(llm, widths="3,2", depth=2, expansion="cot").answer(Q)  # structured=auto
    assert ans.error is None and ans.answer == free.answer == "Ada Lovelace"
    assert nodes(ans) == nodes(free) == [(1, "C", "accept"), (1, "A", "search"), (2, "AD", "accept"),
                                         (1, "B", "reject")]
    # Table 7's prompt unchanged, then the JSON line; the thought-first schema; room for the JSON
    for on, off in zip(review_requests(llm), review_requests(free_llm), strict=True):
        assert on.prompt == off.prompt + review_instruction(True) and off.prompt.endswith("\n")
        assert on.schema_dict() == review_schema(True) and off.schema is None
        assert on.max_tokens == 256 + 32 and off.max_tokens == 256 and on.stop == off.stop == ("\nQuestion:",)
    assert len(review_requests(llm)) == 4  # the brief analyses and the reader: no schema
    assert all(r.schema is None for r in llm.requests if not r.text().startswith("Instruction:I will give you a query"))
    # the trace shows the review in the paper's format, as in free text, and the JSON as it came
    for on, off in zip(ans.trace.root.find("node"), free.trace.root.find("node"), strict=True):
        assert on.outputs["review"] == off.outputs["review"] and "raw" not in off.outputs
        assert json.loads(on.outputs["raw"])["relevance"] in ("relevant", "irrelevant")
    assert ans.trace.root.find("node")[0].outputs["review"].startswith("Step 1\n- Judgment: [RELEVANT]\nStep 2\n"
                                                                       "- Thought: C names the founder.")
    # the brief analysis: the acceptance call's answer; with analysis=review, the JSON's thought and answer
    assert ans.trace.root.find("tree")[0].outputs["evidence"][0]["analysis"] == (
        "Paths C give the founder. The answer is Ada Lovelace.")
    old = tor(ScriptedLLM(world(True), capabilities=JSON_LLM), widths="3,2", depth=2, expansion="cot",
              analysis="review").answer(Q)
    assert old.trace.root.find("tree")[0].outputs["evidence"][0]["analysis"] == "C names the founder. Ada"
    assert parse_records(ans) == [("review", "direct", "json", True)] * 4
    assert [r[:3] for r in parse_records(free)] == [("review", "direct", "supported"),
                                                    ("review", "direct", "unsupported"),
                                                    ("review", "direct", "supported"), ("review", "direct", "irrelevant")]


def test_tor_structured_mpc_and_plain_review():
    retriever = ScriptedRetriever(TABLE)
    llm = ScriptedLLM(world(True), capabilities=JSON_LLM)
    ans = tor(llm, retriever, widths="3,2", depth=2).answer(Q)  # expansion=mpc: Table 8's review
    assert ans.error is None and ans.answer == "Ada Lovelace" and retriever.queries == [Q, "info of A"]
    assert all(r.schema_dict() == review_schema(False) for r in review_requests(llm))
    assert all(r.prompt.endswith("\n" + review_instruction(False)) for r in review_requests(llm))
    (mpc,) = [r for r in llm.requests if r.text().startswith("Instruction:I will give you a question")]
    assert mpc.schema_dict() == MPC_SCHEMA and mpc.prompt.endswith("\n" + MPC_INSTRUCTION)
    assert mpc.max_tokens == 160 + 32
    (expand,) = ans.trace.root.find("expand")
    assert expand.outputs["parsed"] == "direct" and expand.outputs["query"] == "info of A"
    assert json.loads(expand.outputs["raw"]) == {"info": "info of A"}
    # one parse record per review, as in free text (MPC's status is the expand step's output)
    assert ans.trace.parse_counts() == {"direct": 4, "fallback": 0, "failed": 0}
    # Table 8's format: no thought
    assert ans.trace.root.find("node")[1].outputs["review"] == (
        "Step 1\n- Judgment: [RELEVANT]\nStep 2\n- Judgment: [UNSUPPORTED]\nStep 3\n- Output: [QUERY] query of A")


def test_tor_free_text_under_a_schema_is_a_fallback():
    llm = IgnoringLLM(world_reply, capabilities=JSON_LLM)  # the paper's text, not JSON
    ans = tor(llm, widths="3,2", depth=2, expansion="cot").answer(Q)
    assert nodes(ans) == [(1, "C", "accept"), (1, "A", "search"), (2, "AD", "accept"), (1, "B", "reject")]
    assert all(r.schema is not None for r in review_requests(llm))
    assert [r[1:] for r in parse_records(ans)] == [
        ("fallback", "schema ignored by the server; free text: supported", True),
        ("fallback", "schema ignored by the server; free text: unsupported", True),
        ("fallback", "schema ignored by the server; free text: supported", True),
        ("fallback", "schema ignored by the server; free text: irrelevant", True)]
    # a server that honoured the schema but the reply holds no JSON object: the same free-text reading
    plain = ScriptedLLM(world_reply, capabilities=JSON_LLM)
    ans = tor(plain, widths="3,2", depth=2, expansion="cot").answer(Q)
    assert parse_records(ans)[0][1:] == ("fallback", "no JSON object; free text: supported", True)
    # the review read from free text is shown in the tag format; the reply itself is the raw output
    node = ans.trace.root.find("node")[0]
    assert node.outputs["raw"] == REVIEWS["C"] and node.outputs["review"] == review_text(Review(True, True, answer="Ada"))


def test_tor_json_without_a_usable_relevance_is_rejected():
    llm = ScriptedLLM([js(thought="?", relevance="maybe", support="supported", answer="Ada", query=""),
                       "The answer is Ada."], capabilities=JSON_LLM)
    ans = tor(llm, ScriptedRetriever({Q: "C"}), expansion="cot").answer(Q)
    assert nodes(ans) == [(1, "C", "reject")]
    assert parse_records(ans) == [("review", "failed", "JSON without a usable value", True)]
    node = ans.trace.root.find("node")[0]
    assert any("unparseable review" in e["message"] for e in node.events)
    # nothing was read: the reply itself is shown
    assert node.outputs["review"] == node.outputs["raw"] == js(thought="?", relevance="maybe", support="supported",
                                                                answer="Ada", query="")


def test_tor_structured_off_is_the_papers_free_text():
    def run(mode: str, caps: set[str]):
        llm = ScriptedLLM(world_reply, capabilities=caps)
        return tor(llm, widths="3,2", depth=2, structured=mode).answer(Q), llm

    off, off_llm = run("off", JSON_LLM)
    auto, auto_llm = run("auto", {GENERATE})
    assert all(r.schema is None for r in off_llm.requests)
    assert [(r.prompt, r.stop, r.max_tokens) for r in off_llm.requests] == [
        (r.prompt, r.stop, r.max_tokens) for r in auto_llm.requests]
    assert nodes(off) == nodes(auto) and off.answer == auto.answer
    assert parse_records(off) == parse_records(auto) and {r[3] for r in parse_records(off)} == {False}
    assert [s.outputs["review"] for s in off.trace.root.find("node")] == [
        REVIEWS.get(path, "- Judgment: [IRRELEVANT]") for _, path, _ in nodes(off)]
    assert all("raw" not in s.outputs for s in off.trace.root.find("node"))


@pytest.mark.parametrize("name, who", [("tor", "Tree of Reviews' review"), ("cor", "Chain of Reviews' review")])
def test_structured_on_without_the_capability_is_an_error(name, who):
    llm = ScriptedLLM(["x"])
    retriever = ScriptedRetriever(TABLE)
    ans = build_method(name, llm, retriever, shots=1, structured="on").answer(Q)
    assert ans.error is not None and ans.error.startswith("UnsupportedCapability: ")
    assert f"{who} (set structured=auto or off to use free text) needs it" in ans.error
    assert llm.requests == [] and retriever.queries == []


def cor_json_reply(request: GenerationRequest) -> str:
    """``cor_reply`` as JSON reviews."""
    prompt = request.text()
    if prompt.startswith("Instruction:"):
        if "D" in _path_ids(prompt):
            return review_json(Review(True, True, answer="Ada", thought="C then D."))
        return review_json(Review(True, False, query="query of A", thought="The founder is missing."))
    return "The answer is Ada."


def test_cor_structured_reviews():
    free_llm = ScriptedLLM(cor_reply)
    free = build_method("cor", free_llm, ScriptedRetriever(TABLE), shots=0).answer(Q)
    retriever = ScriptedRetriever(TABLE)
    llm = ScriptedLLM(cor_json_reply, capabilities=JSON_LLM)
    ans = build_method("cor", llm, retriever, shots=0).answer(Q)
    assert ans.error is None and ans.answer == free.answer == "Ada" and retriever.queries == [Q, "query of A"]
    reviews = ans.trace.root.find("review")
    assert [s.outputs["action"] for s in reviews] == ["search", "accept"]
    for on, off in zip(llm.requests[:2], free_llm.requests[:2], strict=True):
        assert on.prompt == off.prompt + review_instruction(True) and on.schema_dict() == review_schema(True)
        assert on.max_tokens == 256 + 32 and off.schema is None
    assert llm.requests[2].schema is None and llm.requests[3].schema is None  # the brief analysis, the reader
    assert reviews[0].outputs["review"] == ("Step 1\n- Judgment: [RELEVANT]\nStep 2\n- Thought: The founder is missing.\n"
                                            "- Judgment: [UNSUPPORTED]\nStep 3\n- Output: [QUERY] query of A")
    assert json.loads(reviews[1].outputs["raw"])["answer"] == "Ada"
    assert ans.trace.root.find("read")[0].llm_calls[0]["prompt"].count("Assertions:The answer is Ada.") == 1
    old = build_method("cor", ScriptedLLM(cor_json_reply, capabilities=JSON_LLM), ScriptedRetriever(TABLE), shots=0,
                       analysis="review").answer(Q)
    assert old.trace.root.find("read")[0].llm_calls[0]["prompt"].count("C then D. Ada") == 1  # the review's own
    assert parse_records(ans) == [("review", "direct", "json", True)] * 2
    # structured=off on a backend that could: the paper's prompts, no schema, the same records as before
    off_llm = ScriptedLLM(cor_reply, capabilities=JSON_LLM)
    off = build_method("cor", off_llm, ScriptedRetriever(TABLE), shots=0, structured="off").answer(Q)
    assert off.answer == "Ada" and all(r.schema is None for r in off_llm.requests)
    assert [(r.prompt, r.stop, r.max_tokens) for r in off_llm.requests] == [
        (r.prompt, r.stop, r.max_tokens) for r in free_llm.requests]
    assert parse_records(off) == parse_records(free) == [("review", "direct", "unsupported", False),
                                                         ("review", "direct", "supported", False)]
    assert [s.outputs for s in off.trace.root.find("review")] == [s.outputs for s in free.trace.root.find("review")]


def test_cor_structured_fallback_and_failure():
    # free text under the schema: read by the free-text parser
    llm = IgnoringLLM(cor_reply, capabilities=JSON_LLM)
    ans = build_method("cor", llm, ScriptedRetriever(TABLE), shots=0).answer(Q)
    assert ans.answer == "Ada" and [r[1] for r in parse_records(ans)] == ["fallback", "fallback"]
    # a JSON object without a relevance judgment: the chain stops, the reader reads its paragraphs
    llm = ScriptedLLM([js(thought="x", relevance="", support="supported", answer="Ada", query=""),
                       "The answer is Ada."], capabilities=JSON_LLM)
    ans = build_method("cor", llm, ScriptedRetriever(TABLE), shots=0).answer(Q)
    (review,) = ans.trace.root.find("review")
    assert review.outputs["action"] == "stop" and any("unparseable review" in e["message"] for e in review.events)
    assert parse_records(ans) == [("review", "failed", "JSON without a usable value", True)]
    assert any("empty evidence pool" in e["message"] for e in ans.trace.root.find("read")[0].events)


# -- the real model -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_tor_end_to_end_on_embedded_model_and_a_2wiki_question(smollm2, data_dir):
    from hopqa.datasets import load_dataset
    from hopqa.retrieval.pool import CandidatePool

    ex = load_dataset("2wikimultihopqa", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("tor", smollm2, widths="3,2", depth=2).with_retriever(CandidatePool(ex.paragraphs))
    ans = method.answer(ex.question)
    assert ans.error is None, ans.error
    node_steps = ans.trace.root.find("node")
    assert len(node_steps) >= 3 and all(s.outputs.get("action") for s in node_steps)
    assert all(s.llm_calls and s.llm_calls[0]["outputs"][0] is not None for s in node_steps)
    counts = ans.trace.parse_counts()
    assert sum(counts.values()) == len(node_steps)  # one parse record per review
    assert ans.metrics["docs_reviewed"] >= 3 and ans.usage.llm_calls >= len(node_steps) + 1
    assert ans.passages and {p.id for p in ans.passages} <= {p.id for p in ex.paragraphs}
    read = ans.trace.root.find("read")[0]
    assert read.outputs["prompt_tokens"] <= read.outputs["budget"]


@pytest.mark.slow
def test_tor_small_model_preset_end_to_end(smollm2, data_dir):
    """The preset on the real model: the reader reads paragraphs (Table 10, no assertions) and no
    analysis call is made; the reader's answer is shortened exactly when it needs it, and a kept
    phrase is the reply's own; with ``grounded_accept`` every accepted path states its answer, and
    every [SUPPORTED] path that does not is noted and not accepted."""
    from hopqa.datasets import load_dataset
    from hopqa.methods.shorten import in_reply, needs_shortening
    from hopqa.methods.tor.method import answer_stated
    from hopqa.retrieval.pool import CandidatePool

    ex = load_dataset("2wikimultihopqa", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("tor", smollm2, preset="small-model", widths="2", depth=1, grounded_accept=True)
    ans = method.with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
    assert ans.error is None, ans.error
    paragraphs = {p.id: p for p in ex.paragraphs}
    for hop in [h for h in ans.hops if h.label == "accept"]:
        assert answer_stated(hop.answer, [paragraphs[p["id"]] for p in hop.passages])
    for node in ans.trace.root.find("node"):
        if any("grounded_accept" in e["message"] for e in node.events):  # depth 1 is the maximum: stopped
            assert node.outputs["action"] == "max depth" and not node.find("analyse")  # the review's own answer
    (read,) = ans.trace.root.find("read")
    assert read.inputs["fusion"] == "paragraph" and "Assertions:" not in read.llm_calls[0]["prompt"]
    assert not ans.trace.root.find("analyse")
    shortened = read.find("shorten")
    assert bool(shortened) == needs_shortening(read.outputs["answer"], read.outputs["parsed_by"])
    if shortened and shortened[0].outputs["kept"] == "phrase":
        assert ans.answer == shortened[0].outputs["phrase"] and in_reply(ans.answer, read.outputs["response"])
    else:
        assert ans.answer == read.outputs["answer"]


@pytest.mark.slow
def test_tor_short_reader_end_to_end(smollm2, data_dir):
    """``reader=short`` on the real model: the final read is the zero-shot short-answer prompt over
    the pool's paragraphs, and the answer is its reply's first line (cut only when it runs long)."""
    from hopqa.datasets import load_dataset
    from hopqa.methods.shorten import SHORT_ANSWER_WORDS
    from hopqa.retrieval.pool import CandidatePool

    ex = load_dataset("hotpotqa", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("tor", smollm2, widths="2", depth=1, fusion="paragraph", analysis="review", short_answer=True,
                          reader="short")
    ans = method.with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
    assert ans.error is None, ans.error
    (read,) = ans.trace.root.find("read")
    prompt = read.llm_calls[0]["prompt"]
    assert read.inputs == {"fusion": "paragraph", "reader": "short"}
    assert prompt.startswith("Answer the question using the documents below.") and "Demonstration" not in prompt
    assert "\n\n" not in read.outputs["response"].strip()  # it stops at a blank line
    shortened = read.find("shorten")
    assert bool(shortened) == (len(read.outputs["answer"].split()) > SHORT_ANSWER_WORDS)
    assert ans.answer == (shortened[0].outputs["phrase"] if shortened and shortened[0].outputs["kept"] == "phrase"
                          else read.outputs["answer"])


@pytest.mark.slow
def test_eval_tor_and_cor_from_the_command_line(tmp_path, data_dir):
    env = {**os.environ, "HOPQA_HOME": str(tmp_path / "home")}
    out = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "hopqa.cli", "eval", "--dataset", "2wikimultihopqa", "--method", "tor,cor",
                        "--limit", "1", "--llm", "embedded:smollm2-135m", "--no-progress", "--data-dir", str(data_dir),
                        "--set", "tor.widths=2,2", "--set", "tor.depth=2", "--set", "shots=1", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    assert "| tor |" in r.stdout and "| cor |" in r.stdout and "#Doc" in r.stdout
    for name in ("tor", "cor"):
        line = json.loads((out / "2wikimultihopqa-dev-distractor" / name / "results.jsonl").read_text().splitlines()[0])
        assert line["status"] == "ok" and line["metrics"]["docs_reviewed"] >= 1 and "evidence" in line["metrics"]
        assert sum(line["parse"].values()) >= 1


# -- what ToR needs from the layers below ---------------------------------------------------------------
def test_token_counts_and_context_windows():
    from hopqa.llm.openai import OpenAICompatibleLLM, OpenAIConfig
    from hopqa.runtime import traced_llm

    scripted = ScriptedLLM([])
    assert scripted.count_tokens("abcdefg") == 3 and scripted.context_tokens is None
    server = OpenAICompatibleLLM(OpenAIConfig.parse("m@http://localhost:1/v1?context=8192"))
    assert server.context_tokens == 8192 and traced_llm(server).context_tokens == 8192
    with pytest.raises(ValueError, match="context"):
        OpenAIConfig.parse("m@http://localhost:1/v1?context=0")

    class Exact(ScriptedLLM):
        context_tokens = 512

        def count_tokens(self, text: str) -> int:
            return len(text.split())

    wrapped = traced_llm(Exact([]))
    assert wrapped.count_tokens("a b c") == 3 and wrapped.context_tokens == 512


@pytest.mark.slow
def test_embedded_model_counts_its_own_tokens(smollm2):
    n = smollm2.count_tokens("Tree of Reviews reads paragraphs.")
    assert 3 <= n <= 12 and smollm2.context_tokens == 4096
    assert smollm2.count_tokens("word " * 300) >= 300


def test_set_method_key_applies_to_that_method_only():
    import argparse

    from hopqa.cli import UsageError, _method_options

    args = argparse.Namespace(k=None, structured=None, set=["tor.widths=3,2", "shots=1", "cor.max_turns=2"])
    assert _method_options("tor", args) == {"widths": "3,2", "shots": 1}
    assert _method_options("cor", args) == {"shots": 1, "max_turns": 2}
    with pytest.raises(UsageError):
        _method_options("tor", argparse.Namespace(k=None, structured=None, set=["tor.nope=1"]))
