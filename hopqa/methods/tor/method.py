"""Tree of Reviews (Jiapeng Li et al. 2024): a tree search over retrieved paragraphs.

Every mechanism, with its default and the option that changes it (Li et al. 2024, Section 3):

1. **The tree** (§3.1). The root is the question Q. ``retrieve`` w_1 paragraphs for Q; each
   becomes a child node. Widths ``widths="5,3,3"`` and ``depth=3`` (§4.4); a depth deeper than
   the widths given repeats the last width.
2. **Paragraphs review** (§3.2, Tables 7/8). A node's review sees Q and every paragraph on its
   root path and judges relevance, support, then gives ``[ANSWER] ...`` or ``[QUERY] ...``
   (``hopqa.methods.tor.review``). Actions: irrelevant -> **Reject**; relevant and unsupported
   -> **Search**: retrieve w_{d+1} paragraphs for the new query, one child each; relevant and
   supported -> **Accept**: (path paragraphs, brief analysis) enters the evidence pool. A
   Search at the maximum depth stops the path.
   **Brief analysis** (§3.2: "once LLM accepts a reasoning path, it will be asked to answer the
   original question Q based on all the documents on this reasoning path"), ``analysis``:
   ``answer`` (default) — one more call per accepted node, an ``analyse`` step under the node:
   Table 10's prompt (the paper prints no prompt for this call; Table 10 is its prompt for
   answering Q from documents) over the path's paragraphs, whose response ("... The answer is
   X.") is the brief analysis; ``review`` — no call: the review's own Step-2 thought and
   ``[ANSWER]`` (under Table 8, which has no thoughts, the bare answer).
3. **Depth-first** until every path is accepted, rejected or at maximum depth.
4. **Relevance pruning** (``relevance_pruning=true``): irrelevant nodes are rejected; off, they
   are expanded like unsupported ones (Table 5, "w/o relevance pruning": "the framework
   initiates node expansion for each paragraph"). An irrelevant review gives no query under
   ``direct`` / ``cot`` (the demonstrations, written for pruning, stop after ``[IRRELEVANT]``):
   its query, unless it asks one of its own, is then Table 9's missing-paragraph completion, as
   under MPC (an ``expand`` step with a note; one call more per such node).
   **Repetitive pruning** (``repetitive_pruning=true``): after each retrieval, paragraphs whose
   ids are in the evidence pool are dropped. Always (not a switch of the paper): a paragraph
   already on the node's own path is not its child again.
5. **Effective expansion** (§3.4), ``expansion``: ``direct`` (Table 8's review, its
   ``[QUERY]`` is the query), ``cot`` (Table 7's review, with Thoughts, its ``[QUERY]``) or
   ``mpc`` (default, best in Table 4): a missing-paragraph completion (Table 9) writes the
   missing information from the model's knowledge, and that ``[INFO]`` text is the query. The
   paper does not say which review prompt MPC pairs with; MPC replaces the review's query, so
   ``review="auto"`` pairs it with Table 8 (the review "without effective expansion") and
   ``cot`` with Table 7; ``review=cot|plain`` forces one.
6. **Evidence fusion** (§3.3, Tables 10-12), ``fusion``: ``analysis``, ``paragraph`` or
   ``evidence`` (default). The reader's prompt is filled with as much evidence as fits the
   context (``hopqa.methods.tor.fusion``: ``context_tokens`` option, else the model's window,
   else the paper's 4096); its answer is read after "The answer is".
7. **Structured outputs** (``structured``, ``hopqa.methods.structured``; default ``auto``): where
   the backend constrains to a JSON schema, a review sends the same prompt followed by one JSON
   instruction line and is asked for ``{"thought": str, "relevance": "relevant"|"irrelevant",
   "support": "supported"|"unsupported", "answer": str, "query": str}`` (no ``thought`` with
   Table 8's review; ``hopqa.methods.tor.review``), an MPC completion for ``{"info": str}``. The
   node's ``review`` output is the review written back in the demonstrations' tag format (the
   JSON is its ``raw`` output), so the trace reads as in free text; a reply without a JSON object
   goes to the free-text parser (``fallback``), a JSON object without a usable relevance (or, when
   relevant, support) judgment is ``failed`` and rejected. ``off``: the paper's free text.
8. **Recall@15** (§4.2): the method's passages are the pool's paragraphs, ranked by similarity
   to the final response (the ``embedder`` component, MiniLM by default) and cut to
   ``recall_k=15`` when more were gathered (the evaluation's support recall is then Recall@15).

Words (cuts a small model's context needs; the paper states none): a paragraph is shown with
at most ``max_passage_words``=120 words (reviews, completions, acceptance calls, the reader),
and a generated query (``[QUERY]``, ``[INFO]``) is cut to 80 words
(``hopqa.methods.tor.review.MAX_QUERY_WORDS``).

The ``small-model`` preset (issue 33): ``fusion=paragraph`` and ``analysis=review`` (the paper's
own options: the reader reads the accepted paths' paragraphs without the brief analyses, which
a 1.5B model's one-paragraph paths get wrong and its reader follows; no analysis call),
``short_answer`` and ``choice``.

Not in the paper, off by default (issue 33's remedies for small models): ``short_answer``
(the reader's sentence cut to its phrase, ``hopqa.methods.shorten``), ``choice`` (a "which of A
or B" answer held to the two candidates, ``hopqa.methods.choice``), ``grounded_accept``
(an accepted path whose brief analysis's answer is not stated in its paragraphs is treated as
unsupported: searched further, or stopped at the maximum depth; noted on the node) and
``reader="short"`` (the final read's context, as ``fusion`` says, asked zero-shot for a short
answer without explanation instead of Tables 10-12's demonstrations and "The answer is xxx.";
the brief analyses keep the paper's prompt; the ``read`` step's inputs say which reader read).

Documented fallbacks (recorded in the trace):

- An unreadable review (``failed`` parse) -> **Reject** ("unparseable review" on the node).
- An empty response to the acceptance call: the review's own analysis (noted on ``analyse``).
- No sentence embedder for Recall@15 (MiniLM cannot be loaded and none was given): the lexical
  stand-in ranks, with a ``UserWarning`` (``hopqa: warning: ...`` on the command line) once
  per method object and a note on every ``rank`` step it ranked.
- A Search without a query (an empty ``[QUERY]`` under ``direct``/``cot``, or an MPC call with
  no ``[INFO]`` or an empty ``info``): the review's ``[QUERY]`` if any, else the node is rejected ("no query").
- An empty evidence pool: the reader reads the root's retrieved paragraphs with Table 10's
  paragraph-based prompt (the paper leaves this case open; under ``reader="short"``, the short one).

Concurrency: a node's review (and its MPC expansion) depends only on Q and its path, so the
reviews of sibling nodes are made concurrently, up to the backend's ``max_concurrency``
(``concurrency`` caps it; 1: sequential). The order-dependent part, repetitive pruning against
the pool, then runs depth-first in sibling order, so the tree, the calls and the answer are
the same as sequential execution (at temperature 0). The embedded model runs one call at a time.

Cost figures (Table 5) are the answer's ``metrics``: ``docs_reviewed`` (#Doc, distinct
paragraphs reviewed) and ``evidence`` (#Evidence); #API is the LLM calls of the usage (every
call: reviews, MPC completions, acceptance calls, the reader), and the evaluation reports
their ratio (``docs_per_call``). The parse rate counts review outputs (not
the MPC completions, in either mode: their status is the ``expand`` step's ``parsed`` output).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from hopqa.llm.base import LLMBase
from hopqa.methods.base import (
    MethodConfig,
    MethodError,
    Preset,
    Result,
    RetrievingMethod,
    register,
)
from hopqa.methods.polar import hold_answer
from hopqa.methods.shorten import in_reply, needs_shortening, shorten
from hopqa.methods.structured import Parsed, StructuredMode, read, use_schema
from hopqa.methods.tor.fusion import (
    Evidence,
    context_limit,
    distinct_passages,
    fuse,
    read_answer,
    top_by_similarity,
)
from hopqa.methods.tor.prompts import (
    MPC,
    MPC_FORMAT,
    REVIEW_COT,
    REVIEW_FORMAT,
    REVIEW_PLAIN,
    mpc_demos,
    review_demos,
)
from hopqa.methods.tor.review import (
    JSON_TOKENS,
    MPC_INSTRUCTION,
    MPC_SCHEMA,
    Review,
    cap_query,
    parse_review,
    read_mpc,
    review_from_json,
    review_instruction,
    review_outputs,
    review_schema,
)
from hopqa.retrieval.base import Retriever
from hopqa.text import normalize_answer, render_passages
from hopqa.trace import Step, child_step, step, submit, within
from hopqa.types import Passage

Expansion = Literal["direct", "cot", "mpc"]
Fusion = Literal["analysis", "paragraph", "evidence"]
ReviewPrompt = Literal["auto", "plain", "cot"]
Analysis = Literal["answer", "review"]
ReaderPrompt = Literal["paper", "short"]
ACCEPT, SEARCH, REJECT, STOP = "accept", "search", "reject", "max depth"
#: Where a reply ends at the latest: a small model that finishes its review (or completion, or
#: response) may go on to write the next demonstration's "Question:" itself.
STOP_SEQUENCES = ["\nQuestion:"]


def parse_widths(text: str) -> tuple[int, ...]:
    """``"5,3,3"`` -> (5, 3, 3); ``MethodError`` unless every width is a whole number >= 1."""
    try:
        widths = tuple(int(w) for w in str(text).replace(" ", "").split(",") if w)
    except ValueError:
        widths = ()
    if not widths or min(widths) < 1:
        raise MethodError(f"widths must be whole numbers >= 1 separated by commas (e.g. 5,3,3), not {text!r}")
    return widths


@dataclass
class ToRConfig(MethodConfig):
    depth: int = field(default=3, metadata={"range": (1, 10)})
    #: Children per level (comma-separated; the last repeats for deeper levels).
    widths: str = field(default="5,3,3", metadata={"items": "int", "range": (1, 100)})
    expansion: Expansion = "mpc"
    review: ReviewPrompt = "auto"
    fusion: Fusion = "evidence"
    #: The brief analysis of an accepted path: ``answer`` (§3.2: a call answers Q from the
    #: path's paragraphs) or ``review`` (the review's own thought and answer, no call).
    analysis: Analysis = "answer"
    relevance_pruning: bool = True
    repetitive_pruning: bool = True
    #: Demonstrations per prompt (hand-written, ``hopqa.methods.tor.prompts``; the paper: 3).
    shots: int = field(default=3, metadata={"range": (0, 3)})
    #: Words shown per paragraph (a small model's context is short).
    max_passage_words: int = 120
    #: Tokens of a review, an MPC completion and the reader's (and an acceptance call's) response.
    review_tokens: int = field(default=256, metadata={"range": (1, 32768)})
    mpc_tokens: int = field(default=160, metadata={"range": (1, 32768)})
    max_tokens: int = 128
    #: The reader's context limit in tokens (None: the model's window, else 4096).
    context_tokens: int | None = field(default=None, metadata={"range": (256, 1048576)})
    #: Paragraphs kept as the answer's passages, ranked by similarity to the response (Recall@15).
    recall_k: int = field(default=15, metadata={"range": (1, 1000)})
    #: Sibling reviews in flight at once (None: the backend's ``max_concurrency``).
    concurrency: int | None = field(default=None, metadata={"range": (1, 64)})
    #: Structured outputs for the reviews and MPC completions (``hopqa.methods.structured``): ``auto``
    #: where the backend can constrain to a JSON schema, ``on``, or ``off`` (the paper's free text).
    structured: StructuredMode = "auto"
    #: The final reader's answer, when its reply has no "The answer is" or runs over 8 words, is
    #: cut to the reply's shortest phrase that answers (``hopqa.methods.shorten``, one more call).
    #: Not in the paper: a remedy for small models (issue 33), off by default.
    short_answer: bool = False
    #: A path is accepted only when the answer of its brief analysis is stated in the path's own
    #: paragraphs (its words in a row, SQuAD normalisation; yes / no answers count as stated);
    #: otherwise the node is treated as unsupported: searched further, or stopped at the maximum
    #: depth. Not in the paper: a remedy for small models' reviews that accept every paragraph
    #: (issue 33), off by default.
    grounded_accept: bool = False
    #: A "which of A or B" question's answer held to its two candidates (``hopqa.methods.choice``:
    #: two dates compared in code, else the candidate the answer names, else one more call; each
    #: reading the pool's paragraphs). Not in the paper: a remedy for small models that answer with
    #: the entity the comparison goes through (issue 33); off by default, on in the small-model
    #: preset.
    choice: bool = False
    #: A yes / no question's answer held to yes or no (``hopqa.methods.polar``, reading the pool's
    #: paragraphs: for "the same country" the two values written and compared in code, else the yes
    #: or no the answer opens on, else one more call). Not in the paper: a remedy for small models
    #: that answer "Are both directors from the same country?" with a nationality, or with a yes
    #: whatever the two are (issue 33), off by default and in no preset (a gain on train yes / no
    #: questions, inside the noise on dev).
    polar: bool = False
    #: The final reader's prompt: ``paper`` (Tables 10-12: demonstrations, a few sentences ending
    #: "The answer is xxx.") or ``short`` (the same context asked zero-shot for a short answer
    #: without explanation, ``hopqa.methods.tor.prompts.SHORT_FUSIONS``). Not in the paper: a
    #: remedy for small models whose reasoning before the answer goes wrong (issue 33).
    reader: ReaderPrompt = "paper"

    def __post_init__(self) -> None:
        super().__post_init__()
        parse_widths(self.widths)

    def update(self, **overrides: Any) -> ToRConfig:
        if overrides.get("widths") is not None:
            parse_widths(overrides["widths"])  # before anything changes
        super().update(**overrides)
        return self


@dataclass
class Node:
    """A node of the tree: a paragraph at a depth, its path from the root, what its review said."""

    passage: Passage
    depth: int
    path: tuple[Passage, ...]  # root first, this node's paragraph last
    step: Step
    raw: str = ""
    parsed: Parsed[Review] | None = None
    mpc_raw: str = ""
    mpc: Parsed[str] | None = None
    action: str = ""
    query: str = ""
    #: An accepted node's brief analysis and the answer in it.
    analysis: str = ""
    answer: str = ""


#: Said (a warning, and a note on each ``rank`` step) when Recall@15 ranks with the lexical stand-in.
LEXICAL_RANKING = ("the sentence embedder (MiniLM, all-MiniLM-L6-v2) could not be loaded (install it with pip "
                   "install 'hopqa[embed]', or give an embedder): Recall@15 ranks the evidence by word overlap "
                   "with the lexical stand-in")


class EvidenceReader(RetrievingMethod):
    """What ToR and CoR share: the ``embedder`` component and the Recall@15 cut of the
    paragraphs behind the answer (``recall_passages``)."""

    components: ClassVar[frozenset[str]] = RetrievingMethod.components | {"embedder"}

    def __init__(
        self,
        llm: LLMBase,
        retriever: Retriever,
        config: MethodConfig | None = None,
        *,
        embedder: Any = None,
    ) -> None:
        super().__init__(llm, retriever, config)
        self._embedder = embedder
        self._embedder_note = ""  # why the default embedder is not the one asked for
        self._embedder_lock = threading.Lock()

    @property
    def embedder(self) -> Any:
        """The sentence embedder of the Recall@15 ranking: given, else MiniLM, loaded when first
        needed (``hopqa.embed.default_embedder``). When MiniLM cannot be loaded that gives the
        lexical stand-in: said once per method in a ``UserWarning`` and kept for the trace."""
        with self._embedder_lock:
            if self._embedder is None:
                from hopqa.embed import default_embedder

                self._embedder = default_embedder()
                if getattr(self._embedder, "name", "") == "lexical":
                    self._embedder_note = LEXICAL_RANKING
                    warnings.warn(f"{self.name}: {LEXICAL_RANKING}", UserWarning, stacklevel=2)
            return self._embedder

    def recall_passages(self, passages: list[Passage], response: str) -> list[Passage]:
        """``passages`` cut to ``recall_k`` by similarity to the final ``response`` when there are more."""
        k = self.config.recall_k
        if len(passages) <= k:
            return passages
        with step("rank", k=k, gathered=len(passages)) as s:
            embedder = self.embedder
            if self._embedder_note:
                s.note(self._embedder_note)
            top = top_by_similarity(passages, response, k, embedder)
            s.output(kept=[p.id for p in top], embedder=getattr(embedder, "name", "?"))
        return top


@register("tor")
class TreeOfReviews(EvidenceReader):
    """Tree of Reviews: review each retrieved paragraph's path; search, accept or reject; fuse the evidence."""

    Config = ToRConfig
    config: ToRConfig
    presets: ClassVar[dict[str, Preset]] = {
        "small-model": Preset(
            {"short_answer": True, "fusion": "paragraph", "analysis": "review", "choice": True},
            "the reader's reply often leaves out \"The answer is\": its first line, a "
            "sentence, became the answer; the reviewer accepts nearly every root paragraph, so the pool "
            "holds one brief analysis per paragraph, each answering the whole question from that paragraph "
            "(wrong on most multi-hop questions), and the evidence-based reader follows them: the reader "
            "reads the accepted paths' paragraphs alone (Table 10, the paper's paragraph-based fusion), and "
            "the analyses, no longer read, are the reviews' own (no call); on a \"which of A or B\" question the "
            "reader answers with the entity the comparison goes through (the director where the film is asked): "
            "its answer is held to the two candidates"),
    }

    def run(self, question: str) -> Result:
        structured = use_schema(self.llm, self.config.structured, who="Tree of Reviews' review")
        search = TreeSearch(self.llm, self.retriever, self.config, question, structured=structured)
        with step("retrieve", query=question, k=search.widths[0]) as s:
            s.mark_hop(question, label="retrieve")
            root_hits = self.retriever.search(question, search.widths[0])
            s.output(passages=[p.id for p in root_hits])
        with step(
            "tree",
            depth=self.config.depth,
            widths=list(search.widths),
            expansion=self.config.expansion,
        ) as s:
            search.expand(root_hits, (), 1)
            s.output(
                evidence=[ev.to_dict() for ev in search.pool],
                docs_reviewed=len(search.reviewed),
            )
        answer, response, shown = read_pool(self.llm, self.config, question, search.pool, root_hits)
        passages = self.recall_passages(shown, response)
        metrics = {
            "docs_reviewed": float(len(search.reviewed)),
            "evidence": float(len(search.pool)),
        }
        return Result(answer=answer, passages=passages, metrics=metrics)


