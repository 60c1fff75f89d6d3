"""Rerankers: a second, costlier look at the passages a first-stage retriever found.

A ``Reranker`` scores passages for a query (``score(query, passages) -> list[float]``, one
score per passage, in their order, higher is better). ``RerankingRetriever`` puts one behind
the ``Retriever`` protocol: it retrieves ``max(depth, k)`` candidates (``depth`` default 20)
from its base retriever, scores them all, sorts them by that score (a stable sort: ties keep
the base retriever's order) and returns the top ``k`` as new passages whose ``score`` is the
reranker's. No candidates: no reranker call.

Four rerankers share the interface:

- ``CrossEncoderReranker`` — a sentence-transformers ``CrossEncoder`` (query and passage read
  together; one logit per pair), loaded offline from a local path or a name already in the
  Hugging Face cache. No cross-encoder reranking model ships its weights on PyPI, so none is
  installable on this offline machine: the code path is for users who have one (tests run it
  on MiniLM with an untrained head, whose scores mean nothing).
- ``BiEncoderReranker`` — the cosine similarity of sentence embeddings (``hopqa.embed``) of the
  query and of each passage: cheap, the embedder dense retrieval already loads. Behind dense
  retrieval with the same embedder it ranks exactly as the retriever did, so it can never
  change which passages make a top-k: a method that reranks to let new passages in (LeapQuery)
  needs a reranker that differs from its retriever.
- ``HybridReranker`` — reciprocal rank fusion (as ``hopqa.retrieval.hybrid``) of two rankings of
  the candidates: BM25 computed over the candidate passages themselves (``pool.SmallBM25``,
  bm25s's scoring without an index: the idf is the candidates' own) and the bi-encoder's
  cosine. A passage scores ``1 / (RRF_K + rank_bm25) + 1 / (RRF_K + rank_cosine)`` with
  ``RRF_K`` = 60; a passage sharing no word with the query gets no BM25 term, and passages with
  equal scores share the better rank. Ranks rather than a min-max normalised sum of the
  scores, because BM25 scores and cosines are on different scales and a min-max sum over a
  handful of candidates swings with the weakest one. The lexical half is what the dense
  retriever cannot see (exact names, dates), so it can reorder dense retrieval's candidates.
- ``LLMReranker`` — an LLM as relevance judge. Each passage gets one prompt
  (``RELEVANCE_PROMPT``: the question, the passage as ``Title | text`` with its text cut to
  ``max_passage_words`` words, and "How useful is this passage for answering the question?
  Rate from 0 (useless) to 10 (answers it).", then "Reply with the number only." or, when the
  call is schema-constrained, "Reply with one JSON object: {"score": N}, N that number."; the
  form shows no number, because a small model copies the one it is shown: Qwen2.5-1.5B gave 7
  to nearly every passage when the example read ``{"score": 7}``); all
  passages of a query go in one batched ``llm.map`` call at temperature 0. A reply is read
  forgivingly: a JSON object's ``score`` (an integer, a float or a numeric string), else the
  first number in the text ("Score: 8/10" is 8, "8." is 8), clamped to [0, 10]. A reply with
  no number scores ``UNPARSED_SCORE`` (-1.0), below every parsed score, so those passages go
  last, in their base order; the trace step open at the time gets a note ``rerank`` with the
  reranker's name and how many replies were unparsed. With ``scoring="expected"`` (spec
  ``llm-expected``) the score is instead the rating expected under the model's probabilities of
  replying each of 0-10 to the free-text prompt (``LLMReranker.expected_score``): each rating
  scored as the whole reply through the end of the model's turn (``LLMBase.chat_reply``), the
  eleven after one evaluation of the prompt (``LLMBase.loglikelihoods``), renormalised; an LLM
  that cannot score a given reply (no ``loglikelihood``) is refused when the reranker is made.

Passages are shown to the cross- and bi-encoder as ``title. text`` (the text alone without a
title), as dense retrieval embeds them; ``make_reranker(spec)`` builds one from a spec.

Specs (``check_spec``, ``resolve_spec``): ``bi-encoder``, ``hybrid``, ``llm``, ``llm-expected``,
``auto``, or a cross-encoder as a local path (absolute, ``./``, ``~/``, or an existing folder) or
a Hugging Face name ``OWNER/MODEL``; anything else is refused with a ``ValueError`` naming these before
any model is loaded. ``auto`` is a sentence-transformers cross-encoder when one of
``CROSS_ENCODERS`` (well-known rerankers, cheapest on a CPU first) is in the local Hugging Face
cache with its weights (``cached_cross_encoder``: nothing is downloaded), else ``llm``. No
cross-encoder weights install offline on the machines hopqa is developed on, so there ``auto``
is the LLM judge.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hopqa import jsonl
from hopqa.llm.base import LOGLIKELIHOOD, STRUCTURED, GenerationRequest, LLMBase
from hopqa.retrieval.base import Retriever, RetrieverBase
from hopqa.retrieval.bm25 import tokenize
from hopqa.retrieval.dense import passage_text
from hopqa.retrieval.hybrid import RRF_K
from hopqa.retrieval.pool import SmallBM25
from hopqa.text import render_passage
from hopqa.trace import current_step
from hopqa.types import Passage

#: Candidates a ``RerankingRetriever`` takes from its base retriever (at least ``k``).
DEPTH = 20
#: Pairs a cross-encoder scores per forward pass.
CROSS_ENCODER_BATCH = 32

#: The LLM judge's prompt; ``{reply_format}`` is ``FREE_TEXT_REPLY`` or ``JSON_REPLY``.
RELEVANCE_PROMPT = (
    "Question: {question}\n\nPassage: {passage}\n\n"
    "How useful is this passage for answering the question? Rate from 0 (useless) to 10 (answers it). "
    "{reply_format}"
)
FREE_TEXT_REPLY = "Reply with the number only."
#: No number in the form: with ``{"score": 7}`` here Qwen2.5-1.5B scored nearly every passage 7.
JSON_REPLY = 'Reply with one JSON object: {"score": N}, N that number.'
#: The JSON schema of a structured reply: an integer score from 0 to 10.
SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": list(range(11))}},
    "required": ["score"],
    "additionalProperties": False,
}
MIN_SCORE, MAX_SCORE = 0.0, 10.0
#: The score of a passage whose judgement could not be read: below every parsed score.
UNPARSED_SCORE = -1.0
STRUCTURED_MODES = ("auto", "on", "off")
#: The ratings the expected-score judge weighs (``LLMReranker`` with ``scoring="expected"``).
RATINGS = tuple(range(11))
#: How the LLM judge turns its judgement into a score (``LLMReranker``).
SCORINGS = ("reply", "expected")
#: The specs that name no model (``make_reranker``).
KEYWORDS = ("auto", "bi-encoder", "hybrid", "llm", "llm-expected")
#: The specs whose reranker is the LLM judge (it needs the loaded model).
LLM_JUDGES = ("llm", "llm-expected")
#: The cross-encoders ``auto`` looks for in the local Hugging Face cache, the first found wins:
#: well-known sentence-transformers rerankers, the cheapest on a CPU first.
CROSS_ENCODERS = (
    "cross-encoder/ms-marco-MiniLM-L-6-v2",
    "cross-encoder/ms-marco-MiniLM-L-12-v2",
    "mixedbread-ai/mxbai-rerank-xsmall-v1",
    "BAAI/bge-reranker-base",
)
#: The weight files one of which a cached cross-encoder must have (not only its config).
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@runtime_checkable
class Reranker(Protocol):
    """Scores passages for a query: one score per passage, same order, higher is better."""

    name: str

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]: ...


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` giving one relevance logit per (query, passage)."""

    def __init__(self, model_name: str, model: Any | None = None, device: str = "cpu",
                 batch_size: int = CROSS_ENCODER_BATCH) -> None:
        """``model_name``: a local path or a model name already in the Hugging Face cache
        (nothing is downloaded); ``model``: an already built cross-encoder (its name is then
        ``model_name``, for the record only)."""
        if model is None:
            try:
                from sentence_transformers import CrossEncoder
            except ImportError as exc:
                raise ImportError("cross-encoder reranking needs sentence-transformers: pip install 'hopqa[embed]' "
                                  "(CPU torch first: pip install torch==2.13.0)") from exc
            try:
                model = CrossEncoder(model_name, device=device, local_files_only=True)
            except Exception as exc:
                raise ValueError(f"{model_name!r} is not a cross-encoder model on this machine (no download at "
                                 f"run time): give a local path or a model already in the Hugging Face cache "
                                 f"({type(exc).__name__}: {exc})") from exc
        self.model = model
        self.model_name = model_name
        self.batch_size = batch_size
        self.name = f"cross-encoder:{model_name}"

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        if not passages:
            return []
        pairs = [(query, passage_text(p)) for p in passages]
        raw = np.asarray(self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False),
                         dtype=np.float64)
        if raw.ndim == 2 and raw.shape[1] == 1:
            raw = raw[:, 0]
        if raw.shape != (len(passages),):
            raise ValueError(f"the cross-encoder {self.model_name!r} gives scores of shape {raw.shape} for "
                             f"{len(passages)} pairs, not one relevance score per pair (a classifier with "
                             f"several labels is not a reranker)")
        return [float(s) for s in raw]


