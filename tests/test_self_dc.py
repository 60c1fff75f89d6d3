"""Self-DC: confidence parsing, routing boundaries, recursion and its depth cap, the GenRead and
Retrieve-then-Read special cases, and end-to-end runs on the embedded model."""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from hopqa.build import build_method
from hopqa.llm.base import Completion, Generation, GenerationRequest
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.base import MethodError
from hopqa.methods.demos import chain_decomposition
from hopqa.methods.self_dc import (
    DECOMPOSE_CHAIN_JSON_PROMPT,
    DECOMPOSE_CHAIN_REPLY,
    SelfDC,
    SelfDCConfig,
    chain_examples,
    chained,
    parse_subquestions,
    resolved,
    parse_verbal_confidence,
    route,
)
from hopqa.retrieval.pool import CandidatePool
from hopqa.types import Demo, DemoStep, Passage

POOL = CandidatePool([
    Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County."),
    Passage("b", "Mountrail County", "Stanley is the county seat of Mountrail County."),
    Passage("c", "Paris", "Paris is the capital of France."),
])
Q = "What is the seat of the county where Van Hook Township is located?"


@pytest.mark.parametrize("text, conf, answer", [
    ("Answer: Paris\nConfidence (0-100): 80%", 0.8, "Paris"),
    ("Answer: Paris\nConfidence (0-100): 80", 0.8, "Paris"),
    ("Answer: Paris Confidence: 95", 0.95, "Paris"),
    ("Answer: Paris\nI am 60% sure.", 0.6, "Paris"),
    ("Answer: Paris\nConfidence (0-100): 0.7", 0.7, "Paris"),
    ("Answer: Paris\nConfidence (0-100): 250%", 1.0, "Paris"),
    ("75", 0.75, "75"),
    ("Answer: Paris\nConfidence (0-100): [Your confidence level]", None, "Paris"),  # missing
    ("Answer: Born in 1990", None, "Born in 1990"),  # a year is not a confidence
    ("", None, ""),
])
def test_parse_verbal_confidence(text, conf, answer):
    c, a = parse_verbal_confidence(text)
    assert (c == pytest.approx(conf) if conf is not None else c is None) and a == answer


# Real SmolLM2-135M replies to the Table 21 prompts (benchmark traces, MuSiQue dev): it copies
# the prompt's "e.g. 80" and phrases it freely; the confidence must still be found.
@pytest.mark.parametrize("raw", [
    "Your answer is correct and your confidence level is 80%.",
    "Your answer is 80% confident.",
    "Your answer: 80%\nYour confidence level: 80%\nYour confidence level: 80%\nYour confidence level:",
    "Your answer is correct and provides a detailed answer. The answer is 80% confident.",
])
def test_parse_verbal_confidence_real_smollm2_replies(raw):
    assert parse_verbal_confidence("Answer:" + raw)[0] == pytest.approx(0.8)


@pytest.mark.parametrize("raw, expected", [
    # a statement, not a decomposition: one item, so the caller falls back to retrieve-then-read
    ("The territory containing Bansaan Island is located at the island of Bansaan.",
     ["The territory containing Bansaan Island is located at the island of Bansaan."]),
    # numbered items repeated verbatim count once
    ("1. Adam Hammill has played for both West Ham Ajax and the team that Hammill is on.\n"
     "2. Adam Hammill has played for both West Ham Ajax and the team that Hammill is on.\n",
     ["Adam Hammill has played for both West Ham Ajax and the team that Hammill is on."]),
    ("#1: The father of Empress Wang's husband is the Empress Wang herself.\n"
     "#2: The father of Empress Wang's husband is the Empress Wang herself.\n",
     ["The father of Empress Wang's husband is the Empress Wang herself."]),
    ("1. The socialist candidate part of 1912 was the Socialist Party of Germany.\n"
     "2. The answer is the Socialist Party of Germany.",
     ["The socialist candidate part of 1912 was the Socialist Party of Germany.",
      "The answer is the Socialist Party of Germany."]),
])
def test_parse_subquestions_real_smollm2_replies(raw, expected):
    assert parse_subquestions(raw) == expected


