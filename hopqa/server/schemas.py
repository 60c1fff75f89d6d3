"""The shapes of the service's requests (checked by FastAPI) and of its answers (for /docs).

Requests: ``AnswerRequest`` (``POST /v1/answer``) and ``ChatRequest`` (``POST
/v1/chat/completions``, OpenAI's shape, with an optional ``hopqa`` field for the method's
options). Unknown fields of an ``AnswerRequest`` are refused (a typo is a 422, not a silent
default); a ``ChatRequest`` ignores OpenAI fields hopqa has no use for (``temperature``, ...).
Answers are documented, not checked (the routes return JSON they build themselves).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hopqa.config import SURROGATE

Kind = Literal["bm25", "dense", "hybrid"]
#: How deep ``broken_text`` looks into a request's JSON (the body's nesting is bounded before).
MAX_DEPTH = 64


def broken_text(value: Any, where: str = "body", depth: int = 0) -> str | None:
    """Where in a request's JSON a text (or a key) holds a lone surrogate (``"\\ud800"``: text
    that is not Unicode, which no model or file can take), else None."""
    if isinstance(value, str):
        return where if SURROGATE.search(value) else None
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and SURROGATE.search(key):
                return f"{where} (a key)"
            found = broken_text(item, f"{where}.{key}", depth + 1)
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = broken_text(item, f"{where}[{i}]", depth + 1)
            if found:
                return found
    return None


class _Checked(BaseModel):
    """A request refused (422) before any work when a text in it is not valid Unicode."""

    @model_validator(mode="before")
    @classmethod
    def _unicode(cls, data: Any) -> Any:
        where = broken_text(data)
        if where:
            raise ValueError(f"{where} holds a lone surrogate (\\ud800-\\udfff): not valid Unicode text")
        return data


class AnswerRequest(_Checked):
    """``POST /v1/answer``: a question for a method (``hopqa ask`` over HTTP)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="the question (whitespace collapsed; at most max_question_chars characters)")
    method: str | None = Field(None, description="a method of GET /v1/methods (default: the service's default)")
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="options of the method's config: JSON values, or text as with "
                                                "hopqa ask --set KEY=VALUE")
    k: int | None = Field(None, description="passages per retrieval (1..max_k; ignored by a method without k)")
    retriever: Kind | None = Field(None, description="bm25, dense or hybrid (default: the service's retriever)")
    stream: bool = Field(False, description="server-sent events: each trace step as it happens, then the answer")


class HopqaChatOptions(BaseModel):
    """The ``hopqa`` field of a chat request: what ``/v1/answer`` takes besides the question."""

    model_config = ConfigDict(extra="forbid")

    options: dict[str, Any] = Field(default_factory=dict)
    k: int | None = None
    retriever: Kind | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(_Checked):
    """``POST /v1/chat/completions``: OpenAI's request; the last user message is the question."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(description="hopqa/METHOD (or METHOD): see GET /v1/models")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    hopqa: HopqaChatOptions | None = Field(None, description="the method's options, k and retriever")


class AnswerOut(BaseModel):
    """An answer: ``hopqa ask --json`` (``Answer.to_dict()``)."""

    question: str
    answer: str
    method: str
    hops: list[dict[str, Any]]
    passages: list[dict[str, Any]]
    usage: dict[str, Any]
    error: str | None
    metrics: dict[str, float]
    trace: dict[str, Any] | None


class QueueOut(BaseModel):
    pending: int
    running: int
    max: int


class HealthOut(BaseModel):
    """``/healthz``: ``status`` for anyone; ``llm`` and ``queue`` only with the key (or without a key set)."""

    status: str
    llm: str | None = None
    queue: QueueOut | None = None


class ErrorOut(BaseModel):
    """An error of hopqa's own endpoints (FastAPI's request checks give a list of problems)."""

    detail: str | list[dict[str, Any]]
