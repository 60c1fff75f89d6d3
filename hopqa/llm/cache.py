"""A persistent response cache in front of any backend: a re-run costs no model call.

Keyed by the model's identity plus the full request (prompt or messages, n, temperature,
top_p, max_tokens, stop, logprobs, seed) — see ``hopqa.llm.base.request_key``. Stored with
``diskcache`` (SQLite underneath), which is safe under concurrent threads and processes. A
cached result comes back with ``cached=True``; usage accounting then counts the call as a
cache hit with zero tokens. Sampling at temperature > 0 is cached too (per seed), which makes
evaluations reproducible; pass a different ``seed`` or ``--no-cache`` for fresh samples.
Failed calls are not cached. A hit is cut to the reply cap like a fresh reply
(``hopqa.llm.base.reply_cap``), so entries written before the cap existed obey it too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import diskcache

from hopqa.llm.base import (
    Generation,
    GenerationRequest,
    LLMBase,
    LLMWrapper,
    LogLikelihood,
    cap_generation,
    request_key,
)


class ResponseCache:
    """A directory of cached responses (thread- and process-safe)."""

    def __init__(self, directory: str | Path, size_limit_gb: float = 4.0) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._db = diskcache.Cache(str(self.directory), size_limit=int(size_limit_gb * 2**30), timeout=60)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._db.get(key)

    def set(self, key: str, value: dict[str, Any]) -> None:
        self._db.set(key, value)

    def __len__(self) -> int:
        return len(self._db)

    def clear(self) -> None:
        self._db.clear()

    def close(self) -> None:
        self._db.close()


class CachedLLM(LLMWrapper):
    """Wraps a backend; answers repeated requests from the cache."""

    def __init__(self, inner: LLMBase, cache: ResponseCache) -> None:
        super().__init__(inner)
        self.cache = cache

    def complete(self, request: GenerationRequest) -> Generation:
        key = request_key(self.inner.identity(), "generate", request.key_dict())
        t0 = time.perf_counter()
        hit = self.cache.get(key)
        if hit is not None:
            gen = Generation.from_dict(hit)
            gen.cached = True
            gen.seconds = time.perf_counter() - t0
            return cap_generation(gen, request.max_tokens)
        gen = self.inner.complete(request)
        self.cache.set(key, gen.to_dict())
        return gen

    def loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        self.require("loglikelihood")
        key = request_key(self.inner.identity(), "loglikelihood", {"context": context, "continuation": continuation})
        hit = self.cache.get(key)
        if hit is not None:
            ll = LogLikelihood.from_dict(hit)
            ll.cached = True
            return ll
        ll = self.inner.loglikelihood(context, continuation)
        self.cache.set(key, ll.to_dict())
        return ll

    def close(self) -> None:
        self.inner.close()
        self.cache.close()
