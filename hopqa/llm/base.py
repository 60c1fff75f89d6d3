"""The one LLM protocol every method talks to, and what a backend declares it can do.

A backend implements ``_complete(request)`` (and ``_loglikelihood`` if it can score a given
continuation); ``LLMBase`` turns that into the public API:

- ``generate(prompt_or_messages, n=1, temperature=0, top_p=1, max_tokens=256, stop=None,
  logprobs=False, seed=None, schema=None) -> Generation`` — texts (and per-token
  log-probabilities when asked and the backend can); with ``schema`` (a JSON schema, a
  ``dict``) a backend that declares ``STRUCTURED`` constrains every completion to JSON valid
  for it (the embedded backend through a llama.cpp grammar, an OpenAI-compatible server
  through ``response_format``). The schema is part of the request, so of its cache key;
- ``loglikelihood(context, continuation) -> LogLikelihood`` — the teacher-forced
  log-probability of ``continuation`` after ``context``, with per-token values;
- ``map(requests)`` — independent requests on a bounded worker pool (``max_concurrency``).

A backend that cannot return ``n`` samples in one call gets ``n`` single calls with seeds
``seed, seed+1, ...`` (run concurrently up to ``max_concurrency``). Asking for a capability the
backend lacks raises ``UnsupportedCapability`` naming both.

Concurrency: ``complete`` and ``loglikelihood`` hold one of ``max_concurrency`` slots around the
backend's ``_complete`` / ``_loglikelihood``. A backend must never call the public API
(``complete``, ``map``, ``generate``) from inside ``_complete``: the nested call would wait for
a slot its caller holds, and with every slot taken that way the process hangs. Extra calls a
backend needs (e.g. topping up samples a server did not return) go to its own raw methods.

Reply cap: every completion a backend returns is cut to ``reply_cap(max_tokens)`` characters
(``max(MIN_REPLY_CHARS, REPLY_CHARS_PER_TOKEN * max_tokens)``: 2,000 characters for the short
answers of most prompts, 4,096 for ``max_tokens=256``) — a server that ignores ``max_tokens``
cannot hand a method a 100 KB reply to parse or to paste into the next prompt. A cut completion
has ``truncated=True`` and ``finish_reason="length"``, keeps only the tokens / log-probabilities
that fit, and the trace step open at the time gets a note ``LLM reply truncated``.

Valid text: every completion (its text, tokens and finish reason) and every scored token is
made valid Unicode in the same place, before it is cut, cached, traced or written: a lone
surrogate (what ``json.loads`` makes of a server's ``"\\ud800"``, sent for a token that is not
whole UTF-8) becomes U+FFFD, one character for one so tokens stay aligned with the text, and
the open trace step gets a note ``LLM reply had invalid Unicode`` with how many were replaced.
The response cache mends the entries it reads the same way (older versions cached them raw).
Prompts, stop strings and scored texts are mended the same way before a backend sees them (it
must send or tokenize them as UTF-8), and ``request_key`` hashes any text.

Numbers from backends: token counts that are not whole numbers >= 0 count as 0
(``token_count``: usage is bookkeeping, the reply is kept); log-probabilities that are not
numbers make the reply malformed (``logprob_values`` raises ``MalformedValue``; the
OpenAI-compatible backend retries such a reply, the embedded one raises ``LLMError``).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from hopqa.config import SURROGATE
from hopqa.trace import current_step, submit

Messages = list[dict[str, str]]

# Capabilities a backend may declare.
GENERATE = "generate"
LOGPROBS = "logprobs"  # per-token log-probabilities of generated text
LOGLIKELIHOOD = "loglikelihood"  # score of a given continuation (teacher forcing)
NATIVE_N = "native_n"  # n samples in one call
STRUCTURED = "structured"  # output constrained to a JSON schema (``schema=``)


#: Characters accepted per requested token (a token is ~4 characters of English; 16 is generous).
REPLY_CHARS_PER_TOKEN = 16
#: Characters always accepted, however small ``max_tokens`` is.
MIN_REPLY_CHARS = 2000
#: Characters per token of ``LLMBase.count_tokens``'s estimate for a backend that cannot
#: tokenize (deliberately low: the estimate must not undercount).
CHARS_PER_TOKEN_ESTIMATE = 3


class LLMError(RuntimeError):
    """A model call failed for good (after retries), with what was wrong and what to do."""


class LLMSpecError(ValueError):
    """An LLM spec (``--llm``) or one of its options is malformed; the message names the bad
    part and the accepted forms."""


class UnsupportedCapability(LLMError):
    """The backend cannot do what a method asked of it."""

    def __init__(self, backend: str, capability: str, hint: str = "") -> None:
        msg = f"the LLM backend {backend!r} cannot provide {capability!r}"
        super().__init__(msg + (f"; {hint}" if hint else ""))
        self.backend = backend
        self.capability = capability


@dataclass(frozen=True)
class GenerationRequest:
    """Everything that determines a generation (and so its cache key)."""

    prompt: str | None = None
    messages: tuple[tuple[str, str], ...] | None = None
    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    seed: int | None = None
    #: A JSON schema the output must follow, as canonical JSON text (hashable, a stable cache
    #: key); ``make`` accepts the schema as a ``dict``. None: free text.
    schema: str | None = None

    @classmethod
    def make(cls, prompt: str | Messages, **kw: Any) -> GenerationRequest:
        stop = kw.pop("stop", None) or ()
        if isinstance(stop, str):
            stop = (stop,)
        schema = kw.pop("schema", None)
        if schema is not None and not isinstance(schema, str):
            schema = json.dumps(schema, ensure_ascii=False)  # property order kept: the model writes them in it
        if schema is not None:
            kw["schema"] = schema
        if isinstance(prompt, str):
            return cls(prompt=prompt, stop=tuple(stop), **kw)
        msgs = tuple((str(m["role"]), str(m["content"])) for m in prompt)
        return cls(messages=msgs, stop=tuple(stop), **kw)

    def as_messages(self) -> Messages:
        """Chat messages for this request (a plain prompt becomes one user message)."""
        if self.messages is not None:
            return [{"role": r, "content": c} for r, c in self.messages]
        return [{"role": "user", "content": self.prompt or ""}]

    def text(self) -> str:
        """The prompt as one string (for logging and token estimates)."""
        if self.messages is None:
            return self.prompt or ""
        return "\n".join(f"{r}: {c}" for r, c in self.messages)

    def schema_dict(self) -> dict[str, Any] | None:
        """The JSON schema as a ``dict`` (None for free text)."""
        return json.loads(self.schema) if self.schema is not None else None

    def key_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["messages"] = [list(m) for m in self.messages] if self.messages else None
        d["stop"] = list(self.stop)
        if d["schema"] is None:  # free-text requests keep the cache keys they had before schemas
            del d["schema"]
        return d


@dataclass
class Completion:
    """One sampled continuation."""

    text: str
    finish_reason: str | None = None
    tokens: list[str] | None = None
    logprobs: list[float] | None = None
    #: The backend's reply was longer than ``reply_cap(max_tokens)`` and was cut to it.
    truncated: bool = False

    @property
    def mean_prob(self) -> float | None:
        """Mean token probability (exp of each logprob), e.g. Self-DC's 'prob' confidence."""
        if not self.logprobs:
            return None
        import math

        return sum(math.exp(x) for x in self.logprobs) / len(self.logprobs)


