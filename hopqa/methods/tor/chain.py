"""CoR — chain of reviews, Tree of Reviews' chain baseline (Jiapeng Li et al. 2024, §4.4, Table 13).

"The same prompt as ToR but providing only a single reasoning path. The model chooses an action
in each iteration and generates new queries based on all retrieved paragraphs."

Each turn retrieves ``k`` paragraphs (the question first, then the review's new query), adds
the new ones to the chain, and reviews *all* the chain's paragraphs with Table 13's prompt
(``hopqa.methods.tor.review`` reads it). Supported -> the chain is accepted: (its paragraphs,
the brief analysis) is the one piece of evidence, and the reader (``fusion``, evidence-based by
default, as ToR) answers from it. The brief analysis is ToR's (``analysis``,
``hopqa.methods.tor.method.brief_analysis``): by default one more call answers Q from the
chain's paragraphs (Table 10's prompt; an ``analyse`` step inside the accepting ``review``);
``analysis=review``: the review's own thought and answer. Unsupported -> the ``[QUERY]`` is
the next turn's query. A chain has no sibling to turn to, so an irrelevant review that still
gives a query goes on with it. Defaults: ``k=5`` paragraphs per query and ``max_turns=3``
(§4.3: top-5 per query, at most 3 turns for the multi-turn baselines).

Documented fallbacks: the chain stops (recorded in the trace) on an unreadable review, a
review without a query, a query that brings no new paragraph, or the turn limit; the reader then
reads all the chain's paragraphs with Table 10's paragraph-based prompt. The chain's paragraphs
fill the review prompt within ``total_passage_words`` (a small model's context is short).
Recall@15 as ToR (``recall_k``). Structured outputs (``structured``) as ToR's review: the same
prompt and one JSON instruction line, ``{"thought": str, "relevance": ..., "support": ...,
"answer": str, "query": str}`` (``hopqa.methods.tor.review``); the step's ``review`` output is
the review written back in the tag format, its ``raw`` output the JSON as it came.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hopqa.methods.base import MethodConfig, Result, register
from hopqa.methods.structured import StructuredMode, read, use_schema
from hopqa.methods.tor.fusion import Evidence
from hopqa.methods.tor.method import STOP_SEQUENCES, Analysis, EvidenceReader, Fusion, brief_analysis, read_pool
from hopqa.methods.tor.prompts import COR, REVIEW_FORMAT, review_demos
from hopqa.methods.tor.review import (
    JSON_TOKENS,
    cap_query,
    parse_review,
    review_from_json,
    review_instruction,
    review_outputs,
    review_schema,
)
from hopqa.text import render_passages
from hopqa.trace import step
from hopqa.types import Passage


@dataclass
class CoRConfig(MethodConfig):
    k: int = 5
    max_turns: int = field(default=3, metadata={"range": (1, 100)})
    fusion: Fusion = "evidence"
    #: The brief analysis of the accepted chain (as ToR's): ``answer`` (§3.2, one call) or ``review``.
    analysis: Analysis = "answer"
    shots: int = field(default=3, metadata={"range": (0, 3)})
    max_passage_words: int = 120
    #: Words of all the chain's paragraphs in a review prompt.
    total_passage_words: int = 1200
    review_tokens: int = field(default=256, metadata={"range": (1, 32768)})
    max_tokens: int = 128
    context_tokens: int | None = field(default=None, metadata={"range": (256, 1048576)})
    recall_k: int = field(default=15, metadata={"range": (1, 1000)})
    #: Structured outputs for the reviews (``hopqa.methods.structured``): ``auto`` where the backend
    #: can constrain to a JSON schema, ``on``, or ``off`` (the paper's free text).
    structured: StructuredMode = "auto"


@register("cor")
class ChainOfReviews(EvidenceReader):
    """Chain of reviews (ToR's baseline): one path; review all paragraphs, answer or search again."""

    Config = CoRConfig
    config: CoRConfig

    def run(self, question: str) -> Result:
        cfg = self.config
        structured = use_schema(self.llm, cfg.structured, who="Chain of Reviews' review")
        chain: list[Passage] = []
        pool: list[Evidence] = []
        query = question
        for turn in range(1, cfg.max_turns + 1):
            with step("retrieve", query=query, turn=turn, k=cfg.k) as s:
                s.mark_hop(query, label="retrieve" if turn == 1 else "search")
                hits = self.retriever.search(query, cfg.k)
                have = {p.id for p in chain}
                new = [p for p in hits if p.id not in have]
                chain.extend(new)
                s.output(passages=[p.id for p in hits], new=[p.id for p in new])
            if not new:
                s.note("the query brought no new paragraph: the chain stops")
                break
            with step("review", turn=turn, paragraphs=len(chain)) as s:
                documents = render_passages(
                    chain,
                    max_words=cfg.max_passage_words,
                    total_words=cfg.total_passage_words,
                    separator="\n",
                )
                prompt = REVIEW_FORMAT.format(
                    instruction=COR,
                    demos=review_demos(cfg.shots, True),
                    question=question,
                    documents=documents,
                )
                if structured:  # max_tokens: room for the JSON wrapper too
                    gen = self.llm.generate(prompt + review_instruction(True),
                                            max_tokens=cfg.review_tokens + JSON_TOKENS, stop=STOP_SEQUENCES,
                                            schema=review_schema(True))
                else:
                    gen = self.llm.generate(prompt, max_tokens=cfg.review_tokens, stop=STOP_SEQUENCES)
                parsed = read(gen.text, structured, review_from_json, parse_review, field="review", step=s,
                              schema_ignored=gen.schema_ignored)
                review = parsed.value
                s.output(**review_outputs(gen.text, review, structured))
                if review is None:
                    s.output(action="stop")
                    s.note("unparseable review: the chain stops")
                    break
                if review.relevant and review.supported:
                    s.output(action="accept")
                    analysis, answer = brief_analysis(self.llm, cfg, question, chain, review)
                    pool.append(Evidence(tuple(chain), analysis))
                    s.mark_hop(question, answer=answer, label="accept", passages=list(chain))
                    break
                query = cap_query(review.query)
                s.output(action="search" if query else "stop", query=query or None)
                if not query:
                    s.note("no query in the review: the chain stops")
                    break
        answer, response, shown = read_pool(self.llm, cfg, question, pool, chain)
        passages = self.recall_passages(shown, response)
        return Result(
            answer=answer,
            passages=passages,
            metrics={"docs_reviewed": float(len(chain)), "evidence": float(len(pool))},
        )
