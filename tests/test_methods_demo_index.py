"""Every registered method end to end on the real embedded SmolLM2 over the real BM25 demo index,
each run checked against the structure its algorithm prescribes (calls, retrievals, steps, hops).

The question is the first of the shipped MuSiQue dev set; its paragraphs are in the demo corpus.
SmolLM2 is too weak to answer it: these tests pin behaviour, not quality (see the README's
benchmark for answers). Options that only bound the cost are set per method in ``OPTIONS``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hopqa.build import build_method
from hopqa.methods.base import METHODS, get_method_class, known_options
from hopqa.trace import Step
from hopqa.types import Answer

pytestmark = pytest.mark.slow

QUESTION = "What is the seat of the county where Van Hook Township is located?"

#: Cost bounds for the small test model (every other option keeps the paper's default).
OPTIONS: dict[str, dict] = {
    "direct": {},
    "cot": {},
    "genread": {"document_tokens": 64},
    "retrieve-then-read": {"k": 4},
    "self-ask": {"max_steps": 3},
    "react": {"max_steps": 3},
    "ircot": {"max_steps": 3},
    "iter-retgen": {"iterations": 2, "max_tokens": 48},
    "hgot": {"depth": 1, "samples": 2, "max_steps": 2, "k": 3, "entailment_delta": False, "max_tokens": 96},
    "gensco-max": {"max_levels": 2, "k": 6},
    "gensco-stop": {"max_levels": 2, "k": 6},
    "gensco-no-qd": {"max_levels": 2, "k": 6},
    "self-dc": {"document_tokens": 48, "depth": 1},
    "tor": {"widths": "3,2", "depth": 2, "shots": 1},
    "leapquery": {"votes": 3, "max_iter": 2},
    "cor": {"k": 3, "max_turns": 2, "shots": 1},
}


def _kinds(ans: Answer, kind: str) -> list[Step]:
    return ans.trace.root.find(kind)


def _retrievals(step: Step) -> int:
    return sum(len(s.retrievals) for s in step.walk())


def _llm_calls(step: Step) -> int:
    return sum(len(s.llm_calls) for s in step.walk())


# -- one structural check per method --------------------------------------------------------------
def check_direct(ans: Answer, cfg) -> None:
    assert ans.usage.llm_calls == 1 and ans.usage.retrieval_calls == 0
    assert not ans.passages and not ans.hops


check_cot = check_direct


def check_genread(ans: Answer, cfg) -> None:
    assert ans.usage.retrieval_calls == 0
    assert ans.usage.llm_calls == cfg.n_documents + 1  # n documents (seeded calls) + one read
    assert [p.id for p in ans.passages] == [f"generated-{i}" for i in range(cfg.n_documents)]


def check_retrieve_then_read(ans: Answer, cfg) -> None:
    assert ans.usage.retrieval_calls == 1 and ans.usage.llm_calls == 1
    assert len(ans.passages) == cfg.k
    assert _kinds(ans, "retrieve")[0].retrievals[0]["query"] == QUESTION


def check_self_ask(ans: Answer, cfg) -> None:
    follow_ups = [s for s in _kinds(ans, "follow_up") if "follow_up" in s.outputs]
    # each follow-up is answered from exactly one retrieval of k passages, inside its own step
    assert ans.usage.retrieval_calls == len(follow_ups)
    for s in follow_ups:
        (inner,) = s.find("intermediate_answer")
        assert len(inner.retrievals) == 1 and inner.retrievals[0]["query"] == s.outputs["follow_up"]
        assert len(inner.retrievals[0]["passages"]) == cfg.k
    assert [h.question for h in ans.hops] == [s.outputs["follow_up"] for s in follow_ups]
    assert [h.answer for h in ans.hops] == [s.outputs["intermediate_answer"] for s in follow_ups]
    turns = len(_kinds(ans, "follow_up"))
    assert turns <= cfg.max_steps
    assert ans.usage.llm_calls == turns + len(follow_ups) + len(_kinds(ans, "final_answer"))


def check_react(ans: Answer, cfg) -> None:
    steps = _kinds(ans, "react_step")
    searches = [s for s in steps if (s.outputs.get("action") or [""])[0] == "search" and s.outputs["action"][1]]
    assert ans.usage.retrieval_calls == len(searches)  # Search acts on the retriever, nothing else does
    assert all(len(s.retrievals) == 1 for s in searches)
    assert 1 <= len(steps) <= cfg.max_steps
    assert ans.usage.llm_calls == len(steps) + len(_kinds(ans, "forced_finish"))
    assert len(ans.hops) == sum(1 for s in steps if s.outputs.get("action") and s.outputs["action"][0] != "finish")


def check_ircot(ans: Answer, cfg) -> None:
    reasons = _kinds(ans, "reason")
    kept = [s for s in reasons if not [e for e in s.events if e["message"] != "parse"]]  # a step noted as empty / repeated ends the loop
    final = kept and "answer is" in kept[-1].outputs["sentence"].lower()
    # one retrieval with the question, then one per reasoning sentence that is not the final one
    assert ans.usage.retrieval_calls == 1 + len(kept) - (1 if final else 0)
    assert len(reasons) <= cfg.max_steps
    assert len(ans.passages) <= cfg.max_paragraphs
    scores = [p.score for p in ans.passages]
    assert scores == sorted(scores, reverse=True)
    assert ans.hops[0].question == QUESTION and ans.hops[0].label == "retrieve"
    assert [h.question for h in ans.hops[1:]] == [s.outputs["sentence"] for s in kept]  # every reasoning step
    assert [bool(h.passages) for h in ans.hops] == [True] * ans.usage.retrieval_calls + [False] * bool(final)


def check_iter_retgen(ans: Answer, cfg) -> None:
    its = _kinds(ans, "iteration")
    assert ans.usage.retrieval_calls == cfg.iterations == len(its) == len(ans.hops)
    assert ans.usage.llm_calls == cfg.iterations
    assert its[0].outputs["query"] == QUESTION
    assert its[1].outputs["query"] == f"{QUESTION} {its[0].outputs['generation']}"
    assert len(ans.passages) == cfg.k


def check_hgot(ans: Answer, cfg) -> None:
    probes, infers = _kinds(ans, "probe"), _kinds(ans, "infer")
    traverses = _kinds(ans, "traverse")
    assert len(probes) == len(traverses) == ans.usage.retrieval_calls  # one retrieval per probe, none else
    assert all(len(p.retrievals) == 1 and len(p.retrievals[0]["passages"]) <= cfg.probe_k for p in probes)
    assert _retrievals(ans.trace.root) == len(probes)
    root = traverses[0]
    assert root.inputs["depth"] == 0
    if root.outputs["stopped"]:
        assert not infers and not ans.hops
    else:
        (search,) = root.find("search")
        subs = [t for t in search.find("traverse")]
        assert subs and all(t.inputs["depth"] == 1 and t.outputs["stopped"] for t in subs)  # depth 1 stops
        assert len(infers) == 1 and len(ans.passages) <= cfg.k
        assert [h.question for h in ans.hops] == [t.inputs["query"] for t in subs]
    for p in [*probes, *infers]:
        voted = len(p.outputs["samples"])  # DSP: samples without an answer are dropped, with a note
        assert 1 <= voted <= cfg.samples
        assert voted == cfg.samples or any("(DSP)" in e["message"] for e in p.events)
        assert len(p.outputs["sigma_after"]) == len(p.outputs["passages"])


def _check_gensco(ans: Answer, cfg, variant: str) -> None:
    (candidates,) = _kinds(ans, "candidates")
    assert ans.usage.retrieval_calls == 1 and len(candidates.outputs["passages"]) == cfg.k
    levels = _kinds(ans, "level")
    scored = [s for s in levels if "scores" in s.outputs]
    (select,) = _kinds(ans, "select")
    if not scored and variant != "no-qd":
        # SmolLM2 writes the JSON reply's placeholder as its first sub-question: no value (a failed
        # parse), so the walk ends at its first level and the reader reads no passage
        assert select.outputs["stop_reason"] == "empty sub-question" and len(levels) == 1
        assert [e["how"] for e in levels[0].events if e["message"] == "parse"] == [
            "the reply's example copied (subquestion)"]
        assert not ans.passages and not ans.hops
        return
    assert scored, "no level was scored"
    assert len(scored[0].outputs["scores"]) == cfg.k  # level 1 scores every candidate
    for s in scored:
        best = min(s.outputs["scores"], key=lambda x: x["nll"])
        assert s.outputs["chosen"] == best["id"]
    assert select.outputs["stop_reason"]
    assert [p.id for p in ans.passages] == list(dict.fromkeys(s.outputs["chosen"] for s in scored))
    assert len(ans.hops) == len(scored) and all(len(h.passages) == 1 for h in ans.hops)
    if variant == "no-qd":
        assert all(h.question == QUESTION for h in ans.hops)
        assert "subquestion" not in levels[0].outputs
    else:
        assert [h.question for h in ans.hops] == [s.outputs["subquestion"] for s in scored]


def check_gensco_max(ans: Answer, cfg) -> None:
    _check_gensco(ans, cfg, "max")
    assert not any("stop_nll_with" in s.outputs for s in _kinds(ans, "level"))


def check_gensco_stop(ans: Answer, cfg) -> None:
    _check_gensco(ans, cfg, "stop")
    levels = _kinds(ans, "level")
    assert "stop_nll_with" not in levels[0].outputs  # Eq. 1 applies from level stop_from_level = 2
    for s in levels[1:]:
        if "stop_nll_with" in s.outputs:
            stopped = s.outputs.get("stop") == "likelihood (Eq. 1)"
            assert stopped == (s.outputs["stop_nll_with"] > s.outputs["stop_nll_without"])


def check_gensco_no_qd(ans: Answer, cfg) -> None:
    _check_gensco(ans, cfg, "no-qd")


def check_self_dc(ans: Answer, cfg) -> None:
    nodes = _kinds(ans, "self-dc")
    assert nodes[0].inputs["depth"] == 0
    rtr = _kinds(ans, "retrieve-then-read")
    assert ans.usage.retrieval_calls == len(rtr) and all(len(s.retrievals) == 1 for s in rtr)
    for node in nodes:
        route = node.outputs["route"]
        assert route in ("retrieve-then-read", "generate-then-read", "decompose")
        assert 0.0 <= node.outputs["confidence"] <= 1.0
        children = [c.kind for c in node.children]
        if route == "decompose":
            assert "decompose" in children and "combine-sub-qas" in children
        else:
            assert route in children
    assert [h.question for h in ans.hops] == [n.inputs["question"] for n in nodes]


def _reviews_counted(ans: Answer, reviews: list[Step]) -> None:
    """One parse record per review; the method's cost figures in its metrics."""
    assert sum(ans.trace.parse_counts().values()) == len(reviews) >= 1
    assert ans.metrics["docs_reviewed"] >= 1 and ans.metrics["evidence"] >= 0
    (read,) = _kinds(ans, "read")
    assert read.outputs["prompt_tokens"] <= read.outputs["budget"]


