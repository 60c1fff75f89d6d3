"""Any OpenAI-compatible server: vLLM, SGLang, llama.cpp server, Ollama, OpenAI.

Spec on the command line: ``openai:MODEL@http://host:port/v1`` (``openai:MODEL`` alone means
api.openai.com), optionally followed by ``?key=value&...`` options:

- ``concurrency=8`` — requests in flight at once from this process (default 8);
- ``timeout=120`` — seconds per request; ``retries=4`` — attempts after the first on
  connection errors, timeouts, HTTP 429 and 5xx, with exponential backoff from ``backoff=1``;
- ``n=native|split`` — whether the server returns ``n`` samples in one call (default
  ``native``; if it returns fewer, the rest are fetched with single calls);
- ``logprobs=1|0`` — the server returns token log-probabilities on chat completions
  (default 1: vLLM, llama.cpp server, OpenAI; Ollama's OpenAI endpoint does not);
- ``loglikelihood=echo`` — the server scores a given continuation through ``/v1/completions``
  with ``echo=True, logprobs=1, max_tokens=0`` (vLLM supports it; OpenAI's chat models and
  Ollama do not; llama.cpp server's echo logprobs are shifted by one token for models
  without BOS, so hopqa does not enable it there by default).

The API key comes from ``OPENAI_API_KEY`` (read by the CLI, passed in here), is never logged,
and is not part of the cache key. Servers that need no key get the placeholder ``EMPTY``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from hopqa.config import redact_credentials
from hopqa.llm.base import (
    GENERATE,
    LOGLIKELIHOOD,
    LOGPROBS,
    NATIVE_N,
    Completion,
    Generation,
    GenerationRequest,
    LLMBase,
    LLMError,
    LogLikelihood,
)


@dataclass
class OpenAIConfig:
    """Connection settings of an OpenAI-compatible endpoint."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = 8
    timeout: float = 120.0
    retries: int = 4
    backoff: float = 1.0
    native_n: bool = True
    logprobs: bool = True
    loglikelihood: bool = False

    @classmethod
    def parse(cls, spec: str, api_key: str | None = None) -> OpenAIConfig:
        """Parse ``MODEL[@URL][?opts]`` (the part after ``openai:``)."""
        spec, _, query = spec.partition("?")
        model, _, url = spec.partition("@")
        if not model:
            raise ValueError("an OpenAI-compatible LLM spec needs a model name: openai:MODEL@http://host:port/v1")
        cfg = cls(model=model, base_url=url or None, api_key=api_key)
        for key, value in parse_qsl(query):
            if key == "concurrency":
                cfg.concurrency = max(1, int(value))
            elif key == "timeout":
                cfg.timeout = float(value)
            elif key == "retries":
                cfg.retries = max(0, int(value))
            elif key == "backoff":
                cfg.backoff = float(value)
            elif key == "n":
                cfg.native_n = value != "split"
            elif key == "logprobs":
                cfg.logprobs = value not in ("0", "false", "no")
            elif key == "loglikelihood":
                cfg.loglikelihood = value in ("echo", "1", "true", "yes")
            else:
                raise ValueError(f"unknown option {key!r} in the LLM spec (known: concurrency, timeout, "
                                 "retries, backoff, n, logprobs, loglikelihood)")
        return cfg


