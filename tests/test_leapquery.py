"""LeapQuery: gap-list parsing, vote counting, the loop's stop conditions and the rerank cut on a
scripted LLM, then end to end on the embedded model in the open setting."""

from __future__ import annotations

import pytest

from hopqa.build import build_method
from hopqa.llm.base import GENERATE, STRUCTURED, GenerationRequest
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.leapquery import parse_gaps, parse_vote
from hopqa.types import Passage
from tests.scripted_retriever import ScriptedRetriever as _ScriptedRetriever


@pytest.mark.parametrize("text, status, expected", [
    ("1. Who founded Adelphia?\n2. When did it close?", "direct", ["Who founded Adelphia?", "When did it close?"]),
    ("1) Who is Mike Park?\n2) What label did he start?", "direct", ["Who is Mike Park?", "What label did he start?"]),
    ("None", "direct", []),
    ("None. The passages answer the question.", "direct", []),
    ("- Who is Mike Park?\n* What label did he start?", "fallback", ["Who is Mike Park?", "What label did he start?"]),
    ("Sub-question 1: Who is Mike Park?\nSub-question 2: What label?", "fallback", ["Who is Mike Park?", "What label?"]),
    ("The gaps are:\nWho is Mike Park?\nWhat label did he start?", "fallback",
     ["Who is Mike Park?", "What label did he start?"]),
    ("1. **Who is Mike Park?**\n2. Who is Mike Park?\n3. A?\n4. B?\n5. C?", "direct", ["Who is Mike Park?", "A?", "B?"]),
])
def test_parse_gaps_in_real_formats(text, status, expected):
    parsed = parse_gaps(text, limit=3)
    assert parsed.status == status and parsed.value == expected


def test_unreadable_gap_list_fails_as_no_gap():
    assert parse_gaps("I think the passages are fine overall.", 3).status == "failed"
    assert parse_gaps("", 3).status == "failed"


@pytest.mark.parametrize("text, vote", [("True", True), (" true.", True), ("False", False), ("Yes", True),
                                        ("No, it is not", False), ("False. True would be wrong", False),
                                        ("maybe", None), ("", None)])
def test_parse_vote(text, vote):
    assert parse_vote(text) is vote


# -- a scripted world --------------------------------------------------------------------------------
Q = "What record label did the person who is part of The Bruce Lee Band start?"
P = {n: Passage(n, f"Title {n}", f"Paragraph {n} text.") for n in "ABCDEFGH"}


def ScriptedRetriever(table: dict[str, str]) -> _ScriptedRetriever:
    """The scripted retriever over this module's passages ``P``."""
    return _ScriptedRetriever(table, P)