def check_tor(ans: Answer, cfg) -> None:
    nodes = _kinds(ans, "node")
    widths = [int(w) for w in cfg.widths.split(",")]
    # the root retrieval gives the level-1 nodes; every Search retrieves and its kept paragraphs are children
    assert 1 <= len([n for n in nodes if n.inputs["depth"] == 1]) <= widths[0]
    for n in nodes:
        assert len(n.llm_calls) == 1 and n.outputs["action"] in ("accept", "search", "reject", "max depth")
        assert n.inputs["depth"] <= cfg.depth and len(n.inputs["path"]) == n.inputs["depth"]
        kids = [c for c in n.children if c.kind == "node"]
        if n.outputs["action"] == "search":
            (expand,) = [c for c in n.children if c.kind == "expand"]  # MPC, the default expansion
            (retrieve,) = [c for c in n.children if c.kind == "retrieve"]
            assert [k.inputs["passage"] for k in kids] == retrieve.outputs["kept"]
            assert expand.outputs["query"] == retrieve.inputs["query"]
        else:
            assert not kids
    assert ans.metrics["docs_reviewed"] == len({n.inputs["passage"] for n in nodes})
    assert ans.metrics["evidence"] == sum(n.outputs["action"] == "accept" for n in nodes)
    _reviews_counted(ans, nodes)


