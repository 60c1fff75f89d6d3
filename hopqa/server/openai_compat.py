"""OpenAI-compatible endpoints: any OpenAI client asks hopqa's methods as if they were models.

- ``GET /v1/models``: ``hopqa/METHOD`` for every method (``GET /v1/models/hopqa/METHOD``: one).
- ``POST /v1/chat/completions`` with ``model`` ``hopqa/METHOD`` (or ``METHOD``) answers the
  last user message (its text: a string, or the ``text`` parts of a list) with that method,
  on the service's model and retriever. Earlier messages are not read: each request is one
  question. The reply is a ``chat.completion`` whose message is the answer, with ``usage``
  from the answer's prompt and completion tokens (every LLM call of the method) and one field
  more, ``hopqa``: ``{method, error, hops, passages, usage, trace}`` of the answer. A method's
  own failure is an empty message with ``hopqa.error`` set. An optional request field
  ``hopqa`` (``extra_body={"hopqa": {...}}`` in the ``openai`` package) passes the method's
  ``options``, ``k`` and ``retriever`` as ``/v1/answer`` takes them; OpenAI's sampling fields
  (``temperature``, ``max_tokens``, ...) are ignored: a method sets its own.
- ``"stream": true``: ``chat.completion.chunk`` events (``data: {...}``): the role at once,
  the answer in one piece when the method is done (methods do not generate token by token),
  a last chunk with ``finish_reason: "stop"``, ``usage`` and ``hopqa``, then ``data: [DONE]``.
  A timeout after the stream began is a ``data: {"error": {...}}`` line (which the ``openai``
  package raises as an ``APIError``), then the end.

Errors take OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``: an unknown
model is a 404 (``model_not_found``), bad input a 400, a full queue a 429, a timeout a 504.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from sse_starlette.sse import EventSourceResponse

from hopqa.methods.base import METHODS, normalize_name
from hopqa.server.errors import failure
from hopqa.server.jobs import Done, Job, RequestError, json_text, prepare
from hopqa.server.schemas import ChatMessage, ChatRequest, HopqaChatOptions
from hopqa.server.service import JOB_HEADER, ClientGone, Service, ServiceError

#: The prefix of hopqa's model names (``hopqa/ircot``).
PREFIX = "hopqa/"
#: The fields of an answer carried in a completion's ``hopqa`` field.
EXTRA_FIELDS = ("method", "error", "hops", "passages", "usage", "trace")


def model_name(method: str) -> str:
    return PREFIX + method


def method_of(model: str) -> str:
    """The method a model name asks for (``hopqa/ircot``, ``ircot``); ``ServiceError`` 404 if none."""
    name = normalize_name(model.removeprefix(PREFIX))
    if name not in METHODS:
        known = ", ".join(model_name(m) for m in sorted(METHODS))
        raise ServiceError(404, f"The model {model!r} does not exist: hopqa's models are {known}",
                           code="model_not_found")
    return name


def question_of(messages: list[ChatMessage]) -> str:
    """The text of the last user message; ``ServiceError`` 400 when there is none."""
    for message in reversed(messages):
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(str(part.get("text", "")) for part in content if part.get("type") == "text")
        break
    raise ServiceError(400, "no user message with text: the last user message is the question", code="invalid_value")


def _card(method: str) -> dict[str, Any]:
    return {"id": model_name(method), "object": "model", "created": 0, "owned_by": "hopqa"}


def _usage(answer: dict[str, Any]) -> dict[str, int]:
    usage = answer.get("usage") or {}
    prompt, completion = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    evaluated = int(usage.get("prompt_tokens_evaluated", prompt))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": max(0, prompt - evaluated)}}  # served by the KV / prefix cache


def _extra(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: answer.get(key) for key in EXTRA_FIELDS}


def completion(answer: dict[str, Any], model: str, cid: str, created: int) -> dict[str, Any]:
    """The ``chat.completion`` of an answer (module docstring)."""
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.get("answer") or ""},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(answer), "hopqa": _extra(answer)}


def chunk(model: str, cid: str, created: int, delta: dict[str, Any], finish: str | None = None,
          **extra: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk``."""
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}


def router(service: Service) -> APIRouter:
    """The OpenAI-compatible routes on ``service`` (mounted under ``/v1``)."""
    api = APIRouter()

    @api.get("/models", summary="OpenAI-compatible: hopqa/METHOD for every method")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [_card(m) for m in sorted(METHODS)]}

    @api.get("/models/{model:path}", summary="OpenAI-compatible: one model")
    async def model(model: str) -> dict[str, Any]:
        return _card(method_of(model))

    @api.post("/chat/completions", response_model=None,
              summary="OpenAI-compatible: answer the last user message with the model's method")
    async def chat(body: ChatRequest, request: Request) -> Response:
        method = method_of(body.model)
        extras = body.hopqa or HopqaChatOptions()
        try:
            plan = prepare(service.settings, question_of(body.messages), method, extras.options, extras.k,
                           extras.retriever)
        except RequestError as exc:
            raise ServiceError(400, str(exc), code="invalid_value") from None
        name, cid, created = model_name(method), f"chatcmpl-{secrets.token_hex(12)}", int(time.time())
        job = service.start(plan)
        try:
            await service.built(job, request)
            if not body.stream:
                done = await service.finish(job, request)
                text = await run_in_threadpool(json_text, completion(done.data, name, cid, created))
                return Response(text, media_type="application/json", headers={JOB_HEADER: job.id})
        except ClientGone:
            return Response(status_code=499)  # nobody reads it: the job is cancelled
        except BaseException:
            job.abandon()
            raise
        return EventSourceResponse(_chunks(service, job, name, cid, created), ping=service.settings.ping_seconds,
                                   headers={JOB_HEADER: job.id})

    return api


async def _chunks(service: Service, job: Job, model: str, cid: str, created: int) -> AsyncIterator[dict[str, str]]:
    """The events of a streamed chat completion (module docstring)."""
    try:
        yield {"data": json_text(chunk(model, cid, created, {"role": "assistant", "content": ""}))}
        done: Done = await service.finish(job)
        yield {"data": json_text(chunk(model, cid, created, {"content": done.data.get("answer") or ""}))}
        last = chunk(model, cid, created, {}, "stop", usage=_usage(done.data), hopqa=_extra(done.data))
        yield {"data": await run_in_threadpool(json_text, last)}
        yield {"data": "[DONE]"}
    except ServiceError as exc:
        yield {"data": json_text({"error": {"message": exc.message, "type": "server_error" if exc.status != 504
                                            else "timeout_error", "param": None, "code": exc.code}})}
    except Exception as exc:  # noqa: BLE001 - the stream has begun: the client is told, the log has the rest
        detail = failure(exc, f"{job.id} chat stream: ")
        yield {"data": json_text({"error": {"message": f"{detail['kind']}: {detail['message']} (error id "
                                                       f"{detail['id']})", "type": "server_error", "param": None,
                                            "code": "internal_error"}})}
    finally:
        job.abandon()
