"""Any OpenAI-compatible server: vLLM, SGLang, llama.cpp server, Ollama, OpenAI.

Spec on the command line: ``openai:MODEL@http://host:port/v1`` (``openai:MODEL`` alone means
api.openai.com), optionally followed by ``?key=value&...`` options:

- ``concurrency=8`` — requests in flight at once from this process (default 8);
- ``timeout=120`` — seconds per request; ``retries=4`` — attempts after the first on
  connection errors, timeouts, HTTP 408, 409, 429 and 5xx, malformed or undecodable JSON and
  replies without choices, with exponential backoff from ``backoff=1``; after the last attempt
  an ``LLMError`` names the endpoint (credentials redacted), what went wrong and what to do;
- ``n=native|split`` — whether the server returns ``n`` samples in one call (default
  ``native``; if it returns fewer, the rest are fetched with single calls);
- ``logprobs=1|0`` — the server returns token log-probabilities on chat completions
  (default 1: vLLM, llama.cpp server, OpenAI; Ollama's OpenAI endpoint does not);
- ``loglikelihood=echo`` — the server scores a given continuation through ``/v1/completions``
  with ``echo=True, logprobs=1, max_tokens=0`` (vLLM supports it; OpenAI's chat models and
  Ollama do not; llama.cpp server's echo logprobs are shifted by one token for models
  without BOS, so hopqa does not enable it there by default);
- ``structured=1|0`` — requests with a JSON schema (``generate(..., schema=...)``) send it as
  ``response_format`` (default 1). The standard form ``{"type": "json_schema", ...}`` (OpenAI,
  vLLM, SGLang, llama.cpp's server) is tried first; a server that refuses it (an error whose
  message names the ``response_format`` or the schema, whatever its status: llama-cpp-python's
  server answers HTTP 500 with a validation error) is asked with ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's server,
  Anyscale), and one that refuses both gets the request without ``response_format``: the
  reply is then free text, marked ``schema_ignored`` (the methods parse it with their
  free-text parser). What the server accepted is remembered for the rest of the run.

A malformed spec or option (``timeout=abc``, ``retries=-1``, ``retires=3``) is an
``LLMSpecError`` (a ``ValueError``) naming the bad part and the accepted form.

The API key comes from ``OPENAI_API_KEY`` (read by the CLI, passed in here), is never logged,
and is not part of the cache key. Servers that need no key get the placeholder ``EMPTY``.
Credentials in the URL (``http://user:password@host/v1``) are redacted from the backend's name,
its identity (the cache key) and every error message, and no library exception that could
print the URL is chained under its errors.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import unquote_plus

from hopqa.config import FALSE_WORDS, TRUE_WORDS, redact_credentials
from hopqa.llm.base import (
    GENERATE,
    LOGLIKELIHOOD,
    LOGPROBS,
    NATIVE_N,
    STRUCTURED,
    Completion,
    Generation,
    GenerationRequest,
    LLMBase,
    LLMError,
    LLMSpecError,
    LogLikelihood,
)
from hopqa.options import OptionError, check_value, convert, unknown_option

#: Every option of an ``openai:`` spec and the form it accepts (the known options and the
#: accepted form in error messages; the checks themselves are the fields' types and ranges).
OPTION_FORMS = {
    "concurrency": "concurrency=N (requests in flight at once, a whole number >= 1)",
    "timeout": "timeout=SECONDS (per request, a number > 0)",
    "retries": "retries=N (attempts after the first, a whole number >= 0)",
    "backoff": "backoff=SECONDS (first wait between attempts, a number >= 0)",
    "n": "n=native|split",
    "logprobs": "logprobs=1|0",
    "loglikelihood": "loglikelihood=echo|0",
    "structured": "structured=1|0 (send JSON schemas as response_format)",
    "context": "context=TOKENS (the model's context window, for methods that fill a prompt to it)",
}
#: Spec options that are not written as their field: option -> (field, {word: the field's value
#: as text}); such an option accepts only its words. The other options are fields of their name.
SPEC_WORDS = {
    "n": ("native_n", {"native": "true", "split": "false"}),
    "loglikelihood": ("loglikelihood", {"echo": "true", **{w: w for w in TRUE_WORDS + FALSE_WORDS}}),
}
SPEC_FORM = "openai:MODEL@http://host:port/v1[?option=value&...]"


@dataclass
class OpenAIConfig:
    """Connection settings of an OpenAI-compatible endpoint, checked when made (types and the
    ranges in the fields' metadata, ``hopqa.options``): a bad value is an ``LLMSpecError``
    naming it, never silently clamped."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = field(default=8, metadata={"range": (1, None)})
    timeout: float = field(default=120.0, metadata={"above": 0})
    retries: int = field(default=4, metadata={"range": (0, None)})
    backoff: float = field(default=1.0, metadata={"range": (0, None)})
    native_n: bool = True
    logprobs: bool = True
    loglikelihood: bool = False
    structured: bool = True
    #: The model's context window in tokens (``?context=N``), for methods that fill a prompt
    #: up to it (Tree of Reviews' reader); None: unknown (such a method then uses its default).
    context: int | None = field(default=None, metadata={"range": (1, None)})

    def __post_init__(self) -> None:
        for f in fields(self):
            try:
                check_value(type(self), f.name, getattr(self, f.name))
            except OptionError as exc:  # the API key is never shown, a URL's credentials are redacted
                message = "option api_key must be text or None" if exc.name == "api_key" else str(exc)
                raise LLMSpecError(redact_credentials(f"OpenAIConfig: {message}")) from None

    @classmethod
    def parse(cls, spec: str, api_key: str | None = None) -> OpenAIConfig:
        """Parse ``MODEL[@URL][?opts]`` (the part after ``openai:``); ``LLMSpecError`` (a
        ``ValueError``) names a missing model, a URL that is not http(s), an unknown option or
        a bad value, with the accepted forms."""
        head, _, query = spec.partition("?")
        model, at, url = head.partition("@")
        if not model.strip():
            raise LLMSpecError(f"an OpenAI-compatible LLM spec needs a model name: {SPEC_FORM}")
        if at and not re.match(r"https?://[^/?#\s]", url):
            raise LLMSpecError(f"the endpoint {redact_credentials(url)!r} after {model + '@'!r} is not an http(s) URL: "
                               f"use {SPEC_FORM}")
        values: dict[str, Any] = {}
        for item in query.split("&") if query else []:
            if not item.strip():
                continue
            key, eq, value = item.partition("=")
            key, value = unquote_plus(key).strip(), unquote_plus(value).strip()
            if key not in OPTION_FORMS:
                raise LLMSpecError(redact_credentials(f"{unknown_option(key, OPTION_FORMS)} (as in {SPEC_FORM})"))
            if not eq or not value:
                raise LLMSpecError(f"the LLM option {key!r} has no value: use {OPTION_FORMS[key]}")
            name, option_value = _option_value(key, value)
            values[name] = option_value
        return cls(model=model, base_url=url or None, api_key=api_key, **values)


def _option_value(key: str, text: str) -> tuple[str, Any]:
    """The field the spec option ``key=text`` sets and its value (``SPEC_WORDS``, then the
    field's type and range); ``LLMSpecError`` naming the text as written and the accepted form."""
    name, words = SPEC_WORDS.get(key, (key, None))
    word = text if words is None else words.get(text.lower())
    if word is not None:
        try:
            return name, convert(OpenAIConfig, name, word)
        except OptionError:
            pass
    raise LLMSpecError(redact_credentials(f"bad value {text!r} for the LLM option {key!r}: use {OPTION_FORMS[key]}"))


class _BadReply(Exception):
    """An HTTP 200 response hopqa cannot use (no choices, not a completion); retried like a
    transient error."""

    def __init__(self, what: str, detail: str = "") -> None:
        super().__init__(f"{what}{': ' + detail if detail else ''}")
        self.what = what
        self.detail = detail


class RequestRefused(LLMError):
    """The server refused a request for good (an HTTP 4xx other than 408, 409 and 429, or an
    error that names the request's ``response_format``)."""

    def __init__(self, message: str, status: int, format_refused: bool = False) -> None:
        super().__init__(message)
        self.status = status
        #: The refusal is of the ``response_format`` (see ``FORMAT_WORDS``).
        self.format_refused = format_refused


#: The ``response_format`` forms tried in order for a request with a JSON schema (see the
#: module docstring), by name; ``None`` is the request without it.
RESPONSE_FORMATS = ("json_schema", "json_object", None)
#: An error of a request with a ``response_format`` whose message names one of these is the
#: server refusing that form (whatever the status: llama-cpp-python's server answers an unknown
#: form with HTTP 500 and a validation error): not retried, the next form is tried. Other errors
#: (a prompt too long, ...) stay errors and leave the form in use.
FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema")


def response_format(form: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` of a request constrained to ``schema``, in the form ``form``."""
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": True}}
    return {"type": "json_object", "schema": schema}


class OpenAICompatibleLLM(LLMBase):
    """A model behind an OpenAI-compatible HTTP API, with retries and bounded concurrency."""

    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        # Credentials in the URL stay out of the name, the cache key and everything recorded.
        self.name = f"openai:{config.model}" + (f"@{redact_credentials(config.base_url)}" if config.base_url else "")
        self.max_concurrency = config.concurrency
        self._url_has_credentials = bool(config.base_url) and redact_credentials(config.base_url) != config.base_url
        caps = {GENERATE}
        if config.native_n:
            caps.add(NATIVE_N)
        if config.logprobs:
            caps.add(LOGPROBS)
        if config.loglikelihood:
            caps.add(LOGLIKELIHOOD)
        if config.structured:
            caps.add(STRUCTURED)
        self.capabilities = frozenset(caps)
        self.context_tokens = config.context
        super().__init__()
        #: Index into ``RESPONSE_FORMATS`` of the first form this server has not refused.
        self._format = 0
        # The OpenAI SDK (~0.3-0.8 s to import) and its client are made on the first request,
        # so a run answered entirely from the response cache never pays for them.
        self._client_lock = threading.Lock()
        self._made: tuple[Any, Any] | None = None  # (the openai module, its client)

    def _sdk(self) -> tuple[Any, Any]:
        """``(openai module, client)``, created once, on first use (thread-safe)."""
        with self._client_lock:
            if self._made is None:
                import openai

                client = openai.OpenAI(
                    base_url=self.config.base_url,
                    api_key=self.config.api_key or "EMPTY",
                    timeout=self.config.timeout,
                    max_retries=0,  # hopqa retries itself, with a clear error at the end
                )
                self._made = (openai, client)
            return self._made

    @property
    def _openai(self) -> Any:
        return self._sdk()[0]

    @property
    def _client(self) -> Any:
        return self._sdk()[1]

    def identity(self) -> dict[str, Any]:
        url = redact_credentials(self.config.base_url) if self.config.base_url else None
        return {"backend": "openai-compatible", "model": self.config.model, "base_url": url}

    def capability_hint(self, capability: str) -> str:
        if capability == LOGLIKELIHOOD:
            return ("add ?loglikelihood=echo to the spec if the server scores prompts with echo=True "
                    "(vLLM does), or use the embedded backend")
        if capability == LOGPROBS:
            return "this endpoint was configured with logprobs=0"
        if capability == STRUCTURED:
            return "this endpoint was configured with structured=0"
        return ""

    # -- retries ---------------------------------------------------------------------------
    def _call(self, fn: Callable[..., Any], check: Callable[[Any], None], **kwargs: Any) -> Any:
        """``fn(**kwargs)``, accepted once ``check`` passes on the response; retried up to
        ``retries`` times with exponential backoff on connection errors, timeouts, HTTP 408,
        409, 429 and 5xx, malformed / undecodable JSON and unusable replies (no choices).
        Raises ``LLMError`` naming the endpoint (credentials redacted) and the last cause."""
        o = self._openai
        attempts = self.config.retries + 1
        last: Exception | None = None
        what = ""
        for attempt in range(attempts):
            try:
                resp = fn(**kwargs)
                check(resp)
                return resp
            except o.APITimeoutError as exc:
                last, what = exc, f"no reply within {self.config.timeout:g} s"
            except o.APIConnectionError as exc:
                last, what = exc, "cannot connect to the server"
            except o.APIStatusError as exc:
                if "response_format" in kwargs and any(word in str(exc).lower() for word in FORMAT_WORDS):
                    raise RequestRefused(f"{self.name}: the server refused the response_format (HTTP "
                                         f"{exc.status_code}): {_short(exc)}", exc.status_code,
                                         format_refused=True) from self._cause(exc)
                if not (exc.status_code >= 500 or exc.status_code in (408, 409, 429)):
                    raise RequestRefused(f"{self.name}: the server refused the request (HTTP {exc.status_code}): "
                                   f"{_short(exc)}{_refusal_hint(exc.status_code)}",
                                   exc.status_code) from self._cause(exc)
                last, what = exc, f"HTTP {exc.status_code}" + (" (rate limited)" if exc.status_code == 429 else "")
            except (json.JSONDecodeError, UnicodeDecodeError, o.APIResponseValidationError) as exc:
                last, what = exc, "malformed JSON response"
            except _BadReply as exc:
                last, what = exc, exc.what
            if attempt + 1 < attempts:
                time.sleep(self.config.backoff * (2**attempt) * (1 + 0.1 * random.random()))
        if isinstance(last, (_BadReply, json.JSONDecodeError, UnicodeDecodeError, o.APIResponseValidationError)):
            hint = ("the endpoint does not answer like an OpenAI-compatible server; check the URL (it usually "
                    "ends in /v1), or raise ?retries= in the LLM spec")
        else:
            hint = "check that the server is running and reachable, or raise ?retries= / ?timeout= in the LLM spec"
        if isinstance(last, _BadReply):
            cause = f" ({last.detail})" if last.detail else ""
        else:
            cause = f" ({type(last).__name__}: {_short(last)})"
        raise LLMError(
            f"{self.name}: {what} after {attempts} attempt{'s' if attempts > 1 else ''}{cause}; {hint}"
        ) from self._cause(last)

    def _cause(self, exc: BaseException | None) -> BaseException | None:
        """The exception to chain under an ``LLMError``: none when the endpoint URL holds
        credentials (a chained library error could print the URL in a traceback)."""
        return None if self._url_has_credentials else exc

    # -- generation ------------------------------------------------------------------------
    def _complete(self, request: GenerationRequest) -> Generation:
        """One chat request; if the server returns fewer than ``n`` samples, the rest are
        fetched one by one with seeds ``seed + k`` through ``_chat`` directly (never through
        ``complete``/``map``: this runs inside the concurrency slot its caller holds). Each
        top-up either adds a sample or fails with ``LLMError`` after the retries, so a server
        that ignores ``n`` costs at most ``n`` calls and one that returns nothing gives up."""
        t0 = time.perf_counter()
        gen = self._chat(request)
        base = request.seed if request.seed is not None else 0
        while len(gen.completions) < request.n:
            extra = self._chat(replace(request, n=1, seed=base + len(gen.completions)))
            gen.completions.append(extra.completions[0])
            gen.prompt_tokens += extra.prompt_tokens
            gen.completion_tokens += extra.completion_tokens
        del gen.completions[request.n:]
        gen.seconds = time.perf_counter() - t0
        return gen

    def _chat(self, request: GenerationRequest) -> Generation:
        """One ``/chat/completions`` call (with retries): at least one completion. A request
        with a schema goes through the ``response_format`` forms the server has not refused
        (``RESPONSE_FORMATS``, module docstring)."""
        if request.schema is None:
            return self._chat_once(request, None)
        schema = request.schema_dict() or {}
        while True:
            index = self._format
            form = RESPONSE_FORMATS[index]
            try:
                gen = self._chat_once(request, response_format(form, schema) if form else None)
            except RequestRefused as exc:
                if not exc.format_refused:
                    raise
                with self._client_lock:  # another thread may have moved on already
                    self._format = max(self._format, index + 1)
                continue
            gen.schema_ignored = form is None
            return gen

    def _chat_once(self, request: GenerationRequest, response_format: dict[str, Any] | None) -> Generation:
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
        if response_format is not None:
            kwargs["response_format"] = response_format
        resp = self._call(self._client.chat.completions.create, _check_choices, **kwargs)
        usage = getattr(resp, "usage", None)
        return Generation(
            completions=[self._read_choice(c) for c in resp.choices],
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            seconds=time.perf_counter() - t0,
            backend=self.name,
        )

    @staticmethod
    def _read_choice(choice: Any) -> Completion:
        """A chat choice as a ``Completion`` (token log-probabilities from ``logprobs.content``)."""
        message = getattr(choice, "message", None)
        text = (getattr(message, "content", None) or "") if message is not None else ""
        tokens = values = None
        lp = getattr(choice, "logprobs", None)
        content = getattr(lp, "content", None) if lp is not None else None
        if content:
            tokens = [c.token for c in content]
            values = [float(c.logprob) for c in content]
        return Completion(text=text, finish_reason=getattr(choice, "finish_reason", None), tokens=tokens,
                          logprobs=values)

    # -- scoring ---------------------------------------------------------------------------
    def _loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        """Score ``continuation`` through ``/completions`` with ``echo=True``: the echoed prompt
        tokens whose text offset is at or after ``len(context)`` are the continuation's (a
        token straddling the boundary counts as context; its log-probability is left out)."""
        t0 = time.perf_counter()
        resp = self._call(
            self._client.completions.create,
            _check_choices,
            model=self.config.model,
            prompt=context + continuation,
            max_tokens=0,
            echo=True,
            logprobs=1,
            temperature=0.0,
        )
        lp = resp.choices[0].logprobs
        if lp is None or lp.tokens is None or lp.token_logprobs is None or lp.text_offset is None:
            raise LLMError(f"{self.name}: the server returned no echo logprobs; it cannot score continuations "
                           "(remove ?loglikelihood=echo from the LLM spec)")
        tokens, values = [], []
        for tok, val, off in zip(lp.tokens, lp.token_logprobs, lp.text_offset):
            if off >= len(context) and val is not None:
                tokens.append(tok)
                values.append(float(val))
        usage = getattr(resp, "usage", None)
        return LogLikelihood(
            token_logprobs=values,
            tokens=tokens,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            seconds=time.perf_counter() - t0,
        )

    def close(self) -> None:
        with self._client_lock:
            made, self._made = self._made, None
        if made is not None:
            made[1].close()


def _check_choices(resp: Any) -> None:
    """Raise ``_BadReply`` unless ``resp`` is a completion object with at least one choice."""
    if isinstance(resp, (str, bytes)):  # the SDK returns the body as text when it is not JSON
        raise _BadReply("a response that is not JSON", _short(resp, 80))
    choices = getattr(resp, "choices", None)
    if choices is None:
        raise _BadReply("a response without choices", _short(resp, 120))
    if not choices:
        raise _BadReply("empty choices")


def _refusal_hint(status: int) -> str:
    if status in (401, 403):
        return "; check OPENAI_API_KEY"
    if status == 404:
        return "; check the model name and the URL (it usually ends in /v1)"
    return ""


def _short(exc: object, limit: int = 300) -> str:
    """One line of at most ``limit`` characters, credentials in URLs redacted."""
    text = redact_credentials(" ".join(str(exc).split()))
    return text if len(text) <= limit else text[:limit] + "..."
