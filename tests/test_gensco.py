"""GenSco: sub-question parsing, the greedy selection and every stop rule with a scripted
generator and scorer, the scorer prompts (Tables 8, 9), and end-to-end runs on the embedded model."""

from __future__ import annotations

import re
import threading

import pytest

from hopqa.build import build_method
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.base import MethodError
from hopqa.methods.gensco import GenSco, GenScoConfig, parse_subquestion
from hopqa.retrieval.pool import CandidatePool
from hopqa.text import render_passage
from hopqa.types import Passage

PASSAGES = [
    Passage("d", "Paris", "Paris is the capital of France."),
    Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County."),
    Passage("b", "Mountrail County", "Stanley is the county seat of Mountrail County."),
]
POOL = CandidatePool(PASSAGES)
Q = "What is the seat of the county where Van Hook Township is located?"
Q1 = "Which county is Van Hook Township in?"
Q2 = "What is the county seat of Mountrail County?"


@pytest.mark.parametrize("text, expected", [
    ("<FIN></FIN>", None), ("  </FIN>", None), ("FIN", None), ("<fin>", None), ("", None), ("\n\n", None),
    (" Who is X?", "Who is X?"), ("Subquestion 2: Who is X?", "Who is X?"), ("Question: Who is X?", "Who is X?"),
    ("Who is X?\nSubcontext 2: X is Y.", "Who is X?"), ("Who is X? Subcontext 2: X is Y.", "Who is X?"),
    # SmolLM2-135M on MuSiQue dev (benchmark traces): it restarts an example with the question
    ("Question: What is the seat of the county where Van Hook Township is located?\nSubquestion 1:",
     "What is the seat of the county where Van Hook Township is located?"),
    ('Question: What are the other books from the author of "The Good Earth"?\n'
     'Subquestion 1: Who is the author of the book "The Good Earth"?',
     'Who is the author of the book "The Good Earth"?'),
    ("Question: Which movie came out first?\nSubquestion 1: <FIN></FIN>", "Which movie came out first?"),
    ("1. The seat of the county where Van Hook Township is located is Van Hook Township.\n2. The seat of",
     "1. The seat of the county where Van Hook Township is located is Van Hook Township."),
])
def test_parse_subquestion(text, expected):
    assert parse_subquestion(text) == expected


def last_passage(context: str) -> str:
    """The candidate passage of a Table 9 prompt: the last context line before 'Question:'."""
    line = context.rsplit("\nQuestion:", 1)[0].splitlines()[-1]
    return line.removeprefix("Context: ")


def overlap_scorer(calls: list | None = None, stop_prefers_shorter: bool = False):
    """Per-token logprob -0.1 per continuation word found in the candidate passage, else -3."""
    def score(context: str, continuation: str) -> list[float]:
        if calls is not None:
            calls.append((context, continuation))
        words = re.findall(r"\w+", continuation.lower())
        if context.startswith("Generate a question given its complete decomposition"):
            n_sub = context.count("?")  # sub-questions in the decomposition
            return [(-1.0 - 0.5 * n_sub) if stop_prefers_shorter else (-3.0 + 0.5 * n_sub)] * len(words)
        cand = last_passage(context).lower()
        return [-0.1 if w in cand else -3.0 for w in words]
    return score


def gensco(generator_replies, scorer=None, concurrency=1, **cfg) -> tuple[GenSco, ScriptedLLM]:
    """GenSco on a scripted generator (the given sub-questions, then <FIN></FIN>; " Stanley" as
    the answer) whose scorer is ``scorer`` (default ``overlap_scorer``)."""
    def reply(request):
        t = request.text()
        if t.startswith("I am going to give you a question"):
            return generator_replies.pop(0) if generator_replies else "<FIN></FIN>"
        if t.startswith("Answer the question given the context"):
            return " Stanley"
        raise AssertionError(t[:80])

    llm = ScriptedLLM(replies=reply, scorer=scorer or overlap_scorer(), max_concurrency=concurrency)
    method = GenSco(llm, POOL, GenScoConfig(shots=0).update(**cfg))
    return method, llm