class FixedReranker:
    """Scores by a fixed table (unknown ids 0); records every call."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores, self.calls = scores, []

    def score(self, query, passages):
        self.calls.append((query, [p.id for p in passages]))
        return [self.scores.get(p.id, 0.0) for p in passages]


def world(gap_replies: list[str], votes: dict[str, str]):
    gaps = iter(gap_replies)

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.endswith("Missing facts as questions:"):
            return next(gaps)
        if "Sub-question:" in prompt:
            sub = prompt.split("Sub-question: ", 1)[1].split("\n", 1)[0]
            return votes.get(sub, "False")
        return "Asian Man Records"

    return reply


def leap(llm, table, scores, **options):
    reranker = FixedReranker(scores)
    retriever = ScriptedRetriever(table)
    method = build_method("leapquery", llm, retriever, reranker=reranker, k=2, **options)
    return method, retriever, reranker


TABLE = {Q: "AB", "Who is Mike Park?": "CD", "What label did Mike Park start?": "EF", "Nonsense?": "GH"}
SCORES = {"A": 0.5, "B": 0.1, "C": 0.9, "D": 0.2, "E": 0.8, "F": 0.3}


def test_loop_retrieves_for_verified_gaps_and_reranks_against_the_question():
    votes = {"Who is Mike Park?": "True", "Nonsense?": "False", "What label did Mike Park start?": "True"}
    llm = ScriptedLLM(world(["1. Who is Mike Park?\n2. Nonsense?", "1. What label did Mike Park start?", "None"],
                            votes))
    method, retriever, reranker = leap(llm, TABLE, SCORES)
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Asian Man Records"
    # the rejected sub-question is never searched; every rerank is against the main question
    assert retriever.queries == [Q, "Who is Mike Park?", "What label did Mike Park start?"]
    assert all(q == Q for q, _ in reranker.calls)
    assert [sorted(ids) for _, ids in reranker.calls] == [["A", "B"], ["A", "B", "C", "D"], ["A", "C", "E", "F"]]
    assert [p.id for p in ans.passages] == ["C", "E"]  # the top-k cut after the last rerank
    verify = ans.trace.root.find("verify")[0]
    tally = {t["subquestion"]: t for t in verify.outputs["tally"]}
    assert tally["Who is Mike Park?"]["true"] == 5 and tally["Nonsense?"]["true"] == 0
    assert not tally["Nonsense?"]["kept"]
    # 3 gap calls, one request of 5 samples for each of 3 sub-questions, the reader
    assert ans.usage.llm_calls == 3 + 3 + 1
    assert len([r for r in llm.requests if "Sub-question:" in r.text()]) == 15  # 5 seeded samples each
    iterations = ans.trace.root.find("iteration")
    assert len(iterations) == 3 and "no knowledge gap" in iterations[-1].events[0]["message"]


def test_majority_vote_counts_each_sample():
    samples = iter(["True", "False", "True", "maybe", "False"])  # 2 True of 5: rejected

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.endswith("Missing facts as questions:"):
            return "1. Who is Mike Park?"
        if "Sub-question:" in prompt:
            return next(samples)
        return "x"

    method, retriever, _ = leap(ScriptedLLM(reply), TABLE, SCORES)
    ans = method.answer(Q)
    (tally,) = ans.trace.root.find("verify")[0].outputs["tally"]
    assert tally["true"] == 2 and tally["unreadable"] == 1 and not tally["kept"]
    assert retriever.queries == [Q]
    assert "no sub-question verified" in ans.trace.root.find("iteration")[0].events[0]["message"]
    # the votes are sampled: temperature and seeds
    requests = [r for r in method.llm.inner.requests if "Sub-question:" in r.text()]
    assert len(requests) == 5 and {r.seed for r in requests} == {0, 1, 2, 3, 4}
    assert all(r.temperature == 0.7 for r in requests)


def test_stops_when_the_top_k_does_not_change_and_at_max_iter():
    llm = ScriptedLLM(world(["1. Nonsense?"] * 5, {"Nonsense?": "True"}))
    method, retriever, _ = leap(llm, TABLE, {"A": 1.0, "B": 0.9})  # G and H score 0: the top-k stays A, B
    ans = method.answer(Q)
    assert len(ans.trace.root.find("iteration")) == 1
    assert "did not change" in ans.trace.root.find("iteration")[0].events[0]["message"]

    llm = ScriptedLLM(world(["1. Who is Mike Park?", "1. What label did Mike Park start?", "1. Nonsense?"],
                            {"Who is Mike Park?": "True", "What label did Mike Park start?": "True", "Nonsense?": "True"}))
    method, retriever, _ = leap(llm, TABLE, {**SCORES, "G": 2.0}, max_iter=2)
    ans = method.answer(Q)
    assert len(ans.trace.root.find("iteration")) == 2 and retriever.queries[-1] == "What label did Mike Park start?"


def test_gap_list_parse_is_recorded_and_unreadable_means_stop():
    method, _, _ = leap(ScriptedLLM(world(["I cannot tell."], {})), TABLE, SCORES)
    ans = method.answer(Q)
    assert ans.trace.parse_counts()["failed"] == 1 and ans.answer == "Asian Man Records"


def test_default_reranker_is_the_bi_encoder_and_named_in_the_trace():
    from hopqa.embed import LexicalEmbedder
    from hopqa.retrieval.rerank import BiEncoderReranker

    method = build_method("leapquery", ScriptedLLM(world(["None"], {})), ScriptedRetriever(TABLE),
                          reranker=BiEncoderReranker(LexicalEmbedder()))
    ans = method.answer(Q)
    assert ans.trace.root.find("rerank")[0].inputs["reranker"] == "BiEncoderReranker"
    assert build_method("leapquery", ScriptedLLM([]), ScriptedRetriever(TABLE)).config.rerank == "bi-encoder"


def test_redundant_subquestions_are_dropped_before_the_vote():
    """A sub-question that restates the main question, or repeats one searched in an earlier
    iteration, is not voted on or searched; only such sub-questions end the loop."""
    restated = Q.upper().rstrip("?") + " ?"  # the same after normalisation
    llm = ScriptedLLM(world([f"1. {restated}\n2. Who is Mike Park?", "1. who is Mike Park"],
                            {"Who is Mike Park?": "True"}))
    method, retriever, _ = leap(llm, TABLE, SCORES)
    ans = method.answer(Q)
    assert retriever.queries == [Q, "Who is Mike Park?"]
    first, second = ans.trace.root.find("iteration")
    assert first.outputs["redundant"] == [restated]
    assert [t["subquestion"] for t in first.find("verify")[0].outputs["tally"]] == ["Who is Mike Park?"]
    assert second.outputs["redundant"] == ["who is Mike Park"] and not second.find("verify")
    assert "restates the question or one already searched" in second.events[0]["message"]


# -- structured outputs (issue 16) -----------------------------------------------------------------------
WITH_SCHEMAS = {GENERATE, STRUCTURED}


def json_world(gaps: list[str], votes: dict[str, str]):
    """Replies of a backend that keeps to the schemas (gap lists and votes as JSON)."""
    lists = iter(gaps)

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if '"missing_facts"' in prompt:
            assert request.schema is not None and "maxItems" in request.schema
            assert request.schema.index('"stated"') < request.schema.index('"missing_facts"')  # evidence first
            return next(lists)
        if '"aligned"' in prompt:
            assert request.schema is not None
            sub = prompt.split("Sub-question: ", 1)[1].split("\n", 1)[0]
            return votes.get(sub, '{"aligned": false}')
        assert request.schema is None  # the reader stays free text
        return "Asian Man Records"

    return reply


def test_structured_gap_list_and_votes():
    llm = ScriptedLLM(json_world(['{"missing_facts": ["Who is Mike Park?", "Nonsense?"]}', '{"missing_facts": []}'],
                                 {"Who is Mike Park?": '{"aligned": true}'}), capabilities=WITH_SCHEMAS)
    method, retriever, _ = leap(llm, TABLE, SCORES)
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Asian Man Records"
    assert retriever.queries == [Q, "Who is Mike Park?"]
    tally = {t["subquestion"]: t["true"] for t in ans.trace.root.find("verify")[0].outputs["tally"]}
    assert tally == {"Who is Mike Park?": 5, "Nonsense?": 0}
    assert "no knowledge gap" in ans.trace.root.find("iteration")[1].events[0]["message"]
    # 2 gap lists and 10 votes, all read as JSON
    assert ans.trace.parse_counts() == {"direct": 12, "fallback": 0, "failed": 0}


def test_structured_fallbacks_and_failures():
    """Free text under a schema goes to the free-text parser (fallback); JSON without the list
    is a failure, read as no gap; a JSON vote that is no boolean counts as not True."""
    llm = ScriptedLLM(json_world(["1. Who is Mike Park?"], {"Who is Mike Park?": '{"aligned": "maybe"}'}),
                      capabilities=WITH_SCHEMAS)
    method, retriever, _ = leap(llm, TABLE, SCORES)
    ans = method.answer(Q)
    counts = ans.trace.parse_counts()
    assert counts["fallback"] == 1 and counts["failed"] == 5
    assert retriever.queries == [Q]  # no vote was True
    method, _, _ = leap(ScriptedLLM(json_world(['{"gaps": ["x?"]}'], {}), capabilities=WITH_SCHEMAS), TABLE, SCORES)
    ans = method.answer(Q)
    assert ans.trace.parse_counts()["failed"] == 1
    assert "no knowledge gap" in ans.trace.root.find("iteration")[0].events[0]["message"]


def test_structured_off_sends_no_schema_and_on_needs_the_capability():
    llm = ScriptedLLM(world(["1. Who is Mike Park?", "None"], {"Who is Mike Park?": "yes"}), capabilities=WITH_SCHEMAS)
    method, retriever, _ = leap(llm, TABLE, SCORES, structured="off")
    ans = method.answer(Q)
    assert all(r.schema is None for r in llm.requests)
    assert retriever.queries == [Q, "Who is Mike Park?"]
    votes = [e for s in ans.trace.root.walk() for e in s.events if e["message"] == "parse" and e["field"] == "vote"]
    assert len(votes) == 5 and {e["status"] for e in votes} == {"fallback"}  # "yes" is not True/False
    method, _, _ = leap(ScriptedLLM(world(["None"], {})), TABLE, SCORES, structured="on")
    ans = method.answer(Q)
    assert ans.error is not None and "structured" in ans.error


def test_free_text_votes_record_how_they_parsed():
    from hopqa.methods.leapquery import read_vote

    assert read_vote("True").status == "direct" and read_vote(" false.").status == "direct"
    assert read_vote("Yes").status == "fallback" and read_vote("It is True").value is True
    assert read_vote("maybe").status == "failed"


# -- the real model ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_leapquery_end_to_end_open_setting_on_a_musique_question(smollm2, demo_index, data_dir):
    from hopqa.datasets import load_dataset

    ex = load_dataset("musique", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("leapquery", smollm2, demo_index, votes=3, max_iter=2)
    ans = method.answer(ex.question)
    assert ans.error is None, ans.error
    assert len(ans.passages) == 5 and {p.id for p in ans.passages} <= {p.id for p in demo_index.passages}
    reranks = ans.trace.root.find("rerank")
    assert reranks and all(len(r.outputs["kept"]) <= 5 for r in reranks)
    assert ans.trace.root.find("gaps") and sum(ans.trace.parse_counts().values()) >= 1
    for verify in ans.trace.root.find("verify"):
        assert all(len(t["votes"]) == 3 for t in verify.outputs["tally"])


def _hopqa(*args, home):
    import os
    import subprocess
    import sys

    env = {**os.environ, "HOPQA_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "hopqa.cli", *args], check=False, capture_output=True, text=True, env=env,
                          timeout=900)


def test_eval_refuses_a_bertscore_model_it_cannot_load(tmp_path, data_dir):
    r = _hopqa("eval", "--dataset", "musique", "--method", "direct", "--limit", "1", "--llm", "embedded:smollm2-135m",
               "--bertscore", "/no/such/model", "--data-dir", str(data_dir), "--out", str(tmp_path / "runs"),
               home=tmp_path / "home")
    assert r.returncode == 2 and "cannot be loaded offline" in r.stderr and "--bertscore minilm" in r.stderr


@pytest.mark.slow
def test_eval_leapquery_open_setting_with_rouge_and_bertscore(tmp_path, data_dir, hopqa_home, demo_index):
    import json

    r = _hopqa("eval", "--dataset", "musique", "--method", "leapquery", "--setting", "open", "--limit", "1",
               "--llm", "embedded:smollm2-135m", "--set", "votes=3", "--set", "max_iter=1", "--bertscore", "minilm", "--support-k", "3",
               "--no-progress", "--data-dir", str(data_dir), "--out", str(tmp_path / "runs"), home=hopqa_home)
    assert r.returncode == 0, r.stderr
    assert "| leapquery |" in r.stdout and "ROUGE-L" in r.stdout and "BERTScore" in r.stdout
    run = tmp_path / "runs" / "musique-dev-open" / "leapquery"
    line = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    assert line["status"] == "ok" and {"rouge_l", "bertscore", "support_recall"} <= set(line["metrics"])
    assert len(line["passages"]) == 5
    config = json.loads((run / "config.json").read_text())
    assert config["bertscore"] == "minilm" and config["support_k"] == 3