def check_cor(ans: Answer, cfg) -> None:
    reviews, analyses = _kinds(ans, "review"), _kinds(ans, "analyse")
    # a review per turn, §3.2's answer from an accepted chain (analysis=answer), the reader
    assert len(analyses) == sum(r.outputs.get("action") == "accept" for r in reviews)
    assert 1 <= len(reviews) <= cfg.max_turns and ans.usage.llm_calls == len(reviews) + len(analyses) + 1
    assert ans.usage.retrieval_calls in (len(reviews), len(reviews) + 1)
    assert _kinds(ans, "retrieve")[0].retrievals[0]["query"] == QUESTION
    _reviews_counted(ans, reviews)


def check_leapquery(ans: Answer, cfg) -> None:
    gaps, verifies, reranks = _kinds(ans, "gaps"), _kinds(ans, "verify"), _kinds(ans, "rerank")
    iterations = _kinds(ans, "iteration")
    assert 1 <= len(iterations) <= cfg.max_iter and len(gaps) == len(iterations)
    # the first retrieval with the question; each verified sub-question retrieves l more
    kept = [sub for v in verifies for sub in v.outputs["kept"]]
    assert ans.usage.retrieval_calls == 1 + len(kept)
    for v in verifies:
        for t in v.outputs["tally"]:
            assert len(t["votes"]) == cfg.votes and t["kept"] == (2 * t["true"] > cfg.votes)
    assert len(reranks) == 1 + sum(1 for v in verifies if v.outputs["kept"])
    assert [p.id for p in ans.passages] == reranks[-1].outputs["kept"] and len(ans.passages) <= cfg.k
    # gap lists, a vote request per sub-question, the reranker's calls (the default llm reranker
    # judges each candidate, in its rerank step), the reader
    judged = sum(len(r.llm_calls) for r in reranks)
    assert judged == sum(r.inputs["candidates"] for r in reranks)
    assert ans.usage.llm_calls == len(gaps) + sum(len(v.outputs["tally"]) for v in verifies) + judged + 1


