"""The LLM layer: one protocol (``LLMBase``), several backends, a response cache.

``load_llm(spec)`` builds a backend from a spec string:

- ``embedded:NAME`` or ``embedded:/path/model.gguf`` — in-process llama.cpp (``llamacpp.py``),
  with options ``?n_ctx=4096&n_threads=2&logits_all=0&seed=0&chat=1``;
- ``openai:MODEL@http://host:port/v1[?options]`` — any OpenAI-compatible server (``openai.py``).

With ``cache=True`` (the default) the backend is wrapped in ``CachedLLM`` over
``<home>/cache/llm``. A malformed spec (unknown backend, unknown option, bad value) raises
``LLMSpecError``, a ``ValueError`` whose one-line message names the bad part and the accepted
forms (credentials in URLs redacted); the CLI turns it into a usage error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    UnsupportedCapability,
)
from hopqa.llm.cache import CachedLLM, ResponseCache

if TYPE_CHECKING:  # pragma: no cover
    from hopqa.llm.llamacpp import EmbeddedConfig

__all__ = [
    "GENERATE", "LOGLIKELIHOOD", "LOGPROBS", "NATIVE_N", "STRUCTURED", "CachedLLM", "Completion", "Generation",
    "GenerationRequest", "LLMBase", "LLMError", "LLMSpecError", "LogLikelihood", "ResponseCache", "UnsupportedCapability",
    "check_spec", "load_llm",
]


#: The accepted forms of an LLM spec (for error messages).
SPEC_FORMS = "embedded:NAME, embedded:PATH.gguf or openai:MODEL@http://host:port/v1"


def check_spec(spec: str, **embedded_options: object) -> tuple[str, str, Any]:
    """Parse an LLM spec without loading anything: ``(kind, model, options)`` with ``kind``
    ``"embedded"`` (options an ``EmbeddedConfig``) or ``"openai"`` (an ``OpenAIConfig``).

    Raises ``LLMSpecError`` on a malformed spec, so a caller can report a typo before it builds
    an index or loads a model. ``load_llm`` goes through here: one dispatch for both.
    """
    kind, sep, rest = spec.partition(":")
    if not sep:
        kind, rest = "embedded", spec
    if kind == "embedded":
        model, cfg = parse_embedded(rest, **embedded_options)
        return kind, model, cfg
    if kind == "openai":
        from hopqa.llm.openai import OpenAIConfig

        config = OpenAIConfig.parse(rest)
        return kind, config.model, config
    from hopqa.config import redact_credentials

    raise LLMSpecError(f"unknown LLM backend {kind!r} in {redact_credentials(spec)!r}: use {SPEC_FORMS}")


def load_llm(
    spec: str,
    home: str | Path | None = None,
    cache: bool = True,
    cache_dir: str | Path | None = None,
    api_key: str | None = None,
    **embedded_options: object,
) -> LLMBase:
    """Build the LLM a spec names (see the module docstring), cached unless ``cache=False``."""
    from hopqa.config import default_home

    kind, target, options = check_spec(spec, **embedded_options)
    home_dir = default_home(home)
    if kind == "embedded":
        from hopqa.llm.llamacpp import LlamaCppLLM

        llm: LLMBase = LlamaCppLLM(target, home=home_dir, config=options)
    else:
        from hopqa.llm.openai import OpenAICompatibleLLM

        options.api_key = api_key
        llm = OpenAICompatibleLLM(options)
    if cache:
        llm = CachedLLM(llm, ResponseCache(Path(cache_dir) if cache_dir else home_dir / "cache" / "llm"))
    return llm


#: The accepted form of an embedded spec with options (for error messages).
EMBEDDED_FORM = "embedded:NAME?n_ctx=4096&n_threads=2"


def parse_embedded(rest: str, **overrides: object) -> tuple[str, EmbeddedConfig]:
    """Split ``NAME?key=value&...`` into the model name and an ``EmbeddedConfig``; the options
    (and ``overrides``, written as text) are checked against its fields (``hopqa.options``)."""
    from urllib.parse import parse_qsl

    from hopqa.config import redact_credentials
    from hopqa.llm.llamacpp import EmbeddedConfig
    from hopqa.options import OptionError, from_strings

    model, _, query = rest.partition("?")
    items = [*parse_qsl(query, keep_blank_values=True), *((key, str(value)) for key, value in overrides.items())]
    try:
        cfg = from_strings(EmbeddedConfig, items)
    except OptionError as exc:
        raise LLMSpecError(redact_credentials(f"{exc} (as in {EMBEDDED_FORM})")) from None
    return model or "qwen2.5-1.5b", cfg
