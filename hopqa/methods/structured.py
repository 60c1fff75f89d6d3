"""Structured outputs for a method's structured steps: a JSON schema where the backend can
constrain to one, the paper's free-text prompt and a forgiving parser everywhere else.

Every method with structured steps (a plan, a confidence, an action, a sub-question) has the
option ``structured`` (``STRUCTURED_MODES``):

- ``auto`` (default): constrained JSON where the LLM backend declares ``STRUCTURED`` (the
  embedded llama.cpp backend, an OpenAI-compatible server unless ``?structured=0``), the
  free-text protocol elsewhere;
- ``on``: constrained JSON, an error naming the fix on a backend that cannot;
- ``off``: the papers' exact free-text protocol (to reproduce their numbers).

A step asks ``use_schema(llm, mode)`` once, sends its schema-constrained prompt or its free-text
prompt, and reads each completion with ``read``: the JSON (``loads_object``, which tolerates
a code fence, text around the object and a reply cut by ``max_tokens``) handed to the step's
``from_json``; when the reply holds no JSON object at all, the step's free-text parser on the
same text. Every
reading is recorded on the current trace step (``Step.record_parse``): ``direct`` when the
format asked for was read as it is, ``fallback`` when a forgiving rule recovered it (a repaired
JSON cut short, free text under a schema the server ignored, a secondary free-text rule),
``failed`` when the method took its documented default (also for a JSON object without a
usable value). The evaluation's parse rate counts them.

Schemas keep to what llama.cpp's grammar converter and OpenAI's strict mode both accept: an
object with every property ``required``, ``additionalProperties: false``, strings, numbers,
booleans, enums and arrays with ``maxItems`` (and ``minItems``) (bounded, so a small model cannot loop forever).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from hopqa import jsonl
from hopqa.llm.base import STRUCTURED, LLMBase
from hopqa.trace import PARSE_DIRECT, PARSE_FAILED, PARSE_FALLBACK, Step, current_step

T = TypeVar("T")

#: The values of every method's ``structured`` option (module docstring).
StructuredMode = Literal["auto", "on", "off"]
STRUCTURED_MODES: tuple[str, ...] = ("auto", "on", "off")


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """What a parser read: ``value`` (None when ``status`` is ``failed``), ``status``
    (``direct``, ``fallback`` or ``failed``) and ``how`` (the rule that read it)."""

    value: T | None
    status: str
    how: str = ""

    @property
    def ok(self) -> bool:
        return self.status != PARSE_FAILED


def direct(value: T, how: str = "") -> Parsed[T]:
    return Parsed(value, PARSE_DIRECT, how)


def fallback(value: T, how: str) -> Parsed[T]:
    return Parsed(value, PARSE_FALLBACK, how)


def failed(how: str = "nothing usable") -> Parsed[Any]:
    return Parsed(None, PARSE_FAILED, how)


def use_schema(llm: LLMBase, mode: str, who: str = "") -> bool:
    """Whether a step sends its JSON schema: ``off`` never, ``auto`` when ``llm`` declares
    ``STRUCTURED``, ``on`` always (``UnsupportedCapability`` naming the fix when it cannot)."""
    if mode == "off":
        return False
    if mode == "on":
        llm.require(STRUCTURED, who=(who or "structured=on") + " (set structured=auto or off to use free text)")
        return True
    return llm.supports(STRUCTURED)


def object_schema(properties: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A strict object schema: these properties, in this order (the order the model writes
    them in), all required, nothing else."""
    return {"type": "object", "properties": dict(properties), "required": list(properties),
            "additionalProperties": False}


def string_list(max_items: int, min_items: int = 0, **item: Any) -> dict[str, Any]:
    """An array of ``min_items`` to ``max_items`` strings (``item``: extra string constraints)."""
    return {"type": "array", "items": {"type": "string", **item}, **({"minItems": min_items} if min_items else {}),
            "maxItems": max_items}


def loads_object(text: str) -> tuple[dict[str, Any] | None, bool]:
    """``(object, repaired)``: the first JSON object in ``text`` — after a code fence or other
    text, or cut short (``max_tokens``) and closed here (``repaired=True``); ``(None, False)``
    when there is none. A raw control character in a string (a newline a model wrote inside a
    value, which JSON forbids) is read as written, not a reason to drop the object. Linear in
    the length of ``text``."""
    start = text.find("{")
    if start < 0:
        return None, False
    try:
        obj, _ = jsonl.raw_decode(text, start, strict=False)
        return (obj, False) if isinstance(obj, dict) else (None, False)
    except ValueError:  # JSONDecodeError (nested too deeply too), or a number too long for int()
        pass
    closed = _close_truncated(text[start:])
    if closed is None:
        return None, False
    try:
        obj = jsonl.loads(closed, strict=False)
    except ValueError:
        return None, False
    return (obj, True) if isinstance(obj, dict) else (None, False)


def _close_truncated(text: str) -> str | None:
    """``text`` (a JSON object cut short) with its open string, a dangling key or separator
    and its open brackets closed; None if the brackets do not nest."""
    stack: list[str] = []
    in_string = escaped = False
    last_safe = 0  # end of the last complete value or opening bracket, outside a string
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                last_safe = i + 1
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
            last_safe = i + 1
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            last_safe = i + 1
            if not stack:
                return text[: i + 1]
        elif not ch.isspace() and ch not in ",:":
            last_safe = i + 1
    if in_string:  # close the string (without a dangling escape)
        body = (text[:-1] if escaped else text) + '"'
    else:
        body = text[:last_safe]
    body = body.rstrip()
    while body and body[-1] in ",:":
        body = body[:-1].rstrip()
    if body.endswith('"') and stack and stack[-1] == "}":  # a key without its value: drop it
        key_start = body.rfind('"', 0, len(body) - 1)
        before = body[:key_start].rstrip()
        if before.endswith(("{", ",")):
            body = before.rstrip(",").rstrip()
    return body + "".join(reversed(stack))