@pytest.mark.parametrize("text, expected", [
    ("#1: Which county is Van Hook in?, #2: What is its seat?", ["Which county is Van Hook in?", "What is its seat?"]),
    ("#1: Who is A?\n#2: Who is B?\n#3: Who is A?", ["Who is A?", "Who is B?"]),
    ("1. Who is A?\n2. Who is B?", ["Who is A?", "Who is B?"]),
    ("#1: Who is A? (this is the key part)", ["Who is A?"]),
    ("I cannot divide this question.", ["I cannot divide this question."]),
    ("", []),
])
def test_parse_subquestions(text, expected):
    assert parse_subquestions(text) == expected


@pytest.mark.parametrize("c, expected", [
    (0.0, "retrieve-then-read"), (0.3, "retrieve-then-read"),     # c = α − β retrieves
    (0.30001, "decompose"), (0.4, "decompose"), (0.49999, "decompose"),
    (0.5, "generate-then-read"), (1.0, "generate-then-read"),      # c = α + β generates
])
def test_routing_boundaries_verb_defaults(c, expected):
    assert route(c, 0.4, 0.1) == expected


def test_routing_boundaries_prob_defaults_and_special_cases():
    assert route(0.5, 0.6, 0.1) == "retrieve-then-read" and route(0.7, 0.6, 0.1) == "generate-then-read"
    assert route(0.6, 0.6, 0.1) == "decompose"
    assert all(route(c, 0.0, 0.0) == "generate-then-read" for c in (0.0, 0.5, 1.0))   # GenRead
    assert all(route(c, 1.0, 0.0) == "retrieve-then-read" for c in (0.0, 0.5, 1.0))   # Retrieve-then-Read


def scripted(conf: dict[str, str], concurrency: int = 1, hook: Callable[[str], Any] | None = None,
             llm_class: Callable[..., ScriptedLLM] = ScriptedLLM, **cfg) -> tuple[SelfDC, ScriptedLLM]:
    """Confidence per question text (default 40: uncertain), decompositions for the main question;
    ``hook`` sees every prompt before it is answered (inside the call, while it is in flight)."""
    def reply(request):
        t = request.text()
        if hook is not None:
            hook(t)
        if t.startswith("Please read the question, give the answer"):
            q = t.split("Question: ")[-1].split("\n")[0]
            return f" X\nConfidence (0-100): {conf.get(q, '40')}%"
        if t.startswith("Please answer the following question"):
            return " Stanley"
        if t.startswith("Please read the question, divide"):
            q = t.split("Question: ")[-1].split("\n")[0]
            if q == Q:
                return " #1: Which county is Van Hook Township in?, #2: What is the seat of Mountrail County?"
            return f" #1: {q}"  # cannot be divided further
        if t.startswith("Generate a background document"):
            return "Stanley is the seat of Mountrail County."
        if t.startswith("Refer to the passage below"):
            if "Which county" in t.split("Question:")[-1]:
                return " Mountrail County"
            return " Stanley"
        if t.startswith("Question:"):
            return " Stanley"
        raise AssertionError(t[:80])

    llm = llm_class(replies=reply, max_concurrency=concurrency)
    return SelfDC(llm, POOL, SelfDCConfig().update(**cfg)), llm


def nodes(ans):
    return ans.trace.root.find("self-dc")


def test_uncertain_question_is_decomposed_and_sub_answers_combined():
    method, llm = scripted({Q: "40", "Which county is Van Hook Township in?": "10",
                            "What is the seat of Mountrail County?": "90"})
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Stanley"
    top, sub1, sub2 = nodes(ans)
    assert top.outputs["route"] == "decompose" and top.outputs["confidence"] == 0.4
    assert (sub1.inputs["depth"], sub1.outputs["route"], sub1.outputs["answer"]) == (1, "retrieve-then-read", "Mountrail County")
    assert (sub2.outputs["route"], sub2.outputs["answer"]) == ("generate-then-read", "Stanley")
    combine = [r.text() for r in llm.requests if r.text().startswith("Question:")][0]
    assert "Which county is Van Hook Township in? Mountrail County\nWhat is the seat of Mountrail County? Stanley" in combine
    assert ans.usage.retrieval_calls == 1  # only the unknown sub-question retrieved
    assert [p.id for p in ans.passages][:1] == ["a"]