def levels(ans):
    return ans.trace.root.find("level")


def test_max_selects_a_passage_per_subquestion_in_order_and_stops_on_fin():
    method, llm = gensco([Q1, Q2, "<FIN></FIN>"])
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    assert [p.id for p in ans.passages] == ["a", "b"]
    sel = ans.trace.root.find("select")[0]
    assert sel.outputs["stop_reason"] == "<FIN></FIN>" and sel.outputs["subquestions"] == [Q1, Q2]
    first = levels(ans)[0].outputs
    assert first["subquestion"] == Q1 and first["chosen"] == "a" and len(first["scores"]) == 3
    assert min(first["scores"], key=lambda s: s["nll"])["id"] == "a"
    # the answer prompt shows the passages in selection order
    answer_prompt = [r.text() for r in llm.requests if r.text().startswith("Answer the question")][0]
    assert answer_prompt.index("Van Hook Township |") < answer_prompt.index("Mountrail County |")
    # the second decomposition prompt carries the first (sub-question, passage) pair
    second = [r.text() for r in llm.requests if r.text().startswith("I am going")][1]
    assert second.endswith(f"Subquestion 1: {Q1}\nSubcontext 1: {render_passage(PASSAGES[1])}\nSubquestion 2:")


def test_repeated_subquestion_and_max_levels_stop():
    method, _ = gensco([Q1, " " + Q1.upper()])
    ans = method.answer(Q)
    assert ans.trace.root.find("select")[0].outputs["stop_reason"] == "repeated sub-question"
    assert [p.id for p in ans.passages] == ["a"]
    method, _ = gensco([Q1, Q2, "Who else?"], max_levels=2)
    ans = method.answer(Q)
    assert ans.trace.root.find("select")[0].outputs["stop_reason"] == "max_levels (2)" and len(levels(ans)) == 2


def test_stop_variant_uses_the_likelihood_criterion():
    # Q is less likely with two sub-questions than with one: stop at level 2, before scoring
    method, _ = gensco([Q1, Q2], scorer=overlap_scorer(stop_prefers_shorter=True), variant="stop")
    ans = method.answer(Q)
    sel = ans.trace.root.find("select")[0]
    assert sel.outputs["stop_reason"] == "likelihood (Eq. 1)" and [p.id for p in ans.passages] == ["a"]
    lv2 = levels(ans)[1].outputs
    assert lv2["stop_nll_with"] > lv2["stop_nll_without"] and "scores" not in lv2
    assert "stop_nll_with" not in levels(ans)[0].outputs  # checked from level 2 (stop_from_level)
    # the same run as -max goes on
    method, _ = gensco([Q1, Q2], scorer=overlap_scorer(stop_prefers_shorter=True), variant="max")
    assert [p.id for p in method.answer(Q).passages] == ["a", "b"]
    # and -stop goes on when the extra sub-question makes Q more likely
    method, _ = gensco([Q1, Q2], scorer=overlap_scorer(stop_prefers_shorter=False), variant="stop")
    assert [p.id for p in method.answer(Q).passages] == ["a", "b"]


def test_no_qd_scores_with_the_question_and_stops_when_the_best_repeats():
    method, llm = gensco([], variant="no-qd")
    ans = method.answer(Q)
    assert not any(r.text().startswith("I am going") for r in llm.requests)  # no decomposition
    sel = ans.trace.root.find("select")[0]
    assert sel.outputs["stop_reason"] == "best passage already selected"
    first, second = (lv.outputs for lv in levels(ans))
    assert second["chosen"] == first["chosen"] and [p.id for p in ans.passages] == [first["chosen"]]
    assert sel.outputs["subquestions"] == [Q]