class BiEncoderReranker:
    """Cosine similarity of the query's and each passage's sentence embedding."""

    def __init__(self, embedder: Any) -> None:
        """``embedder``: anything with ``name`` and ``encode(texts)`` returning L2-normalised
        vectors (``hopqa.embed.MiniLMEmbedder``), so the dot product is the cosine."""
        self.embedder = embedder
        self.name = f"bi-encoder:{embedder.name}"

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        if not passages:
            return []
        vectors = np.asarray(self.embedder.encode([query, *(passage_text(p) for p in passages)]), dtype=np.float32)
        return [float(s) for s in vectors[1:] @ vectors[0]]


class HybridReranker:
    """Reciprocal rank fusion of BM25 over the candidates and the bi-encoder's cosine (module
    docstring)."""

    def __init__(self, embedder: Any, rrf_k: int = RRF_K) -> None:
        """``embedder``: as ``BiEncoderReranker``'s."""
        self.bi_encoder = BiEncoderReranker(embedder)
        self.rrf_k = rrf_k
        self.name = f"hybrid(bm25+{self.bi_encoder.name})"

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        if not passages:
            return []
        cosines = self.bi_encoder.score(query, passages)
        fused = [1.0 / (self.rrf_k + r) for r in _ranks(cosines)]
        lexical = _bm25_scores(query, passages)
        for i, (s, r) in enumerate(zip(lexical, _ranks(lexical))):
            if s > 0:
                fused[i] += 1.0 / (self.rrf_k + r)
        return fused