@dataclass
class Generation:
    """The result of one request: its completions and what it cost."""

    completions: list[Completion]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    seconds: float = 0.0
    backend: str = ""
    #: The request had a schema the backend could not apply (a server that refused every
    #: ``response_format``): the completions are free text.
    schema_ignored: bool = False
    #: Prompt tokens the model actually evaluated (the rest came from its KV / prefix cache);
    #: None when the backend cannot tell (a server).
    prompt_tokens_evaluated: int | None = None
    #: The embedded backend's prefix cache during this request (``PrefixCache.use_since``): tokens
    #: restored from snapshots, snapshots evicted, and what it holds after; None without one.
    prefix_cache: dict[str, float] | None = None

    @property
    def text(self) -> str:
        return self.completions[0].text if self.completions else ""

    @property
    def texts(self) -> list[str]:
        return [c.text for c in self.completions]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Generation:
        comps = [Completion(**c) for c in d.get("completions", [])]
        rest = {k: v for k, v in d.items() if k != "completions"}
        return cls(completions=comps, **rest)


@dataclass
class LogLikelihood:
    """Teacher-forced log-probability of a continuation, token by token."""

    token_logprobs: list[float]
    tokens: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    cached: bool = False
    seconds: float = 0.0
    #: Tokens the model actually evaluated (``Generation.prompt_tokens_evaluated``); None: unknown.
    prompt_tokens_evaluated: int | None = None
    #: The prefix cache during this request (``Generation.prefix_cache``).
    prefix_cache: dict[str, float] | None = None

    @property
    def total(self) -> float:
        return float(sum(self.token_logprobs))

    @property
    def mean(self) -> float:
        return self.total / len(self.token_logprobs) if self.token_logprobs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LogLikelihood:
        return cls(**d)