def test_recursion_depth_cap_and_single_subquestion():
    # every question stays uncertain: depth 0 decomposes, depth 1 sub-questions cannot be divided
    method, _ = scripted({})
    ans = method.answer(Q)
    subs = [n for n in nodes(ans) if n.inputs["depth"] == 1]
    assert len(subs) == 2 and all(n.outputs["reason"] == "single sub-question" for n in subs)
    # with t = 0 the uncertain question is not decomposed at all
    method, llm = scripted({}, depth=0)
    ans = method.answer(Q)
    assert nodes(ans)[0].outputs["reason"] == "depth limit" and len(nodes(ans)) == 1
    assert not any(r.text().startswith("Please read the question, divide") for r in llm.requests)
    # t = 1: the sub-questions are at the cap, they retrieve without trying to divide
    method, llm = scripted({}, depth=1)
    ans = method.answer(Q)
    assert max(n.inputs["depth"] for n in nodes(ans)) == 1
    assert sum(r.text().startswith("Please read the question, divide") for r in llm.requests) == 1
    assert all(n.outputs["reason"] == "depth limit" for n in nodes(ans) if n.inputs["depth"] == 1)


def test_genread_and_retrieve_then_read_special_cases():
    for c in ("0", "50", "100"):
        method, llm = scripted({Q: c}, alpha=0.0, beta=0.0)
        ans = method.answer(Q)
        assert [n.outputs["route"] for n in nodes(ans)] == ["generate-then-read"] and ans.usage.retrieval_calls == 0
        method, llm = scripted({Q: c}, alpha=1.0, beta=0.0)
        ans = method.answer(Q)
        assert [n.outputs["route"] for n in nodes(ans)] == ["retrieve-then-read"] and ans.usage.retrieval_calls == 1
        assert not any(r.text().startswith(("Please read the question, divide", "Generate a background"))
                       for r in llm.requests)


def test_known_route_retrieve_reads_retrieved_passages_for_a_sure_question():
    """``known_route=retrieve`` (the small-model preset's): a sub-question the model is sure of
    is read from retrieved passages, not from its own document; the other routes are the same."""
    conf = {Q: "40", "Which county is Van Hook Township in?": "10", "What is the seat of Mountrail County?": "90"}
    method, llm = scripted(conf, known_route="retrieve")
    ans = method.answer(Q)
    top, sub1, sub2 = nodes(ans)
    assert top.outputs["route"] == "decompose" and sub1.outputs["route"] == "retrieve-then-read"
    assert sub2.outputs["route"] == "retrieve-then-read" and sub2.outputs["reason"] == "known_route=retrieve"
    assert sub2.outputs["confidence"] == 0.9 and ans.usage.retrieval_calls == 2
    assert not any(r.text().startswith("Generate a background") for r in llm.requests)
    from hopqa.methods.base import method_config

    cfg = method_config("self-dc", preset="small-model")
    assert (cfg.confidence, cfg.known_route, cfg.k, cfg.choice) == ("prob", "retrieve", 5, True)
    assert (cfg.chain, cfg.shots, cfg.brackets, cfg.alpha, cfg.beta, cfg.depth) == (True, 4, True, 0.5, 0.5, 1)
    assert (method_config("self-dc").known_route, method_config("self-dc").k) == ("generate", 3)
    assert method_config("self-dc").choice is False


def test_missing_confidence_counts_as_zero_and_is_noted():
    method, _ = scripted({Q: "[Your confidence level]"})
    ans = method.answer(Q)
    conf = ans.trace.root.find("confidence")[0]
    assert conf.outputs["confidence"] == 0.0 and any("treated as 0" in e["message"] for e in conf.events)
    assert nodes(ans)[0].outputs["route"] == "retrieve-then-read"


