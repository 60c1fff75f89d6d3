"""Per-question bookkeeping: traced LLM and retriever wrappers and context-aware pools.

Methods hold a ``TracedLLM`` and a ``TracedRetriever``. Every call through them is recorded on
the trace step that is open in the calling context and added to the ``Usage`` of the question
being answered (both found through context variables set by ``Method.answer``). Work sent to a
thread pool through ``hopqa.trace.submit`` keeps that context, so concurrent sub-steps (samples, sibling
sub-questions) land in the right place of the right trace.

Cancellation (the signal itself lives in ``hopqa.cancel``, re-exported here): inside
``with cancellable(event):`` (a ``threading.Event``; the evaluation runner sets it on Ctrl-C or
when it must stop, the HTTP service when a job times out or is cancelled) every LLM and
retrieval call through these wrappers first checks the event and raises ``Cancelled`` once it
is set, in every thread the work was handed to; nothing new starts, and a backend request in
flight is aborted by the backend (the OpenAI-compatible one shuts its connection, the embedded
one stops between tokens). ``Method.answer`` returns such an answer with ``cancelled=True`` (its
trace says where it stopped), and the runner records none of them.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

# the cancellation signal, re-exported (``from hopqa.runtime import Cancelled, cancellable`` keeps working)
from hopqa.cancel import Cancelled, cancellable, check_cancelled, current_cancel_event  # noqa: F401
from hopqa.llm.base import (
    Generation,
    GenerationRequest,
    LLMBase,
    LLMWrapper,
    LogLikelihood,
)
from hopqa.retrieval.base import Retriever, RetrieverBase
from hopqa.trace import current_step
from hopqa.types import Passage, Usage

_usage: contextvars.ContextVar[Usage | None] = contextvars.ContextVar("hopqa_usage", default=None)

#: How much of a prompt / output the trace keeps (characters). Full text is kept by default.
MAX_TRACE_CHARS = 20000


@contextmanager
def accounting(usage: Usage) -> Iterator[Usage]:
    """Make ``usage`` the current question's usage for calls made inside the block."""
    token = _usage.set(usage)
    try:
        yield usage
    finally:
        _usage.reset(token)


def current_usage() -> Usage | None:
    return _usage.get()


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TRACE_CHARS else text[:MAX_TRACE_CHARS] + f"... [{len(text)} chars]"