def _bm25_scores(query: str, passages: Sequence[Passage]) -> list[float]:
    """BM25 of each passage for ``query``, over these passages alone (0 when nothing matches)."""
    try:
        bm25 = SmallBM25(passages)
    except ValueError:  # no passage has an indexable word
        return [0.0] * len(passages)
    tokens = [t for t in tokenize(query) if t in bm25.vocab]
    return [float(s) for s in bm25.scores(tokens)] if tokens else [0.0] * len(passages)


def _ranks(scores: Sequence[float]) -> list[int]:
    """The 1-based rank of each score, higher first; equal scores share the better rank."""
    return [1 + sum(other > s for other in scores) for s in scores]


def parse_relevance(reply: str) -> float | None:
    """The 0-10 score in an LLM judge's reply (module docstring), None when it has no number."""
    text = reply.strip()
    value: Any = None
    start = text.find("{")
    if start >= 0:
        try:
            obj, _ = jsonl.raw_decode(text, start)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            value = obj.get("score")
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        match = _NUMBER.search(value)
        number = float(match.group()) if match else None
    if number is None or not math.isfinite(number):
        match = _NUMBER.search(text)
        number = float(match.group()) if match else None
    if number is None or not math.isfinite(number):
        return None
    return min(MAX_SCORE, max(MIN_SCORE, number))