def test_keep_selected_switch():
    method, _ = gensco([Q1, Q1 + " again"], keep_selected=False)
    ans = method.answer(Q)
    assert len(levels(ans)[1].outputs["scores"]) == 2 and "a" not in [s["id"] for s in levels(ans)[1].outputs["scores"]]
    method, _ = gensco([Q1, Q1 + " again"], keep_selected=True)
    ans = method.answer(Q)
    assert levels(ans)[1].outputs["chosen"] == "a" and [p.id for p in ans.passages] == ["a"]  # once in the context


def test_scorer_prompts_tables_8_and_9_and_continuation_only():
    calls = []
    method, _ = gensco([Q1, Q2], scorer=overlap_scorer(calls), variant="stop")
    method.answer(Q)
    table9 = [c for c in calls if c[0].startswith("Generate a question based on the context.")]
    assert (f"Generate a question based on the context.\nContext: {render_passage(PASSAGES[0])}\nQuestion:", " " + Q1) in table9
    level2 = [c for c in table9 if c[1] == " " + Q2]
    assert len(level2) == 3 and (f"Generate a question based on the context.\nContext: {render_passage(PASSAGES[1])}\n"
                                 f"{render_passage(PASSAGES[2])}\nQuestion:") in [c[0] for c in level2]
    table8 = [c for c in calls if c[0].startswith("Generate a question given its complete decomposition")]
    assert table8 == [
        ("Generate a question given its complete decomposition into subquestions along with the context containing "
         f"answers to these subquestions.\nContext: {render_passage(PASSAGES[1])}\nDecomposition: {Q1} {Q2}\nQuestion:", " " + Q),
        ("Generate a question given its complete decomposition into subquestions along with the context containing "
         f"answers to these subquestions.\nContext: {render_passage(PASSAGES[1])}\nDecomposition: {Q1}\nQuestion:", " " + Q),
    ]


WORDS_Q1 = ["which", "county", "is", "van", "hook", "township", "in"]


def test_exact_nlls_of_eq_2_and_eq_1():
    """NLL_S by hand from ``overlap_scorer`` (-0.1 per word of the continuation found in the
    candidate passage, else -3.0) for the 7 words of Q1:
    Paris (only "is"): 6·3.0 + 0.1 = 18.1; Van Hook (all but "which"): 3.0 + 6·0.1 = 3.6;
    Mountrail ("county", "is"): 5·3.0 + 2·0.1 = 15.2. Mean NLL divides by 7, sum does not."""
    method, _ = gensco([])
    assert method.score_passages(Q1, [], PASSAGES) == pytest.approx([18.1 / 7, 3.6 / 7, 15.2 / 7])
    method, _ = gensco([], nll="sum")
    assert method.score_passages(Q1, [], PASSAGES) == pytest.approx([18.1, 3.6, 15.2])
    # Eq. 1: the Table 8 scorer gives each of the 13 words of Q -3.0 + 0.5 per "?" in the prompt,
    # i.e. per sub-question in the decomposition: with Q1 and Q2 (2) -> NLL 2.0, with Q1 alone -> 2.5
    method, _ = gensco([])
    assert method.stop_scores(Q, [Q1, Q2], [PASSAGES[1]]) == pytest.approx((2.0, 2.5))
    method, _ = gensco([], nll="sum")
    assert method.stop_scores(Q, [Q1, Q2], [PASSAGES[1]]) == pytest.approx((26.0, 32.5))