@dataclass
class TreeSearch:
    """One question's search: its tree, evidence pool and the paragraphs reviewed (a method
    object answers many questions at once, so nothing of one question lives on it)."""

    llm: LLMBase
    retriever: Retriever
    config: ToRConfig
    question: str
    #: The reviews (and MPC completions) are schema-constrained (``use_schema``).
    structured: bool = False
    pool: list[Evidence] = field(default_factory=list)
    reviewed: set[str] = field(default_factory=set)

    @property
    def widths(self) -> tuple[int, ...]:
        return parse_widths(self.config.widths)

    def expand(self, hits: list[Passage], path: tuple[Passage, ...], depth: int) -> None:
        """Review the children ``hits`` of a node with root path ``path`` at ``depth``
        (concurrently), then visit them depth-first in order."""
        nodes = [
            Node(
                passage=p,
                depth=depth,
                path=path + (p,),
                step=child_step(
                    "node",
                    depth=depth,
                    passage=p.id,
                    title=p.title,
                    path=[q.id for q in path + (p,)],
                ),
            )
            for p in hits
        ]
        self.reviewed.update(p.id for p in hits)
        self._map(self._review_node, nodes)
        for node in nodes:
            with within(node.step):
                self._visit(node)

    def _visit(self, node: Node) -> None:
        """Take the node's action: accept into the pool, or search and expand its children."""
        cfg = self.config
        s = node.step
        review = node.parsed.value if node.parsed is not None else None
        s.output(**review_outputs(node.raw, review, self.structured), action=node.action, query=node.query or None)
        if node.action == ACCEPT:
            self.pool.append(Evidence(node.path, node.analysis))
            s.mark_hop(self.question, answer=node.answer, label="accept", passages=list(node.path))
            return
        if node.action != SEARCH:
            return
        width = self.widths[min(node.depth, len(self.widths) - 1)]
        with step("retrieve", query=node.query, k=width) as r:
            r.mark_hop(node.query, label="search")
            hits = self.retriever.search(node.query, width)
            on_path = {p.id for p in node.path}
            pooled = {p.id for p in distinct_passages(self.pool)} if cfg.repetitive_pruning else set()
            kept = [p for p in hits if p.id not in on_path and p.id not in pooled]
            r.output(
                passages=[p.id for p in hits],
                kept=[p.id for p in kept],
                pruned_repetitive=[p.id for p in hits if p.id in pooled and p.id not in on_path],
                pruned_on_path=[p.id for p in hits if p.id in on_path],
            )
        if kept:
            self.expand(kept, node.path, node.depth + 1)

    # -- one node's calls (pure: Q and the path only) --------------------------------------------
    def _review_node(self, node: Node) -> None:
        cfg = self.config
        thoughts = cfg.review == "cot" or (cfg.review == "auto" and cfg.expansion == "cot")
        prompt = REVIEW_FORMAT.format(
            instruction=REVIEW_COT if thoughts else REVIEW_PLAIN,
            demos=review_demos(cfg.shots, thoughts),
            question=self.question,
            documents=self._documents(node.path),
        )
        if self.structured:  # max_tokens: room for the JSON wrapper too
            gen = self.llm.generate(prompt + review_instruction(thoughts), max_tokens=cfg.review_tokens + JSON_TOKENS,
                                    stop=STOP_SEQUENCES, schema=review_schema(thoughts))
        else:
            gen = self.llm.generate(prompt, max_tokens=cfg.review_tokens, stop=STOP_SEQUENCES)
        node.parsed = read(gen.text, self.structured, review_from_json, parse_review, field="review",
                           step=node.step, schema_ignored=gen.schema_ignored)
        node.raw = gen.text
        review = node.parsed.value
        if review is None:
            node.action = REJECT
            node.step.note("unparseable review: reject (the documented action)")
            return
        if review.supported and review.relevant:
            node.analysis, node.answer = brief_analysis(self.llm, cfg, self.question, node.path, review)
            if not cfg.grounded_accept or answer_stated(node.answer, node.path):
                node.action = ACCEPT
                return
            node.step.note(f"grounded_accept: the answer {node.answer!r} is not stated in the path's paragraphs: "
                           "the node is treated as unsupported")
        if not review.relevant and cfg.relevance_pruning:
            node.action = REJECT
            return
        if node.depth >= cfg.depth:
            node.action = STOP
            return
        node.action = SEARCH
        node.query = cap_query(review.query)
        if cfg.expansion == "mpc":
            self._complete_missing(node, review)
        elif not review.relevant and not node.query:  # relevance pruning off (module docstring, 4)
            self._complete_missing(node, review, why="irrelevant, without a [QUERY] of its own, and relevance "
                                   "pruning off: every paragraph is expanded, the query is Table 9's completion")
        if not node.query:
            node.action = REJECT
            node.step.note("no query for the search: reject")

    def _complete_missing(self, node: Node, review: Review, why: str = "") -> None:
        """MPC expansion (Table 9): the missing information the model writes is the query
        (``why``: the reason for a completion under another expansion, noted)."""
        cfg = self.config
        with step("expand", strategy="mpc") as s:
            if why:
                s.note(why)
            prompt = MPC_FORMAT.format(
                instruction=MPC,
                demos=mpc_demos(cfg.shots),
                question=self.question,
                documents=self._documents(node.path),
            )
            if self.structured:
                gen = self.llm.generate(prompt + MPC_INSTRUCTION, max_tokens=cfg.mpc_tokens + JSON_TOKENS,
                                        stop=STOP_SEQUENCES, schema=MPC_SCHEMA)
            else:
                gen = self.llm.generate(prompt, max_tokens=cfg.mpc_tokens, stop=STOP_SEQUENCES)
            node.mpc_raw = gen.text
            node.mpc = read_mpc(gen.text, self.structured, gen.schema_ignored)
            if node.mpc.value:
                node.query = node.mpc.value
            else:
                s.note(
                    f"MPC gave no [INFO] ({node.mpc.how}): " + ("the review's [QUERY]" if node.query else "no query")
                )
            s.output(
                raw=gen.text,
                info=node.mpc.value,
                parsed=node.mpc.status,
                query=node.query,
            )

    def _documents(self, path: tuple[Passage, ...] | list[Passage]) -> str:
        return render_passages(list(path), max_words=self.config.max_passage_words, separator="\n")

    def _map(self, fn: Callable[[Node], None], nodes: list[Node]) -> None:
        """``fn(node)`` for every node inside its own step, concurrently where the backend
        allows (module docstring); in order when it runs one call at a time."""
        width = min(
            self.config.concurrency or self.llm.max_concurrency,
            self.llm.max_concurrency,
            len(nodes),
        )

        def one(node: Node) -> None:
            with within(node.step):
                fn(node)

        if width <= 1:
            for node in nodes:
                one(node)
            return
        with ThreadPoolExecutor(max_workers=width) as pool:
            for future in [submit(pool, one, node) for node in nodes]:
                future.result()


