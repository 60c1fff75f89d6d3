"""Tree of Reviews and CoR: review parsing, pruning, the DFS on a scripted LLM (known tree, counted
calls), concurrent = sequential, the reader's context fill, Recall@15, then the real model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from hopqa.build import build_method
from hopqa.evaluation.runner import summarize
from hopqa.llm.base import GenerationRequest
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.base import MethodError
from hopqa.methods.tor.fusion import Evidence, fuse, top_by_similarity
from hopqa.methods.tor.review import parse_mpc, parse_review
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


def world_reply(request: GenerationRequest) -> str:
    prompt = request.text()
    if prompt.startswith("Instruction:I will give you a query"):
        return REVIEWS.get(_path_ids(prompt), "- Judgment: [IRRELEVANT]")
    if prompt.startswith("Instruction:I will give you a question"):  # MPC
        ids = prompt.rsplit("References: ", 1)[1]
        return "- Information: [INFO] info of " + ("B" if "Title B" in ids else "A")
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
    assert ans.usage.llm_calls == 5  # 4 reviews + the reader, no MPC under cot
    retrieve = [s for s in ans.trace.root.find("retrieve") if s.inputs["query"] == "query of A"][0]
    assert retrieve.outputs["pruned_repetitive"] == ["C"] and retrieve.outputs["kept"] == ["D"]
    assert ans.metrics == {"docs_reviewed": 4.0, "evidence": 2.0}
    assert {p.id for p in ans.passages} == {"C", "A", "D"}
    assert ans.trace.parse_counts()["direct"] == 4


def test_without_repetitive_pruning_the_pooled_paragraph_is_reviewed_again():
    ans = tor(ScriptedLLM(world_reply), widths="3,2", depth=2, expansion="cot", repetitive_pruning=False).answer(Q)
    assert (2, "AC", "accept") in nodes(ans) and ans.usage.llm_calls == 6 and ans.metrics["evidence"] == 3.0


def test_mpc_expansion_and_no_relevance_pruning():
    retriever = ScriptedRetriever(TABLE)
    ans = tor(ScriptedLLM(world_reply), retriever, widths="3,2", depth=2, relevance_pruning=False).answer(Q)
    # MPC's [INFO] is the query; B (irrelevant) is expanded too, its child at the depth limit stops
    assert retriever.queries == [Q, "info of A", "info of B"]
    assert nodes(ans)[-1] == (2, "BE", "max depth") and (1, "B", "search") in nodes(ans)
    assert len(ans.trace.root.find("expand")) == 2
    assert ans.usage.llm_calls == 3 + 2 + 2 + 1  # level-1 reviews, 2 MPC, AD and BE reviews, reader


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
    assert ans.usage.llm_calls == 3 and ans.metrics == {"docs_reviewed": 4.0, "evidence": 1.0}
    # the second review saw every paragraph of the chain
    assert _path_ids(ans.trace.root.find("review")[1].llm_calls[0]["prompt"]) == "CABD"


def test_cor_goes_on_with_the_query_of_an_irrelevant_review_and_stops_replies_at_the_next_question():
    replies = ["- Judgment: [IRRELEVANT]\n- Judgment: [UNSUPPORTED]\n- Output: [QUERY] query of A",
               "- Judgment: [RELEVANT]\n- Judgment: [SUPPORTED]\n- Output: [ANSWER] Ada", "The answer is Ada."]
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
    from hopqa.llm.cache import CachedLLM, ResponseCache
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