class LLMBase:
    """Shared behaviour of every backend and wrapper (see the module docstring)."""

    name: str = "llm"
    capabilities: frozenset[str] = frozenset({GENERATE})
    max_concurrency: int = 1
    #: The model's context window in tokens (prompt and completion together), None when the
    #: backend does not know it (an OpenAI-compatible server without ``?context=N``).
    context_tokens: int | None = None

    def __init__(self) -> None:
        self._slots = threading.BoundedSemaphore(max(1, self.max_concurrency))

    # -- what subclasses implement ---------------------------------------------------------
    def _complete(self, request: GenerationRequest) -> Generation:  # pragma: no cover
        raise NotImplementedError

    def _loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        raise UnsupportedCapability(self.name, LOGLIKELIHOOD, self.capability_hint(LOGLIKELIHOOD))

    def _loglikelihoods(self, context: str, continuations: list[str]) -> list[LogLikelihood] | None:
        """Every continuation scored after one ``context`` in one go, for a backend that can
        evaluate the context once (the embedded model); None: score the pairs one by one."""
        return None

    def chat_reply(self, prompt: str, reply: str) -> tuple[str, str]:
        """``reply`` as this model reads it when it is the whole of its answer to ``prompt``:
        the text before it and the reply's own text through the end of the turn, for
        ``loglikelihood``. Without a chat template of its own here (a raw completion model, a
        server whose template is its own): ``prompt`` and a newline, then ``reply`` and a newline
        (the newline ends the reply, so that "1" is not scored as the start of "10")."""
        return prompt + "\n", reply + "\n"

    def identity(self) -> dict[str, Any]:
        """What distinguishes this model's outputs (used in cache keys). Never secrets."""
        return {"name": self.name}

    def capability_hint(self, capability: str) -> str:
        return ""

    def count_tokens(self, text: str) -> int:
        """The tokens ``text`` takes in a prompt: exact where the backend can tokenize (the
        embedded model), else an upper estimate, one token per ``CHARS_PER_TOKEN_ESTIMATE``
        characters (English runs about 4 characters a token), so a prompt filled to a budget
        with this count does not overflow."""
        return -(-len(text) // CHARS_PER_TOKEN_ESTIMATE)

    # -- public API ------------------------------------------------------------------------
    def supports(self, capability: str) -> bool:
        return capability in self.capabilities

    def require(self, capability: str, who: str = "") -> None:
        """Raise ``UnsupportedCapability`` unless the backend declares ``capability``."""
        if not self.supports(capability):
            hint = self.capability_hint(capability)
            if who:
                hint = f"{who} needs it" + (f"; {hint}" if hint else "")
            raise UnsupportedCapability(self.name, capability, hint)

    def generate(self, prompt: str | Messages, **kw: Any) -> Generation:
        """Generate from a prompt string or chat messages; see ``GenerationRequest``."""
        return self.complete(GenerationRequest.make(prompt, **kw))

    def complete(self, request: GenerationRequest) -> Generation:
        """Run one request, splitting ``n`` into single calls when the backend needs that.
        Every reply is cut to ``reply_cap(request.max_tokens)`` characters (module docstring)."""
        if request.n < 1:
            raise ValueError("n must be at least 1")
        if request.logprobs:
            self.require(LOGPROBS)
        if request.schema is not None:
            self.require(STRUCTURED)
        request = _valid_request(request)
        if request.n == 1 or self.supports(NATIVE_N):
            with self._slots:
                gen = self._complete(request)
            return cap_generation(gen, request.max_tokens)
        base_seed = request.seed if request.seed is not None else 0
        singles = [replace(request, n=1, seed=base_seed + i) for i in range(request.n)]
        parts = self.map(singles)
        return merge_generations(parts, backend=self.name)

    def loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        """Log-probability of ``continuation`` given ``context`` (teacher forcing)."""
        self.require(LOGLIKELIHOOD)
        with self._slots:
            ll = self._loglikelihood(mend_text(context)[0], mend_text(continuation)[0])
        return mend_loglikelihood(ll, self.name)

    def map(self, requests: Sequence[GenerationRequest], workers: int | None = None) -> list[Generation]:
        """Run independent requests concurrently (bounded by ``max_concurrency``), in order."""
        if not requests:
            return []
        width = max(1, min(workers or self.max_concurrency, self.max_concurrency, len(requests)))
        if width == 1:
            return [self.complete(r) for r in requests]
        with ThreadPoolExecutor(max_workers=width) as pool:
            futures = [submit(pool, self.complete, r) for r in requests]
            return [f.result() for f in futures]

    def loglikelihoods(self, context: str, continuations: Sequence[str]) -> list[LogLikelihood]:
        """``loglikelihood`` of each of ``continuations`` after the same ``context``, in order: in
        one evaluation of the context where the backend can (``_loglikelihoods``), else pair by
        pair (``map_loglikelihood``). The same numbers either way."""
        self.require(LOGLIKELIHOOD)
        if not continuations:
            return []
        context = mend_text(context)[0]
        mended = [mend_text(c)[0] for c in continuations]
        with self._slots:
            scored = self._loglikelihoods(context, mended)
        if scored is None:
            return self.map_loglikelihood([(context, c) for c in mended])
        return [mend_loglikelihood(ll, self.name) for ll in scored]

    def map_loglikelihood(self, pairs: Sequence[tuple[str, str]]) -> list[LogLikelihood]:
        """Score many (context, continuation) pairs, concurrently where the backend allows."""
        width = max(1, min(self.max_concurrency, len(pairs)))
        if width == 1:
            return [self.loglikelihood(c, x) for c, x in pairs]
        with ThreadPoolExecutor(max_workers=width) as pool:
            futures = [submit(pool, self.loglikelihood, c, x) for c, x in pairs]
            return [f.result() for f in futures]

    def close(self) -> None:
        """Release resources (models, connections)."""


class LLMWrapper(LLMBase):
    """An LLM that adds behaviour around another one (cache, tracing) and declares what it does."""

    def __init__(self, inner: LLMBase) -> None:
        self.inner = inner
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.max_concurrency = inner.max_concurrency
        self.context_tokens = inner.context_tokens
        super().__init__()

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def chat_reply(self, prompt: str, reply: str) -> tuple[str, str]:
        return self.inner.chat_reply(prompt, reply)

    def capability_hint(self, capability: str) -> str:
        return self.inner.capability_hint(capability)

    def close(self) -> None:
        self.inner.close()


def reply_cap(max_tokens: int) -> int:
    """The most characters of one completion hopqa accepts for a request of ``max_tokens``."""
    return max(MIN_REPLY_CHARS, REPLY_CHARS_PER_TOKEN * max(0, int(max_tokens)))


def cap_completion(completion: Completion, limit: int) -> Completion:
    """``completion`` cut to ``limit`` characters (itself when it fits): ``truncated=True``,
    ``finish_reason="length"``, and only the tokens (with their log-probabilities) that end
    within the limit (log-probabilities without tokens cannot be aligned and are kept)."""
    if len(completion.text) <= limit:
        return completion
    tokens, logprobs = completion.tokens, completion.logprobs
    if tokens is not None:
        keep, end = 0, 0
        for tok in tokens:
            end += len(tok)
            if end > limit:
                break
            keep += 1
        tokens = tokens[:keep]
        logprobs = logprobs[:keep] if logprobs is not None else None
    return replace(completion, text=completion.text[:limit], finish_reason="length", tokens=tokens,
                   logprobs=logprobs, truncated=True)


#: A UTF-16 surrogate code point: never valid alone in text (it cannot be encoded as UTF-8).
def mend_text(text: str) -> tuple[str, int]:
    """``text`` with each lone surrogate replaced by U+FFFD (one character for one), and how
    many were; ``text`` itself when it has none."""
    if not SURROGATE.search(text):
        return text, 0
    return SURROGATE.subn("\ufffd", text)


def _valid_request(request: GenerationRequest) -> GenerationRequest:
    """``request`` with its prompt or messages and stop strings made valid Unicode (a backend
    must send or tokenize them as UTF-8); itself when they are."""
    texts = [request.prompt or "", *(c for m in request.messages or () for c in m), *request.stop]
    if not any(SURROGATE.search(t) for t in texts):
        return request

    def fix(text: str) -> str:
        return mend_text(text)[0]

    messages = tuple((fix(r), fix(c)) for r, c in request.messages) if request.messages is not None else None
    return replace(request, prompt=fix(request.prompt) if request.prompt is not None else None, messages=messages,
                   stop=tuple(fix(t) for t in request.stop))


def _mend_completion(completion: Completion) -> tuple[Completion, int]:
    """``completion`` made valid Unicode, and how many characters were replaced (those of the
    text, else those of its tokens)."""
    text, bad = mend_text(completion.text)
    tokens = completion.tokens
    if tokens is not None:
        fixed = [mend_text(t) for t in tokens]
        in_tokens = sum(n for _, n in fixed)
        if in_tokens:
            tokens, bad = [t for t, _ in fixed], bad or in_tokens
    reason = completion.finish_reason
    if isinstance(reason, str):
        reason, in_reason = mend_text(reason)
        bad = bad or in_reason
    if not bad:
        return completion, 0
    return replace(completion, text=text, tokens=tokens, finish_reason=reason), bad


def mend_generation(gen: Generation) -> Generation:
    """``gen`` with every completion made valid Unicode (module docstring); a note on the open
    trace step (if any) says how many characters of which replies were replaced."""
    mended = [_mend_completion(c) for c in gen.completions]
    if not any(bad for _, bad in mended):
        return gen
    gen.completions = [c for c, _ in mended]
    _note_invalid(gen.backend, [bad for _, bad in mended])
    return gen


def mend_loglikelihood(ll: LogLikelihood, backend: str) -> LogLikelihood:
    """``ll`` with its tokens made valid Unicode (as ``mend_generation``)."""
    if not any(SURROGATE.search(t) for t in ll.tokens):
        return ll
    fixed = [mend_text(t) for t in ll.tokens]
    ll.tokens = [t for t, _ in fixed]
    _note_invalid(backend, [sum(bad for _, bad in fixed)])
    return ll


def _note_invalid(backend: str, replaced: list[int]) -> None:
    step = current_step()
    if step is not None:
        step.note("LLM reply had invalid Unicode", backend=backend, replaced=replaced,
                  detail="lone surrogates replaced by U+FFFD")


def token_count(value: Any) -> int:
    """A token count reported by a backend: ``value`` when it is a whole number >= 0 (an
    integral float too), else 0 (``None``, text, a list, NaN: usage is bookkeeping, not worth
    failing a reply for)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's numbers too
        return 0
    if not math.isfinite(value) or value < 0 or value != int(value):
        return 0
    return int(value)


class MalformedValue(ValueError):
    """A value a backend reported is not what it must be: ``what`` says what was wrong,
    ``detail`` shows the value."""

    def __init__(self, what: str, value: Any) -> None:
        self.what = what
        self.detail = _preview(value)
        super().__init__(f"{what} ({self.detail})")


def logprob(value: Any) -> float:
    """A log-probability reported by a backend as a float; ``MalformedValue`` when it is not a
    number (``None``, text, ``true``, NaN)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):  # numpy's numbers too
        raise MalformedValue("token log-probabilities that are not numbers", value)
    return float(value)