def _ask_reader(
    llm: LLMBase,
    cfg: ToRConfig | Any,
    fusion: str,
    question: str,
    pool: Sequence[Evidence],
    s: Step,
    left_out: str,
    reader: str = "paper",
) -> tuple[str, str, str]:
    """(response, answer, how it was read): ``question`` asked with the ``fusion`` prompt over
    as much of ``pool`` as fits the context (``hopqa.methods.tor.fusion.fuse``; ``reader``: the
    paper's prompt or the short-answer one), recorded on ``s`` (``left_out``: the note when
    pieces did not fit)."""
    fused = fuse(
        llm,
        fusion,
        question,
        pool,
        shots=cfg.shots,
        max_words=cfg.max_passage_words,
        limit=context_limit(llm, cfg.context_tokens),
        reply_tokens=cfg.max_tokens,
        reader=reader,
    )
    if fused.shown < fused.available:
        s.note(left_out, shown=fused.shown, available=fused.available)
    stop = STOP_SEQUENCES + ["\n\n"] if reader == "short" else STOP_SEQUENCES
    gen = llm.generate(fused.prompt, max_tokens=cfg.max_tokens, stop=stop)
    answer, how = read_answer(gen.text)
    s.output(
        response=gen.text,
        answer=answer,
        parsed_by=how,
        shown=fused.shown,
        available=fused.available,
        prompt_tokens=fused.tokens,
        budget=fused.budget,
    )
    return gen.text, answer, how