class LLMReranker:
    """An LLM judging each passage's usefulness for the question from 0 to 10 (module docstring)."""

    def __init__(self, llm: LLMBase, structured: str = "auto", max_tokens: int | None = None,
                 max_passage_words: int | None = 200, scoring: str = "reply") -> None:
        """``structured``: ``auto`` constrains the reply to ``SCORE_SCHEMA`` when the LLM
        supports structured output, ``on`` always (an LLM that cannot raises), ``off`` never.
        ``max_tokens``: default 8 for a free-text reply, 16 for JSON. ``max_passage_words``:
        the passage's text is cut to this many words in the prompt (None: whole).
        ``scoring``: ``reply``, the number the model writes; ``expected``, the rating expected
        under the model's own probabilities of replying each of 0-10 (``expected_score``; the
        LLM must score continuations, ``loglikelihood``: ``ValueError`` otherwise; the prompt
        asks for the number only, ``structured`` does not apply)."""
        if structured not in STRUCTURED_MODES:
            raise ValueError(f"structured must be one of {', '.join(STRUCTURED_MODES)}, not {structured!r}")
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, not {scoring!r}")
        if scoring == "expected" and not llm.supports(LOGLIKELIHOOD):
            hint = llm.capability_hint(LOGLIKELIHOOD)
            raise ValueError(f"the llm-expected reranker weighs the model's probability of each rating, and "
                             f"{llm.name} cannot score a given reply (no loglikelihood){': ' + hint if hint else ''}: "
                             "use the embedded model, an OpenAI-compatible completions server with "
                             "?loglikelihood=echo, or the llm reranker")
        self.llm = llm
        self.scoring = scoring
        self.structured = structured
        self.use_schema = scoring == "reply" and (structured == "on" or
                                                  (structured == "auto" and llm.supports(STRUCTURED)))
        self.max_tokens = max_tokens if max_tokens is not None else (16 if self.use_schema else 8)
        self.max_passage_words = max_passage_words
        self.name = f"llm:{llm.name}" if scoring == "reply" else f"llm-expected:{llm.name}"

    def prompt(self, query: str, passage: Passage) -> str:
        return RELEVANCE_PROMPT.format(
            question=query,
            passage=render_passage(passage, max_words=self.max_passage_words),
            reply_format=JSON_REPLY if self.use_schema else FREE_TEXT_REPLY,
        )

    def request(self, query: str, passage: Passage) -> GenerationRequest:
        kw: dict[str, Any] = {"max_tokens": self.max_tokens, "temperature": 0.0}
        if self.use_schema:
            kw["schema"] = SCORE_SCHEMA
        return GenerationRequest.make(self.prompt(query, passage), **kw)

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        if not passages:
            return []
        if self.scoring == "expected":
            return [self.expected_score(query, p) for p in passages]
        generations = self.llm.map([self.request(query, p) for p in passages])
        parsed = [parse_relevance(g.text) for g in generations]
        unparsed = sum(s is None for s in parsed)
        if unparsed:
            step = current_step()
            if step is not None:
                step.note("rerank", reranker=self.name, unparsed=unparsed)
        return [UNPARSED_SCORE if s is None else s for s in parsed]

    def expected_score(self, query: str, passage: Passage) -> float:
        """The rating expected under the model's probabilities of replying each of ``RATINGS``
        to the judge's prompt (the free-text reply form): every rating scored as the whole reply,
        through the end of the model's turn (``LLMBase.chat_reply``, so that "1" is not "10"
        begun), in one ``loglikelihoods`` call, the probabilities renormalised over the ratings.
        A number between 0 and 10 that a passage shares with another only when the model's
        probabilities tie too."""
        prompt = self.prompt(query, passage)
        replies = [self.llm.chat_reply(prompt, str(r)) for r in RATINGS]
        context = replies[0][0]
        if any(before != context for before, _ in replies):  # a template that renders the prompt per reply
            totals = [ll.total for ll in self.llm.map_loglikelihood(replies)]
        else:
            totals = [ll.total for ll in self.llm.loglikelihoods(context, [after for _, after in replies])]
        return expected_rating(totals)


