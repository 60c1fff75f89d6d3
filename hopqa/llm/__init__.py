"""The LLM layer: one protocol (``LLMBase``), several backends, a response cache.

``load_llm(spec)`` builds a backend from a spec string:

- ``embedded:NAME`` or ``embedded:/path/model.gguf`` — in-process llama.cpp (``llamacpp.py``),
  with options ``?n_ctx=4096&n_threads=2&logits_all=0&seed=0&chat=1``;
- ``openai:MODEL@http://host:port/v1[?options]`` — any OpenAI-compatible server (``openai.py``).

With ``cache=True`` (the default) the backend is wrapped in ``CachedLLM`` over
``<home>/cache/llm``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

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
    UnsupportedCapability,
)
from hopqa.llm.cache import CachedLLM, ResponseCache

if TYPE_CHECKING:  # pragma: no cover
    from hopqa.llm.llamacpp import EmbeddedConfig

__all__ = [
    "GENERATE", "LOGLIKELIHOOD", "LOGPROBS", "NATIVE_N", "CachedLLM", "Completion", "Generation",
    "GenerationRequest", "LLMBase", "LLMError", "LogLikelihood", "ResponseCache", "UnsupportedCapability",
    "load_llm",
]


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

    home_dir = default_home(home)
    kind, sep, rest = spec.partition(":")
    if not sep:
        kind, rest = "embedded", spec
    if kind == "embedded":
        from hopqa.llm.llamacpp import LlamaCppLLM

        model, cfg = parse_embedded(rest, **embedded_options)
        llm: LLMBase = LlamaCppLLM(model, home=home_dir, config=cfg)
    elif kind == "openai":
        from hopqa.llm.openai import OpenAICompatibleLLM, OpenAIConfig

        llm = OpenAICompatibleLLM(OpenAIConfig.parse(rest, api_key=api_key))
    else:
        raise ValueError(f"unknown LLM backend {kind!r} in {spec!r}: use embedded:NAME or openai:MODEL@URL")
    if cache:
        llm = CachedLLM(llm, ResponseCache(Path(cache_dir) if cache_dir else home_dir / "cache" / "llm"))
    return llm


def parse_embedded(rest: str, **overrides: object) -> tuple[str, "EmbeddedConfig"]:
    """Split ``NAME?key=value&...`` into the model name and an ``EmbeddedConfig``."""
    from dataclasses import fields
    from urllib.parse import parse_qsl

    from hopqa.llm.llamacpp import EmbeddedConfig

    model, _, query = rest.partition("?")
    cfg = EmbeddedConfig()
    types = {f.name: f.type for f in fields(cfg)}
    for key, value in [*parse_qsl(query), *overrides.items()]:
        if key not in types:
            raise ValueError(f"unknown embedded option {key!r} (known: {', '.join(types)})")
        if "bool" in str(types[key]):
            setattr(cfg, key, str(value).lower() in ("1", "true", "yes", "on"))
        else:
            setattr(cfg, key, int(value))  # type: ignore[arg-type]
    return model or "qwen2.5-1.5b", cfg