def test_prob_confidence_needs_logprobs():
    with pytest.raises(MethodError, match="logprobs"):
        SelfDC(ScriptedLLM(replies=[]), POOL, SelfDCConfig(confidence="prob"))
    with pytest.raises(MethodError, match="confidence"):
        SelfDC(ScriptedLLM(replies=[]), POOL, SelfDCConfig(confidence="vibes"))
    with_logprobs = ScriptedLLM(replies=[], capabilities={"generate", "logprobs"})
    assert SelfDC(with_logprobs, POOL, SelfDCConfig(confidence="prob")).alpha == 0.6
    assert SelfDC(with_logprobs, POOL, SelfDCConfig(confidence="prob", alpha=0.3)).alpha == 0.3


def test_subquestions_of_a_level_run_concurrently():
    """Both sub-questions' confidence calls wait at a barrier until the other one is in flight
    too: no sleep, so a loaded machine cannot make this flaky; run one after the other, the
    first call times out at the barrier and the answer carries the error."""
    subs = ("Which county is Van Hook Township in?", "What is the seat of Mountrail County?")
    barrier = threading.Barrier(2, timeout=30)

    def hook(prompt: str) -> None:
        if prompt.startswith("Please read the question, give the answer") and \
                prompt.split("Question: ")[-1].split("\n")[0] in subs:
            barrier.wait()

    method, llm = scripted({Q: "40", subs[0]: "10", subs[1]: "10"}, concurrency=2, hook=hook)
    ans = method.answer(Q)
    assert ans.error is None, ans.error
    assert llm.max_in_flight == 2


def test_chain_solves_sub_questions_in_order_with_the_earlier_answers():
    """``chain`` with ``brackets`` (issue 33; both off by default): the second sub-question, naming
    no ``#k``, is asked after the first, with its answer in brackets; its confidence, retrieval and
    reading see it, while combine-sub-qas lists the sub-questions as decomposed. With ``chain``
    alone it is asked after the first as written; without ``chain`` both are asked as written, at
    once. ``brackets`` without ``chain`` is refused."""
    sub1, sub2 = "Which county is Van Hook Township in?", "What is the seat of Mountrail County?"
    asked2 = f"{sub2} (Mountrail County)"
    method, llm = scripted({Q: "40", sub1: "10", asked2: "10"}, concurrency=2, chain=True, brackets=True)
    ans = method.answer(Q)
    assert ans.error is None, ans.error
    top, n1, n2 = nodes(ans)
    assert (n1.inputs["question"], n2.inputs["question"]) == (sub1, asked2)
    assert n2.outputs["route"] == "retrieve-then-read" and llm.max_in_flight == 1
    assert [r.inputs["question"] for r in ans.trace.root.find("retrieve-then-read")] == [sub1, asked2]
    confidence_asks = [r.text().split("Question: ")[-1].split("\n")[0] for r in llm.requests
                       if r.text().startswith("Please read the question, give the answer")]
    assert confidence_asks == [Q, sub1, asked2]
    combine = [r.text() for r in llm.requests if r.text().startswith("Question:")][0]
    assert f"{sub1} Mountrail County\n{sub2} Stanley" in combine
    assert chained(sub2, ["", "A", " "], brackets=True) == f"{sub2} (A)" and chained(sub2, [], brackets=True) == sub2
    method, llm = scripted({Q: "40", sub1: "10", sub2: "10"}, concurrency=2, chain=True)
    assert [n.inputs["question"] for n in nodes(method.answer(Q))] == [Q, sub1, sub2] and llm.max_in_flight == 1
    method, llm = scripted({Q: "40", sub1: "10", sub2: "10"})
    assert [n.inputs["question"] for n in nodes(method.answer(Q))] == [Q, sub1, sub2]
    assert method.config.chain is False and method.config.brackets is False
    with pytest.raises(MethodError, match="set chain=true"):
        SelfDC(ScriptedLLM(), POOL, SelfDCConfig(brackets=True))