def brief_analysis(
    llm: LLMBase,
    cfg: ToRConfig | Any,
    question: str,
    passages: Sequence[Passage],
    review: Review,
) -> tuple[str, str]:
    """(brief analysis, its answer) of an accepted path (§3.2) with the config's ``analysis``
    (module docstring): ``answer``, an ``analyse`` step answering ``question`` from ``passages``
    with Table 10's prompt (the response, whitespace collapsed; the review's own analysis if it is
    empty); ``review``, the review's thought and answer."""
    if cfg.analysis == "review":
        return review.analysis, review.answer
    with step("analyse", paragraphs=[p.id for p in passages]) as s:
        response, answer, _ = _ask_reader(llm, cfg, "paragraph", question, [Evidence(tuple(passages), "")], s,
                                          "paragraphs left out to fit the context")
        analysis = " ".join(response.split())
        if not analysis:
            s.note("empty brief analysis: the review's own (its Step-2 thought and [ANSWER])")
            return review.analysis, review.answer
    return analysis, answer or review.answer


def answer_stated(answer: str, passages: Sequence[Passage]) -> bool:
    """Whether ``answer`` is stated in ``passages`` (titles and texts): its normalised words in a
    row (``hopqa.methods.shorten.in_reply``); ``yes`` and ``no`` always are (a comparison's answer
    is never written in a paragraph), an empty answer never is."""
    if normalize_answer(answer) in ("yes", "no"):
        return True
    return in_reply(answer, "\n".join(f"{p.title}\n{p.text}" for p in passages))