def expected_rating(totals: Sequence[float], ratings: Sequence[int] = RATINGS) -> float:
    """Σ r·p(r) over ``ratings`` with p the softmax of their log-likelihoods ``totals``."""
    values = np.asarray(totals, dtype=np.float64)
    weights = np.exp(values - values.max())
    return float(np.dot(weights / weights.sum(), np.asarray(ratings, dtype=np.float64)))


class RerankingRetriever(RetrieverBase):
    """A base retriever's top ``max(depth, k)`` candidates, reranked, cut to ``k``."""

    def __init__(self, base: Retriever, reranker: Reranker, depth: int = DEPTH) -> None:
        if depth < 1:
            raise ValueError(f"the reranking depth must be at least 1, not {depth}")
        self.base = base
        self.reranker = reranker
        self.depth = depth
        self.name = f"{base.name}+rerank({reranker.name})"

    def search(self, query: str, k: int = 5) -> list[Passage]:
        """The top ``k`` of the base retriever's candidates by the reranker's score."""
        return self._rerank(query, self.base.search(query, max(self.depth, k)), k)

    def batch_search(self, queries: list[str], k: int = 5) -> list[list[Passage]]:
        """``search`` for each query, the candidates from one ``base.batch_search``."""
        candidates = self.base.batch_search(queries, max(self.depth, k))
        return [self._rerank(q, c, k) for q, c in zip(queries, candidates)]

    def _rerank(self, query: str, candidates: Sequence[Passage], k: int) -> list[Passage]:
        return rerank(self.reranker, query, candidates, k)


def rerank(reranker: Reranker, query: str, candidates: Sequence[Passage], k: int) -> list[Passage]:
    """The ``k`` candidates ``reranker`` scores highest for ``query`` (a stable sort: ties keep
    the candidates' order), as new passages whose ``score`` is the reranker's; none for no
    candidates (no reranker call)."""
    if not candidates or k <= 0:
        return []
    scores = reranker.score(query, candidates)
    if len(scores) != len(candidates):
        raise ValueError(f"the reranker {getattr(reranker, 'name', type(reranker).__name__)!r} gave {len(scores)} "
                         f"scores for {len(candidates)} passages")
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])
    return [replace(candidates[i], score=float(scores[i])) for i in order[:k]]


def check_spec(spec: str) -> str:
    """``spec`` (stripped) when ``make_reranker`` can try it: a keyword (``KEYWORDS``) or a
    cross-encoder as a local path or a Hugging Face name ``OWNER/MODEL``; ``ValueError``
    naming the accepted values otherwise. Checks the form only: loads nothing (whether a
    cross-encoder is really there is found when it is loaded)."""
    text = spec.strip() if isinstance(spec, str) else ""
    if text in KEYWORDS:
        return text
    if text.startswith(("/", "./", "../", "~")) or _HUB_NAME.match(text) or (text and Path(text).exists()):
        return text
    close = difflib.get_close_matches(text.lower(), KEYWORDS, n=1, cutoff=0.75)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    what = "empty reranker spec" if not text else f"unknown reranker {text!r}{guess}"
    raise ValueError(f"{what}: use {', '.join(KEYWORDS)}, or a cross-encoder as a local path or a Hugging Face "
                     "name OWNER/MODEL already in the cache")