def read(
    text: str,
    structured: bool,
    from_json: Callable[[dict[str, Any]], T | None],
    parse_text: Callable[[str], Parsed[T]],
    *,
    field: str,
    step: Step | None = None,
    schema_ignored: bool = False,
    record: bool = True,
) -> Parsed[T]:
    """Read one completion and record how it parsed on ``step`` (default: the current step).

    ``structured``: the completion answers a schema-constrained request; ``from_json`` turns
    its object into the value (None: unusable). A JSON object ``from_json`` cannot use is
    ``failed`` (the model kept to the format; there is nothing else to search: its text is no
    free text). A repaired object (cut short, closed) or a value read by ``parse_text`` from a
    reply with no JSON object at all (a server that ignored the schema) is a ``fallback``.
    Without a schema ``parse_text`` decides the status itself. ``record=False`` reads without
    recording (an output the parse rate does not count)."""
    if structured:
        obj, repaired = loads_object(text)
        copied: list[str] = []
        if obj is not None:
            obj, copied = without_examples(obj)
        value = from_json(obj) if obj is not None else None
        if value is None and copied:
            parsed: Parsed[T] = failed(f"the reply's example copied ({', '.join(copied)})")
        elif value is not None:
            if schema_ignored:
                parsed = fallback(value, "JSON in a reply the server did not constrain")
            elif repaired:
                parsed = fallback(value, "JSON cut short, closed")
            else:
                parsed = direct(value, "json")
        elif obj is not None:
            parsed = failed("JSON cut short without a usable value" if repaired else "JSON without a usable value")
        else:
            free = parse_text(text)
            why = "schema ignored by the server" if schema_ignored else "no JSON object"
            parsed = fallback(free.value, f"{why}; free text: {free.how}") if free.ok else failed(
                f"{why}; free text: {free.how}")
    else:
        parsed = parse_text(text)
    target = step if step is not None else current_step()
    if record and target is not None:
        target.record_parse(field, parsed.status, parsed.how, structured=structured)
    return parsed


def json_reply(example: Mapping[str, Any]) -> str:
    """The instruction that closes a schema-constrained prompt: the reply's shape, shown by an
    example object (field meanings are in the method's prompt). Its strings are remembered as
    examples (``without_examples``)."""
    for text in _strings(example):
        key = _example_key(text)
        if key:
            _EXAMPLES.add(key)
    return "Reply with one JSON object of this form: " + json.dumps(dict(example), ensure_ascii=False)


#: Every string of a ``json_reply`` example, as ``_example_key`` writes it.
_EXAMPLES: set[str] = set()
#: A value this many words long or longer that begins an example is the example copied, cut short;
#: a value that begins with a whole bracketed example this long ("[the first subquestion]") and
#: runs on is the example copied, then more.
EXAMPLE_PREFIX_WORDS = 3


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _example_key(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(" .,")


def is_example(value: Any) -> bool:
    """Whether ``value`` is a string of a reply example (``json_reply``) copied into a reply:
    the same words (case, spacing and a final stop aside); or, at ``EXAMPLE_PREFIX_WORDS``
    words or more, the beginning of one ("the short final answer when no follow up is needed"
    of "the short final answer when no follow up is needed, else empty"); or a whole bracketed
    example of that many words or more, then anything ("[the first subquestion] }} The first
    subquestion is", which SmolLM2-135M wrote as GenSco's first sub-question on 19 of 20
    MuSiQue questions: a bracketed placeholder never begins a real value, whereas "the short
    answer is Paris" may be one)."""
    if not isinstance(value, str):
        return False
    key = _example_key(value)
    if not key:
        return False
    if key in _EXAMPLES:
        return True
    # a snapshot (``tuple`` copies the set in one step under the GIL): a method building its
    # first prompt on another worker thread may add to the set meanwhile
    examples = tuple(_EXAMPLES)
    if len(key.split()) >= EXAMPLE_PREFIX_WORDS and any(e.startswith(key) for e in examples):
        return True
    return any(_begins_with_placeholder(key, e) for e in examples)


def _begins_with_placeholder(key: str, example: str) -> bool:
    """Whether ``key`` begins with ``example``, a bracketed example of ``EXAMPLE_PREFIX_WORDS``
    words or more, and runs on."""
    return (example.startswith("[") and example.endswith("]") and len(example.split()) >= EXAMPLE_PREFIX_WORDS
            and len(key) > len(example) and key.startswith(example))


def without_examples(obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``obj`` without the values a small model copied from the reply's example (``is_example``:
    SmolLM2-135M answered Self-Ask's final answer with "the short final answer"), a list
    without such items; and the keys of what was dropped. A copied example is never an answer:
    the step's ``from_json`` sees the field missing."""
    out: dict[str, Any] = {}
    copied: list[str] = []
    for key, value in obj.items():
        if isinstance(value, list):
            kept = [v for v in value if not is_example(v)]
            if len(kept) < len(value):
                copied.append(key)
            out[key] = kept
        elif is_example(value):
            copied.append(key)
        else:
            out[key] = value
    return out, copied