def test_eq_1_equal_nll_goes_on_and_higher_stops():
    """GenSco-stop stops only when Q is strictly *less* likely with the new sub-question
    (NLL with > NLL without); an equal NLL goes on (a ``>=`` would stop here)."""
    def scorer(value_with: float, value_without: float):
        base = overlap_scorer()

        def score(context, continuation):
            if context.startswith("Generate a question given its complete decomposition"):
                with_new = context.count("?") == 2  # Q1 and Q2 in the decomposition
                return [value_with if with_new else value_without] * len(continuation.split())
            return base(context, continuation)
        return score

    method, _ = gensco([Q1, Q2], scorer=scorer(-1.5, -1.5), variant="stop")
    ans = method.answer(Q)
    lv2 = levels(ans)[1].outputs
    assert lv2["stop_nll_with"] == lv2["stop_nll_without"] == 1.5 and "stop" not in lv2
    assert [p.id for p in ans.passages] == ["a", "b"]
    method, _ = gensco([Q1, Q2], scorer=scorer(-1.5000001, -1.5), variant="stop")
    ans = method.answer(Q)
    assert levels(ans)[1].outputs["stop"] == "likelihood (Eq. 1)" and [p.id for p in ans.passages] == ["a"]


def test_eq_2_tie_goes_to_the_first_candidate():
    """Equal NLLs: argmin keeps the first candidate in the retriever's order."""
    method, _ = gensco([Q1], scorer=lambda context, continuation: [-1.0])
    level = levels(method.answer(Q))[0].outputs
    assert [s["nll"] for s in level["scores"]] == [1.0, 1.0, 1.0]
    assert level["chosen"] == level["scores"][0]["id"]


def test_mean_versus_sum_nll():
    # candidate "d" matches one word of a two-word continuation... a longer continuation favours mean
    def scorer(context, continuation):
        cand = last_passage(context)
        if cand.startswith("Paris"):
            return [-0.5]  # one cheap token
        if cand.startswith("Van Hook"):
            return [-0.3, -0.3, -0.3]  # lower mean, higher sum
        return [-5.0]

    m, _ = gensco([Q1], scorer=scorer, nll="mean")
    assert levels(m.answer(Q))[0].outputs["chosen"] == "a"
    s, _ = gensco([Q1], scorer=scorer, nll="sum")
    assert levels(s.answer(Q))[0].outputs["chosen"] == "d"


def test_shuffled_answers_from_the_same_passages_in_another_order():
    ids = set()
    for seed in range(6):
        method, llm = gensco([Q1, Q2, "Where is Paris?"], shuffled=True, seed=seed)
        ans = method.answer(Q)
        step = ans.trace.root.find("answer")[0].outputs
        assert sorted(step["passages"]) == ["a", "b", "d"] and step["shuffled"] is True
        assert [p.id for p in ans.passages] == step["passages"]
        ids.add(tuple(step["passages"]))
    assert len(ids) > 1  # the order really changes with the seed


def test_candidate_scoring_is_one_concurrent_batch():
    """The three candidates of level 1 are scored at once: each scorer call waits at a barrier
    until all three are in flight (no sleep: a loaded machine cannot make this flaky; run one
    at a time, the first call would time out at the barrier and the answer carry the error)."""
    barrier = threading.Barrier(3, timeout=30)
    score = overlap_scorer()

    def gated(context, continuation):
        barrier.wait()
        return score(context, continuation)

    method, llm = gensco([Q1], scorer=gated, concurrency=4)
    ans = method.answer(Q)
    assert ans.error is None, ans.error
    assert llm.max_in_flight == 3


def test_a_scorer_without_loglikelihood_fails_at_start():
    generator = ScriptedLLM(replies=["x"])
    with pytest.raises(MethodError, match="loglikelihood"):
        GenSco(generator, POOL, GenScoConfig(shots=0))
    with pytest.raises(MethodError, match="shots=2 demonstrations"):  # demonstrations are an input
        GenSco(ScriptedLLM(replies=[], scorer=overlap_scorer()), POOL)
    with pytest.raises(MethodError, match="variant"):
        GenSco(ScriptedLLM(replies=[], scorer=overlap_scorer()), POOL, GenScoConfig(variant="best"))
    # a separate scorer makes a generate-only generator usable
    m = build_method("gensco-max", generator, POOL, scorer=ScriptedLLM(scorer=overlap_scorer()))
    assert m.scorer.supports("loglikelihood")
    with pytest.raises(MethodError, match="takes no scorer"):
        build_method("direct", generator, scorer=generator)