def logprob_values(values: Any) -> list[float]:
    """A list of log-probabilities reported by a backend (``logprob`` for each)."""
    if not isinstance(values, (list, tuple)):
        raise MalformedValue("token log-probabilities that are not a list", values)
    return [logprob(v) for v in values]


def _preview(value: Any, limit: int = 60) -> str:
    text = mend_text(repr(value))[0]
    return text if len(text) <= limit else text[:limit] + "..."


def cap_generation(gen: Generation, max_tokens: int) -> Generation:
    """``gen`` made valid Unicode (``mend_generation``) and with every completion cut to
    ``reply_cap(max_tokens)`` characters; a note on the open trace step (if any) says which
    replies were cut and from how long."""
    gen = mend_generation(gen)
    limit = reply_cap(max_tokens)
    long = [len(c.text) for c in gen.completions if len(c.text) > limit]
    if not long:
        return gen
    gen.completions = [cap_completion(c, limit) for c in gen.completions]
    step = current_step()
    if step is not None:
        step.note("LLM reply truncated", backend=gen.backend, chars=long, cap=limit, max_tokens=max_tokens)
    return gen


def merge_generations(parts: Sequence[Generation], backend: str = "") -> Generation:
    """One Generation holding the completions of several single-sample calls."""
    return Generation(
        completions=[c for g in parts for c in g.completions],
        prompt_tokens=sum(g.prompt_tokens for g in parts),
        completion_tokens=sum(g.completion_tokens for g in parts),
        cached=all(g.cached for g in parts),
        seconds=sum(g.seconds for g in parts),
        backend=backend,
        schema_ignored=any(g.schema_ignored for g in parts),
        prompt_tokens_evaluated=(sum(g.prompt_tokens_evaluated or 0 for g in parts)
                                 if parts and all(g.prompt_tokens_evaluated is not None for g in parts) else None),
        prefix_cache=merge_prefix_use([g.prefix_cache for g in parts]),
    )


def merge_prefix_use(parts: Sequence[dict[str, float] | None]) -> dict[str, float] | None:
    """The prefix-cache use of several calls made as one request: restored tokens and evictions
    added up, the cache's size after the last; None when no part says."""
    said = [p for p in parts if p]
    if not said:
        return None
    return {"restored": sum(p.get("restored", 0) for p in said), "evicted": sum(p.get("evicted", 0) for p in said),
            "entries": said[-1].get("entries", 0), "mb": said[-1].get("mb", 0.0)}


def request_key(identity: dict[str, Any], kind: str, payload: dict[str, Any]) -> str:
    """A stable hash of the full request and the model identity (the cache key)."""
    blob = json.dumps({"model": identity, "kind": kind, "request": payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate is a key too