def read_pool(
    llm: LLMBase,
    cfg: ToRConfig | Any,
    question: str,
    pool: list[Evidence],
    fallback_passages: list[Passage],
) -> tuple[str, str, list[Passage]]:
    """(answer, response, paragraphs behind it): the reader over the evidence pool with the
    config's ``fusion`` (``hopqa.methods.tor.fusion``) and ``reader`` prompt; an empty pool reads
    ``fallback_passages`` with the paragraph-based prompt (module docstring)."""
    fusion, reader = cfg.fusion, getattr(cfg, "reader", "paper")
    with step("read", fusion=fusion, reader=reader) as s:
        if not pool:
            s.note("empty evidence pool: paragraph-based reading of the first retrieval's paragraphs")
            pool, fusion = [Evidence(tuple(fallback_passages), "")], "paragraph"
        response, answer, how = _ask_reader(llm, cfg, fusion, question, pool, s, "evidence left out to fit the context",
                                            reader)
        # the short reader's reply is its answer, with no marker to miss: only a long one is cut
        if getattr(cfg, "short_answer", False) and needs_shortening(answer, how if reader == "paper" else ""):
            answer = shorten(llm, question, response, answer)
    passages = distinct_passages(pool)
    answer = hold_answer(llm, question, answer, passages, choice=getattr(cfg, "choice", False),
                         polar=getattr(cfg, "polar", False), max_words=cfg.max_passage_words)
    return answer, response, passages