def test_empty_pool_answers_without_context():
    method, _ = gensco([Q1])
    ans = method.with_retriever(CandidatePool([])).answer(Q)
    assert ans.error is None and ans.passages == []
    assert ans.trace.root.find("select")[0].outputs["stop_reason"] == "no candidate passage"


def test_gensco_metrics_in_the_evaluation(tmp_path):
    from hopqa.evaluation.runner import evaluate, read_results
    from hopqa.types import Example

    gold = [Passage("a", PASSAGES[1].title, PASSAGES[1].text, is_supporting=True),
            Passage("b", PASSAGES[2].title, PASSAGES[2].text, is_supporting=True), PASSAGES[0]]
    method, _ = gensco([Q1, Q2, "<FIN></FIN>"])
    ex = Example(id="x", question=Q, answers=["Stanley"], dataset="toy", split="dev", paragraphs=gold)
    evaluate(method, [ex], tmp_path / "run", progress=False)
    m = read_results(tmp_path / "run" / "results.jsonl")["x"]["metrics"]
    assert m["em"] == 1.0 and m["precision"] == 1.0 and m["recall"] == 1.0
    assert m["support_precision"] == 1.0 and m["support_recall"] == 1.0 and m["k_precision"] == 1.0
    assert m["support_f1"] == 1.0