# -- the 'prob' confidence: the mean token probability, routed at the exact boundaries ---------------------------
class LogprobLLM(ScriptedLLM):
    """A scripted LLM that also returns per-token log-probabilities (the ScriptedLLM of
    ``hopqa.llm.scripted`` has no way to): ``logprobs(request, text)`` gives them for a request
    that asks for them (default: one log(0.1) per whitespace word)."""

    def __init__(self, replies: Any = None, logprobs: Callable[[GenerationRequest, str], list[float]] | None = None,
                 capabilities: set[str] | None = None, **kw: Any) -> None:
        super().__init__(replies=replies, capabilities={"generate", "logprobs", *(capabilities or ())}, **kw)
        self._logprobs = logprobs or (lambda request, text: [math.log(0.1)] * max(1, len(text.split())))

    def _complete(self, request: GenerationRequest) -> Generation:
        gen = super()._complete(request)
        if request.logprobs:
            gen.completions = [replace(c, tokens=c.text.split() or [c.text], logprobs=list(self._logprobs(request, c.text)))
                               for c in gen.completions]
        return gen


@pytest.mark.parametrize("logprobs, expected", [
    ([0.0], 1.0),
    ([math.log(0.5), 0.0], 0.75),             # exp of the mean log-probability would be 0.7071
    ([math.log(0.9), math.log(0.1)], 0.5),    # the geometric mean would be 0.3
    ([math.log(0.2)] * 3, 0.2),
    ([-1000.0, 0.0], 0.5),
])
def test_mean_prob_is_the_mean_token_probability(logprobs, expected):
    """Self-DC (Wang et al. 2024, Section 4): 'prob' is the mean probability of the generated answer's tokens,
    (1/n)·Σ exp(logprob_i), computed by hand here."""
    assert Completion("x", logprobs=logprobs).mean_prob == pytest.approx(expected, rel=1e-12)


def test_mean_prob_without_logprobs_is_none():
    assert Completion("x").mean_prob is None and Completion("x", logprobs=[]).mean_prob is None


def scripted_prob(probs: dict[str, list[float]], **cfg) -> tuple[SelfDC, ScriptedLLM]:
    """``scripted`` with confidence='prob': the direct answer's tokens have the probabilities
    ``probs[question]`` (default [0.1]: unknown, so sub-questions retrieve)."""
    def logprobs(request: GenerationRequest, text: str) -> list[float]:
        q = request.text().split("Question: ")[-1].split("\n")[0]
        return [math.log(p) for p in probs.get(q, [0.1])]

    return scripted({}, llm_class=functools.partial(LogprobLLM, logprobs=logprobs), confidence="prob", **cfg)


@pytest.mark.parametrize("probs, expected_route", [
    ([0.5], "retrieve-then-read"),             # c = α − β = 0.5 exactly: retrieve
    ([0.45, 0.55], "retrieve-then-read"),      # mean 0.5 exactly
    ([0.5000001], "decompose"),                # just above α − β
    ([0.6], "decompose"),
    ([0.2, 1.0], "decompose"),                 # mean 0.6 (exp of the mean logprob, 0.447, would retrieve)
    ([0.6999999], "decompose"),                # just below α + β
    ([0.7], "generate-then-read"),             # c = α + β = 0.7 exactly: generate
    ([0.4, 1.0], "generate-then-read"),        # mean 0.7 exactly (exp of the mean logprob, 0.632, would decompose)
    ([1.0], "generate-then-read"),
])
def test_prob_confidence_routes_at_the_exact_boundaries(probs, expected_route):
    """Defaults for 'prob': α = 0.6, β = 0.1, so [0, 0.5] retrieves, (0.5, 0.7) decomposes and
    [0.7, 1] generates; c is the mean token probability of the direct answer."""
    method, _ = scripted_prob({Q: probs})
    ans = method.answer(Q)
    assert ans.error is None, ans.error
    conf = ans.trace.root.find("confidence")[0]
    assert conf.outputs["confidence"] == pytest.approx(sum(probs) / len(probs), rel=1e-12)
    assert conf.llm_calls[0]["params"]["logprobs"] is True
    assert nodes(ans)[0].outputs["route"] == expected_route


def test_prob_confidence_with_custom_alpha_beta():
    # (α, β) = (0.5, 0.25): [0, 0.25] retrieves, (0.25, 0.75) decomposes, [0.75, 1] generates
    for probs, expected in (([0.25], "retrieve-then-read"), ([0.5, 1.0], "generate-then-read"),
                            ([0.25, 0.5], "decompose")):
        method, _ = scripted_prob({Q: probs}, alpha=0.5, beta=0.25)
        assert nodes(method.answer(Q))[0].outputs["route"] == expected, probs