CHECKS: dict[str, Callable[[Answer, object], None]] = {
    name: globals()[f"check_{name.replace('-', '_')}"] for name in OPTIONS
}


def test_every_registered_method_has_a_structural_check():
    get_method_class("direct")  # registers the built-ins
    assert set(CHECKS) == set(METHODS)


@pytest.fixture(scope="module")
def demo_ids(demo_index) -> set[str]:
    return {p.id for p in demo_index.passages}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_method_end_to_end_over_the_demo_index(name, smollm2, demo_index, demo_ids):
    method = build_method(name, smollm2, demo_index, **OPTIONS[name])
    ans = method.answer(QUESTION)
    assert ans.error is None, ans.error
    if not ans.answer.strip():  # only where a structured reply held no answer (SmolLM2 copies the reply's example)
        assert name in STRUCTURED_METHODS and any(e["status"] == "failed" for s in ans.trace.root.walk()
                                                  for e in s.events if e["message"] == "parse"), "no answer"
    assert ans.trace.root.kind == "question" and ans.trace.root.outputs["answer"] == ans.answer
    # every call the method made is in the trace and in the usage
    assert _llm_calls(ans.trace.root) == ans.usage.llm_calls
    assert _retrievals(ans.trace.root) == ans.usage.retrieval_calls
    used = {p["id"] for h in ans.hops for p in h.passages} | {p.id for p in ans.passages}
    if name != "genread":  # GenRead reads its own generated documents
        assert used <= demo_ids  # every passage shown comes from the demo index
    CHECKS[name](ans, method.config)
    if name in STRUCTURED_METHODS:  # structured=auto: the embedded model takes JSON schemas
        _check_structured(ans, structured=True)


#: The methods with structured steps (the ``structured`` option; GenSco without decomposition
#: has the option but never generates a sub-question).
STRUCTURED_METHODS = sorted(n for n in OPTIONS if "structured" in known_options(n) and n != "gensco-no-qd")


def _check_structured(ans: Answer, structured: bool) -> None:
    """Every structured output was recorded as read with (or without) a schema, and the calls
    carried schemas exactly when structured."""
    records = [e for s in ans.trace.root.walk() for e in s.events if e["message"] == "parse"]
    assert records and all(e["structured"] is structured for e in records), records
    assert all(e["status"] in ("direct", "fallback", "failed") for e in records)
    with_schema = [c for c in ans.trace.llm_calls() if "schema" in c.get("params", {})]
    assert bool(with_schema) is structured


@pytest.mark.parametrize("name", STRUCTURED_METHODS)
def test_free_text_path_end_to_end_over_the_demo_index(name, smollm2, demo_index):
    """structured=off: the papers' free-text protocol on the real model (the default, auto,
    takes the JSON path on the embedded backend: the test above)."""
    method = build_method(name, smollm2, demo_index, structured="off", **OPTIONS[name])
    ans = method.answer(QUESTION)
    assert ans.error is None, ans.error
    CHECKS[name](ans, method.config)
    _check_structured(ans, structured=False)


def test_self_dc_prob_over_the_demo_index(demo_index, demo_ids):
    """Self-DC with the 'prob' confidence (token log-probabilities: logits_all) over the demo
    index: each node's confidence is the mean token probability of its confidence call."""
    import math

    from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM

    llm = LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(n_ctx=4096, logits_all=True))
    try:
        method = build_method("self-dc", llm, demo_index, confidence="prob", **OPTIONS["self-dc"])
        ans = method.answer(QUESTION)
    finally:
        llm.close()
    assert ans.error is None, ans.error
    check_self_dc(ans, method.config)
    for node in _kinds(ans, "self-dc"):
        (conf,) = [c for c in node.children if c.kind == "confidence"]
        (call,) = conf.llm_calls
        logprobs = call["logprobs"][0]
        assert logprobs and conf.outputs["confidence"] == sum(math.exp(x) for x in logprobs) / len(logprobs)
    assert {p.id for p in ans.passages} <= demo_ids
