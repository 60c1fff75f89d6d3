"""A scripted LLM for unit tests of control flow and parsing (never a substitute for a model).

Replies come from a list (consumed in order) or a function of the prompt; every request is
recorded in ``requests``. ``loglikelihood`` answers from a function too when one is given.
``in_flight`` / ``max_in_flight`` count calls running at once; ``gate`` (called inside each call
while it counts as in flight, e.g. a ``threading.Barrier(k).wait``) lets a test hold calls until
``k`` run together instead of hoping a ``delay`` makes them overlap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from hopqa.llm.base import (
    GENERATE,
    LOGLIKELIHOOD,
    Completion,
    Generation,
    GenerationRequest,
    LLMBase,
    LogLikelihood,
)


class ScriptedLLM(LLMBase):
    """Answers with scripted text; counts prompt/completion 'tokens' as whitespace words."""

    def __init__(
        self,
        replies: list[str] | Callable[[GenerationRequest], str] | None = None,
        scorer: Callable[[str, str], list[float]] | None = None,
        capabilities: set[str] | None = None,
        max_concurrency: int = 1,
        delay: float = 0.0,
        name: str = "scripted",
        gate: Callable[[], object] | None = None,
    ) -> None:
        self.name = name
        caps = set(capabilities or {GENERATE})
        if scorer is not None:
            caps.add(LOGLIKELIHOOD)
        self.capabilities = frozenset(caps)
        self.max_concurrency = max_concurrency
        super().__init__()
        self._replies = replies if replies is not None else []
        self._scorer = scorer
        self._delay = delay
        self._gate = gate
        self._lock = threading.Lock()
        self.requests: list[GenerationRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def identity(self) -> dict[str, Any]:
        return {"backend": "scripted", "name": self.name}

    def _next(self, request: GenerationRequest) -> str:
        if callable(self._replies):
            return self._replies(request)
        with self._lock:
            if not self._replies:
                raise AssertionError(f"ScriptedLLM ran out of replies at prompt: {request.text()[:200]!r}")
            return self._replies.pop(0)

    def _complete(self, request: GenerationRequest) -> Generation:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self._gate is not None:
                self._gate()
            if self._delay:
                time.sleep(self._delay)
            texts = [self._next(request) for _ in range(request.n if request.n > 1 else 1)]
        finally:
            with self._lock:
                self.in_flight -= 1
        return Generation(
            completions=[Completion(text=t, finish_reason="stop") for t in texts],
            prompt_tokens=len(request.text().split()),
            completion_tokens=sum(len(t.split()) for t in texts),
            backend=self.name,
        )

    def _loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        assert self._scorer is not None
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self._gate is not None:
                self._gate()
            if self._delay:
                time.sleep(self._delay)
            values = self._scorer(context, continuation)
        finally:
            with self._lock:
                self.in_flight -= 1
        return LogLikelihood(token_logprobs=values, tokens=continuation.split(), prompt_tokens=len(context.split()))