class OpenAICompatibleLLM(LLMBase):
    """A model behind an OpenAI-compatible HTTP API, with retries and bounded concurrency."""

    def __init__(self, config: OpenAIConfig) -> None:
        import openai

        self.config = config
        # Credentials in the URL stay out of the name, the cache key and everything recorded.
        self.name = f"openai:{config.model}" + (f"@{redact_credentials(config.base_url)}" if config.base_url else "")
        self.max_concurrency = config.concurrency
        caps = {GENERATE}
        if config.native_n:
            caps.add(NATIVE_N)
        if config.logprobs:
            caps.add(LOGPROBS)
        if config.loglikelihood:
            caps.add(LOGLIKELIHOOD)
        self.capabilities = frozenset(caps)
        super().__init__()
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "EMPTY",
            timeout=config.timeout,
            max_retries=0,  # hopqa retries itself, with a clear error at the end
        )

    def identity(self) -> dict[str, Any]:
        url = redact_credentials(self.config.base_url) if self.config.base_url else None
        return {"backend": "openai-compatible", "model": self.config.model, "base_url": url}

    def capability_hint(self, capability: str) -> str:
        if capability == LOGLIKELIHOOD:
            return ("add ?loglikelihood=echo to the spec if the server scores prompts with echo=True "
                    "(vLLM does), or use the embedded backend")
        if capability == LOGPROBS:
            return "this endpoint was configured with logprobs=0"
        return ""

    # -- retries ---------------------------------------------------------------------------
    def _call(self, fn: Any, **kwargs: Any) -> Any:
        o = self._openai
        transient = (o.APIConnectionError, o.APITimeoutError, o.RateLimitError, o.InternalServerError)
        last: Exception | None = None
        for attempt in range(self.config.retries + 1):
            try:
                return fn(**kwargs)
            except transient as exc:
                last = exc
            except o.APIStatusError as exc:
                if exc.status_code >= 500 or exc.status_code in (408, 409, 429):
                    last = exc
                else:
                    raise LLMError(f"{self.name}: the server refused the request (HTTP {exc.status_code}): "
                                   f"{_short(exc)}") from exc
            if attempt < self.config.retries:
                time.sleep(self.config.backoff * (2**attempt) * (1 + 0.1 * random.random()))
        raise LLMError(
            f"{self.name}: the server failed {self.config.retries + 1} times in a row "
            f"(last error: {type(last).__name__}: {_short(last)}); check that it is running and reachable, "
            "or raise ?retries= / ?timeout= in the LLM spec"
        ) from last

    # -- generation ------------------------------------------------------------------------
    def _complete(self, request: GenerationRequest) -> Generation:
        t0 = time.perf_counter()
        kwargs: dict[str, Any] = dict(
            model=self.config.model,
            messages=request.as_messages(),
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=request.max_tokens,
        )
        if request.n > 1:
            kwargs["n"] = request.n
        if request.stop:
            kwargs["stop"] = list(request.stop)[:4]  # OpenAI accepts at most 4 stop sequences
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.logprobs:
            kwargs["logprobs"] = True
        resp = self._call(self._client.chat.completions.create, **kwargs)
        completions = [self._read_choice(c) for c in resp.choices]
        usage = resp.usage
        gen = Generation(
            completions=completions,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            seconds=time.perf_counter() - t0,
            backend=self.name,
        )
        missing = request.n - len(completions)
        if missing > 0:  # the server ignored n: fetch the rest as single calls
            from dataclasses import replace

            base = request.seed if request.seed is not None else 0
            extra = self.map([replace(request, n=1, seed=base + len(completions) + i) for i in range(missing)])
            for g in extra:
                gen.completions.extend(g.completions)
                gen.prompt_tokens += g.prompt_tokens
                gen.completion_tokens += g.completion_tokens
        return gen

    @staticmethod
    def _read_choice(choice: Any) -> Completion:
        text = (choice.message.content or "") if choice.message else ""
        tokens = values = None
        lp = getattr(choice, "logprobs", None)
        content = getattr(lp, "content", None) if lp is not None else None
        if content:
            tokens = [c.token for c in content]
            values = [float(c.logprob) for c in content]
        return Completion(text=text, finish_reason=choice.finish_reason, tokens=tokens, logprobs=values)

    def complete(self, request: GenerationRequest) -> Generation:
        if request.n > 1 and self.supports(NATIVE_N):
            if request.logprobs:
                self.require(LOGPROBS)
            with self._slots:
                return self._complete(request)
        return super().complete(request)

    # -- scoring ---------------------------------------------------------------------------
    def _loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        t0 = time.perf_counter()
        resp = self._call(
            self._client.completions.create,
            model=self.config.model,
            prompt=context + continuation,
            max_tokens=0,
            echo=True,
            logprobs=1,
            temperature=0.0,
        )
        lp = resp.choices[0].logprobs
        if lp is None or lp.token_logprobs is None or lp.text_offset is None:
            raise LLMError(f"{self.name}: the server returned no echo logprobs; it cannot score continuations")
        tokens, values = [], []
        for tok, val, off in zip(lp.tokens, lp.token_logprobs, lp.text_offset):
            if off >= len(context) and val is not None:
                tokens.append(tok)
                values.append(float(val))
        usage = resp.usage
        return LogLikelihood(
            token_logprobs=values,
            tokens=tokens,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            seconds=time.perf_counter() - t0,
        )

    def close(self) -> None:
        self._client.close()


def _short(exc: BaseException | None, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."