# -- the real thing -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2_logprobs():
    """SmolLM2 with logits_all on: the embedded backend then returns token logprobs ('prob')."""
    from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM

    llm = LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(n_ctx=2048, logits_all=True))
    yield llm
    llm.close()


@pytest.mark.slow
@pytest.mark.parametrize("confidence", ["verb", "prob"])
def test_self_dc_end_to_end(request, data_dir, confidence):
    from hopqa.datasets import load_dataset

    llm = request.getfixturevalue("smollm2" if confidence == "verb" else "smollm2_logprobs")
    ex = load_dataset("musique", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("self-dc", llm, confidence=confidence, max_tokens=24, document_tokens=64)
    ans = method.with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
    assert ans.error is None, ans.error
    top = nodes(ans)[0]
    assert 0.0 <= top.outputs["confidence"] <= 1.0 and top.outputs["route"] in (
        "retrieve-then-read", "generate-then-read", "decompose")
    assert ans.usage.retrieval_calls == sum(1 for n in ans.trace.root.find("retrieve-then-read"))
    if confidence == "prob":  # a real mean token probability, not the 0 fallback
        step = ans.trace.root.find("confidence")[0]
        logprobs = step.llm_calls[0]["logprobs"][0]
        assert logprobs and step.outputs["confidence"] == pytest.approx(
            sum(math.exp(x) for x in logprobs) / len(logprobs), rel=1e-9)


@pytest.mark.slow
def test_self_dc_small_model_preset_end_to_end(smollm2_logprobs, data_dir):
    """The preset on the real model: token-probability confidence, and no question is answered
    from a generated document."""
    from hopqa.datasets import load_dataset

    ex = load_dataset("musique", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("self-dc", smollm2_logprobs, preset="small-model", max_tokens=24, depth=1)
    ans = method.with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
    assert ans.error is None, ans.error
    assert not ans.trace.root.find("generate-then-read") and ans.usage.retrieval_calls >= 1
    assert all(n.outputs["route"] in ("retrieve-then-read", "decompose") for n in nodes(ans))
    assert not any(call["prompt"].startswith("Generate a background") for n in nodes(ans) for call in n.llm_calls)
    # the preset's chain: the decomposition is asked for steps in order, shown 4 demonstrations
    (decompose,) = ans.trace.root.find("decompose")
    assert "answered one after another" in decompose.llm_calls[0]["prompt"]
    assert decompose.llm_calls[0]["prompt"].count("\nQuestion: ") == 5  # 4 demonstrations and the question
    # the preset's k: each retrieval asks for 5 passages (the paper's 3 by default)
    reads = ans.trace.root.find("retrieve-then-read")
    assert reads and all(len(r.outputs["passages"]) == 5 for r in reads)


@pytest.mark.slow
def test_genread_special_case_matches_genread_on_the_embedded_model(smollm2):
    q = "Who wrote the novel Nineteen Eighty-Four?"
    sdc = build_method("self-dc", smollm2, POOL, alpha=0.0, beta=0.0, temperature=0.0, top_p=1.0,
                       document_tokens=64, max_tokens=32)
    gr = build_method("genread", smollm2, document_tokens=64, max_tokens=32)
    a, b = sdc.answer(q), gr.answer(q)
    assert a.error is None and b.error is None
    assert a.trace.root.find("generate-then-read")[0].outputs["document"] == b.passages[0].text
    assert a.answer == b.answer


@pytest.mark.slow
def test_self_dc_with_choice_on_the_real_model(smollm2_logprobs, data_dir):
    """Self-DC's small-model preset (with ``choice``) on SmolLM2, on the first comparison question of
    the shipped 2WikiMultihopQA dev subset: one ``choice`` step settles the answer, over passages
    the method read."""
    from hopqa.datasets import load_dataset
    from hopqa.methods.choice import candidates

    ex = next(e for e in load_dataset("2wikimultihopqa", "dev", data_dir=data_dir, limit=40) if candidates(e.question))
    pair = candidates(ex.question)
    method = build_method("self-dc", smollm2_logprobs, CandidatePool(ex.paragraphs), preset="small-model",
                          depth=1, max_tokens=24)
    ans = method.answer(ex.question)
    assert ans.error is None, ans.error
    (choice,) = ans.trace.root.find("choice")
    assert choice.inputs["candidates"] == list(pair) and ans.answer == choice.outputs["kept"]
    assert choice.outputs["how"] in ("compared", "named", "asked")
    read = {p.id for p in ans.passages}
    assert read and set(choice.outputs["passages"]) <= read


@pytest.mark.slow
@pytest.mark.parametrize("brackets", [True, False], ids=["brackets", "as-written"])
def test_chain_on_the_real_model(smollm2_logprobs, data_dir, brackets):
    """``chain`` (the preset's, with its 4 demonstrations) on SmolLM2 and the first MuSiQue dev
    questions, every confidence in the decompose band and the sub-questions at the depth cap: a
    question SmolLM2 divides into two or more steps has each step after the first asked with the
    earlier answers it names (its ``#k`` replaced); a step naming none gets them all in brackets
    with the preset's ``brackets``, and is asked as written with ``brackets=false``. SmolLM2
    gives some questions a single step (they are read as they stand), so the first of 6 it
    divides is checked."""
    from hopqa.datasets import load_dataset

    method = build_method("self-dc", smollm2_logprobs, CandidatePool([]), preset="small-model", max_tokens=24,
                          brackets=brackets)
    for ex in load_dataset("musique", "dev", data_dir=data_dir, limit=6):
        ans = method.with_retriever(CandidatePool(ex.paragraphs)).answer(ex.question)
        assert ans.error is None, ans.error
        top, *subs = nodes(ans)
        if len(subs) >= 2:
            break
    else:
        pytest.fail("SmolLM2 divided none of the first 6 MuSiQue dev questions into two or more steps")
    assert top.outputs["route"] == "decompose"
    (decompose,) = ans.trace.root.find("decompose")
    assert "answered one after another" in decompose.llm_calls[0]["prompt"]
    asked = decompose.outputs["subquestions"]
    answers = [n.outputs["answer"] for n in subs]
    # each step asked as chained makes it from the steps before it (a "#k" naming a step not yet
    # answered, as SmolLM2 writes, stays as written)
    assert [n.inputs["question"] for n in subs] == [chained(q, answers[:i], brackets) for i, q in enumerate(asked)]
    assert brackets or all(n.inputs["question"] == q for n, q in zip(subs, asked) if "#" not in q)


# -- chain with #k references and demonstrations (issue 33; not in the paper) --------------------------------
DEMOS = [Demo("Who is the child of the director of film Devotion?", "Lilla Brignone",
              (DemoStep("Who is the director of the film Devotion?", "The director of Devotion is Guido Brignone."),
               DemoStep("Who is the child of Guido Brignone?", "Lilla Brignone"))),
         Demo("When was the founder of the band Circus Diablo born?", "1961",
              (DemoStep("Who founded Circus Diablo?", "Billy Duffy"),
               DemoStep("Who was in the same band as Billy Duffy?", "Ian Astbury"),
               DemoStep("When was Ian Astbury born?", "1962")))]


def test_chain_decomposition_names_the_earlier_answers_by_number():
    """A demonstration's gold steps as a chain decomposition: the entity an earlier answer hands
    on becomes that step's number; a step naming none stays."""
    assert chain_decomposition(DEMOS[0]) == ["Who is the director of the film Devotion?", "Who is the child of #1?"]
    assert chain_decomposition(DEMOS[1]) == ["Who founded Circus Diablo?", "Who was in the same band as #1?",
                                             "When was #2 born?"]
    lone = Demo("q", "a", (DemoStep("Where is Paris?", "France"), DemoStep("What is 2 + 2?", "4")))
    assert chain_decomposition(lone) == ["Where is Paris?", "What is 2 + 2?"]


@pytest.mark.parametrize("sub, earlier, expected", [
    ("When was #1 born?", ["Guido Brignone"], "When was Guido Brignone born?"),
    ("Was #1 older than #2?", ["A", "B"], "Was A older than B?"),
    ("Who is #2's child?", ["A"], "Who is #2's child?"),          # no second answer yet: stays
    ("When was #1 born?", [" "], "When was #1 born?"),             # an empty answer: stays
    ("When was he born?", ["A", "", "B"], "When was he born? (A; B)"),  # no reference: brackets
    ("When was he born?", [], "When was he born?"),
])
def test_chained_replaces_references_else_brackets(sub, earlier, expected):
    """With ``brackets`` a step naming no ``#k`` gets the earlier answers in brackets; without,
    it is asked as written (``resolved``: references filled, nothing added)."""
    assert chained(sub, earlier, brackets=True) == expected
    assert chained(sub, earlier) == resolved(sub, earlier) == (expected if "#" in sub or not earlier else sub)


def test_chain_with_shots_shows_demonstrations_and_fills_the_references():
    """``chain`` asks Table 21's decompose step for steps answered in order (``#1`` naming an
    earlier answer), shown ``shots`` demonstrations from the gold steps; the second sub-question
    is asked, and shown to combine-sub-qas, with ``#1`` replaced by the first answer, not in
    brackets. ``shots`` without ``chain`` is refused."""
    sub1, sub2 = "Which county is Van Hook Township in?", "What is the seat of #1?"

    def reply(request):
        t = request.text()
        if t.startswith("Please read the question, give the answer"):
            return " X\nConfidence (0-100): 40%"
        if t.startswith("Please read the question, divide"):
            return f" #1: {sub1}, #2: {sub2}"
        if t.startswith("Refer to the passage below"):
            return " Mountrail County" if "Which county" in t.split("Question:")[-1] else " Stanley"
        return " Stanley"

    llm = ScriptedLLM(replies=reply)
    method = SelfDC(llm, POOL, SelfDCConfig(chain=True, shots=2, depth=1), demos=DEMOS)
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Stanley", ans.error
    top, n1, n2 = nodes(ans)
    assert (n1.inputs["question"], n2.inputs["question"]) == (sub1, "What is the seat of Mountrail County?")
    (decompose,) = [r.text() for r in llm.requests if r.text().startswith("Please read the question, divide")]
    assert "answered one after another" in decompose and "Examples:" in decompose
    assert "Answer: #1: Who is the director of the film Devotion?, #2: Who is the child of #1?" in decompose
    assert "When was #2 born?" in decompose and decompose.endswith(f"Question: {Q}\nAnswer:")
    combine = [r.text() for r in llm.requests if r.text().startswith("Question:")][0]
    assert f"{sub1} Mountrail County\nWhat is the seat of Mountrail County? Stanley" in combine
    # zero-shot chain: the same prompt without the examples
    plain = ScriptedLLM(replies=reply)
    SelfDC(plain, POOL, SelfDCConfig(chain=True, depth=1)).answer(Q)
    (decompose,) = [r.text() for r in plain.requests if r.text().startswith("Please read the question, divide")]
    assert "answered one after another" in decompose and "Examples:" not in decompose
    with pytest.raises(MethodError, match="chain=true"):
        SelfDC(llm, POOL, SelfDCConfig(shots=2), demos=DEMOS)
    with pytest.raises(MethodError, match="shots=2"):
        SelfDC(llm, POOL, SelfDCConfig(chain=True, shots=2))


def test_chain_with_shots_structured_shows_json_demonstrations():
    """With structured outputs the demonstrations are written as the JSON the reply must be."""
    text = chain_examples(DEMOS, structured=True)
    assert '{"subquestions": ["Who is the director of the film Devotion?", "Who is the child of #1?"]}' in text
    assert "Answer:" not in text and chain_examples([]) == ""
    prompt = DECOMPOSE_CHAIN_JSON_PROMPT.format(question=Q, examples=text, reply=DECOMPOSE_CHAIN_REPLY)
    assert prompt.index("Examples:") < prompt.index(f"Question: {Q}") < prompt.index('{"subquestions": ["[sub')