def cached_cross_encoder(names: Sequence[str] = CROSS_ENCODERS, cache_dir: str | Path | None = None) -> str | None:
    """The first of ``names`` whose config and weights are in the local Hugging Face cache
    (``cache_dir``, default huggingface_hub's own, which honours ``HF_HUB_CACHE`` / ``HF_HOME``),
    None when none is or huggingface_hub is not installed. Reads the cache's layout as
    huggingface_hub writes it (``models--OWNER--NAME/refs/main`` names the snapshot holding the
    files) and nothing else: no model is loaded, nothing downloaded, and only the light
    ``huggingface_hub.constants`` is imported (the whole package takes ~0.5 s)."""
    if cache_dir is None:
        try:
            from huggingface_hub import constants
        except ImportError:
            return None
        cache_dir = constants.HF_HUB_CACHE
    root = Path(cache_dir)
    for name in names:
        folder = root / ("models--" + name.replace("/", "--"))
        try:
            snapshot = folder / "snapshots" / (folder / "refs" / "main").read_text().strip()
        except OSError:
            continue
        if (snapshot / "config.json").is_file() and any((snapshot / w).is_file() for w in WEIGHT_FILES):
            return name
    return None


def resolve_spec(spec: str) -> str:
    """``spec`` checked (``check_spec``), with ``auto`` resolved: the first cached cross-encoder
    of ``CROSS_ENCODERS``, else ``llm``."""
    text = check_spec(spec)
    if text != "auto":
        return text
    return cached_cross_encoder() or "llm"


def make_reranker(spec: str, *, llm: LLMBase | None = None, embedder: Any | None = None,
                  structured: str = "auto") -> Reranker:
    """The reranker ``spec`` names (``resolve_spec`` first: an unknown spec is a ``ValueError``
    before anything loads):

    - ``bi-encoder`` — ``BiEncoderReranker`` with ``embedder`` (default
      ``hopqa.embed.default_embedder()``); the lexical stand-in is refused (``ValueError``):
      it needs sentence-transformers;
    - ``hybrid`` — ``HybridReranker`` with that embedder (the same condition);
    - ``llm`` — ``LLMReranker`` judging with ``llm`` (``ValueError`` when none is given), its
      replies ``structured`` as ``LLMReranker`` takes it;
    - ``llm-expected`` — ``LLMReranker`` with ``scoring="expected"`` (``ValueError`` without an
      LLM, or with one that cannot score a reply);
    - ``auto`` — a cached cross-encoder of ``CROSS_ENCODERS``, else ``llm``;
    - a path or ``OWNER/MODEL`` — ``CrossEncoderReranker`` of that model (a local path or a
      name already in the Hugging Face cache; ``ValueError`` / ``ImportError`` when it cannot
      load).
    """
    name = resolve_spec(spec)
    if name in ("bi-encoder", "hybrid"):
        if embedder is None:
            from hopqa.embed import default_embedder

            embedder = default_embedder()
        if embedder.name == "lexical":
            raise ValueError(f"the {name} reranker needs a sentence embedder, and only the lexical stand-in "
                             "is available: install sentence-transformers (pip install 'hopqa[embed]')")
        return BiEncoderReranker(embedder) if name == "bi-encoder" else HybridReranker(embedder)
    if name == "llm":
        if llm is None:
            auto = (f"auto: no cross-encoder in the Hugging Face cache (looked for {', '.join(CROSS_ENCODERS)}), "
                    "so the llm reranker, which " if spec.strip() == "auto" else "the llm reranker ")
            raise ValueError(f"{auto}needs an LLM to judge relevance (give llm=...)")
        return LLMReranker(llm, structured=structured)
    if name == "llm-expected":
        if llm is None:
            raise ValueError("the llm-expected reranker needs an LLM to judge relevance (give llm=...)")
        return LLMReranker(llm, structured=structured, scoring="expected")
    return CrossEncoderReranker(name)