class TracedLLM(LLMWrapper):
    """Records every call (prompt, outputs, tokens, cached, seconds) and counts its usage:
    in the current question's ``Usage`` and in ``total`` (every call through this object)."""

    def __init__(self, inner: LLMBase) -> None:
        super().__init__(inner)
        self.total = Usage()

    def complete(self, request: GenerationRequest) -> Generation:
        check_cancelled()
        t0 = time.perf_counter()
        try:
            gen = self.inner.complete(request)
        except Exception as exc:
            self._record("generate", {"prompt": _clip(request.text())}, error=f"{type(exc).__name__}: {exc}")
            raise
        record = {
            "prompt": _clip(request.text()),
            "params": {
                "n": request.n,
                "temperature": request.temperature,
                "top_p": request.top_p,
                "max_tokens": request.max_tokens,
                "stop": list(request.stop),
                "logprobs": request.logprobs,
                "seed": request.seed,
                **({"schema": request.schema_dict()} if request.schema is not None else {}),
            },
            "outputs": [_clip(t) for t in gen.texts],
            "prompt_tokens": gen.prompt_tokens,
            "completion_tokens": gen.completion_tokens,
            "cached": gen.cached,
            "seconds": round(time.perf_counter() - t0, 4),
        }
        if gen.prompt_tokens_evaluated is not None:  # the rest came from the model's KV / prefix cache
            record["prompt_tokens_evaluated"] = 0 if gen.cached else gen.prompt_tokens_evaluated
        if gen.prefix_cache and not gen.cached:
            record["prefix_cache"] = gen.prefix_cache
        if request.logprobs:
            record["logprobs"] = [c.logprobs for c in gen.completions]
        if gen.schema_ignored:
            record["schema_ignored"] = True
        self._record("generate", record,
                     usage=(gen.prompt_tokens, gen.completion_tokens, gen.cached, gen.prompt_tokens_evaluated))
        return gen

    def loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        check_cancelled()
        t0 = time.perf_counter()
        try:
            ll = self.inner.loglikelihood(context, continuation)
        except Exception as exc:
            self._record("loglikelihood", {"context": _clip(context), "continuation": continuation},
                         error=f"{type(exc).__name__}: {exc}")
            raise
        self._record(
            "loglikelihood",
            {
                "context": _clip(context),
                "continuation": continuation,
                "total": ll.total,
                "token_logprobs": ll.token_logprobs,
                "prompt_tokens": ll.prompt_tokens,
                **({"prompt_tokens_evaluated": 0 if ll.cached else ll.prompt_tokens_evaluated}
                   if ll.prompt_tokens_evaluated is not None else {}),
                **({"prefix_cache": ll.prefix_cache} if ll.prefix_cache and not ll.cached else {}),
                "cached": ll.cached,
                "seconds": round(time.perf_counter() - t0, 4),
            },
            usage=(ll.prompt_tokens, 0, ll.cached, ll.prompt_tokens_evaluated),
        )
        return ll

    def loglikelihoods(self, context: str, continuations: Sequence[str]) -> list[LogLikelihood]:
        """Scored together (``LLMBase.loglikelihoods``), recorded as one call: the context, each
        continuation with its total, the tokens of the continuations not taken from the cache."""
        check_cancelled()
        t0 = time.perf_counter()
        try:
            lls = self.inner.loglikelihoods(context, continuations)
        except Exception as exc:
            self._record("loglikelihood", {"context": _clip(context), "continuations": list(continuations)},
                         error=f"{type(exc).__name__}: {exc}")
            raise
        fresh = [ll for ll in lls if not ll.cached]
        prompt_tokens = sum(ll.prompt_tokens for ll in fresh)
        evaluated = (None if any(ll.prompt_tokens_evaluated is None for ll in fresh)
                     else sum(ll.prompt_tokens_evaluated or 0 for ll in fresh))
        prefix = next((ll.prefix_cache for ll in fresh if ll.prefix_cache), None)
        self._record(
            "loglikelihood",
            {
                "context": _clip(context),
                "continuations": list(continuations),
                "totals": [ll.total for ll in lls],
                "prompt_tokens": prompt_tokens,
                **({"prompt_tokens_evaluated": evaluated} if evaluated is not None else {}),
                **({"prefix_cache": prefix} if prefix else {}),
                "cached": not fresh,
                "seconds": round(time.perf_counter() - t0, 4),
            },
            usage=(prompt_tokens, 0, not fresh, evaluated),
        )
        return lls

    def _record(self, kind: str, record: dict[str, Any], usage: tuple[int, int, bool, int | None] | None = None,
                error: str | None = None) -> None:
        record = {"type": kind, "backend": self.name, **record}
        if error:
            record["error"] = error
        step = current_step()
        if step is not None:
            step.add_llm_call(record)
        for u in (_usage.get(), self.total):
            if u is not None:
                u.record_llm(*(usage if usage is not None else (0, 0, False, None)))

class TracedRetriever(RetrieverBase):
    """Records every search (query, k, the passages found: id, title, score and text, seconds)
    and counts retrieval calls. The text makes every passage of a trace readable where it was
    found (the web page, a run's records), not only the answer's."""

    def __init__(self, inner: Retriever) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.total = Usage()

    def search(self, query: str, k: int = 5) -> list[Passage]:
        check_cancelled()
        t0 = time.perf_counter()
        hits = self.inner.search(query, k)
        self._record(query, k, hits, time.perf_counter() - t0)
        return hits

    def batch_search(self, queries: list[str], k: int = 5) -> list[list[Passage]]:
        check_cancelled()
        t0 = time.perf_counter()
        results = self.inner.batch_search(queries, k)
        per = (time.perf_counter() - t0) / max(1, len(queries))
        for q, hits in zip(queries, results):
            self._record(q, k, hits, per)
        return results

    def _record(self, query: str, k: int, hits: list[Passage], seconds: float) -> None:
        step = current_step()
        if step is not None:
            step.add_retrieval({
                "retriever": self.name,
                "query": query,
                "k": k,
                "passages": [{"id": p.id, "title": p.title, "score": p.score, "text": _clip(p.text)} for p in hits],
                "seconds": round(seconds, 4),
            })
        for u in (_usage.get(), self.total):
            if u is not None:
                u.record_retrieval(1)


def traced_llm(llm: LLMBase) -> TracedLLM:
    return llm if isinstance(llm, TracedLLM) else TracedLLM(llm)


def traced_retriever(retriever: Retriever | None) -> TracedRetriever | None:
    if retriever is None or isinstance(retriever, TracedRetriever):
        return retriever
    return TracedRetriever(retriever)