# -- the real thing -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_gensco_scores_with_the_embedded_model(smollm2):
    method = build_method("gensco-max", smollm2, POOL)
    nll = method.score_passages(Q1, [], PASSAGES)
    direct = smollm2.loglikelihood(f"Generate a question based on the context.\nContext: {render_passage(PASSAGES[1])}\nQuestion:",
                                   " " + Q1)
    assert nll[1] == pytest.approx(-direct.mean, abs=1e-3)
    assert len(direct.token_logprobs) == len(smollm2._llm.tokenize((" " + Q1).encode(), add_bos=False))
    assert nll[1] < nll[0]  # the Van Hook passage explains the Van Hook sub-question better than Paris


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["adversarial_hotpotqa", "2wikimultihopqa"])
def test_gensco_end_to_end(smollm2, data_dir, dataset):
    from hopqa.datasets import load_dataset

    ex = load_dataset(dataset, "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("gensco-stop", smollm2, max_levels=3)
    ans = method.with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
    assert ans.error is None, ans.error
    sel = ans.trace.root.find("select")[0]
    assert sel.outputs["stop_reason"]
    level = ans.trace.root.find("level")[0]
    first = level.outputs
    if not first["subquestion"]:  # SmolLM2 copied the reply's example: no sub-question, the walk stops (documented)
        assert [e["how"] for e in level.events if e["message"] == "parse"] == [
            "the reply's example copied (subquestion)"]
        assert sel.outputs["stop_reason"] == "empty sub-question" and not ans.passages
        return
    assert "stop" not in first  # level 1 offers no end signal: a sub-question to score
    assert len(first["scores"]) == len(ex.paragraphs)
    assert {p.id for p in ans.passages} <= {p.id for p in ex.paragraphs}
    assert ans.usage.llm_calls >= 2


@pytest.mark.slow
def test_gensco_small_model_preset_end_to_end(smollm2, data_dir):
    """The preset on the real model: Eq. 1 is not checked before the third level, and the
    answer call asks for a short answer."""
    from hopqa.datasets import load_dataset
    from hopqa.methods.gensco.prompts import SHORT_ANSWER_CLAUSE

    ex = load_dataset("musique", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("gensco-stop", smollm2, preset="small-model", max_levels=3)
    ans = method.with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
    assert ans.error is None, ans.error
    assert all("stop_nll_with" not in lv.outputs for lv in ans.trace.root.find("level")[:2])
    (call,) = ans.trace.root.find("answer")[0].llm_calls
    assert SHORT_ANSWER_CLAUSE.strip() in call["prompt"]


@pytest.mark.slow
def test_short_answers_on_the_embedded_model(smollm2, data_dir):
    """``answer=short`` end to end on SmolLM2 and a real question's paragraphs: the walk is the
    same, the answer call carries the short-answer request, and the answer is what it read."""
    from hopqa.datasets import load_dataset
    from hopqa.methods.gensco.prompts import SHORT_ANSWER_CLAUSE

    ex = load_dataset("2wikimultihopqa", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("gensco-stop", smollm2, max_levels=2, answer="short")
    ans = method.with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
    assert ans.error is None, ans.error
    step = ans.trace.root.find("answer")[0]
    (call,) = step.llm_calls
    assert SHORT_ANSWER_CLAUSE.strip() in call["prompt"] and call["prompt"].endswith("Answer:")
    assert step.outputs["answer"] == ans.answer and step.outputs["raw"] == call["outputs"][0]


def test_passages_are_shown_whole_unless_a_cut_is_asked_for():
    """No silent cut (issue 15): every prompt shows the whole passage by default; a word cap is an
    option and applies where it is asked for."""
    long = Passage("l", "Mountrail County", "What is the history of Mountrail County? " + "More words here. " * 60)
    q2 = "What is the history of Mountrail County?"  # only the long passage has all its words
    pool = CandidatePool([long, *PASSAGES])
    calls: list = []
    method, llm = gensco([Q1, q2], scorer=overlap_scorer(calls))
    method = method.with_retriever(pool)
    assert GenScoConfig().max_passage_words is None and GenScoConfig().scorer_passage_words is None
    method.answer(Q)
    assert any(long.text in context for context, _ in calls)  # the scorer's Table 9 prompt
    assert any(long.text in r.text() for r in llm.requests if r.text().startswith("Answer the question"))
    calls.clear()
    cut, llm = gensco([Q1, q2], scorer=overlap_scorer(calls), scorer_passage_words=5, max_passage_words=5)
    cut.with_retriever(pool).answer(Q)
    assert not any(long.text in context for context, _ in calls)
    assert any("Mountrail County | What is the history of ..." in context for context, _ in calls)


@pytest.mark.parametrize("shots", [0, 1])
def test_short_answer_remedy_asks_table_6_for_the_answer_alone(shots):
    """``answer=paper`` sends Table 6 as written; ``answer=short`` adds the short-answer request
    to its instruction's first sentence, with and without demonstrations, and nothing else."""
    from hopqa.methods.gensco.prompts import ANSWER_INSTRUCTION, SHORT_ANSWER_CLAUSE
    from hopqa.types import Demo, DemoStep

    demos = [Demo("Where is X?", "Y", (DemoStep("Where is X?", "Y", PASSAGES[0]),))][:shots]
    prompts = {}
    for answer in ("paper", "short"):
        _, llm = gensco([Q1, "<FIN></FIN>"])
        method = GenSco(llm, POOL, GenScoConfig(shots=shots, answer=answer), demos=demos)
        assert method.answer(Q).answer == "Stanley"
        prompts[answer] = [r.text() for r in llm.requests if r.text().startswith("Answer the question")][0]
    assert SHORT_ANSWER_CLAUSE not in prompts["paper"]
    assert prompts["short"].startswith("Answer the question given the context." + SHORT_ANSWER_CLAUSE)
    assert prompts["short"].replace(SHORT_ANSWER_CLAUSE, "", 1) == prompts["paper"]
    assert (ANSWER_INSTRUCTION in prompts["paper"]) == bool(shots)
    with pytest.raises(MethodError, match="answer"):
        GenSco(llm, POOL, GenScoConfig(shots=0, answer="terse"))
